"""``topology_routing``: the exact general-topology MILP (integer link counts + multi-commodity flow).

Two formulations share the data and the decoding:

* ``strong`` (default): flows aggregated by source, AllReduce mutability over candidate rings
  (every ring order for groups of up to :data:`ALL_RINGS_UP_TO` members, TotientPerms rings of the
  listed member order above: there the optimum is over those rings only, and the solution's
  ``details["rings_restricted"]`` says so), a Moore-bound valid inequality per source, no flow back
  into a source, and symmetry breaking when the demand does not distinguish servers;
* ``naive``: one commodity per (source, destination) pair and none of the above - kept for
  comparison (``benchmarks/exact_vs_naive.py``).

Under ``strong``, uniform all-to-all demand on undirected links is solved instead by the search
over a shipped catalogue of regular graphs (:mod:`.graph_catalogue`: one flow LP per graph class,
best bound first) when one covers (n, d) and it can exclude every topology outside it.

Objective ``throughput`` (maximize the concurrent-flow lambda), ``comm_time`` / ``iteration_time``
(the MILP maximizes lambda, i.e. minimizes the bandwidth term 1/lambda; with a hop latency, hop-limited
copies of the strong model then settle the latency term, :func:`optimise_latency`), ``aspl``
(hop-count form), ``diameter`` (feasibility models per candidate diameter).
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, replace

import numpy as np

from topoopt_ilp.errors import InputError, UnsupportedError
from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.routes import PathSet, RingSet, Routing
from topoopt_ilp.core.solution import Solution, Topology
from topoopt_ilp.solvers import LinearModel, ModelBuilder, SolveResult, SolveStatus
from topoopt_ilp.solvers.options import DEFAULT_REL_GAP
from topoopt_ilp.solvers.result import relative_gap

from topoopt_ilp.models.common import ExactOptions, check_backend, export_model, run_model, solution_status, time_left
from topoopt_ilp.models.flow_decomposition import decompose_layered_flow, decompose_source_flow, layered_arcs, paths_on_links

__all__ = ["ALL_RINGS_UP_TO", "MAX_SERVERS", "FORMULATIONS", "moore_hop_bound", "moore_layer_hops", "RingCandidate", "TopologyRoutingModel", "build_topology_routing", "solve_topology_routing"]

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
#: are spent on strong branching. Measured on the AllReduce + MP mixes of
#: ``benchmarks/exact_vs_naive.py`` (no warm start; TotientPerms rings only, before every ring order of
#: groups up to ALL_RINGS_UP_TO members was a candidate), default -> these: n=10 d=2 1.9 -> 0.8 s, d=3
#: 3.9 -> 1.5 s; n=12 d=2 7.5 -> 3.9 s, d=3 32.0 -> 15.2 s, d=4 37.1 -> 18.5 s. The naive
#: formulation gains nothing from them (n=10 d=2 16.0 -> 13.4 s, n=8 d=3 1.6 -> 2.1 s).
STRONG_TUNING = {"highs": {"presolve": "off", "mip_pscost_minreliable": 0}}
#: The start proof's LPs run with STRONG_TUNING (no presolve) up to this many non-zeros, with the
#: solver's defaults above (see the comment block above ``_start_proof``).
LP_TUNING_NONZEROS = 20_000
#: The start proof's ring-and-matching starts (:func:`.relaxation_rounding.ring_matching_starts`)
#: are not tried once this share of the time limit has passed: the MILP keeps the rest. Measured
#: (skewed mixes of benchmarks/exact_vs_naive.py, degree 4, 120 s limit, up to 10 distinct starts):
#: their LPs take 0.3 s in all at 12 servers, 1.1 s at 16 and 1.6 s at 24 (after a 7.4 s relaxation).
RING_MATCHING_SHARE = 0.5
#: AllReduce groups of at most this many members get every ring order as candidates ((k-1)! directed
#: rings: 120 at k = 6), larger ones TotientPerms' rings of the listed member order m_r -> m_{r+p},
#: gcd(p, k) = 1 (design §3), as TopoOpt does. One constant for this model and the joint ones
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


def ring_candidates(instance: Instance, mutable: bool = True, all_orders_up_to: int = ALL_RINGS_UP_TO
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
        parts.append(f"group {g} ({k} members): rings member i -> member i+p of its listed order, p in {ps}, "
                     f"not all {math.factorial(k - 1):,} ring orders")
    if not parts:
        return None
    return ("status and bound hold among the candidate rings only - " + "; ".join(parts)
            + f" (every ring order is a candidate for groups of up to {ALL_RINGS_UP_TO} members)")


def moore_layer_hops(count: int, first: int, ratio: int) -> np.ndarray:
    """The hop count of each of ``count`` servers put, nearest first, on layers of widths first,
    first*ratio, first*ratio^2, ... (``inf`` past the last non-empty layer). With first = d and
    ratio = d - 1 (d directed) these are the Moore bound's layers: in any degree-d graph at most
    d (d-1)^(h-1) servers (d^h directed) lie h hops from a server."""
    hops = np.full(count, np.inf)
    start, h, width = 0, 1, first
    while start < count and width > 0:
        hops[start:start + width] = h
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


def _arcs(n: int) -> tuple[np.ndarray, np.ndarray]:
    tail, head = np.nonzero(~np.eye(n, dtype=bool))
    return tail, head


def _edges(n: int, directed: bool, tail: np.ndarray, head: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if directed:
        return np.stack([tail, head], axis=1), np.arange(len(tail))
    iu, ju = np.triu_indices(n, 1)
    index = np.full((n, n), -1, dtype=np.int64)
    index[iu, ju] = np.arange(len(iu))
    index[ju, iu] = np.arange(len(iu))
    return np.stack([iu, ju], axis=1), index[tail, head]


def _uniform_demand(instance: Instance, mp: np.ndarray) -> bool:
    """True when relabelling servers cannot change the problem (all-to-all, no AllReduce)."""
    if instance.demand.allreduce:
        return False
    off = mp[~np.eye(instance.n, dtype=bool)]
    return bool(off.size) and np.allclose(off, off[0])


def build_topology_routing(instance: Instance, formulation: str = "strong", mutable_rings: bool = True,
                           all_orders_up_to: int = ALL_RINGS_UP_TO, max_hops: int | None = None) -> TopologyRoutingModel:
    """Build the MILP for ``instance`` (family ``any``) as arrays; ``all_orders_up_to``: see
    :func:`ring_candidates`; ``max_hops``: every byte travels at most that many links (the hop-limit
    rows of the model comment; strong formulation, objectives other than aspl)."""
    if formulation not in FORMULATIONS:
        raise InputError(f"unknown formulation {formulation!r}; choose one of {', '.join(FORMULATIONS)}")
    if max_hops is not None and (formulation != "strong" or instance.objective == "aspl" or max_hops < 1):
        raise ValueError(f"a hop limit ({max_hops}) needs the strong formulation, an objective other than aspl and H >= 1")
    c = instance.cluster
    n, d, directed = c.servers, c.degree, c.directed
    objective = instance.objective
    tail, head = _arcs(n)
    edges, arc_edge = _edges(n, directed, tail, head)
    A, E = len(tail), len(edges)
    b = ModelBuilder(name=f"topology_routing_{formulation}")
    x = b.add_variables(E, lb=0, ub=d if c.multi_links else 1, kind="integer", name="x")

    if objective == "aspl":
        return _build_aspl(instance, b, x, tail, head, edges, arc_edge, formulation)

    mp_bytes = instance.demand.mp_matrix(n)
    rings = ring_candidates(instance, mutable_rings, all_orders_up_to)
    groups = instance.demand.allreduce
    ring_amount = np.array([groups[r.group].bytes_per_member() for r in rings])
    scale = float(max(mp_bytes.max(initial=0.0), ring_amount.max(initial=0.0)))
    smallest = float(min(mp_bytes[mp_bytes > 0].min(initial=np.inf), ring_amount[ring_amount > 0].min(initial=np.inf)))
    if smallest < DEMAND_RANGE_LIMIT * scale:
        # Scaled to the largest entry, the smallest would sit below the solvers' feasibility
        # tolerance (~1e-7): a topology that leaves it unconnected looks feasible (measured: one
        # AllReduce of 1e13 bytes next to MP pairs of 5e6 decoded into a disconnected pair).
        raise UnsupportedError(f"the demand spans a factor {scale / smallest:.3g} ({smallest:.3g} to {scale:.3g} bytes), "
                               f"more than the factor {1 / DEMAND_RANGE_LIMIT:.0e} the exact model's numerics resolve; drop or merge "
                               "the smallest entries, or use --method heuristic")
    mp = mp_bytes / scale
    ring_amount = ring_amount / scale

    lam = b.add_variables(1, name="lam")
    lam_col = int(lam.index[0])
    z = b.add_variables(len(rings), name="z")

    # Ring traffic as triplets: ring c makes member order[i] send ring_amount[c] to order[i+1].
    r_c = np.concatenate([np.full(len(r.order), ci) for ci, r in enumerate(rings)]) if rings else np.zeros(0, np.int64)
    r_s = np.concatenate([np.asarray(r.order) for r in rings]) if rings else np.zeros(0, np.int64)
    r_t = np.concatenate([np.roll(np.asarray(r.order), -1) for r in rings]) if rings else np.zeros(0, np.int64)
    r_w = ring_amount[r_c] if rings else np.zeros(0)

    if formulation == "strong":
        has_out = (mp.sum(axis=1) > 0)
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
        cols += [z.index[r_c], z.index[r_c]]
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
        cols += [z.index[r_c], z.index[r_c]]
        vals += [-r_w, r_w]
    b.add_constraints(np.concatenate(rows), np.concatenate(cols), np.concatenate(vals), lb=0.0, ub=0.0, count=K * n,
                      name="conservation")

    # Capacity rows: sum_k f[k, a] - x[e(a)] <= 0.
    b.add_constraints(np.concatenate([np.tile(np.arange(A), K), np.arange(A)]),
                      np.concatenate([fcols.ravel(), x.index[arc_edge]]),
                      np.concatenate([np.ones(K * A), -np.ones(A)]), lb=-np.inf, ub=0.0, count=A, name="capacity")
    _degree_rows(b, x, edges, n, d, directed, c.regular)

    # Ring shares: sum_{c in g} z[c] - lam = 0.
    if rings:
        gid = np.array([r.group for r in rings])
        b.add_constraints(np.concatenate([gid, np.arange(len(groups))]),
                          np.concatenate([z.index, np.full(len(groups), lam_col)]),
                          np.concatenate([np.ones(len(rings)), -np.ones(len(groups))]),
                          lb=0.0, ub=0.0, count=len(groups), name="ring_share")

    if formulation == "strong":
        # Moore cut per source (see the model comment): the MP bytes ride with the source's anchor ring.
        L, ring_coef = _moore_cut_coefficients(mp, src, rings, r_c, r_s, r_t, r_w, d, directed)
        kk = kindex[r_s]
        b.add_constraints(np.concatenate([np.repeat(np.arange(K), A), np.arange(K), kk]),
                          np.concatenate([fcols.ravel(), np.full(K, lam_col), z.index[r_c]]),
                          np.concatenate([np.ones(K * A), -L, -ring_coef]), lb=0.0, ub=np.inf, count=K, name="moore")
        if _uniform_demand(instance, mp):
            _symmetry_rows(b, x, n, directed)
    layers = _hop_limit_rows(b, fcols, kindex, src, n, tail, head, max_hops) if max_hops is not None else None

    b.set_objective([lam_col], [1.0], sense="maximize")
    return TopologyRoutingModel(b.build(), n, directed, instance.objective, formulation, scale, edges, tail, head, arc_edge,
                                commodities, x.index, lam_col, z.index, fcols, tuple(rings), mp,
                                np.array([g.bytes_per_member() for g in groups]) / scale, layers)


def _hop_limit_rows(b: ModelBuilder, fcols: np.ndarray, kindex: np.ndarray, src: np.ndarray, n: int, tail: np.ndarray,
                    head: np.ndarray, H: int) -> HopLayers:
    """The hop-limit rows of the model comment: layered flows g, f = sum_h g, and forwarding."""
    K, A = fcols.shape
    l_src, l_hop, l_tail, l_head = layered_arcs(n, src, H)
    g = b.add_variables(len(l_src), lb=0.0, name="g")
    arc_id = np.full((n, n), -1, dtype=np.int64)
    arc_id[tail, head] = np.arange(A)
    k_of = kindex[l_src]
    b.add_constraints(np.concatenate([np.arange(K * A), k_of * A + arc_id[l_tail, l_head]]),
                      np.concatenate([fcols.ravel(), g.index]),
                      np.concatenate([np.ones(K * A), -np.ones(len(l_src))]), lb=0.0, ub=0.0, count=K * A, name="hop_layers")
    if H >= 2:  # forward rows (k, h, v), h = 1..H-1: in_h(v) - out_{h+1}(v) >= 0
        into, later = l_hop <= H - 1, l_hop >= 2
        b.add_constraints(np.concatenate([(k_of[into] * (H - 1) + l_hop[into] - 1) * n + l_head[into],
                                          (k_of[later] * (H - 1) + l_hop[later] - 2) * n + l_tail[later]]),
                          np.concatenate([g.index[into], g.index[later]]),
                          np.concatenate([np.ones(int(into.sum())), -np.ones(int(later.sum()))]),
                          lb=0.0, count=K * (H - 1) * n, name="hop_forward")
    return HopLayers(l_src, l_hop, l_tail, l_head, g.index)


def _moore_cut_coefficients(mp: np.ndarray, src: np.ndarray, rings: list[RingCandidate], r_c: np.ndarray, r_s: np.ndarray,
                            r_t: np.ndarray, r_w: np.ndarray, d: int, directed: bool) -> tuple[np.ndarray, np.ndarray]:
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


def _degree_rows(b: ModelBuilder, x, edges: np.ndarray, n: int, d: int, directed: bool, regular: bool) -> None:
    lb = float(d) if regular else 0.0
    E = len(edges)
    if directed:
        b.add_constraints(edges[:, 0], x.index, 1.0, lb=lb, ub=float(d), count=n, name="out_degree")
        b.add_constraints(edges[:, 1], x.index, 1.0, lb=lb, ub=float(d), count=n, name="in_degree")
    else:
        b.add_constraints(np.concatenate([edges[:, 0], edges[:, 1]]), np.concatenate([x.index, x.index]), np.ones(2 * E),
                          lb=lb, ub=float(d), count=n, name="degree")


def _symmetry_rows(b: ModelBuilder, x, n: int, directed: bool) -> None:
    """Relabel server 0's neighbours 1, 2, ... by decreasing link count (valid when servers are alike):
    x[0,1] >= 1 and x[0,j] - x[0,j+1] >= 0."""
    # Edges (0, j) are the first n-1 edges in both orders (row-major, i = 0 first).
    e0 = x.index[: n - 1]
    m = n - 2
    b.add_constraints(np.concatenate([np.arange(m), np.arange(m)]), np.concatenate([e0[:-1], e0[1:]]),
                      np.concatenate([np.ones(m), -np.ones(m)]), lb=0.0, ub=np.inf, count=m, name="symmetry_order")
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
    b.add_constraints(np.concatenate([k_of * n + head[a_of], k_of * n + tail[a_of]]),
                      np.concatenate([fcols.ravel(), fcols.ravel()]),
                      np.concatenate([np.ones(K * A), -np.ones(K * A)]), lb=rhs.ravel(), ub=rhs.ravel(), name="conservation")
    # Arc usage only on existing links: f[k, a] <= (n-1) x[e(a)]  (or 1 * x for a single pair).
    big = float(n - 1) if formulation == "strong" else 1.0
    b.add_constraints(np.concatenate([np.arange(K * A), np.arange(K * A)]),
                      np.concatenate([fcols.ravel(), np.tile(x.index[arc_edge], K)]),
                      np.concatenate([np.ones(K * A), -big * np.ones(K * A)]), lb=-np.inf, ub=0.0, name="usage")
    _degree_rows(b, x, edges, n, d, directed, c.regular)
    if formulation == "strong":
        # Every source reaches the others in at least the Moore hop total.
        L = moore_hop_bound(np.ones(n - 1), d, directed)
        b.add_constraints(np.repeat(np.arange(K), A), fcols.ravel(), 1.0, lb=L, ub=np.inf, count=K, name="moore")
        _symmetry_rows(b, x, n, directed)
    b.set_objective(fcols.ravel(), 1.0 / (n * (n - 1)), sense="minimize")
    return TopologyRoutingModel(b.build(), n, directed, "aspl", formulation, 1.0, edges, tail, head, arc_edge, commodities,
                                x.index, -1, np.zeros(0, np.int64), fcols, (), np.zeros((n, n)), np.zeros(0))


# ------------------------------------------------------------------------------------------------
def _topology(m: TopologyRoutingModel, values: np.ndarray) -> np.ndarray:
    xv = np.rint(values[m.x_cols]).astype(np.int64)
    X = np.zeros((m.n, m.n), dtype=np.int64)
    X[m.edges[:, 0], m.edges[:, 1]] = xv
    if not m.directed:
        X[m.edges[:, 1], m.edges[:, 0]] = xv
    return X


def _decode_routing(m: TopologyRoutingModel, values: np.ndarray) -> Routing:
    n = m.n
    lam = float(values[m.lam_col]) if m.lam_col >= 0 else 1.0
    ring_list = []
    if len(m.rings):
        zv = np.maximum(values[m.z_cols], 0.0)
        share = np.zeros(max(r.group for r in m.rings) + 1)
        np.add.at(share, [r.group for r in m.rings], zv)
        # Rings with a negligible share are solver noise (their traffic would fall below the path
        # decomposition's tolerance and be left unrouted, or make the evaluator's score differ from
        # the model's lambda in the 6th digit): drop them and renormalise.
        kept = [c for c, r in enumerate(m.rings) if zv[c] > RING_SHARE_SNAP * max(share[r.group], 1e-300)]
        kept_share = np.zeros_like(share)
        np.add.at(kept_share, [m.rings[c].group for c in kept], zv[kept])
        for c in kept:
            r = m.rings[c]
            ring_list.append((r.group, list(r.order), zv[c] / kept_share[r.group]))
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
    rows = paths_on_links(_topology(m, values), paths, wanted, keep_unconnected=True)
    return Routing(rings=RingSet.from_lists(ring_list) if ring_list else RingSet.empty(),
                   paths=PathSet.from_lists(rows) if rows else PathSet.empty())


def solve_topology_routing(instance: Instance, options: ExactOptions, warm_start_topology: np.ndarray | None = None,
                           use_catalogue: bool = True, latency: bool = True) -> Solution:
    """Build, solve and decode; the returned objective is in the instance's terms.

    With the strong formulation and uniform all-to-all demand on undirected links, the exact method
    is the search over the shipped catalogue of regular graphs (:mod:`.graph_catalogue`) when one
    covers (n, d) and no topology outside it can win; ``use_catalogue=False`` always runs the MILP.
    Objective comm_time / iteration_time with a hop latency: the bandwidth optimum is followed by
    :func:`optimise_latency` (``latency=False``: not, the latency term is then only bounded)."""
    started = time.perf_counter()
    sol = _solve_bandwidth(instance, options, warm_start_topology, use_catalogue)
    return optimise_latency(instance, options, sol, started) if latency else sol


def _solve_bandwidth(instance: Instance, options: ExactOptions, warm_start_topology: np.ndarray | None,
                     use_catalogue: bool) -> Solution:
    """:func:`solve_topology_routing` up to the bandwidth term (objectives throughput, aspl and
    diameter: the whole solve)."""
    if instance.topology_family != "any":
        raise InputError(f"topology_routing optimises general topologies; this instance asks for {instance.topology_family}")
    if instance.fixed_topology is not None:
        raise UnsupportedError("the instance fixes the topology: there is nothing for topology_routing to choose")
    if instance.n > MAX_SERVERS:
        raise UnsupportedError(f"{instance.n} servers is too large for the exact general-topology model (at most {MAX_SERVERS}); "
                               "use --method heuristic or topology_family circulant")
    check_backend(options)
    started = time.perf_counter()
    formulation = options.formulation or "strong"
    if formulation == "strong" and use_catalogue:
        sol = _solve_by_catalogue(instance, options, warm_start_topology, started)
        if sol is None:
            sol = _solve_by_moore_circulant(instance, options, started)
        if isinstance(sol, Solution):
            return sol
        if sol is not None:  # the catalogue ran but cannot prove: the MILP gets the time left
            note = sol
            milp = _solve_bandwidth(instance, replace(options, time_limit_s=time_left(options, started)), warm_start_topology,
                                    use_catalogue=False)
            return replace(milp, details={**milp.details, "catalogue_not_applied": note})
    if instance.objective == "diameter":
        return solve_diameter(instance, options, warm_start_topology)
    m = build_topology_routing(instance, formulation)
    start, proof = None, None
    if formulation == "strong":
        proof = _start_proof(instance, m, warm_start_topology, options, started)
        if proof is not None and proof.proved:
            if options.export_model:  # the model is the problem's, though its MILP never ran
                export_model(m.model, options)
            sol = _to_solution(instance, proof.fixed, proof.result, time.perf_counter() - started)
            return replace(sol, details={**sol.details, "algorithm": "start_proof", "start_proved": (
                f"{proof.source}'s links, routed at best (an LP), meet the LP relaxation's bound: no MILP ran")})
        options = replace(options, time_limit_s=time_left(options, started))  # what the LPs left of the limit
    elif warm_start_topology is not None:  # the naive formulation: HiGHS gets the start, as it always has
        start = np.full(m.model.num_vars, np.nan)
        X = warm_start_topology
        start[m.x_cols] = X[m.edges[:, 0], m.edges[:, 1]]
    result = run_model(m.model, options, start, tuning=STRONG_TUNING if formulation == "strong" else None)
    if proof is not None and _start_beats(proof, result, m.objective):
        # The MILP stopped at its limit below the best start it was not given (see _start_proof):
        # that start, with its best routing, is the design, under the better of the two bounds.
        bounds = [b for b in (proof.bound, result.bound) if b is not None]
        bound = (max if m.objective == "aspl" else min)(bounds)
        kept = replace(proof.result, status=SolveStatus.FEASIBLE, bound=bound, gap=relative_gap(proof.result.objective, bound))
        sol = _to_solution(instance, proof.fixed, kept, time.perf_counter() - started)
        milp = "no design" if result.objective is None else f"a design of model objective {result.objective:.6g}"
        return replace(sol, details={**sol.details, "milp_status": result.status.value, "returned": (
            f"{proof.source} (model objective {proof.result.objective:.6g}, routed at best by an LP): the MILP ended "
            f"its time with {milp}")})
    return _to_solution(instance, m, result, time.perf_counter() - started)


def _start_beats(proof: StartProof, result: SolveResult, objective: str) -> bool:
    """True when the MILP's ``result`` is not proven and the start proof's best start is better
    than its design (or it has none)."""
    if result.status not in (SolveStatus.FEASIBLE, SolveStatus.NO_SOLUTION):
        return False
    if result.objective is None or result.values is None:
        return True
    return _better(proof.result.objective, result.objective, objective, rtol=1e-9)


def _better(value: float, than: float, objective: str, rtol: float = 0.0) -> bool:
    """True when model objective ``value`` beats ``than`` by more than ``rtol`` of it: lambda is
    maximised, aspl's hop total minimised."""
    return value < than * (1 - rtol) if objective == "aspl" else value > than * (1 + rtol)


def with_links_fixed(m: TopologyRoutingModel, x: np.ndarray) -> TopologyRoutingModel:
    """``m`` with its link counts fixed to ``x`` (as its rows label the servers): an LP whose optimum
    is the best routing (flows and ring shares) of that topology."""
    lp = m.model
    kind = lp.col_kind.copy()
    kind[m.x_cols] = 0  # continuous: the links are fixed
    lower, upper = lp.col_lower.copy(), lp.col_upper.copy()
    lower[m.x_cols] = upper[m.x_cols] = np.asarray(x)[m.edges[:, 0], m.edges[:, 1]]
    return replace(m, model=replace(lp, col_lower=lower, col_upper=upper, col_kind=kind, name="fixed_links_lp"))


# ------------------------------------------------------------------------------------------------
# A start that proves itself, or none (strong formulation)
#
# LPs: the model's relaxation (every column continuous: an upper bound R on lambda), then per start
# the model with the start's links fixed (the start's own best routing: lambda S). The starts are
# the warm start (when given), a rounding of the relaxation and the ring-and-matching starts (both
# in :mod:`.relaxation_rounding`; the latter only until RING_MATCHING_SHARE of the limit). When
# S >= R (1 - gap) (for aspl, whose hop total is minimised and R a lower bound: S <= R (1 + gap)),
# the start is optimal and no MILP runs: the LP solution is decoded as the model's would be, status
# optimal with bound R. Else the MILP runs *without* the starts; when it stops at its limit with no
# design or one below the best start (``_start_beats``), that start with its LP routing is returned,
# feasible, under the better of R and the MILP's bound. Small models' LPs run without
# presolve (the model's HiGHS tuning, up to LP_TUNING_NONZEROS): the relaxation of the 8-server,
# degree-2 mix below took 3.2 ms without it and 7.6 ms with it; at 32 servers, degree 4 (131k
# non-zeros) the relaxation and the rounding's LP took 10.3 + 15.0 s without and 1.7 + 0.4 s with it
# (20 servers, 32k non-zeros: 0.08 + 0.12 s against 0.10 + 0.04 s). Measured on the skewed AllReduce + MP
# mixes of benchmarks/exact_vs_naive.py (HiGHS, median of 3): given TopoOpt's topology as a start
# where it is not optimal, HiGHS took 2-4x longer than without (n = 8, d = 2: 0.13 s vs 0.03 s;
# n = 10, d = 2 / 3: 2.08 / 5.75 s vs 0.90 / 2.58 s): its root search leaves the rounding that finds
# these optima at once. Where the start is optimal (n = 8, d = 3; n = 12, d = 4) the relaxation is
# tight and the two LPs settle it (the MILP without a start took 34.7 s at n = 12, d = 4). The method
# layer still returns the start when the evaluator scores it better than what the MILP found. Where
# the MILP cannot finish, the start may help its search a little: instances/mix-16.json (throughput,
# 60 s) ended at 263.5 without it against 267.0 with it, both far from the bound 336.1 (session 13;
# 258.2 either way in session 20 on a slower machine); all-to-all-16 ends at the same 1858.1 either way.
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StartProof:
    """A start the start proof scored: the model with its links fixed (an LP), that LP's result
    (when ``proved``: as an optimal solve with the relaxation's bound), which start it was, and the
    relaxation's bound (model units)."""

    fixed: TopologyRoutingModel
    result: SolveResult
    source: str
    bound: float
    proved: bool


def _start_proof(instance: Instance, m: TopologyRoutingModel, x: np.ndarray | None, options: ExactOptions,
                 started: float, rounding: bool = True) -> StartProof | None:
    """The start that proves itself optimal within the gap (the warm start ``x`` or, with
    ``rounding``, one of the relaxation's roundings), else the best one scored (``proved`` False);
    None when none was scored (no start, the relaxation not solved, or the time limit ran out first)."""
    from topoopt_ilp.models.topology.catalogue import solve_lp, symmetric_labelling
    from topoopt_ilp.models.topology.starts import relaxation_rounding, ring_matching_starts

    if time_left(options, started) == 0 or (x is None and not rounding):  # out of time, or no start to prove
        return None
    tuning = STRONG_TUNING if m.model.num_nonzeros <= LP_TUNING_NONZEROS else None
    relaxed = replace(m.model, col_kind=np.zeros_like(m.model.col_kind), name="relaxation")
    relaxation = solve_lp(relaxed, options, time_left(options, started), tuning=tuning)
    if relaxation.status != SolveStatus.OPTIMAL or time_left(options, started) == 0:
        return None
    bound = float(relaxation.objective)
    tolerance = options.gap if options.gap is not None else DEFAULT_REL_GAP
    starts = [] if x is None else [("the warm start", np.asarray(x))]
    if rounding:
        c = instance.cluster
        starts.append(("a rounding of the LP relaxation", relaxation_rounding(m, relaxation.values, c.degree, c.multi_links)))
        starts += [(f"ring-and-matching start {i + 1}", X)
                   for i, X in enumerate(ring_matching_starts(m, relaxation.values, c.degree, c.multi_links))]
    relabel = m.objective == "aspl" or _uniform_demand(instance, m.mp)  # the symmetry rows ask for a labelling; any is as good
    tried, best = set(), None
    for source, start in starts:
        key = np.asarray(start, dtype=np.int64).tobytes()
        if key in tried:  # a ring-and-matching start may repeat the rounding or the warm start
            continue
        tried.add(key)
        if source.startswith("ring-and-matching") and options.time_limit_s is not None and \
                time_left(options, started) < (1 - RING_MATCHING_SHARE) * options.time_limit_s:
            return best  # the MILP keeps the rest of the limit
        fixed = with_links_fixed(m, symmetric_labelling(start) if relabel else start)
        own = solve_lp(fixed.model, options, time_left(options, started), tuning=tuning)
        if own.status != SolveStatus.OPTIMAL:  # e.g. a start that breaks a symmetry or degree row, or out of time
            if time_left(options, started) == 0:
                return best
            continue
        # lambda is maximised (the relaxation bounds it from above); aspl's hop total is minimised
        if own.objective >= bound * (1 - tolerance) if m.objective != "aspl" else own.objective <= bound * (1 + tolerance):
            proved = replace(own, status=SolveStatus.OPTIMAL, bound=bound, gap=relative_gap(own.objective, bound))
            return StartProof(fixed, proved, source, bound, True)
        if best is None or _better(own.objective, best.result.objective, m.objective):
            best = StartProof(fixed, own, source, bound, False)
        if time_left(options, started) == 0:
            return best
    return best


def _solve_by_catalogue(instance: Instance, options: ExactOptions, warm_start_topology: np.ndarray | None,
                        started: float) -> Solution | str | None:
    """The catalogue search as a Solution; None when it does not apply to the instance, and the
    reason when it ran but a topology outside the catalogue might beat its best (the caller then
    runs the MILP)."""
    from topoopt_ilp.models.topology import catalogue as graph_catalogue

    mp = instance.demand.mp_matrix(instance.n)
    if graph_catalogue.catalogue_applies(instance, mp) is not None:
        return None
    if instance.objective in ("aspl", "diameter"):
        return _solve_hops_by_catalogue(instance, options, started)
    if options.export_model:  # the MILP is the model of the problem (the search solves LPs derived from it)
        export_model(build_topology_routing(instance, "strong").model, options)
    search, m = graph_catalogue.search_catalogue(instance, options, warm_start_topology)
    if not search.applies:
        outside = ", ".join(f"{u.name} <= {u.bound:.6g}" for u in search.uncovered if u.bound > search.lam)
        return f"best catalogue lambda {search.lam:.6g} (model units) does not exclude {outside}"
    details = {"algorithm": "catalogue", "catalogue_candidates": search.candidates, "catalogue_lps": search.lps_solved,
               "catalogue_lambda": search.lam if math.isfinite(search.lam) else None, "catalogue_seeded": search.seeded,
               "catalogue_units": "lambda per unit of pair demand: throughput = lambda x link bytes/s / bytes per pair",
               "catalogue_outside_bounds": {u.name: u.bound for u in search.uncovered},
               "catalogue_search_s": round(search.wall_time_s, 4)}
    wall = time.perf_counter() - started
    if search.result is None:
        return Solution(status="no_solution", method="exact", topology=None, backend=options.backend, wall_time_s=wall,
                        details={"model": "topology_routing", "formulation": "strong", "model_status": "no_solution",
                                 **details})
    if search.proven:  # the best LP value is the optimum: the bound equals it
        result = replace(search.result, status=SolveStatus.OPTIMAL, objective=search.lam, bound=search.lam, gap=0.0)
    else:  # a time limit hit mid-search: the best so far, and what the unsolved classes could still reach
        gap = (search.bound - search.lam) / search.lam if search.lam > 0 else math.inf
        result = replace(search.result, status=SolveStatus.FEASIBLE, objective=search.lam, bound=search.bound, gap=gap)
    sol = _to_solution(instance, m, result, wall)
    return replace(sol, details={**sol.details, **details})


def _solve_by_moore_circulant(instance: Instance, options: ExactOptions, started: float) -> Solution | str | None:
    """Directed links: a circulant digraph proven optimal by the Moore bound (:mod:`.moore_circulant`)
    as a Solution; None when the search does not apply, and the reason when it ran but proved nothing
    (the caller then runs the MILP). A time limit of 0 gives no_solution, as for every exact method."""
    from topoopt_ilp.models.topology import moore_circulant

    if moore_circulant.moore_applies(instance, instance.demand.mp_matrix(instance.n)) is not None:
        return None
    details = {"model": "topology_routing", "algorithm": "moore_circulant"}
    if options.time_limit_s == 0:
        return Solution(status="no_solution", method="exact", topology=None, backend=options.backend, wall_time_s=0.0,
                        details={**details, "model_status": "no_solution"})
    export_problem_model(instance, options)  # when asked: the MILP (diameter: its first feasibility model)
    search = moore_circulant.search_moore_circulant(instance, options)
    if search.topology is None:
        return f"Moore circulant search: {search.reason}"
    details.update(moore_jumps=list(search.jumps), moore_candidates=search.candidates,
                   moore_meeting_floor=search.meeting_floor, moore_lps=search.lps_solved,
                   moore_search_s=round(search.wall_time_s, 4))
    if instance.objective in ("aspl", "diameter"):
        value = search.value / (instance.n * (instance.n - 1)) if instance.objective == "aspl" else search.value
        return Solution(status="optimal", method="exact", topology=Topology(search.topology), objective=value, bound=value,
                        gap=0.0, backend=options.backend, wall_time_s=time.perf_counter() - started,
                        details={**details, "model_status": "optimal", "solver_calls": 0})
    from topoopt_ilp.models.topology.catalogue import routing_with_links_fixed

    m, result = routing_with_links_fixed(build_topology_routing(instance, "strong"), search.topology, search.value, options)
    result = replace(result, status=SolveStatus.OPTIMAL, objective=result.objective, bound=result.objective, gap=0.0)
    sol = _to_solution(instance, m, result, time.perf_counter() - started)
    details["moore_lambda"] = search.value
    return replace(sol, details={**sol.details, **details})


def _solve_hops_by_catalogue(instance: Instance, options: ExactOptions, started: float) -> Solution | str:
    """Objective aspl or diameter from the catalogue: the best class by its hop statistics (no solver
    call), proven when no topology outside the catalogue can beat it; else the reason (the caller
    runs the MILP). A time limit of 0 gives no_solution, as for every exact method."""
    from topoopt_ilp.models.topology import catalogue as graph_catalogue

    if options.time_limit_s == 0:
        return Solution(status="no_solution", method="exact", topology=None, backend=options.backend, wall_time_s=0.0,
                        details={"model": "topology_routing", "algorithm": "catalogue", "model_status": "no_solution"})
    export_problem_model(instance, options)  # when asked: the MILP (diameter: its first feasibility model)
    X, value, proven, outside = graph_catalogue.search_hop_objective(instance)
    if not proven:
        return f"best catalogue {instance.objective} {value:.6g} does not exclude topologies outside it (those reach >= {outside:.6g})"
    details = {"model": "topology_routing", "algorithm": "catalogue", "model_status": "optimal",
               "catalogue_candidates": len(graph_catalogue.regular_graphs(instance.n, instance.cluster.degree)),
               "catalogue_outside_floor": outside, "solver_calls": 0}
    return Solution(status="optimal", method="exact", topology=Topology(X), objective=value, bound=value, gap=0.0,
                    backend=options.backend, wall_time_s=time.perf_counter() - started, details=details)


def export_problem_model(instance: Instance, options: ExactOptions) -> None:
    """Write the model of the problem to ``options.export_model`` when a search answers instead of
    it: the strong MILP, or for objective ``diameter`` the first feasibility model of
    :func:`solve_diameter`, 'diameter <= the Moore bound' (:func:`build_diameter_feasibility`)."""
    if not options.export_model:
        return
    if instance.objective == "diameter":
        c = instance.cluster
        export_model(build_diameter_feasibility(instance, moore_diameter_bound(c.servers, c.degree, c.directed))[0], options)
    else:
        export_model(build_topology_routing(instance, "strong").model, options)


def _to_solution(instance: Instance, m: TopologyRoutingModel, result: SolveResult, wall: float) -> Solution:
    status = solution_status(result)
    details = {"model": "topology_routing", "formulation": m.formulation, "variables": m.model.num_vars,
               "constraints": m.model.num_rows, "nonzeros": m.model.num_nonzeros, "model_status": status}
    if result.message:
        details["solver_message"] = result.message
    if status == "feasible" and m.objective != "aspl" and result.objective is not None and result.objective <= 0:
        # An incumbent with lam = 0 (a time-limited solve's first point: often a disconnected
        # topology) carries none of the demand: it is no design (measured: SCIP, 2 s on mix-16).
        status = "no_solution"
        details["model_status"] = status
        details["status_note"] = "the solver's only point routes none of the demand (lambda = 0)"
    if result.values is None or status not in ("optimal", "feasible"):
        return Solution(status=status, method="exact", topology=None, backend=result.backend, wall_time_s=wall, details=details)
    X = _topology(m, result.values)
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
            details.update(model_status="no_solution",
                           status_note="the solver's point, decoded, carries none of the demand (throughput 0)")
            return Solution(status="no_solution", method="exact", topology=None, backend=result.backend,
                            wall_time_s=wall, details=details)
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
                details["status_note"] = ("bandwidth term proven optimal; the latency term is not optimised, "
                                          "so comm time is not proven")
            else:  # the solver stopped at a requested gap: nothing is proven optimal
                details["status_note"] = (f"bandwidth term within {bw_gap:.4g} of its bound (the requested gap), not "
                                          "proven optimal; the latency term is not optimised")
    return Solution(status=status, method="exact", topology=Topology(X), routing=routing, objective=objective, bound=bound,
                    gap=gap, backend=result.backend, wall_time_s=wall, details=details)


# ------------------------------------------------------------------------------------------------
# The latency term: hop-limited models
#
# comm_time = 1/lambda + alpha H, H the hops of the longest used path. Let lambda_H be the best lambda
# of any design whose every path has at most H hops (the model with hop limit H). A design with
# longest path H' scores at least 1/lambda_H' + alpha H', and the design attaining lambda_H at most
# 1/lambda_H + alpha H, so OPT = min_H (1/lambda_H + alpha H). Given the bandwidth optimum (lambda_ub
# its bound; U the evaluator's comm time of the best design so far, first the bandwidth optimum's):
#   * 1/lambda_ub + alpha H >= U (1 - tol): no design with longest path >= H beats U by more than the
#     relative gap tol asked of every solve (lambda_H <= lambda_ub), so H = 1, 2, ... stops there (at
#     the latest past n - 1: no simple path is longer);
#   * otherwise the hop-limited model with lambda >= 1/(U (1 - tol) - alpha H) (only designs that beat
#     U by more than tol) is solved: infeasible gives the term
#     U (1 - tol); a design may improve U (and H_U); the model's bound b gives the term 1/b + alpha H
#     (designs below the threshold score at least U (1 - tol)).
# The bound is the least term (an H left unsolved by the time limit: 1/lambda_ub + alpha H for it and
# every larger H), capped at the final U. First, one model settles every H at once: with top the
# largest H still open, the model with hop limit top and the lowest threshold, 1/(U (1 - tol) - alpha)
# (counted at one hop): infeasible means lambda_H <= lambda_top < that threshold <= H's own for every
# H <= top. Only when it finds a design are the limits H = 1, 2, ... solved one by one.
# ------------------------------------------------------------------------------------------------
def optimise_latency(instance: Instance, options: ExactOptions, sol: Solution, started: float) -> Solution:
    """``sol`` (the bandwidth optimum for objective comm_time / iteration_time) with the latency term
    settled by the hop-limited models of the comment above; ``sol`` itself when there is no latency
    term, no design, or no bound on lambda (the naive formulation keeps its bandwidth-only answer)."""
    from topoopt_ilp.evaluation.evaluate import evaluate, objective_value

    alpha = instance.cluster.hop_latency_s
    lam_ub = sol.details.get("milp_throughput_bound")  # instance units: iterations per second
    if (instance.objective not in ("comm_time", "iteration_time") or alpha <= 0 or sol.topology is None
            or not lam_ub or (options.formulation or "strong") != "strong"):
        return sol

    def score(candidate: Solution) -> tuple[float, int]:
        metrics = evaluate(instance, candidate, routing="given")
        return float(objective_value(instance, metrics)), int(metrics.max_hops)

    best = sol
    U, H_best = score(sol)
    if not math.isfinite(U):  # a design the evaluator cannot score: nothing to settle
        return sol
    U_bandwidth_optimum = U
    tolerance = options.gap if options.gap is not None else DEFAULT_REL_GAP
    models: list[dict] = []
    terms = [U]

    def limited(H: int, at_hops: int):
        """Solve the model with hop limit H and lambda >= 1/(U (1 - tol) - alpha at_hops); a design it
        finds may improve U. Returns ((status, its bound as a bandwidth time) or None when no time
        was left, whether a limit stopped it)."""
        nonlocal best, U, H_best
        left = time_left(options, started)
        if left == 0:
            return None, True
        m = build_topology_routing(instance, "strong", max_hops=H)
        unit = instance.cluster.link_bytes_per_s / m.scale
        lower = m.model.col_lower.copy()
        lower[m.lam_col] = 1.0 / (U * (1 - tolerance) - alpha * at_hops) / unit  # beat U by more than the tolerance
        m = replace(m, model=replace(m.model, col_lower=lower, name=f"topology_routing_hops_le_{H}"))
        result = run_model(m.model, replace(options, time_limit_s=left, export_model=None), tuning=STRONG_TUNING)
        status = solution_status(result)
        models.append({"max_hops": H, "threshold_hops": at_hops, "status": status, "time_s": round(result.wall_time_s, 3)})
        if result.values is not None and status in ("optimal", "feasible"):
            candidate = _to_solution(instance, m, result, time.perf_counter() - started)
            if candidate.topology is not None:
                value, hops = score(candidate)
                models[-1]["comm_time_s"] = value
                if value < U:
                    best, U, H_best = candidate, value, hops
        bound = None if result.bound is None or result.bound <= 0 else 1.0 / (result.bound * unit)
        return (status, bound), status not in ("optimal", "infeasible")

    def open_hops() -> int:
        """The most hops a design may have and still beat U by more than the tolerance."""
        return max([h for h in range(1, instance.n) if 1.0 / lam_ub + alpha * h < U * (1 - tolerance)], default=0)

    H = 1
    top = open_hops()
    if top >= 2:
        # One model for every H <= top at once: lambda_H <= lambda_top, and the threshold counted at
        # one hop is the lowest, so 'no design of at most top hops reaches it' rules them all out.
        outcome, stopped = limited(top, 1)
        if outcome is not None and outcome[0] == "infeasible":
            terms.append(U * (1 - tolerance))
            H = top + 1
        elif stopped:
            H = instance.n  # nothing settled: the floor at one hop below is the bound
            terms.append(1.0 / lam_ub + alpha)
    while H <= open_hops():
        outcome, stopped = limited(H, H)
        if outcome is None:
            break
        status, time_bound = outcome
        if status == "infeasible":  # no design of at most H hops scores below U (1 - tolerance)
            terms.append(U * (1 - tolerance))
        elif time_bound is not None:
            terms.append(time_bound + alpha * H)
        if stopped:  # a limit stopped it: H (and every larger H) is not settled
            break
        H += 1
    terms.append(1.0 / lam_ub + alpha * H)  # every H not settled above
    bound = min(min(terms), U)
    gap = relative_gap(U, bound)
    details = {k: v for k, v in best.details.items() if k != "status_note"}
    details["milp_throughput_bound"] = lam_ub  # of any design (a hop-limited model's own bound is lower)
    details["latency"] = {"hop_limited_models": models, "max_hops": H_best,
                          "bandwidth_optimum_comm_time_s": U_bandwidth_optimum}
    # "optimal" as for every MILP here: within the default relative gap (a looser requested gap is not a proof)
    status = "optimal" if gap is not None and gap <= DEFAULT_REL_GAP * (1 + 1e-9) else "feasible"
    if status == "feasible":
        details["status_note"] = (f"comm time within {gap:.4g} of its bound (bandwidth and hop-limited models; "
                                  "a time limit or a requested gap stopped them)")
    return replace(best, status=status, objective=U, bound=bound, gap=gap,
                   wall_time_s=time.perf_counter() - started, details=details)


def _evaluator_objective(instance: Instance, topology: Topology, routing: Routing) -> float | None:
    """The evaluator's objective of the decoded design (None when it cannot score it)."""
    from topoopt_ilp.evaluation.evaluate import RoutingError, evaluate, objective_value

    sol = Solution(status="feasible", method="exact", topology=topology, routing=routing)
    mode = "given" if (len(routing.paths) or len(routing.offset_routes)) else "shortest_path"  # as solve.finalize
    try:
        value = objective_value(instance, evaluate(instance, sol, routing=mode))
    except (RoutingError, InputError):
        return None
    return float(value) if math.isfinite(value) else None


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
# ------------------------------------------------------------------------------------------------
def build_diameter_feasibility(instance: Instance, H: int) -> tuple[LinearModel, np.ndarray, np.ndarray]:
    """The model 'a topology of diameter <= H exists'; returns (model, x columns, edges)."""
    c = instance.cluster
    n, d, directed = c.servers, c.degree, c.directed
    tail, head = _arcs(n)
    edges, arc_edge = _edges(n, directed, tail, head)
    A, E = len(tail), len(edges)
    b = ModelBuilder(name=f"diameter_le_{H}")
    x = b.add_variables(E, lb=0, ub=d if c.multi_links else 1, kind="integer", name="x")
    y = b.add_variables(E, kind="binary", name="y")
    _degree_rows(b, x, edges, n, d, directed, c.regular)
    e_idx = np.arange(E)
    # y <= x and x <= d*y
    b.add_constraints(np.concatenate([e_idx, e_idx]), np.concatenate([y.index, x.index]),
                      np.concatenate([np.ones(E), -np.ones(E)]), ub=0.0, count=E, name="y_le_x")
    b.add_constraints(np.concatenate([e_idx, e_idx]), np.concatenate([x.index, y.index]),
                      np.concatenate([np.ones(E), -float(d) * np.ones(E)]), ub=0.0, count=E, name="x_le_dy")
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
    b.add_constraints(np.concatenate([rows, rows[keep]]), np.concatenate([pc[S, Hh, Aa], cols_prev[keep]]),
                      np.concatenate([np.ones(m), -np.ones(int(keep.sum()))]),
                      ub=np.where(prev_is_data, (tail[Aa] == S).astype(float), 0.0), count=m, name="p_le_r")
    b.add_constraints(np.concatenate([rows, rows]), np.concatenate([pc[S, Hh, Aa], y.index[arc_edge[Aa]]]),
                      np.concatenate([np.ones(m), -np.ones(m)]), ub=0.0, count=m, name="p_le_y")
    # r[s,h,v] - r[s,h-1,v] - sum_{a into v} p[s,h,a] <= 0   (h = 0: previous is [v == s])
    S2, H2, V2 = np.meshgrid(np.arange(n), np.arange(H), np.arange(n), indexing="ij")
    S2, H2, V2 = S2.ravel(), H2.ravel(), V2.ravel()
    q = len(S2)
    prev_data = H2 == 0
    rows_l = [np.arange(q), np.arange(q)[~prev_data], (S * H + Hh) * n + head[Aa]]
    cols_l = [rc[S2, H2, V2], rc[S2[~prev_data], H2[~prev_data] - 1, V2[~prev_data]], pc[S, Hh, Aa]]
    vals_l = [np.ones(q), -np.ones(int((~prev_data).sum())), -np.ones(m)]
    b.add_constraints(np.concatenate(rows_l), np.concatenate(cols_l), np.concatenate(vals_l),
                      ub=np.where(prev_data, (V2 == S2).astype(float), 0.0), count=q, name="reach")
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


def solve_diameter(instance: Instance, options: ExactOptions, start: np.ndarray | None) -> Solution:
    """Smallest diameter: the heuristic (or start) gives an upper bound, the Moore bound a lower one;
    feasibility models for H = lower, lower+1, ... close the gap. ``options.export_model`` writes
    the first of them, H = the Moore bound (also when the start meets that bound and none is solved)."""
    from topoopt_ilp.core.graph import diameter as graph_diameter

    c = instance.cluster
    n, d, directed = c.servers, c.degree, c.directed
    started = time.perf_counter()
    lower = moore_diameter_bound(n, d, directed)
    best_x = start
    upper = graph_diameter(start) if start is not None else math.inf
    details = {"model": "topology_routing/diameter", "moore_lower_bound": lower, "feasibility_models": []}
    if options.export_model:
        details["exported_model"] = f"diameter <= {lower} (the Moore bound; the first feasibility model)"
        export_problem_model(instance, options)
    H = lower
    status = "optimal"
    while H < upper:
        if H > n - 1:  # no connected topology of this degree exists
            return Solution(status="infeasible", method="exact", topology=None, backend=options.backend,
                            wall_time_s=time.perf_counter() - started, details=details)
        remaining = time_left(options, started)
        if remaining == 0:
            status = "feasible"
            break
        model, xcols, edges = build_diameter_feasibility(instance, H)
        result = run_model(model, ExactOptions(**{**options.__dict__, "time_limit_s": remaining, "export_model": None}))
        st = solution_status(result)
        details["feasibility_models"].append({"diameter_le": H, "status": st, "time_s": round(result.wall_time_s, 3)})
        if st in ("optimal", "feasible"):
            xv = np.rint(result.values[xcols]).astype(np.int64)
            X = np.zeros((n, n), dtype=np.int64)
            X[edges[:, 0], edges[:, 1]] = xv
            if not directed:
                X[edges[:, 1], edges[:, 0]] = xv
            best_x, upper = X, H
            break
        if st == "infeasible":
            lower = H + 1
            H += 1
            continue
        status = "feasible"  # a limit was hit before H was decided
        break
    if best_x is None or not math.isfinite(upper):  # no start, or a disconnected one: nothing found
        return Solution(status="no_solution", method="exact", topology=None, backend=options.backend,
                        wall_time_s=time.perf_counter() - started, details=details)
    if lower < upper:
        status = "feasible"
    gap = (upper - lower) / upper if upper else 0.0
    return Solution(status=status, method="exact", topology=Topology(best_x), objective=float(upper), bound=float(lower),
                    gap=gap, backend=options.backend, wall_time_s=time.perf_counter() - started, details=details)
