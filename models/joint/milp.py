"""``joint``: placement + topology + routing in one MILP, for small clusters (docs/methods/joint.md).

The exact reference the alternating decomposition is measured against. For a workload instance with
``topology_family: any`` and no fixed topology, it chooses at once

* per layer a data-parallel degree k and coset start s, per block a server (the strategy),
* the integer link-count matrix X (undirected or directed, regular or not, multi-links if allowed),
* for every AllReduce group a split of its bytes over ring orders of its coset: every order for
  groups of up to :data:`ALL_RINGS_UP_TO` members, TotientPerms' rings ``m_r -> m_{r+p mod k}``,
  gcd(p, k) = 1 (members in coset order) for larger ones - so for larger groups the optimum and
  bound are those of the TotientPerms ring space (docs/guide/evaluator.md), as ``details["ring_space"]`` says,
* a multi-commodity flow routing of all the traffic the strategy induces, on any paths,

minimising the evaluator's iteration time: the busiest server's compute (or, with ``compute_model:
critical_path``, the larger of that and the critical path of one micro-batch) + max arc load /
capacity + hop latency x the longest used path (or max of compute and comm for ``overlap: full``; comm alone for
objective ``comm_time``). Every strategy, topology, ring split and routing of that space is a point of
the model with the evaluator's value, and every point decodes to one whose evaluator value is no
worse, so the model's bound is a bound for the problem and its optimum is the optimum.

Its size grows like n^4 (hop-layered flows) times the options, so it is for n up to about a dozen
servers; larger instances get a message suggesting ``--method alternating``.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from topoopt_ilp.core.instance import Cluster, Instance
from topoopt_ilp.core.routes import PathSet, RingSet, Routing
from topoopt_ilp.core.solution import Solution, Topology
from topoopt_ilp.core.strategy import Strategy, strategy_to_demand, strategy_to_dict, unit_servers, validate_strategy
from topoopt_ilp.core.traffic import traffic_matrix
from topoopt_ilp.core.workload import MEMORY_RTOL, Workload, coset
from topoopt_ilp.errors import InputError, InstanceError, StartInfeasibleError, UnsupportedError
from topoopt_ilp.evaluation.evaluate import evaluate, objective_value
from topoopt_ilp.files import load_solution
from topoopt_ilp.heuristic.design import fitting_start_placement, heuristic_for_placement
from topoopt_ilp.models.common import ExactOptions, check_backend, check_start, run_model, solution_status
from topoopt_ilp.models.flow_decomposition import decompose_layered_flow, layered_arcs, paths_on_links
from topoopt_ilp.models.placement.data import layer_options, path_rows
from topoopt_ilp.models.topology.milp import (  # one ring-space threshold for every model
    ALL_RINGS_UP_TO,
    arc_index,
    degree_rows,
    edge_index,
)
from topoopt_ilp.solvers import LinearModel, ModelBuilder, VarBlock
from topoopt_ilp.solvers import solve as solver_solve

__all__ = [
    "MAX_JOINT_SERVERS",
    "MAX_JOINT_NONZEROS",
    "JointModel",
    "build_joint",
    "decode_point",
    "fix_strategy",
    "solve_joint",
    "joint_size",
]

#: Above this many servers the joint model is refused before it is built (suggesting alternating):
#: its hop-layered flows alone have n (n-1)^2 (n-2) columns, and measured solves already take
#: minutes at n = 10 (see ``benchmarks/joint_small.py``).
MAX_JOINT_SERVERS = 12
#: Refuse a model whose estimated constraint non-zeros exceed this (a workload with many layers or
#: blocks can be too large even at small n).
MAX_JOINT_NONZEROS = 3_000_000
#: Internal time unit (microseconds), as in the placement model: hop latencies stay far above
#: solver tolerances. Flows are measured in link-microseconds (bytes / (B * 1 us)).
TIME_UNIT_S = 1e-6
#: Ring fractions below this are treated as solver noise when decoding.
_RING_TOL = 1e-7


@dataclass
class JointModel:
    """A built joint model and the column maps that decoding and warm-starting need."""

    model: LinearModel
    n: int
    opt_layer: np.ndarray
    opt_k: np.ndarray
    opt_s: np.ndarray
    a_cols: np.ndarray
    b_cols: np.ndarray  # (blocks, n)
    ring_type: np.ndarray  # (R,) index into types
    ring_order: list[tuple[int, ...]]  # (R,) positions in the coset, in ring order
    g_cols: np.ndarray
    type_k: np.ndarray
    type_s: np.ndarray
    edges: np.ndarray
    x_cols: np.ndarray
    z_cols: np.ndarray  # (E, bits)
    f_src: np.ndarray
    f_hop: np.ndarray
    f_tail: np.ndarray
    f_head: np.ndarray
    f_cols: np.ndarray
    u_cols: np.ndarray  # (Hmax,)
    demand_pairs: np.ndarray  # (P, 2) pairs (s, v) of the delivery rows
    C: int
    Tbw: int
    T: int
    flow_scale: float  # bytes per link-microsecond
    stats: dict


def ring_orders(k: int) -> list[tuple[int, ...]]:
    """Candidate ring orders of a k-member group, as positions 0..k-1 starting at 0: all of them for
    k <= :data:`ALL_RINGS_UP_TO`, else the TotientPerms rings."""
    if k <= ALL_RINGS_UP_TO:
        return [(0,) + rest for rest in itertools.permutations(range(1, k))]
    return [tuple((j * p) % k for j in range(k)) for p in range(1, k) if math.gcd(p, k) == 1]


def joint_size(instance: Instance) -> dict[str, int]:
    """Estimated columns and non-zeros of the joint model (to refuse before building)."""
    n, w = instance.n, instance.workload
    hmax = max(1, n - 1)
    flows = n * (n - 1) + (hmax - 1) * n * (n - 1) * (n - 2)
    per_layer = [sum(n // k for k in layer.configs) for layer in w.layers]
    pairs = sum(
        per_layer[i] * per_layer[i + 1] for i in range(len(w.layers) - 1) if float(w.layers[i].activation_bytes) > 0
    )
    consumers = {b.consumer for b in w.blocks if float(b.lookup_bytes) > 0}
    lookups = sum(n * per_layer[c] for c in consumers)
    cols = flows + pairs + lookups + sum(per_layer) + n * len(w.blocks)
    nnz = 4 * flows + pairs * (2 + 2 * n) + lookups * (2 + 2 * n) + sum(per_layer) * (2 + 2 * n)
    return {"columns": int(cols), "nonzeros": int(nnz), "flow_columns": int(flows)}


def _check_size(instance: Instance) -> None:
    n = instance.n
    hint = "use --method alternating (placement MILP <-> TopologyFinder), or --method heuristic"
    if n > MAX_JOINT_SERVERS:
        raise UnsupportedError(
            f"the joint placement + topology MILP is for at most {MAX_JOINT_SERVERS} servers "
            f"(this instance has {n}); {hint}"
        )
    size = joint_size(instance)
    if size["nonzeros"] > MAX_JOINT_NONZEROS:
        raise UnsupportedError(
            f"the joint MILP would have about {size['nonzeros']:,} non-zeros (limit {MAX_JOINT_NONZEROS:,}); {hint}"
        )


def check_request(instance: Instance, options: ExactOptions) -> None:
    """Refuse, before anything is built, what the joint problem (either algorithm) cannot take."""
    if instance.workload is None:
        raise InputError("the joint model needs a workload instance; this instance has a fixed demand")
    if instance.objective not in ("iteration_time", "comm_time"):
        raise InputError(f"the joint model minimises iteration_time or comm_time, not {instance.objective!r}")
    if instance.fixed_topology is not None:
        raise InputError("the instance fixes the topology: the placement model is the exact model for it")
    if instance.topology_family != "any":
        raise UnsupportedError(
            f"the joint model chooses any topology; topology_family {instance.topology_family!r} "
            "is not supported by it (use --method alternating)"
        )
    check_backend(options)
    _check_size(instance)


def _max_bytes(w: Workload, n: int) -> float:
    """Most bytes any strategy can put on the network per iteration (big-M of the hop rows)."""
    total = 0.0
    for i, layer in enumerate(w.layers):
        total += 2.0 * (max(layer.configs) - 1) * float(layer.param_bytes)
        if i + 1 < len(w.layers):
            total += 2.0 * float(layer.activation_bytes)
    total += sum(2.0 * float(b.lookup_bytes) for b in w.blocks)
    return total


def formula_upper_bound(instance: Instance) -> float:
    """An iteration time no optimal design exceeds (the McCormick U when there is no incumbent): any
    strategy's busiest server computes at most everything, and on a connected topology its traffic
    crosses any arc at most once per byte."""
    w = instance.workload
    return (
        sum(max(w.layer_time(i, k) for k in layer.configs) for i, layer in enumerate(w.layers))
        + sum(float(x.compute_s) for x in w.blocks)
        + _max_bytes(w, instance.n) / instance.cluster.link_bytes_per_s
        + instance.n * instance.cluster.hop_latency_s
    )


# ------------------------------------------------------------------------------------------------
# The model
#
# Data
#   n servers, degree d, B bytes/s per link, alpha hop latency (us); m = d if multi-links else 1.
#   Options o = (i, k, s) of layer i (k in configs_i, s < n/k, replica memory fits): lt_o per-server
#     time, mem_o replica memory, cov_o[v] = [v in coset(k, s)], param_o bytes AllReduced by o
#     (none when k = 1), out_o = 2(k-1)/k param_o, what each member sends (and receives) in any ring.
#   Types t = (k, s) of the options with an AllReduce and their candidate rings p (every order of
#     coset(k, s) when k <= 6, else TotientPerms): RING_{t,p}[u, v] = 2(k-1)/k for consecutive
#     u -> v on ring p.
#   Pairs (o, o') of consecutive layers i, i+1 with activation bytes: RESH_{o,o'}[u, v] bytes of
#     resharding (zero when (k, s) = (k', s')). Consumers c with lookups, servers v, options o of c:
#     LOOK_{v,o}[u, w] bytes of one unit of lookup traffic of a block on v (Lam_c = total lookups of c).
#   All bytes are in link-microseconds: divided by B * 1e-6.
# Variables
#   a[o] binary, b[j, v] binary                       the strategy
#   w[o, o'] in [0, 1], q[c, v, o] in [0, 1]          products a[o] a[o'] and (lookup share on v) a[o]
#   g[t, p] >= 0                                      AllReduce bytes of coset t sent on ring p
#   x[e] integer in [0, m],  z[e, l] binary           link counts and their binary expansion x = sum 2^l z
#   y[e, l] in [0, U]                                 y = z Tbw (McCormick; U >= the optimal Tbw)
#   f[s, h, (u, v)] >= 0                              flow from source s whose h-th hop is u -> v
#                                                     (h = 1: u = s; h >= 2: u, v != s), h <= n - 1
#   u[h] binary                                       some flow takes an h-th hop
#   C, Tbw >= 0 (and T for overlap full)
# Constraints, in the order they are built; family (Cn) <name> is built by _<name>_rows below (spaces as _)
#   (C1)  choice        sum_{o of i} a[o] = 1;  sum_v b[j, v] = 1
#   (C2)  compute       sum_o lt_o cov_o[v] a[o] + sum_j compute_j b[j, v] <= C   for every v;
#                       sum_{o of i} lt_o a[o] <= C per layer   (valid, tightens the LP)
#   (C3)  path          (compute_model critical_path, objective iteration_time only)
#                       sum_{o of layers i >= c} lt_o a[o] + e_c <= C for c = 0 and every undominated entry
#                       layer c (placement.data.path_rows, as in the placement model): at an integer point
#                       C >= P, the chain of one micro-batch, so C = max(busiest server, P)
#   (C4)  memory        sum_o mem_o cov_o[v] a[o] + sum_j bytes_j b[j, v] <= capacity (1 + MEMORY_RTOL)
#   (C5)  rings         sum_p g[t, p] = sum_{o of type t} param_o a[o]
#   (C6)  ports         sum_{o of i} out_o a[o] <= d Tbw per layer   (valid: a server sends and receives
#                       at most d links' worth per unit of Tbw)
#   for each pair of consecutive layers i, i+1 with activation bytes, (C7)-(C9) pair by pair:
#   (C7)  transport     sum_{o'} w[o, o'] = a[o];  sum_o w[o, o'] = a[o']     (exact product for binary a)
#   (C8)  pair compute  sum comp_{o,o'} w[o, o'] <= C   (comp = both times if the two cosets meet, else
#                       the larger; valid, tightens the LP)
#   (C9)  pair ports    sum out_{o,o'} w[o, o'] <= d Tbw   (out_{o,o'} = the most bytes one server sends or
#                       receives in both layers' rings and the resharding; valid)
#   (C10) lookups       sum_o q[c, v, o] = sum_{j of c} lookup_j / Lam_c b[j, v];  q[c, v, o] <= a[o]
#   (C11) topology      degree rows (= d if regular, else <= d);  x[e] = sum_l 2^l z[e, l]
#   (C12) mccormick     y <= U z;  y <= Tbw   (the upper rows suffice: y only bounds the capacity rows)
#   (C13) flow          sum_h in_h(v) - sum_{h>=2} out_h(v) = D[s, v]   for every s, v != s, with the demand
#                       D[s, v] = sum RING g + sum RESH w + sum Lam_c LOOK q   (linear in the variables);
#                       in_h(v) - out_{h+1}(v) >= 0   (what reaches v at hop h is delivered or forwarded)
#   (C14) capacity      sum_{s,h} f[s, h, (u, v)] <= sum_l 2^l y[e(u,v), l]
#   (C15) cuts          sum_{out-arcs of v} flow <= d Tbw;  same for in-arcs;  all flow <= (n d) Tbw   (valid:
#                       the arcs of v carry at most d links' worth; the LP of the McCormick rows alone does
#                       not see the degree)
#   (C16) hops          sum_{s, arcs} f[s, h, .] <= M u[h];  u[h] <= u[h-1]   (M: the most bytes possible)
# Objective
#   minimize C + Tbw + alpha sum_h u[h]  (overlap none);  T >= C, T >= Tbw + alpha sum_h u[h]
#   (overlap full);  Tbw + alpha sum_h u[h] (objective comm_time).
# ------------------------------------------------------------------------------------------------
@dataclass
class _Rings:
    """The coset types t = (k, s) with an AllReduce and one column g[t, p] per candidate ring p."""

    types: np.ndarray  # k n + s of each type, sorted
    type_k: np.ndarray
    type_s: np.ndarray
    ring_type: np.ndarray  # (R,) index into the types
    ring_order: list[tuple[int, ...]]  # (R,) positions in the coset, in ring order
    g_cols: np.ndarray


@dataclass
class _LayerPair:
    """Consecutive layers i, i+1 with activation bytes: their options, every pair (o, o') of them
    (P1[r], P2[r]) and its product column w."""

    layer: int
    act: float  # activation bytes of layer i
    O1: np.ndarray
    O2: np.ndarray
    P1: np.ndarray
    P2: np.ndarray
    w_cols: np.ndarray


@dataclass
class _Consumer:
    """A layer c that reads lookups: its blocks with lookups, Lam_c, its options and the columns q."""

    layer: int
    blocks: list[int]
    lam: float
    Oc: np.ndarray
    q_cols: np.ndarray  # (n, len(Oc))


@dataclass
class _Links:
    """Arcs (tail, head), edges (pairs, or arcs when directed) and their link-count columns."""

    tail: np.ndarray
    head: np.ndarray
    edges: np.ndarray
    arc_edge: np.ndarray  # edge of every arc
    bits: int
    x: VarBlock
    z_cols: np.ndarray  # (E, bits)
    y_cols: np.ndarray  # (E, bits)


@dataclass
class _Flows:
    """The hop-layered flow columns f[s, h, (u, v)] as arrays, and the hop indicators u."""

    src: np.ndarray
    hop: np.ndarray
    tail: np.ndarray
    head: np.ndarray
    f_cols: np.ndarray
    u_cols: np.ndarray  # (hmax,)


@dataclass
class _JointData:
    """The joint model's data and columns, named as in the math block above: what each constraint
    family's rows are built from. Times are in microseconds, bytes in link-microseconds."""

    instance: Instance
    w: Workload
    n: int
    degree: int
    hmax: int  # the most hops a flow may take (n - 1)
    us: float  # microseconds per second
    flow_scale: float  # bytes per link-microsecond
    alpha: float
    U: float
    opt_layer: np.ndarray
    opt_k: np.ndarray
    opt_s: np.ndarray
    cov: np.ndarray  # (options, n)
    cov_o: np.ndarray  # the non-zeros (o, v) of cov
    cov_v: np.ndarray
    blk_j: np.ndarray  # (block, server) of every b column, in column order
    blk_v: np.ndarray
    lt: np.ndarray
    mem: np.ndarray
    param: np.ndarray
    has_ar: np.ndarray
    ar_out: np.ndarray  # (options, n) out_o cov_o[v]: ring bytes each server sends
    a_cols: np.ndarray
    b_cols: np.ndarray  # (blocks, n)
    C: int
    TB: int
    T: int  # -1 without overlap full
    rings: _Rings
    pairs: list[_LayerPair]
    consumers: list[_Consumer]
    links: _Links
    flows: _Flows
    units: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)

    @property
    def L(self) -> int:
        return len(self.w.layers)

    @property
    def nb(self) -> int:
        return len(self.w.blocks)

    def servers(self, o: int) -> np.ndarray:
        """The server holding each batch unit under option o (kept per (k, s): options share them)."""
        key = (int(self.opt_k[o]), int(self.opt_s[o]))
        if key not in self.units:
            self.units[key] = unit_servers(self.n, *key)
        return self.units[key]

    def reshards(self, o1: int, o2: int) -> bool:
        """Whether data moves between options o1 and o2 of consecutive layers (their (k, s) differ)."""
        return (self.opt_k[o1], self.opt_s[o1]) != (self.opt_k[o2], self.opt_s[o2])


def build_joint(instance: Instance, upper_bound_s: float) -> JointModel:
    """Build the joint MILP (math in the comment block above).

    ``upper_bound_s`` must be at least the optimal bandwidth term (any feasible iteration time is):
    it is the McCormick bound U of ``y = z Tbw``.
    """
    bld = ModelBuilder(name="joint")
    d = _joint_data(instance, upper_bound_s, bld)
    _choice_rows(bld, d)
    _compute_rows(bld, d)
    _path_rows(bld, d)
    _memory_rows(bld, d)
    _rings_rows(bld, d)
    _ports_rows(bld, d)
    for pair in d.pairs:  # (C7)-(C9) pair by pair
        _transport_rows(bld, d, pair)
        _pair_compute_rows(bld, d, pair)
        _pair_ports_rows(bld, d, pair)
    _lookups_rows(bld, d)
    _topology_rows(bld, d)
    _mccormick_rows(bld, d)
    _flow_rows(bld, d)
    _capacity_rows(bld, d)
    _cuts_rows(bld, d)
    _hops_rows(bld, d)
    _objective(bld, d)
    return _joint_model(bld.build(), d)


def _joint_data(instance: Instance, upper_bound_s: float, bld: ModelBuilder) -> _JointData:
    """The data of the math block, and every column of the model (in column order)."""
    w, c = instance.workload, instance.cluster
    n = c.servers
    us = 1.0 / TIME_UNIT_S
    flow_scale = c.link_bytes_per_s * TIME_UNIT_S
    U = max(float(upper_bound_s) * us, 1e-6) * (1 + 1e-6)
    hmax = max(1, n - 1)
    opt_layer, opt_k, opt_s = layer_options(w, n)
    for i, layer in enumerate(w.layers):
        if not (opt_layer == i).any():
            raise InputError(f"layer {i} ({layer.name}) has no config whose replica fits in server memory")
    a = bld.add_variables(len(opt_layer), kind="binary", name="a")
    nb = len(w.blocks)
    b = bld.add_variables((nb, n), kind="binary", name="b")
    cov = np.zeros((len(opt_layer), n))
    for o, (k, s) in enumerate(zip(opt_k, opt_s)):
        cov[o, list(coset(n, int(k), int(s)))] = 1.0
    cov_o, cov_v = np.nonzero(cov)
    blk_j, blk_v = np.divmod(np.arange(nb * n), n)
    param = np.array([float(w.layers[int(i)].param_bytes) for i in opt_layer])
    has_ar = (opt_k >= 2) & (param > 0)
    C = int(bld.add_variables(1, name="C").index[0])
    TB = int(bld.add_variables(1, ub=U, name="Tbw").index[0])
    rings = _ring_columns(bld, n, opt_k, opt_s, has_ar)
    pairs = _pair_columns(bld, w, opt_layer)
    consumers = _consumer_columns(bld, w, n, opt_layer)
    links = _link_columns(bld, c, U)
    flows = _flow_columns(bld, n, hmax)
    overlapped = instance.objective != "comm_time" and w.overlap == "full"
    T = int(bld.add_variables(1, name="T").index[0]) if overlapped else -1
    return _JointData(
        instance=instance,
        w=w,
        n=n,
        degree=c.degree,
        hmax=hmax,
        us=us,
        flow_scale=flow_scale,
        alpha=c.hop_latency_s * us,
        U=U,
        opt_layer=opt_layer,
        opt_k=opt_k,
        opt_s=opt_s,
        cov=cov,
        cov_o=cov_o,
        cov_v=cov_v,
        blk_j=blk_j,
        blk_v=blk_v,
        lt=np.array([w.layer_time(int(i), int(k)) for i, k in zip(opt_layer, opt_k)]) * us,
        mem=np.array([w.layers[int(i)].replica_memory(int(k)) for i, k in zip(opt_layer, opt_k)]),
        param=param,
        has_ar=has_ar,
        ar_out=cov * np.where(has_ar, 2.0 * (opt_k - 1) / opt_k * param, 0.0)[:, None],
        a_cols=a.index,
        b_cols=b.index.reshape(nb, n) if nb else np.zeros((0, n), dtype=np.int64),
        C=C,
        TB=TB,
        T=T,
        rings=rings,
        pairs=pairs,
        consumers=consumers,
        links=links,
        flows=flows,
    )


def _ring_columns(bld: ModelBuilder, n: int, opt_k: np.ndarray, opt_s: np.ndarray, has_ar: np.ndarray) -> _Rings:
    """The types of the options with an AllReduce, their candidate rings and the columns g."""
    types = np.unique((opt_k * n + opt_s)[has_ar])
    type_k, type_s = types // n, types % n
    ring_type, ring_order = [], []
    for t, k in enumerate(type_k):
        for order in ring_orders(int(k)):
            ring_type.append(t), ring_order.append(order)
    g = bld.add_variables(len(ring_type), name="g")
    return _Rings(types, type_k, type_s, np.array(ring_type, dtype=np.int64), ring_order, g.index)


def _pair_columns(bld: ModelBuilder, w: Workload, opt_layer: np.ndarray) -> list[_LayerPair]:
    """The option pairs of consecutive layers with activation bytes, and their products w."""
    pairs = []
    for i in range(len(w.layers) - 1):
        act = float(w.layers[i].activation_bytes)
        if act == 0:
            continue  # nothing moves between the two layers: their choices need no product
        O1, O2 = np.flatnonzero(opt_layer == i), np.flatnonzero(opt_layer == i + 1)
        P1, P2 = np.repeat(O1, len(O2)), np.tile(O2, len(O1))
        wv = bld.add_variables(len(P1), ub=1.0, name=f"w{i}")
        pairs.append(_LayerPair(i, act, O1, O2, P1, P2, wv.index))
    return pairs


def _consumer_columns(bld: ModelBuilder, w: Workload, n: int, opt_layer: np.ndarray) -> list[_Consumer]:
    """The layers reading lookups, aggregated over their blocks, and the columns q."""
    consumers = []
    for cns in sorted({int(x.consumer) for x in w.blocks if float(x.lookup_bytes) > 0}):
        blocks = [j for j, x in enumerate(w.blocks) if int(x.consumer) == cns and float(x.lookup_bytes) > 0]
        lam = sum(float(w.blocks[j].lookup_bytes) for j in blocks)
        Oc = np.flatnonzero(opt_layer == cns)
        q = bld.add_variables((n, len(Oc)), ub=1.0, name=f"q{cns}")
        consumers.append(_Consumer(cns, blocks, lam, Oc, q.index.reshape(n, len(Oc))))
    return consumers


def _link_columns(bld: ModelBuilder, c: Cluster, U: float) -> _Links:
    """The link counts x, their binary expansion z and the McCormick products y = z Tbw."""
    n = c.servers
    tail, head = arc_index(n)
    edges, arc_edge = edge_index(n, c.directed, tail, head)
    E = len(edges)
    mult = c.degree if c.multi_links else 1
    bits = max(1, int(mult).bit_length())
    x = bld.add_variables(E, lb=0, ub=mult, kind="integer", name="x")
    z = bld.add_variables((E, bits), kind="binary", name="z")
    y = bld.add_variables((E, bits), ub=U, name="y")
    return _Links(tail, head, edges, arc_edge, bits, x, z.index.reshape(E, bits), y.index.reshape(E, bits))


def _flow_columns(bld: ModelBuilder, n: int, hmax: int) -> _Flows:
    """The hop-layered flows of every source and the hop indicators u."""
    src, hop, tail, head = layered_arcs(n, np.arange(n), hmax)
    f = bld.add_variables(len(src), name="f")
    u = bld.add_variables(hmax, kind="binary", name="u")
    return _Flows(src, hop, tail, head, f.index, u.index)


def _joint_model(model: LinearModel, d: _JointData) -> JointModel:
    """The built model with the column maps that decoding and warm-starting need."""
    n, rings, links, flows = d.n, d.rings, d.links, d.flows
    stats = {
        "options": len(d.opt_layer),
        "pairs": sum(len(p.P1) for p in d.pairs),
        "lookup_columns": sum(cn.q_cols.size for cn in d.consumers),
        "rings": len(rings.ring_type),
        "flow_columns": len(flows.f_cols),
        "max_hops_modelled": d.hmax,
    }
    return JointModel(
        model=model,
        n=n,
        opt_layer=d.opt_layer,
        opt_k=d.opt_k,
        opt_s=d.opt_s,
        a_cols=d.a_cols,
        b_cols=d.b_cols,
        ring_type=rings.ring_type,
        ring_order=rings.ring_order,
        g_cols=rings.g_cols,
        type_k=rings.type_k,
        type_s=rings.type_s,
        edges=links.edges,
        x_cols=links.x.index,
        z_cols=links.z_cols,
        f_src=flows.src,
        f_hop=flows.hop,
        f_tail=flows.tail,
        f_head=flows.head,
        f_cols=flows.f_cols,
        u_cols=flows.u_cols,
        demand_pairs=np.stack(np.nonzero(~np.eye(n, dtype=bool)), axis=1),
        C=d.C,
        Tbw=d.TB,
        T=d.T,
        flow_scale=d.flow_scale,
        stats=stats,
    )


def _choice_rows(bld: ModelBuilder, d: _JointData) -> None:
    """(C1) choice: every layer takes one option, every block one server."""
    bld.add_constraints(d.opt_layer, d.a_cols, 1.0, lb=1.0, ub=1.0, count=d.L, name="choice")
    if d.nb:
        bld.add_constraints(
            np.repeat(np.arange(d.nb), d.n), d.b_cols.ravel(), 1.0, lb=1.0, ub=1.0, count=d.nb, name="block_choice"
        )


def _compute_rows(bld: ModelBuilder, d: _JointData) -> None:
    """(C2) compute: C is at least every server's compute, and every layer's per-server time."""
    n, L = d.n, d.L
    blk_comp = np.array([float(x.compute_s) for x in d.w.blocks]) * d.us
    bld.add_constraints(
        np.concatenate([d.cov_v, d.blk_v, np.arange(n)]),
        np.concatenate([d.a_cols[d.cov_o], d.b_cols.ravel(), np.full(n, d.C)]),
        np.concatenate([d.lt[d.cov_o], blk_comp[d.blk_j], -np.ones(n)]),
        ub=0.0,
        count=n,
        name="compute",
    )
    # valid: the servers of a layer run at least its per-server time (tightens the LP, whose
    # fractional a could otherwise spread a degree-1 layer over all servers at no traffic)
    bld.add_constraints(
        np.concatenate([d.opt_layer, np.arange(L)]),
        np.concatenate([d.a_cols, np.full(L, d.C)]),
        np.concatenate([d.lt, -np.ones(L)]),
        ub=0.0,
        count=L,
        name="layer_compute",
    )


def _path_rows(bld: ModelBuilder, d: _JointData) -> None:
    """(C3) path: under ``compute_model: critical_path`` C is also at least one micro-batch's chain."""
    if d.instance.objective == "comm_time" or d.w.compute_model != "critical_path":
        return  # comm_time has no compute term; busiest_server charges no chain
    rows, cols, vals, ubs = path_rows(d.w, d.opt_layer, d.lt, d.a_cols, d.C)
    bld.add_constraints(rows, cols, vals, ub=ubs * d.us, count=len(ubs), name="path")


def _memory_rows(bld: ModelBuilder, d: _JointData) -> None:
    """(C4) memory: every server holds its replicas and blocks (as fractions of its capacity)."""
    capm = float(d.w.server_memory_bytes)
    blk_mem = np.array([float(x.bytes) for x in d.w.blocks])
    bld.add_constraints(
        np.concatenate([d.cov_v, d.blk_v]),
        np.concatenate([d.a_cols[d.cov_o], d.b_cols.ravel()]),
        np.concatenate([d.mem[d.cov_o] / capm, blk_mem[d.blk_j] / capm]),
        ub=1.0 + MEMORY_RTOL,
        count=d.n,
        name="memory",
    )


def _rings_rows(bld: ModelBuilder, d: _JointData) -> None:
    """(C5) rings: the rings of a coset type carry the parameters of the options of that type."""
    r = d.rings
    if not len(r.types):
        return
    o_t = np.flatnonzero(d.has_ar)
    t_of = np.searchsorted(r.types, (d.opt_k * d.n + d.opt_s)[o_t])
    bld.add_constraints(
        np.concatenate([r.ring_type, t_of]),
        np.concatenate([r.g_cols, d.a_cols[o_t]]),
        np.concatenate([np.ones(len(r.ring_type)), -d.param[o_t] / d.flow_scale]),
        lb=0.0,
        ub=0.0,
        count=len(r.types),
        name="rings",
    )


def _ports_rows(bld: ModelBuilder, d: _JointData) -> None:
    """(C6) ports: a ring member sends 2(k-1)/k of its layer's parameters whatever the ring, over
    at most d links."""
    L = d.L
    bld.add_constraints(
        np.concatenate([d.opt_layer, np.arange(L)]),
        np.concatenate([d.a_cols, np.full(L, d.TB)]),
        np.concatenate([d.ar_out.max(axis=1) / (d.degree * d.flow_scale), -np.ones(L)]),
        ub=0.0,
        count=L,
        name="layer_ports",
    )


def _transport_rows(bld: ModelBuilder, d: _JointData, p: _LayerPair) -> None:
    """(C7) transport: the products w of a layer pair, by their marginals a."""
    O1, O2, nw = p.O1, p.O2, len(p.P1)
    r1 = np.searchsorted(O1, p.P1)
    r2 = len(O1) + np.searchsorted(O2, p.P2)
    bld.add_constraints(
        np.concatenate([r1, r2, np.arange(len(O1)), len(O1) + np.arange(len(O2))]),
        np.concatenate([p.w_cols, p.w_cols, d.a_cols[O1], d.a_cols[O2]]),
        np.concatenate([np.ones(2 * nw), -np.ones(len(O1) + len(O2))]),
        lb=0.0,
        ub=0.0,
        count=len(O1) + len(O2),
        name=f"transport{p.layer}",
    )


def _pair_compute_rows(bld: ModelBuilder, d: _JointData, p: _LayerPair) -> None:
    """(C8) pair compute: a server hosting both layers (their cosets meet) runs both."""
    P1, P2, lt = p.P1, p.P2, d.lt
    meet = (d.opt_s[P1] - d.opt_s[P2]) % np.gcd(d.n // d.opt_k[P1], d.n // d.opt_k[P2]) == 0
    comp = np.where(meet, lt[P1] + lt[P2], np.maximum(lt[P1], lt[P2]))
    bld.add_constraints(
        np.zeros(len(P1) + 1, dtype=np.int64),
        np.concatenate([p.w_cols, [d.C]]),
        np.concatenate([comp, [-1.0]]),
        ub=0.0,
        count=1,
        name=f"pair_compute{p.layer}",
    )


def _pair_ports_rows(bld: ModelBuilder, d: _JointData, p: _LayerPair) -> None:
    """(C9) pair ports: the busiest server's sends in both layers' rings and the resharding between
    them, over at most d links."""
    n, share = d.n, p.act / d.n
    port = np.zeros(len(p.P1))
    for r, (o1, o2) in enumerate(zip(p.P1, p.P2)):
        out = d.ar_out[o1] + d.ar_out[o2]  # a ring carries as much into a server as out of it
        if d.reshards(o1, o2):
            src, dst = d.servers(o1), d.servers(o2)
            moved = src != dst  # resharding is symmetric: each server sends what it receives
            out = out + np.bincount(src[moved], minlength=n) * share + np.bincount(dst[moved], minlength=n) * share
        port[r] = out.max() / (d.degree * d.flow_scale)
    bld.add_constraints(
        np.zeros(len(p.P1) + 1, dtype=np.int64),
        np.concatenate([p.w_cols, [d.TB]]),
        np.concatenate([port, [-1.0]]),
        ub=0.0,
        count=1,
        name=f"pair_ports{p.layer}",
    )


def _lookups_rows(bld: ModelBuilder, d: _JointData) -> None:
    """(C10) lookups: q[c, v, .] is the lookup share of c's blocks on v, spread over c's chosen option."""
    n = d.n
    for cn in d.consumers:
        qc, Oc, blocks = cn.q_cols, cn.Oc, cn.blocks
        share = np.array([float(d.w.blocks[j].lookup_bytes) / cn.lam for j in blocks])
        # b_cols[blocks].T is (n, blocks of c): raveled server by server, blocks fastest.
        bld.add_constraints(
            np.concatenate([np.repeat(np.arange(n), len(Oc)), np.repeat(np.arange(n), len(blocks))]),
            np.concatenate([qc.ravel(), d.b_cols[blocks].T.ravel()]),
            np.concatenate([np.ones(qc.size), -np.tile(share, n)]),
            lb=0.0,
            ub=0.0,
            count=n,
            name=f"lookup{cn.layer}",
        )
        option = Oc[np.arange(qc.size) % len(Oc)]  # the option of every q column, in column order
        bld.add_constraints(
            np.concatenate([np.arange(qc.size)] * 2),
            np.concatenate([qc.ravel(), d.a_cols[option]]),
            np.concatenate([np.ones(qc.size), -np.ones(qc.size)]),
            ub=0.0,
            count=qc.size,
            name=f"lookup_le_a{cn.layer}",
        )


def _topology_rows(bld: ModelBuilder, d: _JointData) -> None:
    """(C11) topology: the degree rows on x, and x as the binary expansion of z."""
    c, lk = d.instance.cluster, d.links
    E, bits = len(lk.edges), lk.bits
    degree_rows(bld, lk.x, lk.edges, d.n, d.degree, c.directed, c.regular)
    bld.add_constraints(
        np.concatenate([np.arange(E), np.repeat(np.arange(E), bits)]),
        np.concatenate([lk.x.index, lk.z_cols.ravel()]),
        np.concatenate([np.ones(E), -np.tile(2.0 ** np.arange(bits), E)]),
        lb=0.0,
        ub=0.0,
        count=E,
        name="expansion",
    )


def _mccormick_rows(bld: ModelBuilder, d: _JointData) -> None:
    """(C12) mccormick: y = z Tbw for binary z, given Tbw <= U."""
    yc, zc = d.links.y_cols, d.links.z_cols
    m_ = yc.size
    bld.add_constraints(
        np.concatenate([np.arange(m_)] * 2),
        np.concatenate([yc.ravel(), zc.ravel()]),
        np.concatenate([np.ones(m_), -d.U * np.ones(m_)]),
        ub=0.0,
        count=m_,
        name="mccormick_z",
    )
    bld.add_constraints(
        np.concatenate([np.arange(m_)] * 2),
        np.concatenate([yc.ravel(), np.full(m_, d.TB)]),
        np.concatenate([np.ones(m_), -np.ones(m_)]),
        ub=0.0,
        count=m_,
        name="mccormick_t",
    )


def _demand(d: _JointData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The demand D[s, v] of (C13) as terms (row s n + v, column, link-microseconds): the rings'
    RING g, then the resharding's RESH w, then the lookups' Lam_c LOOK q."""
    n = d.n
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []

    def add_pattern(col: int, src: np.ndarray, dst: np.ndarray, amount: np.ndarray | float) -> None:
        amount = np.broadcast_to(np.asarray(amount, dtype=float), src.shape)
        keep = src != dst
        rows.append(src[keep] * n + dst[keep])
        cols.append(np.full(int(keep.sum()), col, dtype=np.int64))
        vals.append(amount[keep] / d.flow_scale)

    rg = d.rings
    for r, col in enumerate(rg.g_cols):
        k, s = int(rg.type_k[rg.ring_type[r]]), int(rg.type_s[rg.ring_type[r]])
        m = np.array(coset(n, k, s))[list(rg.ring_order[r])]
        add_pattern(int(col), m, np.roll(m, -1), 2.0 * (k - 1) / k * d.flow_scale)  # g is in link-us already
    for p in d.pairs:
        for col, o1, o2 in zip(p.w_cols, p.P1, p.P2):
            if d.reshards(o1, o2):
                src, dst = d.servers(o1), d.servers(o2)
                add_pattern(int(col), np.concatenate([src, dst]), np.concatenate([dst, src]), p.act / n)
    for cn in d.consumers:
        for v in range(n):
            for oi, o in enumerate(cn.Oc):
                dst, src = d.servers(int(o)), np.full(n, v)
                add_pattern(int(cn.q_cols[v, oi]), np.concatenate([src, dst]), np.concatenate([dst, src]), cn.lam / n)
    if not rows:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    return np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)


def _flow_rows(bld: ModelBuilder, d: _JointData) -> None:
    """(C13) flow: every source's flow delivers its demand to every server, hop by hop."""
    n, hmax, f = d.n, d.hmax, d.flows
    NF = len(f.f_cols)
    dr, dc, dv = _demand(d)
    later = f.hop >= 2
    # delivery rows, one per (s, v), v != s: row id s*n + v (the diagonal rows stay empty: 0 = 0)
    bld.add_constraints(
        np.concatenate([f.src * n + f.head, f.src[later] * n + f.tail[later], dr]),
        np.concatenate([f.f_cols, f.f_cols[later], dc]),
        np.concatenate([np.ones(NF), -np.ones(int(later.sum())), -dv]),
        lb=0.0,
        ub=0.0,
        count=n * n,
        name="delivery",
    )
    if hmax >= 2:
        # forward rows (s, v, h), h = 1..hmax-1: in_h(v) - out_{h+1}(v) >= 0; row id (s*hmax + h-1)*n + v
        into = f.hop <= hmax - 1
        bld.add_constraints(
            np.concatenate(
                [
                    (f.src[into] * hmax + f.hop[into] - 1) * n + f.head[into],
                    (f.src[later] * hmax + f.hop[later] - 2) * n + f.tail[later],
                ]
            ),
            np.concatenate([f.f_cols[into], f.f_cols[later]]),
            np.concatenate([np.ones(int(into.sum())), -np.ones(int(later.sum()))]),
            lb=0.0,
            count=n * hmax * n,
            name="forward",
        )


def _capacity_rows(bld: ModelBuilder, d: _JointData) -> None:
    """(C14) capacity: the flows on an arc fit its links for Tbw (sum_l 2^l y of its edge)."""
    lk, f = d.links, d.flows
    A = len(lk.tail)
    arc_id = np.full((d.n, d.n), -1, dtype=np.int64)
    arc_id[lk.tail, lk.head] = np.arange(A)
    bld.add_constraints(
        np.concatenate([arc_id[f.tail, f.head], np.repeat(np.arange(A), lk.bits)]),
        np.concatenate([f.f_cols, lk.y_cols[lk.arc_edge].ravel()]),
        np.concatenate([np.ones(len(f.f_cols)), -np.tile(2.0 ** np.arange(lk.bits), A)]),
        ub=0.0,
        count=A,
        name="capacity",
    )


def _cuts_rows(bld: ModelBuilder, d: _JointData) -> None:
    """(C15) cuts: the out- and in-flow of every server fit d links for Tbw; all flow fits n d."""
    n, f = d.n, d.flows
    NF = len(f.f_cols)
    for end, name in ((f.tail, "out_cut"), (f.head, "in_cut")):
        bld.add_constraints(
            np.concatenate([end, np.arange(n)]),
            np.concatenate([f.f_cols, np.full(n, d.TB)]),
            np.concatenate([np.ones(NF), -float(d.degree) * np.ones(n)]),
            ub=0.0,
            count=n,
            name=name,
        )
    bld.add_constraints(
        np.zeros(NF + 1, dtype=np.int64),
        np.concatenate([f.f_cols, [d.TB]]),
        np.concatenate([np.ones(NF), [-float(n * d.degree)]]),
        ub=0.0,
        count=1,
        name="total_cut",
    )


def _hops_rows(bld: ModelBuilder, d: _JointData) -> None:
    """(C16) hops: u[h] is on when some flow takes an h-th hop, and the used hops come first."""
    hmax, f = d.hmax, d.flows
    M = _max_bytes(d.w, d.n) / d.flow_scale * (1 + 1e-6) + 1e-9
    bld.add_constraints(
        np.concatenate([f.hop - 1, np.arange(hmax)]),
        np.concatenate([f.f_cols, f.u_cols]),
        np.concatenate([np.ones(len(f.f_cols)), -M * np.ones(hmax)]),
        ub=0.0,
        count=hmax,
        name="hop_used",
    )
    if hmax >= 2:
        h_ = np.arange(hmax - 1)
        bld.add_constraints(
            np.concatenate([h_, h_]),
            np.concatenate([f.u_cols[1:], f.u_cols[:-1]]),
            np.concatenate([np.ones(hmax - 1), -np.ones(hmax - 1)]),
            ub=0.0,
            count=hmax - 1,
            name="hop_order",
        )


def _objective(bld: ModelBuilder, d: _JointData) -> None:
    """The objective: C + Tbw + alpha sum_h u[h], or T with overlap full, or Tbw + alpha sum_h u[h]
    for comm_time (microseconds)."""
    C, TB, T = d.C, d.TB, d.T
    lat_cols, lat_vals = d.flows.u_cols, np.full(d.hmax, d.alpha)
    if d.instance.objective == "comm_time":
        bld.set_objective(np.concatenate([[TB], lat_cols]), np.concatenate([[1.0], lat_vals]))
    elif T >= 0:
        bld.add_constraints([0, 0], [C, T], [1.0, -1.0], ub=0.0, count=1, name="T_compute")
        bld.add_constraints(
            np.zeros(d.hmax + 2, dtype=np.int64),
            np.concatenate([[TB, T], lat_cols]),
            np.concatenate([[1.0, -1.0], lat_vals]),
            ub=0.0,
            count=1,
            name="T_comm",
        )
        bld.set_objective([T], [1.0])
    else:
        bld.set_objective(np.concatenate([[C, TB], lat_cols]), np.concatenate([[1.0, 1.0], lat_vals]))


# ------------------------------------------------------------------------------------------------
# Decoding and warm start
# ------------------------------------------------------------------------------------------------
def _decode_strategy(jm: JointModel, values: np.ndarray, L: int) -> Strategy:
    av = values[jm.a_cols]
    deg, start = [], []
    for i in range(L):
        o = np.flatnonzero(jm.opt_layer == i)
        best = o[int(np.argmax(av[o]))]
        deg.append(int(jm.opt_k[best])), start.append(int(jm.opt_s[best]))
    blocks = tuple(int(np.argmax(values[row])) for row in jm.b_cols)
    return Strategy(tuple(deg), tuple(start), blocks)


def _decode_rings(jm: JointModel, values: np.ndarray, groups) -> RingSet:
    """Ring split of every AllReduce group of the decoded strategy, from the g columns."""
    n = jm.n
    gv = np.maximum(values[jm.g_cols], 0.0)
    out = []
    for gi, group in enumerate(groups):
        m = list(group.members)
        k, s = len(m), m[0]
        t = np.flatnonzero((jm.type_k == k) & (jm.type_s == s % (n // k)))
        rings = np.flatnonzero(jm.ring_type == t[0]) if t.size else np.zeros(0, dtype=np.int64)
        amounts = gv[rings]
        keep = amounts > _RING_TOL * max(float(amounts.sum()), 1e-300)
        if not keep.any():
            out.append((gi, m, 1.0))
            continue
        frac = amounts[keep] / amounts[keep].sum()
        for r, fr in zip(rings[keep], frac):
            out.append((gi, [m[j] for j in jm.ring_order[r]], float(fr)))
    return RingSet.from_lists(out) if out else RingSet.empty()


def _decode_paths(jm: JointModel, values: np.ndarray) -> list[tuple[list[int], float]]:
    """Paths per source from the hop-layered flows (decomposed in the layered graph, so a path
    never has more hops than the layers the model counted)."""
    fv = np.maximum(values[jm.f_cols], 0.0)
    paths: list[tuple[list[int], float]] = []
    for s in range(jm.n):
        sel = jm.f_src == s
        paths += decompose_layered_flow(jm.n, s, jm.f_hop[sel], jm.f_tail[sel], jm.f_head[sel], fv[sel])
    return paths


def _routing(instance: Instance, jm: JointModel, values: np.ndarray, X: np.ndarray, strategy: Strategy) -> Routing:
    n = instance.n
    dm = strategy_to_demand(instance.workload, n, strategy)
    rings = _decode_rings(jm, values, dm.allreduce)
    demand = traffic_matrix(instance, rings, dm)  # the bytes of every pair under these rings
    decoded: dict[tuple[int, int], list[tuple[list[int], float]]] = {}
    for p, amount in _decode_paths(jm, values):
        if demand[p[0], p[-1]] > 0:
            decoded.setdefault((p[0], p[-1]), []).append((p, amount))
    wanted = [(int(s), int(t)) for s, t in zip(*np.nonzero(demand > 0)) if s != t]
    paths = paths_on_links(X, decoded, wanted, keep_unconnected=False)
    return Routing(rings=rings, paths=PathSet.from_lists(paths) if paths else PathSet.empty())


def decode_point(instance: Instance, jm: JointModel, values: np.ndarray) -> tuple[Strategy, np.ndarray, Routing]:
    """The strategy, link-count matrix and routing (explicit rings and paths) of a model point.
    Raises UnsupportedError when rounding left a pair with traffic unconnected."""
    strategy = _decode_strategy(jm, values, len(instance.workload.layers))
    bad = validate_strategy(instance.workload, instance.n, strategy)
    if bad:
        raise RuntimeError("joint model returned an invalid strategy: " + "; ".join(bad[:3]))
    counts = np.rint(values[jm.x_cols]).astype(np.int64)
    X = np.zeros((instance.n, instance.n), dtype=np.int64)
    X[jm.edges[:, 0], jm.edges[:, 1]] = counts
    if not instance.cluster.directed:
        X[jm.edges[:, 1], jm.edges[:, 0]] = counts
    return strategy, X, _routing(instance, jm, values, X, strategy)


def _partial_point(jm: JointModel, strategy: Strategy, X: np.ndarray | None = None) -> np.ndarray | None:
    """The model's columns that ``strategy`` (and the link counts ``X``) determine, NaN elsewhere.
    None when the model has no option for one of its layers (a replica that never fits in memory)
    or cannot express ``X``."""
    x = np.full(jm.model.num_vars, np.nan)
    x[jm.a_cols] = 0.0
    for i, (k, s) in enumerate(zip(strategy.layer_degree, strategy.layer_start)):
        o = np.flatnonzero((jm.opt_layer == i) & (jm.opt_k == k) & (jm.opt_s == s))
        if not o.size:
            return None
        x[jm.a_cols[o[0]]] = 1.0
    if jm.b_cols.size:
        x[jm.b_cols.ravel()] = 0.0
        x[jm.b_cols[np.arange(len(strategy.block_server)), list(strategy.block_server)]] = 1.0
    if X is not None:
        counts = X[jm.edges[:, 0], jm.edges[:, 1]]
        bits = jm.z_cols.shape[1]
        if counts.max(initial=0) >= 2**bits or (counts > jm.model.col_upper[jm.x_cols]).any():
            return None
        x[jm.x_cols] = counts
        x[jm.z_cols] = (counts[:, None] >> np.arange(bits)[None, :]) & 1
    return x


def _fixed_at(model: LinearModel, partial: np.ndarray) -> LinearModel:
    """``model`` with the columns ``partial`` gives (not NaN) fixed at those values."""
    known = ~np.isnan(partial)
    lower, upper = model.col_lower.copy(), model.col_upper.copy()
    lower[known] = upper[known] = partial[known]
    return replace(model, col_lower=lower, col_upper=upper)


def fix_strategy(jm: JointModel, strategy: Strategy, X: np.ndarray | None = None) -> LinearModel | None:
    """The joint model with ``strategy``'s columns fixed: what is left is the topology + routing problem
    of that strategy's traffic, with the same ring space, routing and objective (and, given the link
    counts ``X`` too, the ring split and routing problem on that topology: an LP but for the hop
    indicators). None when :func:`_partial_point` is."""
    partial = _partial_point(jm, strategy, X)
    return None if partial is None else _fixed_at(jm.model, partial)


def _warm_point(jm: JointModel, instance: Instance, sol: Solution) -> np.ndarray | None:
    """A partial start (strategy and links; the solver completes rings, flows and times)."""
    if sol.placement is None or sol.topology is None:
        return None
    st = Strategy(
        tuple(sol.placement["layer_degree"]),
        tuple(sol.placement["layer_start"]),
        tuple(sol.placement.get("block_server", ())),
    )
    return _partial_point(jm, st, sol.topology.matrix)  # None: the start uses an option the model lacks (memory)


def _complete_start(model: LinearModel, partial: np.ndarray, time_limit_s: float) -> np.ndarray:
    """A full start from a partial one: the model with the given columns fixed (what is left is an
    LP plus the few hop indicators), solved by HiGHS. Handing the solver a full point spares it
    completing a partial one itself, which it does with a sub-MIP that may overrun the time limit.
    Returns ``partial`` unchanged when the fixed model finds nothing in time."""
    result = solver_solve(_fixed_at(model, partial), backend="highs", time_limit_s=time_limit_s)
    return result.values if result.values is not None else partial


#: What produces a joint model's incumbent: ``incumbent(instance, options, budget_s)`` returns a
#: solution with a placement and a topology, or None when it has none (e.g. TopoOpt's start breaks
#: the memory limit). ``budget_s``: its share of the time limit (a fifth, at most 60 s). The method layer
#: passes the alternating decomposition (``topoopt_ilp.methods.alternating.alternating_incumbent``).
Incumbent = Callable[[Instance, ExactOptions, float], Solution | None]


def heuristic_incumbent(instance: Instance, options: ExactOptions, budget_s: float = 60.0) -> Solution | None:
    """The default :data:`Incumbent` of the model layer: TopoOpt's data-parallel start with its
    TopologyFinder topology and routing (the alternating decomposition's first step, from the core
    heuristic design: :mod:`topoopt_ilp.heuristic.design`); None when that start breaks server memory.
    It ignores ``options`` and ``budget_s`` (it takes milliseconds)."""
    try:
        return heuristic_for_placement(instance, fitting_start_placement(instance))
    except (InstanceError, StartInfeasibleError):
        return None


def start_solution(
    instance: Instance, options: ExactOptions, budget_s: float | None, incumbent: Incumbent | None = None
) -> Solution | None:
    """The incumbent: a solution file, or ``incumbent(instance, options, budget_s)`` (the method layer
    passes the alternating decomposition, which starts from TopoOpt's heuristic for the data-parallel
    strategy and never returns anything worse; default :func:`heuristic_incumbent`), within ``budget_s``."""
    choice = options.warm_start
    if choice in (None, "none"):
        return None  # no start at all: the model is bounded by a formula instead (see solve_joint)
    if choice != "heuristic":
        import os

        if not os.path.exists(choice):
            raise InputError(f"--warm-start takes 'heuristic', 'none' or a solution file; {choice!r} is none of these")
        sol = load_solution(choice, directed=instance.cluster.directed)
        if sol.placement is None or sol.topology is None or sol.topology.n != instance.n:
            raise InputError(f"{choice}: the solution needs a placement and a topology for {instance.n} servers")
        check_start(instance, sol, choice)
        if not sol.has_solution:
            return sol
        metrics = evaluate(instance, sol)  # the evaluator's metrics and objective, as the method layer's finalize
        return replace(
            sol,
            metrics=metrics.as_dict(),
            objective=sol.objective if sol.objective is not None else objective_value(instance, metrics),
        )
    return (incumbent or heuristic_incumbent)(instance, options, 60.0 if budget_s is None else budget_s)


def _as_exact(
    start: Solution,
    objective: float,
    bound: float | None,
    backend: str | None,
    wall: float,
    details: dict,
    rel_gap: float | None,
) -> Solution:
    """The start solution reported as the exact method's answer, with the model's bound: optimal when
    that bound proves it within the requested gap, else feasible."""
    gap = max(0.0, (objective - bound) / objective) if bound is not None and objective > 0 else None
    proven = gap is not None and gap <= (1e-4 if rel_gap is None else rel_gap) + 1e-9
    return Solution(
        status="optimal" if proven else "feasible",
        method="exact",
        topology=start.topology,
        routing=start.routing,
        placement=start.placement,
        objective=objective,
        bound=bound,
        gap=gap,
        backend=backend,
        wall_time_s=wall,
        details=details,
    )


def solve_joint(
    instance: Instance, options: ExactOptions, start: Solution | None = None, *, incumbent: Incumbent | None = None
) -> Solution:
    """Solve placement + topology + routing exactly (the model above) for a small workload instance.

    The incumbent (and McCormick bound) comes from the alternating decomposition (``warm_start=
    "heuristic"``, the default: TopoOpt's heuristic improved by alternating, a fifth of the time
    limit), or from the solution file given as ``warm_start``; with ``warm_start="none"`` there is no
    start and the bound comes from a formula (everything computed on one server plus every byte
    over one link). ``start``: an incumbent already computed (used instead of running the warm
    start). ``incumbent``: what computes the incumbent for ``warm_start="heuristic"`` (see
    :data:`Incumbent`; the method layer passes the alternating decomposition; default
    :func:`heuristic_incumbent`, TopoOpt's start alone). The returned solution carries explicit rings and paths; its ``objective`` is the
    evaluator's iteration time of the decoded solution (never above the model's objective), the
    model's own in ``details["model_objective_s"]``.
    """
    started = time.perf_counter()
    check_request(instance, options)
    limit = options.time_limit_s
    if limit is not None and limit <= 0:  # nothing may run: the caller's start, else no_solution at once
        if start is not None:  # e.g. the enumeration's probe used the time: its incumbent still stands
            ub = objective_value(instance, evaluate(instance, start))
            if math.isfinite(ub):
                return _as_exact(
                    start,
                    ub,
                    None,
                    options.backend,
                    time.perf_counter() - started,
                    {
                        "model": "joint",
                        "start_method": start.method,
                        "start_objective_s": ub,
                        "note": "no time was left for the MILP; this is its start",
                    },
                    options.gap,
                )
        result = run_model(build_joint(instance, 1.0).model, options)
        return Solution(
            status=solution_status(result),
            method="exact",
            topology=None,
            backend=result.backend,
            wall_time_s=time.perf_counter() - started,
            details={"model": "joint"},
        )
    # The start gets a fifth of the time limit (at most a minute); the MILP the rest.

    incumbent = (
        start
        if start is not None
        else start_solution(instance, options, None if limit is None else min(60.0, 0.2 * limit), incumbent)
    )
    ub = math.inf if incumbent is None else objective_value(instance, evaluate(instance, incumbent))
    if limit is not None:
        options = replace(options, time_limit_s=max(0.0, limit - (time.perf_counter() - started)))
    if not math.isfinite(ub):
        incumbent = None
        ub = formula_upper_bound(instance)
    jm = build_joint(instance, ub)
    point = (
        _warm_point(jm, instance, incumbent)
        if incumbent is not None and options.warm_start not in (None, "none")
        else None
    )
    if point is not None:
        budget = 30.0 if options.time_limit_s is None else max(1.0, 0.1 * options.time_limit_s)
        point = _complete_start(jm.model, point, budget)
        if limit is not None:
            options = replace(options, time_limit_s=max(0.0, limit - (time.perf_counter() - started)))
    result = run_model(jm.model, options, point)
    status = solution_status(result)
    details = {
        "model": "joint",
        "start_method": incumbent.method if incumbent else None,
        "variables": jm.model.num_vars,
        "constraints": jm.model.num_rows,
        "nonzeros": jm.model.num_nonzeros,
        **jm.stats,
        "start_objective_s": ub if incumbent else None,
        "routing": "hop-layered multi-commodity flow; AllReduce split over ring orders of each coset",
        "ring_space": f"every ring order for groups of up to {ALL_RINGS_UP_TO} members, TotientPerms rings above",
    }
    if result.message:
        details["solver_message"] = result.message
    if options.warm_start not in (None, "none"):
        details["warm_start"] = options.warm_start
    bound = result.bound * TIME_UNIT_S if result.bound is not None and math.isfinite(result.bound) else None
    wall = time.perf_counter() - started
    if status == "infeasible" and incumbent is None:
        details["infeasible"] = (
            "memory: no assignment of layer configs and block servers keeps every server within "
            "server_memory_bytes (every other constraint family admits some point)"
        )
        return Solution(
            status=status, method="exact", topology=None, backend=result.backend, wall_time_s=wall, details=details
        )
    if result.values is None or status not in ("optimal", "feasible"):
        if incumbent is None:
            return Solution(
                status=status,
                method="exact",
                topology=None,
                backend=result.backend,
                wall_time_s=wall,
                bound=bound,
                details=details,
            )
        if status == "infeasible":  # the start lies outside the model's ring space and beats all of it
            bound = None
            details["note"] = (
                "the model has no point as good as its start (rings outside its ring space); this is the start"
            )
        else:  # a limit hit before the solver reported a point: the start is still a valid incumbent
            details["note"] = f"the MILP returned no point ({status}); this is its start, unimproved"
        return _as_exact(incumbent, ub, bound, result.backend, wall, details, options.gap)
    values = result.values
    try:
        strategy, X, routing = decode_point(instance, jm, values)
    except UnsupportedError as exc:  # rounding disconnected a pair the flows carried
        if incumbent is None:
            raise
        details["note"] = f"the MILP's point could not be decoded ({exc}); this is its start"
        return _as_exact(incumbent, ub, bound, result.backend, time.perf_counter() - started, details, options.gap)
    sol = Solution(
        status=status,
        method="exact",
        topology=Topology(X),
        routing=routing,
        placement=strategy_to_dict(strategy),
        backend=result.backend,
        wall_time_s=wall,
        details=details,
    )
    objective = objective_value(instance, evaluate(instance, sol))
    details["model_objective_s"] = result.objective * TIME_UNIT_S if result.objective is not None else None
    if incumbent is not None and objective > ub * (1 + 1e-9):  # e.g. a time-limited solve that dropped its start
        details["note"] = f"the MILP's point scored {objective:.6g} s, worse than its start: this is the start"
        return _as_exact(incumbent, ub, bound, result.backend, time.perf_counter() - started, details, options.gap)
    gap = max(0.0, (objective - bound) / objective) if bound is not None and objective > 0 else None
    if status == "optimal" and gap is not None and gap > (1e-4 if options.gap is None else options.gap) + 1e-9:
        status = "feasible"  # the decoded point scores a little above the model's (solver tolerances)
    return Solution(
        status=status,
        method="exact",
        topology=Topology(X),
        routing=routing,
        placement=strategy_to_dict(strategy),
        objective=objective,
        bound=bound,
        gap=gap,
        backend=result.backend,
        wall_time_s=time.perf_counter() - started,
        details=details,
    )
