"""A lower bound on the placement problem that sees where traffic concentrates (used by :mod:`.placement`).

:func:`chain_bound` strengthens the volume relaxation (:func:`.placement_search.relaxation_bound`)
in three ways, all valid for the unrestricted problem (every layer option, every block server,
memory ignored):

* **arc classes** - the volume relaxation spreads all traffic over all arcs. Partitioning the arcs
  into classes (by jump ``head - tail mod n``: on a circulant topology the orbits of the rotation),
  any convex combination of the per-class average loads bounds the busiest arc; the best
  combination is found by cutting planes around the chain DP. A default ring at coset distance g
  only uses the arcs of the shortest paths for offset g, so its classes are far busier than the
  average arc.
* **runs** - consecutive layers on one (k, s) add their compute on the same servers and their
  AllReduces on the same ring; the DP's state carries where the current run started, so a chain
  that piles every layer onto one coset pays for it.
* **pair thresholds** - the busiest arc of each consecutive pair's own traffic (both AllReduces and
  the resharding between them) and the compute of a server that hosts both layers.

The run and pair terms are maxima, not sums, so they enter as thresholds: a branch and bound over
threshold intervals (best first, anytime) takes the least value over all of them.
"""

from __future__ import annotations

import heapq
import time

import numpy as np
from scipy.optimize import linprog

from topoopt_ilp.instance import Instance

from .placement_data import RoutingFractions, path_entries, path_floors
from .placement_search import _LocalSearch

__all__ = ["MAX_CHAIN_TYPES", "arc_classes", "chain_bound"]

#: Above this many (k, s) types (about 2n) the per-pair tables (types x types x arc classes) are not
#: built and :func:`chain_bound` returns 0 (the volume relaxation stands).
MAX_CHAIN_TYPES = 1100


def arc_classes(rf: RoutingFractions) -> np.ndarray:
    """Class index of every arc: its jump ``(head - tail) mod n``. Any partition of the arcs gives
    a valid bound (comment block below); on a circulant topology (TopoOpt's) the jump classes are
    the orbits of the rotation s -> s + 1. (Measured: splitting them further by tail residue did not
    raise the bound on the paper instances, and slows the cutting planes.)"""
    return np.unique((rf.head - rf.tail) % rf.n, return_inverse=True)[1].astype(np.int64)


def _is_circulant(rf: RoutingFractions) -> bool:
    """Is the capacity matrix invariant under the rotation s -> s + 1 (X[i, j] = X[0, j - i])?"""
    n = rf.n
    C = np.zeros((n, n))
    C[rf.tail, rf.head] = rf.cap
    return bool(np.array_equal(C, np.roll(C, (1, 1), axis=(0, 1))))


# ------------------------------------------------------------------------------------------------
# The chain bound
#
# Notation: types t = (k, s) (the local search's type table), a strategy S = chain of types t_0..t_{L-1}
# and block servers v_b. For a layer i on t: lt_i(t) its time, AR(t) the arc loads of one byte
# AllReduced on t's default ring (zero for k = 1), RS(t, t') the arc loads of resharding one
# activation byte between t and t' (both directions; zero when t = t'); LK(v, t) those of one lookup
# byte between server v and t's replicas (both directions). Loads are non-negative and linear:
#   load(S) = sum_i p_i AR(t_i) + sum_i a_i RS(t_i, t_{i+1}) + sum_b lk_b LK(v_b, t_cons(b))
# (layers sharing a coset share one AllReduce group of the summed bytes: the same load).
#
# For every strategy S (Tbw = max_e load_e / cap_e, C = max_v compute_v), cut into maximal runs
# (layers j..i all on one type t; consecutive runs differ in type):
#   (c1) C >= sum_{i in run} lt_i(t) for every run (each server of t's coset runs all of them);
#        C >= lt_i(t_i) + lt_{i+1}(t_{i+1}) when the two cosets share a server (s ≡ s' mod gcd(n/k,
#        n/k')), else C >= the larger of the two; C >= c_floor (average server compute, largest block;
#        with compute_model critical_path also Pmin, the critical path at every layer's least time).
#   (b1) Tbw >= (sum_{i in run} p_i) max_e AR(t)_e / cap_e for every run (one ring, summed bytes), and
#        Tbw >= bw_i(t_i, t_{i+1}) = max_e (p_i AR(t_i) + p_{i+1} AR(t_{i+1}) + a_i RS(t_i, t_{i+1}))_e / cap_e
#        (each a part of the load on every arc).
#   (b2) Tbw >= sum_e mu_e load_e / cap_e for any weights mu >= 0 summing to 1. With classes c of arcs
#        and mu_e = mu_c cap_e / capsum_c:  Tbw >= sum_c mu_c L_c(S) / capsum_c, L_c = load summed over
#        class c; L_c is linear along the chain (per-type and per-pair class volumes), and the blocks'
#        part is at least each block's least over servers (memory ignored).
#   (h)  H >= 1 when any byte travels.
# Let tau(S) = max of the (c1) run/pair terms, beta(S) = max of the (b1) terms; both take values in
# finite sets vt, vb (every term is one of the tabulated values). A cell = index intervals
# [lt, ht] of vt and [lb, hb] of vb holds the strategies with tau(S) in vt[lt..ht], beta(S) in
# vb[lb..hb]; every such S is a chain over the runs and pairs allowed by the thresholds vt[ht],
# vb[hb]. Hence for every S in the cell
#   iteration(S) >= combine(max(vt[lt], c_floor), max(vb[lb], g_mu) + alpha [traffic])
# with g_mu = min over allowed chains of the (b2) sum: a shortest path over (layer, run start,
# type), the dynamic programming below. g of a sub-cell is at least its parent's (fewer chains).
# Branch and bound: start from the cell of all values; pop the least value; compute its g by
# Kelley's cutting planes over mu (each DP solution is a cut, an LP picks the next mu; every DP value
# is itself a valid g; no allowed chain: drop the cell) and push it back, or, when already computed,
# split both intervals in halves. The least value in the heap bounds every strategy at every moment
# and never decreases; it stops when a popped cell is a single (tau, beta) with its g (the exact
# minimum of the relaxation), when the value reaches ``upper`` (a known strategy's value: then OPT =
# upper), or when the time is up (the heap's least value stands). When g > 0 or vb[lb] > 0 every chain
# of the cell moves bytes, so H >= 1.
#
# Precomputation. On a circulant topology (X[i, j] = X[0, j - i], TopoOpt's) rotating every server by
# r maps shortest paths to shortest paths, arc classes to themselves, and a type (k, s) with
# s + r < n/k to (k, s + r) with the same replica order; so a pair's class volumes and busiest arc
# are those of the pair with both starts lowered by min(s, s'), and only pairs with a start 0 are
# computed (16 x fewer at n = 128). Float rounding: the busiest-arc tables are float32 sums scaled
# down by 1e-6, the final bound by 1e-9 (both far above the rounding).
# ------------------------------------------------------------------------------------------------
class _ChainData:
    """Per-type and per-pair data of the chain bound (see the comment block above)."""

    def __init__(self, instance: Instance, rf: RoutingFractions, ls: _LocalSearch, classes: np.ndarray) -> None:
        w, n = instance.workload, instance.n
        self.L = L = len(w.layers)
        self.NT = NT = len(ls.type_k)
        K = int(classes.max()) + 1 if classes.size else 1
        M = np.zeros((len(classes), K))
        M[np.arange(len(classes)), classes] = 1.0
        self.capc = rf.cap @ M
        arc_inv = 1.0 / rf.cap
        self.ar_c = ls.ar @ M  # (NT, K) class volume of one AllReduced byte
        self.lt = ls.lt
        # Pair data: class volumes of resharding (NT, NT, K) and, per distinct (p_i, p_{i+1}, a_i), the
        # busiest arc of the pair's own traffic (NT, NT). On a circulant topology both are invariant
        # under rotating the two starts together while neither wraps (s -> s - m, m = min(s, s')), so
        # only pairs with a start 0 are computed: for each start-0 type t the pattern row of t against
        # every type, once as the first layer and once as the second (resharding is symmetric).
        keys = sorted({(ls.param[i], ls.param[i + 1], ls.act[i]) for i in range(L - 1)})
        any_act = any(key[2] > 0 for key in keys)
        base = np.flatnonzero(ls.type_s == 0) if _is_circulant(rf) else np.arange(NT)
        ar32, inv32 = ls.ar.astype(np.float32), arc_inv.astype(np.float32)
        rs_rows = np.zeros((len(base), NT, K))
        bw_first = {key: np.zeros((len(base), NT)) for key in keys}
        bw_second = {key: np.zeros((len(base), NT)) for key in keys}
        for r, t in enumerate(base):
            R = ls.reshard(int(t))[0] if any_act else np.zeros((NT, len(rf.cap)))
            rs_rows[r] = R @ M
            for key in keys:
                for table, p_t, p_all in ((bw_first, key[0], key[1]), (bw_second, key[1], key[0])):
                    tot = (key[2] * R).astype(np.float32)
                    tot += p_t * ar32[t][None, :]
                    tot += p_all * ar32
                    tot *= inv32
                    table[key][r] = tot.max(axis=1, initial=0.0)
        pos = np.full(NT, -1)
        pos[base] = np.arange(len(base))
        s1, s2 = ls.type_s[:, None], ls.type_s[None, :]
        t1, t2 = np.arange(NT)[:, None], np.arange(NT)[None, :]
        m = np.minimum(s1, s2) if len(base) < NT else np.zeros((1, 1), np.int64)
        c1, c2 = np.broadcast_to(t1 - m, (NT, NT)), np.broadcast_to(t2 - m, (NT, NT))
        first = (pos[c1] >= 0) if len(base) < NT else np.ones((NT, NT), dtype=bool)
        self.rs_c = np.where(first[:, :, None], rs_rows[np.maximum(pos[c1], 0), c2], rs_rows[np.maximum(pos[c2], 0), c1])
        # float32 sums of three non-negative terms are within 1e-6 relative: scale down to stay below.
        bw = {key: np.where(first, bw_first[key][np.maximum(pos[c1], 0), c2], bw_second[key][np.maximum(pos[c2], 0), c1])
              * (1 - 1e-6) for key in keys}
        self.pair_bw = [bw[(ls.param[i], ls.param[i + 1], ls.act[i])] for i in range(L - 1)]
        g = n // ls.type_k
        meet = (ls.type_s[:, None] - ls.type_s[None, :]) % np.gcd(g[:, None], g[None, :]) == 0
        comp_of: dict[tuple[bytes, bytes], np.ndarray] = {}  # identical layer pairs share one table
        self.pair_comp = []
        for i in range(L - 1):
            key = (ls.lt[i].tobytes(), ls.lt[i + 1].tobytes())
            if key not in comp_of:
                comp_of[key] = np.where(meet, ls.lt[i][:, None] + ls.lt[i + 1][None, :],
                                        np.maximum(ls.lt[i][:, None], ls.lt[i + 1][None, :]))
            self.pair_comp.append(comp_of[key])
        # Runs: layers j..i all on type t (one coset: their compute adds on each of its servers, their
        # AllReduces add on one ring). run_comp[j, i, t] = sum of lt, run_bw[j, i, t] = (sum of p) x the
        # ring's busiest arc per byte; inf where i < j or a layer cannot use t.
        fin = np.isfinite(ls.lt)
        cs = np.vstack([np.zeros(NT), np.cumsum(np.where(fin, ls.lt, 0.0), axis=0)])
        bad = np.vstack([np.zeros(NT), np.cumsum(~fin, axis=0)])  # layers that cannot use t, cumulated
        cp = np.concatenate([[0.0], np.cumsum(ls.param)])
        ar_max = (ls.ar * arc_inv).max(axis=1, initial=0.0)
        j_, i_ = np.arange(L)[:, None], np.arange(L)[None, :]
        ok = (i_ >= j_)[:, :, None] & (bad[1:][None, :, :] - bad[:-1][:, None, :] == 0)
        self.run_comp = np.where(ok, cs[1:][None, :, :] - cs[:-1][:, None, :], np.inf)
        self.run_bw = np.where(ok, (cp[1:][None, :] - cp[:-1][:, None])[:, :, None] * ar_max[None, None, :], np.inf)
        self.param, self.act = ls.param, ls.act
        # Lookups: bytes per consumer layer (identical treatment per byte: each block picks its own
        # best server, so only the total per consumer matters) and class volumes (n, NT, K).
        self.lam = np.zeros(L)
        for b in w.blocks:
            self.lam[int(b.consumer)] += float(b.lookup_bytes)
        if (self.lam > 0).any():
            dist_c = (rf.P @ M).reshape(n, n, K)  # expected class-c arcs on the path u -> v
            us = ls.unit_server
            self.lk_c = np.stack([(dist_c[:, us[t]].sum(axis=1) + dist_c[us[t], :].sum(axis=0)) / n for t in range(NT)],
                                 axis=1)  # [v, t, c] = (1/n) sum_u dist_c(v, us[t, u]) + dist_c(us[t, u], v)
        else:
            self.lk_c = None

    def dp(self, run_ok: np.ndarray, allow_pair: list[np.ndarray], mu: np.ndarray
           ) -> tuple[float, np.ndarray | None]:
        """min over allowed chains of sum_c mu_c L_c / capsum_c, and the minimiser's vector
        (L_c / capsum_c) (None when no chain is allowed). A chain is a sequence of maximal runs:
        ``run_ok[j, i, t]`` allows layers j..i on type t as (part of) one run, ``allow_pair[i][t, t']``
        a change of type between layers i and i + 1 (never t' = t: that continues the run). The state
        at layer i is (start j of the current run, its type t)."""
        wgt = mu / self.capc
        arw = self.ar_c @ wgt
        rsw = self.rs_c @ wgt
        lkw = (self.lk_c @ wgt).min(axis=0) if self.lk_c is not None else np.zeros(self.NT)
        L, NT = self.L, self.NT
        node = [self.param[i] * arw + self.lam[i] * lkw for i in range(L)]
        V = np.full((L, NT), np.inf)
        V[0] = np.where(run_ok[0, 0], node[0], np.inf)
        offdiag = ~np.eye(NT, dtype=bool)
        cols = np.arange(NT)
        back_j, back_t = [], []
        for i in range(1, L):
            jbest = V[:i].argmin(axis=0)
            W = V[jbest, cols]
            M = np.where(allow_pair[i - 1] & offdiag, W[:, None] + self.act[i - 1] * rsw, np.inf)
            tprev = M.argmin(axis=0)
            back_j.append(jbest), back_t.append(tprev)
            V[:i] = np.where(run_ok[:i, i], V[:i] + node[i][None, :], np.inf)
            V[i] = np.where(run_ok[i, i], M[tprev, cols] + node[i], np.inf)
        j, t = np.unravel_index(int(V.argmin()), V.shape)
        if not np.isfinite(V[j, t]):
            return np.inf, None
        value = float(V[j, t])
        chain = [0] * L
        i, j, t = L - 1, int(j), int(t)
        while i >= 0:
            chain[j:i + 1] = [t] * (i + 1 - j)
            if j == 0:
                break
            t_new = int(back_t[j - 1][t])
            j, t, i = int(back_j[j - 1][t_new]), t_new, j - 1
        vec = np.zeros_like(self.capc)
        for i, ti in enumerate(chain):
            vec += self.param[i] * self.ar_c[ti]
            if i + 1 < L:
                vec += self.act[i] * self.rs_c[ti, chain[i + 1]]
            if self.lam[i] > 0:
                vec += self.lam[i] * self.lk_c[int((self.lk_c[:, ti] @ wgt).argmin()), ti]
        self.last_chain = chain  # the minimiser, for inspection
        return value, vec / self.capc


def chain_bound(instance: Instance, rf: RoutingFractions, ls: _LocalSearch | None = None, *,
                upper: float | None = None, time_limit_s: float = 30.0, kelley_iters: int = 25) -> tuple[float, dict]:
    """Seconds; a lower bound on the iteration time (or comm time) of every strategy on ``rf``'s
    topology (math in the comment block above), and a dict of what it did. ``upper`` (a known
    strategy's value) only lets cells above it be dropped early; ``time_limit_s`` bounds the work
    after the precomputation (the bound stays valid when it runs out)."""
    started = time.perf_counter()
    ls = ls or _LocalSearch(instance, rf)
    if len(ls.type_k) > MAX_CHAIN_TYPES:
        return 0.0, {"chain_bound_skipped": f"{len(ls.type_k)} (k, s) types, more than {MAX_CHAIN_TYPES}: the "
                                            f"(types x types) tables would not fit"}
    w = instance.workload
    n = instance.n
    classes = arc_classes(rf)
    data = _ChainData(instance, rf, ls, classes)
    objective, overlap = instance.objective, w.overlap
    alpha = instance.cluster.hop_latency_s
    min_total = sum(min(k * w.layer_time(i, k) for k in layer.configs) for i, layer in enumerate(w.layers))
    c_floor = max([(min_total + sum(float(b.compute_s) for b in w.blocks)) / n] + [float(b.compute_s) for b in w.blocks])
    finite = np.isfinite(data.lt)
    # compute_model critical_path: C = max(busiest server, P) only grows, so every term here stays a
    # valid lower bound if P is ignored. P itself is at least Pmin, the critical path with every layer
    # at its least allowed time (P grows with each layer's time), a cheap floor on C for every chain.
    if ls.path_c is not None and finite.any(axis=1).all():
        least = np.where(finite, data.lt, np.inf).min(axis=1)
        c_floor = max(c_floor, float(path_floors(path_entries(w), least)[1][0]))

    def combine(comp: float, comm: float) -> float:
        if objective == "comm_time":
            return comm
        return max(comp, comm) if overlap == "full" else comp + comm

    # Values the thresholds run over. tau: every chain has tau(S) >= the largest of the layers' least times.
    tau_min = float(np.where(finite, data.lt, np.inf).min(axis=1).max())
    comp_terms = [data.run_comp.ravel()] + [pc.ravel() for pc in {id(a): a for a in data.pair_comp}.values()]
    bw_terms = [data.run_bw.ravel()] + [pb.ravel() for pb in {id(a): a for a in data.pair_bw}.values()]
    if objective == "comm_time":
        vt = np.array([np.inf])
        vt_lo = np.array([0.0])
    else:
        vt = np.unique(np.concatenate(comp_terms))
        vt = vt[np.isfinite(vt) & (vt >= tau_min * (1 - 1e-12))]
        vt_lo = np.maximum(vt, tau_min)
    vb = np.unique(np.concatenate(bw_terms))
    vb = vb[np.isfinite(vb)]

    def allowed(ht: int, hb: int) -> tuple[np.ndarray, list[np.ndarray]]:
        tau, beta = vt[ht] * (1 + 1e-12), vb[hb] * (1 + 1e-12)
        if np.isfinite(tau):
            runs = (data.run_comp <= tau) & (data.run_bw <= beta)  # inf (not allowed) stays out
        else:
            runs = np.isfinite(data.run_comp) & (data.run_bw <= beta)
        pairs = [(pc <= tau) & (pb <= beta) for pc, pb in zip(data.pair_comp, data.pair_bw)]
        return runs, pairs

    def cell_value(lt_: int, lb_: int, g: float) -> float:
        comm = max(vb[lb_], g)
        return combine(max(vt_lo[lt_], c_floor), comm + (alpha if comm > 0 else 0.0))

    def raise_g(ht: int, hb: int, g: float, mu: np.ndarray, enough) -> tuple[float, np.ndarray, bool]:
        """Kelley's cutting planes for the cell's g from weights mu, until ``enough(g)``; (g, last mu,
        any chain)."""
        nonlocal dp_calls
        runs, pairs = allowed(ht, hb)
        val, vec = data.dp(runs, pairs, mu)
        dp_calls += 1
        if vec is None:
            return g, mu, False
        g, cuts, lp_top, K = max(g, val), [vec], np.inf, len(mu)
        for _ in range(kelley_iters):
            if enough(g) or (np.isfinite(lp_top) and lp_top - g <= 1e-4 * lp_top):
                break
            A = np.array(cuts)
            res = linprog(np.r_[np.zeros(K), -1.0], A_ub=np.c_[-A, np.ones(len(A))], b_ub=np.zeros(len(A)),
                          A_eq=np.r_[np.ones(K), 0.0][None, :], b_eq=[1.0],
                          bounds=[(0, None)] * K + [(None, None)], method="highs")
            if res.status != 0:
                break
            lp_top, mu = -res.fun, np.maximum(res.x[:K], 0.0)
            mu = mu / mu.sum()
            val, vec = data.dp(runs, pairs, mu)
            dp_calls += 1
            g = max(g, val)
            cuts.append(vec)
        return g, mu, True

    # Branch and bound over threshold intervals. A cell holds the strategies with tau(S) in
    # vt[lt..ht] and beta(S) in vb[lb..hb]; its value (tau >= vt_lo[lt], beta >= vb[lb], g of the
    # thresholds vt[ht], vb[hb]) bounds them all, and a sub-cell's g is at least its parent's (fewer
    # chains). The least value in the heap is therefore a valid bound at every moment, and never
    # decreases: pop it, compute its g (drop it if no chain is allowed) or split it, until a popped
    # cell is a single (tau, beta) pair with its g computed, the value reaches ``upper``, or time is up.
    mu0 = data.capc / data.capc.sum()  # the plain volume relaxation's weights
    upper_v = np.inf if upper is None else float(upper)
    heap = [(cell_value(0, 0, 0.0), 0, 0, len(vt) - 1, 0, len(vb) - 1, 0.0, False, mu0)] if len(vt) and len(vb) else []
    cells = dp_calls = 0
    precompute_s = time.perf_counter() - started
    deadline = time.perf_counter() + time_limit_s
    timed_out, exhausted = False, False
    best, best_cell, tie = np.inf, None, 0
    while heap:
        value, _, lt_, ht, lb_, hb, g, done, mu = heap[0]
        if value >= upper_v * (1 - 1e-12):
            best, best_cell = upper_v, None  # every strategy is at least a known strategy's value
            break
        if time.perf_counter() > deadline:
            timed_out = True
            best, best_cell = value, (float(vt_lo[lt_]), float(vb[lb_]), g)
            break
        heapq.heappop(heap)
        if not done:
            cells += 1
            g, mu, feasible = raise_g(ht, hb, g, mu, lambda gg, a=lt_, b=lb_: cell_value(a, b, gg) >= upper_v)
            if feasible:
                tie += 1
                heapq.heappush(heap, (cell_value(lt_, lb_, g), tie, lt_, ht, lb_, hb, g, True, mu))
            continue
        if lt_ == ht and lb_ == hb:
            best, best_cell = value, (float(vt_lo[lt_]), float(vb[lb_]), g)
            exhausted = True
            break
        mt, mb = (lt_ + ht) // 2, (lb_ + hb) // 2
        for a_, b_ in ((lt_, mt), (mt + 1, ht)) if lt_ < ht else ((lt_, ht),):
            for c_, d_ in ((lb_, mb), (mb + 1, hb)) if lb_ < hb else ((lb_, hb),):
                tie += 1
                heapq.heappush(heap, (cell_value(a_, c_, g), tie, a_, b_, c_, d_, g, False, mu))
    if not heap and best_cell is None and not np.isfinite(best):
        best = upper_v if np.isfinite(upper_v) else 0.0  # no chain at all (memory): nothing to bound
    best *= 1 - 1e-9  # the DP's float sums (and the rotated patterns') are exact to far better than this
    info = {"chain_bound_s": float(best), "chain_bound_time_s": time.perf_counter() - started,
            "chain_bound_cells": cells, "chain_bound_dp_calls": dp_calls, "arc_classes": int(classes.max()) + 1,
            "chain_bound_timed_out": timed_out, "chain_bound_converged": exhausted,
            "chain_bound_cell": best_cell,
            "chain_bound_precompute_s": precompute_s}
    return float(best), info
