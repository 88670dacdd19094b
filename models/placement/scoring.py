"""Scoring placement strategies incrementally: the hub every placement search builds on.

:class:`StrategyScorer` holds one strategy on one topology and scores a move (a layer's degree or
coset, a segment of layers, a block's server, an exchange) by the evaluator's definitions without
re-evaluating the whole strategy, and descends by best improvement. :class:`SearchBudget` says
when a search stops (a deadline and a move count); :func:`block_classes` groups identical blocks.
"""

from __future__ import annotations

import math
import time

import numpy as np

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.strategy import Strategy
from topoopt_ilp.core.workload import MEMORY_RTOL, Workload, coset
from topoopt_ilp.models.placement.data import RoutingFractions, objective_of, path_entries, pattern_loads, ring_pairs

__all__ = ["SearchBudget", "StrategyScorer", "block_classes"]


class SearchBudget:
    """Where a local search stops: a wall-clock ``deadline`` (a ``time.perf_counter()``) and a number
    of ``moves`` (one per segment, shift, block or exchange move scored; unlimited by default).

    Seconds depend on the machine and on what else runs on it; moves do not. So a search that stops
    on its moves, before its deadline, returns the same strategy for the same seed on any machine,
    however loaded: the deadline is then only the safety net. :meth:`part` gives a tighter budget
    that counts into the same moves (a search's phases share one count)."""

    def __init__(self, deadline: float, moves: float = math.inf, _spent: list[int] | None = None) -> None:
        self.deadline, self.moves = deadline, moves
        self._spent = [0] if _spent is None else _spent  # shared by every part of one budget

    @property
    def used(self) -> int:
        """Moves scored so far (by this budget and every part of it)."""
        return self._spent[0]

    def charge(self) -> None:
        self._spent[0] += 1

    def spent(self) -> bool:
        return self._spent[0] >= self.moves or time.perf_counter() > self.deadline

    def part(self, deadline: float = math.inf, moves: float = math.inf) -> SearchBudget:
        """The same count, stopping at the earlier deadline and at the smaller move total."""
        return SearchBudget(min(self.deadline, deadline), min(self.moves, moves), self._spent)


def block_classes(w: Workload) -> list[list[int]]:
    """Identical blocks (same bytes, lookups, compute, consumer), in index order."""
    classes: dict[tuple, list[int]] = {}
    for j, b in enumerate(w.blocks):
        classes.setdefault((float(b.bytes), float(b.lookup_bytes), float(b.compute_s), int(b.consumer)), []).append(j)
    return list(classes.values())


# ------------------------------------------------------------------------------------------------
# Local search (incumbent): moves scored incrementally by the evaluator's definitions
#
# A strategy's arc loads are a sum of patterns: each layer's AllReduce (param_i x the ring pattern
# of its (k, s)), each consecutive pair's resharding (act_i x the pattern of the two (k, s)) and
# each consumer's lookups (bytes per server x the pattern of its (k, s)); compute and memory are
# sums over cosets and block servers; hops a maximum over the patterns in use. A move re-places a
# run of consecutive layers on one common (k, s) (so the run reshards nothing inside, which single-
# layer moves cannot reach from a uniform start), rotates the starts of a suffix of layers together
# (s -> s + r mod n/k: on a circulant topology, where no start wraps, only the resharding at the cut
# changes, so a badly placed boundary - e.g. one that puts a whole resharding on a single arc - is
# fixed without breaking the runs; scored by a full refresh per rotation) or puts one block on
# another server; segment and block candidates are scored at once as dense (candidates, arcs)
# arrays. When none of these improves, type exchanges are tried (two layers or two maximal runs
# trade their (k, s), scored by a full refresh each): with identical layers they move a run to
# another coset without adding compute anywhere, the only way on once every server is at the
# compute maximum (BERT's local optima). The result is only an upper bound: it is re-scored by
# :func:`strategy_times` and handed to the MILP as incumbent and warm start.
# With compute_model critical_path the compute term is max(busiest server, P), P the critical path
# (data.path_rows): P depends on the layers' types only, as a maximum of entry sums e_c + sum_{i >= c}
# lt_i; a segment move recomputes those sums for every candidate type from the current suffix sums.
# ------------------------------------------------------------------------------------------------
class StrategyScorer:
    """Incremental scorer and best-improvement descent over strategies on one topology."""

    _CACHE = 96  # resharding pattern tables kept (each (types, arcs) float64)

    def __init__(self, instance: Instance, rf: RoutingFractions) -> None:
        w = instance.workload
        n = instance.n
        self.instance, self.w, self.n, self.rf = instance, w, n, rf
        self.moves_scored = 0  # by improve_strategy's searches on this scorer (SearchBudget moves)
        self.alpha = instance.cluster.hop_latency_s
        self.arc_inv = 1.0 / rf.cap
        self.cap = float(w.server_memory_bytes) * (1 + MEMORY_RTOL)
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
            a, b, share = ring_pairs(rf, coset(n, int(tk[t]), int(ts[t])))
            pid.append(np.full(a.size, t)), src.append(a), dst.append(b)
            val.append(share * (2.0 * (tk[t] - 1) / tk[t]))
        cat = lambda p, dt=np.int64: np.concatenate(p).astype(dt) if p else np.zeros(0, dt)
        ar, self.ar_hop, _ = pattern_loads(rf, cat(pid), cat(src), cat(dst), cat(val, np.float64), NT)
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
        self._pair_cache: dict[tuple[int, int], tuple[np.ndarray, int]] = {}
        self.type_base = {int(k): self.type_of[(int(k), 0)] for k in degs}  # type of (k, s) = type_base[k] + s
        self._lk_cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        # critical_path: the undominated entry layers c and their e_c (data.path_rows); None: busiest_server
        self.path_c = self.path_e = None
        if w.compute_model == "critical_path" and instance.objective != "comm_time":
            e = path_entries(w)
            self.path_c = np.array([c for c in range(L) if c == 0 or e[c] > e[:c].max()], dtype=np.int64)
            self.path_e = e[self.path_c]

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
            loads, hops, _ = pattern_loads(
                self.rf,
                np.concatenate([pid, pid]),
                np.concatenate([a, b]),
                np.concatenate([b, a]),
                np.concatenate([v, v]),
                NT,
            )
            hit = (loads.toarray(), hops)
            if len(self._rs_cache) >= self._CACHE:
                self._rs_cache.pop(next(iter(self._rs_cache)))
        self._rs_cache[t] = hit
        return hit

    def pair_reshard(self, t1: int, t2: int) -> tuple[np.ndarray, int]:
        """Arc loads (A,) and hops of resharding one activation byte between types t1 and t2 (a row
        of :meth:`reshard` when that table is cached, else the one pattern alone)."""
        hit = self._rs_cache.get(t1)
        if hit is not None:
            return hit[0][t2], int(hit[1][t2])
        key = (t1, t2)
        hit = self._pair_cache.get(key)
        if hit is None:
            n = self.n
            a, b = self.unit_server[t1], self.unit_server[t2]
            v = np.full(n, 1.0 / n)
            loads, hops, _ = pattern_loads(
                self.rf,
                np.zeros(2 * n, dtype=np.int64),
                np.concatenate([a, b]),
                np.concatenate([b, a]),
                np.concatenate([v, v]),
                1,
            )
            hit = (loads.toarray()[0], int(hops[0]))
            if len(self._pair_cache) >= 50_000:
                self._pair_cache.clear()
            self._pair_cache[key] = hit
        return hit

    def lookup_per_server(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Arc loads (n, A) and hops (n,) of one lookup byte from each server to type t's replicas."""
        hit = self._lk_cache.get(t)
        if hit is None:
            n = self.n
            V = np.repeat(np.arange(n), n)
            d = np.tile(self.unit_server[t], n)
            v = np.full(n * n, 1.0 / n)
            loads, hops, _ = pattern_loads(
                self.rf,
                np.concatenate([V, V]),
                np.concatenate([V, d]),
                np.concatenate([d, V]),
                np.concatenate([v, v]),
                n,
            )
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
        loads, hops, _ = pattern_loads(
            self.rf,
            np.concatenate([pid, pid]),
            np.concatenate([src, dst]),
            np.concatenate([dst, src]),
            np.concatenate([val, val]),
            NT,
        )
        return loads.toarray(), hops

    def coverage(self) -> np.ndarray:
        """(types, n) 0/1: the servers of each type's coset."""
        cov = np.zeros((len(self.type_k), self.n), dtype=np.int64)
        for t in range(len(self.type_k)):
            cov[t, self.unit_server[t][:: self.n // int(self.type_k[t])]] = 1
        return cov

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
                ld, hp = self.pair_reshard(int(t[i]), int(t[i + 1]))
                self.rs_load[i] = self.act[i] * ld
                self.rs_h[i] = hp
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

    def suffix(self) -> np.ndarray:
        """sum_{i >= c} lt_i of the current types, for c = 0..L (shape L + 1)."""
        lt = self.lt[np.arange(len(self.t)), self.t]
        return np.concatenate([np.cumsum(lt[::-1])[::-1], [0.0]])

    def path(self) -> float:
        """The critical path P of the current types (0 under busiest_server: it never binds)."""
        if self.path_c is None:
            return 0.0
        return float((self.path_e + self.suffix()[self.path_c]).max())

    def total_load(self) -> np.ndarray:
        return (
            self.ar_load.sum(axis=0)
            + self.rs_load.sum(axis=0)
            + sum(self.lk_load.values(), np.zeros(len(self.rf.tail)))
        )

    def hops(self) -> int:
        return int(max(self.ar_h.max(initial=0), self.rs_h.max(initial=0), max(self.lk_h.values(), default=0)))

    def combine(self, comp, bw, hops):
        return objective_of(self.instance, comp, bw + self.alpha * hops)

    def score(self) -> tuple[float, float]:
        tl = self.total_load() * self.arc_inv
        busy = tl.max(initial=0.0) > 0
        comp = max(self.comp.max(initial=0.0), self.path())
        it = float(self.combine(comp, tl.max(initial=0.0), self.hops() if busy else 0))
        return it, float((tl**2).sum() + (self.comp**2).sum())

    def strategy(self) -> Strategy:
        return Strategy(
            tuple(int(k) for k in self.type_k[self.t]),
            tuple(int(s) for s in self.type_s[self.t]),
            tuple(int(v) for v in self.bs),
        )

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
        if self.path_c is not None:
            # P per candidate type: the entry sums with layers i..j on that type (bad types give 0s,
            # their score is inf anyway).
            S = self.suffix()
            lt_new = np.where(bad[None, :], 0.0, self.lt[seg])  # (segment, NT)
            seg_suf = np.cumsum(lt_new[::-1], axis=0)[::-1] + S[j + 1]  # sum from c (in i..j) to the end
            P = np.zeros(len(self.type_k))
            for c, e in zip(self.path_c, self.path_e):
                if c > j:
                    val = np.full(len(self.type_k), S[c])
                elif c >= i:
                    val = seg_suf[c - i]
                else:
                    val = S[c] - S[i] + seg_suf[0]
                P = np.maximum(P, e + val)
            C = np.maximum(C, P)
        g = n // self.type_k
        sec = (tl**2).sum(axis=1) + (comp**2).sum() + (2 * lt_seg * cs.sum(axis=1) / g + self.type_k * lt_seg**2)
        it = self.combine(C, bw, H)
        it[bad], sec[bad] = np.inf, np.inf
        return it, sec

    def shift_move(self, i: int) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        """Iteration time and tie-break score of rotating the starts of layers i..L-1 together,
        s -> (s + r) mod n/k for r = 1..15 and the multiples of G/8 below G (G the largest n/k among
        them; r and r + G give the same starts), and the type vectors. On a circulant topology this
        moves only the resharding into layer i (and how the two parts overlap), which segment moves
        cannot do without breaking the runs; scored by a full refresh each."""
        t0 = self.t.copy()
        k = self.type_k[t0[i:]]
        g = self.n // k
        base = np.array([self.type_base[int(x)] for x in k])
        G = int(g.max())
        shifts = sorted(set(range(1, min(G, 16))) | {G * m // 8 for m in range(1, 8)} - {0, G})
        its, secs, types = [], [], []
        for r in shifts:
            tt = t0.copy()
            tt[i:] = base + (self.type_s[t0[i:]] + r) % g
            self.t = tt
            self.refresh()
            it, sec = self.score()
            if (self.mem > self.cap).any():
                it, sec = np.inf, np.inf
            its.append(it), secs.append(sec), types.append(tt)
        self.t = t0
        self.refresh()
        return np.array(its), np.array(secs), types

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
        C = np.maximum(max(comp.max(), self.path()), comp + self.blk_comp[j])  # P: blocks do not move it
        tl = loads * self.arc_inv
        it = self.combine(C, tl.max(axis=1), H)
        sec = (tl**2).sum(axis=1) + (comp**2).sum() + 2 * comp * self.blk_comp[j] + self.blk_comp[j] ** 2
        mem = self.mem.copy()
        mem[v] -= self.blk_mem[j]
        bad = mem + self.blk_mem[j] > self.cap
        it[bad], sec[bad] = np.inf, np.inf
        return it, sec

    def runs(self) -> list[tuple[int, int]]:
        """Maximal runs (first, last layer) of consecutive layers on one type."""
        L = len(self.t)
        cuts = [0] + [i for i in range(1, L) if self.t[i] != self.t[i - 1]] + [L]
        return [(a, b - 1) for a, b in zip(cuts[:-1], cuts[1:])]

    def exchange_candidates(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Type exchanges that keep the set of cosets in use: two single layers swap their types,
        or two maximal runs do (each keeps its layers). With identical layers (BERT's,
        DLRM's top and bottom MLPs) these move a run elsewhere without adding compute anywhere,
        which single-run moves cannot do once every server is at the compute maximum. As
        (layers, new types) pairs."""
        L, t = len(self.t), self.t
        out = [(np.array([i, j]), np.array([t[j], t[i]])) for i in range(L) for j in range(i + 1, L) if t[i] != t[j]]
        runs = self.runs()
        for a in range(len(runs)):
            for b in range(a + 1, len(runs)):
                (i1, j1), (i2, j2) = runs[a], runs[b]
                if j1 == i1 and j2 == i2:
                    continue  # a single-layer swap, listed above
                seg = np.r_[np.arange(i1, j1 + 1), np.arange(i2, j2 + 1)]
                out.append((seg, np.r_[np.full(j1 + 1 - i1, t[i2]), np.full(j2 + 1 - i2, t[i1])]))
        return out

    def exchange_move(self, cur: tuple[float, float], better, budget: SearchBudget) -> tuple[float, float] | None:
        """First improving exchange (:meth:`exchange_candidates`, scored by a full refresh each,
        each a move of ``budget``); applied, and its score returned; None (state unchanged) when none
        improves."""
        t0 = self.t.copy()
        for layers, types in self.exchange_candidates():
            if budget.spent():
                break
            budget.charge()
            self.t = t0.copy()
            self.t[layers] = types
            self.refresh()
            sc = self.score()
            if not (self.mem > self.cap).any() and better(sc, cur):
                return sc
        self.t = t0
        self.refresh()
        return None

    def descend(
        self, budget: SearchBudget, rng: np.random.Generator, shifts: bool = True, exchanges: bool = True
    ) -> tuple[float, float]:
        """Best-improvement descent over segment, suffix-shift (``shifts``) and block moves, then
        (``exchanges``, when those are stuck) type exchanges between layers or runs, until no move
        improves (or ``budget`` is spent: each move scored is one of its moves); returns the final
        (iteration time, tie-break)."""
        L = len(self.w.layers)
        cur = self.score()
        segments = [(i, j) for i in range(L) for j in range(i, L)]
        classes = block_classes(self.w)

        def better(a: tuple[float, float], b: tuple[float, float]) -> bool:
            return a[0] < b[0] * (1 - 1e-9) or (a[0] <= b[0] * (1 + 1e-12) and a[1] < b[1] * (1 - 1e-9))

        improved = True
        while improved and not budget.spent():
            improved = False
            for i, j in (segments[q] for q in rng.permutation(len(segments))):
                if budget.spent():
                    break
                budget.charge()
                it, sec = self.segment_move(i, j)
                tb = int(np.lexsort((sec, it))[0])
                if better((float(it[tb]), float(sec[tb])), cur):
                    self.t[i : j + 1] = tb
                    self.refresh()
                    cur = self.score()
                    improved = True
            for i in 1 + rng.permutation(L - 1) if shifts else ():
                if budget.spent():
                    break
                budget.charge()
                it, sec, types = self.shift_move(int(i))
                if it.size == 0:
                    continue
                r = int(np.lexsort((sec, it))[0])
                if better((float(it[r]), float(sec[r])), cur):
                    self.t = types[r]
                    self.refresh()
                    cur = self.score()
                    improved = True
            for members in classes:
                for v in np.unique(self.bs[members]):
                    if budget.spent():
                        break
                    budget.charge()
                    j = int(next(m for m in members if self.bs[m] == v))
                    it, sec = self.block_move(j)
                    vb = int(np.lexsort((sec, it))[0])
                    if better((float(it[vb]), float(sec[vb])), cur):
                        self.bs[j] = vb
                        self.refresh()
                        cur = self.score()
                        improved = True
            if not improved and exchanges and not budget.spent():
                sc = self.exchange_move(cur, better, budget)  # only once the cheaper moves are stuck
                if sc is not None:
                    cur, improved = sc, True
        return cur
