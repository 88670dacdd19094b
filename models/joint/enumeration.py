"""The joint problem solved strategy by strategy: enumeration with bounds, each survivor's topology by MILP.

The same problem as :mod:`models.joint` (placement + topology + routing of a small workload instance,
the same ring space, routing and objective), split along the strategy:

    min over strategies S of  F(C(S), T*(S))

where C(S) is the busiest server's compute (a sum over S, exact; with ``compute_model:
critical_path`` the larger of that and the critical path P(S) of one micro-batch,
:mod:`~topoopt_ilp.models.placement.data`), T*(S) the least communication time of S's traffic over every topology, ring split and routing (the joint model with S's columns
fixed, :func:`models.joint.fix_strategy`), and F(C, T) = C + T (``overlap: none``), max(C, T)
(``overlap: full``) or T (objective ``comm_time``). The joint MILP's LP bound is weak (fractional
strategies spread traffic thinly), while most strategies are far from optimal for reasons a formula
sees; this method exploits that.

Bounds (a depth-first search places the layers in order, then the blocks; a node is a partial
strategy, and every completion only adds compute and traffic to it). With B the link bandwidth,
alpha the hop latency, and bytes counted per iteration:

  port      server v sends its own bytes over at most d links, so  T >= out_v / (d B);  in_v likewise.
            A ring member sends 2(k-1)/k of its group's bytes whatever the ring order.
  volume    the n d arcs carry n d B per unit of time, every ring byte crosses at least one arc, and
            in any graph of degree d at most d (d-1)^(h-1) servers (d^h directed) lie h hops from a
            server (the Moore bound), so a source's model-parallel bytes cross at least
            M_s = sum_r h_r x (its r-th largest destination's bytes), h_r the least hop count of the
            r-th nearest server; the same holds for every destination's sources:
            T >= (ring bytes + max(sum_s M_s, sum_t M'_t)) / (n d B).
  latency   T >= alpha h_r, r the most distinct destinations (or sources) of any server.
  compute   C >= max(busiest server so far, (compute placed + least compute still to place) / n);
            with critical_path also C >= max(R + suffix[d], rest[d]), R the running critical path
            of the d layers placed (R_{i+1} = max(R_i, e_i) + tau_i) and suffix, rest the floors of
            :func:`~topoopt_ilp.models.placement.data.path_floors` over each layer's least time (P >= both).
  cycles    with undirected links of degree 2 (every topology a union of cycles), n <= 8: T >= the
            least, over every such topology, of its largest cut ratio (:mod:`models.cycle_cuts`);
            computed once per visited node (about 0.3 ms), not for every child.

Symmetry: a server relabelling that maps every layer option to an option of the same layer
(:mod:`~topoopt_ilp.models.joint.symmetry`) maps each strategy to one with relabelled traffic, compute and
memory, hence the same objective and bounds. The search keeps only prefixes that no such
relabelling makes lexicographically smaller (layers entry by entry, then identical blocks as a
multiset), so it visits about one strategy per orbit (4 relabellings at n = 8, 2 at n = 6).

Each bound only grows when compute or traffic is added (sorting a row and weighting its ranks by
non-decreasing h_r is non-decreasing in every entry), so a node whose bound F(C_lb, T_lb) reaches the incumbent
(less the requested gap) has no improving completion, and neither has a node breaking the memory
limit. Leaves that survive are grouped by isomorphism of their traffic: with a free topology the
servers are interchangeable, so strategies whose AllReduce groups and model-parallel matrix are the
same up to relabelling have the same T* (groups above ``ALL_RINGS_UP_TO`` members keep their cyclic
order, which defines their TotientPerms rings). Each group keeps its least-compute member (F grows
with C). Groups are then settled in order of bound, cheaply first (the passes are described above
:func:`_bandwidth_pass`), with Tbw capped at what could still improve on the incumbent (the
McCormick U of the model): a model with no point under that cap cannot improve. A leaf stopped by
the time limit keeps its bound. The answer is optimal when every surviving leaf is settled within
the gap; otherwise feasible, bounded by the least bound of what was not settled.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field, replace

import numpy as np

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.lazy import nx
from topoopt_ilp.core.solution import Solution, Topology
from topoopt_ilp.core.strategy import (
    Strategy,
    strategy_demand,
    strategy_to_demand,
    strategy_to_dict,
    unit_servers,
    validate_strategy,
)
from topoopt_ilp.core.workload import MEMORY_RTOL
from topoopt_ilp.errors import InputError, UnsupportedError
from topoopt_ilp.evaluation.evaluate import evaluate, objective_value
from topoopt_ilp.models.common import ExactOptions, exact_no_solution, export_model, run_model, solution_status
from topoopt_ilp.models.joint.cycle_cuts import CycleCutBound
from topoopt_ilp.models.joint.cycle_cuts import applies as cycle_cuts_apply
from topoopt_ilp.models.joint.milp import (
    ALL_RINGS_UP_TO,
    TIME_UNIT_S,
    Incumbent,
    build_joint,
    check_request,
    decode_point,
    fix_strategy,
    formula_upper_bound,
    solve_joint,
    start_solution,
)
from topoopt_ilp.models.joint.symmetry import strategy_symmetries
from topoopt_ilp.models.placement.data import critical_path, layer_options, objective_of, path_entries, path_floors
from topoopt_ilp.models.placement.scoring import block_classes
from topoopt_ilp.models.topology.milp import (
    STRONG_TUNING,
    build_topology_routing,
    decoded_topology,
    moore_layer_hops,
    to_solution,
)
from topoopt_ilp.models.topology.solve import optimise_latency

__all__ = [
    "AUTO_MAX_LEAVES",
    "AUTO_PROBE_NODES",
    "MAX_SEARCH_NODES",
    "distinct_traffic",
    "search_strategies",
    "solve_joint_enumeration",
    "strategy_floor",
]

#: The depth-first search gives up (the answer keeps the bound of what it did not visit) after this
#: many nodes (about 0.1-0.3 ms each).
MAX_SEARCH_NODES = 2_000_000
#: ``--formulation auto``: the search may take this many nodes and leave this many strategies (one
#: per traffic class) to solve; beyond either, the joint MILP is used instead.
AUTO_PROBE_NODES = 10_000
AUTO_MAX_LEAVES = 100


@dataclass
class _Node:
    """A partial strategy and what it has placed so far."""

    options: tuple[int, ...]  # option index per placed layer
    servers: tuple[int, ...]  # server per placed block
    compute: np.ndarray  # (n,) seconds
    memory: np.ndarray  # (n,) bytes
    ring_out: np.ndarray  # (n,) AllReduce bytes each server sends (= receives)
    mp: np.ndarray  # (n, n) model-parallel bytes
    ring_cross: np.ndarray | None = None  # (2^n,) ring bytes across each server set (degree-2 cut bound)
    bound: float = 0.0
    parts: tuple[float, float, int] | None = None  # the bound's compute, bandwidth and hop floors
    refined: bool = False  # the degree-2 cut bound is in ``bound``
    tied: np.ndarray | None = None  # server symmetries mapping every placed layer option to itself
    path: float = 0.0  # the running critical path R of the placed layers (critical_path only)


@dataclass
class _Search:
    """The data of the depth-first search (module docstring): per-option compute, memory, ring and
    unit arrays, and the bound of a node."""

    instance: Instance
    opt_layer: np.ndarray
    opt_k: np.ndarray
    opt_s: np.ndarray
    nodes: int = 0
    pending: list[_Node] = field(default_factory=list)

    def __post_init__(self) -> None:
        inst, w = self.instance, self.instance.workload
        n = inst.n
        self.n, self.d, self.L, self.nb = n, inst.cluster.degree, len(w.layers), len(w.blocks)
        self.B, self.alpha = inst.cluster.link_bytes_per_s, inst.cluster.hop_latency_s
        self.directed = inst.cluster.directed
        self.cap = float(w.server_memory_bytes) * (1 + MEMORY_RTOL)
        self.by_layer = [np.flatnonzero(self.opt_layer == i) for i in range(self.L)]
        self.time = np.array([w.layer_time(int(i), int(k)) for i, k in zip(self.opt_layer, self.opt_k)])
        self.mem = np.array([w.layers[int(i)].replica_memory(int(k)) for i, k in zip(self.opt_layer, self.opt_k)])
        param = np.array([float(w.layers[int(i)].param_bytes) for i in self.opt_layer])
        self.ring = np.where(self.opt_k >= 2, 2.0 * (self.opt_k - 1) / self.opt_k * param, 0.0)
        self.members = [np.arange(int(s), n, n // int(k)) for k, s in zip(self.opt_k, self.opt_s)]
        self.units = [unit_servers(n, int(k), int(s)) for k, s in zip(self.opt_k, self.opt_s)]
        # least total compute each layer (block) still to place adds, summed over what follows
        least = [min(self.time[o] * self.opt_k[o] for o in self.by_layer[i]) for i in range(self.L)]
        least += [float(b.compute_s) for b in w.blocks]
        self.rest = np.concatenate([np.cumsum(least[::-1])[::-1], [0.0]])
        # critical_path: entries e_c and the floors of the path still to come (module docstring)
        self.critical = w.compute_model == "critical_path" and inst.objective != "comm_time"
        self.path_e = path_entries(w)
        self.path_suffix, self.path_rest = path_floors(
            self.path_e, np.array([min(self.time[o] for o in self.by_layer[i]) for i in range(self.L)])
        )
        # the degree-2 cut bound (models.cycle_cuts): each option's ring bytes across every server set
        self.cuts = CycleCutBound(inst.cluster) if cycle_cuts_apply(inst.cluster) else None
        if self.cuts is not None:
            self.opt_ring_cross = (
                np.stack([r * self.cuts.group_split(m) for r, m in zip(self.ring, self.members)])
                if len(self.ring)
                else np.zeros((0, 1 << n))
            )
        self.block_class = {}
        self.block_classes = block_classes(w)
        for cls in self.block_classes:
            for prev, j in zip(cls, cls[1:]):
                self.block_class[j] = prev  # identical blocks take non-decreasing servers
        # server relabellings that map strategies onto equivalent ones (models/joint/symmetry.py):
        # option map (columns < options) and server map (the last n columns) per symmetry
        ordered_rings = (self.opt_k > ALL_RINGS_UP_TO) & (self.ring > 0)
        symmetries = (
            strategy_symmetries(n, self.opt_layer, self.opt_k, self.opt_s, ordered_rings)
            if inst.topology_family == "any"
            else np.zeros((0, len(self.opt_layer) + n), dtype=np.int64)
        )
        self.sym_option, self.sym_server = symmetries[:, : len(self.opt_layer)], symmetries[:, len(self.opt_layer) :]

    # -- bounds -------------------------------------------------------------------------------
    def bound(self, node: _Node, depth: int) -> float:
        """The port, volume, latency and compute bounds (cheap: every child gets them)."""
        bandwidth, hops = comm_floor(node.mp, node.ring_out, self.d, self.B, self.directed)
        compute = max(float(node.compute.max()), (float(node.compute.sum()) + self.rest[depth]) / self.n)
        if self.critical:
            d = len(node.options)
            compute = max(compute, node.path + float(self.path_suffix[d]), float(self.path_rest[d]))
        node.parts = (compute, bandwidth, hops)
        return objective_of(self.instance, compute, bandwidth + self.alpha * hops)

    def refine(self, node: _Node) -> None:
        """Raise ``node.bound`` by the degree-2 cut bound (models.cycle_cuts), once per visited node
        (about 0.3 ms, so not for the children the search never visits)."""
        node.refined = True
        if self.cuts is None or node.parts is None:
            return
        compute, bandwidth, hops = node.parts
        bandwidth = max(bandwidth, self.cuts.bandwidth_floor(node.mp, node.ring_cross))
        node.bound = max(node.bound, objective_of(self.instance, compute, bandwidth + self.alpha * hops))

    # -- children -----------------------------------------------------------------------------
    def children(self, node: _Node) -> list[_Node]:
        depth = len(node.options) + len(node.servers)
        out = []
        if depth < self.L:
            i = depth
            act = float(self.instance.workload.layers[i - 1].activation_bytes) if i else 0.0
            for o in self.by_layer[i]:
                image = self.sym_option[node.tied, o]
                if (image < o).any():  # a relabelling gives a lexicographically smaller prefix
                    continue
                mem = node.memory.copy()
                mem[self.members[o]] += self.mem[o]
                if mem.max() > self.cap:
                    continue
                compute = node.compute.copy()
                compute[self.members[o]] += self.time[o]
                ring_out = node.ring_out.copy()
                ring_out[self.members[o]] += self.ring[o]
                ring_cross = node.ring_cross + self.opt_ring_cross[o] if self.cuts is not None else None
                mp = node.mp
                if (
                    i
                    and act > 0
                    and (self.opt_k[o], self.opt_s[o]) != (self.opt_k[node.options[-1]], self.opt_s[node.options[-1]])
                ):
                    mp = mp.copy()
                    src, dst = self.units[node.options[-1]], self.units[o]
                    np.add.at(mp, (src, dst), act / self.n)
                    np.add.at(mp, (dst, src), act / self.n)
                    np.fill_diagonal(mp, 0.0)
                path = max(node.path, float(self.path_e[i])) + float(self.time[o]) if self.critical else 0.0
                out.append(
                    _Node(
                        node.options + (int(o),),
                        (),
                        compute,
                        mem,
                        ring_out,
                        mp,
                        ring_cross,
                        tied=node.tied[image == o],
                        path=path,
                    )
                )
        else:
            j = depth - self.L
            blk = self.instance.workload.blocks[j]
            first = node.servers[self.block_class[j]] if j in self.block_class else 0
            dst = self.units[node.options[int(blk.consumer)]]
            size = float(blk.lookup_bytes)
            for v in range(first, self.n):
                mem = node.memory.copy()
                mem[v] += float(blk.bytes)
                if mem[v] > self.cap or (node.tied.size and self._smaller_block_image(node.servers + (v,), node.tied)):
                    continue
                compute = node.compute.copy()
                compute[v] += float(blk.compute_s)
                mp = node.mp
                if size > 0:
                    mp = mp.copy()
                    np.add.at(mp[v], dst, size / self.n)
                    np.add.at(mp[:, v], dst, size / self.n)
                    mp[v, v] = 0.0
                out.append(
                    _Node(
                        node.options,
                        node.servers + (v,),
                        compute,
                        mem,
                        node.ring_out,
                        mp,
                        node.ring_cross,
                        tied=node.tied,
                        path=node.path,
                    )
                )
        for child in out:
            child.bound = self.bound(child, depth + 1)
        return out

    def _smaller_block_image(self, servers: tuple[int, ...], tied: np.ndarray) -> bool:
        """The block rule of models/joint/symmetry.py: some symmetry fixing every layer option maps
        the placed blocks to a bound sequence (per class of identical blocks, its placed servers
        mapped and sorted) lexicographically below ``servers``."""
        placed = np.asarray(servers)
        bound = np.empty_like(placed)
        positions = [[j for j in cls if j < len(placed)] for cls in self.block_classes]  # placed blocks per class
        for g in tied:
            for at in positions:
                bound[at] = np.sort(self.sym_server[g][placed[at]])
            differ = np.flatnonzero(bound != placed)
            if differ.size and bound[differ[0]] < placed[differ[0]]:
                return True
        return False

    def strategy(self, node: _Node) -> Strategy:
        o = np.array(node.options, dtype=np.int64)
        return Strategy(tuple(int(k) for k in self.opt_k[o]), tuple(int(s) for s in self.opt_s[o]), node.servers)

    def run(self, cutoff: float, deadline: float | None, max_nodes: int) -> list[tuple[float, float, Strategy]]:
        """Every complete strategy whose bound is below ``cutoff``, as (bound, compute, strategy);
        what the search did not visit (time or node budget) stays in ``self.pending``."""
        n = self.n
        root = _Node(
            (),
            (),
            np.zeros(n),
            np.zeros(n),
            np.zeros(n),
            np.zeros((n, n)),
            np.zeros(1 << n) if self.cuts is not None else None,
            tied=np.arange(len(self.sym_option)),
        )
        stack, leaves = [root], []
        depth_total = self.L + self.nb
        while stack:
            if self.nodes >= max_nodes or (
                deadline is not None and self.nodes % 256 == 0 and time.perf_counter() > deadline
            ):
                break
            node = stack.pop()
            if node.bound >= cutoff:
                continue
            if not node.refined:
                self.refine(node)
                if node.bound >= cutoff:
                    continue
            self.nodes += 1
            if len(node.options) + len(node.servers) == depth_total:
                leaves.append((node.bound, max(float(node.compute.max()), node.path), self.strategy(node)))
                continue
            kids = sorted((c for c in self.children(node) if c.bound < cutoff), key=lambda c: -c.bound)
            stack.extend(kids)  # the most promising child is searched first
        self.pending = [s for s in stack if s.bound < cutoff]
        return leaves


# ------------------------------------------------------------------------------------------------
def comm_floor(
    mp: np.ndarray, ring_out: np.ndarray, d: int, link_bytes_per_s: float, directed: bool = False
) -> tuple[float, int]:
    """Lower bounds on the bandwidth term and on the hops of the longest used path of any topology
    and routing carrying model-parallel bytes ``mp`` and rings whose members send ``ring_out``
    (the port, volume and latency bounds of the module docstring)."""
    n = len(mp)
    out, inn = mp.sum(axis=1) + ring_out, mp.sum(axis=0) + ring_out
    if float(out.sum()) <= 0:
        return 0.0, 0
    hops = _moore_hops(n, d, directed)
    by_rank = np.sort(mp, axis=1)[:, ::-1]  # each source's destinations, heaviest first
    byte_hops = max(float((by_rank @ hops).sum()), float((np.sort(mp, axis=0)[::-1].T @ hops).sum()))
    port = max(float(out.max()), float(inn.max())) / (d * link_bytes_per_s)
    volume = (float(ring_out.sum()) + byte_hops) / (n * d * link_bytes_per_s)
    reach = int(max((mp > 0).sum(axis=1).max(), (mp > 0).sum(axis=0).max()))
    return max(port, volume), max(1, int(hops[reach - 1]) if reach else 1)


def strategy_floor(instance: Instance, strategy: Strategy) -> float:
    """A lower bound on ``strategy``'s objective under every topology, ring order and routing: the
    busiest server's compute (with critical_path: C(S), the larger of that and the critical path),
    and the port, volume and latency bounds of its whole traffic (the module docstring's bounds at a
    leaf)."""
    c, w = instance.cluster, instance.workload
    groups, mp, compute = strategy_demand(w, instance.n, strategy)
    comp = float(compute.max(initial=0.0))
    if w.compute_model == "critical_path":
        comp = max(
            comp,
            critical_path(
                path_entries(w), np.array([w.layer_time(i, int(k)) for i, k in enumerate(strategy.layer_degree)])
            ),
        )
    ring_out = np.zeros(instance.n)
    for g in groups:
        ring_out[list(g.members)] += g.bytes_per_member()
    bandwidth, hops = comm_floor(mp, ring_out, c.degree, c.link_bytes_per_s, c.directed)
    return objective_of(instance, comp, bandwidth + c.hop_latency_s * hops)


def _moore_hops(n: int, d: int, directed: bool) -> np.ndarray:
    """The least hop count of a server's r-th nearest other server (r = 0..n-1) in any graph of
    degree d (the Moore bound's layers); n where no server can be (d = 1 undirected)."""
    hops = moore_layer_hops(n, d, d if directed else d - 1)
    return np.where(np.isinf(hops), float(n), hops)


def _traffic_graph(instance: Instance, strategy: Strategy) -> nx.DiGraph:
    """The strategy's traffic as a labelled graph: servers, one node per AllReduce group (its bytes)
    joined to its members, model-parallel bytes on server arcs, and for groups whose ring space
    depends on member order (TotientPerms above ALL_RINGS_UP_TO) their cyclic order as arcs."""
    groups, mp, _ = strategy_demand(instance.workload, instance.n, strategy)
    g = nx.DiGraph()
    g.add_nodes_from(range(instance.n), kind="server")
    for i, j in zip(*np.nonzero(mp)):
        g.add_edge(int(i), int(j), kind=f"mp:{mp[i, j]:.9g}")
    for r, grp in enumerate(groups):
        node = ("ring", r)
        g.add_node(node, kind=f"group:{grp.bytes:.9g}")
        for m in grp.members:
            g.add_edge(node, int(m), kind="member")
        if len(grp.members) > ALL_RINGS_UP_TO:
            for a, b in zip(grp.members, grp.members[1:] + grp.members[:1]):
                label = g.edges[a, b]["kind"] + "+order" if g.has_edge(a, b) else "order"
                g.add_edge(int(a), int(b), kind=label)
    return g


def distinct_traffic(
    instance: Instance, leaves: list[tuple[float, float, Strategy]], *, deadline: float | None = None
) -> list[tuple[float, float, Strategy, int]]:
    """One leaf per isomorphism class of traffic (its least-compute member), in order of bound, with
    the class size. Past ``deadline`` the leaves not yet grouped stay apart, each its own class (the
    grouping only saves work: every leaf is still settled)."""
    same = nx.algorithms.isomorphism.categorical_node_match("kind", None)
    same_e = nx.algorithms.isomorphism.categorical_edge_match("kind", None)
    buckets: dict[str, list[list]] = {}
    for j, (lb, comp, st) in enumerate(sorted(leaves, key=lambda t: (t[1], t[0]))):  # least compute first
        if deadline is not None and time.perf_counter() >= deadline:
            buckets[f"ungrouped-{j}"] = [[lb, comp, st, None, 1]]
            continue
        g = _traffic_graph(instance, st)
        with warnings.catch_warnings():  # networkx 3.5 changed directed hashes; ours are only compared in-process
            warnings.simplefilter("ignore", UserWarning)
            key = nx.weisfeiler_lehman_graph_hash(g, node_attr="kind", edge_attr="kind")
        for rep in buckets.setdefault(key, []):
            if nx.is_isomorphic(rep[3], g, node_match=same, edge_match=same_e):
                rep[4] += 1
                break
        else:
            buckets[key].append([lb, comp, st, g, 1])
    reps = [(lb, comp, st, size) for bucket in buckets.values() for lb, comp, st, _g, size in bucket]
    return sorted(reps, key=lambda t: t[0])


def search_strategies(
    instance: Instance, cutoff: float, *, max_nodes: int = MAX_SEARCH_NODES, deadline: float | None = None
) -> tuple[list[tuple[float, float, Strategy]], dict]:
    """Every memory-feasible strategy whose bound is below ``cutoff`` (identical blocks on non-
    decreasing servers), as (bound, compute C(S), strategy), and the search's statistics
    (``pending_bound``: the least bound of what it did not visit, inf when it visited everything)."""
    w, n = instance.workload, instance.n
    opt_layer, opt_k, opt_s = layer_options(w, n)
    for i in range(len(w.layers)):
        if not (opt_layer == i).any():
            raise InputError(f"layer {i} ({w.layers[i].name}) has no config whose replica fits in server memory")
    search = _Search(instance, opt_layer, opt_k, opt_s)
    leaves = search.run(cutoff, deadline, max_nodes)
    pending = min((p.bound for p in search.pending), default=math.inf)
    return leaves, {"search_nodes": search.nodes, "surviving_leaves": len(leaves), "pending_bound": pending}


# ------------------------------------------------------------------------------------------------
# Settling a leaf (a fixed strategy S with busiest compute C and search bound lb). Two passes over
# the leaves, so that cheap answers for all of them come before expensive ones for a few:
#   1. the bandwidth term: the topology_routing MILP on S's traffic (max concurrent flow with integer
#      links, the joint model's ring space), far faster than the joint model's hop-layered flows; its
#      bound gives  T* >= 1/lambda_max + alpha * hop floor.  Then, on its topology X, the joint model
#      with S and X fixed (an LP but for the hop indicators) gives X's best ring split and routing,
#      a point of the leaf. The leaf is settled when that point is within the gap of the bound.
#   2. for leaves still open (a topology with fewer hops might pay: the latency term), in order of
#      bound: the hop-limited topology_routing models on S's traffic, from pass 1's bandwidth optimum
#      (:func:`~topoopt_ilp.models.topology.solve.optimise_latency`: the leaf's comm time, latency included, with a
#      bound); a leaf whose pass 1 left no design: the joint model with S fixed.
# ------------------------------------------------------------------------------------------------
@dataclass
class _Leaf:
    lower: float  # valid lower bound on the leaf's objective
    strategy: Strategy
    compute: float
    point: Solution | None = None  # its best point found
    values: np.ndarray | None = None  # that point in the joint model's columns
    settled: bool = False
    traffic: Instance | None = None  # S's traffic (comm_time objective), once pass 1 has built it
    bandwidth: Solution | None = None  # pass 1's bandwidth optimum of that traffic (topology_routing)


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.perf_counter())


def _leaf_model(instance: Instance, compute: float, best: float):
    """The joint model with Tbw capped at what could still improve on ``best`` (the McCormick U)."""
    additive = instance.objective != "comm_time" and instance.workload.overlap == "none"
    cap = min(best, formula_upper_bound(instance))
    return build_joint(instance, max(cap - compute if additive else cap, TIME_UNIT_S))


def _bandwidth_pass(
    instance: Instance,
    options: ExactOptions,
    leaf: _Leaf,
    best: float,
    rel: float,
    deadline: float | None,
    counts: dict,
) -> None:
    """Pass 1 on one leaf (updates it in place)."""
    w, c = instance.workload, instance.cluster
    opts = replace(options, time_limit_s=_remaining(deadline), warm_start=None, export_model=None)
    demand = strategy_to_demand(w, instance.n, leaf.strategy)
    ring_out = np.zeros(instance.n)
    for g in demand.allreduce:
        ring_out[list(g.members)] += g.bytes_per_member()
    _, hops = comm_floor(demand.mp_matrix(instance.n), ring_out, c.degree, c.link_bytes_per_s, c.directed)
    X = None
    if hops:  # there is traffic
        traffic = Instance(cluster=c, demand=demand, objective="comm_time", name=f"{instance.name} leaf")
        tm = build_topology_routing(traffic, "strong", all_orders_up_to=ALL_RINGS_UP_TO)
        result = run_model(tm.model, opts, tuning=STRONG_TUNING)
        counts["bandwidth_models"] += 1
        if result.bound is not None and math.isfinite(result.bound) and result.bound > 0:
            lam_max = result.bound * c.link_bytes_per_s / tm.scale  # iterations per second
            leaf.lower = max(leaf.lower, objective_of(instance, leaf.compute, 1.0 / lam_max + c.hop_latency_s * hops))
        if leaf.lower >= best * (1 - rel):
            leaf.settled = True
            return
        if result.values is not None and solution_status(result) in ("optimal", "feasible"):
            X = decoded_topology(tm, result.values)
            leaf.traffic, leaf.bandwidth = traffic, to_solution(traffic, tm, result, result.wall_time_s)
    jm = _leaf_model(instance, leaf.compute, best)
    fixed = fix_strategy(jm, leaf.strategy, X) if X is not None else fix_strategy(jm, leaf.strategy)
    if fixed is None:
        return
    res = run_model(fixed, replace(opts, time_limit_s=_remaining(deadline)))
    if res.values is None or solution_status(res) not in ("optimal", "feasible"):
        return
    leaf.point, leaf.values = _leaf_point(instance, jm, res), res.values
    if leaf.point is not None:
        value = objective_value(instance, evaluate(instance, leaf.point))
        if X is None and solution_status(res) == "optimal":  # no topology fixed: that model was the whole leaf
            leaf.lower = max(leaf.lower, value)
        leaf.settled = value - leaf.lower <= rel * value


def _latency_pass(instance: Instance, options: ExactOptions, leaf: _Leaf, deadline: float | None, counts: dict) -> None:
    """Pass 2 on one open leaf whose pass 1 found a design: the hop-limited models settle its comm
    time (updates it in place)."""
    counts["latency_leaf_models"] += 1
    opts = replace(options, time_limit_s=_remaining(deadline), warm_start=None, export_model=None)
    sol = optimise_latency(leaf.traffic, opts, leaf.bandwidth, time.perf_counter())
    if sol.topology is not None and sol.objective is not None:
        leaf.point = Solution(
            status="feasible",
            method="exact",
            topology=sol.topology,
            routing=sol.routing,
            placement=strategy_to_dict(leaf.strategy),
            backend=sol.backend,
            details={"model_objective_s": objective_of(instance, leaf.compute, sol.objective)},
        )
    if sol.bound is not None and sol.bound > 0 and "latency" in sol.details:
        leaf.lower = max(leaf.lower, objective_of(instance, leaf.compute, sol.bound))
        leaf.settled = sol.status == "optimal"


def _full_pass(
    instance: Instance, options: ExactOptions, leaf: _Leaf, best: float, deadline: float | None, counts: dict
) -> None:
    """Pass 2 on one open leaf that pass 1 left without a design: the joint model with its strategy
    fixed (updates it in place)."""
    counts["full_leaf_models"] += 1
    jm = _leaf_model(instance, leaf.compute, best)
    opts = replace(options, time_limit_s=_remaining(deadline), warm_start=None, export_model=None)
    res = run_model(fix_strategy(jm, leaf.strategy), opts, leaf.values)
    status = solution_status(res)
    if res.values is not None and status in ("optimal", "feasible"):
        leaf.point = _leaf_point(instance, jm, res) or leaf.point
    if status == "optimal":
        leaf.lower, leaf.settled = max(leaf.lower, res.objective * TIME_UNIT_S), True
    elif status == "infeasible":  # nothing under the cap: the leaf cannot beat ``best``
        leaf.lower, leaf.settled = max(leaf.lower, best), True
    elif res.bound is not None and math.isfinite(res.bound):
        leaf.lower = max(leaf.lower, res.bound * TIME_UNIT_S)


def _leaf_point(instance: Instance, jm, result) -> Solution | None:
    """The joint model's point as a solution (None when rounding left a pair unconnected)."""
    try:
        st, X, routing = decode_point(instance, jm, result.values)
    except UnsupportedError:
        return None
    return Solution(
        status="feasible",
        method="exact",
        topology=Topology(X),
        routing=routing,
        placement=strategy_to_dict(st),
        backend=result.backend,
        details={"model_objective_s": result.objective * TIME_UNIT_S if result.objective is not None else None},
    )


# ------------------------------------------------------------------------------------------------
def solve_joint_enumeration(
    instance: Instance, options: ExactOptions, *, fallback_to_milp: bool = False, incumbent: Incumbent | None = None
) -> Solution:
    """Solve placement + topology + routing exactly by the strategy enumeration of the module
    docstring. Same instances, refusals, incumbent (the alternating method, a fifth of the time
    limit, or a solution file) and answer format as :func:`models.joint.solve_joint`.

    With ``fallback_to_milp`` (``--formulation auto``, the default), the search is first run with
    :data:`AUTO_PROBE_NODES` nodes; when that does not finish, or leaves more than
    :data:`AUTO_MAX_LEAVES` strategies to solve, the joint MILP solves the instance instead (from
    the same incumbent): its bound then beats a leaf-by-leaf proof. ``incumbent``: what computes the
    incumbent for ``warm_start="heuristic"`` (:data:`.joint.Incumbent`; the method layer passes the
    alternating decomposition; default :func:`.joint.heuristic_incumbent`)."""
    started = time.perf_counter()
    check_request(instance, options)
    w = instance.workload
    limit = options.time_limit_s
    deadline = None if limit is None else started + limit
    details: dict = {
        "model": "joint",
        "algorithm": "enumeration",
        "ring_space": f"every ring order for groups of up to {ALL_RINGS_UP_TO} members, TotientPerms rings above",
    }
    if limit is not None and limit <= 0:
        return exact_no_solution(options.backend, time.perf_counter() - started, details)
    incumbent = start_solution(instance, options, None if limit is None else min(60.0, 0.2 * limit), incumbent)
    best = math.inf if incumbent is None else objective_value(instance, evaluate(instance, incumbent))
    details["start_method"] = incumbent.method if incumbent is not None else None
    details["start_objective_s"] = best if incumbent is not None else None
    rel = 1e-4 if options.gap is None else options.gap
    probe = AUTO_PROBE_NODES if fallback_to_milp else MAX_SEARCH_NODES
    # Under auto with a time limit the probe gets half of what is left, so that the MILP it may hand
    # over to still has time (a probe that used it all left the MILP nothing: dlrm-mini-6, 6 s).
    search_deadline = deadline
    if fallback_to_milp and deadline is not None:
        search_deadline = time.perf_counter() + 0.5 * max(0.0, deadline - time.perf_counter())
    leaves, stats = search_strategies(instance, best * (1 - rel), deadline=search_deadline, max_nodes=probe)
    stopped = stats["pending_bound"] < math.inf  # the search stopped early (time or node budget)
    if not (fallback_to_milp and stopped):  # else the MILP decides: no need to group the leaves
        leaves = distinct_traffic(instance, leaves, deadline=deadline)
        stats["distinct_leaves"] = len(leaves)
    details.update({k: v for k, v in stats.items() if k != "pending_bound"})
    if stopped:
        details["unvisited_bound_s"] = stats["pending_bound"]
    if fallback_to_milp and (stopped or len(leaves) > AUTO_MAX_LEAVES):
        remaining = _remaining(deadline)
        sol = solve_joint(instance, replace(options, time_limit_s=remaining), start=incumbent)
        probe_note = {
            "algorithm": "milp",
            "enumeration_probe": {
                k: stats[k] for k in ("search_nodes", "surviving_leaves", "distinct_leaves") if k in stats
            },
        }
        return replace(sol, wall_time_s=time.perf_counter() - started, details={**sol.details, **probe_note})
    if options.export_model:  # the joint MILP is the model of the problem (the leaves solve parts of it)
        export_model(
            build_joint(instance, best if math.isfinite(best) else formula_upper_bound(instance)).model, options
        )
    counts = {"bandwidth_models": 0, "latency_leaf_models": 0, "full_leaf_models": 0}
    done: list[_Leaf] = []

    def accept(leaf: _Leaf) -> None:
        nonlocal best, incumbent
        if leaf.point is not None:
            value = objective_value(instance, evaluate(instance, leaf.point))
            if value < best:
                best, incumbent = value, leaf.point
                details["model_objective_s"] = leaf.point.details.get("model_objective_s")

    for lb, compute, strategy, _size in leaves:  # pass 1, in order of bound
        if lb >= best * (1 - rel) or (deadline is not None and time.perf_counter() >= deadline):
            done.append(_Leaf(lb, strategy, compute, settled=lb >= best * (1 - rel)))
            continue
        leaf = _Leaf(lb, strategy, compute)
        _bandwidth_pass(instance, options, leaf, best, rel, deadline, counts)
        accept(leaf)
        done.append(leaf)
    for leaf in sorted(done, key=lambda t: t.lower):  # pass 2: what is still open, in order of bound
        if leaf.settled or leaf.lower >= best * (1 - rel):
            continue
        if deadline is not None and time.perf_counter() >= deadline:
            break
        if leaf.bandwidth is not None:
            _latency_pass(instance, options, leaf, deadline, counts)
        else:
            _full_pass(instance, options, leaf, best, deadline, counts)
        accept(leaf)
    bound = min([best, stats["pending_bound"]] + [leaf.lower for leaf in done])
    details.update(counts)
    wall = time.perf_counter() - started
    if incumbent is None:
        status = (
            "infeasible" if math.isinf(bound) and not leaves and stats["pending_bound"] == math.inf else "no_solution"
        )
        if status == "infeasible":
            details["infeasible"] = (
                "memory: no assignment of layer configs and block servers keeps every server within server_memory_bytes"
            )
        return Solution(
            status=status, method="exact", topology=None, backend=options.backend, wall_time_s=wall, details=details
        )
    bad = validate_strategy(
        w,
        instance.n,
        Strategy(
            tuple(incumbent.placement["layer_degree"]),
            tuple(incumbent.placement["layer_start"]),
            tuple(incumbent.placement.get("block_server", ())),
        ),
    )
    if bad:
        raise RuntimeError("enumeration produced an invalid strategy: " + "; ".join(bad[:3]))
    gap = max(0.0, (best - bound) / best) if best > 0 else 0.0
    status = "optimal" if gap <= rel + 1e-9 else "feasible"
    return Solution(
        status=status,
        method="exact",
        topology=incumbent.topology,
        routing=incumbent.routing,
        placement=incumbent.placement,
        objective=best,
        bound=bound,
        gap=gap,
        backend=options.backend,
        wall_time_s=wall,
        details=details,
    )
