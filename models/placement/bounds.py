"""A lower bound on the placement problem that sees where traffic concentrates (used by :mod:`.placement`).

:func:`chain_bound` strengthens the volume relaxation (:func:`~topoopt_ilp.models.placement.local_search.relaxation_bound`)
in four ways, all valid for the unrestricted problem (every layer option, every block server,
memory ignored):

* **arc classes** - the volume relaxation spreads all traffic over all arcs. Partitioning the arcs
  into classes (by jump ``head - tail mod n``: on a circulant topology the orbits of the rotation),
  any convex combination of the per-class average loads bounds the busiest arc; the best
  combination is found by cutting planes around the chain DP. A coset's rings only use the arcs of
  the shortest paths for their offsets, so their classes are far busier than the average arc.
* **runs** - consecutive layers on one (k, s) add their compute on the same servers and their
  AllReduces on the same ring; the DP's state carries where the current run started, so a chain
  that piles every layer onto one coset pays for it.
* **pair thresholds** - the busiest arc of each change of type's own traffic (the AllReduce of the
  run before it, up to its last ``RUN_PAIR_LAYERS`` layers, the resharding and the next layer's
  AllReduce) and the compute of a server that hosts both sides.
* **packing** - under a compute threshold X a server hosts at most q layers of time >= X / (q + 1),
  so the degrees of those layers sum to at most q n (a relaxed, Lagrangian constraint on the chain):
  a chain cannot keep reusing the few cosets whose traffic is cheapest.

The run and pair terms are maxima, not sums, so they enter as thresholds: a branch and bound over
threshold intervals (best first, anytime) takes the least value over all of them.
"""

from __future__ import annotations

import heapq
import time

import highspy
import numpy as np

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.models.placement.data import RoutingFractions, objective_of, path_entries, path_floors
from topoopt_ilp.models.placement.scoring import StrategyScorer
from topoopt_ilp.solvers.highs import new_highs

__all__ = ["MAX_CHAIN_TYPES", "PACKING_LEVELS", "RUN_PAIR_LAYERS", "arc_classes", "chain_bound", "packing_weights"]

#: Above this many (k, s) types (about 2n) the per-pair tables (types x types x arc classes) are not
#: built and :func:`chain_bound` returns 0 (the volume relaxation stands).
MAX_CHAIN_TYPES = 1100

#: Run pairs (comment block below): the busiest arc and compute of the last up to this many layers of a
#: run together with the next layer. More layers: more (types x types) tables, a slower precomputation,
#: and 3 or 4 gave the same bounds on the paper instances (docs/notes/placement-bounds.md).
RUN_PAIR_LAYERS = 2

#: Packing levels q = 1..PACKING_LEVELS (comment block below): a server hosts at most q layers of time
#: above C / (q + 1).
PACKING_LEVELS = 3

#: Kelley's cutting planes stop when the master LP's value is within this fraction of the best cut.
KELLEY_TOL = 1e-4


def arc_classes(rf: RoutingFractions) -> np.ndarray:
    """Class index of every arc: its jump ``(head - tail) mod n``. Any partition of the arcs gives
    a valid bound (comment block below); on a circulant topology (TopoOpt's) the jump classes are
    the orbits of the rotation s -> s + 1. (Measured: splitting them further by tail residue did not
    raise the bound on the paper instances, and slows the cutting planes.)"""
    return np.unique((rf.head - rf.tail) % rf.n, return_inverse=True)[1].astype(np.int64)


def packing_weights(lt: np.ndarray, type_k: np.ndarray, X: float, levels: np.ndarray) -> np.ndarray:
    """(len(levels), L, NT): the degree of type t where layer i on t takes at least X / (q + 1) of
    compute time per server (``lt[i, t]``, 0 where not allowed), else 0. For every strategy whose
    busiest server computes less than X, the chosen entries of level q sum to at most q n (comment
    block below); an infinite X (or no levels) gives no rows."""
    if not np.isfinite(X) or not len(levels):
        return np.zeros((0,) + lt.shape)
    # counted only clearly above the level (float sums of equal times may land a last bit lower)
    return np.where(
        lt[None] >= (X / (np.asarray(levels) + 1) * (1 + 1e-9))[:, None, None],
        np.asarray(type_k, dtype=float)[None, None, :],
        0.0,
    )


def is_circulant(rf: RoutingFractions) -> bool:
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
# AllReduced on t's rings (data.ring_strides; zero for k = 1), RS(t, t') the arc loads of resharding one
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
#        at every change of type (a run j..i on t = t_i, then t' = t_{i+1} != t), with m = min(i - j + 1, R)
#        (R = run_pair_layers) and P = p_{i-m+1} + .. + p_i:
#          Tbw >= bw_i^m(t, t') = max_e (P AR(t) + p_{i+1} AR(t') + a_i RS(t, t'))_e / cap_e
#        (each a part of the load on every arc: the run's layers share one ring, so their bytes add on
#        it; m = 1 is the plain pair). bw_i^m grows with m (P does), so a change of type allowed after
#        a run of m layers is allowed after a shorter one.
#   (c2) likewise C >= comp_i^m(t, t') = (lt_{i-m+1} + .. + lt_i)(t) + lt_{i+1}(t') when the cosets of t
#        and t' share a server, else the larger of the two (also growing with m).
#   (b2) Tbw >= sum_e mu_e load_e / cap_e for any weights mu >= 0 summing to 1. With classes c of arcs
#        and mu_e = mu_c cap_e / capsum_c:  Tbw >= sum_c mu_c L_c(S) / capsum_c, L_c = load summed over
#        class c; L_c is linear along the chain (per-type and per-pair class volumes), and the blocks'
#        part is at least each block's least over servers (memory ignored).
#   (h)  H >= 1 when any byte travels.
#   (p)  packing: if C < X, a server hosts at most q layers i with lt_i(t_i) >= X / (q + 1) (q + 1 of
#        them would compute >= X > C on it); layer i covers k_i servers, so
#          W_q(S) = sum_i k_i [lt_i(t_i) >= X / (q + 1)] <= q n        (q = 1..PACKING_LEVELS)
#        (blocks' compute only adds; memory and which cosets are used are not looked at).
# Let tau(S) = max of the (c1)/(c2) run/pair terms, beta(S) = max of the (b1) terms; vt, vb are the
# finite sets of their tabulated values. A cell = index intervals [lt, ht] of vt and [lb, hb] of vb
# holds the strategies with C(S) in [vt[lt], vt[ht + 1]) (vt[len] = inf) and beta(S) in vb[lb..hb].
# The cells of a split partition their parent's, and the root holds every strategy (C >= tau(S) >=
# vt[0]). Every S in a cell has all its run/pair compute terms <= C < vt[ht + 1], hence <= vt[ht]
# (each is a value of vt, or below vt[0]); so S is a chain over the runs and pairs allowed by the
# thresholds vt[ht], vb[hb], and (p) holds with X = vt[ht + 1]. Hence for every S in the cell
#   iteration(S) >= combine(max(vt[lt], c_floor), max(vb[lb], g) + alpha [traffic])
# with g = min over allowed chains of sum_c mu_c L_c / capsum_c + sum_q lam_q (W_q - q n) for any
# mu in the simplex and lam >= 0 (the lam terms are <= 0 for every S in the cell): a shortest path
# over (layer, run start, type) with a node cost lam . W per layer, the dynamic programming below.
# g of a sub-cell is at least its parent's (fewer strategies: the parent's g holds for them).
# Branch and bound: start from the cell of all values; pop the least value; compute its g by
# Kelley's cutting planes over (mu, lam) (each DP solution is a cut, an LP picks the next weights, lam
# capped at 4 max(vb) / n; every DP value is itself a valid g; no allowed chain: drop the cell) and
# push it back, or, when already computed, split both intervals in halves. The least value in the
# heap bounds every strategy at every moment and never decreases; it stops when a popped cell is a
# single (vt, vb) index pair with its g (the minimum of the relaxation at this resolution), when the
# value reaches ``upper`` (a known strategy's value: then OPT = upper), or when the time is up (the
# heap's least value stands). When g > 0 or vb[lb] > 0 every chain of the cell moves bytes, so H >= 1.
#
# The DP keeps, per layer, only the types some allowed run can use there, and for each change of
# type the best run ending on t by its length capped at R (lengths 1..R-1 have one start each, R
# and more take the least over their starts: allowed after a longer run means allowed after every
# shorter one, so the least over lengths <= the allowed one is the right value).
#
# Run pairs of more than two layers, finer arc classes, MILP bounds and a DP that remembers the
# previous run's type were measured and did not raise the bound on the paper instances
# (docs/notes/placement-bounds.md).
#
# Precomputation. On a circulant topology (X[i, j] = X[0, j - i], TopoOpt's) rotating every server by
# r maps shortest paths to shortest paths, arc classes to themselves, and a type (k, s) with
# s + r < n/k to (k, s + r) with the same replica order and ring strides (hop distances are
# rotation-invariant); so a pair's class volumes and busiest arc
# are those of the pair with both starts lowered by min(s, s'), and only pairs with a start 0 are
# computed (16 x fewer at n = 128). Float rounding: the busiest-arc tables are float32 sums scaled
# down by 1e-6, the final bound by 1e-9 (both far above the rounding).
# ------------------------------------------------------------------------------------------------
class _ChainData:
    """Per-type and per-pair data of the chain bound (see the comment block above)."""

    def __init__(
        self,
        instance: Instance,
        rf: RoutingFractions,
        ls: StrategyScorer,
        classes: np.ndarray,
        run_pair_layers: int = RUN_PAIR_LAYERS,
    ) -> None:
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
        # Pair data: class volumes of resharding (NT, NT, K) and, per distinct (P, p_{i+1}, a_i), the
        # busiest arc of P AR(t) + a_i RS(t, t') + p_{i+1} AR(t') (NT, NT), P the AllReduced bytes of the
        # last m = 1..RUN_PAIR_LAYERS layers of the run that ends at layer i (run pairs, comment block).
        # On a circulant topology these are invariant under rotating the two starts together while
        # neither wraps (s -> s - m, m = min(s, s')), so only pairs with a start 0 are computed: for each
        # start-0 type t the pattern row of t against every type, once as the first layer and once as
        # the second (resharding is symmetric).
        cp = np.concatenate([[0.0], np.cumsum(ls.param)])
        self.run_pair_layers = rpl = max(1, int(run_pair_layers))
        run_p = [[float(cp[i + 1] - cp[i + 1 - m]) for m in range(1, min(rpl, i + 1) + 1)] for i in range(L - 1)]
        keys = sorted({(P, ls.param[i + 1], ls.act[i]) for i in range(L - 1) for P in run_p[i]})
        any_act = any(key[2] > 0 for key in keys)
        base = np.flatnonzero(ls.type_s == 0) if is_circulant(rf) else np.arange(NT)
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
        self.rs_c = np.where(
            first[:, :, None], rs_rows[np.maximum(pos[c1], 0), c2], rs_rows[np.maximum(pos[c2], 0), c1]
        )
        # float32 sums of three non-negative terms are within 1e-6 relative: scale down to stay below.
        bw = {
            key: np.where(first, bw_first[key][np.maximum(pos[c1], 0), c2], bw_second[key][np.maximum(pos[c2], 0), c1])
            * (1 - 1e-6)
            for key in keys
        }
        # pair_bw[i][m - 1]: the run's last m layers (m = 1: the pair alone). The float32 maxima need not
        # grow with m bit for bit; a larger P never lowers the true value, so each table takes the
        # element-wise maximum with the previous (still below the true value).
        self.pair_bw = []
        for i in range(L - 1):
            tables = [bw[(P, ls.param[i + 1], ls.act[i])] for P in run_p[i]]
            self.pair_bw.append([tables[0]] + [np.maximum.reduce(tables[: m + 1]) for m in range(1, len(tables))])
        # Runs: layers j..i all on type t (one coset: their compute adds on each of its servers, their
        # AllReduces add on one ring). run_comp[j, i, t] = sum of lt, run_bw[j, i, t] = (sum of p) x the
        # ring's busiest arc per byte; inf where i < j or a layer cannot use t.
        fin = np.isfinite(ls.lt)
        cs = np.vstack([np.zeros(NT), np.cumsum(np.where(fin, ls.lt, 0.0), axis=0)])
        bad = np.vstack([np.zeros(NT), np.cumsum(~fin, axis=0)])  # layers that cannot use t, cumulated
        ar_max = (ls.ar * arc_inv).max(axis=1, initial=0.0)
        j_, i_ = np.arange(L)[:, None], np.arange(L)[None, :]
        ok = (i_ >= j_)[:, :, None] & (bad[1:][None, :, :] - bad[:-1][:, None, :] == 0)
        self.run_comp = np.where(ok, cs[1:][None, :, :] - cs[:-1][:, None, :], np.inf)
        self.run_bw = np.where(ok, (cp[1:][None, :] - cp[:-1][:, None])[:, :, None] * ar_max[None, None, :], np.inf)
        # pair_comp[i][m - 1]: the compute of the run's last m layers (on t) and layer i + 1 (on t'): added
        # when the two cosets share a server (s ≡ s' mod gcd(n/k, n/k')), else the larger; inf where a
        # layer cannot use its type. Identical tables are shared.
        g = n // ls.type_k
        meet = (ls.type_s[:, None] - ls.type_s[None, :]) % np.gcd(g[:, None], g[None, :]) == 0
        comp_of: dict[tuple[bytes, bytes], np.ndarray] = {}
        self.pair_comp = []
        for i in range(L - 1):
            tables = []
            for m in range(1, len(run_p[i]) + 1):
                rc = self.run_comp[i + 1 - m, i]
                key = (rc.tobytes(), ls.lt[i + 1].tobytes())
                if key not in comp_of:
                    comp_of[key] = np.where(
                        meet, rc[:, None] + ls.lt[i + 1][None, :], np.maximum(rc[:, None], ls.lt[i + 1][None, :])
                    )
                tables.append(comp_of[key])
            self.pair_comp.append(tables)
        self.param, self.act = ls.param, ls.act
        # Lookups: bytes per consumer layer (identical treatment per byte: each block picks its own
        # best server, so only the total per consumer matters) and class volumes (n, NT, K).
        self.lam = np.zeros(L)
        for b in w.blocks:
            self.lam[int(b.consumer)] += float(b.lookup_bytes)
        if (self.lam > 0).any():
            dist_c = (rf.P @ M).reshape(n, n, K)  # expected class-c arcs on the path u -> v
            us = ls.unit_server
            self.lk_c = np.stack(
                [(dist_c[:, us[t]].sum(axis=1) + dist_c[us[t], :].sum(axis=0)) / n for t in range(NT)], axis=1
            )  # [v, t, c] = (1/n) sum_u dist_c(v, us[t, u]) + dist_c(us[t, u], v)
        else:
            self.lk_c = None

    def pair_tables(self, run_ok: np.ndarray, pair_len: list[np.ndarray]) -> list[tuple]:
        """:meth:`dp`'s form of ``pair_len[i][t, t']`` (0..run_pair_layers: a change of type between
        layers i and i + 1 is allowed after a run on t of m layers when min(m, run_pair_layers) <=
        pair_len), restricted to the types a run may end on at layer i (rows) and start on at i + 1
        (cols): per pair (rows, cols, mask of the allowed changes, flat index (m - 1) * len(rows) + r
        into dp's table of runs by capped length, None when run_pair_layers = 1); rows or cols None
        when every type."""
        NT = self.NT
        out = []
        for i, plen in enumerate(pair_len):
            rows = np.flatnonzero(run_ok[: i + 1, i].any(axis=0))
            cols = np.flatnonzero(run_ok[i + 1, i + 1])
            sub = plen[np.ix_(rows, cols)]
            sub = np.minimum(sub, min(self.run_pair_layers, i + 1))  # a run ending at layer i has <= i + 1 layers
            ok = (sub > 0) & (rows[:, None] != cols[None, :])
            flat = (
                None
                if self.run_pair_layers == 1
                else np.maximum(sub.astype(np.intp) - 1, 0) * len(rows) + np.arange(len(rows))[:, None]
            )
            out.append((None if len(rows) == NT else rows, None if len(cols) == NT else cols, ok, flat))
        return out

    def dp(
        self,
        run_ok: np.ndarray,
        pairs: list[tuple[np.ndarray, np.ndarray | None]],
        mu: np.ndarray,
        extra: np.ndarray | None = None,
    ) -> tuple[float, np.ndarray | None]:
        """min over allowed chains of sum_c mu_c L_c / capsum_c, and the minimiser's vector
        (L_c / capsum_c) (None when no chain is allowed). A chain is a sequence of maximal runs:
        ``run_ok[j, i, t]`` allows layers j..i on type t as (part of) one run, ``pairs`` (from
        :meth:`pair_tables`) a change of type between layers i and i + 1 (never t' = t: that continues
        the run) after a run on t of m layers. The state at layer i is (start j of the current run,
        its type t). ``extra[i, t]`` (optional) is added to the value of layer i on type t (not to the
        vector); the minimiser's types are left in ``last_chain``."""
        wgt = mu / self.capc
        arw = self.ar_c @ wgt
        rsw = self.rs_c @ wgt
        lkw = (self.lk_c @ wgt).min(axis=0) if self.lk_c is not None else np.zeros(self.NT)
        L, NT = self.L, self.NT
        node = [self.param[i] * arw + self.lam[i] * lkw + (0.0 if extra is None else extra[i]) for i in range(L)]
        V = np.full((L, NT), np.inf)
        V[0] = np.where(run_ok[0, 0], node[0], np.inf)
        cols = every = np.arange(NT)
        back_j, back_t = [], []
        for i in range(1, L):
            # Q[m - 1, t]: the least value of a run on t ending at layer i - 1 whose length, capped at
            # run_pair_layers, is at most m (J: its start); a run of length m starts at i - m.
            R = min(self.run_pair_layers, i)
            Q = np.empty((R, NT))
            J = np.empty((R, NT), dtype=np.int64)
            for m in range(1, R + 1):
                if m < R or R == i:
                    val, start = V[i - m], np.full(NT, i - m)
                else:  # every run of R = run_pair_layers layers or more: starts 0..i - R
                    start = V[: i - R + 1].argmin(axis=0)
                    val = V[start, cols]
                if m == 1:
                    Q[0], J[0] = val, start
                else:
                    better = val < Q[m - 2]
                    Q[m - 1], J[m - 1] = np.where(better, val, Q[m - 2]), np.where(better, start, J[m - 2])
            rows, tcols, ok, flat = pairs[i - 1]
            if rows is not None:
                Q, J = Q[:, rows], J[:, rows]
            rs = (
                rsw
                if rows is None and tcols is None
                else rsw[np.ix_(every if rows is None else rows, every if tcols is None else tcols)]
            )
            W = Q[0][:, None] if flat is None else np.take(Q, flat)
            M = np.where(ok, W + self.act[i - 1] * rs, np.inf)
            if M.shape[0] == 0:  # no run can end here: nothing starts at layer i
                M = np.full((1, M.shape[1]), np.inf)
                rows, flat = np.zeros(1, np.int64), None
                J = np.zeros((1, 1), np.int64)
            r = M.argmin(axis=0)  # per allowed new type: the best row
            c = np.arange(M.shape[1])
            tprev, jprev = np.zeros(NT, np.int64), np.zeros(NT, np.int64)
            sel = every if tcols is None else tcols
            tprev[sel] = r if rows is None else rows[r]
            jprev[sel] = J[0][r] if flat is None else np.take(J, flat[r, c])
            back_t.append(tprev)
            back_j.append(jprev)
            V[:i] = np.where(run_ok[:i, i], V[:i] + node[i][None, :], np.inf)
            V[i] = np.inf
            V[i, sel] = np.where(run_ok[i, i, sel], M[r, c] + node[i][sel], np.inf)
        j, t = np.unravel_index(int(V.argmin()), V.shape)
        if not np.isfinite(V[j, t]):
            return np.inf, None
        value = float(V[j, t])
        chain = [0] * L
        i, j, t = L - 1, int(j), int(t)
        while i >= 0:
            chain[j : i + 1] = [t] * (i + 1 - j)
            if j == 0:
                break
            t_new, j_new = int(back_t[j - 1][t]), int(back_j[j - 1][t])
            i, j, t = j - 1, j_new, t_new
        vec = np.zeros_like(self.capc)
        for i, ti in enumerate(chain):
            vec += self.param[i] * self.ar_c[ti]
            if i + 1 < L:
                vec += self.act[i] * self.rs_c[ti, chain[i + 1]]
            if self.lam[i] > 0:
                vec += self.lam[i] * self.lk_c[int((self.lk_c[:, ti] @ wgt).argmin()), ti]
        self.last_chain = chain  # the minimiser, for inspection
        return value, vec / self.capc


def chain_bound(
    instance: Instance,
    rf: RoutingFractions,
    ls: StrategyScorer | None = None,
    *,
    upper: float | None = None,
    time_limit_s: float = 30.0,
    kelley_iters: int = 25,
    run_pair_layers: int = RUN_PAIR_LAYERS,
) -> tuple[float, dict]:
    """Seconds; a lower bound on the iteration time (or comm time) of every strategy on ``rf``'s
    topology (math in the comment block above), and a dict of what it did. ``upper`` (a known
    strategy's value) only lets cells above it be dropped early; ``time_limit_s`` bounds its time,
    the precomputation included (which is not interrupted: it took 0.3 s at dlrm-128-d8); the bound
    stays valid when it runs out."""
    started = time.perf_counter()
    ls = ls or StrategyScorer(instance, rf)
    if len(ls.type_k) > MAX_CHAIN_TYPES:
        return 0.0, {
            "chain_bound_skipped": f"{len(ls.type_k)} (k, s) types, more than {MAX_CHAIN_TYPES}: the "
            f"(types x types) tables would not fit"
        }
    w = instance.workload
    n = instance.n
    classes = arc_classes(rf)
    data = _ChainData(instance, rf, ls, classes, run_pair_layers)
    objective = instance.objective
    alpha = instance.cluster.hop_latency_s
    min_total = sum(min(k * w.layer_time(i, k) for k in layer.configs) for i, layer in enumerate(w.layers))
    c_floor = max(
        [(min_total + sum(float(b.compute_s) for b in w.blocks)) / n] + [float(b.compute_s) for b in w.blocks]
    )
    finite = np.isfinite(data.lt)
    # compute_model critical_path: C = max(busiest server, P) only grows, so every term here stays a
    # valid lower bound if P is ignored. P itself is at least Pmin, the critical path with every layer
    # at its least allowed time (P grows with each layer's time), a cheap floor on C for every chain.
    if ls.path_c is not None and finite.any(axis=1).all():
        least = np.where(finite, data.lt, np.inf).min(axis=1)
        c_floor = max(c_floor, float(path_floors(path_entries(w), least)[1][0]))

    # Values the thresholds run over. tau: every chain has tau(S) >= the largest of the layers' least times.
    tau_min = float(np.where(finite, data.lt, np.inf).min(axis=1).max())
    comp_terms = [data.run_comp.ravel()] + [pc.ravel() for pc in {id(a): a for t in data.pair_comp for a in t}.values()]
    bw_terms = [data.run_bw.ravel()] + [pb.ravel() for pb in {id(a): a for t in data.pair_bw for a in t}.values()]
    if objective == "comm_time":
        vt = np.array([np.inf])
        vt_lo = np.array([0.0])
    else:
        vt = np.unique(np.concatenate(comp_terms))
        vt = vt[np.isfinite(vt) & (vt >= tau_min * (1 - 1e-12))]
        vt_lo = np.maximum(vt, tau_min)
    vb = np.unique(np.concatenate(bw_terms))
    vb = vb[np.isfinite(vb)]

    def allowed(ht: int, hb: int) -> tuple[np.ndarray, list[np.ndarray]]:  # run_ok and pair_len of dp()
        tau, beta = vt[ht] * (1 + 1e-12), vb[hb] * (1 + 1e-12)
        if np.isfinite(tau):
            runs = (data.run_comp <= tau) & (data.run_bw <= beta)  # inf (not allowed) stays out
        else:
            runs = np.isfinite(data.run_comp) & (data.run_bw <= beta)
        pairs = []  # per pair: how many of the run's last layers may precede the change of type
        for pcs, pbs in zip(data.pair_comp, data.pair_bw):
            ok = (pcs[0] <= tau) & (pbs[0] <= beta)
            plen = ok.astype(np.int8)
            for pc, pb in zip(pcs[1:], pbs[1:]):
                ok &= (pc <= tau) & (pb <= beta)
                plen += ok
            pairs.append(plen)
        return runs, data.pair_tables(runs, pairs)

    def cell_value(lt_: int, lb_: int, g: float) -> float:
        comm = max(vb[lb_], g)
        return float(objective_of(instance, max(vt_lo[lt_], c_floor), comm + (alpha if comm > 0 else 0.0)))

    # Packing (comment block): in a cell every strategy has C < vt[ht + 1], so a server hosts at most q
    # layers of time >= vt[ht + 1] / (q + 1): sum of their degrees <= q n, relaxed with multipliers lam_q.
    levels = np.arange(1, PACKING_LEVELS + 1) if objective != "comm_time" else np.zeros(0, np.int64)
    lt_fin = np.where(finite, data.lt, 0.0)
    lam_cap = 4.0 * float(vb[-1]) / n if len(vb) else 0.0

    def packing(ht: int) -> np.ndarray:
        return packing_weights(lt_fin, ls.type_k, vt[ht + 1] if ht + 1 < len(vt) else np.inf, levels)

    def raise_g(ht: int, hb: int, g: float, y: np.ndarray, enough) -> tuple[float, np.ndarray, bool]:
        """Kelley's cutting planes for the cell's g from weights y = (mu, lam), until ``enough(g)``;
        (g, last y, any chain)."""
        nonlocal dp_calls
        runs, pairs = allowed(ht, hb)
        pack = packing(ht)
        K, Q = len(data.capc), len(pack)
        rhs = levels[:Q] * float(n)

        def call(y):
            mu, lam = y[:K], y[K : K + Q]
            live = Q and lam.any()
            val, vec = data.dp(runs, pairs, mu, np.tensordot(lam, pack, axes=1) if live else None)
            if vec is None:
                return np.inf, None
            chain = data.last_chain
            used = pack[:, np.arange(data.L), chain].sum(axis=1) - rhs  # W_q - q n of the minimiser
            return val - float(lam @ rhs) if live else val, np.r_[vec, used]

        y = np.r_[y[:K], y[K : K + Q], np.zeros(max(0, Q - len(y) + K))][: K + Q]
        val, cut = call(y)
        dp_calls += 1
        if cut is None:
            return g, y, False
        g, lp_top = max(g, val), np.inf
        # The master LP: max theta s.t. theta <= y . cut for every cut, mu in the simplex, 0 <= lam <=
        # lam_cap; kept in one HiGHS model, a row per cut (values scaled by the first g).
        scale = g if np.isfinite(g) and g > 0 else 1.0
        h, inf, idx = None, highspy.kHighsInf, np.arange(K + Q + 1, dtype=np.int32)
        for _ in range(kelley_iters):
            if enough(g) or (np.isfinite(lp_top) and lp_top - g <= KELLEY_TOL * lp_top):
                break
            if h is None:
                h = new_highs()
                h.addCols(
                    K + Q + 1,
                    np.r_[np.zeros(K + Q), -1.0],
                    np.r_[np.zeros(K + Q), -inf],
                    np.r_[np.full(K, inf), np.full(Q, lam_cap), inf],
                    0,
                    np.zeros(0, np.int32),
                    np.zeros(0, np.int32),
                    np.zeros(0),
                )
                h.addRow(1.0, 1.0, K, idx[:K], np.ones(K))
            h.addRow(-inf, 0.0, K + Q + 1, idx, np.r_[-cut / scale, 1.0])
            h.run()
            if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
                break
            x = np.asarray(h.getSolution().col_value)
            lp_top, y = x[-1] * scale, np.maximum(x[: K + Q], 0.0)
            y[:K] /= y[:K].sum()
            val, cut = call(y)
            dp_calls += 1
            g = max(g, val)
        return g, y, True

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
    deadline = started + time_limit_s
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
    info = {
        "chain_bound_s": float(best),
        "chain_bound_time_s": time.perf_counter() - started,
        "chain_bound_cells": cells,
        "chain_bound_dp_calls": dp_calls,
        "arc_classes": int(classes.max()) + 1,
        "chain_bound_timed_out": timed_out,
        "chain_bound_converged": exhausted,
        "chain_bound_cell": best_cell,
        "chain_bound_precompute_s": precompute_s,
    }
    return float(best), info
