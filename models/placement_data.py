"""What the placement model and its search know of a fixed topology: routing fractions and times.

Shortest-path routing with equal split as a linear map from pair traffic to arc loads
(:class:`RoutingFractions`), the loads of traffic patterns, and :func:`strategy_times`: a strategy's
compute, bandwidth, latency and iteration time by the evaluator's definitions (shortest-path routing,
default rings). Shared by :mod:`.placement` (the MILP) and :mod:`.placement_search` (its incumbent
and bound).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from topoopt_ilp.graph import hop_distances
from topoopt_ilp.instance import Instance
from topoopt_ilp.strategy import Strategy, strategy_demand
from topoopt_ilp.workload import _MEM_RTOL, Workload

__all__ = ["TIME_UNIT_S", "RoutingFractions", "layer_options", "shortest_path_fractions", "strategy_times"]

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


def shortest_path_fractions(X: np.ndarray, link_bytes_per_s: float) -> RoutingFractions:
    """Pair -> arc fraction matrix of equal-split shortest-path routing on ``X`` (see
    :class:`RoutingFractions`); one vectorised pass per arc, O(A n^2)."""
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
    return RoutingFractions(n, tail.astype(np.int64), head.astype(np.int64),
                            link_bytes_per_s * X[tail, head].astype(np.float64), dist, P)


def _pattern_loads(rf: RoutingFractions, pid: np.ndarray, src: np.ndarray, dst: np.ndarray, val: np.ndarray,
                   count: int) -> tuple[sp.csr_array, np.ndarray, np.ndarray]:
    """Arc loads (bytes) and hop counts of ``count`` traffic patterns given as COO triplets.

    Self-pairs are dropped (as :func:`~topoopt_ilp.strategy.strategy_demand` does). Returns the
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


def _demand_matrix(w: Workload, n: int, strategy: Strategy) -> tuple[np.ndarray, np.ndarray]:
    """All bytes i -> j of a strategy (default rings in coset order + model-parallel) and compute."""
    groups, mp, compute = strategy_demand(w, n, strategy)
    D = mp.copy()
    for g in groups:
        m = np.asarray(g.members)
        np.add.at(D, (m, np.roll(m, -1)), g.bytes_per_member())
    np.fill_diagonal(D, 0.0)
    return D, compute


def strategy_times(instance: Instance, rf: RoutingFractions, strategy: Strategy) -> dict[str, float]:
    """Compute, bandwidth, latency and iteration time (seconds) of a strategy on ``rf``'s topology,
    by the evaluator's definitions (shortest-path routing, default rings)."""
    w, n = instance.workload, instance.n
    D, compute = _demand_matrix(w, n, strategy)
    load = D.ravel() @ rf.P
    busy = load > 0
    t_bw = float((load[busy] / rf.cap[busy]).max()) if busy.any() else 0.0
    pos = D > 0
    hops = int(rf.dist[pos].max()) if pos.any() else 0
    t_lat = hops * instance.cluster.hop_latency_s if busy.any() else 0.0
    c = float(compute.max()) if compute.size else 0.0
    comm = t_bw + t_lat
    if instance.objective == "comm_time":
        it = comm
    else:
        it = max(c, comm) if w.overlap == "full" else c + comm
    return {"compute_s": c, "bandwidth_s": t_bw, "latency_s": t_lat, "hops": hops, "iteration_time_s": it}


def layer_options(w: Workload, n: int, starts: Callable[[int], np.ndarray] | None = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every option (layer i, degree k, coset start s) whose replica fits in a server's memory, as
    three arrays; ``starts(k)`` gives the starts allowed for degree k (default: all of 0..n/k-1)."""
    cap = float(w.server_memory_bytes)
    ol, ok, os_ = [], [], []
    for i, layer in enumerate(w.layers):
        for k in sorted(layer.configs):
            if layer.replica_memory(k) > cap * (1 + _MEM_RTOL):
                continue  # can never fit on a server (exact)
            st = np.arange(n // k) if starts is None else np.asarray(starts(k), dtype=np.int64)
            ol.append(np.full(st.size, i)), ok.append(np.full(st.size, k)), os_.append(st)
    return tuple(np.concatenate(v).astype(np.int64) if v else np.zeros(0, np.int64) for v in (ol, ok, os_))
