"""Scheduling one training iteration: an RCPSP over compute tasks and flows (TOPO-X's view), by CP-SAT.

Given the task graph of :mod:`topoopt_ilp.schedule.iteration_graph` (forward/backward per layer replica, block
lookups, resharding, lookup and AllReduce flows split into path pieces, with their precedence), find
start times that minimise the **makespan** (the end of the iteration), subject to: precedence (with
each flow piece's hop latency as a lag), one compute task at a time per server, and at most ``X[u, v]``
flow pieces at a time on every arc u -> v (each piece holds one link of every arc of its path for
``bytes / B``). Unlike the evaluator's ``T_compute + T_comm`` / ``max(...)``, this accounts for
precedence (pipeline bubbles, waiting for activations and gradients) and for overlapping compute
with communication where the dependencies allow it.

Two methods:

* :func:`list_schedule` - serial list scheduling: tasks taken in a precedence-respecting order (by
  three priority rules, the best kept), each placed at the earliest time its predecessors and its
  resources allow, then improved by forward-backward passes ("justification"). An upper bound;
  the warm start and horizon of the model.
* :func:`solve_schedule` - the exact model below on CP-SAT: ``optimal`` when CP-SAT proves it,
  ``feasible`` with CP-SAT's bound and gap when a limit stops it, ``no_solution`` when it found none.

Why CP-SAT directly, not the solver layer. The toolkit's solver layer (docs/guide/solvers.md) takes a model as
arrays of one linear program: bounds, a sparse matrix, an objective. Scheduling needs interval
variables with global constraints (NoOverlap, Cumulative), which a linear array model can only
imitate with big-M ordering binaries for every pair of tasks on a resource - a quadratic, weak
formulation. CP-SAT's native intervals propagate these constraints directly, so this model talks
to ``ortools.sat.python.cp_model`` itself (it is the only back-end here that could run it anyway).

Time is integer: one unit is ``time_unit_s`` (default 1 us); every duration and latency is rounded
**up** to whole units. So

* the returned schedule is feasible for the exact durations too (each task sits inside its rounded
  interval), and its makespan is at least the exact-duration optimum M*;
* ``optimal`` means optimal for the rounded durations, and that optimum is below ``M* + 3 K u``,
  where K is the largest number of tasks that run one after another (each ends before the next
  starts) in an optimal exact-duration schedule (K <= number of tasks). Proof: delay every task of an
  optimal exact schedule by ``3 h u`` (h = tasks of the longest such chain ending before it) and
  round its start up to a unit: precedence and "one after the other" survive; tasks that ran at a
  common time still share one (intervals: Helly), so capacities hold; the makespan grows by < 3 K u.
* ``bound_s`` is CP-SAT's bound for the rounded problem; :func:`topoopt_ilp.schedule.iteration_graph.lower_bounds`
  gives bounds that hold for the exact durations (reported as ``details["lower_bounds"]``).

Micro-batches change only the graph (``micro_batches`` of the graph builder), not the methods.
Their copies are interchangeable, which CP-SAT does not exploit: measured (``benchmarks/schedule_overlap.py
--instances instances/paper/resnet50-testbed-12-d4.json --stages 1 --micro-batches 1 2 4 8 --time-limit 5``),
the 4- and 8-micro-batch pipelines (88 and 176 tasks) are not proven optimal in 5 s (gaps 0.8 % and 0.6 %).

Schedule files (``topoopt schedule --out``, :func:`write_schedule` / :func:`read_schedule`):
``"format": "topoopt-schedule"``, version :data:`SCHEDULE_VERSION`, with every parameter the task
graph is rebuilt from (forward fraction, routing, micro-batches; the time unit, which bounds how far
the stated makespan may exceed the latest end + latency), the SHA-256 of the instance and solution
files, the claims (status, method, makespan, bound) and every task's start and end by name. The
reader is strict (one InputError per problem, naming the field); :meth:`ScheduleFile.schedule` lines
the times up with a rebuilt graph, refusing a missing or extra task, for the independent check.
"""

from __future__ import annotations

import bisect
import heapq
import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from topoopt_ilp.core.checks import as_int, as_int_list, as_number, brief, type_name
from topoopt_ilp.core.instance import MAX_SERVERS
from topoopt_ilp.errors import InputError, UnsupportedError
from topoopt_ilp.files import MAX_SOLUTION_BYTES, json_safe, write_json_atomic
from topoopt_ilp.files.jsonio import check_format, json_list, json_object, read_json, with_source
from topoopt_ilp.schedule.iteration_graph import MAX_GRAPH_TASKS, IterationGraph, Schedule, lower_bounds

__all__ = [
    "list_schedule",
    "solve_schedule",
    "build_schedule_model",
    "model_size",
    "schedule_to_dict",
    "ScheduleFile",
    "read_schedule",
    "parse_schedule",
    "write_schedule",
    "file_sha256",
    "sha256_field",
    "SCHEDULE_FORMAT",
    "SCHEDULE_VERSION",
    "MAX_MODEL_SIZE",
    "DEFAULT_TIME_UNIT_S",
    "PRIORITY_RULES",
    "JUSTIFY_ROUNDS",
    "LARGE_GRAPH_TASKS",
]

DEFAULT_TIME_UNIT_S = 1e-6
#: Largest model (tasks + piece-arc memberships + precedence edges) the exact method builds. The
#: shipped 12-server workloads are below 3,000; CP-SAT's propagation (and the Python model building)
#: becomes impractical in the 10^5 range.
MAX_MODEL_SIZE = 100_000
#: Most time units a schedule may span (the sum of all durations and latencies, in units): CP-SAT's
#: integer variables and the list scheduler's integer arithmetic stay far from overflow.
MAX_TIME_UNITS = 2**40


def _units(g: IterationGraph, unit: float, *, any_coarseness: bool = False) -> tuple[list[int], list[int]]:
    """Durations and latencies in whole units, rounded up (a tiny slack absorbs float noise such as
    1e-6 / 1e-6 = 1.0000000000000002). A unit coarser than the longest task is refused unless
    ``any_coarseness`` (the checker reads a file's unit as it is and judges the times it states)."""
    if not (isinstance(unit, (int, float)) and math.isfinite(unit) and unit > 0):
        raise InputError(f"time unit must be a positive number of seconds, got {brief(unit)}")

    def up(v: float) -> int:
        return int(math.ceil(v / unit * (1 - 1e-12))) if v > 0 else 0

    total = sum(t.duration_s + t.latency_s for t in g.tasks)
    longest = max((t.duration_s + t.latency_s for t in g.tasks), default=0.0)
    if not any_coarseness and longest > 0 and unit > longest * (1 + 1e-9):  # every task one unit: no times
        raise InputError(
            f"a time unit of {unit:.3g} s is coarser than the longest task ({longest:.3g} s): every task "
            "would last one unit and the makespan count tasks, not time; use a finer unit"
        )
    if total / unit > MAX_TIME_UNITS:
        raise InputError(
            f"a time unit of {unit:.3g} s is too fine for this iteration ({total:.3g} s of tasks in all): "
            f"the schedule would count more than {MAX_TIME_UNITS:.3g} units; use a coarser unit"
        )
    return [up(t.duration_s) for t in g.tasks], [up(t.latency_s) for t in g.tasks]


def model_size(g: IterationGraph) -> int:
    """Tasks + piece-arc memberships (arcs x flows) + precedence edges: what the model has to hold."""
    return len(g.tasks) + g.arc_uses() + int(len(g.edges))


def _tails(g: IterationGraph, dur: list[int], lat: list[int], order: list[int], succ: list[list[int]]) -> list[int]:
    """Longest chain (durations + latencies) from each task to the end, the task included."""
    tail = [0] * len(g.tasks)
    for j in reversed(order):
        tail[j] = dur[j] + lat[j] + max((tail[s] for s in succ[j]), default=0)
    return tail


def _schedule(
    g: IterationGraph,
    method: str,
    status: str,
    start: list[int] | None,
    dur: list[int],
    lat: list[int],
    unit: float,
    bound_units: float | None,
    wall: float,
    details: dict[str, Any],
) -> Schedule:
    if start is None:
        return Schedule(
            status,
            method,
            None,
            None if bound_units is None else bound_units * unit,
            None,
            None,
            None,
            unit,
            wall,
            details,
        )
    s = np.asarray(start, dtype=np.int64)
    end = s + np.asarray(dur, dtype=np.int64)
    mk_units = int((end + np.asarray(lat, dtype=np.int64)).max()) if len(s) else 0
    mk = mk_units * unit
    bound = None if bound_units is None else min(bound_units, mk_units) * unit
    gap = None if bound is None else (0.0 if mk <= 0 else max(0.0, (mk - bound) / mk))
    return Schedule(status, method, mk, bound, gap, s * unit, end * unit, unit, wall, details)


# ----------------------------------------------------------------------------------------------
# List scheduling (serial schedule generation)
# ----------------------------------------------------------------------------------------------
class _Profile:
    """Usage of one resource over time: breakpoints ``ts`` and usage ``us[k]`` on ``[ts[k], ts[k+1])``."""

    __slots__ = ("cap", "ts", "us")

    def __init__(self, cap: int) -> None:
        self.cap, self.ts, self.us = cap, [0], [0]

    def earliest(self, t: int, p: int) -> int:
        """Earliest start >= t with usage < cap throughout ``[start, start + p)``."""
        k = bisect.bisect_right(self.ts, t) - 1
        start = t
        while True:
            j = k
            while j < len(self.ts) and self.ts[j] < start + p:
                if self.us[j] >= self.cap:
                    break
                j += 1
            else:
                return start
            if self.ts[j] >= start + p:
                return start
            start, k = self.ts[j + 1], j + 1  # the last segment has usage 0 < cap: j + 1 exists

    def _split(self, t: int) -> int:
        k = bisect.bisect_right(self.ts, t) - 1
        if self.ts[k] != t:
            self.ts.insert(k + 1, t)
            self.us.insert(k + 1, self.us[k])
            k += 1
        return k

    def add(self, s: int, e: int) -> None:
        a = self._split(s)
        b = self._split(e)
        for k in range(a, b):
            self.us[k] += 1
        # keep neighbouring segments of equal usage merged: a busy stretch is then one segment
        if b < len(self.ts) and self.us[b] == self.us[b - 1]:
            del self.ts[b], self.us[b]
        if a > 0 and self.us[a] == self.us[a - 1]:
            del self.ts[a], self.us[a]


#: Priority rules of :func:`list_schedule`; ``best`` runs each and keeps the shortest schedule.
PRIORITY_RULES = ("tail", "after", "earliest")
#: Forward-backward improvement rounds of :func:`list_schedule` (each: one backward and one forward pass).
JUSTIFY_ROUNDS = 3
#: Above this many tasks the defaults are one pass (``tail``, no justification): a pass is pure
#: Python, measured ~25 s at 10^5 tasks (dlrm-128-d4), so the five to nine passes of ``best`` would
#: take minutes there.
LARGE_GRAPH_TASKS = 20_000


def list_schedule(
    g: IterationGraph,
    *,
    time_unit_s: float = DEFAULT_TIME_UNIT_S,
    priority: str | None = None,
    justify: int | None = None,
) -> Schedule:
    """List scheduling (serial schedule generation): tasks are placed one at a time, each only after
    all its predecessors, at the earliest time >= their ends (plus their latencies) at which its
    server, or every arc of its path, has a free unit for its whole duration (gaps left earlier
    are filled). Which ready task goes next is the ``priority`` rule:

    * ``tail``: the one with the longest remaining chain (durations + latencies) to the end;
    * ``after``: the one whose successors' longest chain is longest (its own duration left out, so
      that a long transfer at the end of the iteration does not go before a short one on the
      critical path);
    * ``earliest``: the one that can start first given the resources already taken (ties: longest
      tail) - found lazily, since a task's earliest start only grows as resources fill up;
    * ``best``: each of them, keeping the shortest schedule.

    Then up to ``justify`` rounds of forward-backward improvement (the classic RCPSP
    "justification"): schedule the tasks backwards in time, latest-ending first, as late as
    possible, then forwards again, earliest-starting first; a round is kept only when it shortens
    the schedule. Defaults: ``best`` and :data:`JUSTIFY_ROUNDS` rounds; above
    :data:`LARGE_GRAPH_TASKS` tasks, ``tail`` and none. Status ``feasible``; ``bound_s`` is the best of
    :func:`~topoopt_ilp.schedule.iteration_graph.lower_bounds` for the rounded durations."""
    started = time.perf_counter()
    large = len(g.tasks) > LARGE_GRAPH_TASKS
    priority = ("tail" if large else "best") if priority is None else priority
    justify = (0 if large else JUSTIFY_ROUNDS) if justify is None else justify
    if priority not in PRIORITY_RULES + ("best",):
        raise InputError(
            f"unknown priority rule {brief(priority)}; choose one of {', '.join(PRIORITY_RULES + ('best',))}"
        )
    dur, lat = _units(g, time_unit_s)
    N = len(g.tasks)
    succ, pred = g.successors(), g.predecessors()
    order = g.topological_order()
    tail = _tails(g, dur, lat, order, succ)
    zero = [0] * N
    neg_tail = [-v for v in tail]

    def makespan(st: list[int]) -> int:
        return max((st[j] + dur[j] + lat[j] for j in range(N)), default=0)

    best: tuple[int, list[int], str] | None = None
    neg_after = [dur[j] - tail[j] for j in range(N)]
    for rule in PRIORITY_RULES if priority == "best" else (priority,):
        key = neg_after if rule == "after" else neg_tail
        start = _serial(g, dur, succ, pred, lat, zero, key, neg_tail, rule == "earliest")
        if best is None or makespan(start) < best[0]:
            best = (makespan(start), start, rule)
    mk, start, how = best
    for _ in range(max(0, int(justify))):
        # backward pass on the reversed graph: an edge a -> b with lag l_a becomes b -> a, l_a before a
        rev = _serial(g, dur, pred, succ, zero, lat, [-(start[j] + dur[j] + lat[j]) for j in range(N)], neg_tail, False)
        horizon = max((rev[j] + dur[j] for j in range(N)), default=0)
        back = [horizon - rev[j] - dur[j] for j in range(N)]
        fwd = _serial(g, dur, succ, pred, lat, zero, back, neg_tail, False)
        if makespan(fwd) >= mk:
            break
        mk, start, how = makespan(fwd), fwd, how + "+justified"
    lb = _unit_bound(g, dur, lat, order, tail)
    return _schedule(
        g,
        "heuristic",
        "feasible",
        start,
        dur,
        lat,
        time_unit_s,
        lb,
        time.perf_counter() - started,
        {"lower_bounds": lower_bounds(g), "source": "list schedule", "priority": how},
    )


def _serial(
    g: IterationGraph,
    dur: list[int],
    succ: list[list[int]],
    pred: list[list[int]],
    lag_out: list[int],
    lag_in: list[int],
    key: list[int],
    tie: list[int],
    earliest: bool,
) -> list[int]:
    """One serial schedule generation pass; returns the starts (units).

    A task becomes ready when all of ``pred`` are placed, at the latest of their ends plus their
    ``lag_out`` plus its own ``lag_in``. Ready tasks go by smallest ``(key, tie)``; with ``earliest``
    the key is instead the task's earliest feasible start (a lower bound refreshed lazily)."""
    N = len(g.tasks)
    resources: dict[Any, _Profile] = {}
    uses: list[list[_Profile]] = []
    for t in g.tasks:
        mine = []
        if t.server >= 0:
            mine.append(resources.setdefault(("server", t.server), _Profile(1)))
        for u, v in t.arcs:
            mine.append(resources.setdefault((u, v), _Profile(int(g.x[u, v]))))
        uses.append(mine)

    def fit(j: int, t: int) -> int:
        p = dur[j]
        if p == 0 or not uses[j]:
            return t
        while True:
            moved = t
            for r in uses[j]:
                moved = max(moved, r.earliest(moved, p))
            if moved == t:
                return t
            t = moved

    left = [len(p) for p in pred]
    ready_at = list(lag_in)
    heap = [((ready_at[j] if earliest else key[j]), tie[j], j) for j in range(N) if left[j] == 0]
    heapq.heapify(heap)
    start = [0] * N
    while heap:
        _, tj, j = heapq.heappop(heap)
        t = fit(j, ready_at[j])
        if earliest and heap and (t, tj) > heap[0][:2]:
            heapq.heappush(heap, (t, tj, j))  # another ready task may start first now
            continue
        if dur[j] > 0:
            for r in uses[j]:
                r.add(t, t + dur[j])
        start[j] = t
        done = t + dur[j] + lag_out[j]
        for s in succ[j]:
            ready_at[s] = max(ready_at[s], done + lag_in[s])
            left[s] -= 1
            if left[s] == 0:
                heapq.heappush(heap, ((ready_at[s] if earliest else key[s]), tie[s], s))
    return start


def _unit_bound(g: IterationGraph, dur: list[int], lat: list[int], order: list[int], tail: list[int]) -> int:
    """max(busiest server, busiest arc / links, critical path), in rounded units."""
    server = np.zeros(g.n, dtype=np.int64)
    arc = np.zeros((g.n, g.n), dtype=np.int64)
    for j, t in enumerate(g.tasks):
        if t.server >= 0:
            server[t.server] += dur[j]
        for u, v in t.arcs:
            arc[u, v] += dur[j]
    net = max((math.ceil(int(arc[u, v]) / int(g.x[u, v])) for u, v in zip(*np.nonzero(arc))), default=0)
    return int(max(int(server.max(initial=0)), net, max(tail, default=0)))


# ----------------------------------------------------------------------------------------------
# The CP-SAT model
# ----------------------------------------------------------------------------------------------
# Data:      tasks j with integer duration p_j and latency l_j (units, rounded up; l_j > 0 only for
#            flow pieces: alpha x hops); precedence edges (a, b); compute tasks C_v on server v;
#            flow pieces P_uv whose path uses arc u->v, which has X_uv parallel links; horizon H =
#            the list schedule's makespan; LB = max(busiest server, ceil(busiest arc / X), critical path).
# Variables: S_j in [0, H - p_j - l_j] integer start; interval I_j = [S_j, S_j + p_j);
#            C in [LB, H] the makespan.
# Constraints:
#   precedence:  S_b >= S_a + p_a + l_a                         for every edge (a, b)
#   servers:     NoOverlap({I_j : j in C_v, p_j > 0})            for every server v
#   arcs:        Cumulative({I_j : j in P_uv, p_j > 0}, demand 1, capacity X_uv)   for every arc
#                (NoOverlap when X_uv = 1; left out when |P_uv| <= X_uv: it cannot bind)
#   makespan:    C >= S_j + p_j + l_j                            for every task without successor
# Objective: minimise C.  Warm start: AddHint(S_j = list-schedule start).
def build_schedule_model(
    g: IterationGraph, dur: list[int], lat: list[int], horizon: int, lb: int, hint: list[int] | None = None
):
    """The CP-SAT model (comment block above). Returns ``(model, starts, makespan_var)``."""
    from ortools.sat.python import cp_model

    m = cp_model.CpModel()
    N = len(g.tasks)
    S = [m.new_int_var(0, max(0, horizon - dur[j] - lat[j]), f"S{j}") for j in range(N)]
    intervals = [m.new_fixed_size_interval_var(S[j], dur[j], f"I{j}") for j in range(N)]
    for a, b in g.edges.tolist():
        m.add(S[b] >= S[a] + dur[a] + lat[a])
    per_server: dict[int, list] = {}
    per_arc: dict[tuple[int, int], list] = {}
    for j, t in enumerate(g.tasks):
        if dur[j] == 0:
            continue
        if t.server >= 0:
            per_server.setdefault(t.server, []).append(intervals[j])
        for arc in t.arcs:
            per_arc.setdefault(arc, []).append(intervals[j])
    for ivs in per_server.values():
        if len(ivs) > 1:
            m.add_no_overlap(ivs)
    for (u, v), ivs in per_arc.items():
        cap = int(g.x[u, v])
        if len(ivs) <= cap:
            continue
        if cap == 1:
            m.add_no_overlap(ivs)
        else:
            m.add_cumulative(ivs, [1] * len(ivs), cap)
    C = m.new_int_var(min(lb, horizon), horizon, "makespan")
    has_succ = np.zeros(N, dtype=bool)
    if len(g.edges):
        has_succ[g.edges[:, 0]] = True
    for j in np.flatnonzero(~has_succ).tolist():
        m.add(C >= S[j] + dur[j] + lat[j])
    m.minimize(C)
    if hint is not None:
        for j in range(N):
            m.add_hint(S[j], int(hint[j]))
        m.add_hint(C, horizon)
    return m, S, C


def solve_schedule(
    g: IterationGraph,
    *,
    time_limit_s: float | None = None,
    time_unit_s: float = DEFAULT_TIME_UNIT_S,
    threads: int = 2,
    seed: int = 0,
    warm_start: bool = True,
    max_size: int = MAX_MODEL_SIZE,
    log: bool = False,
) -> Schedule:
    """Minimise the makespan exactly with CP-SAT (module docstring). The list schedule gives the
    horizon and, with ``warm_start``, the hint. Refuses (UnsupportedError) a model above ``max_size``
    (:func:`model_size`) before building it."""
    from ortools.sat.python import cp_model

    started = time.perf_counter()
    if time_limit_s is not None and not (math.isfinite(time_limit_s) and time_limit_s >= 0):
        raise InputError(f"time limit must be a finite number >= 0, got {time_limit_s}")
    size = model_size(g)
    if size > max_size:
        raise UnsupportedError(
            f"the scheduling model would hold {size:,} terms ({len(g.tasks):,} tasks, {g.arc_uses():,} flow-arc uses, "
            f"{len(g.edges):,} precedence edges), above the exact method's limit of {max_size:,}; "
            "use --method heuristic (list scheduling)"
        )
    heur = list_schedule(g, time_unit_s=time_unit_s)
    dur, lat = _units(g, time_unit_s)
    hint = np.rint(heur.start_s / time_unit_s).astype(np.int64).tolist()
    horizon = int(round(heur.makespan_s / time_unit_s))
    lb = int(round(heur.bound_s / time_unit_s))
    model, S, C = build_schedule_model(g, dur, lat, horizon, lb, hint if warm_start else None)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = max(1, int(threads))
    solver.parameters.random_seed = int(seed)
    solver.parameters.log_search_progress = bool(log)
    if time_limit_s is not None:
        solver.parameters.max_time_in_seconds = float(time_limit_s)
    code = solver.solve(model)
    details = {
        "lower_bounds": lower_bounds(g),
        "list_makespan_s": heur.makespan_s,
        "model_size": size,
        "cpsat_status": solver.status_name(code),
        "cpsat_wall_time_s": solver.wall_time,
        "source": "CP-SAT",
    }
    wall = time.perf_counter() - started
    if code == cp_model.OPTIMAL:
        start = [solver.value(v) for v in S]
        return _schedule(g, "exact", "optimal", start, dur, lat, time_unit_s, solver.value(C), wall, details)
    if code == cp_model.FEASIBLE:
        start = [solver.value(v) for v in S]
        bound = max(lb, math.ceil(solver.best_objective_bound - 1e-9))
        return _schedule(g, "exact", "feasible", start, dur, lat, time_unit_s, bound, wall, details)
    if code == cp_model.UNKNOWN:
        if time_limit_s == 0:  # as every exact method: a time limit of 0 runs nothing
            return _schedule(g, "exact", "no_solution", None, dur, lat, time_unit_s, lb, wall, details)
        # CP-SAT found nothing in its time: the list schedule it started from is still a schedule
        details["source"] = "list schedule (CP-SAT found no schedule within the time limit)"
        return _schedule(g, "exact", "feasible", hint, dur, lat, time_unit_s, lb, wall, details)
    # INFEASIBLE cannot happen (the list schedule fits the horizon); MODEL_INVALID is a bug here.
    raise RuntimeError(f"CP-SAT returned {solver.status_name(code)} on the scheduling model")


# ----------------------------------------------------------------------------------------------
# Schedule files
# ----------------------------------------------------------------------------------------------
SCHEDULE_FORMAT = "topoopt-schedule"
#: Version 2 states what the graph is rebuilt from (micro-batches, the input files' SHA-256); the
#: version 1 files of earlier releases lack it and cannot be checked.
SCHEDULE_VERSION = 2
_FILE_KEYS = {
    "format",
    "version",
    "instance",
    "instance_sha256",
    "solution",
    "solution_sha256",
    "status",
    "method",
    "makespan_s",
    "bound_s",
    "gap",
    "time_unit_s",
    "wall_time_s",
    "forward_fraction",
    "routing",
    "micro_batches",
    "tasks",
    "summary",
}
_FILE_REQUIRED = _FILE_KEYS - {"summary"}  # every key schedule_to_dict writes (the summary is the CLI's)
_TASK_KEYS = {"name", "kind", "start_s", "end_s", "duration_s", "server", "path", "bytes", "latency_s"}
_SHA256_HEX = frozenset("0123456789abcdef")


def file_sha256(path: str) -> str:
    """Hex SHA-256 of a file's bytes (what a schedule file records of its instance and solution)."""
    import hashlib

    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}", source=str(path)) from None
    return digest.hexdigest()


def schedule_to_dict(
    g: IterationGraph,
    sched: Schedule,
    *,
    instance: str | None = None,
    instance_sha256: str | None = None,
    solution: str | None = None,
    solution_sha256: str | None = None,
) -> dict[str, Any]:
    """JSON form (``"format": "topoopt-schedule"``, version :data:`SCHEDULE_VERSION`): the summary,
    what the graph is rebuilt from (forward fraction, routing, micro-batches; the time unit, which
    the check's makespan tolerance needs; the instance and solution files' SHA-256, null when the
    schedule was not made from files) and, when there is one, every task's times (with its kind,
    server or path, bytes and latency for the reader's convenience). :func:`read_schedule` reads it."""
    out: dict[str, Any] = {
        "format": SCHEDULE_FORMAT,
        "version": SCHEDULE_VERSION,
        "instance": instance,
        "instance_sha256": instance_sha256,
        "solution": solution,
        "solution_sha256": solution_sha256,
        "status": sched.status,
        "method": sched.method,
        "makespan_s": sched.makespan_s,
        "bound_s": sched.bound_s,
        "gap": sched.gap,
        "time_unit_s": sched.time_unit_s,
        "wall_time_s": sched.wall_time_s,
        "forward_fraction": g.forward_fraction,
        "routing": g.routing,
        "micro_batches": g.micro_batches,
        "tasks": [],
    }
    if sched.has_schedule:
        for j, t in enumerate(g.tasks):
            row: dict[str, Any] = {
                "name": t.name,
                "kind": t.kind,
                "start_s": float(sched.start_s[j]),
                "end_s": float(sched.end_s[j]),
                "duration_s": t.duration_s,
            }
            if t.is_flow:
                row.update(path=list(t.path), bytes=t.bytes, latency_s=t.latency_s)
            elif t.is_compute:
                row["server"] = t.server
            out["tasks"].append(row)
    return out


@dataclass(frozen=True, eq=False)
class ScheduleFile:
    """A schedule file as :func:`read_schedule` read it: the parameters that rebuild its task graph,
    the SHA-256 of the files it was made from (None: not made from files), its claims (status,
    makespan, bound) and each task's times by task name, in the file's order. :meth:`schedule` lines
    the times up with a rebuilt graph for :func:`~topoopt_ilp.schedule.iteration_graph.check_schedule`."""

    source: str | None
    status: str
    method: str
    makespan_s: float
    bound_s: float | None
    gap: float | None
    time_unit_s: float
    forward_fraction: float
    routing: str
    micro_batches: int
    instance_sha256: str | None
    solution_sha256: str | None
    names: tuple[str, ...]
    start_s: np.ndarray
    end_s: np.ndarray
    wall_time_s: float = 0.0
    instance: str | None = None
    solution: str | None = None
    described: tuple[Mapping[str, Any], ...] = ()  # per task, what the file says of it beyond its times
    summary: Mapping[str, Any] | None = None  # the CLI's summary, numbers checked; --check recomputes it

    def schedule(self, g: IterationGraph) -> Schedule:
        """The file's times in ``g``'s task order; InputError when the file's tasks are not exactly
        ``g``'s (one missing, one extra) or ``g`` was built with other parameters."""
        where = {"source": self.source} if self.source else {}
        for what, mine, theirs in (
            ("micro_batches", self.micro_batches, g.micro_batches),
            ("forward_fraction", self.forward_fraction, g.forward_fraction),
            ("routing", self.routing, g.routing),
        ):
            if mine != theirs:
                raise InputError(
                    f"the schedule has {what} {brief(mine)}, the graph {brief(theirs)}", field=what, **where
                )
        pos = {name: k for k, name in enumerate(self.names)}
        order = []
        for t in g.tasks:
            k = pos.pop(t.name, None)
            if k is None:
                raise InputError(
                    f"task {brief(t.name)} of the iteration graph is missing from the schedule ({len(self.names)} "
                    f"task(s) in the file, {len(g.tasks)} in the graph)",
                    field="tasks",
                    **where,
                )
            order.append(k)
        if pos:
            extra = min(pos, key=pos.get)
            raise InputError(
                f"task {brief(extra)} is not in the iteration graph (tasks[{pos[extra]}])", field="tasks", **where
            )
        idx = np.asarray(order, dtype=np.int64)
        return Schedule(
            self.status,
            self.method,
            self.makespan_s,
            self.bound_s,
            self.gap,
            self.start_s[idx],
            self.end_s[idx],
            self.time_unit_s,
            self.wall_time_s,
            {"source": f"file {self.source or '(memory)'}"},
        )


def _number(v: Any, field: str, *, low: float = 0.0, positive: bool = False, null: bool = False) -> float | None:
    if v is None and null:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InputError(f"expected a number{' or null' if null else ''}, got {type_name(v)}", field=field)
    value = as_number(v, field)  # finite; a 401-digit integer is refused by its length, not converted
    if value < low or (positive and value <= low):
        raise InputError(f"must be {'>' if positive else '>='} {low:g}, got {value:g}", field=field)
    return value


def sha256_field(v: Any, field: str) -> str | None:
    """A file's recorded SHA-256 (64 lowercase hex digits) or None; InputError naming ``field``."""
    if v is not None and not (isinstance(v, str) and len(v) == 64 and set(v) <= _SHA256_HEX):
        raise InputError("expected a SHA-256 as 64 lowercase hex digits, or null", field=field)
    return v


def _task_values(row: Mapping[str, Any], field: str) -> None:
    """The types of a task's descriptive values (``field % key`` names one); whether they are the
    task graph's is :func:`claim_violations`' question."""
    if not isinstance(row["kind"], str):
        raise InputError(f"expected a task kind, got {type_name(row['kind'])}", field=field % "kind")
    for key in ("duration_s", "bytes", "latency_s"):
        if key in row:
            _number(row[key], field % key)
    as_int(row.get("server", 0), field % "server", low=0, high=MAX_SERVERS - 1)
    as_int_list(row.get("path", []), field % "path", low=0, high=MAX_SERVERS - 1)


def parse_schedule(data: Any, source: str | None = None) -> ScheduleFile:
    """A schedule file's JSON (``schedule_to_dict``'s form), checked strictly: the format and version,
    no unknown or missing key (at the top and in each task), each value's type and range, task names
    unique. Every problem is one InputError naming the field (``tasks[12].start_s``)."""
    E = InputError
    check_format(data, SCHEDULE_FORMAT, E)
    top = json_object(data, "", _FILE_KEYS, _FILE_REQUIRED, err=E)
    if top["format"] != SCHEDULE_FORMAT:
        raise E(f"expected {SCHEDULE_FORMAT!r}, got {brief(top['format'])}", field="format")
    if isinstance(top["version"], bool) or not isinstance(top["version"], int) or top["version"] != SCHEDULE_VERSION:
        hint = (
            " (files of earlier releases do not say what they were made from: schedule again with --out)"
            if top["version"] == 1
            else ""
        )
        raise E(
            f"unsupported version {brief(top['version'])}; this release reads version {SCHEDULE_VERSION}{hint}",
            field="version",
        )
    if top["status"] not in ("optimal", "feasible"):
        raise E(f"must be optimal or feasible (a file holds a schedule), got {brief(top['status'])}", field="status")
    if top["method"] not in ("exact", "heuristic"):
        raise E(f"must be exact or heuristic, got {brief(top['method'])}", field="method")
    if top["routing"] not in ("given", "shortest_path"):
        raise E(f"must be given or shortest_path, got {brief(top['routing'])}", field="routing")
    mb = as_int(top["micro_batches"], "micro_batches", low=1, high=MAX_GRAPH_TASKS)  # each makes tasks
    ff = _number(top["forward_fraction"], "forward_fraction")
    if ff > 1:
        raise E(f"must be <= 1, got {brief(ff)}", field="forward_fraction")
    for key in ("instance", "solution"):
        if top.get(key) is not None and not isinstance(top[key], str):
            raise E(f"expected a file name or null, got {type_name(top[key])}", field=key)
    tasks = json_list(top["tasks"], "tasks", err=E)
    names, starts, ends = [], np.empty(len(tasks)), np.empty(len(tasks))
    described: list[Mapping[str, Any]] = []
    seen: set[str] = set()
    for k, row in enumerate(tasks):
        f = f"tasks[{k}]"
        row = json_object(row, f, _TASK_KEYS, {"name", "kind", "start_s", "end_s", "duration_s"}, err=E)
        name = row["name"]
        if not isinstance(name, str):
            raise E(f"expected a task name, got {type_name(name)}", field=f + ".name")
        if name in seen:
            raise E(f"task {brief(name)} appears twice", field=f + ".name")
        seen.add(name)
        names.append(name)
        try:
            starts[k] = _number(row["start_s"], f"{f}.start_s")
            ends[k] = _number(row["end_s"], f"{f}.end_s")
            if ends[k] < starts[k]:
                raise E(f"ends at {ends[k]:.9g} s, before its start {starts[k]:.9g} s", field=f"{f}.end_s")
            _task_values(row, f"{f}.%s")
        except InputError as exc:  # the field as the file writes it, the task by its name
            raise E(f"{exc.reason} (task {brief(name)})", field=exc.field) from None
        described.append(
            MappingProxyType({key: v for key, v in row.items() if key not in ("name", "start_s", "end_s")})
        )
    starts.setflags(write=False)
    ends.setflags(write=False)
    return ScheduleFile(
        source=source,
        status=top["status"],
        method=top["method"],
        makespan_s=_number(top["makespan_s"], "makespan_s"),
        bound_s=_number(top.get("bound_s"), "bound_s", null=True),
        gap=_number(top.get("gap"), "gap", null=True),
        time_unit_s=_number(top["time_unit_s"], "time_unit_s", positive=True),
        forward_fraction=ff,
        routing=top["routing"],
        micro_batches=mb,
        instance_sha256=sha256_field(top["instance_sha256"], "instance_sha256"),
        solution_sha256=sha256_field(top["solution_sha256"], "solution_sha256"),
        names=tuple(names),
        start_s=starts,
        end_s=ends,
        wall_time_s=_number(top.get("wall_time_s", 0.0), "wall_time_s"),
        instance=top.get("instance"),
        solution=top.get("solution"),
        described=tuple(described),
        summary=None if top.get("summary") is None else _summary(top["summary"], "summary"),
    )


#: The summary's entries that are text (file names, choices), objects and lists; every other entry
#: is a number or null.
_SUMMARY_TEXT = {"instance", "solution", "method", "status", "routing", "instance_overlap"}
_SUMMARY_OBJECTS = {"summary", "evaluator", "lower_bounds", "busiest_server", "busiest_arc"}
_SUMMARY_LISTS = {"arc"}


def _summary(value: Any, field: str, depth: int = 0) -> Any:
    """The summary the CLI writes beside the schedule (objects of numbers and names, an arc as a
    list): text where :data:`_SUMMARY_TEXT` says, every other entry a finite number or null, nothing
    nested deeper than it writes. Whether the values are right is the ``--check`` command's
    question (it recomputes them)."""
    if depth > 3:
        raise InputError("nested deeper than a schedule summary is", field=field)
    key = field.rsplit(".", 1)[-1]
    if isinstance(value, (dict, list)) and key not in (_SUMMARY_OBJECTS if isinstance(value, dict) else _SUMMARY_LISTS):
        raise InputError(f"expected a number, text or null, got {type_name(value)}", field=field)
    if isinstance(value, dict):
        return {k: _summary(v, f"{field}.{brief(k) if len(k) > 40 else k}", depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_summary(v, f"{field}[{k}]", depth + 1) for k, v in enumerate(json_list(value, field, err=InputError))]
    if key in _SUMMARY_TEXT:
        if value is not None and not isinstance(value, str):
            raise InputError(f"expected text or null, got {type_name(value)}", field=field)
        return value
    return _number(value, field, low=-math.inf, null=True)


def claim_violations(g: IterationGraph, sf: ScheduleFile) -> list[str]:
    """What a schedule file claims beyond its task times, checked against the rebuilt graph ``g``
    (:func:`~topoopt_ilp.schedule.iteration_graph.check_schedule` checks the times themselves):

    * every start and end lies on the file's time grid (the schedules are computed in whole units,
      and the check's makespan tolerance is one unit: a coarser unit written into the file would
      let a false makespan pass);
    * what the file says of each task (kind, duration, server, path, bytes, latency) is the graph's;
    * the bound is at least the one any schedule of ``g`` meets (busiest server, busiest arc,
      critical path, in rounded units; for list scheduling it is exactly that), ``optimal`` only
      with the bound at the makespan (and never from list scheduling), and the gap is
      (makespan - bound) / makespan. A bound CP-SAT proved above that floor is taken as stated:
      only solving again could confirm it."""
    out: list[str] = []
    unit = sf.time_unit_s
    for label, times in (("start", sf.start_s), ("end", sf.end_s)):
        # relative to the time itself (a grid time k * unit is that up to float rounding): a tolerance
        # in units lets every time pass once the unit dwarfs them (1e4 s: times of ms are ~0 units)
        off = np.flatnonzero(np.abs(times - np.rint(times / unit) * unit) > 1e-9 * np.abs(times))
        if off.size:
            k = int(off[0])
            out.append(
                f"task {sf.names[k]}: {label} {times[k]:.9g} s is not a whole number of time units of {unit:.3g} s"
            )
            break
    pos = {name: k for k, name in enumerate(sf.names)}
    for t in g.tasks:
        said = sf.described[pos[t.name]] if sf.described and t.name in pos else {}
        truth = {
            "kind": t.kind,
            "duration_s": t.duration_s,
            "server": t.server,
            "path": list(t.path),
            "bytes": t.bytes,
            "latency_s": t.latency_s,
        }
        written = ("path", "bytes", "latency_s") if t.is_flow else ("server",) if t.is_compute else ()
        if sf.described and t.name in pos and (omitted := [key for key in written if key not in said]):
            out.append(
                f"task {t.name}: the file omits its {omitted[0]} (the task graph's is {brief(truth[omitted[0]])})"
            )
            if len(out) >= 20:
                break
            continue
        for key, value in said.items():
            real = truth[key]
            same = (
                value == real
                if isinstance(real, (str, list)) or key == "server"
                else isinstance(value, (int, float))
                and not isinstance(value, bool)
                and math.isclose(value, real, rel_tol=1e-9, abs_tol=1e-15)
            )
            if not same:
                out.append(f"task {t.name}: the file says {key} {brief(value)}, the task graph {brief(real)}")
                break
        if len(out) >= 20:
            break
    try:
        dur, lat = _units(g, unit, any_coarseness=True)
    except InputError as exc:  # the file's unit: name the file and the field
        raise InputError(exc.reason, source=sf.source, field="time_unit_s") from None
    order = g.topological_order()
    floor = min(_unit_bound(g, dur, lat, order, _tails(g, dur, lat, order, g.successors())) * unit, sf.makespan_s)
    tol = 1e-9 * max(1.0, sf.makespan_s) + 1e-12
    if sf.bound_s is None:
        out.append("the file states no bound")
    elif sf.method == "heuristic" and abs(sf.bound_s - floor) > tol:
        out.append(f"bound {sf.bound_s:.9g} s: list scheduling's bound is {floor:.9g} s")
    elif sf.bound_s < floor - tol:
        out.append(f"bound {sf.bound_s:.9g} s is below {floor:.9g} s, the bound every schedule of the graph meets")
    if sf.status == "optimal" and (sf.method == "heuristic" or sf.bound_s is None or sf.bound_s < sf.makespan_s - tol):
        out.append(
            f"status optimal, but the bound {sf.bound_s} s is not the makespan {sf.makespan_s:.9g} s"
            + (" (list scheduling never claims optimal)" if sf.method == "heuristic" else "")
        )
    if sf.bound_s is not None:
        gap = 0.0 if sf.makespan_s <= 0 else max(0.0, (sf.makespan_s - sf.bound_s) / sf.makespan_s)
        if sf.gap is None or abs(sf.gap - gap) > 1e-9:
            out.append(f"gap {sf.gap} is not (makespan - bound) / makespan = {gap:.9g}")
    return out


def read_schedule(path: str | os.PathLike) -> ScheduleFile:
    """Read a schedule file (:func:`parse_schedule`; malformed JSON, an oversized file, a NaN are refused
    as for solution files: ``topoopt_ilp.files.jsonio``'s reader). A file the CLI wrote is always read back."""
    data = read_json(path, InputError, MAX_SOLUTION_BYTES)
    return with_source(lambda: parse_schedule(data, str(path)), str(path), InputError)


def write_schedule(
    path: str | os.PathLike,
    g: IterationGraph,
    sched: Schedule,
    *,
    summary: dict[str, Any] | None = None,
    **provenance: str | None,
) -> None:
    """Write :func:`schedule_to_dict` (plus ``summary``) atomically; ``provenance``: ``instance``,
    ``instance_sha256``, ``solution``, ``solution_sha256``. Refuses a schedule without times."""
    if not sched.has_schedule:
        raise InputError("the schedule has no task times to write")
    data = schedule_to_dict(g, sched, **provenance)
    if summary is not None:
        data["summary"] = summary
    write_json_atomic(path, json_safe(data))
