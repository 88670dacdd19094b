"""Topology and collective schedule chosen together: the degree-d (multi)graph on which an AllGather
(ReduceScatter, AllReduce) finishes in the fewest steps, with its schedule, in one time-expanded
MILP (docs/guide/collectives.md, "Topology and schedule together").

The schedule part is the dissemination model of :mod:`topoopt_ilp.models.collective` with the link
counts turned into integer variables: a link u -> v carries at most x[u, v] chunks per step, and
the x obey the cluster's degree. The model is solved as a sequence of feasibility probes, one per
horizon T, from a floor that holds on every topology of the class upward; the first horizon with a
schedule is the optimum once every shorter one is proven infeasible. Known designs (complete graph,
hypercube, the best circulant, TopoOpt's circulant, the catalogue's best regular graph), each
scheduled by :func:`~topoopt_ilp.models.collective.solve_collective`, give the upper end: no probe
at or above their best finish is needed, and for larger clusters they are the answer
(:func:`schedule_designs`).

Public entry points: :func:`build_joint_model`, :func:`solve_joint_collective` ->
:class:`JointCollectiveResult`, :func:`joint_floor_steps`, :func:`candidate_designs`,
:func:`schedule_designs`. Every schedule returned is replayed by
:func:`topoopt_ilp.evaluation.collective_check.check_schedule` and every chosen topology's degrees
checked by :func:`topoopt_ilp.evaluation.degree_check.degree_violations`; neither shares code with
this module.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, replace

import numpy as np

from topoopt_ilp.core.collective import Collective, CollectiveSchedule, LinkModel, Send
from topoopt_ilp.core.solution import Topology
from topoopt_ilp.errors import InputError
from topoopt_ilp.evaluation.collective_bounds import collective_lower_bound
from topoopt_ilp.evaluation.collective_check import check_schedule
from topoopt_ilp.evaluation.degree_check import degree_violations
from topoopt_ilp.heuristic.collective import (
    allreduce_from_phases,
    chunk_demand,
    hop_distances,
    reduction_from_gather,
    trimmed,
)
from topoopt_ilp.models.collective import (
    CollectiveResult,
    chain_rows,
    finish_rows,
    held_rows,
    receive_rows,
    solve_collective,
)
from topoopt_ilp.models.common import ExactOptions, check_backend, run_model, solution_status
from topoopt_ilp.models.topology.catalogue import catalogue_sizes, hop_statistics, regular_graphs
from topoopt_ilp.models.topology.circulant import heuristic_jumps
from topoopt_ilp.solvers import Capability, LinearModel, ModelBuilder, VarBlock, get_backend

__all__ = [
    "JOINT_KINDS",
    "JointModel",
    "Probe",
    "JointCollectiveResult",
    "DesignResult",
    "build_joint_model",
    "joint_floor_steps",
    "candidate_designs",
    "schedule_designs",
    "solve_joint_collective",
]

#: The collectives the joint model chooses a topology for (a reduction's optimum is an AllGather optimum).
JOINT_KINDS = ("allgather", "reducescatter", "allreduce", "broadcast", "alltoall")
#: The collectives the model schedules as they are (the others as an AllGather, then turned into theirs).
_DISSEMINATIONS = ("broadcast", "alltoall")
#: Most jump sets the circulant enumeration of :func:`candidate_designs` scores.
MAX_JUMP_SETS = 20_000
#: The share of the time limit the designs' schedules may take before the probes start.
DESIGN_SHARE = 0.3


@dataclass(frozen=True, eq=False)
class JointModel:
    """The built MILP and where its columns are: ``links`` the x columns, one per pair
    ``(pair_tail[k], pair_head[k])`` (u < v when undirected); ``send`` the s columns, in the order of
    ``(send_chunk, send_tail, send_head, send_step)``; ``holds[c, v, t]`` the column of h[c, v, t]
    (-1: a constant, 1 at the origin, 0 elsewhere at t = 0); ``used`` the y[1..T] columns."""

    model: LinearModel
    links: VarBlock
    pair_tail: np.ndarray
    pair_head: np.ndarray
    send: VarBlock
    send_chunk: np.ndarray
    send_tail: np.ndarray
    send_head: np.ndarray
    send_step: np.ndarray
    holds: np.ndarray
    used: VarBlock


@dataclass(frozen=True)
class Probe:
    """One feasibility solve of the joint model: its horizon, the solver's status, seconds."""

    horizon: int
    status: str
    seconds: float


@dataclass(frozen=True)
class DesignResult:
    """A known design scheduled: its name, topology and the schedule's result on it."""

    name: str
    topology: Topology
    result: CollectiveResult


@dataclass(frozen=True)
class JointCollectiveResult:
    """The chosen topology and its checked schedule. ``status``: optimal (no topology of the class
    finishes sooner: every shorter horizon proven infeasible, or the floor met) or feasible.
    ``design``: ``"joint model"`` when the probes found the topology, else the known design kept.
    ``floor_steps``: the gather steps proven necessary on every topology of the class (for
    AllReduce the collective needs twice that); ``result``: the schedule on ``topology`` with the
    independent bound on that topology; ``designs``: the known designs as scheduled."""

    topology: Topology
    status: str
    design: str
    floor_steps: int
    result: CollectiveResult
    probes: tuple[Probe, ...]
    designs: tuple[DesignResult, ...]
    solve_s: float


# -- constraint families -----------------------------------------------------------------------------


def _degree(b: ModelBuilder, jm: dict, n: int, d: int, directed: bool, regular: bool) -> None:
    """every server has degree d (regular) or at most d: sum of x over its pairs; directed: out and in"""
    lb = float(d) if regular else 0.0
    tail, head, x = jm["pair_tail"], jm["pair_head"], jm["links"]
    if directed:
        b.add_constraints(tail, x, 1.0, lb=lb, ub=float(d), count=n, name="out_degree")
        b.add_constraints(head, x, 1.0, lb=lb, ub=float(d), count=n, name="in_degree")
    else:
        b.add_constraints(np.r_[tail, head], np.r_[x, x], 1.0, lb=lb, ub=float(d), count=n, name="degree")


def _server_zero_order(b: ModelBuilder, jm: dict, n: int) -> None:
    """server 0's links, by decreasing count over servers 1, 2, ...: x[0, j] >= x[0, j + 1], and
    x[0, 1] >= 1 (sound when every server takes part alike: see the comment block)"""
    first = jm["links"][jm["pair_tail"] == 0]  # pairs (0, 1), (0, 2), ... in that order
    k = np.arange(n - 2)
    b.add_constraints(np.r_[k, k], np.r_[first[:-1], first[1:]], np.r_[np.ones(k.size), -np.ones(k.size)], lb=0.0)
    b.add_constraints([0], [first[0]], [1.0], lb=1.0, name="server_zero_linked")


def _capacity(b: ModelBuilder, jm: dict, tails: np.ndarray, heads: np.ndarray, pair_of: np.ndarray) -> None:
    """a link u -> v carries at most x[u, v] chunks per step: sum_c s[c, u, v, t] <= x[u, v]"""
    steps = int(jm["x_step"].max())
    rows, local = np.unique(jm["x_arc"] * steps + jm["x_step"] - 1, return_inverse=True)
    arc = rows // steps
    b.add_constraints(
        np.r_[local, np.arange(rows.size)],
        np.r_[jm["x"], jm["links"][pair_of[tails[arc], heads[arc]]]],
        np.r_[np.ones(local.size), -np.ones(rows.size)],
        ub=0.0,
        count=rows.size,
        name="capacity",
    )


# Data
#   servers V = 0..n-1, all of them taking part; degree d, regular (every server exactly d) or at
#   most d; undirected links (a pair {u, v} with x links carries x chunks per step each way) or
#   directed ones (out- and in-degree d); parallel links allowed or not. Chunks c with origin o(c)
#   and the servers S(c) that must hold c at the end (AllGather, broadcast from server 0 (another
#   root: servers 0 and the root swapped after), all-to-all; ReduceScatter and AllReduce are solved
#   as AllGather, module docstring of models/collective.py); steps t = 1..T.
# Variables
#   x[u, v] in {0..d} (or {0, 1})   links between u and v (undirected: one variable per pair u < v)
#   s[c, u, v, t] in {0, 1}         chunk c crosses u -> v in step t (v != o(c); in step 1 only from
#                                   o(c), the one server that holds c at the start)
#   h[c, v, t] in {0, 1}            v holds c at the end of step t (h[o(c), ., .] = 1 and h[c, v, 0]
#                                   = 0 are constants; continuous in [0, 1] where the back-end
#                                   allows: an integral s makes every h a send or a demand relies
#                                   on integral, as in the fixed-topology model)
#   y[t] in {0, 1}                  step t is used
# Constraints
#   degree     sum_v x[u, v] = d (regular) or <= d, for every u; directed: out- and in-degree
#   no loops   there is no x[u, u]
#   capacity   sum_c s[c, u, v, t] <= x[u, v]               every arc, step (x[v, u] = x[u, v] undirected)
#   held       s[c, u, v, t] <= h[c, u, t - 1]               store-and-forward; copies are free
#   receive    h[c, v, t] <= h[c, v, t - 1] + sum_u s[c, u, v, t]
#   finish     h[c, v, t] + y[t + 1] >= 1 for v in S(c), t < T;  h[c, v, T] >= 1
#   chain      y[t] >= y[t + 1];  y[t] = 1 for t <= L (L: a floor, below)
#   symmetry   x[0, 1] >= x[0, 2] >= ... >= x[0, n - 1] and x[0, 1] >= 1. Sound: every server takes
#              part and servers 1..n-1 play the same part (AllGather and all-to-all: the same number
#              of chunks to give and to get; broadcast: from root 0, every other a sink), so a
#              permutation of the servers that fixes 0 (and carries each server's chunks along) maps
#              a topology and its schedule to another of the same class and the same finish step; the permutation that sorts
#              server 0's link counts in decreasing order over 1..n-1 maps every solution to one
#              that meets the rows. x[0, 1] >= 1: server 0 has a link (its chunk must leave it).
# Objective
#   minimise sum_t y[t], the finish step (with L = T: a feasibility probe, how it is solved).
# Floor L (joint_floor_steps, valid on every topology of the class): a server receives (n - 1) k
#   chunks over at most d links per step; a chunk's holders grow at most (d + 1)-fold per step, so
#   T >= ceil(log_{d+1} n). Broadcast: some piece first leaves the root in step ceil(k / d) or
#   later, so T >= ceil(k / d) - 1 + ceil(log_{d+1} n). All-to-all: also the Moore bound (at most
#   d (d - 1)^(j - 1) servers j hops away, d^j directed) on the farthest hop and on the hops of all
#   chunks over the n d arcs.
def build_joint_model(
    n: int,
    degree: int,
    origin: np.ndarray,
    sinks: np.ndarray,
    horizon: int,
    *,
    directed: bool = False,
    regular: bool = True,
    multi_links: bool = True,
    floor: int = 0,
    integral_holds: bool = True,
    symmetry: bool = True,
) -> JointModel:
    """The MILP of the comment block above for ``horizon`` >= 1 steps (infeasible when no topology of
    the class has a schedule that ends within it). ``floor``: steps known to be necessary (y fixed
    to 1 up to it). ``symmetry``: the rows on server 0's links (only sound when every server has the
    same chunks to give, as in an AllGather over all servers)."""
    T, C = int(horizon), origin.size
    if directed:
        pair_tail, pair_head = (a.ravel() for a in np.nonzero(~np.eye(n, dtype=bool)))
    else:
        pair_tail, pair_head = np.triu_indices(n, 1)
    pair_of = np.full((n, n), -1, dtype=np.int64)
    pair_of[pair_tail, pair_head] = np.arange(pair_tail.size)
    if not directed:
        pair_of[pair_head, pair_tail] = np.arange(pair_tail.size)
    tails, heads = np.nonzero(pair_of >= 0)
    steps = np.arange(1, T + 1)
    c_, a_, t_ = (g.ravel() for g in np.meshgrid(np.arange(C), np.arange(tails.size), steps, indexing="ij"))
    ok = (heads[a_] != origin[c_]) & ((t_ > 1) | (tails[a_] == origin[c_]))
    sc, sa, sstep = c_[ok], a_[ok], t_[ok]
    st, sh = tails[sa], heads[sa]

    b = ModelBuilder(name=f"joint_collective_n{n}_d{degree}_c{C}_T{T}")
    x = b.add_variables(pair_tail.size, ub=float(degree if multi_links else 1), kind="integer", name="x")
    s = b.add_variables(sc.size, ub=1.0, kind="binary", name="s")
    hc, hv, ht = (g.ravel() for g in np.meshgrid(np.arange(C), np.arange(n), steps, indexing="ij"))
    keep = hv != origin[hc]
    hc, hv, ht = hc[keep], hv[keep], ht[keep]
    h = b.add_variables(hc.size, ub=1.0, kind="binary" if integral_holds else "continuous", name="h")
    holds = np.full((C, n, T + 1), -1, dtype=np.int64)
    holds[hc, hv, ht] = h.index
    y = b.add_variables(T, lb=(steps <= floor).astype(float), ub=1.0, kind="binary", name="y")
    jm = {
        "links": x.index,
        "pair_tail": pair_tail,
        "pair_head": pair_head,
        "x": s.index,  # the sends, in the dissemination model's layout (models/collective.py)
        "x_chunk": sc,
        "x_arc": sa,
        "x_step": sstep,
        "holds": holds,
        "y": y.index,
    }
    _degree(b, jm, n, degree, directed, regular)
    if symmetry and n > 2:
        _server_zero_order(b, jm, n)
    _capacity(b, jm, tails, heads, pair_of)
    held_rows(b, jm, origin, tails)
    receive_rows(b, jm, heads)
    finish_rows(b, jm, sinks, T)
    chain_rows(b, jm, T)
    b.set_objective(y.index, 1.0)
    return JointModel(b.build(), x, pair_tail, pair_head, s, sc, st, sh, sstep, holds, y)


def joint_floor_steps(n: int, degree: int, chunks: int, *, directed: bool = False, kind: str = "allgather") -> int:
    """The floor L of the comment block: steps every topology of the class needs for ``kind`` over all
    ``n`` servers with ``chunks`` chunks each (per root for a broadcast; n >= 2, degree >= 1); for
    ReduceScatter and AllReduce, the AllGather's."""
    spread, reach = 0, 1
    while reach < n:
        spread, reach = spread + 1, reach * (degree + 1)
    if kind == "broadcast":
        # the root sends at most d copies per step, so some piece first leaves it in step
        # ceil(chunks / d), at most d + 1 servers then hold it, and its holders grow (d + 1)-fold
        return math.ceil(chunks / degree) - 1 + spread
    receive = math.ceil((n - 1) * chunks / degree)
    if kind != "alltoall":
        return max(receive, spread)
    # a server has at most d (d - 1)^(k - 1) servers at k hops (d^k directed): the Moore bound; each
    # of its chunks travels at least that far, n d links carry the n (n - 1) chunks' hops
    hops, left, k, ring = 0, n - 1, 1, degree
    while left > 0:
        at = min(left, ring)
        hops, left, k = hops + at * k, left - at, k + 1
        ring *= degree if directed else max(degree - 1, 1)
    return max(receive, k - 1, math.ceil(chunks * hops / degree))


def _topology_from(jmodel: JointModel, values: np.ndarray, n: int, directed: bool) -> np.ndarray:
    counts = np.rint(values[jmodel.links.index]).astype(np.int64)
    m = np.zeros((n, n), dtype=np.int64)
    m[jmodel.pair_tail, jmodel.pair_head] = counts
    if not directed:
        m[jmodel.pair_head, jmodel.pair_tail] = counts
    return m


def _sends_from(jmodel: JointModel, values: np.ndarray, steps: int) -> list[Send]:
    chosen = np.flatnonzero(values[jmodel.send.index] > 0.5)
    return [
        Send(int(jmodel.send_step[k]), int(jmodel.send_chunk[k]), int(jmodel.send_tail[k]), int(jmodel.send_head[k]))
        for k in chosen
        if jmodel.send_step[k] <= steps
    ]


# -- known designs -------------------------------------------------------------------------------------


def _circulant(n: int, jumps: tuple[int, ...], directed: bool) -> np.ndarray:
    m = np.zeros((n, n), dtype=np.int64)
    for i in range(n):
        for j in jumps:
            m[i, (i + j) % n] += 1
            if not directed and 2 * j != n:
                m[(i + j) % n, i] += 1
    return m


def _best_circulant(n: int, d: int, directed: bool) -> tuple[int, ...] | None:
    """The simple circulant of degree d with the smallest diameter, then total hop distance (first in
    lexicographic order among equals); None when there is none or more than MAX_JUMP_SETS sets."""
    if directed:
        pools = [(tuple(range(1, n)), d, ())]
    elif d % 2 == 0:
        pools = [(tuple(range(1, (n + 1) // 2)), d // 2, ())]
    elif n % 2 == 0:
        pools = [(tuple(range(1, n // 2)), d // 2, (n // 2,))]
    else:
        return None
    pool, k, fixed = pools[0]
    if k > len(pool) or math.comb(len(pool), k) > MAX_JUMP_SETS:
        return None
    best, best_key = None, None
    for combo in itertools.combinations(pool, k):
        jumps = combo + fixed
        dist = hop_distances(_circulant(n, jumps, directed))[0]
        if not np.isfinite(dist).all():
            continue
        key = (dist.max(), dist.sum())
        if best_key is None or key < best_key:
            best, best_key = jumps, key
    return best


def candidate_designs(n: int, degree: int, *, directed: bool = False) -> list[tuple[str, Topology]]:
    """The toolkit's known designs of ``n`` servers and degree ``degree``: the complete graph (d = n - 1,
    undirected), the hypercube (n = 2^d, undirected), the circulant of smallest diameter, the
    circulant of TopoOpt's jump rule (``models.topology.circulant.heuristic_jumps``), and the graph
    of smallest diameter (then total hop distance) of the shipped catalogue of regular graphs
    (``models.topology.catalogue``: undirected, n <= 12), without repeats, in that order."""
    designs: list[tuple[str, Topology]] = []
    if not directed and degree == n - 1:
        designs.append(("complete graph", Topology(np.ones((n, n), dtype=np.int64) - np.eye(n, dtype=np.int64))))
    if not directed and n == 2**degree:
        cube = np.array([[int(bin(i ^ j).count("1") == 1) for j in range(n)] for i in range(n)], dtype=np.int64)
        designs.append(("hypercube", Topology(cube)))
    best = _best_circulant(n, degree, directed)
    if best is not None:
        designs.append(
            (
                f"circulant C({n}; {', '.join(map(str, best))}), smallest diameter",
                Topology(_circulant(n, best, directed), best),
            )
        )
    topoopt = heuristic_jumps(n, degree, directed, "circulant")
    if topoopt is not None:
        designs.append(
            (
                f"TopoOpt circulant C({n}; {', '.join(map(str, topoopt))})",
                Topology(_circulant(n, topoopt, directed), topoopt),
            )
        )
    if not directed and (n, degree) in catalogue_sizes():  # every connected d-regular simple graph, shipped
        graphs = regular_graphs(n, degree)
        total, diameter = hop_statistics(graphs)
        pick = int(np.lexsort((total, diameter))[0])
        designs.append(
            (f"catalogue graph {pick} of {len(graphs)}, smallest diameter", Topology(graphs[pick].astype(np.int64)))
        )
    kept: list[tuple[str, Topology]] = []
    for name, topology in designs:
        if not any(np.array_equal(topology.matrix, t.matrix) for _, t in kept):
            kept.append((name, topology))
    return kept


def schedule_designs(
    collective: Collective,
    degree: int,
    link: LinkModel,
    *,
    directed: bool = False,
    method: str = "exact",
    options: ExactOptions | None = None,
) -> list[DesignResult]:
    """Every design of :func:`candidate_designs` scheduled by :func:`solve_collective` (``method``),
    each with the independent bound on it; the time limit of ``options`` is split evenly among them."""
    n = len(collective.servers)
    designs = candidate_designs(n, degree, directed=directed)
    options = options or ExactOptions()
    share = None if options.time_limit_s is None else options.time_limit_s / max(1, len(designs))
    return [
        DesignResult(
            name,
            topology,
            solve_collective(topology, collective, link, method=method, options=replace(options, time_limit_s=share)),
        )
        for name, topology in designs
    ]


# -- the joint solve -----------------------------------------------------------------------------------


def _check_request(
    collective: Collective, degree: int, directed: bool, multi_links: bool, regular: bool, options: ExactOptions
) -> int:
    if collective.kind not in JOINT_KINDS:
        raise InputError(
            f"the joint model chooses topologies for {', '.join(JOINT_KINDS)}, not {collective.kind}",
            field="collective.kind",
        )
    n = len(collective.servers)
    if sorted(collective.servers) != list(range(n)):
        raise InputError("the joint model needs every server 0..n-1 in the collective", field="collective.servers")
    if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or degree < 1:
        raise InputError(f"degree must be an integer >= 1, got {degree!r}", field="degree")
    if not multi_links and degree > n - 1:
        raise InputError(
            f"{n} servers without parallel links have degree at most {n - 1}, not {degree}", field="degree"
        )
    if not directed and regular and n * degree % 2:
        raise InputError(f"no {degree}-regular undirected graph has {n} servers (n x d is odd)", field="degree")
    if not directed and degree == 1 and n > 2:
        raise InputError(f"undirected links of degree 1 connect pairs only, not {n} servers", field="degree")
    if directed and collective.kind == "allreduce":
        raise InputError(
            "the joint AllReduce is for undirected links only (its two phases use G and its reverse)", field="directed"
        )
    if options.time_limit_s == 0:
        raise InputError("a time limit of 0 leaves the solver no time", field="time_limit_s")
    check_backend(options, continuous=False)
    return n


def _probe(
    n: int,
    degree: int,
    origin: np.ndarray,
    sinks: np.ndarray,
    horizon: int,
    settings: dict,
    options: ExactOptions,
    deadline: float | None,
) -> tuple[Probe, np.ndarray | None, list[Send] | None]:
    """One feasibility solve at ``horizon`` (every step used): its record, topology and sends."""
    began = time.perf_counter()
    jmodel = build_joint_model(n, degree, origin, sinks, horizon, floor=horizon, **settings)
    limit = None if deadline is None else max(1e-3, deadline - time.perf_counter())
    res = run_model(jmodel.model, replace(options, time_limit_s=limit))
    status = solution_status(res)
    probe = Probe(horizon, status, time.perf_counter() - began)
    if res.values is None or status not in ("optimal", "feasible"):
        return probe, None, None
    return probe, _topology_from(jmodel, res.values, n, settings["directed"]), _sends_from(jmodel, res.values, horizon)


def _schedule_result(
    topology: np.ndarray,
    collective: Collective,
    link: LinkModel,
    gather: list[Send],
    steps: int,
    status: str,
    floor: int,
    backend: str | None,
    started: float,
) -> tuple[Topology, CollectiveResult]:
    """The collective's schedule from a gather schedule on ``topology`` (ReduceScatter: on its reverse,
    which becomes the topology), checked, with the independent bound on the topology."""
    n = topology.shape[0]
    demand = collective
    if collective.kind not in _DISSEMINATIONS:
        demand = Collective("allgather", collective.servers, collective.bytes, collective.chunks)
    origin, sinks = chunk_demand(demand, n)
    gather = trimmed(gather, origin, sinks)
    if collective.kind == "reducescatter":
        topology = topology.T.copy()
        sends, total, floor_total = reduction_from_gather(gather, steps, origin, sinks), steps, floor
    elif collective.kind == "allreduce":
        rs = reduction_from_gather(gather, steps, origin, sinks)
        sends, total, floor_total = allreduce_from_phases(rs, steps, gather), 2 * steps, 2 * floor
    else:
        sends, total, floor_total = gather, steps, floor
    chosen = Topology(topology)
    step_s = link.step_s(collective.chunk_bytes)
    schedule = CollectiveSchedule(tuple(sends), step_s, total)
    report = check_schedule(chosen, collective, link, schedule)
    if report.violations:  # an internal error: never hand out a schedule the checker refuses
        raise AssertionError(f"the joint schedule fails the independent check: {report.violations[0]}")
    bound = collective_lower_bound(chosen, collective, link)
    best = max(bound.steps, floor_total)
    result = CollectiveResult.scheduled(
        collective,
        method="exact",
        status="optimal" if status == "optimal" or total == best else "feasible",
        schedule=schedule,
        steps=total,
        bound=bound,
        model_bound_steps=floor_total,
        bound_steps=best,
        started=started,
        backend=backend,
    )
    return chosen, result


def solve_joint_collective(
    collective: Collective,
    degree: int,
    link: LinkModel,
    *,
    directed: bool = False,
    regular: bool = True,
    multi_links: bool = True,
    options: ExactOptions | None = None,
    designs: bool = True,
) -> JointCollectiveResult:
    """The topology of ``len(collective.servers)`` servers and degree ``degree`` (regular or at most,
    undirected or directed, parallel links or not) on which ``collective`` (allgather, reducescatter,
    allreduce over every server) finishes soonest, and its schedule (module docstring).

    First the known designs are scheduled exactly (``designs``; their best finish bounds the probes
    from above), then the joint model is probed at horizons L, L + 1, ... below that finish. The
    answer is ``optimal`` when every probe below it was proven infeasible (or the floor is met),
    else ``feasible`` with the shortest horizon left unsettled as ``floor_steps``; when the limit
    comes before any schedule, the known designs' greedy schedules are the answer. Raises
    :class:`InputError` for other collectives, a collective over part of the servers, directed
    AllReduce, a degree no topology of the class has (or one that connects pairs only), a time
    limit of 0, and when no topology is found within the time limit and no known design exists."""
    started = time.perf_counter()
    options = options or ExactOptions()
    n = _check_request(collective, degree, directed, multi_links, regular, options)
    deadline = None if options.time_limit_s is None else started + 0.95 * options.time_limit_s
    floor = joint_floor_steps(n, degree, collective.chunks, directed=directed, kind=collective.kind)
    # what the model schedules: a broadcast from server 0 (another root is relabelled at the end) or
    # an all-to-all as they are, the reductions as the AllGather that gives them
    if collective.kind in _DISSEMINATIONS:
        gather = replace(collective, root=0 if collective.kind == "broadcast" else None)
    else:
        gather = Collective("allgather", collective.servers, collective.bytes, collective.chunks)
    origin, sinks = chunk_demand(gather, n)

    classes = {"directed": directed, "regular": regular, "multi_links": multi_links}
    scheduled: list[DesignResult] = []
    if designs:
        share = None if options.time_limit_s is None else DESIGN_SHARE * options.time_limit_s
        scheduled = [
            d
            for d in schedule_designs(
                gather, degree, link, directed=directed, options=replace(options, time_limit_s=share)
            )
            if not degree_violations(d.topology.matrix, degree, **classes)
        ]
    best = min(scheduled, key=lambda d: d.result.steps, default=None)
    upper = best.result.steps if best is not None else None

    settings = {
        "directed": directed,
        "regular": regular,
        "multi_links": multi_links,
        "integral_holds": not get_backend(options.backend).supports(Capability.CONTINUOUS_VARIABLES),
    }
    probes: list[Probe] = []
    proven = floor  # every horizon below it is proven too short
    found = None
    horizon = floor
    ceiling = upper if upper is not None else floor + (n - 1) * collective.chunks + 1
    while horizon < ceiling and found is None:
        if deadline is not None and time.perf_counter() >= deadline:
            break
        probe, matrix, sends = _probe(n, degree, origin, sinks, horizon, settings, options, deadline)
        probes.append(probe)
        if matrix is not None:
            found = (matrix, sends, horizon)
        elif probe.status == "infeasible" and proven == horizon:
            proven = horizon + 1
        horizon += 1

    if found is None and best is None:  # the limit came first: the known designs' greedy schedules
        quick = schedule_designs(gather, degree, link, directed=directed, method="heuristic")
        fits = [d for d in quick if not degree_violations(d.topology.matrix, degree, **classes)]
        best = min(fits, key=lambda d: d.result.steps, default=None)
    if found is not None:
        matrix, sends, steps = found
        status = "optimal" if proven == steps else "feasible"
        name = "joint model"
    elif best is not None:
        matrix, steps = best.topology.matrix, best.result.steps
        status = "optimal" if proven >= steps else "feasible"
        sends = list(best.result.schedule.sends)  # the designs are scheduled as AllGathers
        name = best.name
    else:
        raise InputError(
            "no topology found within the time limit and no known design of this class", field="time_limit_s"
        )
    problems = degree_violations(matrix, degree, **classes)
    if problems:  # an internal error: the model's degree rows or a design are wrong
        raise AssertionError(f"the chosen topology fails the degree check: {problems[0]}")
    if collective.kind == "broadcast" and collective.root != 0:  # swap server 0 and the root
        swap = np.arange(n)
        swap[[0, collective.root]] = [collective.root, 0]
        matrix = np.asarray(matrix)[np.ix_(swap, swap)]
        sends = [Send(x.step, x.chunk, int(swap[x.src]), int(swap[x.dst]), x.partial) for x in sends]
    backend = options.backend
    topology, result = _schedule_result(
        matrix, collective, link, sends, steps, status, min(proven, steps), backend, started
    )
    return JointCollectiveResult(
        topology=topology,
        status=status,
        design=name,
        floor_steps=min(proven, steps),
        result=result,
        probes=tuple(probes),
        designs=tuple(scheduled),
        solve_s=time.perf_counter() - started,
    )
