"""What the placement model and its search know of a fixed topology: routing fractions and times.

Shortest-path routing with equal split as a linear map from pair traffic to arc loads
(:class:`RoutingFractions`), the rings of the AllReduce groups (:func:`ring_strides`: by default the
TotientPerms rings of least hop total, split equally), the loads of traffic patterns, and
:func:`strategy_times`: a strategy's compute, bandwidth, latency and iteration time by the
evaluator's definitions, for the solution that names the rings of :func:`placement_routing`.
Shared by :mod:`.milp` (the MILP) and :mod:`.local_search` (its incumbent and bound). :func:`path_entries` and :func:`path_floors` are the models' form of the
``critical_path`` compute model (:mod:`topoopt_ilp.core.workload`, **Compute model**).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from topoopt_ilp.core.graph import hop_distances
from topoopt_ilp.core.instance import AllReduceGroup, Instance
from topoopt_ilp.core.routes import RingSet, Routing
from topoopt_ilp.core.strategy import Strategy, strategy_demand
from topoopt_ilp.core.workload import MEMORY_RTOL, Workload
from topoopt_ilp.errors import InputError

__all__ = [
    "RING_POLICIES",
    "TIME_UNIT_S",
    "RoutingFractions",
    "check_ring_policy",
    "critical_path",
    "layer_options",
    "objective_of",
    "path_entries",
    "path_floors",
    "path_rows",
    "placement_routing",
    "ring_pairs",
    "ring_strides",
    "shortest_path_fractions",
    "strategy_times",
]

#: Internal time unit of the model (microseconds): link-latency terms (alpha = 1 us per hop) stay
#: far above solver feasibility tolerances (~1e-7), which they would not in seconds.
TIME_UNIT_S = 1e-6


# ------------------------------------------------------------------------------------------------
# Routing data: pair -> arc fractions of shortest-path routing with equal split
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RoutingFractions:
    """Shortest-path routing on ``X`` as a linear map from pair traffic to arc loads.

    ``P[u * n + v, e]`` = fraction of the bytes of pair (u, v) that cross arc e = (tail[e], head[e])
    when the pair splits equally over all its shortest node paths: ``sigma[u, a] * sigma[b, v] /
    sigma[u, v]`` for arcs (a, b) with ``dist[u, a] + 1 + dist[b, v] = dist[u, v]``.
    """

    n: int
    tail: np.ndarray
    head: np.ndarray
    cap: np.ndarray  # bytes/s of each arc: B * X[tail, head]
    dist: np.ndarray  # (n, n) hop distances, -1 when unreachable
    P: sp.csr_array  # (n*n, A)
    rings: str = "shortest"  # the ring policy (RING_POLICIES): how each AllReduce group is ringed


def shortest_path_fractions(X: np.ndarray, link_bytes_per_s: float, rings: str = "shortest") -> RoutingFractions:
    """Pair -> arc fraction matrix of equal-split shortest-path routing on ``X`` (see
    :class:`RoutingFractions`); one vectorised pass per arc, O(A n^2). ``rings``: the ring policy
    of the AllReduce groups (:data:`RING_POLICIES`)."""
    check_ring_policy(rings)
    X = np.asarray(X)
    n = X.shape[0]
    dist, sigma = hop_distances(X)
    tail, head = np.nonzero(X > 0)
    rows, cols, vals = [], [], []
    reach = dist >= 0
    for e, (a, b) in enumerate(zip(tail, head)):
        da, db = dist[:, a], dist[b, :]
        m = reach[:, a][:, None] & reach[b, :][None, :] & (da[:, None] + 1 + db[None, :] == dist)
        s, t = np.nonzero(m)
        rows.append(s * n + t)
        cols.append(np.full(s.size, e, dtype=np.int64))
        vals.append(sigma[s, a] * sigma[b, t] / sigma[s, t])
    cat = lambda parts, dt: np.concatenate(parts).astype(dt) if parts else np.zeros(0, dt)
    P = sp.csr_array((cat(vals, np.float64), (cat(rows, np.int64), cat(cols, np.int64))), shape=(n * n, len(tail)))
    return RoutingFractions(
        n,
        tail.astype(np.int64),
        head.astype(np.int64),
        link_bytes_per_s * X[tail, head].astype(np.float64),
        dist,
        P,
        rings,
    )


# ------------------------------------------------------------------------------------------------
# Rings: how the placement model rings an AllReduce group on a fixed topology
#
# AllReduce is mutable (docs/guide/evaluator.md): a group's ring order is free and its bytes may be split over
# several rings. For a group listed m_0..m_{k-1} (a coset, in coset order) TotientPerms' rings are
# m_j -> m_{j+p mod k} for the strides p with gcd(p, k) = 1; ring p costs H(p) = sum_j dist(m_j,
# m_{j+p}) hops. The policy "shortest" (the default) splits the group's bytes equally over the
# strides of least H(p) - as every pair splits equally over its shortest paths - so the rings use
# whichever links the topology has toward the members (on TopoOpt's circulants, both directions and
# several jump classes) instead of the one ring the coset's listing happens to give; "coset" is
# that one ring (p = 1), which makes the 128-server paper jobs' placements worse on TopoOpt's
# topology (docs/notes/ring-policy.md).
# Both are fixed by the topology and the members alone, so every model keeps one arc-load pattern
# per (k, s), and the solution names its rings (placement_routing) for the evaluator to score.
# ------------------------------------------------------------------------------------------------
#: Ring policies of :func:`ring_strides`; the first is the default.
RING_POLICIES = ("shortest", "coset")


def check_ring_policy(rings: str) -> None:
    """Refuse, in one line, a ring policy that is not one of :data:`RING_POLICIES`."""
    if rings not in RING_POLICIES:
        raise InputError(f"unknown ring policy {rings!r}; choose one of {', '.join(RING_POLICIES)}")


def ring_strides(rf: RoutingFractions, members: Sequence[int]) -> tuple[int, ...]:
    """The strides p of the rings m_j -> m_{j+p} a group of these members (in this order) is split
    over equally under ``rf.rings`` (comment block above); (1,) below 3 members."""
    k = len(members)
    if rf.rings == "coset" or k < 3:
        return (1,)
    m = np.asarray(members, dtype=np.int64)
    units = np.array([p for p in range(1, k) if math.gcd(p, k) == 1], dtype=np.int64)
    d = rf.dist[m[None, :], m[(np.arange(k)[None, :] + units[:, None]) % k]]
    cost = np.where((d < 0).any(axis=1), np.iinfo(np.int64).max, d.sum(axis=1))
    return tuple(int(p) for p in units[cost == cost.min()])


def ring_pairs(rf: RoutingFractions, members: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(senders, successors, share of the group's per-member bytes) of its rings (:func:`ring_strides`)."""
    m = np.asarray(members, dtype=np.int64)
    strides = ring_strides(rf, m)
    src = np.tile(m, len(strides))
    dst = np.concatenate([np.roll(m, -p) for p in strides])
    return src, dst, np.full(src.size, 1.0 / len(strides))


def placement_routing(rf: RoutingFractions, groups: Sequence[AllReduceGroup]) -> Routing:
    """The rings a placement solution names for its AllReduce groups (:func:`ring_strides`), and no
    paths: the evaluator scores them with its shortest-path fallback, as the model does."""
    rings = []
    for g, group in enumerate(groups):
        m = list(group.members)
        if len(m) < 2:
            continue
        strides = ring_strides(rf, m)
        rings += [(g, [m[(r * p) % len(m)] for r in range(len(m))], 1.0 / len(strides)) for p in strides]
    return Routing(rings=RingSet.from_lists(rings) if rings else RingSet.empty())


def pattern_loads(
    rf: RoutingFractions, pid: np.ndarray, src: np.ndarray, dst: np.ndarray, val: np.ndarray, count: int
) -> tuple[sp.csr_array, np.ndarray, np.ndarray]:
    """Arc loads (bytes) and hop counts of ``count`` traffic patterns given as COO triplets.

    Self-pairs are dropped (as :func:`~topoopt_ilp.core.strategy.strategy_demand` does). Returns the
    (count, A) load matrix, the longest shortest path each pattern uses, and a mask of patterns
    with a pair the topology does not connect.
    """
    n = rf.n
    keep = (src != dst) & (val != 0)
    pid, src, dst, val = pid[keep], src[keep], dst[keep], val[keep]
    T = sp.csr_array((val, (pid, src * n + dst)), shape=(count, n * n))
    T.sum_duplicates()
    loads = (T @ rf.P).tocsr()
    coo = T.tocoo()
    d = rf.dist.ravel()[coo.col]
    hops = np.zeros(count, dtype=np.int64)
    np.maximum.at(hops, coo.row, np.maximum(d, 0))
    bad = np.zeros(count, dtype=bool)
    bad[coo.row[d < 0]] = True
    return loads, hops, bad


def _demand_matrix(rf: RoutingFractions, w: Workload, strategy: Strategy) -> tuple[np.ndarray, np.ndarray]:
    """All bytes i -> j of a strategy (its rings under ``rf.rings`` + model-parallel) and compute."""
    groups, mp, compute = strategy_demand(w, rf.n, strategy)
    D = mp.copy()
    for g in groups:
        src, dst, share = ring_pairs(rf, g.members)
        np.add.at(D, (src, dst), share * g.bytes_per_member())
    np.fill_diagonal(D, 0.0)
    return D, compute


# ------------------------------------------------------------------------------------------------
# The critical path of the ``critical_path`` compute model, as the models use it
#
# P = max(sum_i tau_i, max_b (c_b + sum_{i >= consumer(b)} tau_i)). With e_c = the largest compute_s
# of the blocks whose consumer is c (0 when none), P is the last value of the running path
#     R_0 = 0,  R_{i+1} = max(R_i, e_i) + tau_i,  P = R_L
# (R >= 0, so e_c = 0 never changes it): additive along the layer chain, which is what the
# enumerations' states carry. For the MILPs it is the maximum of the linear "entry" sums
# e_c + sum_{i >= c} tau_i over c = 0 and every c whose e_c exceeds all e_{c'} with c' < c (the
# others are dominated: tau >= 0).
# ------------------------------------------------------------------------------------------------
def path_entries(w: Workload) -> np.ndarray:
    """e_c per layer (comment block above), shape (L,)."""
    e = np.zeros(len(w.layers))
    for b in w.blocks:
        e[int(b.consumer)] = max(e[int(b.consumer)], float(b.compute_s))
    return e


def critical_path(e: np.ndarray, tau: np.ndarray) -> float:
    """P from the entries ``e`` (:func:`path_entries`) and the chosen layers' times ``tau``."""
    r = 0.0
    for ei, ti in zip(e, tau):
        r = max(r, float(ei)) + float(ti)
    return r


def path_floors(e: np.ndarray, least: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lower-bound tables for a chain placed up to layer d with running path R, given each layer's
    least time ``least[i]`` over its allowed options: every completion has
    ``P >= max(R + suffix[d], rest[d])``, ``suffix[d]`` = the least time of layers d.. and ``rest[d]``
    = max over c >= d of e_c + suffix[c] (0 at d = L). Both shape (L + 1,)."""
    L = len(least)
    suffix = np.concatenate([np.cumsum(np.asarray(least, dtype=float)[::-1])[::-1], [0.0]])
    rest = np.zeros(L + 1)
    for c in range(L - 1, -1, -1):
        rest[c] = max(rest[c + 1], float(e[c]) + suffix[c])
    return suffix, rest


def path_rows(
    w: Workload, opt_layer: np.ndarray, lt: np.ndarray, a_cols: np.ndarray, C: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The ``path`` rows (the placement and joint models' math blocks): sum_{o of layers >= c} lt_o a[o]
    - C <= -e_c for c = 0 and each undominated entry layer c, as (rows, columns, values, upper
    bounds); ``lt`` in the model's time unit, the upper bounds in seconds."""
    e = path_entries(w)
    entries = [c for c in range(len(e)) if c == 0 or e[c] > e[:c].max()]
    rows, cols, vals = [], [], []
    for r, c in enumerate(entries):
        o = np.flatnonzero(opt_layer >= c)
        rows += [np.full(o.size, r), [r]]
        cols += [a_cols[o], [C]]
        vals += [lt[o], [-1.0]]
    return (
        np.concatenate(rows).astype(np.int64),
        np.concatenate(cols).astype(np.int64),
        np.concatenate(vals),
        -e[entries],
    )


def objective_of(instance: Instance, compute, comm):
    """The instance's objective from compute and communication times (seconds; scalars or arrays):
    comm_time is the communication alone, iteration_time their maximum under full overlap, else
    their sum (the evaluator's definition, written once for the models)."""
    if instance.objective == "comm_time":
        return comm
    return np.maximum(compute, comm) if instance.workload.overlap == "full" else compute + comm


def set_objective_of(b, instance: Instance, C: int, T: int, H: int, alpha: float) -> int | None:
    """:func:`objective_of` as a model's objective over its columns C (compute), T (bandwidth) and H
    (hops, ``alpha`` per hop; model units): comm_time T + alpha H, under full overlap a column Z >=
    both (returned), else C + T + alpha H."""
    if instance.objective == "comm_time":
        b.set_objective([T, H], [1.0, alpha])
        return None
    if instance.workload.overlap == "full":
        Z = b.add_variables(1, name="Z").index[0]
        b.add_constraints(
            [0, 0, 1, 1, 1], [C, Z, T, H, Z], [1.0, -1.0, 1.0, alpha, -1.0], ub=0.0, count=2, name="overlap"
        )
        b.set_objective([Z], [1.0])
        return int(Z)
    b.set_objective([C, T, H], [1.0, 1.0, alpha])
    return None


def strategy_times(instance: Instance, rf: RoutingFractions, strategy: Strategy) -> dict[str, float]:
    """Compute, bandwidth, latency and iteration time (seconds) of a strategy on ``rf``'s topology,
    by the evaluator's definitions (shortest-path routing, the rings of :func:`placement_routing`)."""
    w = instance.workload
    D, compute = _demand_matrix(rf, w, strategy)
    load = D.ravel() @ rf.P
    busy = load > 0
    t_bw = float((load[busy] / rf.cap[busy]).max()) if busy.any() else 0.0
    pos = D > 0
    hops = int(rf.dist[pos].max()) if pos.any() else 0
    t_lat = hops * instance.cluster.hop_latency_s if busy.any() else 0.0
    c = float(compute.max()) if compute.size else 0.0
    if w.compute_model == "critical_path":
        tau = np.array([w.layer_time(i, int(k)) for i, k in enumerate(strategy.layer_degree)])
        c = max(c, critical_path(path_entries(w), tau))
    it = float(objective_of(instance, c, t_bw + t_lat))
    return {"compute_s": c, "bandwidth_s": t_bw, "latency_s": t_lat, "hops": hops, "iteration_time_s": it}


def layer_options(
    w: Workload, n: int, starts: Callable[[int], np.ndarray] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every option (layer i, degree k, coset start s) whose replica fits in a server's memory, as
    three arrays; ``starts(k)`` gives the starts allowed for degree k (default: all of 0..n/k-1)."""
    cap = float(w.server_memory_bytes)
    ol, ok, os_ = [], [], []
    for i, layer in enumerate(w.layers):
        for k in sorted(layer.configs):
            if layer.replica_memory(k) > cap * (1 + MEMORY_RTOL):
                continue  # can never fit on a server (exact)
            st = np.arange(n // k) if starts is None else np.asarray(starts(k), dtype=np.int64)
            ol.append(np.full(st.size, i)), ok.append(np.full(st.size, k)), os_.append(st)
    return tuple(np.concatenate(v).astype(np.int64) if v else np.zeros(0, np.int64) for v in (ol, ok, os_))
