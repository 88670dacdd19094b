"""``placement``: the exact placement MILP for a fixed topology (design §3, workload mode).

For a workload instance and a fixed link-count matrix ``X`` (the instance's ``fixed_topology``, or
TopoOpt's heuristic topology for the data-parallel start), choose per layer a data-parallel degree
``k`` and coset start ``s`` and per block a server, minimising the evaluator's iteration time with
shortest-path routing (every pair split equally over all its shortest paths on ``X``) and default
AllReduce rings (coset order). The returned :class:`~topoopt_ilp.solution.Solution` carries empty
routing, so the evaluator's fallback routing reproduces the model's link loads exactly.

The model is exact: at every integer point its link loads, compute times and hop count are those
:func:`topoopt_ilp.strategy.strategy_demand` and :mod:`topoopt_ilp.evaluate` compute for the
strategy it encodes. What keeps it small is the reductions listed above :func:`build_placement`;
all of them are exact except the optional ``max_starts`` restriction.

:func:`solve_placement` runs three stages inside one time limit: an iterated local search
(:func:`improve_strategy`, moves scored incrementally by the evaluator's definitions) for the
incumbent, warm start and pruning bound; the relaxation bound (:func:`relaxation_bound`, valid for
the unrestricted problem, no solver), which alone may prove the gap; then the MILP - unrestricted
when it can be built, else restricted to evenly spaced starts plus the incumbent's (recorded in
``details["restricted"]``). The reported bound is always valid for the unrestricted problem: the
unrestricted model's solver bound or the relaxation bound; a restricted model's own bound stays in
``details``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp

from topoopt_ilp.errors import InputError, UnsupportedError
from topoopt_ilp.graph import hop_distances
from topoopt_ilp.instance import Instance
from topoopt_ilp.solution import Solution, Topology
from topoopt_ilp.solvers import LinearModel, ModelBuilder, SolveResult
from topoopt_ilp.strategy import (Strategy, data_parallel, server_memory, strategy_demand, strategy_to_dict,
                                  validate_strategy)
from topoopt_ilp.workload import _MEM_RTOL, Workload, coset

from .common import ExactOptions, check_backend, run_model, solution_status

__all__ = [
    "MAX_PLACEMENT_NONZEROS",
    "TIME_UNIT_S",
    "RoutingFractions",
    "PlacementModel",
    "shortest_path_fractions",
    "strategy_times",
    "build_placement",
    "solve_placement",
]

#: Refuse to build a model whose estimated constraint non-zeros exceed this. Measured: HiGHS needs
#: tens of seconds just for the root LP of a placement model with a few million non-zeros, so
#: beyond 5 million there is no hope of a useful gap; pass ``max_starts`` or use the heuristic.
MAX_PLACEMENT_NONZEROS = 5_000_000
#: Internal time unit of the model (microseconds): link-latency terms (alpha = 1 us per hop) stay
#: far above solver feasibility tolerances (~1e-7), which they would not in seconds.
TIME_UNIT_S = 1e-6
#: Relative slack when pruning options by bounds: an option is only dropped when its lower bound
#: exceeds the incumbent by more than this, so rounding can never remove an optimal option.
_PRUNE_RTOL = 1e-6
OBJECTIVES = ("iteration_time", "comm_time")
#: Before pruning, the resharding patterns of every distinct pair of layer options are computed;
#: that work may be this many times the model limit (pruning usually removes most of it).
_WORK_FACTOR = 4
_CHUNK_PAIRS = 2000
#: Candidate pairs (before bound pruning) that the builder will score: beyond this the pruning pass
#: alone takes minutes (measured: 1.4 million pairs on 1024 arcs, ~45 s, nothing pruned).
_MAX_PAIR_CANDIDATES = 250_000


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
    cat = lambda parts, dt: np.concatenate(parts).astype(dt) if parts else np.zeros(0, dt)  # noqa: E731
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


# ------------------------------------------------------------------------------------------------
# Options and starting strategies
# ------------------------------------------------------------------------------------------------
def _starts(n: int, k: int, max_starts: int | None) -> np.ndarray:
    """Coset starts allowed for degree k: all of 0..n/k-1, or ``max_starts`` evenly spaced ones."""
    g = n // k
    if max_starts is None or max_starts >= g:
        return np.arange(g)
    return np.unique((np.arange(max_starts) * g) // max_starts)


def _memory_feasible(w: Workload, n: int, st: Strategy) -> bool:
    return bool((server_memory(w, n, st) <= float(w.server_memory_bytes) * (1 + _MEM_RTOL)).all())


def _candidates(w: Workload, n: int) -> list[Strategy]:
    """Cheap strategies whose best one is the incumbent (upper bound) and warm start: TopoOpt's
    data-parallel start, and every layer at one common degree (start 0, the largest allowed degree
    at most k), blocks round robin."""
    out = [data_parallel(w, n)]
    blocks = tuple(b % n for b in range(len(w.blocks)))
    for k in sorted({k for layer in w.layers for k in layer.configs}):
        deg = tuple(max((c for c in layer.configs if c <= k), default=min(layer.configs)) for layer in w.layers)
        out.append(Strategy(deg, (0,) * len(w.layers), blocks))
    return out


# ------------------------------------------------------------------------------------------------
# Local search (incumbent): moves scored incrementally by the evaluator's definitions
#
# A strategy's arc loads are a sum of patterns: each layer's AllReduce (param_i x the ring pattern
# of its (k, s)), each consecutive pair's resharding (act_i x the pattern of the two (k, s)) and
# each consumer's lookups (bytes per server x the pattern of its (k, s)); compute and memory are
# sums over cosets and block servers; hops a maximum over the patterns in use. A move re-places a
# run of consecutive layers on one common (k, s) (so the run reshards nothing inside, which single-
# layer moves cannot reach from a uniform start) or one block on another server; all candidates of
# a move are scored at once as dense (candidates, arcs) arrays. The result is only an upper bound:
# it is re-scored by :func:`strategy_times` and handed to the MILP as incumbent and warm start.
# ------------------------------------------------------------------------------------------------
class _LocalSearch:
    """Incremental scorer and best-improvement descent over strategies on one topology."""

    _CACHE = 96  # resharding pattern tables kept (each (types, arcs) float64)

    def __init__(self, instance: Instance, rf: RoutingFractions) -> None:
        w = instance.workload
        n = instance.n
        self.instance, self.w, self.n, self.rf = instance, w, n, rf
        self.alpha = instance.cluster.hop_latency_s
        self.arc_inv = 1.0 / rf.cap
        self.cap = float(w.server_memory_bytes) * (1 + _MEM_RTOL)
        degs = sorted({int(k) for layer in w.layers for k in layer.configs})
        tk = np.concatenate([np.full(n // k, k) for k in degs]).astype(np.int64)
        ts = np.concatenate([np.arange(n // k) for k in degs]).astype(np.int64)
        self.type_k, self.type_s = tk, ts
        self.type_of = {(int(k), int(s)): t for t, (k, s) in enumerate(zip(tk, ts))}
        NT = len(tk)
        g = n // tk
        self.unit_server = ts[:, None] + (np.arange(n)[None, :] // g[:, None]) * g[:, None]
        pid, src, dst, val = [], [], [], []
        for t in np.flatnonzero(tk >= 2):
            m = np.asarray(coset(n, int(tk[t]), int(ts[t])))
            pid.append(np.full(m.size, t)), src.append(m), dst.append(np.roll(m, -1))
            val.append(np.full(m.size, 2.0 * (tk[t] - 1) / tk[t]))
        cat = lambda p, dt=np.int64: np.concatenate(p).astype(dt) if p else np.zeros(0, dt)  # noqa: E731
        ar, self.ar_hop, _ = _pattern_loads(rf, cat(pid), cat(src), cat(dst), cat(val, np.float64), NT)
        self.ar = ar.toarray()
        L = len(w.layers)
        self.param = np.array([float(layer.param_bytes) for layer in w.layers])
        self.act = np.array([float(layer.activation_bytes) for layer in w.layers])
        # lt[i, t]: layer i's time on type t (inf where k is not a config or the replica cannot fit).
        self.lt = np.full((L, NT), np.inf)
        self.rep_mem = np.zeros((L, NT))
        for i, layer in enumerate(w.layers):
            for k in layer.configs:
                sel = tk == k
                if layer.replica_memory(k) <= self.cap:
                    self.lt[i, sel] = w.layer_time(i, int(k))
                self.rep_mem[i, sel] = layer.replica_memory(k)
        self.blk_lookup = np.array([float(b.lookup_bytes) for b in w.blocks])
        self.blk_comp = np.array([float(b.compute_s) for b in w.blocks])
        self.blk_mem = np.array([float(b.bytes) for b in w.blocks])
        self.blk_cons = np.array([int(b.consumer) for b in w.blocks], dtype=np.int64)
        self.consumers = sorted({int(c) for c, lk in zip(self.blk_cons, self.blk_lookup) if lk > 0})
        self._rs_cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._lk_cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    # ---- patterns ------------------------------------------------------------------------------
    def reshard(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Arc loads (NT, A) and hops (NT,) of resharding one activation byte between type t and
        every type (symmetric in the two: both directions travel)."""
        hit = self._rs_cache.pop(t, None)
        if hit is None:
            n, NT = self.n, len(self.type_k)
            a = np.broadcast_to(self.unit_server[t], (NT, n)).ravel()
            b = self.unit_server.ravel()
            pid = np.repeat(np.arange(NT), n)
            v = np.full(NT * n, 1.0 / n)
            loads, hops, _ = _pattern_loads(self.rf, np.concatenate([pid, pid]), np.concatenate([a, b]),
                                            np.concatenate([b, a]), np.concatenate([v, v]), NT)
            hit = (loads.toarray(), hops)
            if len(self._rs_cache) >= self._CACHE:
                self._rs_cache.pop(next(iter(self._rs_cache)))
        self._rs_cache[t] = hit
        return hit

    def lookup_per_server(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Arc loads (n, A) and hops (n,) of one lookup byte from each server to type t's replicas."""
        hit = self._lk_cache.get(t)
        if hit is None:
            n = self.n
            V = np.repeat(np.arange(n), n)
            d = np.tile(self.unit_server[t], n)
            v = np.full(n * n, 1.0 / n)
            loads, hops, _ = _pattern_loads(self.rf, np.concatenate([V, V]), np.concatenate([V, d]),
                                            np.concatenate([d, V]), np.concatenate([v, v]), n)
            hit = (loads.toarray(), hops)
            self._lk_cache[t] = hit
        return hit

    def lookup_all_types(self, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Arc loads (NT, A) and hops (NT,) of the lookups ``lam`` (bytes per server) to every type."""
        n, NT = self.n, len(self.type_k)
        V = np.flatnonzero(lam > 0)
        pid = np.repeat(np.arange(NT), V.size * n)
        src = np.tile(np.repeat(V, n), NT)
        dst = np.repeat(self.unit_server, V.size, axis=0).ravel()
        val = np.tile(np.repeat(lam[V] / n, n), NT)
        loads, hops, _ = _pattern_loads(self.rf, np.concatenate([pid, pid]), np.concatenate([src, dst]),
                                        np.concatenate([dst, src]), np.concatenate([val, val]), NT)
        return loads.toarray(), hops

    # ---- state ---------------------------------------------------------------------------------
    def load_state(self, st: Strategy) -> None:
        self.t = np.array([self.type_of[(int(k), int(s))] for k, s in zip(st.layer_degree, st.layer_start)])
        self.bs = np.array(st.block_server, dtype=np.int64)
        self.refresh()

    def lam(self, c: int, bs: np.ndarray | None = None) -> np.ndarray:
        bs = self.bs if bs is None else bs
        sel = (self.blk_cons == c) & (self.blk_lookup > 0)
        return np.bincount(bs[sel], weights=self.blk_lookup[sel], minlength=self.n)

    def refresh(self) -> None:
        """Recompute every per-pattern contribution of the current state from scratch."""
        n, L, A = self.n, len(self.w.layers), len(self.rf.tail)
        t = self.t
        self.ar_load = self.param[:, None] * self.ar[t]
        self.ar_h = np.where(self.param > 0, self.ar_hop[t], 0)
        self.rs_load = np.zeros((max(L - 1, 0), A))
        self.rs_h = np.zeros(max(L - 1, 0), dtype=np.int64)
        for i in range(L - 1):
            if self.act[i] > 0:
                ld, hp = self.reshard(int(t[i]))
                self.rs_load[i] = self.act[i] * ld[t[i + 1]]
                self.rs_h[i] = hp[t[i + 1]]
        self.lk_load = {}
        self.lk_h = {}
        for c in self.consumers:
            ld, hp = self.lookup_per_server(int(t[c]))
            lam = self.lam(c)
            self.lk_load[c] = lam @ ld
            self.lk_h[c] = int(hp[lam > 0].max(initial=0))
        comp = np.zeros(n)
        mem = np.zeros(n)
        for i in range(L):
            np.add.at(comp, self.unit_server[t[i]][:: n // self.type_k[t[i]]], self.lt[i, t[i]])
            np.add.at(mem, self.unit_server[t[i]][:: n // self.type_k[t[i]]], self.rep_mem[i, t[i]])
        np.add.at(comp, self.bs, self.blk_comp)
        np.add.at(mem, self.bs, self.blk_mem)
        self.comp, self.mem = comp, mem

    def total_load(self) -> np.ndarray:
        return self.ar_load.sum(axis=0) + self.rs_load.sum(axis=0) + sum(self.lk_load.values(), np.zeros(len(self.rf.tail)))

    def hops(self) -> int:
        return int(max(self.ar_h.max(initial=0), self.rs_h.max(initial=0), max(self.lk_h.values(), default=0)))

    def combine(self, comp, bw, hops):
        comm = bw + self.alpha * hops
        if self.instance.objective == "comm_time":
            return comm
        return np.maximum(comp, comm) if self.w.overlap == "full" else comp + comm

    def score(self) -> tuple[float, float]:
        tl = self.total_load() * self.arc_inv
        busy = tl.max(initial=0.0) > 0
        it = float(self.combine(self.comp.max(initial=0.0), tl.max(initial=0.0), self.hops() if busy else 0))
        return it, float((tl ** 2).sum() + (self.comp ** 2).sum())

    def strategy(self) -> Strategy:
        return Strategy(tuple(int(k) for k in self.type_k[self.t]), tuple(int(s) for s in self.type_s[self.t]),
                        tuple(int(v) for v in self.bs))

    # ---- moves ---------------------------------------------------------------------------------
    def _base_hops(self, layers: np.ndarray, pairs: np.ndarray, consumers: list[int]) -> int:
        ar = np.delete(self.ar_h, layers)
        rs = np.delete(self.rs_h, pairs)
        lk = [h for c, h in self.lk_h.items() if c not in consumers]
        return int(max(ar.max(initial=0), rs.max(initial=0), max(lk, default=0)))

    def _lookup_types(self, c: int) -> tuple[np.ndarray, np.ndarray]:
        lam = self.lam(c)
        key = (c, lam.tobytes())
        if getattr(self, "_lka_key", None) != key:
            self._lka_key, self._lka = key, self.lookup_all_types(lam)
        return self._lka

    def segment_move(self, i: int, j: int) -> tuple[np.ndarray, np.ndarray]:
        """Iteration time and tie-break score (NT,) of putting layers i..j all on each type
        (inf where not allowed or memory does not fit)."""
        n, L = self.n, len(self.w.layers)
        seg = np.arange(i, j + 1)
        pairs = np.arange(max(i - 1, 0), min(j + 1, L - 1))
        cons = [c for c in self.consumers if i <= c <= j]
        t = self.t
        base = self.total_load() - self.ar_load[seg].sum(axis=0) - self.rs_load[pairs].sum(axis=0)
        for c in cons:
            base = base - self.lk_load[c]
        comp, mem = self.comp.copy(), self.mem.copy()
        for ii in seg:
            srv = self.unit_server[t[ii]][:: n // self.type_k[t[ii]]]
            comp[srv] -= self.lt[ii, t[ii]]
            mem[srv] -= self.rep_mem[ii, t[ii]]
        lt_seg = self.lt[seg].sum(axis=0)
        mem_seg = self.rep_mem[seg].sum(axis=0)
        H = np.full(len(self.type_k), self._base_hops(seg, pairs, cons), dtype=np.int64)
        p_seg = self.param[seg].sum()
        loads = base[None, :] + p_seg * self.ar
        if p_seg > 0:
            H = np.maximum(H, self.ar_hop)
        if i > 0 and self.act[i - 1] > 0:
            ld, hp = self.reshard(int(t[i - 1]))
            loads += self.act[i - 1] * ld
            H = np.maximum(H, hp)
        if j < L - 1 and self.act[j] > 0:
            ld, hp = self.reshard(int(t[j + 1]))
            loads += self.act[j] * ld
            H = np.maximum(H, hp)
        for c in cons:
            ld, hp = self._lookup_types(c)
            loads += ld
            H = np.maximum(H, hp)
        tl = loads * self.arc_inv
        bw = tl.max(axis=1)
        bad = ~np.isfinite(lt_seg) | ((mem[self.unit_server] + mem_seg[:, None]).max(axis=1) > self.cap)
        lt_seg = np.where(bad, 0.0, lt_seg)
        cs = comp[self.unit_server]
        C = np.maximum(comp.max(), cs.max(axis=1) + lt_seg)
        g = n // self.type_k
        sec = (tl ** 2).sum(axis=1) + (comp ** 2).sum() + (2 * lt_seg * cs.sum(axis=1) / g + self.type_k * lt_seg ** 2)
        it = self.combine(C, bw, H)
        it[bad], sec[bad] = np.inf, np.inf
        return it, sec

    def block_move(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """Iteration time and tie-break score (n,) of moving block j to each server."""
        n = self.n
        v = int(self.bs[j])
        load = self.total_load()
        c = int(self.blk_cons[j])
        lk = self.blk_lookup[j]
        if lk > 0 and c in self.lk_h:
            LK, hv = self.lookup_per_server(int(self.t[c]))
            loads = load[None, :] + lk * (LK - LK[v])
            lam = self.lam(c)
            lam[v] -= lk
            hc = int(hv[lam > 1e-9 * lk].max(initial=0))
            H = np.maximum(self._base_hops(np.zeros(0, np.int64), np.zeros(0, np.int64), [c]), np.maximum(hc, hv))
        else:
            loads = np.broadcast_to(load, (n, load.size))
            H = np.full(n, self.hops())
        comp = self.comp.copy()
        comp[v] -= self.blk_comp[j]
        C = np.maximum(comp.max(), comp + self.blk_comp[j])
        tl = loads * self.arc_inv
        it = self.combine(C, tl.max(axis=1), H)
        sec = (tl ** 2).sum(axis=1) + (comp ** 2).sum() + 2 * comp * self.blk_comp[j] + self.blk_comp[j] ** 2
        mem = self.mem.copy()
        mem[v] -= self.blk_mem[j]
        bad = mem + self.blk_mem[j] > self.cap
        it[bad], sec[bad] = np.inf, np.inf
        return it, sec

    def descend(self, deadline: float, rng: np.random.Generator) -> tuple[float, float]:
        """Best-improvement descent over segment and block moves until no move improves (or the
        deadline); returns the final (iteration time, tie-break)."""
        L = len(self.w.layers)
        cur = self.score()
        segments = [(i, j) for i in range(L) for j in range(i, L)]
        classes = _block_classes(self.w)

        def better(a: tuple[float, float], b: tuple[float, float]) -> bool:
            return a[0] < b[0] * (1 - 1e-9) or (a[0] <= b[0] * (1 + 1e-12) and a[1] < b[1] * (1 - 1e-9))

        improved = True
        while improved and time.perf_counter() < deadline:
            improved = False
            for (i, j) in (segments[q] for q in rng.permutation(len(segments))):
                if time.perf_counter() > deadline:
                    break
                it, sec = self.segment_move(i, j)
                tb = int(np.lexsort((sec, it))[0])
                if better((float(it[tb]), float(sec[tb])), cur):
                    self.t[i:j + 1] = tb
                    self.refresh()
                    cur = self.score()
                    improved = True
            for members in classes:
                for v in np.unique(self.bs[members]):
                    j = int(next(m for m in members if self.bs[m] == v))
                    it, sec = self.block_move(j)
                    vb = int(np.lexsort((sec, it))[0])
                    if better((float(it[vb]), float(sec[vb])), cur):
                        self.bs[j] = vb
                        self.refresh()
                        cur = self.score()
                        improved = True
        return cur


def improve_strategy(instance: Instance, rf: RoutingFractions, start: Strategy | list[Strategy], time_limit_s: float,
                     seed: int = 0, max_stall: int = 30, kick_top: int = 8) -> Strategy:
    """Iterated local search for at most ``time_limit_s`` seconds. ``start`` is one memory-feasible
    strategy or several: each is first descended (:meth:`_LocalSearch.descend`, within half the
    budget shared equally; descents from different starts end in very different local optima), then
    from the best, repeatedly: kick a random run of 1-3 layers onto one of the ``kick_top`` best (k, s)
    for it and descend again, keeping the best. Stops early after ``max_stall`` kicks without
    improvement (small instances converge in well under a second). Never worse than any start."""
    starts = [start] if isinstance(start, Strategy) else list(start)
    ls = _LocalSearch(instance, rf)
    t_begin = time.perf_counter()
    deadline = t_begin + time_limit_s
    rng = np.random.default_rng(seed)
    L = len(instance.workload.layers)
    best = None
    for q, st in enumerate(starts):
        ls.load_state(st)
        share = t_begin + 0.5 * time_limit_s * (q + 1) / len(starts)
        cur = ls.descend(min(share, deadline), rng)
        if best is None or cur[0] < best[0] * (1 - 1e-9):
            best, best_t, best_bs = cur, ls.t.copy(), ls.bs.copy()
    ls.t, ls.bs = best_t.copy(), best_bs.copy()
    ls.refresh()
    stall = 0
    while time.perf_counter() < deadline and stall < max_stall:
        i = int(rng.integers(L))
        j = min(L - 1, i + int(rng.integers(0, 3)))
        it, _ = ls.segment_move(i, j)
        it[ls.t[i]] = np.inf if i == j else it[ls.t[i]]  # moving a single layer onto itself is no kick
        allowed = np.flatnonzero(np.isfinite(it))
        stall += 1
        if allowed.size == 0:
            continue
        if kick_top:  # a random one of the best few placements of the run: disturbs without wrecking
            allowed = allowed[np.argsort(it[allowed])][:kick_top]
        ls.t[i:j + 1] = int(rng.choice(allowed))
        ls.refresh()
        cur = ls.descend(deadline, rng)
        if cur[0] < best[0] * (1 - 1e-9):
            best, best_t, best_bs, stall = cur, ls.t.copy(), ls.bs.copy(), 0
        else:
            ls.t, ls.bs = best_t.copy(), best_bs.copy()
            ls.refresh()
    ls.t, ls.bs = best_t, best_bs
    return ls.strategy()


# ------------------------------------------------------------------------------------------------
# A lower bound valid for the unrestricted problem (the "volume" relaxation)
#
# For any strategy S let tau(S) = max_i lt_i(S), the time of its slowest layer. Then
#   C >= max(tau, Cfloor)          Cfloor = max(least average per-server compute, largest block compute)
#   Tbw = max_e load_e / cap_e >= sum_e load_e / sum_e cap_e = V(S) / capsum
#   H >= 1 whenever V(S) > 0
# where V(S) = sum of bytes x hop distance over all traffic (shortest-path routing puts every byte on
# dist arcs): sum_i param_i ARvol(t_i) + sum_i act_i RSvol(t_i, t_i+1) + lookup volume, each lookup
# block counted at its best server for its consumer's type (memory ignored). V is a sum over a chain
# of layers, so min V over strategies whose layers all have lt <= tau is a shortest path over
# (layer, type) (dynamic programming); the bound is the minimum over the distinct tau of
# combine(max(tau, Cfloor), Vmin(tau) / capsum + alpha [Vmin(tau) > 0]). Exact relaxation, no solver.
# ------------------------------------------------------------------------------------------------
def relaxation_bound(instance: Instance, rf: RoutingFractions, ls: _LocalSearch | None = None) -> float:
    """Seconds; a lower bound on the iteration time (or comm time) of every strategy on ``rf``'s
    topology (math in the comment block above)."""
    ls = ls or _LocalSearch(instance, rf)
    w, n = instance.workload, instance.n
    us, dist = ls.unit_server, np.maximum(rf.dist, 0)
    capsum = float(rf.cap.sum())
    if capsum <= 0:
        return 0.0
    ar_vol = ls.ar.sum(axis=1)
    # RSvol[t1, t2] = 2/n sum_u dist(us[t1][u], us[t2][u]) per activation byte (both directions).
    rs_vol = np.stack([dist[us[t][None, :], us].sum(axis=1) for t in range(len(ls.type_k))]) * (1.0 / n)
    rs_vol = rs_vol + rs_vol.T  # dist is symmetric on undirected X; for directed X each direction counts
    # Best server per lookup byte for each consumer type: 1/n sum_u (dist(v, u-server) + dist(u-server, v)).
    lk_vol = ((dist[:, us] + np.transpose(dist[us, :], (2, 0, 1))).sum(axis=-1) / n).min(axis=0)  # (NT,)
    lam = np.zeros(len(w.layers))
    for b in w.blocks:
        lam[int(b.consumer)] += float(b.lookup_bytes)
    L = len(w.layers)
    min_total = sum(min(k * w.layer_time(i, k) for k in layer.configs) for i, layer in enumerate(w.layers))
    c_floor = max([(min_total + sum(float(b.compute_s) for b in w.blocks)) / n] + [float(b.compute_s) for b in w.blocks])
    alpha = instance.cluster.hop_latency_s
    objective, overlap = instance.objective, w.overlap
    taus = np.unique(ls.lt[np.isfinite(ls.lt)]) if objective != "comm_time" else np.array([np.inf])
    best = np.inf
    for tau in taus:
        ok = ls.lt <= tau * (1 + 1e-12) if np.isfinite(tau) else np.isfinite(ls.lt)
        V = np.where(ok[0], ls.param[0] * ar_vol + lam[0] * lk_vol, np.inf)
        for i in range(1, L):
            V = (V[:, None] + ls.act[i - 1] * rs_vol).min(axis=0)
            V = np.where(ok[i], V + ls.param[i] * ar_vol + lam[i] * lk_vol, np.inf)
        vmin = float(V.min())
        if not np.isfinite(vmin):
            continue
        comm = vmin / capsum + (alpha if vmin > 0 else 0.0)
        if objective == "comm_time":
            lb = comm
        else:
            comp = max(float(tau), c_floor)
            lb = max(comp, comm) if overlap == "full" else comp + comm
        best = min(best, lb)
    return float(best) if np.isfinite(best) else 0.0

# ------------------------------------------------------------------------------------------------
# The model
#
# Data
#   n servers, arcs e of X (X[e] > 0) with capacity cap_e = B X[e] bytes/s, hop latency alpha.
#   P[(u,v), e]  fraction of pair (u,v)'s bytes on arc e (equal split over all shortest paths).
#   Options o = (i, k, s) of layer i: k in configs_i, s a coset start, replica memory fits.
#     lt_o = layer_time(i, k); mem_o = memory_bytes_i + activation_bytes_i / k; cov_o[v] = [v in coset(k, s)].
#     AR_o[e] = arc load of its ring (coset order, 2(k-1)/k * param_bytes_i per member), hop_o its
#     longest shortest path (0 without AllReduce).
#   Pairs p = (o, o') of consecutive layers i, i+1 with activation_bytes_i > 0:
#     R_p[e] = arc load of resharding o -> o' (activation_bytes_i / n per batch unit, both ways),
#     hop_p its longest path (R_p = 0 when o and o' have the same (k, s)).
#   Blocks j: bytes_j, lookup_j, compute_j, consumer c(j). For a consumer layer c with lookups:
#     LK_{v,o}[e] = arc load of one lookup byte from server v to option o's replicas (1/k each,
#     both ways), hop_{v,o}; Lam_c = sum of lookup_j over its blocks.
# Variables
#   a[o]       binary   layer i uses option o
#   b[j, v]    binary   block j on server v
#   w[p]       [0, 1]   product a[o] a[o'] of a pair (transportation linearisation)
#   q[c, v, o] [0, 1]   (lookup bytes of consumer c's blocks on v) / Lam_c, if c uses option o
#   h[c, v]    [0, 1]   some block of consumer c is on v (only for the hop term)
#   C, Tbw, H >= 0      max compute, max arc busy time, longest used path; (T >= 0 if overlap full)
# Constraints
#   choice       sum_{o of i} a[o] = 1;   sum_v b[j, v] = 1
#   transport    sum_{o'} w[o, o'] = a[o];  sum_o w[o, o'] = a[o']    (exact for binary a: the
#                only feasible w is the product, and it is linear in both marginals)
#   lookups      sum_o q[c, v, o] = sum_{j of c} lookup_j / Lam_c b[j, v];  q[c, v, o] <= a[o]
#   compute      sum_o lt_o cov_o[v] a[o] + sum_j compute_j b[j, v] <= C         for every server v
#                sum_{o of i} lt_o a[o] <= C   per layer (valid; tightens the LP)
#                sum_p comp_p w[p] <= C        per layer pair (comp_p: both layers' time if their cosets meet)
#   pattern bw   sum_o maxarc(AR_o) a[o] <= Tbw per layer; sum_p maxarc(AR_o + AR_o' + act R_p) w[p] <= Tbw
#                per layer pair; sum_o maxarc(Lam_c LK_{v,o}) q[c, v, o] <= Tbw per (c, v)   (valid: each
#                left side is at an integer point the busiest arc of part of the traffic)
#   memory       sum_o mem_o cov_o[v] a[o] + sum_j bytes_j b[j, v] <= capacity  for every server v
#   load         (sum_o AR_o[e] a[o] + sum_p act_i R_p[e] w[p] + sum Lam_c LK_{v,o}[e] q[c,v,o]) / cap_e <= Tbw
#   hops         H >= sum_o hop_o a[o] (per layer);  H >= sum_p hop_p w[p] (per layer pair);
#                H >= sum_o hop_{v,o} a[o] - M_v (1 - h[c, v]);  h[c, v] >= b[j, v]
#   symmetry     identical blocks j < j' (same bytes, lookups, compute, consumer):
#                sum_v v b[j, v] <= sum_v v b[j', v]   (they are interchangeable)
# Objective
#   minimize C + Tbw + alpha H  (overlap none);  T with T >= C, T >= Tbw + alpha H (overlap full);
#   Tbw + alpha H (objective comm_time). Times in microseconds (TIME_UNIT_S).
#
# Reductions (all exact unless marked):
#   * options whose replica memory exceeds a server's capacity are dropped;
#   * bound pruning: with U the best iteration time among cheap candidate strategies, an option o
#     is dropped when max(lt_o, Cavg) [+] (max_e AR_o[e]/cap_e + alpha hop_o) > U (Cavg = the least
#     average per-server compute, [+] = the objective's combination), and a pair p when the same
#     bound with both layers' compute (summed when their cosets meet) and AR_o + AR_o' + R_p
#     exceeds U: every strategy using them is worse than a known one;
#   * w only for consecutive layers with activation bytes, q only for consumers with lookups;
#     patterns (AR, resharding, lookup) are computed once per (k, s) combination and scaled;
#   * symmetry rows between identical blocks;
#   * NOT exact: ``max_starts`` keeps only that many evenly spaced starts per degree.
# ------------------------------------------------------------------------------------------------
@dataclass
class PlacementModel:
    """A built placement model and what decoding and warm-starting it needs."""

    model: LinearModel
    n: int
    opt_layer: np.ndarray
    opt_k: np.ndarray
    opt_s: np.ndarray
    a_cols: np.ndarray
    b_cols: np.ndarray  # (nb, n)
    w_o1: np.ndarray
    w_o2: np.ndarray
    w_cols: np.ndarray
    q_c: np.ndarray
    q_v: np.ndarray
    q_o: np.ndarray
    q_cols: np.ndarray
    lam: dict[int, float]
    h_cols: dict[int, np.ndarray]
    C: int
    Tbw: int
    H: int
    T: int
    restricted: bool
    upper_bound_s: float | None
    incumbent: Strategy | None
    stats: dict = field(default_factory=dict)


def _estimate_nonzeros(rf: RoutingFractions, k1: np.ndarray, k2: np.ndarray) -> int:
    """Upper estimate of the arc-load non-zeros of resharding patterns between degrees k1[p] and
    k2[p]: about 2 max(k, k') server pairs times the mean number of arcs a pair's paths use, at most
    every arc."""
    arcs_per_pair = rf.P.nnz / max(1, rf.n * (rf.n - 1))
    return int(np.minimum(np.maximum(k1, k2) * 2 * arcs_per_pair, len(rf.tail)).sum())


def build_placement(instance: Instance, X: np.ndarray, *, max_starts: int | None = None,
                    prune: bool = True, rf: RoutingFractions | None = None,
                    start: Strategy | None = None) -> PlacementModel:
    """Build the placement MILP (math in the comment block above) for ``instance`` on topology ``X``.

    Parameters
    ----------
    instance : Instance
        A workload instance.
    X : numpy.ndarray
        Link-count matrix of the fixed topology.
    max_starts : int, optional
        Keep only this many evenly spaced coset starts per degree (a heuristic restriction; the
        model is then exact only for the restricted problem). Default: all starts.
    prune : bool
        Apply the exact bound pruning (needs a memory-feasible candidate strategy).
    rf : RoutingFractions, optional
        Precomputed routing fractions of ``X``.
    start : Strategy, optional
        A known strategy: a candidate for the incumbent that bounds the pruning and warm-starts
        the solve (e.g. the result of a restricted solve).

    Raises
    ------
    InputError
        No workload, or an objective the model does not express.
    UnsupportedError
        Disconnected topology, or an estimated model size above :data:`MAX_PLACEMENT_NONZEROS`.
    """
    started = time.perf_counter()
    w: Workload | None = instance.workload
    if w is None:
        raise InputError("the placement model needs a workload instance (layers and blocks); this instance has a fixed demand")
    if instance.objective not in OBJECTIVES:
        raise InputError(f"the placement model minimises iteration_time or comm_time, not {instance.objective!r}")
    n = instance.n
    X = np.asarray(X)
    if X.shape != (n, n):
        raise InputError(f"the topology has {X.shape[0]} servers, the instance {n}")
    rf = rf or shortest_path_fractions(X, instance.cluster.link_bytes_per_s)
    if (rf.dist < 0).any():
        raise UnsupportedError("the topology is disconnected; the placement model needs every pair reachable")
    A = len(rf.tail)
    alpha_s = instance.cluster.hop_latency_s
    alpha = alpha_s / TIME_UNIT_S
    cap = float(w.server_memory_bytes)
    L, nb = len(w.layers), len(w.blocks)
    overlap = w.overlap
    objective = instance.objective
    us = 1.0 / TIME_UNIT_S

    def combine(comp: np.ndarray, comm: np.ndarray) -> np.ndarray:
        if objective == "comm_time":
            return comm
        return np.maximum(comp, comm) if overlap == "full" else comp + comm

    # ---- options -------------------------------------------------------------------------------
    ol, ok, os_ = [], [], []
    for i, layer in enumerate(w.layers):
        for k in sorted(layer.configs):
            if layer.replica_memory(k) > cap * (1 + _MEM_RTOL):
                continue  # can never fit on a server (exact)
            st = _starts(n, k, max_starts)
            if max_starts is not None and start is not None:
                # the start's own (k, s) stay available, so the restricted model can only improve on it
                st = np.union1d(st, [s for kk, s in zip(start.layer_degree, start.layer_start) if kk == k])
            ol.append(np.full(st.size, i))
            ok.append(np.full(st.size, k))
            os_.append(st)
    opt_layer, opt_k, opt_s = (np.concatenate(v).astype(np.int64) for v in (ol, ok, os_))
    lt = np.array([w.layer_time(int(i), int(k)) for i, k in zip(opt_layer, opt_k)])
    mem = np.array([w.layers[int(i)].replica_memory(int(k)) for i, k in zip(opt_layer, opt_k)])

    # Distinct (k, s) combinations: patterns are computed once per type and scaled per layer.
    type_key = opt_k * n + opt_s
    types, opt_type = np.unique(type_key, return_inverse=True)
    type_k, type_s = types // n, types % n
    NT = len(types)
    g_of = n // type_k
    units = np.arange(n)
    unit_server = type_s[:, None] + (units[None, :] // g_of[:, None]) * g_of[:, None]  # (NT, n)

    # AllReduce pattern per type (one byte of parameters): member r -> r+1, 2(k-1)/k bytes.
    pid, src, dst, val = [], [], [], []
    for t in range(NT):
        k = int(type_k[t])
        if k < 2:
            continue
        m = np.asarray(coset(n, k, int(type_s[t])))
        pid.append(np.full(k, t)), src.append(m), dst.append(np.roll(m, -1)), val.append(np.full(k, 2.0 * (k - 1) / k))
    cat = lambda parts, dt=np.int64: np.concatenate(parts).astype(dt) if parts else np.zeros(0, dt)  # noqa: E731
    ar_type, ar_hop_type, _ = _pattern_loads(rf, cat(pid), cat(src), cat(dst), cat(val, np.float64), NT)
    param = np.array([float(w.layers[int(i)].param_bytes) for i in opt_layer])
    has_ar = (opt_k >= 2) & (param > 0)
    ar_scale = np.where(has_ar, param, 0.0)
    ar_load = sp.csr_array(sp.diags(ar_scale) @ ar_type[opt_type])  # (NO, A) bytes
    ar_hop = np.where(has_ar, ar_hop_type[opt_type], 0)

    # ---- incumbent and bound pruning (exact) ---------------------------------------------------
    candidates = _candidates(w, n)
    if start is not None:
        if validate_strategy(w, n, start):
            raise InputError("the start strategy is invalid: " + "; ".join(validate_strategy(w, n, start)[:3]))
        candidates.insert(0, start)  # its own (k, s) are options even when the starts are restricted
    candidates = [st for st in candidates if _memory_feasible(w, n, st)]
    incumbent, ub = None, None
    if candidates:
        scored = [(strategy_times(instance, rf, st)["iteration_time_s"], j) for j, st in enumerate(candidates)]
        ub, j = min(scored)
        incumbent = candidates[j]
    min_total = sum(min(k * w.layer_time(i, k) for k in layer.configs) for i, layer in enumerate(w.layers))
    c_avg = (min_total + sum(float(b.compute_s) for b in w.blocks)) / n
    arc_inv = 1.0 / rf.cap
    ar_time = (sp.csr_array(ar_load @ sp.diags(arc_inv))).max(axis=1).toarray().ravel() if A else np.zeros(len(opt_layer))
    comm_lb = ar_time + alpha_s * ar_hop
    opt_lb = combine(np.maximum(lt, c_avg), comm_lb)
    keep = np.ones(len(opt_layer), dtype=bool)
    if prune and ub is not None:
        keep = opt_lb <= ub * (1 + _PRUNE_RTOL)
        if incumbent is not None:  # never drop the incumbent's own options (rounding safety)
            for i in range(L):
                keep[(opt_layer == i) & (opt_k == incumbent.layer_degree[i]) & (opt_s == incumbent.layer_start[i])] = True
    # Renumber the kept options.
    old = np.flatnonzero(keep)
    opt_layer, opt_k, opt_s, opt_type = opt_layer[old], opt_k[old], opt_s[old], opt_type[old]
    lt, mem, ar_load, ar_hop, ar_time = lt[old], mem[old], ar_load[old], ar_hop[old], ar_time[old]
    NO = len(old)
    kept = [np.flatnonzero(opt_layer == i) for i in range(L)]
    if any(len(k_) == 0 for k_ in kept):
        bad = next(i for i in range(L) if len(kept[i]) == 0)
        raise InputError(f"layer {bad} ({w.layers[bad].name}) has no config whose replica fits in server memory")

    pair_layers = [i for i in range(L - 1) if float(w.layers[i].activation_bytes) > 0]
    # Resharding patterns depend only on the (k, s) types of the two layers: compute each distinct
    # type pair once (for one activation byte) and scale per layer pair. Guard the work first.
    pairs_of = {i: (np.repeat(kept[i], len(kept[i + 1])), np.tile(kept[i + 1], len(kept[i]))) for i in pair_layers}
    n_cand = sum(len(o1) for o1, _ in pairs_of.values())
    if n_cand > _MAX_PAIR_CANDIDATES:
        raise UnsupportedError(
            f"the placement model would have {n_cand:,} candidate resharding pairs of layer options before pruning "
            f"({NO} layer options), more than {_MAX_PAIR_CANDIDATES:,}: restrict the starts (max_starts), offer fewer "
            f"configs per layer, or use --method heuristic")
    tp_all = np.unique(np.concatenate([opt_type[o1] * NT + opt_type[o2] for o1, o2 in pairs_of.values()])) \
        if pair_layers else np.zeros(0, np.int64)
    tp1, tp2 = tp_all // NT, tp_all % NT
    work = _estimate_nonzeros(rf, type_k[tp1], type_k[tp2])
    if work > _WORK_FACTOR * MAX_PLACEMENT_NONZEROS:
        raise UnsupportedError(
            f"the placement model would need about {work:,} resharding load coefficients ({len(tp_all):,} pairs of "
            f"layer options on {A} arcs), more than {_WORK_FACTOR * MAX_PLACEMENT_NONZEROS:,}: restrict the starts "
            f"(max_starts), offer fewer configs per layer, or use --method heuristic")
    tp_loads_parts, tp_hops_parts = [], []
    for lo in range(0, len(tp_all), _CHUNK_PAIRS):
        a1, a2 = tp1[lo:lo + _CHUNK_PAIRS], tp2[lo:lo + _CHUNK_PAIRS]
        P_ = len(a1)
        pid = np.repeat(np.arange(P_), n)
        s_, d_ = unit_server[a1].ravel(), unit_server[a2].ravel()
        v_ = np.full(P_ * n, 1.0 / n)
        loads, hops, _ = _pattern_loads(rf, np.concatenate([pid, pid]), np.concatenate([s_, d_]),
                                        np.concatenate([d_, s_]), np.concatenate([v_, v_]), P_)
        tp_loads_parts.append(loads), tp_hops_parts.append(hops)
    tp_loads = sp.vstack(tp_loads_parts, format="csr") if tp_loads_parts else sp.csr_array((0, A))
    tp_hops = cat(tp_hops_parts)

    # ---- resharding pairs per layer pair, pruned by bound --------------------------------------
    w_o1, w_o2, w_load_parts, w_hop, w_bw, w_comp = [], [], [], [], [], []
    for i in pair_layers:
        o1, o2 = pairs_of[i]
        pos = np.searchsorted(tp_all, opt_type[o1] * NT + opt_type[o2])
        act = float(w.layers[i].activation_bytes)
        r_load = sp.csr_array(tp_loads[pos] * act)
        r_hop = tp_hops[pos]
        # The pair's own busiest arc (its two AllReduces + resharding) and the compute of a server
        # hosting both layers when their cosets meet: bounds for pruning and for the pair rows.
        tot = sp.csr_array((r_load + ar_load[o1] + ar_load[o2]) @ sp.diags(arc_inv))
        bw = tot.max(axis=1).toarray().ravel()
        k1, s1, k2, s2 = opt_k[o1], opt_s[o1], opt_k[o2], opt_s[o2]
        meet = (s1 - s2) % np.gcd(n // k1, n // k2) == 0
        comp = np.where(meet, lt[o1] + lt[o2], np.maximum(lt[o1], lt[o2]))
        if prune and ub is not None:
            comm = bw + alpha_s * np.maximum.reduce([r_hop, ar_hop[o1], ar_hop[o2]])
            lb = combine(np.maximum(comp, c_avg), comm)
            sel = lb <= ub * (1 + _PRUNE_RTOL)
            if incumbent is not None:
                sel |= ((k1 == incumbent.layer_degree[i]) & (s1 == incumbent.layer_start[i])
                        & (k2 == incumbent.layer_degree[i + 1]) & (s2 == incumbent.layer_start[i + 1]))
        else:
            sel = np.ones(len(o1), dtype=bool)
        w_o1.append(o1[sel]), w_o2.append(o2[sel]), w_load_parts.append(r_load[sel]), w_hop.append((i, r_hop[sel]))
        w_bw.append(bw[sel]), w_comp.append(comp[sel])
    w_o1_a, w_o2_a = cat(w_o1), cat(w_o2)
    NW = len(w_o1_a)
    w_load = sp.vstack(w_load_parts, format="csr") if w_load_parts else sp.csr_array((0, A))

    # ---- lookups: per consumer layer, per server v and consumer option o -----------------------
    consumers = sorted({int(b.consumer) for b in w.blocks if float(b.lookup_bytes) > 0})
    lam = {c: sum(float(b.lookup_bytes) for b in w.blocks if int(b.consumer) == c) for c in consumers}
    q_c, q_v, q_o, q_load_parts, q_hop = [], [], [], [], []
    for c in consumers:
        oc = kept[c]
        tc = opt_type[oc]
        V = np.repeat(np.arange(n), len(oc))
        O = np.tile(oc, n)
        T_ = np.tile(tc, n)
        P_ = len(V)
        pid = np.repeat(np.arange(P_), n)
        s_ = np.repeat(V, n)
        d_ = unit_server[T_].ravel()
        v_ = np.full(P_ * n, 1.0 / n)
        loads, hops, _ = _pattern_loads(rf, np.concatenate([pid, pid]), np.concatenate([s_, d_]),
                                        np.concatenate([d_, s_]), np.concatenate([v_, v_]), P_)
        q_c.append(np.full(P_, c)), q_v.append(V), q_o.append(O)
        q_load_parts.append(sp.csr_array(loads * lam[c])), q_hop.append(hops)
    q_c_a, q_v_a, q_o_a = cat(q_c), cat(q_v), cat(q_o)
    q_hop_a = cat(q_hop)
    NQ = len(q_c_a)
    q_load = sp.vstack(q_load_parts, format="csr") if q_load_parts else sp.csr_array((0, A))
    est = int(ar_load.nnz + w_load.nnz + q_load.nnz + 3 * NW + 3 * NQ + (nb + 2 * NO) * n)
    if est > MAX_PLACEMENT_NONZEROS:
        raise UnsupportedError(
            f"the placement model would have about {est:,} non-zeros ({NO} layer options, {NW:,} resharding pairs "
            f"after pruning, {A} arcs), more than {MAX_PLACEMENT_NONZEROS:,}: restrict the starts (max_starts), "
            f"offer fewer configs per layer, or use --method heuristic")

    # ---- variables -----------------------------------------------------------------------------
    bld = ModelBuilder(name="placement")
    a = bld.add_variables(NO, lb=0, ub=1, kind="binary", name="a")
    b_ub = np.ones((nb, n))
    for j, blk in enumerate(w.blocks):
        if float(blk.bytes) > cap * (1 + _MEM_RTOL):
            b_ub[j] = 0.0
    bv = bld.add_variables((nb, n), lb=0, ub=b_ub.ravel(), kind="binary", name="b") if nb else None
    wv = bld.add_variables(NW, lb=0, ub=1, name="w")
    qv = bld.add_variables(NQ, lb=0, ub=1, name="q")
    hv = bld.add_variables((len(consumers), n), lb=0, ub=1, name="h") if consumers else None
    Cv = bld.add_variables(1, lb=0, name="C")
    Tbw = bld.add_variables(1, lb=0, name="Tbw")
    Hv = bld.add_variables(1, lb=0, name="H")
    Tv = bld.add_variables(1, lb=0, name="T")
    a_cols, w_cols, q_cols = a.index, wv.index, qv.index
    b_cols = bv.index.reshape(nb, n) if nb else np.zeros((0, n), np.int64)
    h_cols = {c: hv.index.reshape(len(consumers), n)[ci] for ci, c in enumerate(consumers)}
    C, TB, H, T = int(Cv.index[0]), int(Tbw.index[0]), int(Hv.index[0]), int(Tv.index[0])

    # ---- constraints ---------------------------------------------------------------------------
    bld.add_constraints(opt_layer, a_cols, 1.0, lb=1.0, ub=1.0, count=L, name="layer_choice")
    if nb:
        bld.add_constraints(np.repeat(np.arange(nb), n), b_cols.ravel(), 1.0, lb=1.0, ub=1.0, count=nb, name="block_choice")
    if NW:
        # transport: one row per (layer-pair side, option); rows are the positions of the options.
        out_opts = np.unique(w_o1_a)
        in_opts = np.unique(w_o2_a)
        # every option of a paired layer needs its row, even if all its pairs were pruned
        out_opts = np.unique(np.concatenate([out_opts] + [kept[i] for i in pair_layers]))
        in_opts = np.unique(np.concatenate([in_opts] + [kept[i + 1] for i in pair_layers]))
        r1 = np.searchsorted(out_opts, w_o1_a)
        bld.add_constraints(np.concatenate([r1, np.arange(len(out_opts))]), np.concatenate([w_cols, a_cols[out_opts]]),
                            np.concatenate([np.ones(NW), -np.ones(len(out_opts))]), lb=0.0, ub=0.0,
                            count=len(out_opts), name="transport_out")
        r2 = np.searchsorted(in_opts, w_o2_a)
        bld.add_constraints(np.concatenate([r2, np.arange(len(in_opts))]), np.concatenate([w_cols, a_cols[in_opts]]),
                            np.concatenate([np.ones(NW), -np.ones(len(in_opts))]), lb=0.0, ub=0.0,
                            count=len(in_opts), name="transport_in")

    # Coverage of servers by options: option o covers v = s + r n/k.
    cov_o = np.repeat(np.arange(NO), opt_k)
    cov_v = np.concatenate([np.asarray(coset(n, int(k), int(s))) for k, s in zip(opt_k, opt_s)]).astype(np.int64)
    blk_c = np.array([float(b.compute_s) for b in w.blocks])
    blk_m = np.array([float(b.bytes) for b in w.blocks])
    bj, bvv = np.repeat(np.arange(nb), n), np.tile(np.arange(n), nb)
    bld.add_constraints(np.concatenate([cov_v, bvv, np.arange(n)]),
                        np.concatenate([a_cols[cov_o], b_cols.ravel(), np.full(n, C)]),
                        np.concatenate([lt[cov_o] * us, blk_c[bj] * us, -np.ones(n)]),
                        lb=-np.inf, ub=0.0, count=n, name="compute")
    if objective != "comm_time":
        # Valid (implied at integer points, tighter in the LP than the per-server rows when a layer
        # is spread over many starts): C >= the chosen option's time, per layer.
        bld.add_constraints(np.concatenate([opt_layer, np.arange(L)]), np.concatenate([a_cols, np.full(L, C)]),
                            np.concatenate([lt * us, -np.ones(L)]), lb=-np.inf, ub=0.0, count=L, name="layer_compute")
    bld.add_constraints(np.concatenate([cov_v, bvv]), np.concatenate([a_cols[cov_o], b_cols.ravel()]),
                        np.concatenate([mem[cov_o] / cap, blk_m[bj] / cap]),
                        lb=-np.inf, ub=1.0 + _MEM_RTOL, count=n, name="memory")
    if NQ:
        qrow = {c: ci for ci, c in enumerate(consumers)}
        qr = np.array([qrow[int(c)] for c in q_c_a]) * n + q_v_a
        rows, cols, vals = [qr], [q_cols], [np.ones(NQ)]
        for j, blk in enumerate(w.blocks):
            c = int(blk.consumer)
            if c in qrow and float(blk.lookup_bytes) > 0:
                rows.append(qrow[c] * n + np.arange(n)), cols.append(b_cols[j]), vals.append(np.full(n, -float(blk.lookup_bytes) / lam[c]))
        bld.add_constraints(np.concatenate(rows), np.concatenate(cols), np.concatenate(vals), lb=0.0, ub=0.0,
                            count=len(consumers) * n, name="lookup_sum")
        bld.add_constraints(np.concatenate([np.arange(NQ), np.arange(NQ)]), np.concatenate([q_cols, a_cols[q_o_a]]),
                            np.concatenate([np.ones(NQ), -np.ones(NQ)]), lb=-np.inf, ub=0.0, count=NQ, name="lookup_option")

    # Link loads, divided by capacity and in time units: sum(...) - Tbw <= 0 per arc.
    def triplets(M: sp.csr_array, colidx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        coo = sp.coo_array(M)
        return coo.col.astype(np.int64), colidx[coo.row], coo.data * arc_inv[coo.col] * us
    parts = [triplets(ar_load, a_cols), triplets(w_load, w_cols), triplets(q_load, q_cols)]
    bld.add_constraints(np.concatenate([p[0] for p in parts] + [np.arange(A)]),
                        np.concatenate([p[1] for p in parts] + [np.full(A, TB)]),
                        np.concatenate([p[2] for p in parts] + [-np.ones(A)]),
                        lb=-np.inf, ub=0.0, count=A, name="load")

    # Disaggregated maxima (valid; at integer points each left side is one pattern's own busiest
    # arc or one server's compute, never more than the true maximum). In the LP they stop a layer
    # spread over many starts from averaging its AllReduce over many arcs.
    rows, cols, vals, nrow = [], [], [], 0
    for i in range(L):
        o = kept[i][ar_time[kept[i]] > 0]
        if o.size:
            rows += [np.full(o.size, nrow), [nrow]]
            cols += [a_cols[o], [TB]]
            vals += [ar_time[o] * us, [-1.0]]
            nrow += 1
    start_w = 0
    for (i, hop), bwp in zip(w_hop, w_bw):
        idx = np.arange(start_w, start_w + hop.size)
        start_w += hop.size
        if idx.size:
            rows += [np.full(idx.size, nrow), [nrow]]
            cols += [w_cols[idx], [TB]]
            vals += [bwp * us, [-1.0]]
            nrow += 1
    if NQ:
        qmax = sp.csr_array(q_load @ sp.diags(arc_inv)).max(axis=1).toarray().ravel()
        qrow_cv = np.searchsorted(np.asarray(consumers), q_c_a) * n + q_v_a
        rows += [nrow + qrow_cv, nrow + np.arange(len(consumers) * n)]
        cols += [q_cols, np.full(len(consumers) * n, TB)]
        vals += [qmax * us, -np.ones(len(consumers) * n)]
        nrow += len(consumers) * n
    if nrow:
        bld.add_constraints(np.concatenate(rows), np.concatenate(cols), np.concatenate(vals), lb=-np.inf, ub=0.0,
                            count=nrow, name="pattern_bandwidth")
    if NW and objective != "comm_time":
        w_comp_a = np.concatenate(w_comp)
        pl_ = np.concatenate([np.full(h.size, j) for j, (_, h) in enumerate(w_hop)])
        bld.add_constraints(np.concatenate([pl_, np.arange(len(w_hop))]),
                            np.concatenate([w_cols, np.full(len(w_hop), C)]),
                            np.concatenate([w_comp_a * us, -np.ones(len(w_hop))]), lb=-np.inf, ub=0.0,
                            count=len(w_hop), name="pair_compute")

    if alpha > 0:
        # H >= hop of each layer's AllReduce and of each layer pair's resharding.
        rows, cols, vals = [], [], []
        nrow = 0
        for i in range(L):
            o = kept[i][ar_hop[kept[i]] > 0]
            if o.size:
                rows += [np.full(o.size, nrow), [nrow]]
                cols += [a_cols[o], [H]]
                vals += [-ar_hop[o].astype(float), [1.0]]
                nrow += 1
        start = 0
        for (i, hop) in w_hop:
            idx = np.arange(start, start + hop.size)
            start += hop.size
            nzh = hop > 0
            if nzh.any():
                rows += [np.full(int(nzh.sum()), nrow), [nrow]]
                cols += [w_cols[idx[nzh]], [H]]
                vals += [-hop[nzh].astype(float), [1.0]]
                nrow += 1
        if nrow:
            bld.add_constraints(np.concatenate(rows), np.concatenate(cols), np.concatenate(vals), lb=0.0, ub=np.inf,
                                count=nrow, name="hops")
        if NQ:
            # H - sum_o hop_{v,o} a[o] - M_v h[c, v] >= -M_v  per (c, v);  h[c, v] >= b[j, v].
            rows, cols, vals, lbs = [], [], [], []
            for ci, c in enumerate(consumers):
                sel = q_c_a == c
                V, O, hop = q_v_a[sel], q_o_a[sel], q_hop_a[sel].astype(float)
                M = np.zeros(n)
                np.maximum.at(M, V, hop)
                r = ci * n + V
                rows += [r, ci * n + np.arange(n), ci * n + np.arange(n)]
                cols += [a_cols[O], np.full(n, H), h_cols[c]]
                vals += [-hop, np.ones(n), -M]
                lbs.append(-M)
            bld.add_constraints(np.concatenate(rows), np.concatenate(cols), np.concatenate(vals),
                                lb=np.concatenate(lbs), ub=np.inf, count=len(consumers) * n, name="lookup_hops")
            rows, cols, vals, nrow = [], [], [], 0
            for j, blk in enumerate(w.blocks):
                c = int(blk.consumer)
                if c in h_cols and float(blk.lookup_bytes) > 0:
                    r = nrow + np.arange(n)
                    rows += [r, r]
                    cols += [h_cols[c], b_cols[j]]
                    vals += [np.ones(n), -np.ones(n)]
                    nrow += n
            bld.add_constraints(np.concatenate(rows), np.concatenate(cols), np.concatenate(vals), lb=0.0, ub=np.inf,
                                count=nrow, name="lookup_host")

    # Symmetry between identical blocks (exact: they are interchangeable).
    if nb > 1:
        rows, cols, vals, nrow = [], [], [], 0
        for j, nxt in ((m[t], m[t + 1]) for m in _block_classes(w) for t in range(len(m) - 1)):
            rows += [np.full(n, nrow), np.full(n, nrow)]
            cols += [b_cols[j], b_cols[nxt]]
            vals += [np.arange(n, dtype=float), -np.arange(n, dtype=float)]
            nrow += 1
        if nrow:
            bld.add_constraints(np.concatenate(rows), np.concatenate(cols), np.concatenate(vals), lb=-np.inf, ub=0.0,
                                count=nrow, name="block_symmetry")

    # ---- objective -----------------------------------------------------------------------------
    if objective == "comm_time":
        bld.set_objective([TB, H], [1.0, alpha])
    elif overlap == "full":
        bld.add_constraints([0, 0, 1, 1, 1], [T, C, T, TB, H], [1.0, -1.0, 1.0, -1.0, -alpha], lb=0.0, ub=np.inf,
                            count=2, name="overlap")
        bld.set_objective([T], [1.0])
    else:
        bld.set_objective([C, TB, H], [1.0, 1.0, alpha])
    model = bld.build()
    stats = {"options": int(NO), "options_pruned": int(len(keep) - keep.sum()), "pairs": int(NW),
             "lookup_products": int(NQ), "arcs": int(A), "estimated_nonzeros": est, "pair_patterns": int(len(tp_all)),
             "build_s": time.perf_counter() - started}
    return PlacementModel(model, n, opt_layer, opt_k, opt_s, a_cols, b_cols, w_o1_a, w_o2_a, w_cols, q_c_a, q_v_a,
                          q_o_a, q_cols, lam, h_cols, C, TB, H, T, max_starts is not None, ub, incumbent, stats)


# ------------------------------------------------------------------------------------------------
def _decode(pm: PlacementModel, values: np.ndarray, L: int) -> Strategy:
    av = values[pm.a_cols]
    deg, start = [0] * L, [0] * L
    for i in range(L):
        idx = np.flatnonzero(pm.opt_layer == i)
        o = idx[int(np.argmax(av[idx]))]
        deg[i], start[i] = int(pm.opt_k[o]), int(pm.opt_s[o])
    servers = tuple(int(np.argmax(values[pm.b_cols[j]])) for j in range(pm.b_cols.shape[0]))
    return Strategy(tuple(deg), tuple(start), servers)


def _block_classes(w: Workload) -> list[list[int]]:
    """Identical blocks (same bytes, lookups, compute, consumer), in index order."""
    classes: dict[tuple, list[int]] = {}
    for j, b in enumerate(w.blocks):
        classes.setdefault((float(b.bytes), float(b.lookup_bytes), float(b.compute_s), int(b.consumer)), []).append(j)
    return list(classes.values())


def _canonical_blocks(w: Workload, st: Strategy) -> Strategy:
    """The same strategy with identical blocks' servers sorted, as the symmetry rows require."""
    servers = list(st.block_server)
    for members in _block_classes(w):
        for j, v in zip(members, sorted(servers[j] for j in members)):
            servers[j] = v
    return Strategy(st.layer_degree, st.layer_start, tuple(servers))


def _point(pm: PlacementModel, w: Workload, st: Strategy, alpha: float, overlap: str, objective: str) -> np.ndarray | None:
    """A full model point for a strategy (None if one of its options or pairs was not kept)."""
    x = np.zeros(pm.model.num_vars)
    chosen = np.full(len(w.layers), -1)
    for i in range(len(w.layers)):
        hit = np.flatnonzero((pm.opt_layer == i) & (pm.opt_k == st.layer_degree[i]) & (pm.opt_s == st.layer_start[i]))
        if hit.size != 1:
            return None
        chosen[i] = hit[0]
    x[pm.a_cols[chosen]] = 1.0
    n = pm.n
    st = _canonical_blocks(w, st)
    for j, v in enumerate(st.block_server):
        x[pm.b_cols[j, v]] = 1.0
    if len(pm.w_cols):
        on = np.isin(pm.w_o1, chosen) & np.isin(pm.w_o2, chosen)
        x[pm.w_cols[on]] = 1.0
        if on.sum() != np.unique(pm.opt_layer[pm.w_o1]).size:
            return None  # a pair of the strategy was pruned
    if len(pm.q_cols):
        on = np.isin(pm.q_o, chosen)
        for c, hc in pm.h_cols.items():
            lam_v = np.zeros(n)
            for j, blk in enumerate(w.blocks):
                if int(blk.consumer) == c and float(blk.lookup_bytes) > 0:
                    lam_v[st.block_server[j]] += float(blk.lookup_bytes) / pm.lam[c]
                    x[hc[st.block_server[j]]] = 1.0
            sel = on & (pm.q_c == c)
            x[pm.q_cols[sel]] = lam_v[pm.q_v[sel]]
    # Continuous maxima from the rows themselves, so the point is feasible to the last bit.
    act = pm.model.matrix @ x
    blocks = {b.name: b for b in pm.model.row_blocks}
    x[pm.C] = max(0.0, act[blocks["compute"].start:blocks["compute"].stop].max())
    x[pm.Tbw] = max(0.0, act[blocks["load"].start:blocks["load"].stop].max(initial=0.0))
    hmax = 0.0
    if "hops" in blocks:
        hmax = max(hmax, (-act[blocks["hops"].start:blocks["hops"].stop]).max())
    if "lookup_hops" in blocks:
        rb = blocks["lookup_hops"]
        hmax = max(hmax, (pm.model.row_lower[rb.start:rb.stop] - act[rb.start:rb.stop]).max())
    x[pm.H] = max(0.0, hmax)
    x[pm.T] = max(x[pm.C], x[pm.Tbw] + alpha * x[pm.H]) if overlap == "full" and objective != "comm_time" else 0.0
    return x


def _default_topology(instance: Instance) -> np.ndarray:
    if instance.fixed_topology is not None:
        return instance.fixed_topology_matrix()
    from topoopt_ilp.solve import METHODS

    return METHODS["heuristic"](instance).topology.matrix  # only its links are needed: no evaluation


def solve_placement(instance: Instance, options: ExactOptions, topology: np.ndarray | None = None, *,
                    max_starts: int | None = None, start: Strategy | dict | None = None,
                    local_search_s: float | None = None) -> Solution:
    """Choose a config and start per layer and a server per block, minimising the iteration time.

    Parameters
    ----------
    instance : Instance
        A workload instance (objective ``iteration_time`` or ``comm_time``).
    options : ExactOptions
        Backend, limits, warm start (``"heuristic"``: the best of TopoOpt's data-parallel start and
        uniform-degree strategies, as a full point), export.
    topology : numpy.ndarray, optional
        Link-count matrix X. Default: the instance's fixed topology, else the TopoOpt heuristic's
        topology for the data-parallel start.
    max_starts : int, optional
        Heuristic restriction of the MILP to that many evenly spaced coset starts per degree (plus
        the incumbent's). The reported bound is then the relaxation bound; the restricted model's
        own bound and gap are in ``details``. Default: unrestricted, falling back to 4, 2, 1 starts
        when the unrestricted model is too large to build.
    start : Strategy or dict, optional
        A known strategy (or a solution's ``placement`` dict): one of the local search's starts,
        so the result is never worse than it.
    local_search_s : float, optional
        Seconds of local search before the MILP (0: none). Default: a quarter of the time limit,
        at most 30 s (10 s without a time limit); it stops earlier once it stalls.

    Returns
    -------
    Solution
        ``method="exact"``, the topology X, empty routing (shortest paths and default rings are the
        evaluator's fallback), ``placement`` as :func:`~topoopt_ilp.strategy.strategy_to_dict`,
        ``objective`` = iteration time (seconds) of the returned strategy, recomputed exactly;
        ``bound``/``gap`` valid for the unrestricted problem (seconds). Status ``optimal`` means
        the gap is within ``options.gap`` (default 1e-4) - possibly proven by the relaxation bound
        alone, without a MILP (``details["milp"]`` says so). Status ``infeasible`` means no placement
        satisfies the memory rows (the only constraints that can cut every strategy).
    """
    started = time.perf_counter()
    if instance.workload is None:
        raise InputError("the placement model needs a workload instance (layers and blocks); this instance has a fixed demand")
    check_backend(options)
    X = np.asarray(_default_topology(instance) if topology is None else topology)
    rf = shortest_path_fractions(X, instance.cluster.link_bytes_per_s)
    if start is None and options.warm_start not in (None, "none", "heuristic"):
        import os

        from topoopt_ilp.io import load_solution

        if not os.path.exists(options.warm_start):
            raise InputError(f"--warm-start takes 'heuristic', 'none' or a solution file; {options.warm_start!r} is none of these")
        start = load_solution(options.warm_start).placement
        if start is None:
            raise InputError(f"{options.warm_start}: the solution has no placement to start from")
    if isinstance(start, dict):
        start = Strategy(tuple(start["layer_degree"]), tuple(start["layer_start"]), tuple(start.get("block_server", ())))
    w = instance.workload
    n = instance.n
    if instance.objective not in OBJECTIVES:
        raise InputError(f"the placement model minimises iteration_time or comm_time, not {instance.objective!r}")
    if (rf.dist < 0).any():
        raise UnsupportedError("the topology is disconnected; the placement model needs every pair reachable")
    details: dict = {"model": "placement", "routing": "shortest_path (equal split), default rings"}
    tol = options.gap if options.gap is not None else 1e-4

    # 1. Incumbent: the best cheap candidate (or the given start), improved by local search.
    if start is not None and validate_strategy(w, n, start):
        raise InputError("the start strategy is invalid: " + "; ".join(validate_strategy(w, n, start)[:3]))
    cands = [st for st in ([start] if start is not None else []) + _candidates(w, n) if _memory_feasible(w, n, st)]
    incumbent, inc_time = None, None
    ls = _LocalSearch(instance, rf)
    if cands:
        scored = [(strategy_times(instance, rf, st)["iteration_time_s"], j) for j, st in enumerate(cands)]
        details["start_iteration_time_s"] = min(scored)[0]
        incumbent = cands[min(scored)[1]]
        if local_search_s is None:
            local_search_s = 10.0 if options.time_limit_s is None else min(30.0, 0.25 * options.time_limit_s)
        if local_search_s > 0:
            t0 = time.perf_counter()
            order = sorted(range(len(cands)), key=lambda j: scored[j][0])
            incumbent = improve_strategy(instance, rf, [cands[j] for j in order], local_search_s,
                                         seed=options.seed or 0)
            details["local_search_s"] = time.perf_counter() - t0
        inc_time = strategy_times(instance, rf, incumbent)["iteration_time_s"]
        details["local_search_iteration_time_s"] = inc_time

    # 2. A bound valid for the unrestricted problem, without a solver; it may already close the gap.
    t0 = time.perf_counter()
    lb = relaxation_bound(instance, rf, ls)
    details.update(relaxation_bound_s=lb, relaxation_bound_time_s=time.perf_counter() - t0)

    def gap_of(obj: float, bnd: float | None) -> float | None:
        return None if bnd is None else (max(0.0, (obj - bnd) / obj) if obj > 0 else 0.0)

    if inc_time is not None and gap_of(inc_time, lb) <= tol:
        details["milp"] = "skipped: the relaxation bound proves the local-search incumbent within the gap"
        return Solution(status="optimal", method="exact", topology=Topology(X), placement=strategy_to_dict(incumbent),
                        objective=inc_time, bound=min(lb, inc_time), gap=gap_of(inc_time, lb),
                        wall_time_s=time.perf_counter() - started, backend=options.backend, details=details)

    # 3. The MILP: unrestricted when it can be built, else (only when no restriction was asked for)
    # the largest restriction to evenly spaced starts (plus the incumbent's) that can.
    ladder = [max_starts] if max_starts is not None else [None, 4, 2, 1]
    pm = None
    for ms in ladder:
        try:
            pm = build_placement(instance, X, max_starts=ms, rf=rf, start=incumbent)
            break
        except UnsupportedError as exc:
            if ms == ladder[-1]:
                raise
            details.setdefault("refused", []).append(f"max_starts={ms}: {exc}")
    max_starts = ms
    alpha = instance.cluster.hop_latency_s / TIME_UNIT_S
    x0 = None
    if options.warm_start not in (None, "none") and pm.incumbent is not None:
        x0 = _point(pm, w, pm.incumbent, alpha, w.overlap, instance.objective)
    if options.time_limit_s is not None:
        options = replace(options, time_limit_s=max(1.0, options.time_limit_s - (time.perf_counter() - started)))
    result: SolveResult = run_model(pm.model, options, x0)
    status = solution_status(result)
    details.update(variables=pm.model.num_vars, constraints=pm.model.num_rows, nonzeros=pm.model.num_nonzeros,
                   **pm.stats)
    if result.message:
        details["solver_message"] = result.message
    if options.warm_start not in (None, "none"):
        details["warm_start"] = options.warm_start
    solver_bound = result.bound * TIME_UNIT_S if result.bound is not None and math.isfinite(result.bound) else None
    if status == "infeasible":
        details["infeasible"] = ("memory: no assignment of layer configs and block servers keeps every server within "
                                 "server_memory_bytes (every other constraint family admits any strategy)")
    if (result.values is None or status not in ("optimal", "feasible")) and incumbent is None:
        return Solution(status=status, method="exact", topology=None, backend=result.backend,
                        wall_time_s=time.perf_counter() - started, details=details)
    strategy, objective = incumbent, inc_time
    if result.values is not None and status in ("optimal", "feasible"):
        cand = _decode(pm, result.values, len(w.layers))
        cand_time = strategy_times(instance, rf, cand)["iteration_time_s"]
        details["model_objective_s"] = result.objective * TIME_UNIT_S if result.objective is not None else None
        if objective is None or cand_time < objective:
            strategy, objective = cand, cand_time
    if pm.restricted:
        # The restricted model's bound holds for the restriction only: report the relaxation bound.
        details.update(restricted=True, max_starts=max_starts, restricted_status=status,
                       restricted_bound_s=solver_bound, restricted_gap=gap_of(objective, solver_bound),
                       note="starts restricted (heuristic): bound = the relaxation bound, valid for the "
                            "unrestricted problem")
        bound = lb
        status = "optimal" if gap_of(objective, bound) <= tol else "feasible"
    else:
        bound = lb if solver_bound is None else max(lb, solver_bound)
        if status not in ("optimal", "feasible"):
            status = "feasible"  # the solver stopped without a point: the incumbent stands
        if gap_of(objective, bound) <= tol:
            status = "optimal"
    bound = min(bound, objective)
    return Solution(status=status, method="exact", topology=Topology(X), placement=strategy_to_dict(strategy),
                    objective=objective, bound=bound, gap=gap_of(objective, bound),
                    wall_time_s=time.perf_counter() - started, backend=result.backend, details=details)
