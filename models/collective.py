"""Collective schedules as a time-expanded MILP: which chunk crosses which link in which step, with
store-and-forward and copies at forwarding servers, the finish step minimised and proven
(docs/guide/collectives.md).

AllGather, broadcast and all-to-all are dissemination problems (each chunk starts at one server and
must reach a set of servers) and are solved as such by :func:`build_dissemination_model`.
ReduceScatter on G is AllGather on G's reverse run backwards, with every send carrying a partial sum
(:func:`topoopt_ilp.heuristic.collective.reduction_from_gather`): the two have the same optimal
number of steps, so the model of one proves the other. AllReduce is ReduceScatter followed by
AllGather; its status speaks for that composition only (each phase optimal), and its gap is measured
against bounds valid for every AllReduce schedule.

Public entry point: :func:`solve_collective` -> :class:`CollectiveResult`. Every schedule it returns
is checked by :func:`topoopt_ilp.evaluation.collective_check.check_schedule`, which shares no code
with this module.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from topoopt_ilp.core.collective import REDUCTIONS, Collective, CollectiveSchedule, LinkModel, Send
from topoopt_ilp.core.solution import Topology
from topoopt_ilp.errors import InputError
from topoopt_ilp.evaluation.collective_bounds import CollectiveBound, collective_lower_bound
from topoopt_ilp.evaluation.collective_check import check_schedule
from topoopt_ilp.heuristic.collective import (
    allreduce_from_phases,
    chunk_demand,
    find_ring,
    finish_step,
    greedy_schedule,
    hop_distances,
    reduction_from_gather,
    retimed,
    ring_schedule,
    step_distances,
    trimmed,
)
from topoopt_ilp.models.common import ExactOptions, check_backend, run_model, solution_status
from topoopt_ilp.solvers import Capability, LinearModel, ModelBuilder, VarBlock, get_backend

__all__ = [
    "COLLECTIVE_METHODS",
    "DisseminationModel",
    "CollectiveResult",
    "build_dissemination_model",
    "chain_rows",
    "finish_rows",
    "held_rows",
    "receive_rows",
    "floor_steps",
    "solve_collective",
]

COLLECTIVE_METHODS = ("exact", "heuristic", "ring")
#: The share of the time limit by which the solves end: the rest is for the check and the bound.
FINAL_SHARE = 0.95


@dataclass(frozen=True, eq=False)
class DisseminationModel:
    """The built MILP and where its columns are: ``x`` columns in the order of ``(x_chunk, x_arc,
    x_step)``; ``holds[c, v, t]`` the column of h[c, v, t] (-1: none, the value is fixed: 1 at the
    origin, else 0); ``used`` the y[1..T] columns."""

    model: LinearModel
    x: VarBlock
    x_chunk: np.ndarray
    x_arc: np.ndarray
    x_step: np.ndarray
    holds: np.ndarray
    used: VarBlock
    tails: np.ndarray
    heads: np.ndarray
    x_arrive: np.ndarray | None = None


@dataclass(frozen=True)
class CollectiveResult:
    """One scheduled collective. ``status``: optimal (proven; for AllReduce: each of its two phases),
    feasible (a schedule, not proven), or the solver's status without a schedule. ``steps`` and
    ``finish_s``: the schedule's; ``bound_steps``: the better of the model's own bound and the
    independent :class:`~topoopt_ilp.evaluation.collective_bounds.CollectiveBound` (``bound``),
    ``gap`` = (steps - bound_steps) / steps. ``algbw_Bps``: bytes / finish time (NCCL's algorithm
    bandwidth). ``solve_s``: wall time of the whole call."""

    method: str
    status: str
    schedule: CollectiveSchedule | None
    steps: int | None
    step_s: float
    finish_s: float | None
    algbw_Bps: float | None
    bound: CollectiveBound
    model_bound_steps: int | None
    bound_steps: int
    gap: float | None
    solve_s: float
    backend: str | None = None

    @classmethod
    def scheduled(
        cls,
        collective: Collective,
        *,
        method: str,
        status: str,
        schedule: CollectiveSchedule,
        steps: int,
        bound: CollectiveBound,
        model_bound_steps: int | None,
        bound_steps: int,
        started: float,
        backend: str | None,
    ) -> CollectiveResult:
        """A result with a schedule: its finish time, algorithm bandwidth and gap follow from the
        steps, the schedule's step length and the bound."""
        finish = steps * schedule.step_s
        return cls(
            method=method,
            status=status,
            schedule=schedule,
            steps=steps,
            step_s=schedule.step_s,
            finish_s=finish,
            algbw_Bps=collective.bytes / finish if finish > 0 else None,
            bound=bound,
            model_bound_steps=model_bound_steps,
            bound_steps=bound_steps,
            gap=(steps - bound_steps) / steps if steps else 0.0,
            solve_s=time.perf_counter() - started,
            backend=backend,
        )


# -- constraint families -----------------------------------------------------------------------------


def _capacity(b: ModelBuilder, dm: dict, cap: np.ndarray, T: int) -> None:
    """a link carries at most its parallel links' count of chunks per step, and none in an unused step:
    sum_c sum_{t' = t - k_a + 1 .. t} x[c, a, t'] <= m_a y[t]   (a send occupies its k_a steps)"""
    span = dm["x_arrive"] - dm["x_step"] + 1
    column = np.repeat(np.arange(span.size), span)
    offset = np.arange(column.size) - np.repeat(np.cumsum(span) - span, span)
    rows = dm["x_arc"][column] * T + dm["x_step"][column] - 1 + offset
    y_rows = np.arange(cap.size * T)
    b.add_constraints(
        np.concatenate([rows, y_rows]),
        np.concatenate([dm["x"][column], dm["y"][y_rows % T]]),
        np.concatenate([np.ones(rows.size), -np.repeat(cap.astype(float), T)]),
        ub=0.0,
        count=cap.size * T,
        name="capacity",
    )


def held_rows(b: ModelBuilder, dm: dict, origin: np.ndarray, tails: np.ndarray) -> None:
    """store-and-forward: a server sends only a chunk it holds at the start of the step:
    x[c, (u, v), t] <= h[c, u, t - 1]   (the origin always holds its chunk: no row)"""
    c, a, t = dm["x_chunk"], dm["x_arc"], dm["x_step"]
    relay = tails[a] != origin[c]
    held = dm["holds"][c[relay], tails[a[relay]], t[relay] - 1]
    k = np.arange(held.size)
    b.add_constraints(
        np.concatenate([k, k]),
        np.concatenate([dm["x"][relay], held]),
        np.r_[np.ones(k.size), -np.ones(k.size)],
        ub=0.0,
        count=k.size,
        name="held",
    )


def receive_rows(b: ModelBuilder, dm: dict, heads: np.ndarray) -> None:
    """a server holds a chunk only when it held it before or receives it in the step:
    h[c, v, t] <= h[c, v, t - 1] + sum_{a into v} x[c, a, t - k_a + 1]   (``x_arrive``: t, when given)"""
    holds = dm["holds"]
    hc, hv, ht = np.nonzero(holds >= 0)
    own = holds[hc, hv, ht]
    start = own.min() if own.size else 0
    before = holds[hc, hv, ht - 1]
    had = before >= 0
    c, a, t = dm["x_chunk"], dm["x_arc"], dm["x_step"]
    into = holds[c, heads[a], dm.get("x_arrive", t)] - start
    b.add_constraints(
        np.concatenate([own - start, own[had] - start, into]),
        np.concatenate([own, before[had], dm["x"]]),
        np.concatenate([np.ones(own.size), -np.ones(int(had.sum())), -np.ones(into.size)]),
        ub=0.0,
        count=own.size,
        name="receive",
    )


def finish_rows(b: ModelBuilder, dm: dict, sinks: np.ndarray, T: int) -> None:
    """a step is used while a server still misses a chunk it needs: h[c, v, t] + y[t + 1] >= 1 for
    every needed (c, v) and t = 0..T-1, and h[c, v, T] >= 1 (a row without its column, where the
    chunk cannot arrive within T steps, makes the model infeasible, as it should be)"""
    sc, sv = np.nonzero(sinks)
    s = np.repeat(np.arange(sc.size), T + 1)
    t = np.tile(np.arange(T + 1), sc.size)
    rows = s * (T + 1) + t
    held = dm["holds"][sc[s], sv[s], t]
    has, early = held >= 0, t < T
    b.add_constraints(
        np.concatenate([rows[early], rows[has]]),
        np.concatenate([dm["y"][t[early]], held[has]]),
        1.0,
        lb=1.0,
        count=sc.size * (T + 1),
        name="finish",
    )


def chain_rows(b: ModelBuilder, dm: dict, T: int) -> None:
    """steps are used from the first on: y[t] >= y[t + 1]"""
    k = np.arange(T - 1)
    b.add_constraints(
        np.r_[k, k],
        np.r_[dm["y"][:-1], dm["y"][1:]],
        np.r_[np.ones(k.size), -np.ones(k.size)],
        lb=0.0,
        count=k.size,
        name="chain",
    )


# Data
#   servers V, arcs a = (u, v) with m_a parallel links (the topology's matrix; an undirected link is
#   two arcs); chunks c with origin o(c) and the servers S(c) that must hold c at the end; steps
#   t = 1..T, T the horizon (the floor L for a first probe, then the greedy schedule's finish step);
#   dist: hop distances.
# Variables
#   x[c, a, t] in {0, 1}   chunk c crosses arc a in step t (only where dist(o(c), u) <= t - 1 and a
#                          server of S(c) is within T - t hops of v: no other send can matter)
#   h[c, v, t] in {0, 1}   v holds c at the end of step t (h[o(c), ., .] = 1 and h = 0 before c can
#                          arrive are constants; continuous in [0, 1] where the back-end allows, since
#                          integral x makes every h that a send or a demand relies on integral)
#   y[t] in {0, 1}         step t is used
# Constraints
#   capacity  sum_c sum_{t' = t-k_a+1..t} x[c, a, t'] <= m_a y[t]   every arc a, step t
#   held      x[c, (u, v), t] <= h[c, u, t - 1]                    store-and-forward; copies are free:
#                                                                  one held chunk may leave on every arc
#   receive   h[c, v, t] <= h[c, v, t - 1] + sum_{a into v} x[c, a, t - k_a + 1]
#   finish    h[c, v, t] + y[t + 1] >= 1   for v in S(c), t < T;   h[c, v, T] >= 1
#   chain     y[t] >= y[t + 1];  y[t] = 1 for t <= L (L: the model's own floor, below)
# Objective
#   minimise sum_t y[t], the finish step; the finish time is that times alpha + chunk bytes / bandwidth.
# Floor L: the largest hop distance from an origin to a server that needs its chunk; for every server
#   the chunks it needs over the links into it; all receipts (a chunk with one sink: its hop distance)
#   over all links; each rounded up.
# Heterogeneous links (k_a > 1 on some arc; uniform links: k_a = 1 and the rows above are the plain
#   ones): a chunk takes t_a = alpha_a + chunk bytes / B_a on arc a, the step is tau = min_a t_a, and
#   k_a = ceil(t_a / tau) steps (topoopt_ilp.core.collective). x[c, a, t] is the send that starts in
#   step t, occupies one of the m_a links through step t + k_a - 1 and arrives at its end (columns
#   only where t + k_a - 1 <= T). Distances are then in steps (the shortest path with arc lengths
#   k_a), and the floor's counts become the least T with sum_a m_a floor(T / k_a) >= the chunks to
#   carry. The model is exact for this discretisation; a schedule's real time is at most its steps x
#   tau, since each send ends within its k_a steps.
def build_dissemination_model(
    matrix: np.ndarray,
    origin: np.ndarray,
    sinks: np.ndarray,
    horizon: int,
    *,
    floor: int = 0,
    integral_holds: bool = True,
    delay: np.ndarray | None = None,
) -> DisseminationModel:
    """The MILP of the comment block above for ``horizon`` steps (``horizon`` >= 1; infeasible when no
    schedule ends within it). ``floor``: a number of steps already proven necessary (L is the larger
    of it and the model's own floor). ``delay[u, v]``: the steps k_a a chunk takes on u -> v (None:
    one on every arc)."""
    m = np.asarray(matrix)
    n, C, T = m.shape[0], origin.size, int(horizon)
    tails, heads = np.nonzero(m > 0)
    cap = m[tails, heads]
    span = np.ones(tails.size, dtype=np.int64) if delay is None else np.asarray(delay)[tails, heads]
    dist = step_distances(m, delay)
    d_origin = dist[origin]  # (C, n)
    near_sink = np.where(sinks[:, None, :], dist[None, :, :], np.inf).min(axis=2)  # (C, n)
    steps = np.arange(1, T + 1)
    c_, a_, t_ = (g.ravel() for g in np.meshgrid(np.arange(C), np.arange(tails.size), steps, indexing="ij"))
    ends = t_ + span[a_] - 1
    send_ok = (d_origin[c_, tails[a_]] <= t_ - 1) & (near_sink[c_, heads[a_]] <= T - ends) & (heads[a_] != origin[c_])
    xc, xa, xt, xe = c_[send_ok], a_[send_ok], t_[send_ok], ends[send_ok]

    b = ModelBuilder(name=f"collective_n{n}_c{C}_T{T}")
    x = b.add_variables(xc.size, ub=1.0, kind="binary", name="x")
    hc, hv, ht = (g.ravel() for g in np.meshgrid(np.arange(C), np.arange(n), steps, indexing="ij"))
    hold_ok = (hv != origin[hc]) & (d_origin[hc, hv] <= ht) & (near_sink[hc, hv] <= T - ht)
    hc, hv, ht = hc[hold_ok], hv[hold_ok], ht[hold_ok]
    h = b.add_variables(hc.size, ub=1.0, kind="binary" if integral_holds else "continuous", name="h")
    holds = np.full((C, n, T + 1), -1, dtype=np.int64)
    holds[hc, hv, ht] = h.index
    floor = max(int(floor), floor_steps(m, origin, sinks, delay))
    y = b.add_variables(T, lb=(steps <= floor).astype(float), ub=1.0, kind="binary", name="y")
    dm = {"x": x.index, "x_chunk": xc, "x_arc": xa, "x_step": xt, "x_arrive": xe, "holds": holds, "y": y.index}
    _capacity(b, dm, cap, T)
    held_rows(b, dm, origin, tails)
    receive_rows(b, dm, heads)
    finish_rows(b, dm, sinks, T)
    chain_rows(b, dm, T)
    b.set_objective(y.index, 1.0)
    return DisseminationModel(b.build(), x, xc, xa, xt, holds, y, tails, heads, xe)


def floor_steps(matrix: np.ndarray, origin: np.ndarray, sinks: np.ndarray, delay: np.ndarray | None = None) -> int:
    """The model's own floor L (comment block): farthest needed hop, needed chunks over each server's
    in-links, and all receipts over all links (``delay``: steps per arc, None: one)."""
    m = np.asarray(matrix)
    dist = hop_distances(m)
    sc, sv = np.nonzero(sinks)
    if sc.size == 0:
        return 0
    need = sinks.sum(axis=0)
    # a chunk with one sink makes at least dist(origin, sink) hops; with more sinks, one receipt each
    per_chunk = sinks.sum(axis=1).astype(float)
    single = np.flatnonzero(per_chunk == 1)
    per_chunk[single] = dist[origin[single], sinks[single].argmax(axis=1)]
    if delay is None:
        hops = int(dist[origin[sc], sv].max())
        in_links = m.sum(axis=0)
        busy = int(np.ceil(need[need > 0] / in_links[need > 0]).max())
        volume = int(np.ceil(per_chunk.sum() / m.sum()))
        return max(hops, busy, volume)
    hops = int(step_distances(m, delay)[origin[sc], sv].max())
    k = np.asarray(delay)
    busy = max(_steps_to_carry(int(need[v]), m[:, v], k[:, v]) for v in np.flatnonzero(need))
    volume = _steps_to_carry(int(per_chunk.sum()), m.ravel(), k.ravel())
    return max(hops, busy, volume)


def _steps_to_carry(count: int, links: np.ndarray, spans: np.ndarray) -> int:
    """The least T with sum_a links_a floor(T / spans_a) >= count (arcs with links only)."""
    used = links > 0
    links, spans = links[used].astype(np.int64), spans[used].astype(np.int64)
    T = int(np.ceil(count / (links / spans).sum())) if count else 0
    while (links * (T // spans)).sum() < count:
        T += 1
    return T


def _warm_start(
    dmodel: DisseminationModel, sends: list[Send], steps: int, n_arcs_index: np.ndarray
) -> np.ndarray | None:
    """The model's columns for a (trimmed) schedule that ends in ``steps`` <= T, or None when a send has no column."""
    model = dmodel.model
    start = np.zeros(model.num_vars)
    lookup = {
        (int(c), int(a), int(t)): k for k, (c, a, t) in enumerate(zip(dmodel.x_chunk, dmodel.x_arc, dmodel.x_step))
    }
    received: dict[tuple[int, int], int] = {}
    ends = dmodel.x_step if dmodel.x_arrive is None else dmodel.x_arrive
    for s in sends:
        k = lookup.get((s.chunk, int(n_arcs_index[s.src, s.dst]), s.step))
        if k is None:
            return None
        start[dmodel.x.start + k] = 1.0
        end = int(ends[k])
        received[(s.chunk, s.dst)] = min(end, received.get((s.chunk, s.dst), end))
    for (c, v), t in received.items():
        cols = dmodel.holds[c, v, t:]
        start[cols[cols >= 0]] = 1.0
    start[dmodel.used.index[:steps]] = 1.0
    return start


@dataclass(frozen=True)
class _Phase:
    """One solved dissemination problem: its sends (trimmed), finish step, status, model bound."""

    sends: list[Send]
    steps: int
    status: str
    bound_steps: int | None
    backend: str | None


def _check_connected(matrix: np.ndarray, origin: np.ndarray, sinks: np.ndarray, kind: str) -> None:
    dist = hop_distances(matrix)
    sc, sv = np.nonzero(sinks)
    far = ~np.isfinite(dist[origin[sc], sv])
    if far.any():
        a, z = int(origin[sc[far][0]]), int(sv[far][0])
        if kind in REDUCTIONS:  # the problem solved is the reverse one
            a, z = z, a
        raise InputError(
            f"the topology does not connect server {a} to server {z}: no path {a} -> {z}", field="collective.servers"
        )


def _greedy_phase(matrix: np.ndarray, origin: np.ndarray, sinks: np.ndarray, delay: np.ndarray | None) -> _Phase:
    sends = trimmed(greedy_schedule(matrix, origin, sinks, delay), origin, sinks, delay)
    if delay is not None:  # the greedy schedule of unit steps, retimed, when it ends sooner
        unit = trimmed(retimed(greedy_schedule(matrix, origin, sinks), matrix, origin, delay), origin, sinks, delay)
        sends = min((sends, unit), key=lambda s: finish_step(s, delay))
    return _Phase(sends, finish_step(sends, delay), "feasible", None, None)


def _exact_phase(
    matrix: np.ndarray,
    origin: np.ndarray,
    sinks: np.ndarray,
    options: ExactOptions,
    deadline: float | None,
    delay: np.ndarray | None = None,
) -> _Phase:
    """The exact schedule of one dissemination problem, in two solves. First a probe: is there a
    schedule in L steps, L the model's floor? One is optimal; a proof that there is none raises L by
    one. Then, unless that settled it, the MILP over the greedy schedule's horizon, started from it
    (a horizon as short as the floor is a far smaller search than the greedy's: 16 servers of degree
    4 with 4 chunks each, docs/guide/collectives.md). Falls back to the greedy schedule (``feasible``)
    when the solver returns nothing better within the limit. ``deadline``: a ``time.perf_counter()``
    time by which both solves end (the probe takes at most half of what is left), None: no limit.
    ``delay``: steps per arc (None: one)."""
    greedy = _greedy_phase(matrix, origin, sinks, delay)
    if greedy.steps == 0:
        return _Phase([], 0, "optimal", 0, options.backend)
    integral = not get_backend(options.backend).supports(Capability.CONTINUOUS_VARIABLES)
    floor = floor_steps(matrix, origin, sinks, delay)
    if floor < greedy.steps:
        half = None if deadline is None else (time.perf_counter() + deadline) / 2
        probe = _solve_horizon(matrix, origin, sinks, floor, floor, None, options, half, integral, delay)
        if probe.sends is not None:  # every schedule in the floor's steps is optimal
            return _Phase(probe.sends, probe.steps, "optimal", probe.steps, probe.backend)
        if probe.status == "infeasible":
            floor += 1
    if floor >= greedy.steps:
        return _Phase(greedy.sends, greedy.steps, "optimal", greedy.steps, options.backend)
    full = _solve_horizon(matrix, origin, sinks, greedy.steps, floor, greedy, options, deadline, integral, delay)
    if full.sends is None:
        return _Phase(greedy.sends, greedy.steps, "feasible", max(floor, full.bound_steps or 0), full.backend)
    bound = full.steps if full.status == "optimal" else max(floor, full.bound_steps or 0)
    return _Phase(full.sends, full.steps, full.status, bound, full.backend)


@dataclass(frozen=True)
class _Horizon:
    """One solve of the model: its status, and its schedule (None without one)."""

    status: str
    sends: list[Send] | None
    steps: int
    bound_steps: int | None
    backend: str


def _solve_horizon(
    matrix: np.ndarray,
    origin: np.ndarray,
    sinks: np.ndarray,
    horizon: int,
    floor: int,
    start_from: _Phase | None,
    options: ExactOptions,
    deadline: float | None,
    integral: bool,
    delay: np.ndarray | None = None,
) -> _Horizon:
    """Build and solve the model for ``horizon`` steps, the solver stopping at ``deadline`` (what is
    left after the build; at least a millisecond)."""
    dm = build_dissemination_model(matrix, origin, sinks, horizon, floor=floor, integral_holds=integral, delay=delay)
    start = None
    if start_from is not None and options.warm_start not in (None, "none"):
        n = np.asarray(matrix).shape[0]
        arc_index = np.full((n, n), -1, dtype=np.int64)
        arc_index[dm.tails, dm.heads] = np.arange(dm.tails.size)
        start = _warm_start(dm, start_from.sends, start_from.steps, arc_index)
    limit = None if deadline is None else max(1e-3, deadline - time.perf_counter())
    res = run_model(dm.model, _with_limit(options, limit), warm_start=start)
    left = None if deadline is None else deadline - time.perf_counter()
    if start is not None and solution_status(res) == "feasible" and (left is None or left > 0.1 * (limit or 0)):
        # Ended before its limit without a proof: HiGHS can hand back the start itself while its
        # presolved problem found a better schedule (the solver layer then says feasible). Once more
        # without the start, keeping the better answer.
        again = run_model(dm.model, _with_limit(options, None if left is None else max(1e-3, left)))
        if again.values is not None and (again.objective < res.objective or solution_status(again) == "optimal"):
            res = again
    status = solution_status(res)
    bound = None if res.bound is None else int(np.ceil(res.bound - 1e-6))
    if res.values is None or status not in ("optimal", "feasible"):
        return _Horizon(status, None, horizon, bound, res.backend)
    steps = int(round(res.values[dm.used.index].sum()))
    chosen = np.flatnonzero(res.values[dm.x.index] > 0.5)
    sends = [
        Send(int(dm.x_step[k]), int(dm.x_chunk[k]), int(dm.tails[dm.x_arc[k]]), int(dm.heads[dm.x_arc[k]]))
        for k in chosen
        if dm.x_step[k] <= steps
    ]
    return _Horizon(status, trimmed(sends, origin, sinks, delay), steps, bound, res.backend)


def _with_limit(options: ExactOptions, limit: float | None) -> ExactOptions:
    return replace(options, time_limit_s=limit)


def _ring_phase(
    matrix: np.ndarray, collective: Collective, jumps, origin: np.ndarray, sinks: np.ndarray, delay: np.ndarray | None
) -> _Phase:
    ring = find_ring(matrix, collective.servers, jumps)
    if ring is None:
        raise InputError(
            "the topology has no ring through every server (none found), so no ring schedule", field="method"
        )
    gather = Collective("allgather", collective.servers, collective.bytes, collective.chunks)
    sends = trimmed(ring_schedule(matrix, gather, ring), origin, sinks)
    if delay is not None:  # the ring's order, each send as early as its slower links allow
        sends = trimmed(retimed(sends, matrix, origin, delay), origin, sinks, delay)
    return _Phase(sends, finish_step(sends, delay), "feasible", None, None)


def solve_collective(
    topology: Topology,
    collective: Collective,
    link: LinkModel,
    *,
    method: str = "exact",
    options: ExactOptions | None = None,
) -> CollectiveResult:
    """Schedule ``collective`` on ``topology`` under ``link``: ``method`` exact (the MILP, HiGHS by
    default), heuristic (the greedy list schedule) or ring (the ring schedule on a ring through every
    server; AllGather, ReduceScatter and AllReduce). Raises :class:`InputError` for servers outside the
    topology or not connected, a ring method without a ring, and a time limit of 0."""
    started = time.perf_counter()
    if not isinstance(topology, Topology):
        raise InputError(f"expected a Topology, got {type(topology).__name__}", field="topology")
    if method not in COLLECTIVE_METHODS:
        raise InputError(f"method must be one of {', '.join(COLLECTIVE_METHODS)}; got {method!r}", field="method")
    n = topology.n
    outside = [s for s in collective.servers if s >= n]
    if outside:
        raise InputError(f"server {outside[0]} is not in the topology (servers 0..{n - 1})", field="collective.servers")
    if method == "ring" and collective.kind not in ("allgather", "reducescatter", "allreduce"):
        raise InputError(
            f"the ring schedule is for allgather, reducescatter and allreduce, not {collective.kind}", field="method"
        )
    options = options or ExactOptions()
    if method == "exact":
        if options.time_limit_s == 0:
            raise InputError("a time limit of 0 leaves the solver no time", field="time_limit_s")
        check_backend(options, continuous=False)
    matrix = np.asarray(topology.matrix)
    # the dissemination problem of each phase: (matrix, origin, sinks); a reduction is gathered on the reverse
    gather = Collective("allgather", collective.servers, collective.bytes, collective.chunks)
    origin, sinks = chunk_demand(collective if collective.kind in ("broadcast", "alltoall") else gather, n)
    phases = {"reducescatter": ["reverse"], "allreduce": ["reverse", "forward"]}.get(collective.kind, ["forward"])
    step_s, spans = link.timing(matrix, collective.chunk_bytes)
    # steps per arc of each phase's graph; None where every arc takes one step (the plain model)
    delay = {"forward": None if (spans <= 1).all() else spans}
    delay["reverse"] = None if delay["forward"] is None else spans.T
    for phase in phases:
        _check_connected(
            matrix.T if phase == "reverse" else matrix,
            origin,
            sinks,
            "reducescatter" if phase == "reverse" else collective.kind,
        )
    solved: dict[str, _Phase] = {}
    for phase in phases:
        m = matrix.T if phase == "reverse" else matrix
        symmetric = np.array_equal(matrix, matrix.T) and np.array_equal(spans, spans.T)
        if phase == "forward" and "reverse" in solved and symmetric:
            solved[phase] = solved["reverse"]  # a symmetric topology: the same AllGather
        elif method == "heuristic":
            solved[phase] = _greedy_phase(m, origin, sinks, delay[phase])
        elif method == "ring":
            solved[phase] = _ring_phase(m, collective, topology.jumps, origin, sinks, delay[phase])
        else:
            deadline = None
            if options.time_limit_s is not None:  # the first of two phases takes half; the check gets the last 5 %
                share = 0.5 if len(phases) > 1 and not solved else FINAL_SHARE
                deadline = started + share * options.time_limit_s
            solved[phase] = _exact_phase(m, origin, sinks, options, deadline, delay[phase])
    sends, steps = _compose(collective.kind, solved, origin, sinks, delay["reverse"])
    schedule = CollectiveSchedule(tuple(sends), step_s, steps)
    report = check_schedule(topology, collective, link, schedule)
    if report.violations:  # an internal error: never hand out a schedule the checker refuses
        raise AssertionError(f"the {method} schedule fails the independent check: {report.violations[0]}")
    bound = collective_lower_bound(topology, collective, link)
    statuses = {p.status for p in solved.values()}
    status = "optimal" if statuses == {"optimal"} else "feasible"
    model_bound = None
    if method == "exact" and all(p.bound_steps is not None for p in solved.values()):
        # an AllReduce schedule is a ReduceScatter schedule too, so the reverse phase's bound holds for it
        model_bound = solved["reverse" if collective.kind in REDUCTIONS else "forward"].bound_steps
    best = max(bound.steps, model_bound or 0)
    if method == "exact" and steps == best:  # a bound met is a proof (the heuristics state gaps, never proofs)
        status = "optimal"
    backends = {p.backend for p in solved.values() if p.backend}
    return CollectiveResult.scheduled(
        collective,
        method=method,
        status=status,
        schedule=schedule,
        steps=steps,
        bound=bound,
        model_bound_steps=model_bound,
        bound_steps=best,
        started=started,
        backend=backends.pop() if backends else None,
    )


def _compose(
    kind: str, solved: dict[str, _Phase], origin: np.ndarray, sinks: np.ndarray, reverse_delay: np.ndarray | None
) -> tuple[list[Send], int]:
    """The collective's sends and finish step from its solved phases (``reverse_delay``: steps per arc
    of the reverse graph, None: one)."""
    if kind == "reducescatter":
        p = solved["reverse"]
        return reduction_from_gather(p.sends, p.steps, origin, sinks, reverse_delay), p.steps
    if kind == "allreduce":
        rs, ag = solved["reverse"], solved["forward"]
        return allreduce_from_phases(
            reduction_from_gather(rs.sends, rs.steps, origin, sinks, reverse_delay), rs.steps, ag.sends
        ), rs.steps + ag.steps
    p = solved["forward"]
    return p.sends, p.steps
