"""The exact general-topology MILP (integer link counts + multi-commodity flow).

Two formulations share the data and the decoding:

* ``strong`` (default): flows aggregated by source, AllReduce mutability over candidate rings
  (every ring order for groups of up to :data:`ALL_RINGS_UP_TO` members, TotientPerms rings of the
  listed member order above: there the optimum is over those rings only, and the solution's
  ``details["rings_restricted"]`` says so), a Moore-bound valid inequality per source, no flow back
  into a source, and symmetry breaking when the demand does not distinguish servers;
* ``naive``: one commodity per (source, destination) pair and none of the above - kept for
  comparison (``benchmarks/exact_vs_naive.py``).

Under ``strong``, uniform all-to-all demand on undirected links is solved instead by the search
over a shipped catalogue of regular graphs (:mod:`.catalogue`: one flow LP per graph class,
best bound first) when one covers (n, d) and it can exclude every topology outside it.

Objective ``throughput`` (maximize the concurrent-flow lambda), ``comm_time`` / ``iteration_time``
(the MILP maximizes lambda, i.e. minimizes the bandwidth term 1/lambda; with a hop latency, hop-limited
copies of the strong model then settle the latency term, :func:`optimise_latency`), ``aspl``
(hop-count form), ``diameter`` (feasibility models per candidate diameter).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

import numpy as np

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.routes import PathSet, RingSet, Routing
from topoopt_ilp.core.solution import Solution, Topology
from topoopt_ilp.errors import InputError, UnsupportedError
from topoopt_ilp.evaluation.evaluate import RoutingError, evaluate, objective_value
from topoopt_ilp.models.common import exact_no_solution, solution_status
from topoopt_ilp.models.flow_decomposition import (
    decompose_layered_flow,
    decompose_source_flow,
    layered_arcs,
    paths_on_links,
)
from topoopt_ilp.solvers import DEFAULT_REL_GAP, LinearModel, ModelBuilder, SolveResult, relative_gap

__all__ = [
    "ALL_RINGS_UP_TO",
    "MAX_SERVERS",
    "FORMULATIONS",
    "moore_hop_bound",
    "moore_layer_hops",
    "RingCandidate",
    "TopologyRoutingModel",
    "build_topology_routing",
    "with_links_fixed",
    "to_solution",
    "uniform_demand",
    "arc_index",
    "edge_index",
    "ring_candidates",
    "demand_scale",
    "DemandFlows",
    "add_demand_flows",
    "ring_triplets",
    "moore_rows",
    "ring_share_rows",
    "degree_rows",
    "decoded_rings",
]

#: The smallest demand entry (an MP pair's bytes or a ring's bytes per member) must be at least this
#: share of the largest: below, it is under the solvers' tolerances once scaled (see the model builder).
#: Measured (8 servers, degree 4, MP pair of 5e6 bytes, AllReduce of 4 members): 1.1e-6 of the largest
#: decodes into a valid design, 3.3e-7 into one that leaves the pair unconnected.
DEMAND_RANGE_LIMIT = 1e-6
MAX_SERVERS = 32  # n(n-1) arcs x n sources: beyond ~32 servers the model is too large to prove anything
FORMULATIONS = ("strong", "naive")
#: HiGHS settings for the strong formulation (``--solver-option`` overrides them). Its root bound is
#: usually a one-server capacity bound that only branching closes, so the time goes into node LPs:
#: without presolve the node LPs warm-start from the model as built, and with no reliability
#: threshold on pseudo-costs (strong branching only on variables never branched on) fewer node LPs
#: are spent on strong branching. They halved the time to proven optimality on the AllReduce + MP
#: mixes of ``benchmarks/exact_vs_naive.py``; the naive formulation gains nothing from them
#: (docs/notes/exact-topology-settings.md).
STRONG_TUNING = {"highs": {"presolve": "off", "mip_pscost_minreliable": 0}}
#: The start proof's LPs run with STRONG_TUNING (no presolve) up to this many non-zeros, with the
#: solver's defaults above (see the comment block above ``_start_proof``).
LP_TUNING_NONZEROS = 20_000
#: The start proof's ring-and-matching starts (:func:`.relaxation_rounding.ring_matching_starts`)
#: are not tried once this share of the time limit has passed: the MILP keeps the rest. Their LPs
#: take a small part of a 120 s limit up to 24 servers (docs/notes/exact-topology-starts.md).
RING_MATCHING_SHARE = 0.5
#: AllReduce groups of at most this many members get every ring order as candidates ((k-1)! directed
#: rings: 120 at k = 6), larger ones TotientPerms' rings of the listed member order m_r -> m_{r+p},
#: gcd(p, k) = 1 (docs/methods/topology.md), as TopoOpt does. One constant for this model and the joint ones
#: (:mod:`.joint`, :mod:`.joint_enumeration`): within it their optima are over every ring; above it,
#: over the candidate rings only (``details["rings_restricted"]`` says so).
ALL_RINGS_UP_TO = 6
#: A decoded ring whose share of its group is below this is solver noise (e.g. 2.2e-6 next to
#: 0.9999977): it is dropped and the others renormalised, so the design is what the evaluator scores.
RING_SHARE_SNAP = 1e-5


@dataclass(frozen=True)
class RingCandidate:
    """Ring ``stride`` of AllReduce group ``group``: member i sends to member (i + stride) mod k
    (stride 0: an explicit ring ``order``, member order[i] sending to order[i+1])."""

    group: int
    stride: int
    order: tuple[int, ...]


def ring_candidates(
    instance: Instance, mutable: bool = True, all_orders_up_to: int = ALL_RINGS_UP_TO
) -> list[RingCandidate]:
    """Candidate rings per group: every ring order for groups of at most ``all_orders_up_to``
    members ((k-1)! of them, stride 0; default :data:`ALL_RINGS_UP_TO`, the joint models' ring
    space), else TotientPerms rings: strides p coprime with the group size k (phi(k) of them).

    For a coset group {s, s+n/k, ...} listed in order these are exactly TopoOpt's jumps (n/k)*p.
    With ``mutable=False`` only the listed order (stride 1) is a candidate."""
    out = []
    for g, group in enumerate(instance.demand.allreduce):
        k = group.size
        if mutable and k <= all_orders_up_to:
            first, rest = group.members[0], group.members[1:]
            out.extend(RingCandidate(g, 0, (first,) + perm) for perm in itertools.permutations(rest))
            continue
        strides = [p for p in range(1, k) if math.gcd(p, k) == 1] if mutable else [1]
        for p in strides:
            order = tuple(group.members[(i * p) % k] for i in range(k))
            out.append(RingCandidate(g, p, order))
    return out


def restricted_rings_note(rings: tuple[RingCandidate, ...] | list[RingCandidate], groups) -> str | None:
    """What the candidate rings leave out, in words (None when every group has every ring order):
    a group given strides (TotientPerms, above :data:`ALL_RINGS_UP_TO` members) has phi(k) of its
    (k-1)! ring orders, so an optimum or bound of the model holds among those rings only."""
    strides: dict[int, list[int]] = {}
    for r in rings:
        if r.stride > 0:
            strides.setdefault(r.group, []).append(r.stride)
    parts = []
    for g, ps in sorted(strides.items()):
        k = groups[g].size
        if k <= 3:  # every ring order of 2 or 3 members is a stride of the listed order
            continue
        parts.append(
            f"group {g} ({k} members): rings member i -> member i+p of its listed order, p in {ps}, "
            f"not all {math.factorial(k - 1):,} ring orders"
        )
    if not parts:
        return None
    return (
        "status and bound hold among the candidate rings only - "
        + "; ".join(parts)
        + f" (every ring order is a candidate for groups of up to {ALL_RINGS_UP_TO} members)"
    )


def moore_layer_hops(count: int, first: int, ratio: int) -> np.ndarray:
    """The hop count of each of ``count`` servers put, nearest first, on layers of widths first,
    first*ratio, first*ratio^2, ... (``inf`` past the last non-empty layer). With first = d and
    ratio = d - 1 (d directed) these are the Moore bound's layers: in any degree-d graph at most
    d (d-1)^(h-1) servers (d^h directed) lie h hops from a server."""
    hops = np.full(count, np.inf)
    start, h, width = 0, 1, first
    while start < count and width > 0:
        hops[start : start + width] = h
        start, h, width = start + width, h + 1, width * ratio
    return hops


def moore_hop_bound(weights: np.ndarray, d: int, directed: bool) -> float:
    """The least ``sum_t w_t * dist(s, t)`` any degree-d graph allows: heaviest destinations on the
    nearest Moore layers (see :func:`moore_layer_hops`)."""
    w = np.sort(weights[weights > 0])[::-1]
    hops = moore_layer_hops(len(w), d, d if directed else d - 1)
    return math.inf if np.isinf(hops).any() else float(w @ hops)


# ------------------------------------------------------------------------------------------------
# The model (strong formulation; the naive one replaces sources by pairs and drops the extras)
#
# Data
#   n servers, degree d, arcs a = (i, j) for every ordered pair i != j; edge e(a) = {i, j} when
#   undirected (one variable for both directions), e(a) = a when directed.
#   M[s, t]      model-parallel bytes (scaled by D0 so that entries are O(1)); link capacity 1.
#   R_c[s, t]    bytes member s sends to its successor t on candidate ring c (2(k-1)/k * S_g / D0).
#   b_s[v]       net demand of source s at v: M[s, v] for v != s, -sum_t M[s, t] at v = s (same for R_c).
# Variables
#   x[e]   in {0..d} (or {0, 1} without multi-links)  parallel links on edge e
#   lam    >= 0                                       concurrent-flow multiple of the demand
#   z[c]   >= 0                                       lam x (share of ring c in its group): one
#                                                     variable for the product keeps the model linear
#   f[s,a] >= 0                                       flow of source s on arc a
# Constraints
#   conservation  sum_{a into v} f[s,a] - sum_{a out of v} f[s,a] = lam b_s[v] + sum_c z[c] b^c_s[v]
#   capacity      sum_s f[s,a] <= x[e(a)]
#   degree        sum_{e at i} x[e] = d   (<= d when not regular; in- and out-degree when directed)
#   rings         sum_{c of group g} z[c] = lam                     for every AllReduce group g
#   no return     f[s, (u, s)] = 0                                  (an optimal flow never re-enters s)
#   Moore cut     sum_a f[s,a] >= sum_{c in g*(s)} z[c] L_s(M + R_c) + sum_{other c} z[c] sum_t R_c[s,t]
#                 (L_s(w) = moore_hop_bound(w[s]): the least hop-bytes of weights w out of s in any
#                 degree-d graph; g*(s) = the group of s with the most bytes per member; a source in
#                 no group: lam L_s(M)). Valid: L_s is concave and positively homogeneous (a minimum
#                 of linear functions of w), so L(u + v) >= L(u) + L(v) and, with sum_{c in g*} z[c]
#                 = lam, L(lam M + sum_{c in g*} z[c] R_c) >= sum_{c in g*} z[c] L(M + R_c).
#   symmetry      x[0,1] >= 1, x[0,1] >= x[0,2] >= ... >= x[0,n-1]  (only when every server is alike)
#   hop limit H   (strong, optional) g[s,h,a] >= 0: flow of source s whose h-th hop is arc a (hop 1
#                 leaves s, later hops avoid s); f[s,a] = sum_h g[s,h,a]; and for v != s, h < H:
#                 in_h(v) - out_{h+1}(v) >= 0 (what reaches v at hop h is delivered or forwarded).
#                 With out_1(v) = 0 for v != s, conservation then delivers every byte within H hops.
# Objective
#   maximize lam            (throughput = lam * B / D0 iterations per second; T_bw = 1 / throughput)
#   aspl: unit demand between all pairs, f[s,a] <= (n-1) x[e(a)], minimize sum f / (n(n-1)).
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TopologyRoutingModel:
    """A built model and what decoding its solution needs."""

    model: LinearModel
    n: int
    directed: bool
    objective: str
    formulation: str
    scale: float  # D0: bytes per demand unit
    edges: np.ndarray  # (E, 2) endpoints of each x variable
    arc_tail: np.ndarray
    arc_head: np.ndarray
    arc_edge: np.ndarray
    commodities: np.ndarray  # (K, 2): (source, destination) for naive, (source, -1) for strong
    x_cols: np.ndarray
    lam_col: int
    z_cols: np.ndarray
    f_cols: np.ndarray  # (K, A)
    rings: tuple[RingCandidate, ...]
    mp: np.ndarray  # scaled MP matrix
    ring_units: np.ndarray  # scaled bytes each member of group g sends per ring
    layers: HopLayers | None = None  # the hop-layered flows of a hop-limited model


@dataclass(frozen=True)
class HopLayers:
    """The hop-layered flow columns of a hop-limited model: column ``cols[i]`` is the flow of source
    ``src[i]`` whose ``hop[i]``-th hop is ``tail[i] -> head[i]``."""

    src: np.ndarray
    hop: np.ndarray
    tail: np.ndarray
    head: np.ndarray
    cols: np.ndarray


def arc_index(n: int) -> tuple[np.ndarray, np.ndarray]:
    tail, head = np.nonzero(~np.eye(n, dtype=bool))
    return tail, head


def edge_index(n: int, directed: bool, tail: np.ndarray, head: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if directed:
        return np.stack([tail, head], axis=1), np.arange(len(tail))
    iu, ju = np.triu_indices(n, 1)
    index = np.full((n, n), -1, dtype=np.int64)
    index[iu, ju] = np.arange(len(iu))
    index[ju, iu] = np.arange(len(iu))
    return np.stack([iu, ju], axis=1), index[tail, head]


def uniform_demand(instance: Instance, mp: np.ndarray) -> bool:
    """True when relabelling servers cannot change the problem (all-to-all, no AllReduce)."""
    if instance.demand.allreduce:
        return False
    off = mp[~np.eye(instance.n, dtype=bool)]
    return bool(off.size) and np.allclose(off, off[0])


def build_topology_routing(
    instance: Instance,
    formulation: str = "strong",
    mutable_rings: bool = True,
    all_orders_up_to: int = ALL_RINGS_UP_TO,
    max_hops: int | None = None,
) -> TopologyRoutingModel:
    """Build the MILP for ``instance`` (family ``any``) as arrays; ``all_orders_up_to``: see
    :func:`ring_candidates`; ``max_hops``: every byte travels at most that many links (the hop-limit
    rows of the model comment; strong formulation, objectives other than aspl)."""
    if formulation not in FORMULATIONS:
        raise InputError(f"unknown formulation {formulation!r}; choose one of {', '.join(FORMULATIONS)}")
    if max_hops is not None and (formulation != "strong" or instance.objective == "aspl" or max_hops < 1):
        raise ValueError(
            f"a hop limit ({max_hops}) needs the strong formulation, an objective other than aspl and H >= 1"
        )
    c = instance.cluster
    n, d, directed = c.servers, c.degree, c.directed
    objective = instance.objective
    tail, head = arc_index(n)
    edges, arc_edge = edge_index(n, directed, tail, head)
    A, E = len(tail), len(edges)
    b = ModelBuilder(name=f"topology_routing_{formulation}")
    x = b.add_variables(E, lb=0, ub=d if c.multi_links else 1, kind="integer", name="x")

    if objective == "aspl":
        return _build_aspl(instance, b, x, tail, head, edges, arc_edge, formulation)

    mp_bytes = instance.demand.mp_matrix(n)
    rings = ring_candidates(instance, mutable_rings, all_orders_up_to)
    groups = instance.demand.allreduce
    ring_amount = np.array([groups[r.group].bytes_per_member() for r in rings])
    scale = demand_scale([mp_bytes], ring_amount)
    mp = mp_bytes / scale
    ring_amount = ring_amount / scale

    lam = b.add_variables(1, name="lam")
    lam_col = int(lam.index[0])
    z = b.add_variables(len(rings), name="z")
    flows = add_demand_flows(
        b,
        n,
        d,
        directed,
        tail,
        head,
        [(np.arange(A), x.index[arc_edge])],
        mp,
        rings,
        ring_amount,
        lam_col,
        z.index,
        formulation,
    )
    commodities, fcols, kindex = flows.commodities, flows.f_cols, flows.kindex
    src = commodities[:, 0]
    degree_rows(b, x, edges, n, d, directed, c.regular)
    ring_share_rows(b, rings, len(groups), z.index, lam_col)
    if formulation == "strong":
        moore_rows(b, flows, mp, rings, ring_amount, lam_col, z.index, d, directed)
        if uniform_demand(instance, mp):
            _symmetry_rows(b, x, n, directed)
    layers = _hop_limit_rows(b, fcols, kindex, src, n, tail, head, max_hops) if max_hops is not None else None

    b.set_objective([lam_col], [1.0], sense="maximize")
    return TopologyRoutingModel(
        b.build(),
        n,
        directed,
        instance.objective,
        formulation,
        scale,
        edges,
        tail,
        head,
        arc_edge,
        commodities,
        x.index,
        lam_col,
        z.index,
        fcols,
        tuple(rings),
        mp,
        np.array([g.bytes_per_member() for g in groups]) / scale,
        layers,
    )


def demand_scale(mp_matrices: list[np.ndarray], ring_amount: np.ndarray) -> float:
    """D0, the bytes of one demand unit: the largest entry of the MP matrices and the rings' bytes per
    member. Refuses (UnsupportedError) a demand whose smallest entry falls below
    :data:`DEMAND_RANGE_LIMIT` of the largest."""
    scale = float(max([m.max(initial=0.0) for m in mp_matrices] + [ring_amount.max(initial=0.0)]))
    smallest = float(
        min([m[m > 0].min(initial=np.inf) for m in mp_matrices] + [ring_amount[ring_amount > 0].min(initial=np.inf)])
    )
    if smallest < DEMAND_RANGE_LIMIT * scale:
        # Scaled to the largest entry, the smallest would sit below the solvers' feasibility
        # tolerance (~1e-7): a topology that leaves it unconnected looks feasible (measured: one
        # AllReduce of 1e13 bytes next to MP pairs of 5e6 decoded into a disconnected pair).
        raise UnsupportedError(
            f"the demand spans a factor {scale / smallest:.3g} ({smallest:.3g} to {scale:.3g} bytes), "
            f"more than the factor {1 / DEMAND_RANGE_LIMIT:.0e} the exact model's numerics resolve; drop or merge "
            "the smallest entries, or use --method heuristic"
        )
    return scale


@dataclass(frozen=True)
class DemandFlows:
    """The flow columns of one demand: ``f_cols[k, a]`` the flow of commodity ``commodities[k]``
    (``(source, -1)`` strong, ``(source, destination)`` naive) on arc a; ``kindex`` maps a source
    (strong) or a pair (naive) to its commodity (-1: none)."""

    commodities: np.ndarray
    f_cols: np.ndarray
    kindex: np.ndarray


def add_demand_flows(
    b: ModelBuilder,
    n: int,
    d: int,
    directed: bool,
    tail: np.ndarray,
    head: np.ndarray,
    capacity: list[tuple[np.ndarray, np.ndarray]],
    mp: np.ndarray,
    rings: list[RingCandidate],
    ring_amount: np.ndarray,
    lam_col: int,
    z_cols: np.ndarray,
    formulation: str,
) -> DemandFlows:
    """The flow variables of one (scaled) demand and its conservation and capacity rows of the model
    comment: the MP bytes ``mp`` scale with column ``lam_col``, ring c's bytes
    ``ring_amount[c]`` per member with ``z_cols[c]``. ``capacity`` lists the terms of each arc's
    capacity as (arc indices, columns), each with coefficient 1: ``x[e(a)]`` in the topology MILP."""
    A = len(tail)
    r_c, r_s, r_t, r_w = ring_triplets(rings, ring_amount)

    if formulation == "strong":
        has_out = mp.sum(axis=1) > 0
        has_out[r_s] = True
        commodities = np.stack([np.flatnonzero(has_out), np.full(int(has_out.sum()), -1)], axis=1)
    else:
        pair = mp > 0
        pair[r_s, r_t] = True
        s_idx, t_idx = np.nonzero(pair)
        commodities = np.stack([s_idx, t_idx], axis=1)
    K = len(commodities)
    src = commodities[:, 0]
    # No flow back into a commodity's source (strong only: the naive model keeps the plain arc form).
    f_ub = np.full((K, A), np.inf)
    if formulation == "strong":
        f_ub[head[None, :] == src[:, None]] = 0.0
    f = b.add_variables((K, A), lb=0.0, ub=f_ub.ravel(), name="f")
    fcols = f.index.reshape(K, A)

    # Conservation rows (k, v): inflow - outflow - demand terms = 0.
    k_of, a_of = np.divmod(np.arange(K * A), A)
    rows = [k_of * n + head[a_of], k_of * n + tail[a_of]]
    cols = [fcols.ravel(), fcols.ravel()]
    vals = [np.ones(K * A), -np.ones(K * A)]
    kindex = np.full((n, n) if formulation == "naive" else (n,), -1, dtype=np.int64)
    if formulation == "strong":
        kindex[src] = np.arange(K)
        # lam * b_s[v]: +M[s, v] at v, -sum at s
        ks, vs = np.nonzero(mp[src] > 0)
        rows += [ks * n + vs, np.arange(K) * n + src]
        cols += [np.full(len(ks), lam_col), np.full(K, lam_col)]
        vals += [-mp[src][ks, vs], mp[src].sum(axis=1)]
        # z[c] * b^c_s[v]: ring member s sends to successor t
        kk = kindex[r_s]
        rows += [kk * n + r_t, kk * n + r_s]
        cols += [z_cols[r_c], z_cols[r_c]]
        vals += [-r_w, r_w]
    else:
        kindex[commodities[:, 0], commodities[:, 1]] = np.arange(K)
        kpair = np.arange(K)
        s_k, t_k = commodities[:, 0], commodities[:, 1]
        m_k = mp[s_k, t_k]
        rows += [kpair * n + t_k, kpair * n + s_k]
        cols += [np.full(K, lam_col), np.full(K, lam_col)]
        vals += [-m_k, m_k]
        kk = kindex[r_s, r_t]
        rows += [kk * n + r_t, kk * n + r_s]
        cols += [z_cols[r_c], z_cols[r_c]]
        vals += [-r_w, r_w]
    b.add_constraints(
        np.concatenate(rows),
        np.concatenate(cols),
        np.concatenate(vals),
        lb=0.0,
        ub=0.0,
        count=K * n,
        name="conservation",
    )

    # Capacity rows: sum_k f[k, a] - (the arc's capacity terms) <= 0.
    cap_arcs = [arcs for arcs, _ in capacity]
    b.add_constraints(
        np.concatenate([np.tile(np.arange(A), K)] + cap_arcs),
        np.concatenate([fcols.ravel()] + [c for _, c in capacity]),
        np.concatenate([np.ones(K * A)] + [-np.ones(len(arcs)) for arcs in cap_arcs]),
        lb=-np.inf,
        ub=0.0,
        count=A,
        name="capacity",
    )
    return DemandFlows(commodities, fcols, kindex)


def ring_triplets(rings: list[RingCandidate], ring_amount: np.ndarray) -> tuple[np.ndarray, ...]:
    """Ring traffic as triplets ``(c, s, t, w)``: ring c makes member order[i] = s send
    ``w = ring_amount[c]`` to its successor order[i+1] = t."""
    if not rings:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty, np.zeros(0)
    r_c = np.concatenate([np.full(len(r.order), ci) for ci, r in enumerate(rings)])
    r_s = np.concatenate([np.asarray(r.order) for r in rings])
    r_t = np.concatenate([np.roll(np.asarray(r.order), -1) for r in rings])
    return r_c, r_s, r_t, ring_amount[r_c]


def moore_rows(
    b: ModelBuilder,
    flows: DemandFlows,
    mp: np.ndarray,
    rings: list[RingCandidate],
    ring_amount: np.ndarray,
    lam_col: int,
    z_cols: np.ndarray,
    d: int,
    directed: bool,
) -> None:
    """The Moore cut per source of the model comment (strong formulation): the MP bytes ride with
    the source's anchor ring."""
    r_c, r_s, r_t, r_w = ring_triplets(rings, ring_amount)
    K, A = flows.f_cols.shape
    src = flows.commodities[:, 0]
    L, ring_coef = _moore_cut_coefficients(mp, src, rings, r_c, r_s, r_t, r_w, d, directed)
    kk = flows.kindex[r_s]
    b.add_constraints(
        np.concatenate([np.repeat(np.arange(K), A), np.arange(K), kk]),
        np.concatenate([flows.f_cols.ravel(), np.full(K, lam_col), z_cols[r_c]]),
        np.concatenate([np.ones(K * A), -L, -ring_coef]),
        lb=0.0,
        ub=np.inf,
        count=K,
        name="moore",
    )


def ring_share_rows(b: ModelBuilder, rings: list[RingCandidate], groups: int, z_cols: np.ndarray, lam_col: int) -> None:
    """Ring shares: sum_{c in g} z[c] - lam = 0 for every AllReduce group g."""
    if not rings:
        return
    gid = np.array([r.group for r in rings])
    b.add_constraints(
        np.concatenate([gid, np.arange(groups)]),
        np.concatenate([z_cols, np.full(groups, lam_col)]),
        np.concatenate([np.ones(len(rings)), -np.ones(groups)]),
        lb=0.0,
        ub=0.0,
        count=groups,
        name="ring_share",
    )


def _hop_limit_rows(
    b: ModelBuilder,
    fcols: np.ndarray,
    kindex: np.ndarray,
    src: np.ndarray,
    n: int,
    tail: np.ndarray,
    head: np.ndarray,
    H: int,
) -> HopLayers:
    """The hop-limit rows of the model comment: layered flows g, f = sum_h g, and forwarding."""
    K, A = fcols.shape
    l_src, l_hop, l_tail, l_head = layered_arcs(n, src, H)
    g = b.add_variables(len(l_src), lb=0.0, name="g")
    arc_id = np.full((n, n), -1, dtype=np.int64)
    arc_id[tail, head] = np.arange(A)
    k_of = kindex[l_src]
    b.add_constraints(
        np.concatenate([np.arange(K * A), k_of * A + arc_id[l_tail, l_head]]),
        np.concatenate([fcols.ravel(), g.index]),
        np.concatenate([np.ones(K * A), -np.ones(len(l_src))]),
        lb=0.0,
        ub=0.0,
        count=K * A,
        name="hop_layers",
    )
    if H >= 2:  # forward rows (k, h, v), h = 1..H-1: in_h(v) - out_{h+1}(v) >= 0
        into, later = l_hop <= H - 1, l_hop >= 2
        b.add_constraints(
            np.concatenate(
                [
                    (k_of[into] * (H - 1) + l_hop[into] - 1) * n + l_head[into],
                    (k_of[later] * (H - 1) + l_hop[later] - 2) * n + l_tail[later],
                ]
            ),
            np.concatenate([g.index[into], g.index[later]]),
            np.concatenate([np.ones(int(into.sum())), -np.ones(int(later.sum()))]),
            lb=0.0,
            count=K * (H - 1) * n,
            name="hop_forward",
        )
    return HopLayers(l_src, l_hop, l_tail, l_head, g.index)


def _moore_cut_coefficients(
    mp: np.ndarray,
    src: np.ndarray,
    rings: list[RingCandidate],
    r_c: np.ndarray,
    r_s: np.ndarray,
    r_t: np.ndarray,
    r_w: np.ndarray,
    d: int,
    directed: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients of the Moore cut: lam's per source, and each ring triplet's (c, s -> t).

    A source in no AllReduce group gets ``L_s(M[s])`` on lam. A member s of groups takes its anchor
    group g* (the largest per-member bytes): a triplet of a ring c of g* gets ``L_s(M[s] + R_c[s])``
    (its MP bytes and its ring bytes placed together), the triplets of its other groups their bytes
    (one hop each), and lam gets 0 - valid because sum_{c in g*} z[c] = lam, see the model comment."""
    n = mp.shape[0]
    anchor = np.full(n, -1)  # the anchor group of each server (-1: in no group)
    if rings:
        member_bytes = np.zeros((n, 1 + max(r.group for r in rings)))
        member_bytes[r_s, [rings[c].group for c in r_c]] = r_w
        member = member_bytes.max(axis=1) > 0
        anchor[member] = member_bytes.argmax(axis=1)[member]
    L = np.array([0.0 if anchor[s] >= 0 else moore_hop_bound(mp[s], d, directed) for s in src])
    ring_coef = r_w.astype(float).copy()
    for i, (c, s, t) in enumerate(zip(r_c, r_s, r_t)):
        if rings[c].group == anchor[s]:
            w = mp[s].copy()
            w[t] += r_w[i]
            ring_coef[i] = moore_hop_bound(w, d, directed)
    return L, ring_coef


def degree_rows(b: ModelBuilder, x, edges: np.ndarray, n: int, d: int, directed: bool, regular: bool) -> None:
    lb = float(d) if regular else 0.0
    E = len(edges)
    if directed:
        b.add_constraints(edges[:, 0], x.index, 1.0, lb=lb, ub=float(d), count=n, name="out_degree")
        b.add_constraints(edges[:, 1], x.index, 1.0, lb=lb, ub=float(d), count=n, name="in_degree")
    else:
        b.add_constraints(
            np.concatenate([edges[:, 0], edges[:, 1]]),
            np.concatenate([x.index, x.index]),
            np.ones(2 * E),
            lb=lb,
            ub=float(d),
            count=n,
            name="degree",
        )


def _symmetry_rows(b: ModelBuilder, x, n: int, directed: bool) -> None:
    """Relabel server 0's neighbours 1, 2, ... by decreasing link count (valid when servers are alike):
    x[0,1] >= 1 and x[0,j] - x[0,j+1] >= 0."""
    # Edges (0, j) are the first n-1 edges in both orders (row-major, i = 0 first).
    e0 = x.index[: n - 1]
    m = n - 2
    b.add_constraints(
        np.concatenate([np.arange(m), np.arange(m)]),
        np.concatenate([e0[:-1], e0[1:]]),
        np.concatenate([np.ones(m), -np.ones(m)]),
        lb=0.0,
        ub=np.inf,
        count=m,
        name="symmetry_order",
    )
    b.add_constraints([0], [e0[0]], [1.0], lb=1.0, ub=np.inf, count=1, name="symmetry_first")


def _build_aspl(instance, b, x, tail, head, edges, arc_edge, formulation) -> TopologyRoutingModel:
    c = instance.cluster
    n, d, directed = c.servers, c.degree, c.directed
    A = len(tail)
    # Unit demand between all ordered pairs; one commodity per source (strong) or per pair (naive).
    if formulation == "strong":
        commodities = np.stack([np.arange(n), np.full(n, -1)], axis=1)
    else:
        s_idx, t_idx = np.nonzero(~np.eye(n, dtype=bool))
        commodities = np.stack([s_idx, t_idx], axis=1)
    K = len(commodities)
    src = commodities[:, 0]
    f_ub = np.full((K, A), float(n - 1))
    if formulation == "strong":
        f_ub[head[None, :] == src[:, None]] = 0.0
    f = b.add_variables((K, A), lb=0.0, ub=f_ub.ravel(), name="f")
    fcols = f.index.reshape(K, A)
    k_of, a_of = np.divmod(np.arange(K * A), A)
    if formulation == "strong":
        rhs = np.full((K, n), 1.0)
        rhs[np.arange(K), src] = -(n - 1)
    else:
        rhs = np.zeros((K, n))
        rhs[np.arange(K), commodities[:, 1]] = 1.0
        rhs[np.arange(K), src] = -1.0
    b.add_constraints(
        np.concatenate([k_of * n + head[a_of], k_of * n + tail[a_of]]),
        np.concatenate([fcols.ravel(), fcols.ravel()]),
        np.concatenate([np.ones(K * A), -np.ones(K * A)]),
        lb=rhs.ravel(),
        ub=rhs.ravel(),
        name="conservation",
    )
    # Arc usage only on existing links: f[k, a] <= (n-1) x[e(a)]  (or 1 * x for a single pair).
    big = float(n - 1) if formulation == "strong" else 1.0
    b.add_constraints(
        np.concatenate([np.arange(K * A), np.arange(K * A)]),
        np.concatenate([fcols.ravel(), np.tile(x.index[arc_edge], K)]),
        np.concatenate([np.ones(K * A), -big * np.ones(K * A)]),
        lb=-np.inf,
        ub=0.0,
        name="usage",
    )
    degree_rows(b, x, edges, n, d, directed, c.regular)
    if formulation == "strong":
        # Every source reaches the others in at least the Moore hop total.
        L = moore_hop_bound(np.ones(n - 1), d, directed)
        b.add_constraints(np.repeat(np.arange(K), A), fcols.ravel(), 1.0, lb=L, ub=np.inf, count=K, name="moore")
        _symmetry_rows(b, x, n, directed)
    b.set_objective(fcols.ravel(), 1.0 / (n * (n - 1)), sense="minimize")
    return TopologyRoutingModel(
        b.build(),
        n,
        directed,
        "aspl",
        formulation,
        1.0,
        edges,
        tail,
        head,
        arc_edge,
        commodities,
        x.index,
        -1,
        np.zeros(0, np.int64),
        fcols,
        (),
        np.zeros((n, n)),
        np.zeros(0),
    )


# ------------------------------------------------------------------------------------------------
def decoded_topology(m: TopologyRoutingModel, values: np.ndarray) -> np.ndarray:
    xv = np.rint(values[m.x_cols]).astype(np.int64)
    X = np.zeros((m.n, m.n), dtype=np.int64)
    X[m.edges[:, 0], m.edges[:, 1]] = xv
    if not m.directed:
        X[m.edges[:, 1], m.edges[:, 0]] = xv
    return X


def decoded_rings(rings: tuple[RingCandidate, ...], z_values: np.ndarray) -> list[tuple[int, list[int], float]]:
    """``(group, order, share)`` of each ring the solver's ``z`` values use, each group's shares
    summing to 1. Rings with a negligible share are solver noise (their traffic would fall below
    the path decomposition's tolerance and be left unrouted, or make the evaluator's score differ
    from the model's in the 6th digit): they are dropped and the others renormalised."""
    if not len(rings):
        return []
    zv = np.maximum(z_values, 0.0)
    share = np.zeros(max(r.group for r in rings) + 1)
    np.add.at(share, [r.group for r in rings], zv)
    kept = [c for c, r in enumerate(rings) if zv[c] > RING_SHARE_SNAP * max(share[r.group], 1e-300)]
    kept_share = np.zeros_like(share)
    np.add.at(kept_share, [rings[c].group for c in kept], zv[kept])
    return [(rings[c].group, list(rings[c].order), zv[c] / kept_share[rings[c].group]) for c in kept]


def _decode_routing(m: TopologyRoutingModel, values: np.ndarray) -> Routing:
    n = m.n
    lam = float(values[m.lam_col]) if m.lam_col >= 0 else 1.0
    ring_list = decoded_rings(m.rings, values[m.z_cols])
    # The decoded demand of each source, in the model's units and lam-scaled like the flows.
    supply = lam * m.mp
    for g, order, frac in ring_list:
        o = np.asarray(order)
        amount = frac * lam * m.ring_units[g]
        np.add.at(supply, (o, np.roll(o, -1)), amount)
    paths: dict[tuple[int, int], list[tuple[list[int], float]]] = {}
    if m.layers is not None:  # decomposed in the layered graph: no path longer than the hop limit
        L = m.layers
        gv = np.maximum(values[L.cols], 0.0)
        for s in np.unique(L.src):
            sel = L.src == s
            for path, amount in decompose_layered_flow(n, int(s), L.hop[sel], L.tail[sel], L.head[sel], gv[sel]):
                if supply[path[0], path[-1]] > 0:  # not a ring dropped as noise above
                    paths.setdefault((path[0], path[-1]), []).append((path, amount))
    else:
        for k, (s, t) in enumerate(m.commodities):
            flow = np.zeros((n, n))
            flow[m.arc_tail, m.arc_head] = values[m.f_cols[k]]
            target = supply[s].copy() if t < 0 else np.where(np.arange(n) == t, supply[s, t], 0.0)
            if m.objective == "aspl":
                target = np.ones(n) if t < 0 else (np.arange(n) == t).astype(float)
            for path, amount in decompose_source_flow(flow, int(s), target):
                paths.setdefault((path[0], path[-1]), []).append((path, amount))
    wanted = [] if m.objective == "aspl" else [(int(s), int(t)) for s, t in zip(*np.nonzero(supply > 0)) if s != t]
    rows = paths_on_links(decoded_topology(m, values), paths, wanted, keep_unconnected=True)
    return Routing(
        rings=RingSet.from_lists(ring_list) if ring_list else RingSet.empty(),
        paths=PathSet.from_lists(rows) if rows else PathSet.empty(),
    )


def with_links_fixed(m: TopologyRoutingModel, x: np.ndarray) -> TopologyRoutingModel:
    """``m`` with its link counts fixed to ``x`` (as its rows label the servers): an LP whose optimum
    is the best routing (flows and ring shares) of that topology."""
    lp = m.model
    kind = lp.col_kind.copy()
    kind[m.x_cols] = 0  # continuous: the links are fixed
    lower, upper = lp.col_lower.copy(), lp.col_upper.copy()
    lower[m.x_cols] = upper[m.x_cols] = np.asarray(x)[m.edges[:, 0], m.edges[:, 1]]
    return replace(m, model=replace(lp, col_lower=lower, col_upper=upper, col_kind=kind, name="fixed_links_lp"))


def to_solution(instance: Instance, m: TopologyRoutingModel, result: SolveResult, wall: float) -> Solution:
    status = solution_status(result)
    details = {
        "model": "topology_routing",
        "formulation": m.formulation,
        "variables": m.model.num_vars,
        "constraints": m.model.num_rows,
        "nonzeros": m.model.num_nonzeros,
        "model_status": status,
    }
    if result.message:
        details["solver_message"] = result.message
    if status == "feasible" and m.objective != "aspl" and result.objective is not None and result.objective <= 0:
        # An incumbent with lam = 0 (a time-limited solve's first point: often a disconnected
        # topology) carries none of the demand: it is no design (measured: SCIP, 2 s on mix-16).
        status = "no_solution"
        details["model_status"] = status
        details["status_note"] = "the solver's only point routes none of the demand (lambda = 0)"
    if result.values is None or status not in ("optimal", "feasible"):
        return Solution(
            status=status, method="exact", topology=None, backend=result.backend, wall_time_s=wall, details=details
        )
    X = decoded_topology(m, result.values)
    routing = _decode_routing(m, result.values)
    unit = instance.cluster.link_bytes_per_s / m.scale if m.objective != "aspl" else 1.0
    objective = result.objective * unit if result.objective is not None else None
    bound = result.bound * unit if result.bound is not None else None
    restricted = restricted_rings_note(m.rings, instance.demand.allreduce)
    if restricted:
        details["rings_restricted"] = restricted
    maximise = m.objective != "aspl"
    gap = result.gap
    if objective is not None and instance.objective in ("throughput", "aspl"):
        # The design returned is the decoded one (rounded links, snapped ring shares): report the
        # evaluator's score of it, not the solver's raw value, so that the two agree to the digit.
        scored = _evaluator_objective(instance, Topology(X), routing)
        if scored is not None and scored != objective:
            if abs(scored - objective) > 1e-9 * abs(scored):  # not mere rounding: say what the solver had
                details["model_objective_raw"] = objective
                if bound is not None and (bound < scored if maximise else bound > scored):
                    bound = scored  # solver noise past its own bound: the bound is at least the design
                gap = relative_gap(scored, bound) if gap is not None else None
            objective = scored
        if maximise and objective <= 0:  # the decoded design carries none of the demand (e.g. disconnected)
            details.update(
                model_status="no_solution",
                status_note="the solver's point, decoded, carries none of the demand (throughput 0)",
            )
            return exact_no_solution(result.backend, wall, details)
    obj_name = instance.objective
    if obj_name in ("comm_time", "iteration_time"):
        # The MILP maximises lam (the bandwidth term is 1/throughput); the latency term alpha*hops is
        # the evaluator's. Report the bandwidth-term optimum with a valid bound, not a proof of comm time.
        details["milp_objective"] = "throughput (bandwidth term 1/lambda); the latency term is added by the evaluator"
        details["milp_throughput"] = objective
        details["milp_throughput_bound"] = bound
        bw_gap = relative_gap(objective, bound)
        # A valid lower bound on comm time: no design beats the bandwidth bound, and traffic takes >= 1 hop.
        objective, gap = None, None
        bound = (1.0 / bound if bound else 0.0) + instance.cluster.hop_latency_s
        if status == "optimal" and instance.cluster.hop_latency_us > 0:
            status = "feasible"
            if bw_gap is None:
                details["status_note"] = "the latency term is not optimised, so comm time is not proven"
            elif bw_gap <= DEFAULT_REL_GAP * (1 + 1e-9):
                details["status_note"] = (
                    "bandwidth term proven optimal; the latency term is not optimised, so comm time is not proven"
                )
            else:  # the solver stopped at a requested gap: nothing is proven optimal
                details["status_note"] = (
                    f"bandwidth term within {bw_gap:.4g} of its bound (the requested gap), not "
                    "proven optimal; the latency term is not optimised"
                )
    return Solution(
        status=status,
        method="exact",
        topology=Topology(X),
        routing=routing,
        objective=objective,
        bound=bound,
        gap=gap,
        backend=result.backend,
        wall_time_s=wall,
        details=details,
    )


# ------------------------------------------------------------------------------------------------
# Diameter, as a sequence of feasibility models (one per candidate diameter H)
#
# Data
#   n servers, degree d, arcs a = (u, v); the candidate diameter H.
# Variables
#   x[e]       in {0..d}       links on edge e (as above);  y[e] in {0, 1}: edge e has a link
#   r[s,h,v]   in {0, 1}       v is within h hops of s (h = 1..H; r[s,0,v] = [v == s] is data)
#   p[s,h,a]   in [0, 1]       arc a = (u, v) extends the h-1 hop ball of s to v
# Constraints
#   y[e] <= x[e] <= d y[e];  degree rows as above
#   p[s,h,a] <= r[s,h-1,u],  p[s,h,a] <= y[e(a)]      (both binary, so p > 0 only if both are 1)
#   r[s,h,v] <= r[s,h-1,v] + sum_{a = (u,v)} p[s,h,a]
#   r[s,H,v] = 1 for every s != v                  (every server within H hops of every other)
# Objective
#   none: the smallest H whose model is feasible is the diameter; H - 1 infeasible proves it.
def _evaluator_objective(instance: Instance, topology: Topology, routing: Routing) -> float | None:
    """The evaluator's objective of the decoded design (None when it cannot score it)."""
    sol = Solution(status="feasible", method="exact", topology=topology, routing=routing)
    mode = "given" if (len(routing.paths) or len(routing.offset_routes)) else "shortest_path"  # as solve.finalize
    try:
        value = objective_value(instance, evaluate(instance, sol, routing=mode))
    except (RoutingError, InputError):
        return None
    return float(value) if math.isfinite(value) else None


# ------------------------------------------------------------------------------------------------
def build_diameter_feasibility(instance: Instance, H: int) -> tuple[LinearModel, np.ndarray, np.ndarray]:
    """The model 'a topology of diameter <= H exists'; returns (model, x columns, edges)."""
    c = instance.cluster
    n, d, directed = c.servers, c.degree, c.directed
    tail, head = arc_index(n)
    edges, arc_edge = edge_index(n, directed, tail, head)
    A, E = len(tail), len(edges)
    b = ModelBuilder(name=f"diameter_le_{H}")
    x = b.add_variables(E, lb=0, ub=d if c.multi_links else 1, kind="integer", name="x")
    y = b.add_variables(E, kind="binary", name="y")
    degree_rows(b, x, edges, n, d, directed, c.regular)
    e_idx = np.arange(E)
    # y <= x and x <= d*y
    b.add_constraints(
        np.concatenate([e_idx, e_idx]),
        np.concatenate([y.index, x.index]),
        np.concatenate([np.ones(E), -np.ones(E)]),
        ub=0.0,
        count=E,
        name="y_le_x",
    )
    b.add_constraints(
        np.concatenate([e_idx, e_idx]),
        np.concatenate([x.index, y.index]),
        np.concatenate([np.ones(E), -float(d) * np.ones(E)]),
        ub=0.0,
        count=E,
        name="x_le_dy",
    )
    # r[s, h, v] for h = 1..H (h = 0 is data); the last layer is fixed to 1 off the diagonal.
    r_lb = np.zeros((n, H, n))
    r_lb[:, H - 1, :] = 1.0
    r_lb[np.arange(n), :, np.arange(n)] = 1.0  # s reaches itself at every h
    r = b.add_variables((n, H, n), lb=r_lb.ravel(), ub=1.0, kind="binary", name="r")
    rc = r.index.reshape(n, H, n)
    p = b.add_variables((n, H, A), lb=0.0, ub=1.0, name="p")
    pc = p.index.reshape(n, H, A)
    S, Hh, Aa = np.meshgrid(np.arange(n), np.arange(H), np.arange(A), indexing="ij")
    S, Hh, Aa = S.ravel(), Hh.ravel(), Aa.ravel()
    m = len(S)
    rows = np.arange(m)
    # p <= r[s, h-1, u]   (for h = 0 the previous layer is the data [u == s])
    prev_is_data = Hh == 0
    cols_prev = np.where(prev_is_data, 0, rc[S, np.maximum(Hh - 1, 0), tail[Aa]])
    keep = ~prev_is_data
    b.add_constraints(
        np.concatenate([rows, rows[keep]]),
        np.concatenate([pc[S, Hh, Aa], cols_prev[keep]]),
        np.concatenate([np.ones(m), -np.ones(int(keep.sum()))]),
        ub=np.where(prev_is_data, (tail[Aa] == S).astype(float), 0.0),
        count=m,
        name="p_le_r",
    )
    b.add_constraints(
        np.concatenate([rows, rows]),
        np.concatenate([pc[S, Hh, Aa], y.index[arc_edge[Aa]]]),
        np.concatenate([np.ones(m), -np.ones(m)]),
        ub=0.0,
        count=m,
        name="p_le_y",
    )
    # r[s,h,v] - r[s,h-1,v] - sum_{a into v} p[s,h,a] <= 0   (h = 0: previous is [v == s])
    S2, H2, V2 = np.meshgrid(np.arange(n), np.arange(H), np.arange(n), indexing="ij")
    S2, H2, V2 = S2.ravel(), H2.ravel(), V2.ravel()
    q = len(S2)
    prev_data = H2 == 0
    rows_l = [np.arange(q), np.arange(q)[~prev_data], (S * H + Hh) * n + head[Aa]]
    cols_l = [rc[S2, H2, V2], rc[S2[~prev_data], H2[~prev_data] - 1, V2[~prev_data]], pc[S, Hh, Aa]]
    vals_l = [np.ones(q), -np.ones(int((~prev_data).sum())), -np.ones(m)]
    b.add_constraints(
        np.concatenate(rows_l),
        np.concatenate(cols_l),
        np.concatenate(vals_l),
        ub=np.where(prev_data, (V2 == S2).astype(float), 0.0),
        count=q,
        name="reach",
    )
    _symmetry_rows(b, x, n, directed)  # the diameter ignores the demand: servers are always interchangeable
    b.set_objective([], [], sense="minimize")
    return b.build(), x.index, edges


def moore_diameter_bound(n: int, d: int, directed: bool) -> int:
    """The least diameter the Moore bound allows for n servers of degree d."""
    reach, layer, h = 1, 1, 0
    while reach < n:
        layer = d * (d - 1) ** h if not directed else d ** (h + 1)
        if layer <= 0:
            return n  # d = 1 undirected: never connected beyond 2 servers
        reach += layer
        h += 1
    return h
