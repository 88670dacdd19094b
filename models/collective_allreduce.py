"""AllReduce as one time-expanded MILP (docs/guide/collectives.md): per chunk, partial sums travel up
a tree to a root, chosen by the model, where they are combined, and the complete sum is broadcast
from it; chunks share the links step by step, so one chunk's broadcast may overlap another's
reduction (the phases pipeline). ReduceScatter followed by AllGather is one such schedule (the root
of chunk c its owner, every reduction before every broadcast), so this model's optimum is never above
theirs.

Every server of the topology must take part: a partial sum is the sender's own contribution plus
what it has received, which a server outside the collective does not have.

Public entry point: :func:`solve_allreduce_model` -> :class:`~topoopt_ilp.models.collective.CollectiveResult`;
its schedule is checked by :func:`topoopt_ilp.evaluation.collective_check.check_schedule`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from topoopt_ilp.core.collective import Collective, CollectiveSchedule, LinkModel, Send
from topoopt_ilp.core.solution import Topology
from topoopt_ilp.errors import InputError, UnsupportedError
from topoopt_ilp.evaluation.collective_bounds import collective_lower_bound
from topoopt_ilp.evaluation.collective_check import check_schedule
from topoopt_ilp.models.collective import CollectiveResult, chain_rows, finish_rows, solve_collective
from topoopt_ilp.models.common import ExactOptions, check_backend, run_model, solution_status
from topoopt_ilp.solvers import LinearModel, ModelBuilder, VarBlock

__all__ = ["AllReduceModel", "build_allreduce_model", "solve_allreduce_model"]


@dataclass(frozen=True, eq=False)
class AllReduceModel:
    """The built MILP: ``p`` and ``x`` columns in (chunk, arc, step) order (``p[c, a, t]`` the
    column of the partial sum of c over arc a in step t, 1-based t at index t - 1; ``x`` the complete
    copies); ``full[c, v, t]`` the column of full[c, v, t] (-1 at t = 0: nobody holds a sum yet);
    ``used`` the y[1..T] columns; ``tails``/``heads`` the arcs."""

    model: LinearModel
    p: np.ndarray
    x: np.ndarray
    full: np.ndarray
    used: VarBlock
    tails: np.ndarray
    heads: np.ndarray


class _Family:
    """The rows of one constraint family, gathered row by row and added as one block."""

    def __init__(self) -> None:
        self.rows: list[np.ndarray] = []
        self.cols: list[np.ndarray] = []
        self.vals: list[np.ndarray] = []
        self.lb: list[float] = []
        self.ub: list[float] = []

    def add(self, cols, vals, lb: float = -np.inf, ub: float = np.inf) -> None:
        cols = np.asarray(cols, dtype=np.int64).ravel()
        self.rows.append(np.full(cols.size, len(self.lb)))
        self.cols.append(cols)
        self.vals.append(np.broadcast_to(np.asarray(vals, dtype=float), cols.shape).ravel())
        self.lb.append(lb)
        self.ub.append(ub)

    def into(self, b: ModelBuilder, name: str) -> None:
        b.add_constraints(
            np.concatenate(self.rows),
            np.concatenate(self.cols),
            np.concatenate(self.vals),
            lb=np.array(self.lb),
            ub=np.array(self.ub),
            count=len(self.lb),
            name=name,
        )


def _cumulative_sends(p: np.ndarray, out_arcs: list[np.ndarray], c: int, u: int, t: int) -> np.ndarray:
    """Columns of the partial sums of chunk c that u sends in steps 1..t."""
    return p[c][out_arcs[u]][:, :t].ravel()


def _reduce_rows(b: ModelBuilder, p: np.ndarray, out_arcs: list, heads: np.ndarray, n: int) -> None:
    """each server sends its partial sum of a chunk at most once, all but one (the root) exactly once,
    and only after every partial sum it receives: sum_{a out of u, t} p[c, a, t] <= 1;
    sum_{a, t} p[c, a, t] = n - 1;  p[c, (w, u), t] + sum_{a out of u, t' <= t} p[c, a, t'] <= 1"""
    C, _, T = p.shape
    once, tree, first = _Family(), _Family(), _Family()
    for c in range(C):
        for u in range(n):
            once.add(p[c][out_arcs[u]], 1.0, ub=1.0)
        tree.add(p[c], 1.0, lb=n - 1, ub=n - 1)
        for a in range(heads.size):
            for t in range(1, T + 1):
                first.add(np.r_[p[c, a, t - 1], _cumulative_sends(p, out_arcs, c, int(heads[a]), t)], 1.0, ub=1.0)
    once.into(b, "send_once")
    tree.into(b, "tree")
    first.into(b, "children_first")


def _full_rows(b: ModelBuilder, dm: dict, out_arcs: list, in_arcs: list, n: int) -> None:
    """the root holds the sum once every partial sum is sent; the others once a complete copy arrives;
    a complete copy leaves only a server that holds the sum:
    full[c, v, t] <= full[c, v, t - 1] + sum_{a into v} x[c, a, t] + ready[c, v, t]
    ready[c, v, t] <= 1 - sum_{a out of v, t'} p[c, a, t']     (v is the root)
    (n - 1) ready[c, v, t] <= sum_{a, t' <= t} p[c, a, t']       (every partial sum is in)
    x[c, (u, v), t] <= full[c, u, t - 1]"""
    p, x, full, ready, tails = dm["p"], dm["x"], dm["full"], dm["ready"], dm["tails"]
    C, _, T = p.shape
    holds, root, ready_rows, held = _Family(), _Family(), _Family(), _Family()
    for c in range(C):
        for v in range(n):
            sent = p[c][out_arcs[v]].ravel()
            for t in range(1, T + 1):
                before = [full[c, v, t - 1]] if full[c, v, t - 1] >= 0 else []
                cols = np.r_[full[c, v, t], before, x[c][in_arcs[v], t - 1], ready[c, v, t - 1]]
                holds.add(cols, np.r_[1.0, -np.ones(cols.size - 1)], ub=0.0)
                root.add(np.r_[ready[c, v, t - 1], sent], 1.0, ub=1.0)
                done = p[c][:, :t].ravel()
                ready_rows.add(np.r_[ready[c, v, t - 1], done], np.r_[float(n - 1), -np.ones(done.size)], ub=0.0)
        for a in range(tails.size):
            held.add([x[c, a, 0]], 1.0, ub=0.0)  # nobody holds a sum at the start
            for t in range(2, T + 1):
                held.add([x[c, a, t - 1], full[c, tails[a], t - 1]], [1.0, -1.0], ub=0.0)
    holds.into(b, "full")
    root.into(b, "root")
    ready_rows.into(b, "ready")
    held.into(b, "held")


def _capacity_rows(b: ModelBuilder, dm: dict, cap: np.ndarray) -> None:
    """a link carries at most its links' count of chunks (partial sums and copies) per step, none in an
    unused step: sum_c p[c, a, t] + x[c, a, t] <= m_a y[t]"""
    p, x, y = dm["p"], dm["x"], dm["y"]
    _, A, T = p.shape
    rows = _Family()
    for a in range(A):
        for t in range(T):
            rows.add(np.r_[p[:, a, t], x[:, a, t], y[t]], np.r_[np.ones(2 * p.shape[0]), -float(cap[a])], ub=0.0)
    rows.into(b, "capacity")


# Data
#   servers V (n of them, all taking part), arcs a = (u, v) with m_a parallel links; chunk ids c
#   (P x chunks), every server contributing to each; steps t = 1..T (T: the ReduceScatter +
#   AllGather schedule's finish step, which this model contains); L the independent bound.
# Variables
#   p[c, a, t] in {0, 1}     the sender's partial sum of c crosses a in step t
#   x[c, a, t] in {0, 1}     a complete sum of c crosses a in step t
#   full[c, v, t] in {0, 1}  v holds the complete sum of c at the end of step t (0 at t = 0)
#   ready[c, v, t] in {0, 1} v is c's root and has every partial sum by the end of step t
#   y[t] in {0, 1}           step t is used
# Constraints
#   send_once  sum_{a out of u, t} p[c, a, t] <= 1
#   tree       sum_{a, t} p[c, a, t] = n - 1                  (one root: the server that never sends)
#   children_first  p[c, (w, u), t] + sum_{a out of u, t' <= t} p[c, a, t'] <= 1
#                  (u sends after all it receives: following the sends, steps grow, so they form a
#                  tree into the root, and each contribution reaches it exactly once)
#   root, ready, full, held  (see _full_rows)
#   capacity   sum_c p[c, a, t] + x[c, a, t] <= m_a y[t]
#   finish     full[c, v, t] + y[t + 1] >= 1;  full[c, v, T] >= 1   (every server ends with every sum)
#   chain      y[t] >= y[t + 1];  y[t] = 1 for t <= L
# Objective
#   minimise sum_t y[t]
def build_allreduce_model(matrix: np.ndarray, chunks: int, horizon: int, *, floor: int = 0) -> AllReduceModel:
    """The MILP of the comment block above: ``chunks`` chunk ids over ``horizon`` steps."""
    m = np.asarray(matrix)
    n, C, T = m.shape[0], int(chunks), int(horizon)
    tails, heads = np.nonzero(m > 0)
    A = tails.size
    out_arcs = [np.flatnonzero(tails == u) for u in range(n)]
    in_arcs = [np.flatnonzero(heads == v) for v in range(n)]
    b = ModelBuilder(name=f"allreduce_n{n}_c{C}_T{T}")
    p = b.add_variables(C * A * T, ub=1.0, kind="binary", name="p").index.reshape(C, A, T)
    x = b.add_variables(C * A * T, ub=1.0, kind="binary", name="x").index.reshape(C, A, T)
    full = np.full((C, n, T + 1), -1, dtype=np.int64)
    full[:, :, 1:] = b.add_variables(C * n * T, ub=1.0, kind="binary", name="full").index.reshape(C, n, T)
    ready = b.add_variables(C * n * T, ub=1.0, kind="binary", name="ready").index.reshape(C, n, T)
    steps = np.arange(1, T + 1)
    y = b.add_variables(T, lb=(steps <= floor).astype(float), ub=1.0, kind="binary", name="y")
    dm = {"p": p, "x": x, "full": full, "ready": ready, "tails": tails, "y": y.index, "holds": full}
    _reduce_rows(b, p, out_arcs, heads, n)
    _full_rows(b, dm, out_arcs, in_arcs, n)
    _capacity_rows(b, dm, m[tails, heads])
    finish_rows(b, dm, np.ones((C, n), dtype=bool), T)
    chain_rows(b, dm, T)
    b.set_objective(y.index, 1.0)
    return AllReduceModel(b.build(), p, x, full, y, tails, heads)


def solve_allreduce_model(
    topology: Topology, collective: Collective, link: LinkModel, *, options: ExactOptions | None = None
) -> CollectiveResult:
    """The AllReduce ``collective`` on ``topology`` by the one model (module docstring), over the
    horizon of the exact ReduceScatter + AllGather schedule (found first, kept when the solver
    returns nothing better). ``status`` optimal: no reduce-then-broadcast schedule is shorter (or the
    bound is met)."""
    started = time.perf_counter()
    if collective.kind != "allreduce":
        raise InputError(f"the one model is for allreduce, not {collective.kind}", field="collective.kind")
    if sorted(collective.servers) != list(range(topology.n)):
        raise InputError(
            "the AllReduce model needs every server of the topology in the collective (a relay has no partial sum)",
            field="collective.servers",
        )
    if (link.timing(topology.matrix, collective.chunk_bytes)[1] > 1).any():
        raise UnsupportedError(
            "the one AllReduce model takes links of one rate (a chunk crosses every link in one step); "
            "this topology has slower links: drop --one-model (ReduceScatter + AllGather honours them)"
        )
    options = options or ExactOptions()
    check_backend(options, continuous=False)
    phases = solve_collective(topology, collective, link, method="exact", options=options)
    bound = collective_lower_bound(topology, collective, link)
    model_bound = bound.steps
    if phases.steps > bound.steps:
        dm = build_allreduce_model(topology.matrix, collective.chunk_count, phases.steps, floor=bound.steps)
        spent = time.perf_counter() - started
        limit = None if options.time_limit_s is None else max(1e-3, options.time_limit_s - spent)
        res = run_model(dm.model, replace(options, time_limit_s=limit))
        status = solution_status(res)
        if res.values is not None and status in ("optimal", "feasible"):
            steps = _finish_step(dm, res.values)
            model_bound = steps if status == "optimal" else max(bound.steps, int(np.ceil((res.bound or 0) - 1e-6)))
            if steps < phases.steps or status == "optimal":
                sends = _sends(dm, res.values, steps)
                schedule = CollectiveSchedule(tuple(sends), link.step_s(collective.chunk_bytes), steps)
                report = check_schedule(topology, collective, link, schedule)
                if report.violations:  # an internal error: never hand out a schedule the checker refuses
                    raise AssertionError(f"the AllReduce model's schedule fails the check: {report.violations[0]}")
                return _result(collective, schedule, steps, bound, model_bound, started, res.backend)
        elif res.bound is not None:
            model_bound = max(bound.steps, int(np.ceil(res.bound - 1e-6)))
    # the ReduceScatter + AllGather schedule, judged as a schedule of this model
    return _result(collective, phases.schedule, phases.steps, bound, model_bound, started, phases.backend)


def _result(collective, schedule, steps, bound, model_bound, started, backend) -> CollectiveResult:
    best = max(bound.steps, min(model_bound, steps))
    return CollectiveResult.scheduled(
        collective,
        method="exact",
        status="optimal" if steps == best else "feasible",
        schedule=schedule,
        steps=steps,
        bound=bound,
        model_bound_steps=model_bound,
        bound_steps=best,
        started=started,
        backend=backend,
    )


def _finish_step(dm: AllReduceModel, values: np.ndarray) -> int:
    """The first step after which every server holds every sum (at most the used steps)."""
    held = values[dm.full[:, :, 1:]] > 0.5
    return int(np.flatnonzero(held.all(axis=(0, 1)))[0]) + 1


def _sends(dm: AllReduceModel, values: np.ndarray, steps: int) -> list[Send]:
    """The chosen partial sums, and the complete copies up to ``steps`` that reach a server without
    the sum (one per server: the model may send copies that carry nothing)."""
    out = [
        Send(int(t) + 1, int(c), int(dm.tails[a]), int(dm.heads[a]), True)
        for c, a, t in zip(*np.nonzero(values[dm.p] > 0.5))
    ]
    full = values[dm.full[:, :, 1:]] > 0.5
    got: set[tuple[int, int]] = set()
    for c, a, t in sorted(zip(*np.nonzero(values[dm.x] > 0.5)), key=lambda k: (k[2], k[0], k[1])):
        v = int(dm.heads[a])
        if t + 1 > steps or (t > 0 and full[c, v, t - 1]) or (c, v) in got:
            continue
        got.add((int(c), v))
        out.append(Send(int(t) + 1, int(c), int(dm.tails[a]), v, False))
    return sorted(out)
