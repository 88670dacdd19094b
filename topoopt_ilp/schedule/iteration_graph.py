"""The task graph of one training iteration, for scheduling (``topoopt schedule``), and its checks.

The toolkit's time model (docs/guide/evaluator.md) scores an iteration as ``T_compute + T_comm`` or
``max(T_compute, T_comm)``: no precedence, no pipeline bubbles. This module spells out what one
iteration *does*, task by task, so that :mod:`topoopt_ilp.models.schedule` can schedule it (a
resource-constrained project scheduling problem, RCPSP, as TOPO-X casts flow scheduling).

Tasks (from a workload instance, a :class:`~topoopt_ilp.core.strategy.Strategy`, a topology X and a routing)
---------------------------------------------------------------------------------------------------
Notation of :mod:`topoopt_ilp.core.strategy`: layer i at degree k runs replica r on server ``s + r n/k``,
which processes the sample range ``[r B/k, (r+1) B/k)``; the n batch "units" ``[t B/n, (t+1) B/n)``
make every intersection of ranges exact.

**Micro-batches** (``micro_batches`` = M, GPipe): micro-batch m = 0..M-1 holds 1/M of every batch
unit, so each replica processes 1/M of its samples in each, and each pair of replicas exchanges
1/M of its bytes per micro-batch. Every compute task and every flow below except the AllReduce
then becomes M tasks, one per micro-batch, each with 1/M of the duration or bytes; their keys carry
m after the ids (``("fwd", i, r, m)``, ``("reshard_fwd", i, a, b, m, p)``, ``("block", b, m)``,
``("lookup", b, r, m, p)``; names end in ``mb{m}``) and the precedence below holds per micro-batch.
The AllReduce stays once per iteration, after the backward of *all* micro-batches. So a pipeline's
stages can work on different micro-batches at once (the bubble shrinks as M grows), while each
server's total compute and each arc's total bytes do not change. With M = 1 the keys, durations,
bytes and edges are exactly those of the graph without micro-batches.

* **compute** (one server each; a server runs one compute task at a time):

  - ``("fwd", i, r)`` forward of layer i, replica r: ``forward_fraction * Workload.layer_time(i, k)``;
  - ``("bwd", i, r)`` backward: ``(1 - forward_fraction) * layer_time(i, k)``. The default
    ``forward_fraction`` 1/3 is the usual rule that a backward pass costs about twice the forward
    (gradients w.r.t. activations and w.r.t. weights); it is an assumption, hence a parameter;
  - ``("block", b)`` block b's ``compute_s`` on its server, as one task before its lookups leave
    (the forward lookup; the table's update from the returned gradients is taken as part of it,
    so the server's total compute is exactly :func:`~topoopt_ilp.core.strategy.strategy_demand`'s).

* **flows** (the bytes of :func:`~topoopt_ilp.core.strategy.strategy_demand`, split into one task per
  path piece: a flow routed over several paths becomes one task per path, carrying its share):

  - ``("reshard_fwd", i, a, b, p)``: replica a of layer i -> replica b of layer i+1,
    ``activation_bytes_i * |I_a ∩ J_b| / B``;
  - ``("reshard_bwd", i, a, b, p)``: the gradients of the same activations, b -> a, same bytes;
  - ``("lookup", b, r, p)``: block b's server -> replica r of its consumer, ``lookup_bytes / k``;
  - ``("lookup_grad", b, r, p)``: the gradients back, replica r -> block b's server;
  - ``("allreduce", g, q, m, p)``: AllReduce group g, ring q (fraction f of the group's bytes), ring
    member m -> its ring successor, ``f * 2(k-1)/k * S_g`` (the evaluator's ring AllReduce, one flow
    per ring edge; the 2(k-1) pipelined steps of a real ring are not modelled one by one).

  A flow between a server and itself, or of zero bytes, is no task: its precedence becomes a
  direct edge (producer -> consumer), as the strategy drops such bytes.

* **piece p** of a flow follows one node path; it takes ``bytes / B`` seconds (B = one link's
  bytes/s) and, for that time, one link of every arc on its path (an arc i->j has ``X[i, j]``
  parallel links = units of capacity); its data is usable ``hop_latency * hops`` after it ends
  (``latency_s``: a lag before its successors, and counted in the makespan).

Precedence (``edges``: the successor starts after the predecessor ends, plus the predecessor's
``latency_s``; with micro-batches, each edge below but those into ``ready`` joins tasks of one
micro-batch m, e.g. ``fwd(i, a, m) -> reshard_fwd(i, a, b, m) -> fwd(i+1, b, m)``):

* ``fwd(i, a) -> reshard_fwd(i, a, b) -> fwd(i+1, b)`` for every pair with intersecting ranges;
* ``bwd(i+1, b) -> reshard_bwd(i, a, b) -> bwd(i, a)``; ``fwd(i, r) -> bwd(i, r)`` (the backward
  needs its activations; for the last layer this is the turn from forward to backward);
* ``block(b) -> lookup(b, r) -> fwd(c, r)`` and ``bwd(c, r) -> lookup_grad(b, r)`` (c the consumer);
* ``bwd(i, r) -> ready(g) -> allreduce(g, ...)`` for every layer i of group g and every member r
  (and every micro-batch): a group's AllReduce starts after the backward of all its layers on all
  its members. ``("ready", g)``
  is a milestone (no duration, no resource) so that the edges stay linear in the tasks (members x
  layers in, ring pieces out, instead of their product).

Routing: the solution's own rings (else one ring per group in coset order, as the evaluator), and
for each server pair the solution's explicit paths, else its offset routes (``given``), or every
shortest node path with an equal share (``shortest_path``, the evaluator's ECMP) - the same
per-pair split the evaluator (:func:`topoopt_ilp.evaluation.evaluate.evaluate`) loads the arcs with, so the
busiest arc's total piece time / ``X`` is the evaluator's bandwidth term.

:func:`check_schedule` is the independent check of a schedule against the graph; it shares no code
with the scheduling model or the list scheduler.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from topoopt_ilp.core import graph as graph_utils
from topoopt_ilp.core.checks import as_int
from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.routes import RingSet, Routing
from topoopt_ilp.core.solution import Solution
from topoopt_ilp.core.strategy import Strategy, data_parallel, parse_strategy, strategy_demand
from topoopt_ilp.core.workload import coset
from topoopt_ilp.errors import InputError, UnsupportedError

__all__ = [
    "Task",
    "IterationGraph",
    "Schedule",
    "build_iteration_graph",
    "graph_from_solution",
    "lower_bounds",
    "check_schedule",
    "COMPUTE_KINDS",
    "FLOW_KINDS",
    "MILESTONE_KINDS",
    "DEFAULT_FORWARD_FRACTION",
    "MAX_GRAPH_TASKS",
    "MAX_PATHS_PER_PAIR",
]

COMPUTE_KINDS = ("fwd", "bwd", "block")
MILESTONE_KINDS = ("ready",)
FLOW_KINDS = ("reshard_fwd", "reshard_bwd", "lookup", "lookup_grad", "allreduce")
#: Forward share of a layer's time (backward = 2 x forward); a parameter of build_iteration_graph.
DEFAULT_FORWARD_FRACTION = 1.0 / 3.0
#: Most tasks a graph may have: building and list-scheduling are pure Python, ~10 us per task-arc.
MAX_GRAPH_TASKS = 200_000
#: Most shortest paths one server pair may split over (each becomes a task per flow of the pair).
MAX_PATHS_PER_PAIR = 256
#: Length of the key (piece index left out) of each per-micro-batch kind with M = 1; with M > 1 the
#: micro-batch m follows, so M = 1 keeps the keys (and names) of the graph without micro-batches.
_KEY_LEN = {"fwd": 3, "bwd": 3, "block": 2, "reshard_fwd": 4, "reshard_bwd": 4, "lookup": 3, "lookup_grad": 3}


@dataclass(frozen=True)
class Task:
    """One activity: compute (``server`` >= 0, ``path`` empty), a flow piece (``path`` = its node
    sequence, ``server`` -1) or a milestone (neither: no duration, no resource)."""

    key: tuple
    duration_s: float
    server: int = -1
    path: tuple[int, ...] = ()
    bytes: float = 0.0
    latency_s: float = 0.0

    @property
    def kind(self) -> str:
        return self.key[0]

    @property
    def is_flow(self) -> bool:
        return len(self.path) > 0

    @property
    def is_compute(self) -> bool:
        return self.server >= 0

    @property
    def arcs(self) -> tuple[tuple[int, int], ...]:
        return tuple(zip(self.path[:-1], self.path[1:]))

    @property
    def micro_batch(self) -> int | None:
        """The micro-batch m of a per-micro-batch task of a graph built with ``micro_batches`` > 1
        (its key carries m, see :data:`_KEY_LEN`); None for the whole batch (M = 1, AllReduce, milestones)."""
        k = self.key
        return int(k[_KEY_LEN[k[0]]]) if k[0] in _KEY_LEN and len(k) > _KEY_LEN[k[0]] + (k[0] in FLOW_KINDS) else None

    @property
    def name(self) -> str:
        k = self.key
        m = self.micro_batch
        mb = "" if m is None else f" mb{m}"
        if k[0] in ("fwd", "bwd"):
            return f"{k[0]} L{k[1]} r{k[2]}{mb}"
        if k[0] == "block":
            return f"block B{k[1]}{mb}"
        if k[0] in ("reshard_fwd", "reshard_bwd"):
            return f"{k[0]} L{k[1]} r{k[2]}->L{k[1] + 1} r{k[3]}{mb} p{k[-1]}"
        if k[0] in ("lookup", "lookup_grad"):
            return f"{k[0]} B{k[1]} r{k[2]}{mb} p{k[-1]}"
        if k[0] == "ready":
            return f"allreduce G{k[1]} ready"
        return f"allreduce G{k[1]} ring{k[2]} m{k[3]} p{k[4]}"


@dataclass(frozen=True, eq=False)
class IterationGraph:
    """Tasks, precedence edges ``(pred, succ)`` (indices into ``tasks``) and the network they share."""

    n: int
    tasks: tuple[Task, ...]
    edges: np.ndarray  # (E, 2) int64, unique
    x: np.ndarray  # (n, n) link counts: capacity of each directed arc
    link_bytes_per_s: float
    forward_fraction: float
    strategy: Strategy
    routing: str  # "given" | "shortest_path"
    index: dict = field(repr=False, default_factory=dict)  # key -> task index
    micro_batches: int = 1

    def __len__(self) -> int:
        return len(self.tasks)

    def task(self, key: tuple) -> Task:
        return self.tasks[self.index[key]]

    @property
    def num_compute(self) -> int:
        return sum(1 for t in self.tasks if t.is_compute)

    @property
    def num_flow_pieces(self) -> int:
        return sum(1 for t in self.tasks if t.is_flow)

    def arc_uses(self) -> int:
        """Sum over flow pieces of their path lengths (the terms of the arc constraints)."""
        return sum(len(t.path) - 1 for t in self.tasks if t.is_flow)

    def predecessors(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in self.tasks]
        for a, b in self.edges.tolist():
            out[b].append(a)
        return out

    def successors(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in self.tasks]
        for a, b in self.edges.tolist():
            out[a].append(b)
        return out

    def topological_order(self) -> list[int]:
        """Kahn's algorithm, smallest index first among ready tasks (raises on a cycle)."""
        import heapq

        succ = self.successors()
        indeg = (
            np.bincount(self.edges[:, 1], minlength=len(self.tasks)).tolist()
            if len(self.edges)
            else [0] * len(self.tasks)
        )
        ready = [j for j, d in enumerate(indeg) if d == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            j = heapq.heappop(ready)
            order.append(j)
            for s in succ[j]:
                indeg[s] -= 1
                if indeg[s] == 0:
                    heapq.heappush(ready, s)
        if len(order) != len(self.tasks):
            raise RuntimeError("the iteration graph has a cycle")
        return order


@dataclass(frozen=True, eq=False)
class Schedule:
    """A schedule of an :class:`IterationGraph`: task j runs over ``[start_s[j], end_s[j])`` (seconds).

    ``makespan_s`` = max over tasks of ``end_s + latency_s``; ``bound_s`` a proven lower bound on the
    makespan of the problem that was solved (durations rounded up to ``time_unit_s``); ``gap`` =
    ``(makespan - bound) / makespan``. ``status``: ``optimal`` (proven), ``feasible`` or ``no_solution``
    (then no times)."""

    status: str
    method: str
    makespan_s: float | None
    bound_s: float | None
    gap: float | None
    start_s: np.ndarray | None
    end_s: np.ndarray | None
    time_unit_s: float
    wall_time_s: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def has_schedule(self) -> bool:
        return self.start_s is not None


# ----------------------------------------------------------------------------------------------
# Building
# ----------------------------------------------------------------------------------------------
class _Paths:
    """Per server pair: the node paths and shares its traffic is split over (cached)."""

    def __init__(self, x: np.ndarray, routing: Routing | None, latency_s: float) -> None:
        self.x = x
        self.n = x.shape[0]
        self.latency_s = latency_s
        self.given = routing is not None and (len(routing.paths) > 0 or len(routing.offset_routes) > 0)
        self.routing = routing
        self.cache: dict[tuple[int, int], list[tuple[tuple[int, ...], float]]] = {}
        self.dist: np.ndarray | None = None
        self.sigma: np.ndarray | None = None
        self.nbrs: list[list[int]] = []
        if self.given:
            ps = routing.paths
            self.explicit: dict[tuple[int, int], list[tuple[tuple[int, ...], float]]] = {}
            for nodes, frac in ps.to_lists():
                if frac > 0 and len(nodes) >= 2:
                    self.explicit.setdefault((nodes[0], nodes[-1]), []).append((tuple(nodes), frac))
            self.covered = {(int(s), int(t)) for s, t in zip(ps.src.tolist(), ps.dst.tolist())} if len(ps) else set()
            self.offsets: dict[int, list[tuple[list[int], float]]] = {}
            for o, jumps, frac in routing.offset_routes.to_lists():
                if frac > 0:
                    self.offsets.setdefault(o % self.n, []).append((jumps, frac))

    def __call__(self, s: int, t: int) -> list[tuple[tuple[int, ...], float]]:
        key = (s, t)
        if key not in self.cache:
            self.cache[key] = self._given(s, t) if self.given else self._shortest(s, t)
            total = sum(f for _, f in self.cache[key])
            if abs(total - 1.0) > 1e-6:
                raise InputError(f"the routes of pair {s}->{t} carry {total:.6g} of its traffic, not all of it")
            for path, _ in self.cache[key]:
                for u, v in zip(path[:-1], path[1:]):
                    if self.x[u, v] <= 0:
                        raise InputError(
                            f"the route {list(path)} of pair {s}->{t} uses {u}->{v}, which is not a link of the topology"
                        )
        return self.cache[key]

    def _given(self, s: int, t: int) -> list[tuple[tuple[int, ...], float]]:
        if (s, t) in self.covered:
            return self.explicit.get((s, t), [])
        routes = self.offsets.get((t - s) % self.n)
        if not routes:
            raise InputError(f"the solution's routing has no route for pair {s}->{t}")
        out = []
        for jumps, frac in routes:
            nodes = [s]
            for j in jumps:
                nodes.append((nodes[-1] + j) % self.n)
            if nodes[-1] != t:
                raise InputError(f"an offset route for pair {s}->{t} ends at {nodes[-1]}")
            out.append((tuple(nodes), frac))
        return out

    def _shortest(self, s: int, t: int) -> list[tuple[tuple[int, ...], float]]:
        if self.dist is None:
            self.dist, self.sigma = graph_utils.hop_distances(self.x)
            self.nbrs = [np.flatnonzero(self.x[v] > 0).tolist() for v in range(self.n)]
        if self.dist[s, t] < 0:
            raise InputError(f"server {t} is unreachable from server {s} in the topology: pair {s}->{t} has traffic")
        count = int(self.sigma[s, t])
        if count > MAX_PATHS_PER_PAIR:
            raise UnsupportedError(
                f"pair {s}->{t} has {count} shortest paths (more than {MAX_PATHS_PER_PAIR}): "
                "too many flow pieces to schedule"
            )
        nbrs, dist = self.nbrs, self.dist
        paths: list[tuple[int, ...]] = []

        def extend(prefix: list[int]) -> None:
            v = prefix[-1]
            if v == t:
                paths.append(tuple(prefix))
                return
            for w in nbrs[v]:
                if dist[w, t] == dist[v, t] - 1:
                    extend(prefix + [w])

        extend([s])
        return [(p, 1.0 / len(paths)) for p in paths]


class _Builder:
    def __init__(self, limit: int) -> None:
        self.tasks: list[Task] = []
        self.index: dict[tuple, int] = {}
        self.edges: set[tuple[int, int]] = set()
        self.limit = limit

    def add(self, task: Task) -> int:
        if len(self.tasks) >= self.limit:
            raise UnsupportedError(
                f"the iteration graph would have more than {self.limit:,} tasks: too large to schedule"
            )
        self.index[task.key] = len(self.tasks)
        self.tasks.append(task)
        return len(self.tasks) - 1

    def edge(self, a: int, b: int) -> None:
        self.edges.add((a, b))


def _micro_batches(value: Any) -> int:
    """An integer >= 1; the graph's size limit (``MAX_GRAPH_TASKS``) is checked where the tasks are counted."""
    return as_int(value, "micro_batches", low=1)


def build_iteration_graph(
    instance: Instance,
    strategy: Strategy | None,
    x: np.ndarray,
    routing: Routing | None = None,
    *,
    forward_fraction: float = DEFAULT_FORWARD_FRACTION,
    micro_batches: int = 1,
    max_tasks: int = MAX_GRAPH_TASKS,
) -> IterationGraph:
    """The task graph of one iteration (module docstring).

    Parameters
    ----------
    instance : a workload instance.
    strategy : the placement (None: TopoOpt's data-parallel start, as the evaluator).
    x : (n, n) link counts.
    routing : rings (used when non-empty; else one ring per group in coset order) and routes (the
        solution's paths / offset routes when it has any, else every pair splits equally over its
        shortest paths).
    forward_fraction : forward share of each layer's time, in [0, 1].
    micro_batches : M, the number of micro-batches (GPipe): every compute task and every flow but
        the AllReduce is split into M of 1/M each (module docstring); 1 is the graph without them.
    max_tasks : refuse (UnsupportedError) a graph of more tasks, before building it when its compute
        tasks alone are more.
    """
    w = instance.workload
    if w is None:
        raise InputError("scheduling needs a workload instance (layers and blocks); this instance has a fixed demand")
    n = instance.n
    if not (isinstance(forward_fraction, (int, float)) and 0.0 <= float(forward_fraction) <= 1.0):
        raise InputError(f"forward_fraction must be a number in [0, 1], got {forward_fraction!r}")
    ff = float(forward_fraction)
    M = _micro_batches(micro_batches)
    x = np.asarray(x)
    if x.shape != (n, n):
        raise InputError(f"the topology has shape {x.shape}, the instance has {n} servers")
    if strategy is None:
        strategy = data_parallel(w, n)
    try:
        groups, _, _ = strategy_demand(w, n, strategy)
    except ValueError as exc:  # a strategy that does not fit the workload
        raise InputError(str(exc)) from None
    bw = instance.cluster.link_bytes_per_s
    alpha = instance.cluster.hop_latency_s
    paths = _Paths(x, routing, alpha)
    B = _Builder(max_tasks)
    L = len(w.layers)
    deg = [int(k) for k in strategy.layer_degree]
    start = [int(s) for s in strategy.layer_start]
    servers = [coset(n, deg[i], start[i]) for i in range(L)]
    compute_tasks = M * (len(w.blocks) + 2 * sum(deg))
    if compute_tasks > max_tasks:  # the same refusal _Builder.add makes, without building up to it
        raise UnsupportedError(
            f"the iteration graph would have more than {max_tasks:,} tasks "
            f"({compute_tasks:,} compute tasks with {M} micro-batches): too large to schedule"
        )
    if M > 1 and M * max(deg) > w.batch_size:  # a replica of degree k holds batch / k samples
        raise InputError(
            f"{M} micro-batches leave a replica of degree {max(deg)} less than one of its "
            f"{w.batch_size / max(deg):g} samples each (batch {w.batch_size}): at most "
            f"{w.batch_size // max(deg)} micro-batches for this placement"
        )
    # keys: with M = 1 exactly those of the graph without micro-batches; else m follows (_KEY_LEN)
    mbs = [()] if M == 1 else [(m,) for m in range(M)]

    def flow(key: tuple, src: int, dst: int, nbytes: float, preds: list[int], succs: list[int]) -> None:
        for p, (path, frac) in enumerate(paths(src, dst)):
            part = nbytes * frac
            j = B.add(Task(key + (p,), part / bw, -1, path, part, alpha * (len(path) - 1)))
            for a in preds:
                B.edge(a, j)
            for b in succs:
                B.edge(j, b)

    # compute tasks (for M = 1, the divisions by 1 are exact: today's durations to the bit)
    for b, block in enumerate(w.blocks):
        for mb in mbs:
            B.add(Task(("block", b) + mb, float(block.compute_s) / M, int(strategy.block_server[b])))
    for i in range(L):
        t = w.layer_time(i, deg[i])
        for r, v in enumerate(servers[i]):
            for mb in mbs:
                B.add(Task(("fwd", i, r) + mb, ff * t / M, v))
                B.add(Task(("bwd", i, r) + mb, (1.0 - ff) * t / M, v))
    F = {(i, r) + mb: B.index[("fwd", i, r) + mb] for i in range(L) for r in range(deg[i]) for mb in mbs}
    Bw = {(i, r) + mb: B.index[("bwd", i, r) + mb] for i in range(L) for r in range(deg[i]) for mb in mbs}
    for key, j in F.items():
        B.edge(j, Bw[key])

    # resharding i -> i+1: units t of the batch, replica t // (n/k) of each layer; micro-batch m
    # holds 1/M of every unit, so each pair exchanges 1/M of its bytes per micro-batch
    for i in range(L - 1):
        act = float(w.layers[i].activation_bytes)
        gi, gj = n // deg[i], n // deg[i + 1]
        overlap: dict[tuple[int, int], int] = {}
        for t in range(n):
            pair = (t // gi, t // gj)
            overlap[pair] = overlap.get(pair, 0) + 1
        for (a, b), units in sorted(overlap.items()):
            src, dst = servers[i][a], servers[i + 1][b]
            nbytes = act * units / n / M
            for mb in mbs:
                if src == dst or nbytes == 0:
                    B.edge(F[(i, a) + mb], F[(i + 1, b) + mb])
                    B.edge(Bw[(i + 1, b) + mb], Bw[(i, a) + mb])
                    continue
                flow(("reshard_fwd", i, a, b) + mb, src, dst, nbytes, [F[(i, a) + mb]], [F[(i + 1, b) + mb]])
                flow(("reshard_bwd", i, a, b) + mb, dst, src, nbytes, [Bw[(i + 1, b) + mb]], [Bw[(i, a) + mb]])

    # embedding lookups and their gradients, per micro-batch after that micro-batch's block task
    for b, block in enumerate(w.blocks):
        c, j = int(block.consumer), int(strategy.block_server[b])
        nbytes = float(block.lookup_bytes) / deg[c] / M
        for mb in mbs:
            blk = B.index[("block", b) + mb]
            for r, v in enumerate(servers[c]):
                if v == j or nbytes == 0:
                    B.edge(blk, F[(c, r) + mb])
                    continue
                flow(("lookup", b, r) + mb, j, v, nbytes, [blk], [F[(c, r) + mb]])
                flow(("lookup_grad", b, r) + mb, v, j, nbytes, [Bw[(c, r) + mb]], [])

    # AllReduce, once per iteration: groups as strategy_demand forms them; rings as the routing says
    rings = (
        routing.rings
        if routing is not None and len(routing.rings)
        else RingSet.from_lists((g, grp.members, 1.0) for g, grp in enumerate(groups))
    )
    group_layers = [
        [i for i in range(L) if deg[i] >= 2 and float(w.layers[i].param_bytes) > 0 and servers[i] == grp.members]
        for grp in groups
    ]
    for q, (g, order, frac) in enumerate(rings.to_lists()):
        if not 0 <= g < len(groups):
            raise InputError(f"ring {q} names AllReduce group {g}; the placement has {len(groups)} group(s)")
        if sorted(order) != sorted(groups[g].members):
            raise InputError(f"ring {q} does not visit each member of AllReduce group {g} exactly once")
        nbytes = frac * groups[g].bytes_per_member()
        if nbytes == 0:
            continue
        if ("ready", g) not in B.index:
            ready = B.add(Task(("ready", g), 0.0))
            for i in group_layers[g]:
                for r in range(deg[i]):
                    for mb in mbs:  # the backward of every micro-batch
                        B.edge(Bw[(i, r) + mb], ready)
        for m, src in enumerate(order):
            flow(("allreduce", g, q, m), src, order[(m + 1) % len(order)], nbytes, [B.index[("ready", g)]], [])

    edges = np.array(sorted(B.edges), dtype=np.int64).reshape(-1, 2)
    xi = np.array(x, dtype=np.int64)
    xi.setflags(write=False)
    return IterationGraph(
        n,
        tuple(B.tasks),
        edges,
        xi,
        bw,
        ff,
        strategy,
        "given" if paths.given else "shortest_path",
        B.index,
        micro_batches=M,
    )


def graph_from_solution(
    instance: Instance,
    solution: Solution,
    *,
    routing: str = "given",
    forward_fraction: float = DEFAULT_FORWARD_FRACTION,
    micro_batches: int = 1,
    max_tasks: int = MAX_GRAPH_TASKS,
) -> IterationGraph:
    """The iteration graph of a solution: its placement (default: the data-parallel start), topology,
    rings, and, with ``routing="given"``, its routes (shortest paths when it has none) - the
    evaluator's ``given`` / ``shortest_path`` modes."""
    if routing not in ("given", "shortest_path"):
        raise InputError(f"unknown routing {routing!r}; choose given or shortest_path")
    if instance.workload is None:
        raise InputError("scheduling needs a workload instance (layers and blocks); this instance has a fixed demand")
    if solution.topology is None:
        raise InputError("the solution has no topology to schedule on")
    n = instance.n
    if solution.topology.n != n:
        raise InputError(f"the solution's topology has {solution.topology.n} servers, the instance {n}")
    w = instance.workload
    strategy = data_parallel(w, n) if solution.placement is None else parse_strategy(solution.placement, w, n)
    rt = solution.routing if routing == "given" else Routing(rings=solution.routing.rings)
    return build_iteration_graph(
        instance,
        strategy,
        solution.topology.matrix,
        rt,
        forward_fraction=forward_fraction,
        micro_batches=micro_batches,
        max_tasks=max_tasks,
    )


# ----------------------------------------------------------------------------------------------
# Lower bounds (seconds, exact durations)
# ----------------------------------------------------------------------------------------------
def lower_bounds(g: IterationGraph) -> dict[str, Any]:
    """Three lower bounds on any schedule's makespan, with where they come from.

    * ``compute_s``: the busiest server's total compute (the evaluator's ``compute_time_s``);
    * ``network_s``: the busiest arc's total piece time / its link count (the evaluator's bandwidth
      term ``load / (B X)`` under the same routing);
    * ``critical_path_s``: the longest precedence chain of durations and latencies.
    """
    load = np.zeros(g.n)
    arc = np.zeros((g.n, g.n))
    for t in g.tasks:
        for u, v in t.arcs:
            arc[u, v] += t.duration_s
        if t.is_compute:
            load[t.server] += t.duration_s
    busy = np.zeros_like(arc)
    np.divide(arc, g.x, out=busy, where=g.x > 0)
    server = int(np.argmax(load)) if g.n else 0
    u, v = map(int, np.unravel_index(int(np.argmax(busy)), busy.shape)) if busy.size else (0, 0)
    finish = np.zeros(len(g.tasks))
    preds = g.predecessors()
    for j in g.topological_order():
        t = g.tasks[j]
        ready = max((finish[p] for p in preds[j]), default=0.0)
        finish[j] = ready + t.duration_s + t.latency_s
    cp = float(finish.max()) if len(finish) else 0.0
    comp, net = float(load.max()) if g.n else 0.0, float(busy.max()) if busy.size else 0.0
    return {
        "compute_s": comp,
        "busiest_server": server,
        "network_s": net,
        "busiest_arc": (u, v) if net > 0 else None,
        "critical_path_s": cp,
        "bound_s": max(comp, net, cp),
    }


# ----------------------------------------------------------------------------------------------
# The independent check
# ----------------------------------------------------------------------------------------------
def check_schedule(graph: IterationGraph, schedule: Schedule, *, rtol: float = 1e-9) -> list[str]:
    """Every violation of ``schedule`` against ``graph``; empty means valid.

    Checks, in seconds with the graph's exact durations: every task has a finite start >= 0 and runs at
    least its duration; every edge ``a -> b`` has ``start[b] >= end[a] + latency[a]``; no two compute
    tasks of positive length overlap on a server; at every start time on every arc, the flow pieces
    running there (``start <= t < end``) are at most its link count; ``makespan_s`` is the latest
    ``end + latency``, up to one time unit later (a scheduler on a time grid holds each latency for
    whole units); a stated bound is not above it. Shares no code with the schedulers.
    """
    out: list[str] = []
    N = len(graph.tasks)
    if not schedule.has_schedule:
        return ["the schedule has no task times"]
    s = np.asarray(schedule.start_s, dtype=float)
    e = np.asarray(schedule.end_s, dtype=float)
    if s.shape != (N,) or e.shape != (N,):
        return [f"the schedule times {s.shape}/{e.shape} do not match the graph's {N} tasks"]
    if not (np.isfinite(s).all() and np.isfinite(e).all()):
        return ["a task time is not finite"]
    scale = max(1.0, float(np.abs(e).max(initial=0.0)))
    tol = rtol * scale
    for j, t in enumerate(graph.tasks):
        if s[j] < -tol:
            out.append(f"{t.name}: starts at {s[j]:.9g} s < 0")
        if e[j] - s[j] < t.duration_s - tol:
            out.append(f"{t.name}: runs {e[j] - s[j]:.9g} s, shorter than its duration {t.duration_s:.9g} s")
    for a, b in graph.edges.tolist():
        ready = e[a] + graph.tasks[a].latency_s
        if s[b] < ready - tol:
            out.append(
                f"precedence {graph.tasks[a].name} -> {graph.tasks[b].name}: starts at {s[b]:.9g} s, "
                f"before {ready:.9g} s"
            )
    by_server: dict[int, list[int]] = {}
    by_arc: dict[tuple[int, int], list[int]] = {}
    for j, t in enumerate(graph.tasks):
        if e[j] - s[j] <= tol:
            continue  # an empty interval occupies nothing
        if t.server >= 0:
            by_server.setdefault(t.server, []).append(j)
        for arc in zip(t.path[:-1], t.path[1:]):
            by_arc.setdefault(arc, []).append(j)
    for v, js in sorted(by_server.items()):
        js.sort(key=lambda j: s[j])
        for a, b in zip(js[:-1], js[1:]):
            if s[b] < e[a] - tol:
                out.append(
                    f"server {v}: {graph.tasks[a].name} and {graph.tasks[b].name} overlap "
                    f"({s[a]:.9g}-{e[a]:.9g} s and {s[b]:.9g}-{e[b]:.9g} s)"
                )
    for (u, v), js in sorted(by_arc.items()):
        cap = int(graph.x[u, v])
        if len(js) <= cap:
            continue
        # pieces running at each start time t: started at or before t, not ended by t (a sweep)
        starts, ends = np.sort(s[js]), np.sort(e[js])
        running = np.searchsorted(starts, starts + tol, side="right") - np.searchsorted(
            ends, starts + tol, side="right"
        )
        worst = int(np.argmax(running))
        if running[worst] > cap:
            out.append(
                f"arc {u}->{v}: {int(running[worst])} flow pieces at {starts[worst]:.9g} s, it has {cap} link(s)"
            )
    if N:
        last = float(np.max(e + np.array([t.latency_s for t in graph.tasks])))
        if (
            schedule.makespan_s is None
            or not last - tol <= float(schedule.makespan_s) <= last + schedule.time_unit_s + tol
        ):
            stated = "missing" if schedule.makespan_s is None else f"{float(schedule.makespan_s):.9g} s"
            out.append(
                f"makespan {stated} is not the latest end + latency {last:.9g} s "
                f"(up to one time unit of {schedule.time_unit_s:.3g} s later)"
            )
        if (
            schedule.bound_s is not None
            and schedule.makespan_s is not None
            and schedule.bound_s > schedule.makespan_s + tol
        ):
            out.append(f"bound {schedule.bound_s:.9g} s is above the makespan {schedule.makespan_s:.9g} s")
    return out
