"""Exact placement on a fixed topology by enumeration: a level-wise branch and bound for small problems.

The same problem as the placement MILP (:mod:`.placement`): one (degree k, coset start s) per layer
and one server per block, minimising the evaluator's iteration time with shortest-path routing and
the rings of the ring policy (:func:`~topoopt_ilp.models.placement.data.ring_strides`). On the small workloads (n = 6..10,
a few hundred options) it proves the optimum far faster than HiGHS on the MILP, whose root gap is
15-20 % (docs/benchmarks/placement-small.md), which is what the alternating method's placement step
needs. It gives up (returns ``"gave_up"``) when a level would
keep more than :data:`MAX_STATES` states, its work exceeds :data:`MAX_WORK` or the deadline
passes; the caller then solves the MILP.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from topoopt_ilp.core.strategy import Strategy
from topoopt_ilp.models.placement.data import path_entries, path_floors, pattern_loads
from topoopt_ilp.models.placement.scoring import StrategyScorer, block_classes

__all__ = ["MAX_STATES", "MAX_WORK", "MAX_TABLE_ENTRIES", "EnumerationResult", "enumerate_placement", "fits"]

#: States kept per level before the search gives up (peak memory about this many times the
#: candidates per state times (arcs + 2 n) floats, expanded in chunks of :data:`_CHUNK_ROWS`).
MAX_STATES = 20_000
#: Floats all runs together may produce (candidate states x (arcs + 2 n)) before the search gives
#: up: a deterministic stand-in for time, several times what the problems it settles use, so that
#: those it cannot settle give up in seconds instead of outgrowing the state budget late
#: (docs/notes/placement-enumeration.md).
MAX_WORK = 150_000_000
#: Candidate states (state x option) expanded at once.
_CHUNK_ROWS = 200_000
#: The search's pattern tables (resharding between every two option types, lookups from every server
#: to every type) hold types^2 x arcs + types x n x arcs floats; above this many it is not tried
#: (128 servers, degree 8: 255 types, 1024 arcs, 6.7e7 - and far too many states anyway).
MAX_TABLE_ENTRIES = 20_000_000
#: Each failed cutoff is raised by this factor (the first is the lower bound times it).
_CUTOFF_STEP = 1.04
#: States are merged when their loads, compute and memory agree to this relative precision.
_MERGE_DIGITS = 9


@dataclass(frozen=True)
class EnumerationResult:
    strategy: Strategy
    iteration_time_s: float  # as the search scores it (the caller re-scores it with the evaluator)
    cutoffs: tuple[float, ...]  # the cutoffs tried, seconds (the last one found the optimum)
    states: tuple[int, ...]  # states kept per level in the last run


# ------------------------------------------------------------------------------------------------
# The search
#
# Data (from StrategyScorer, per option type t = (k, s)): cov_t the servers of the coset, AR_t the arc
#   busy time of one parameter byte's ring, RS_{t,t'} of one activation byte resharded between t
#   and t', LK_t[v] of one lookup byte between server v and t's replicas, and the longest path of
#   each pattern; lt[i, t] layer i's time on t (inf when k is no config of i or the replica cannot
#   fit), rep_mem[i, t] its replica memory; per block its bytes, lookup bytes, compute, consumer.
# State after layers 0..i (then blocks 0..j): arc busy times l, compute c and memory m per server,
#   longest path h; with compute_model critical_path the running critical path R (placement.data:
#   R_0 = 0, R_{i+1} = max(R_i, e_i) + lt[i, t_i], P = R_L; blocks leave it alone); and what its
#   completions depend on: the last layer's type, the consumer layers' types, the last block's server.
# Score of a complete state: combine(max(max c, R), max l, h) (compute + bandwidth + alpha h with
#   overlap none, the max of compute and communication with overlap full, communication alone for the
#   comm_time objective) = the evaluator's iteration time of the strategy it encodes.
# Bound: each step adds non-negative loads, compute and memory and takes a max of path lengths, and
#   combine is monotone, so for every completion of a state
#       combine(max(max c, (sum c + W) / n, Pfloor), max l, h)  <=  its score,
#   W = the least total compute still to come (per layer min_t k_t lt[i, t], plus every block's);
#   Pfloor = 0 under busiest_server, else max(R + suffix[d], rest[d]) with d the layers placed
#   (placement.data.path_floors over each layer's least time min_t lt[i, t]): P >= both.
# Search: level by level (one layer, then one block, per level), keeping the states whose bound
#   is at most the cutoff U and whose memory fits; identical blocks take non-decreasing servers
#   (they are interchangeable); states equal in everything their completions depend on (R included:
#   every completion adds the same to it) are merged (to 1e-9 relative). A run with cutoff U meets
#   every strategy scoring at most U, so when it
#   ends with a complete state its best one is optimal. U starts just above a lower bound and
#   rises geometrically (a low cutoff keeps few states); at the incumbent's score a run that finds
#   nothing proves the incumbent optimal. A run that finds nothing also proves every score at
#   least the least bound it pruned (each strategy's score is at least the bound of its pruned
#   ancestor), so the next U is at least that (IDA*'s rule); runs below it would find nothing.
# ------------------------------------------------------------------------------------------------
class _GaveUp(Exception):
    """A level outgrew the state or work budget, or the deadline passed."""


def fits(ls: StrategyScorer) -> bool:
    """Whether the search's tables for ``ls``'s workload and topology stay within :data:`MAX_TABLE_ENTRIES`."""
    nt, arcs = len(ls.type_k), len(ls.rf.tail)
    return nt * nt * arcs + nt * ls.n * arcs <= MAX_TABLE_ENTRIES


class _Tables:
    """The search's view of the workload on one topology, arc loads as busy times (seconds)."""

    def __init__(self, ls: StrategyScorer) -> None:
        self.ls = ls
        n, NT = ls.n, len(ls.type_k)
        self.n, self.NT, self.A = n, NT, len(ls.rf.tail)
        self.cov = ls.coverage().astype(float)
        self.AR = ls.ar * ls.arc_inv
        # Pattern tables, each one sparse product (only those the workload uses): resharding one
        # activation byte between types t and t' (1/n per unit, both ways), and one lookup byte
        # between server v and type t's replicas (1/n per unit, both ways).
        us = ls.unit_server
        if (ls.act[:-1] > 0).any():
            src, dst = np.repeat(us, NT, axis=0).ravel(), np.tile(us, (NT, 1)).ravel()  # pattern t * NT + t'
            self.RS, self.RS_hop = self._patterns(np.repeat(np.arange(NT * NT), n), src, dst, (NT, NT))
        if (ls.blk_lookup > 0).any():
            src, dst = np.tile(np.repeat(np.arange(n), n), NT), np.repeat(us, n, axis=0).ravel()  # pattern t * n + v
            self.LK, self.LK_hop = self._patterns(np.repeat(np.arange(NT * n), n), src, dst, (NT, n))
        w = ls.w
        L = len(w.layers)
        work = np.where(np.isfinite(ls.lt), ls.lt * ls.type_k[None, :], np.inf).min(axis=1)
        blk_total = float(ls.blk_comp.sum())
        # least compute still to come after layer i (index i + 1 = layers done) and after block j
        self.rest_layers = np.concatenate([np.cumsum(work[::-1])[::-1], [0.0]]) + blk_total
        classes = block_classes(w)
        self.block_order = [j for cls in classes for j in cls]
        first = {cls[0] for cls in classes}
        self.block_first = [j in first for j in self.block_order]
        comp = ls.blk_comp[self.block_order] if self.block_order else np.zeros(0)
        self.rest_blocks = np.concatenate([np.cumsum(comp[::-1])[::-1], [0.0]])
        self.consumers = list(ls.consumers)
        self.L = L
        # critical_path: e_c per layer and the floors of the path still to come (comment block)
        self.critical = ls.path_c is not None
        self.path_e = path_entries(w)
        least = np.where(np.isfinite(ls.lt), ls.lt, np.inf).min(axis=1)
        self.path_suffix, self.path_rest = path_floors(self.path_e, np.where(np.isfinite(least), least, 0.0))

    def _patterns(
        self, pid: np.ndarray, src: np.ndarray, dst: np.ndarray, shape: tuple[int, int]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Arc busy times (shape + (A,)) and hops (shape) of patterns sending 1/n both ways per triplet."""
        both = lambda x, y: np.concatenate([x, y])  # noqa: E731
        val = np.full(2 * pid.size, 1.0 / self.n)
        loads, hops, _ = pattern_loads(
            self.ls.rf, both(pid, pid), both(src, dst), both(dst, src), val, shape[0] * shape[1]
        )
        return (loads.toarray() * self.ls.arc_inv).reshape(*shape, -1), hops.reshape(shape)


@dataclass
class _States:
    types: np.ndarray  # (S, layers done) int
    servers: np.ndarray  # (S, blocks done) int
    load: np.ndarray  # (S, A) seconds
    comp: np.ndarray  # (S, n) seconds
    mem: np.ndarray  # (S, n) bytes
    hop: np.ndarray  # (S,) int
    path: np.ndarray  # (S,) seconds: the running critical path R (0 under busiest_server)

    def take(self, keep: np.ndarray) -> _States:
        return _States(
            self.types[keep],
            self.servers[keep],
            self.load[keep],
            self.comp[keep],
            self.mem[keep],
            self.hop[keep],
            self.path[keep],
        )

    @staticmethod
    def concat(parts: list[_States], tb: _Tables, nt: int, nb: int) -> _States:
        if not parts:
            return _States(
                np.zeros((0, nt), np.int64),
                np.zeros((0, nb), np.int64),
                np.zeros((0, tb.A)),
                np.zeros((0, tb.n)),
                np.zeros((0, tb.n)),
                np.zeros(0, np.int64),
                np.zeros(0),
            )
        return _States(
            *(
                np.concatenate([getattr(p, f) for p in parts])
                for f in ("types", "servers", "load", "comp", "mem", "hop", "path")
            )
        )


def _bound(tb: _Tables, st: _States, rest: float) -> np.ndarray:
    cmax = np.maximum(st.comp.max(axis=1), (st.comp.sum(axis=1) + rest) / tb.n)
    if tb.critical:
        d = st.types.shape[1]  # layers placed
        cmax = np.maximum(cmax, np.maximum(st.path + tb.path_suffix[d], tb.path_rest[d]))
    return np.asarray(tb.ls.combine(cmax, st.load.max(axis=1, initial=0.0), st.hop))


def _merge(tb: _Tables, st: _States, scale: float) -> _States:
    """One state per class of states whose completions are the same (see the comment block)."""
    if len(st.hop) < 2:
        return st
    last_type = st.types[:, -1:]
    cons = st.types[:, [c for c in tb.consumers if c < st.types.shape[1]]]
    last_server = st.servers[:, -1:]
    key = np.concatenate(
        [
            last_type,
            cons,
            last_server,
            st.hop[:, None],
            np.round(st.load / scale, _MERGE_DIGITS).view(np.int64),
            np.round(st.comp / scale, _MERGE_DIGITS).view(np.int64),
            np.round(st.mem / max(float(st.mem.max()), 1.0), _MERGE_DIGITS).view(np.int64),
        ]
        + ([np.round(st.path[:, None] / scale, _MERGE_DIGITS).view(np.int64)] if tb.critical else []),
        axis=1,
    )
    key = np.ascontiguousarray(key)
    _, first = np.unique(key.view(np.dtype((np.void, key.dtype.itemsize * key.shape[1]))).ravel(), return_index=True)
    return st.take(np.sort(first))


class _Budget:
    """The deadline and the work left (see :data:`MAX_WORK`); ``charge`` raises _GaveUp when either runs out."""

    def __init__(self, deadline: float | None, work: float) -> None:
        self.deadline, self.work = deadline, work

    def charge(self, tb: _Tables, rows: int = 0) -> None:
        self.work -= rows * (tb.A + 2 * tb.n)
        if self.work < 0 or (self.deadline is not None and time.perf_counter() > self.deadline):
            raise _GaveUp


def _expand_layer(tb: _Tables, st: _States, i: int, cutoff: float, budget: _Budget) -> tuple[_States, float]:
    """The states after layer ``i`` whose bound is within ``cutoff``, and the least bound pruned."""
    ls = tb.ls
    ts = np.flatnonzero(np.isfinite(ls.lt[i]))
    param, act = float(ls.param[i]), float(ls.act[i - 1]) if i > 0 else 0.0
    add_load = param * tb.AR[ts]  # (T, A)
    add_hop = ls.ar_hop[ts] if param > 0 else np.zeros(len(ts), np.int64)
    add_comp = ls.lt[i, ts][:, None] * tb.cov[ts]
    add_mem = ls.rep_mem[i, ts][:, None] * tb.cov[ts]
    budget.charge(tb, len(st.hop) * len(ts))
    out = []
    rows = max(1, _CHUNK_ROWS // max(1, len(ts)))
    for a in range(0, len(st.hop), rows):
        budget.charge(tb)
        ch = st.take(slice(a, a + rows))
        S, T = len(ch.hop), len(ts)
        load = ch.load[:, None, :] + add_load[None]
        hop = np.maximum(ch.hop[:, None], add_hop[None])
        if act > 0:
            prev = ch.types[:, -1]
            load = load + act * tb.RS[prev][:, ts]
            hop = np.maximum(hop, tb.RS_hop[prev][:, ts])
        new = _States(
            np.concatenate([np.repeat(ch.types, T, axis=0), np.tile(ts, S)[:, None]], axis=1),
            np.repeat(ch.servers, T, axis=0),
            load.reshape(S * T, -1),
            (ch.comp[:, None, :] + add_comp[None]).reshape(S * T, -1),
            (ch.mem[:, None, :] + add_mem[None]).reshape(S * T, -1),
            hop.reshape(-1),
            (np.maximum(ch.path, tb.path_e[i])[:, None] + ls.lt[i, ts][None, :]).reshape(-1)
            if tb.critical
            else np.zeros(S * T),
        )
        out.append(new)
    return _prune(tb, out, tb.rest_layers[i + 1], cutoff, st.types.shape[1] + 1, st.servers.shape[1])


def _expand_block(tb: _Tables, st: _States, j: int, pos: int, cutoff: float, budget: _Budget) -> tuple[_States, float]:
    """The states after block ``j`` (``pos``-th in order) whose bound is within ``cutoff``, and the
    least bound pruned."""
    ls = tb.ls
    n = tb.n
    lookup, comp, mem = float(ls.blk_lookup[j]), float(ls.blk_comp[j]), float(ls.blk_mem[j])
    c = int(ls.blk_cons[j])
    budget.charge(tb, len(st.hop) * n)
    out = []
    rows = max(1, _CHUNK_ROWS // n)
    for a in range(0, len(st.hop), rows):
        budget.charge(tb)
        ch = st.take(slice(a, a + rows))
        S = len(ch.hop)
        v = np.tile(np.arange(n), S)
        src = np.repeat(np.arange(S), n)
        if not tb.block_first[pos]:  # identical blocks: non-decreasing servers
            ok = v >= ch.servers[src, -1]
            v, src = v[ok], src[ok]
        load = ch.load[src]
        hop = ch.hop[src]
        if lookup > 0:
            tc = ch.types[src, c]
            load = load + lookup * tb.LK[tc, v]
            hop = np.maximum(hop, tb.LK_hop[tc, v])
        cm, mm = ch.comp[src], ch.mem[src]
        cm[np.arange(len(v)), v] += comp
        mm[np.arange(len(v)), v] += mem
        new = _States(
            ch.types[src], np.concatenate([ch.servers[src], v[:, None]], axis=1), load, cm, mm, hop, ch.path[src]
        )
        out.append(new)
    return _prune(tb, out, tb.rest_blocks[pos + 1], cutoff, st.types.shape[1], st.servers.shape[1] + 1)


def _prune(tb: _Tables, parts: list[_States], rest: float, cutoff: float, nt: int, nb: int) -> tuple[_States, float]:
    """The states of ``parts`` that fit in memory with bound at most ``cutoff``, and the least bound
    of those that fit but were cut (inf when none)."""
    kept, least = [], math.inf
    for new in parts:
        bound = _bound(tb, new, rest)
        fits_memory = new.mem.max(axis=1) <= tb.ls.cap
        keep = (bound <= cutoff) & fits_memory
        least = min(least, float(bound[fits_memory & ~keep].min(initial=math.inf)))
        kept.append(new.take(keep))
    return _States.concat(kept, tb, nt, nb), least


def _run(
    tb: _Tables, cutoff: float, scale: float, max_states: int, budget: _Budget
) -> tuple[_States, list[int], float]:
    """Every complete state scoring at most ``cutoff``, the level sizes, and the least bound pruned
    (raises _GaveUp: a level outgrew ``max_states`` or the budget ran out)."""
    n = tb.n
    st = _States(
        np.zeros((1, 0), np.int64),
        np.zeros((1, 0), np.int64),
        np.zeros((1, tb.A)),
        np.zeros((1, n)),
        np.zeros((1, n)),
        np.zeros(1, np.int64),
        np.zeros(1),
    )
    sizes, least = [], math.inf
    steps = [("layer", i) for i in range(tb.L)] + [("block", p) for p in range(len(tb.block_order))]
    for kind, x in steps:
        if kind == "layer":
            st, pruned = _expand_layer(tb, st, x, cutoff, budget)
        else:
            st, pruned = _expand_block(tb, st, tb.block_order[x], x, cutoff, budget)
        least = min(least, pruned)
        st = _merge(tb, st, scale)
        sizes.append(len(st.hop))
        if len(st.hop) > max_states:
            raise _GaveUp
        if not len(st.hop):
            break
    return st, sizes, least


def enumerate_placement(
    ls: StrategyScorer,
    lower: float,
    upper: float,
    *,
    max_states: int = MAX_STATES,
    max_work: float = MAX_WORK,
    deadline: float | None = None,
) -> tuple[str, EnumerationResult | None]:
    """The optimal strategy on ``ls``'s topology, by the search of the comment block with rising cutoffs.

    ``lower`` is a valid lower bound and ``upper`` the score of a known strategy (seconds; ``inf``
    when none is known: one run without cutoff). Returns ``("better", result)`` (the optimum,
    strictly below ``upper``), ``("incumbent", None)`` (nothing scores below ``upper``: the known
    strategy is optimal), ``("infeasible", None)`` (no strategy fits in memory; only without
    ``upper``) or ``("gave_up", None)`` (a level outgrew ``max_states``, the runs together
    ``max_work`` (see :data:`MAX_WORK`), or the deadline passed).
    """
    tb = _Tables(ls)
    budget = _Budget(deadline, max_work)
    scale = max(lower, 1e-9)  # the merge precision: 1e-9 of the optimum's order of magnitude
    cutoff = min(scale * _CUTOFF_STEP, upper) if math.isfinite(upper) else math.inf
    tried = []
    while True:
        tried.append(cutoff)
        try:
            st, sizes, least_pruned = _run(tb, cutoff * (1 + 1e-9), scale, max_states, budget)
        except _GaveUp:
            return "gave_up", None
        if len(st.hop):
            comp = np.maximum(st.comp.max(axis=1), st.path) if tb.critical else st.comp.max(axis=1)
            score = np.asarray(ls.combine(comp, st.load.max(axis=1, initial=0.0), st.hop))
            b = int(np.argmin(score))
            if score[b] < upper:
                servers = np.zeros(len(ls.w.blocks), np.int64)
                servers[tb.block_order] = st.servers[b]
                t = st.types[b]
                strategy = Strategy(
                    tuple(int(k) for k in ls.type_k[t]),
                    tuple(int(s) for s in ls.type_s[t]),
                    tuple(int(v) for v in servers),
                )
                return "better", EnumerationResult(strategy, float(score[b]), tuple(tried), tuple(sizes))
        if cutoff >= upper:
            return ("incumbent" if math.isfinite(upper) else "infeasible"), None
        cutoff = min(max(cutoff * _CUTOFF_STEP, least_pruned), upper)
