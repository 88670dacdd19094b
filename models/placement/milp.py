"""``placement``: the exact placement MILP for a fixed topology (workload mode, docs/methods/placement.md).

For a workload instance and a fixed link-count matrix ``X`` (the instance's ``fixed_topology``, or
TopoOpt's heuristic topology for the data-parallel start), choose per layer a data-parallel degree
``k`` and coset start ``s`` and per block a server, minimising the evaluator's iteration time with
shortest-path routing (every pair split equally over all its shortest paths on ``X``) and the
AllReduce rings of the ring policy (:func:`~.data.ring_strides`: by default each group split
equally over its TotientPerms rings of least hop total). The returned
:class:`~topoopt_ilp.core.solution.Solution` names those rings and no paths, so the evaluator (whose
fallback routing is the same shortest-path split) reproduces the model's link loads exactly.

The model is exact: at every integer point its link loads, compute times and hop count are those
:func:`topoopt_ilp.core.strategy.strategy_demand` and :mod:`topoopt_ilp.evaluation.evaluate` compute for the
strategy it encodes (with the workload's ``compute_model: critical_path``, the compute term is the
larger of the busiest server and the critical path of one micro-batch: the ``path`` rows below).
What keeps it small is the reductions listed above :func:`build_placement`; all of them are exact
except the optional ``max_starts`` restriction.

:func:`solve_placement` runs its stages inside one time limit: an iterated local search
(:func:`improve_strategy`, moves scored incrementally by the evaluator's definitions, from the best
start candidates, the pipeline starts among them) for the incumbent, warm start and pruning bound;
the relaxation bounds (:func:`relaxation_bound` and :func:`~.placement_bounds.chain_bound`, valid for
the unrestricted problem, no solver), which alone may prove the gap; the enumeration of small
problems (:mod:`.enumeration`) and, when the layer times share a unit and there are no
blocks, the compute-level search (:mod:`.placement_levels`), both exact; then the MILP -
unrestricted when it can be built, else restricted to evenly spaced starts plus the incumbent's
(recorded in ``details["restricted"]``); a model above
:data:`MILP_SEARCH_NONZEROS` non-zeros (with a time limit) is not solved: the time left goes to
more local search from the incumbent (``details["milp"]`` says so). The reported bound is
always valid for the unrestricted problem: the best of the unrestricted model's solver bound, the
relaxation bounds and a completed level search's; a restricted model's own bound stays in ``details``.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace

import numpy as np
import scipy.sparse as sp

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.solution import Solution, Topology
from topoopt_ilp.core.strategy import (
    Strategy,
    data_parallel,
    degrees_at_most,
    server_memory,
    stage_strategies,
    strategy_demand,
    strategy_to_dict,
    validate_strategy,
)
from topoopt_ilp.core.workload import MEMORY_RTOL, Workload, coset
from topoopt_ilp.errors import InputError, UnsupportedError
from topoopt_ilp.files import load_solution
from topoopt_ilp.heuristic.design import heuristic_design
from topoopt_ilp.models.common import ExactOptions, check_backend, export_model, run_model, solution_status, time_left
from topoopt_ilp.models.placement.bounds import chain_bound
from topoopt_ilp.models.placement.data import (
    RING_POLICIES,
    TIME_UNIT_S,
    RoutingFractions,
    layer_options,
    objective_of,
    path_rows,
    pattern_loads,
    placement_routing,
    ring_pairs,
    shortest_path_fractions,
    strategy_times,
)
from topoopt_ilp.models.placement.enumeration import enumerate_placement
from topoopt_ilp.models.placement.enumeration import fits as enumeration_fits
from topoopt_ilp.models.placement.levels import level_search, not_levelled
from topoopt_ilp.models.placement.local_search import improve_strategy, pipeline_starts, relaxation_bound
from topoopt_ilp.models.placement.scoring import StrategyScorer, block_classes
from topoopt_ilp.solvers import LinearModel, ModelBuilder, SolveResult

__all__ = [
    "MAX_PLACEMENT_NONZEROS",
    "MILP_MIN_SHARE",
    "MILP_SEARCH_NONZEROS",
    "RING_POLICIES",
    "SMALL_PLACEMENT_OPTIONS",
    "TIME_UNIT_S",
    "PlacementModel",
    "RoutingFractions",
    "build_placement",
    "heuristic_topology",
    "shortest_path_fractions",
    "solve_placement",
    "strategy_times",
]

#: Refuse to build a model whose estimated constraint non-zeros exceed this. Measured: HiGHS needs
#: tens of seconds just for the root LP of a placement model with a few million non-zeros, so
#: beyond 5 million there is no hope of a useful gap; pass ``max_starts`` or use the heuristic.
MAX_PLACEMENT_NONZEROS = 5_000_000
#: Above this many non-zeros :func:`solve_placement` (with a time limit and local search on) spends
#: the time left after the bounds on more local search instead of the solver: on the 128-server
#: paper instances models of 1-4.5 M non-zeros never improved on the local search's incumbent
#: within a 60 s limit, while the same seconds of local search did (docs/notes/placement-search.md).
MILP_SEARCH_NONZEROS = 1_000_000
#: At most this many placement options (every layer's (degree, coset start) pairs plus every block's
#: servers) the MILP has a few thousand non-zeros and HiGHS settles it in about a second, sooner than
#: the local search stalls: the local search is then off unless asked for (the small workloads of
#: ``benchmarks/small_workloads.py`` have 90-144 options and solve faster without it; the 128-server
#: instances have thousands; docs/notes/placement-search.md).
SMALL_PLACEMENT_OPTIONS = 400
#: The local search descends from at most this many of the best-scored candidates (each gets an
#: equal share of half its time): on dlrm-128-d8 the best 16 of its 387 candidates end better than
#: all of them sharing the same time (docs/notes/placement-search.md).
LOCAL_SEARCH_STARTS = 16
#: With a time limit, the start candidates are scored in order (the cheap ones first, the pipeline
#: starts last) only until this share of it has passed: scoring one takes milliseconds, but their
#: number grows with n (about 575 at 512 servers).
CANDIDATE_SCORING_SHARE = 0.1
#: Relative slack when pruning options by bounds: an option is only dropped when its lower bound
#: exceeds the incumbent by more than this, so rounding can never remove an optimal option.
_PRUNE_RTOL = 1e-6
OBJECTIVES = ("iteration_time", "comm_time")
#: ``formulation`` (``ExactOptions``, ``--formulation``): ``auto`` (default: the enumeration of
#: :mod:`.enumeration`, the MILP when it gives up), ``milp`` or ``enumeration`` (alone: when
#: it gives up, the incumbent is returned as ``feasible`` with the relaxation bound).
FORMULATIONS = ("auto", "milp", "enumeration")
#: Under ``auto`` with an incumbent, the MILP is built only when more than this share of the time
#: limit is left: building it is not interrupted by the limit (dlrm-128-d8: 1.7 s for the restriction
#: ladder; with a 1 s limit the solve took 2.1 s when the ladder was built with 0.08 s left).
MILP_MIN_SHARE = 0.25
#: Seconds the enumeration may take under ``auto`` without a time limit (with one: half of it).
AUTO_ENUMERATION_S = 30.0
_MEMORY_INFEASIBLE = (
    "memory: no assignment of layer configs and block servers keeps every server within "
    "server_memory_bytes (every other constraint family admits any strategy)"
)
#: Before pruning, the resharding patterns of every distinct pair of layer options are computed;
#: that work may be this many times the model limit (pruning usually removes most of it).
_WORK_FACTOR = 4
_CHUNK_PAIRS = 2000
#: Candidate pairs (before bound pruning) that the builder will score: beyond this the pruning pass
#: alone takes minutes (measured: 1.4 million pairs on 1024 arcs, ~45 s, nothing pruned).
_MAX_PAIR_CANDIDATES = 250_000


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
    return bool((server_memory(w, n, st) <= float(w.server_memory_bytes) * (1 + MEMORY_RTOL)).all())


def _candidates(w: Workload, n: int, rf: RoutingFractions) -> list[Strategy]:
    """Cheap strategies whose best one is the incumbent (upper bound) and warm start: TopoOpt's
    data-parallel start, every layer at one common degree (start 0, the largest allowed degree at
    most k), blocks round robin, the pipelines of data-parallel groups of every degree
    (:func:`~topoopt_ilp.core.strategy.stage_strategies`, the alternating method's second start: on
    bert-128-d8, 4 stages of 3 layers on the 4 cosets of degree 32 take 19.228 ms against the
    data-parallel start's 19.510, and the local search did not find them from the others), and the
    compute-balanced pipelines on adjacent cosets of :func:`~.local_search.pipeline_starts`."""
    out = [data_parallel(w, n)]
    blocks = tuple(b % n for b in range(len(w.blocks)))
    for k in sorted({k for layer in w.layers for k in layer.configs}):
        out.append(Strategy(degrees_at_most(w, k), (0,) * len(w.layers), blocks))
    return out + stage_strategies(w, n) + pipeline_starts(w, n, rf.dist)


# ------------------------------------------------------------------------------------------------
# The model
#
# Data
#   n servers, arcs e of X (X[e] > 0) with capacity cap_e = B X[e] bytes/s, hop latency alpha.
#   P[(u,v), e]  fraction of pair (u,v)'s bytes on arc e (equal split over all shortest paths).
#   Options o = (i, k, s) of layer i: k in configs_i, s a coset start, replica memory fits.
#     lt_o = layer_time(i, k); mem_o = memory_bytes_i + activation_bytes_i / k; cov_o[v] = [v in coset(k, s)].
#     AR_o[e] = arc load of its rings (ring_strides, 2(k-1)/k * param_bytes_i per member), hop_o its
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
#   path         (compute_model critical_path only) the chain of one micro-batch (data.path_rows):
#                sum_{o of layers i >= c} lt_o a[o] + e_c <= C   for c = 0 and every layer c whose
#                e_c (largest compute_s of its blocks) exceeds every earlier one; at an integer point
#                the largest left side is P, so C = max(busiest server, P), the evaluator's compute
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
#
# Steps of build_placement, each returning its part of the data: _layer_options (options o, their
# (k, s) types, lt, mem, AR_o, hop_o), _incumbent and _pruned_options (U, bound pruning),
# _resharding_pairs (pairs p, R_p, hop_p), _lookup_terms (Lam_c, LK_{v,o}, hop_{v,o}), _columns
# (the variables), _server_sums (cov); then one function per constraint family and _objective.
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


def _cat(parts: list, dtype=np.int64) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)


def _both_ways_loads(
    rf: RoutingFractions, src: np.ndarray, dst: np.ndarray, count: int
) -> tuple[sp.csr_array, np.ndarray]:
    """Arc loads (bytes) and hops of ``count`` patterns, pattern p moving 1/n byte both ways between
    ``src[p, r]`` and ``dst[p, r]`` for every batch unit r (both of shape (count, n))."""
    pid = np.repeat(np.arange(count), rf.n)
    s_, d_ = src.ravel(), dst.ravel()
    v_ = np.full(count * rf.n, 1.0 / rf.n)
    two = lambda x, y: np.concatenate([x, y])
    loads, hops, _ = pattern_loads(rf, two(pid, pid), two(s_, d_), two(d_, s_), two(v_, v_), count)
    return loads, hops


def _checked_inputs(instance: Instance, X: np.ndarray, rf: RoutingFractions | None) -> RoutingFractions:
    """Refuse what the model does not express; the routing fractions of ``X``."""
    if instance.workload is None:
        raise InputError(
            "the placement model needs a workload instance (layers and blocks); this instance has a fixed demand"
        )
    if instance.objective not in OBJECTIVES:
        raise InputError(f"the placement model minimises iteration_time or comm_time, not {instance.objective!r}")
    X = np.asarray(X)
    if X.shape != (instance.n, instance.n):
        raise InputError(f"the topology has {X.shape[0]} servers, the instance {instance.n}")
    rf = rf or shortest_path_fractions(X, instance.cluster.link_bytes_per_s)
    if (rf.dist < 0).any():
        raise UnsupportedError("the topology is disconnected; the placement model needs every pair reachable")
    return rf


# ---- the data steps: each returns its part of _PlacementData -----------------------------------
@dataclass
class _Options:
    """The layer options o = (i, k, s) with their data (math block: lt, mem, AR, hop), and the
    distinct (k, s) types their patterns are computed for once (then scaled per layer)."""

    opt_layer: np.ndarray
    opt_k: np.ndarray
    opt_s: np.ndarray
    opt_type: np.ndarray  # index into type_k
    lt: np.ndarray
    mem: np.ndarray
    ar_load: sp.csr_array  # (NO, A) bytes
    ar_hop: np.ndarray
    ar_time: np.ndarray  # seconds: the AllReduce's own busiest arc
    kept: list[np.ndarray]  # the options of each layer
    type_k: np.ndarray
    unit_server: np.ndarray  # (NT, n): the server holding batch unit r under type t

    def subset(self, idx: np.ndarray) -> _Options:
        """The options at ``idx``, renumbered (the types stay)."""
        fields_ = ("opt_layer", "opt_k", "opt_s", "opt_type", "lt", "mem", "ar_load", "ar_hop", "ar_time")
        take = {f: getattr(self, f)[idx] for f in fields_}
        return replace(self, **take, kept=[np.flatnonzero(take["opt_layer"] == i) for i in range(len(self.kept))])


def _layer_options(w: Workload, rf: RoutingFractions, max_starts: int | None, start: Strategy | None) -> _Options:
    """Options: every memory-feasible (i, k, s) with its compute time, replica memory and AllReduce
    load (rings of the ring policy, data.ring_strides), computed once per (k, s) type."""
    n = rf.n

    def allowed_starts(k: int) -> np.ndarray:
        st = _starts(n, k, max_starts)
        if max_starts is not None and start is not None:
            # the start's own (k, s) stay available, so the restricted model can only improve on it
            st = np.union1d(st, [s for kk, s in zip(start.layer_degree, start.layer_start) if kk == k])
        return st

    opt_layer, opt_k, opt_s = layer_options(w, n, allowed_starts)
    lt = np.array([w.layer_time(int(i), int(k)) for i, k in zip(opt_layer, opt_k)])
    mem = np.array([w.layers[int(i)].replica_memory(int(k)) for i, k in zip(opt_layer, opt_k)])
    types, opt_type = np.unique(opt_k * n + opt_s, return_inverse=True)
    type_k, type_s = types // n, types % n
    NT = len(types)
    g_of = n // type_k
    units = np.arange(n)
    unit_server = type_s[:, None] + (units[None, :] // g_of[:, None]) * g_of[:, None]

    # AllReduce pattern per type (one byte of parameters): member r -> r+p, 2(k-1)/k bytes split over
    # the rings of the ring policy (data.ring_strides).
    pid, src, dst, val = [], [], [], []
    for t in range(NT):
        k = int(type_k[t])
        if k < 2:
            continue
        a, b, share = ring_pairs(rf, coset(n, k, int(type_s[t])))
        pid.append(np.full(a.size, t)), src.append(a), dst.append(b), val.append(share * (2.0 * (k - 1) / k))
    ar_type, ar_hop_type, _ = pattern_loads(rf, _cat(pid), _cat(src), _cat(dst), _cat(val, np.float64), NT)
    param = np.array([float(w.layers[int(i)].param_bytes) for i in opt_layer])
    has_ar = (opt_k >= 2) & (param > 0)
    ar_load = sp.csr_array(sp.diags(np.where(has_ar, param, 0.0)) @ ar_type[opt_type])
    ar_time = (
        (sp.csr_array(ar_load @ sp.diags(1.0 / rf.cap))).max(axis=1).toarray().ravel()
        if len(rf.tail)
        else np.zeros(len(opt_layer))
    )
    return _Options(
        opt_layer,
        opt_k,
        opt_s,
        opt_type,
        lt,
        mem,
        ar_load,
        np.where(has_ar, ar_hop_type[opt_type], 0),
        ar_time,
        [np.flatnonzero(opt_layer == i) for i in range(len(w.layers))],
        type_k,
        unit_server,
    )


def _incumbent(
    instance: Instance, rf: RoutingFractions, start: Strategy | None
) -> tuple[Strategy | None, float | None]:
    """The incumbent and its iteration time U: the given start, else the best memory-feasible start
    candidate; (None, None) when none fits in memory."""
    w, n = instance.workload, instance.n
    if start is not None:
        if validate_strategy(w, n, start):
            raise InputError("the start strategy is invalid: " + "; ".join(validate_strategy(w, n, start)[:3]))
        candidates = [start]  # its own (k, s) are options even when the starts are restricted
    else:
        candidates = _candidates(w, n, rf)
    candidates = [st for st in candidates if _memory_feasible(w, n, st)]
    if not candidates:
        return None, None
    ub, j = min((strategy_times(instance, rf, st)["iteration_time_s"], j) for j, st in enumerate(candidates))
    return candidates[j], ub


@dataclass(frozen=True)
class _PruningBound:
    """Bound pruning (math block, Reductions): a part of a strategy is dropped when its lower bound
    exceeds the incumbent's time ``ub``; Cavg = the least average per-server compute."""

    instance: Instance
    incumbent: Strategy
    ub: float
    c_avg: float

    @classmethod
    def of(cls, instance: Instance, incumbent: Strategy | None, ub: float | None) -> _PruningBound | None:
        if ub is None:
            return None
        w = instance.workload
        min_total = sum(min(k * w.layer_time(i, k) for k in layer.configs) for i, layer in enumerate(w.layers))
        return cls(instance, incumbent, ub, (min_total + sum(float(b.compute_s) for b in w.blocks)) / instance.n)

    def keeps(self, compute: np.ndarray, comm: np.ndarray) -> np.ndarray:
        lb = objective_of(self.instance, np.maximum(compute, self.c_avg), comm)
        return lb <= self.ub * (1 + _PRUNE_RTOL)


def _pruned_options(instance: Instance, o: _Options, bound: _PruningBound | None) -> _Options:
    """The options that bound pruning keeps (all without a bound); every layer must keep one."""
    keep = np.ones(len(o.opt_layer), dtype=bool)
    if bound is not None:
        keep = bound.keeps(o.lt, o.ar_time + instance.cluster.hop_latency_s * o.ar_hop)
        inc = bound.incumbent
        for i in range(len(o.kept)):  # never drop the incumbent's own options (rounding safety)
            keep[(o.opt_layer == i) & (o.opt_k == inc.layer_degree[i]) & (o.opt_s == inc.layer_start[i])] = True
    o = o.subset(np.flatnonzero(keep))
    bad = next((i for i, k_ in enumerate(o.kept) if len(k_) == 0), None)
    if bad is not None:
        name = instance.workload.layers[bad].name
        raise InputError(f"layer {bad} ({name}) has no config whose replica fits in server memory")
    return o


def _resharding_patterns(
    rf: RoutingFractions, o: _Options, pair_layers: list[int]
) -> tuple[dict[int, tuple[np.ndarray, np.ndarray]], np.ndarray, sp.csr_array, np.ndarray]:
    """The candidate option pairs of each layer pair, and the resharding pattern (one activation
    byte) of every distinct (k, s) type pair among them: (pairs_of, type pairs t1 * NT + t2 sorted,
    their loads, their hops). The work is guarded first: before pruning it grows with the square of
    the options."""
    NT, A, kept = len(o.type_k), len(rf.tail), o.kept
    pairs_of = {i: (np.repeat(kept[i], len(kept[i + 1])), np.tile(kept[i + 1], len(kept[i]))) for i in pair_layers}
    n_cand = sum(len(o1) for o1, _ in pairs_of.values())
    if n_cand > _MAX_PAIR_CANDIDATES:
        raise UnsupportedError(
            f"the placement model would have {n_cand:,} candidate resharding pairs of layer options before pruning "
            f"({len(o.opt_layer)} layer options), more than {_MAX_PAIR_CANDIDATES:,}: restrict the starts "
            f"(max_starts), offer fewer configs per layer, or use --method heuristic"
        )
    tp_all = (
        np.unique(np.concatenate([o.opt_type[o1] * NT + o.opt_type[o2] for o1, o2 in pairs_of.values()]))
        if pair_layers
        else np.zeros(0, np.int64)
    )
    tp1, tp2 = tp_all // NT, tp_all % NT
    work = _estimate_nonzeros(rf, o.type_k[tp1], o.type_k[tp2])
    if work > _WORK_FACTOR * MAX_PLACEMENT_NONZEROS:
        raise UnsupportedError(
            f"the placement model would need about {work:,} resharding load coefficients ({len(tp_all):,} pairs of "
            f"layer options on {A} arcs), more than {_WORK_FACTOR * MAX_PLACEMENT_NONZEROS:,}: restrict the starts "
            f"(max_starts), offer fewer configs per layer, or use --method heuristic"
        )
    loads, hops = [], []
    for lo in range(0, len(tp_all), _CHUNK_PAIRS):
        a1, a2 = tp1[lo : lo + _CHUNK_PAIRS], tp2[lo : lo + _CHUNK_PAIRS]
        ld, hp = _both_ways_loads(rf, o.unit_server[a1], o.unit_server[a2], len(a1))
        loads.append(ld), hops.append(hp)
    return pairs_of, tp_all, sp.vstack(loads, format="csr") if loads else sp.csr_array((0, A)), _cat(hops)


@dataclass
class _Pairs:
    """The pairs p = (o, o') of consecutive layers kept by bound pruning (math block: R_p, hop_p),
    with each one's busiest arc and compute bound for the pair rows, grouped by layer pair."""

    pair_layers: list[int]  # layers i whose activations reshard to i + 1
    w_o1_a: np.ndarray
    w_o2_a: np.ndarray
    w_load: sp.csr_array  # (NW, A) bytes
    w_hop: list[tuple[int, np.ndarray]]  # per layer pair: (i, hop_p of its pairs)
    w_bw: list[np.ndarray]  # per layer pair, seconds
    w_comp: list[np.ndarray]  # per layer pair, seconds
    NW: int
    patterns: int  # distinct type pairs whose patterns were computed


def _resharding_pairs(instance: Instance, rf: RoutingFractions, o: _Options, bound: _PruningBound | None) -> _Pairs:
    """Pairs: for each layer pair with activation bytes, its option pairs' resharding loads (the
    type pair's pattern scaled), kept unless bound pruning drops them."""
    w, n = instance.workload, rf.n
    pair_layers = [i for i in range(len(w.layers) - 1) if float(w.layers[i].activation_bytes) > 0]
    pairs_of, tp_all, tp_loads, tp_hops = _resharding_patterns(rf, o, pair_layers)
    NT, arc_inv = len(o.type_k), 1.0 / rf.cap
    w_o1, w_o2, w_load_parts, w_hop, w_bw, w_comp = [], [], [], [], [], []
    for i in pair_layers:
        o1, o2 = pairs_of[i]
        pos = np.searchsorted(tp_all, o.opt_type[o1] * NT + o.opt_type[o2])
        r_load = sp.csr_array(tp_loads[pos] * float(w.layers[i].activation_bytes))
        r_hop = tp_hops[pos]
        # The pair's own busiest arc (its two AllReduces + resharding) and the compute of a server
        # hosting both layers when their cosets meet: bounds for pruning and for the pair rows.
        tot = sp.csr_array((r_load + o.ar_load[o1] + o.ar_load[o2]) @ sp.diags(arc_inv))
        bw = tot.max(axis=1).toarray().ravel()
        k1, s1, k2, s2 = o.opt_k[o1], o.opt_s[o1], o.opt_k[o2], o.opt_s[o2]
        meet = (s1 - s2) % np.gcd(n // k1, n // k2) == 0
        comp = np.where(meet, o.lt[o1] + o.lt[o2], np.maximum(o.lt[o1], o.lt[o2]))
        sel = np.ones(len(o1), dtype=bool)
        if bound is not None:
            hop = np.maximum.reduce([r_hop, o.ar_hop[o1], o.ar_hop[o2]])
            sel = bound.keeps(comp, bw + instance.cluster.hop_latency_s * hop)
            inc = bound.incumbent
            sel |= (
                (k1 == inc.layer_degree[i])
                & (s1 == inc.layer_start[i])
                & (k2 == inc.layer_degree[i + 1])
                & (s2 == inc.layer_start[i + 1])
            )
        w_o1.append(o1[sel]), w_o2.append(o2[sel]), w_load_parts.append(r_load[sel]), w_hop.append((i, r_hop[sel]))
        w_bw.append(bw[sel]), w_comp.append(comp[sel])
    w_o1_a = _cat(w_o1)
    w_load = sp.vstack(w_load_parts, format="csr") if w_load_parts else sp.csr_array((0, len(rf.tail)))
    return _Pairs(pair_layers, w_o1_a, _cat(w_o2), w_load, w_hop, w_bw, w_comp, len(w_o1_a), len(tp_all))


@dataclass
class _Lookups:
    """The lookup products q[c, v, o] (math block: LK_{v,o} scaled by Lam_c, hop_{v,o}), by consumer."""

    consumers: list[int]
    lam: dict[int, float]
    q_c_a: np.ndarray
    q_v_a: np.ndarray
    q_o_a: np.ndarray
    q_hop_a: np.ndarray
    q_load: sp.csr_array  # (NQ, A) bytes
    NQ: int


def _lookup_terms(w: Workload, rf: RoutingFractions, o: _Options) -> _Lookups:
    """Lookups: per consumer layer with lookups, per server v and option o of it, the load of its
    blocks' lookup bytes moving between v and o's replicas (1/k each, both ways)."""
    n = rf.n
    consumers = sorted({int(b.consumer) for b in w.blocks if float(b.lookup_bytes) > 0})
    lam = {c: sum(float(b.lookup_bytes) for b in w.blocks if int(b.consumer) == c) for c in consumers}
    q_c, q_v, q_o, q_load_parts, q_hop = [], [], [], [], []
    for c in consumers:
        oc = o.kept[c]
        V = np.repeat(np.arange(n), len(oc))
        loads, hops = _both_ways_loads(rf, np.repeat(V, n), o.unit_server[np.tile(o.opt_type[oc], n)], len(V))
        q_c.append(np.full(len(V), c)), q_v.append(V), q_o.append(np.tile(oc, n))
        q_load_parts.append(sp.csr_array(loads * lam[c])), q_hop.append(hops)
    q_c_a = _cat(q_c)
    q_load = sp.vstack(q_load_parts, format="csr") if q_load_parts else sp.csr_array((0, len(rf.tail)))
    return _Lookups(consumers, lam, q_c_a, _cat(q_v), _cat(q_o), _cat(q_hop), q_load, len(q_c_a))


def _checked_size(w: Workload, rf: RoutingFractions, o: _Options, pairs: _Pairs, lookups: _Lookups) -> int:
    """The model's estimated non-zeros, refused above :data:`MAX_PLACEMENT_NONZEROS`."""
    NO, NW, NQ, n = len(o.opt_layer), pairs.NW, lookups.NQ, rf.n
    est = int(o.ar_load.nnz + pairs.w_load.nnz + lookups.q_load.nnz + 3 * NW + 3 * NQ + (len(w.blocks) + 2 * NO) * n)
    if est > MAX_PLACEMENT_NONZEROS:
        raise UnsupportedError(
            f"the placement model would have about {est:,} non-zeros ({NO} layer options, {NW:,} resharding pairs "
            f"after pruning, {len(rf.tail)} arcs), more than {MAX_PLACEMENT_NONZEROS:,}: restrict the starts "
            f"(max_starts), offer fewer configs per layer, or use --method heuristic"
        )
    return est


@dataclass
class _Columns:
    """The variables' columns (math block: Variables)."""

    a_cols: np.ndarray
    b_cols: np.ndarray  # (nb, n)
    w_cols: np.ndarray
    q_cols: np.ndarray
    h_cols: dict[int, np.ndarray]
    C: int
    TB: int
    H: int
    T: int


def _columns(bld: ModelBuilder, w: Workload, n: int, NO: int, NW: int, lookups: _Lookups) -> _Columns:
    """Variables: a, b (none on a server a block does not fit), w, q, h, then C, Tbw, H, T."""
    nb, consumers = len(w.blocks), lookups.consumers
    a = bld.add_variables(NO, lb=0, ub=1, kind="binary", name="a")
    b_ub = np.ones((nb, n))
    for j, blk in enumerate(w.blocks):
        if float(blk.bytes) > float(w.server_memory_bytes) * (1 + MEMORY_RTOL):
            b_ub[j] = 0.0
    bv = bld.add_variables((nb, n), lb=0, ub=b_ub.ravel(), kind="binary", name="b") if nb else None
    wv = bld.add_variables(NW, lb=0, ub=1, name="w")
    qv = bld.add_variables(lookups.NQ, lb=0, ub=1, name="q")
    hv = bld.add_variables((len(consumers), n), lb=0, ub=1, name="h") if consumers else None
    C, TB, H, T = (int(bld.add_variables(1, lb=0, name=name).index[0]) for name in ("C", "Tbw", "H", "T"))
    return _Columns(
        a.index,
        bv.index.reshape(nb, n) if nb else np.zeros((0, n), np.int64),
        wv.index,
        qv.index,
        {c: hv.index.reshape(len(consumers), n)[ci] for ci, c in enumerate(consumers)},
        C,
        TB,
        H,
        T,
    )


@dataclass
class _ServerSums:
    """What the per-server compute and memory rows sum: option o covers server v = s + r n/k
    (cov_o, cov_v), and every (block, server) pair (bj, bvv) with the blocks' compute and bytes."""

    cov_o: np.ndarray
    cov_v: np.ndarray
    blk_c: np.ndarray
    blk_m: np.ndarray
    bj: np.ndarray
    bvv: np.ndarray


def _server_sums(w: Workload, n: int, o: _Options) -> _ServerSums:
    """Coverage of servers by the options and the blocks' per-server terms."""
    nb = len(w.blocks)
    return _ServerSums(
        np.repeat(np.arange(len(o.opt_k)), o.opt_k),
        np.concatenate([np.asarray(coset(n, int(k), int(s))) for k, s in zip(o.opt_k, o.opt_s)]).astype(np.int64),
        np.array([float(b.compute_s) for b in w.blocks]),
        np.array([float(b.bytes) for b in w.blocks]),
        np.repeat(np.arange(nb), n),
        np.tile(np.arange(n), nb),
    )


@dataclass
class _PlacementData:
    """The placement model's data and columns, named as in the math block above: what each
    constraint family's rows are built from."""

    A: int
    C: int
    H: int
    L: int
    NQ: int
    NW: int
    T: int
    TB: int
    a_cols: np.ndarray
    alpha: float
    ar_hop: np.ndarray
    ar_load: sp.csr_array
    ar_time: np.ndarray
    arc_inv: np.ndarray
    b_cols: np.ndarray
    bj: np.ndarray
    blk_c: np.ndarray
    blk_m: np.ndarray
    bvv: np.ndarray
    cap: float
    consumers: list[int]
    cov_o: np.ndarray
    cov_v: np.ndarray
    h_cols: dict[int, np.ndarray]
    kept: list[np.ndarray]
    lam: dict[int, float]
    lt: np.ndarray
    mem: np.ndarray
    n: int
    nb: int
    objective: str
    opt_layer: np.ndarray
    overlap: str
    pair_layers: list[int]
    q_c_a: np.ndarray
    q_cols: np.ndarray
    q_hop_a: np.ndarray
    q_load: sp.csr_array
    q_o_a: np.ndarray
    q_v_a: np.ndarray
    us: float
    w: Workload
    w_bw: list[np.ndarray]
    w_cols: np.ndarray
    w_comp: list[np.ndarray]
    w_hop: list[tuple[int, np.ndarray]]
    w_load: sp.csr_array
    w_o1_a: np.ndarray
    w_o2_a: np.ndarray

    @classmethod
    def of(cls, instance: Instance, rf: RoutingFractions, *parts) -> _PlacementData:
        """The instance's constants and, by name, the fields of the data steps' results ``parts``."""
        w = instance.workload
        have = dict(
            w=w,
            n=instance.n,
            L=len(w.layers),
            nb=len(w.blocks),
            A=len(rf.tail),
            arc_inv=1.0 / rf.cap,
            alpha=instance.cluster.hop_latency_s / TIME_UNIT_S,
            cap=float(w.server_memory_bytes),
            objective=instance.objective,
            overlap=w.overlap,
            us=1.0 / TIME_UNIT_S,
        )
        for part in parts:
            have.update(vars(part))
        return cls(**{f.name: have[f.name] for f in fields(cls)})


def build_placement(
    instance: Instance,
    X: np.ndarray,
    *,
    max_starts: int | None = None,
    prune: bool = True,
    rf: RoutingFractions | None = None,
    start: Strategy | None = None,
) -> PlacementModel:
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
        A known strategy: the incumbent that bounds the pruning and warm-starts the solve (e.g. the
        result of a restricted solve; :func:`solve_placement` passes its best, which is at least as
        good as every start candidate). Without one the best start candidate does.

    Raises
    ------
    InputError
        No workload, or an objective the model does not express.
    UnsupportedError
        Disconnected topology, or an estimated model size above :data:`MAX_PLACEMENT_NONZEROS`.
    """
    started = time.perf_counter()
    rf = _checked_inputs(instance, X, rf)
    w, n = instance.workload, instance.n
    all_options = _layer_options(w, rf, max_starts, start)
    incumbent, ub = _incumbent(instance, rf, start)
    bound = _PruningBound.of(instance, incumbent, ub) if prune else None
    o = _pruned_options(instance, all_options, bound)
    pairs = _resharding_pairs(instance, rf, o, bound)
    lookups = _lookup_terms(w, rf, o)
    est = _checked_size(w, rf, o, pairs, lookups)

    bld = ModelBuilder(name="placement")
    cols = _columns(bld, w, n, len(o.opt_layer), pairs.NW, lookups)
    d = _PlacementData.of(instance, rf, o, pairs, lookups, cols, _server_sums(w, n, o))
    _choice_rows(bld, d)
    _transport_rows(bld, d)
    _compute_rows(bld, d)
    _memory_rows(bld, d)
    _lookups_rows(bld, d)
    _load_rows(bld, d)
    _pattern_bandwidth_rows(bld, d)
    _pair_compute_rows(bld, d)
    _hops_rows(bld, d)
    _symmetry_rows(bld, d)
    _objective(bld, d)
    stats = {
        "options": len(o.opt_layer),
        "options_pruned": len(all_options.opt_layer) - len(o.opt_layer),
        "pairs": pairs.NW,
        "lookup_products": lookups.NQ,
        "arcs": len(rf.tail),
        "estimated_nonzeros": est,
        "pair_patterns": pairs.patterns,
        "build_s": time.perf_counter() - started,
    }
    return PlacementModel(
        bld.build(),
        n,
        o.opt_layer,
        o.opt_k,
        o.opt_s,
        cols.a_cols,
        cols.b_cols,
        pairs.w_o1_a,
        pairs.w_o2_a,
        cols.w_cols,
        lookups.q_c_a,
        lookups.q_v_a,
        lookups.q_o_a,
        cols.q_cols,
        lookups.lam,
        cols.h_cols,
        cols.C,
        cols.TB,
        cols.H,
        cols.T,
        max_starts is not None,
        ub,
        incumbent,
        stats,
    )


def _add_parts(bld: ModelBuilder, rows: list, cols: list, vals: list, **bounds) -> None:
    """Add one block of rows given as lists of (row, column, value) array parts (``bounds``: the
    ``lb``, ``ub``, ``count`` and ``name`` of :meth:`ModelBuilder.add_constraints`)."""
    bld.add_constraints(np.concatenate(rows), np.concatenate(cols), np.concatenate(vals), **bounds)


def _choice_rows(bld: ModelBuilder, d: _PlacementData) -> None:
    """choice: every layer takes one option, every block one server."""
    L, a_cols, b_cols, n, nb, opt_layer = d.L, d.a_cols, d.b_cols, d.n, d.nb, d.opt_layer
    bld.add_constraints(opt_layer, a_cols, 1.0, lb=1.0, ub=1.0, count=L, name="layer_choice")
    if nb:
        bld.add_constraints(
            np.repeat(np.arange(nb), n), b_cols.ravel(), 1.0, lb=1.0, ub=1.0, count=nb, name="block_choice"
        )


def _transport_rows(bld: ModelBuilder, d: _PlacementData) -> None:
    """transport: the pair products w of consecutive layers' options, by their marginals."""
    NW, a_cols, kept, pair_layers, w_cols, w_o1_a, w_o2_a = (
        d.NW,
        d.a_cols,
        d.kept,
        d.pair_layers,
        d.w_cols,
        d.w_o1_a,
        d.w_o2_a,
    )
    if NW:
        # transport: one row per (layer-pair side, option); rows are the positions of the options.
        out_opts = np.unique(w_o1_a)
        in_opts = np.unique(w_o2_a)
        # every option of a paired layer needs its row, even if all its pairs were pruned
        out_opts = np.unique(np.concatenate([out_opts] + [kept[i] for i in pair_layers]))
        in_opts = np.unique(np.concatenate([in_opts] + [kept[i + 1] for i in pair_layers]))
        r1 = np.searchsorted(out_opts, w_o1_a)
        bld.add_constraints(
            np.concatenate([r1, np.arange(len(out_opts))]),
            np.concatenate([w_cols, a_cols[out_opts]]),
            np.concatenate([np.ones(NW), -np.ones(len(out_opts))]),
            lb=0.0,
            ub=0.0,
            count=len(out_opts),
            name="transport_out",
        )
        r2 = np.searchsorted(in_opts, w_o2_a)
        bld.add_constraints(
            np.concatenate([r2, np.arange(len(in_opts))]),
            np.concatenate([w_cols, a_cols[in_opts]]),
            np.concatenate([np.ones(NW), -np.ones(len(in_opts))]),
            lb=0.0,
            ub=0.0,
            count=len(in_opts),
            name="transport_in",
        )


def _compute_rows(bld: ModelBuilder, d: _PlacementData) -> None:
    """compute: the busiest server's compute C (per server, per layer; the path rows under ``critical_path``)."""
    C, L, a_cols, b_cols, bj, blk_c, bvv, cov_o, cov_v, lt, n, objective, opt_layer, us, w = (
        d.C,
        d.L,
        d.a_cols,
        d.b_cols,
        d.bj,
        d.blk_c,
        d.bvv,
        d.cov_o,
        d.cov_v,
        d.lt,
        d.n,
        d.objective,
        d.opt_layer,
        d.us,
        d.w,
    )
    bld.add_constraints(
        np.concatenate([cov_v, bvv, np.arange(n)]),
        np.concatenate([a_cols[cov_o], b_cols.ravel(), np.full(n, C)]),
        np.concatenate([lt[cov_o] * us, blk_c[bj] * us, -np.ones(n)]),
        lb=-np.inf,
        ub=0.0,
        count=n,
        name="compute",
    )
    if objective != "comm_time":
        # Valid (implied at integer points, tighter in the LP than the per-server rows when a layer
        # is spread over many starts): C >= the chosen option's time, per layer.
        bld.add_constraints(
            np.concatenate([opt_layer, np.arange(L)]),
            np.concatenate([a_cols, np.full(L, C)]),
            np.concatenate([lt * us, -np.ones(L)]),
            lb=-np.inf,
            ub=0.0,
            count=L,
            name="layer_compute",
        )
    if objective != "comm_time" and w.compute_model == "critical_path":
        rows, cols, vals, ubs = path_rows(w, opt_layer, lt * us, a_cols, C)
        bld.add_constraints(rows, cols, vals, lb=-np.inf, ub=ubs * us, count=len(ubs), name="path")


def _memory_rows(bld: ModelBuilder, d: _PlacementData) -> None:
    """memory: each server's replicas and blocks fit its capacity."""
    a_cols, b_cols, bj, blk_m, bvv, cap, cov_o, cov_v, mem, n = (
        d.a_cols,
        d.b_cols,
        d.bj,
        d.blk_m,
        d.bvv,
        d.cap,
        d.cov_o,
        d.cov_v,
        d.mem,
        d.n,
    )
    bld.add_constraints(
        np.concatenate([cov_v, bvv]),
        np.concatenate([a_cols[cov_o], b_cols.ravel()]),
        np.concatenate([mem[cov_o] / cap, blk_m[bj] / cap]),
        lb=-np.inf,
        ub=1.0 + MEMORY_RTOL,
        count=n,
        name="memory",
    )


def _lookups_rows(bld: ModelBuilder, d: _PlacementData) -> None:
    """lookups: the lookup products q of a consumer's blocks and options."""
    NQ, a_cols, b_cols, consumers, lam, n, q_c_a, q_cols, q_o_a, q_v_a, w = (
        d.NQ,
        d.a_cols,
        d.b_cols,
        d.consumers,
        d.lam,
        d.n,
        d.q_c_a,
        d.q_cols,
        d.q_o_a,
        d.q_v_a,
        d.w,
    )
    if NQ:
        qrow = {c: ci for ci, c in enumerate(consumers)}
        qr = np.array([qrow[int(c)] for c in q_c_a]) * n + q_v_a
        rows, cols, vals = [qr], [q_cols], [np.ones(NQ)]
        for j, blk in enumerate(w.blocks):
            c = int(blk.consumer)
            if c in qrow and float(blk.lookup_bytes) > 0:
                (
                    rows.append(qrow[c] * n + np.arange(n)),
                    cols.append(b_cols[j]),
                    vals.append(np.full(n, -float(blk.lookup_bytes) / lam[c])),
                )
        _add_parts(bld, rows, cols, vals, lb=0.0, ub=0.0, count=len(consumers) * n, name="lookup_sum")
        bld.add_constraints(
            np.concatenate([np.arange(NQ), np.arange(NQ)]),
            np.concatenate([q_cols, a_cols[q_o_a]]),
            np.concatenate([np.ones(NQ), -np.ones(NQ)]),
            lb=-np.inf,
            ub=0.0,
            count=NQ,
            name="lookup_option",
        )


def _load_rows(bld: ModelBuilder, d: _PlacementData) -> None:
    """load: every arc's bytes over its capacity, at most Tbw."""
    A, TB, a_cols, ar_load, arc_inv, q_cols, q_load, us, w_cols, w_load = (
        d.A,
        d.TB,
        d.a_cols,
        d.ar_load,
        d.arc_inv,
        d.q_cols,
        d.q_load,
        d.us,
        d.w_cols,
        d.w_load,
    )

    # Link loads, divided by capacity and in time units: sum(...) - Tbw <= 0 per arc.
    def triplets(M: sp.csr_array, colidx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        coo = sp.coo_array(M)
        return coo.col.astype(np.int64), colidx[coo.row], coo.data * arc_inv[coo.col] * us

    parts = [triplets(ar_load, a_cols), triplets(w_load, w_cols), triplets(q_load, q_cols)]
    bld.add_constraints(
        np.concatenate([p[0] for p in parts] + [np.arange(A)]),
        np.concatenate([p[1] for p in parts] + [np.full(A, TB)]),
        np.concatenate([p[2] for p in parts] + [-np.ones(A)]),
        lb=-np.inf,
        ub=0.0,
        count=A,
        name="load",
    )


def _pattern_bandwidth_rows(bld: ModelBuilder, d: _PlacementData) -> None:
    """pattern bw: each part of the traffic's own busiest arc, at most Tbw (valid, tightens the LP)."""
    L, NQ, TB, a_cols, ar_time, arc_inv, consumers, kept, n, q_c_a, q_cols, q_load, q_v_a, us, w_bw, w_cols, w_hop = (
        d.L,
        d.NQ,
        d.TB,
        d.a_cols,
        d.ar_time,
        d.arc_inv,
        d.consumers,
        d.kept,
        d.n,
        d.q_c_a,
        d.q_cols,
        d.q_load,
        d.q_v_a,
        d.us,
        d.w_bw,
        d.w_cols,
        d.w_hop,
    )
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
        _add_parts(bld, rows, cols, vals, lb=-np.inf, ub=0.0, count=nrow, name="pattern_bandwidth")


def _pair_compute_rows(bld: ModelBuilder, d: _PlacementData) -> None:
    """compute, per layer pair: both layers' time when their cosets meet, at most C (valid)."""
    C, NW, objective, us, w_cols, w_comp, w_hop = d.C, d.NW, d.objective, d.us, d.w_cols, d.w_comp, d.w_hop
    if NW and objective != "comm_time":
        w_comp_a = np.concatenate(w_comp)
        pl_ = np.concatenate([np.full(h.size, j) for j, (_, h) in enumerate(w_hop)])
        bld.add_constraints(
            np.concatenate([pl_, np.arange(len(w_hop))]),
            np.concatenate([w_cols, np.full(len(w_hop), C)]),
            np.concatenate([w_comp_a * us, -np.ones(len(w_hop))]),
            lb=-np.inf,
            ub=0.0,
            count=len(w_hop),
            name="pair_compute",
        )


def _hops_rows(bld: ModelBuilder, d: _PlacementData) -> None:
    """hops: H at least each used path's hop count (AllReduce, resharding, lookups)."""
    (
        H,
        L,
        NQ,
        a_cols,
        alpha,
        ar_hop,
        b_cols,
        consumers,
        h_cols,
        kept,
        n,
        q_c_a,
        q_hop_a,
        q_o_a,
        q_v_a,
        w,
        w_cols,
        w_hop,
    ) = (
        d.H,
        d.L,
        d.NQ,
        d.a_cols,
        d.alpha,
        d.ar_hop,
        d.b_cols,
        d.consumers,
        d.h_cols,
        d.kept,
        d.n,
        d.q_c_a,
        d.q_hop_a,
        d.q_o_a,
        d.q_v_a,
        d.w,
        d.w_cols,
        d.w_hop,
    )
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
        for i, hop in w_hop:
            idx = np.arange(start, start + hop.size)
            start += hop.size
            nzh = hop > 0
            if nzh.any():
                rows += [np.full(int(nzh.sum()), nrow), [nrow]]
                cols += [w_cols[idx[nzh]], [H]]
                vals += [-hop[nzh].astype(float), [1.0]]
                nrow += 1
        if nrow:
            _add_parts(bld, rows, cols, vals, lb=0.0, ub=np.inf, count=nrow, name="hops")
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
            _add_parts(
                bld, rows, cols, vals, lb=np.concatenate(lbs), ub=np.inf, count=len(consumers) * n, name="lookup_hops"
            )
            rows, cols, vals, nrow = [], [], [], 0
            for j, blk in enumerate(w.blocks):
                c = int(blk.consumer)
                if c in h_cols and float(blk.lookup_bytes) > 0:
                    r = nrow + np.arange(n)
                    rows += [r, r]
                    cols += [h_cols[c], b_cols[j]]
                    vals += [np.ones(n), -np.ones(n)]
                    nrow += n
            _add_parts(bld, rows, cols, vals, lb=0.0, ub=np.inf, count=nrow, name="lookup_host")


def _symmetry_rows(bld: ModelBuilder, d: _PlacementData) -> None:
    """symmetry: identical blocks in server order."""
    b_cols, n, nb, w = d.b_cols, d.n, d.nb, d.w
    # Symmetry between identical blocks (exact: they are interchangeable).
    if nb > 1:
        rows, cols, vals, nrow = [], [], [], 0
        for j, nxt in ((m[t], m[t + 1]) for m in block_classes(w) for t in range(len(m) - 1)):
            rows += [np.full(n, nrow), np.full(n, nrow)]
            cols += [b_cols[j], b_cols[nxt]]
            vals += [np.arange(n, dtype=float), -np.arange(n, dtype=float)]
            nrow += 1
        if nrow:
            _add_parts(bld, rows, cols, vals, lb=-np.inf, ub=0.0, count=nrow, name="block_symmetry")


def _objective(bld: ModelBuilder, d: _PlacementData) -> None:
    """The objective: C + Tbw + alpha H, or T with overlap, or Tbw + alpha H for comm_time (microseconds)."""
    C, H, T, TB, alpha, objective, overlap = d.C, d.H, d.T, d.TB, d.alpha, d.objective, d.overlap
    if objective == "comm_time":
        bld.set_objective([TB, H], [1.0, alpha])
    elif overlap == "full":
        bld.add_constraints(
            [0, 0, 1, 1, 1],
            [T, C, T, TB, H],
            [1.0, -1.0, 1.0, -1.0, -alpha],
            lb=0.0,
            ub=np.inf,
            count=2,
            name="overlap",
        )
        bld.set_objective([T], [1.0])
    else:
        bld.set_objective([C, TB, H], [1.0, 1.0, alpha])


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


def _canonical_blocks(w: Workload, st: Strategy) -> Strategy:
    """The same strategy with identical blocks' servers sorted, as the symmetry rows require."""
    servers = list(st.block_server)
    for members in block_classes(w):
        for j, v in zip(members, sorted(servers[j] for j in members)):
            servers[j] = v
    return Strategy(st.layer_degree, st.layer_start, tuple(servers))


def _point(
    pm: PlacementModel, w: Workload, st: Strategy, alpha: float, overlap: str, objective: str
) -> np.ndarray | None:
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
    # C's rows read sum(...) - C <= ub, and act holds the sums with C = 0: C = max(sum - ub).
    x[pm.C] = max(
        0.0,
        max(
            (act[rb.start : rb.stop] - pm.model.row_upper[rb.start : rb.stop]).max()
            for name, rb in blocks.items()
            if name in ("compute", "path")
        ),
    )
    x[pm.Tbw] = max(0.0, act[blocks["load"].start : blocks["load"].stop].max(initial=0.0))
    hmax = 0.0
    if "hops" in blocks:
        hmax = max(hmax, (-act[blocks["hops"].start : blocks["hops"].stop]).max())
    if "lookup_hops" in blocks:
        rb = blocks["lookup_hops"]
        hmax = max(hmax, (pm.model.row_lower[rb.start : rb.stop] - act[rb.start : rb.stop]).max())
    x[pm.H] = max(0.0, hmax)
    x[pm.T] = max(x[pm.C], x[pm.Tbw] + alpha * x[pm.H]) if overlap == "full" and objective != "comm_time" else 0.0
    return x


def heuristic_topology(instance: Instance) -> np.ndarray:
    """The default topology of :func:`solve_placement`: the instance's fixed topology, else the links
    of TopoOpt's heuristic design for the data-parallel start (:mod:`topoopt_ilp.heuristic.design`,
    what ``--method heuristic`` returns)."""
    if instance.fixed_topology is not None:
        return instance.fixed_topology_matrix()

    return heuristic_design(instance).topology.matrix  # only the links are needed: no evaluation


#: The local search's default share of a time limit (at most 30 s), and its share when the compute-
#: level search may apply (no blocks, layer times on one lattice): that search is exact and keeps
#: the best strategy it finds, so the local search only gives it a first incumbent: on bert-128-d8
#: the smaller share proves the optimum sooner (docs/notes/placement-search.md).
LOCAL_SEARCH_SHARE = 0.25
LEVELLED_LOCAL_SEARCH_SHARE = 0.1


def _default_local_search_s(instance: Instance, time_limit_s: float | None, levelled: bool = False) -> float:
    """Seconds of local search before the MILP when the caller did not say (see SMALL_PLACEMENT_OPTIONS
    and LOCAL_SEARCH_SHARE; ``levelled``: the compute-level search may apply)."""
    w, n = instance.workload, instance.n
    if len(layer_options(w, n)[0]) + n * len(w.blocks) <= SMALL_PLACEMENT_OPTIONS:
        return 0.0
    share = LEVELLED_LOCAL_SEARCH_SHARE if levelled else LOCAL_SEARCH_SHARE
    return 10.0 if time_limit_s is None else min(30.0, share * time_limit_s)


def _export_placement(
    instance: Instance, X: np.ndarray, rf: RoutingFractions, max_starts: int | None, options: ExactOptions
) -> str:
    """Write the placement MILP (the unrestricted one when it can be built, else the largest
    restriction to evenly spaced starts) to ``options.export_model``; what was written."""
    ladder = [max_starts] if max_starts is not None else [None, 4, 2, 1]
    for ms in ladder:
        try:
            pm = build_placement(instance, X, max_starts=ms, rf=rf)
        except UnsupportedError:
            if ms == ladder[-1]:
                raise
            continue
        export_model(pm.model, options)
        return "the placement MILP" + ("" if ms is None else f", restricted to {ms} coset starts per degree")
    raise AssertionError("unreachable")


def solve_placement(
    instance: Instance,
    options: ExactOptions,
    topology: np.ndarray | None = None,
    *,
    max_starts: int | None = None,
    start: Strategy | dict | None = None,
    local_search_s: float | None = None,
    chain_bound_s: float | None = None,
    exact_blocks: bool = True,
) -> Solution:
    """Choose a config and start per layer and a server per block, minimising the iteration time.

    Parameters
    ----------
    instance : Instance
        A workload instance (objective ``iteration_time`` or ``comm_time``).
    options : ExactOptions
        Backend, limits, warm start (``"heuristic"``: the best of TopoOpt's data-parallel start and
        uniform-degree strategies, as a full point), export, ``formulation`` (:data:`FORMULATIONS`:
        by default the enumeration, then the MILP when the enumeration gives up), ``rings``: how
        each AllReduce group is ringed (:data:`~.data.RING_POLICIES`): ``"shortest"``
        (default) splits it equally over its TotientPerms rings of least hop total, ``"coset"`` is
        one ring in coset order (:func:`~.data.ring_strides`). ``search_moves``: the local
        search budgeted in moves (:class:`~.scoring.SearchBudget`), not seconds: every
        candidate start is scored, :data:`LOCAL_SEARCH_SHARE` of the moves go to the search before
        the bounds and the rest, when the MILP is not run, to the search after them, each with the
        time left as its safety net. The strategy found then depends only on the seed, not on the
        machine, unless ``details["local_search_timed_out"]`` (the time ran out first; raise the
        time limit or lower the moves). ``details["local_search_moves"]`` counts the moves used
        (in both modes: a time-limited run's count is a starting point for a move budget); with a
        move budget ``local_search_s`` only switches the first search on (> 0) or off (0).
    topology : numpy.ndarray, optional
        Link-count matrix X. Default: :func:`heuristic_topology` (the instance's fixed topology, else
        the TopoOpt heuristic's topology for the data-parallel start). The method layer passes its own.
    max_starts : int, optional
        Heuristic restriction of the MILP to that many evenly spaced coset starts per degree (plus
        the incumbent's). The reported bound is then the relaxation bound; the restricted model's
        own bound and gap are in ``details``. Default: unrestricted, falling back to 4, 2, 1 starts
        when the unrestricted model is too large to build.
    start : Strategy or dict, optional
        A known strategy (or a solution's ``placement`` dict): one of the local search's starts,
        so the result is never worse than it.
    local_search_s : float, optional
        Seconds of local search before the MILP (0: none, and the MILP always runs). Default: none
        for a small problem (at most :data:`SMALL_PLACEMENT_OPTIONS` options), else a quarter of the
        time limit (a tenth when the compute-level search may apply: :data:`LEVELLED_LOCAL_SEARCH_SHARE`),
        at most 30 s (10 s without a time limit); it stops earlier once it stalls.
        When the MILP would exceed :data:`MILP_SEARCH_NONZEROS` non-zeros, the rest of the time
        limit is local search too.
    chain_bound_s : float, optional
        Seconds for :func:`~.placement_bounds.chain_bound`, its precomputation included (0: only
        the volume relaxation). Default: 30 % of the time limit (5 s without one). It is skipped
        when the volume relaxation already proves the gap.
    exact_blocks : bool
        Each local-search call ends by re-placing its best strategy's blocks with the exact block
        MILP (:func:`~.blocks.place_blocks_exactly`, always HiGHS, whatever
        ``options.backend``; :func:`~.local_search.improve_strategy`) and searching on from what
        that gains. Default on; off is the search before it (benchmarks/block_placement.py).

    Returns
    -------
    Solution
        ``method="exact"``, the topology X, routing naming the rings and no paths (shortest paths
        are the evaluator's fallback), ``placement`` as :func:`~topoopt_ilp.core.strategy.strategy_to_dict`,
        ``objective`` = iteration time (seconds) of the returned strategy, recomputed exactly;
        ``bound``/``gap`` valid for the unrestricted problem (seconds). Status ``optimal`` means
        the gap is within ``options.gap`` (default 1e-4) - possibly proven by the relaxation bound
        alone, without a MILP (``details["milp"]`` says so). Status ``infeasible`` means no placement
        satisfies the memory rows (the only constraints that can cut every strategy).
    """
    run = _prepare(instance, options, topology, max_starts, start, local_search_s, chain_bound_s, exact_blocks)
    if options.time_limit_s == 0:  # as every exact method: a time limit of 0 runs nothing
        return run.stopped("no_solution", model_status="no_solution")
    _incumbent_phase(run)
    _volume_bound_phase(run)
    settled = _enumeration_phase(run)
    if settled is None:
        _chain_bound_phase(run)
        _level_search_phase(run)
        settled = _settled_without_milp(run)
    return settled if settled is not None else _milp_phase(run)


def _gap(objective: float, bound: float | None) -> float | None:
    """The relative gap of ``objective`` above ``bound`` (0 for a zero objective; None without a bound)."""
    return None if bound is None else (max(0.0, (objective - bound) / objective) if objective > 0 else 0.0)


@dataclass
class _PlacementRun:
    """What the phases of :func:`solve_placement` share: the problem on its topology, the budget,
    and the incumbent and bound as they improve. ``details`` collects what each phase reports."""

    instance: Instance
    options: ExactOptions
    X: np.ndarray
    rf: RoutingFractions
    formulation: str
    max_starts: int | None
    local_search_s: float | None
    chain_bound_s: float | None
    exact_blocks: bool
    start: Strategy | None
    started: float
    scorer: StrategyScorer
    details: dict
    tol: float
    incumbent: Strategy | None = None
    inc_time: float | None = None
    bound: float = 0.0
    bounds_started: float = 0.0
    levels: bool = False  # the compute-level search ran because the gap was open

    @property
    def moves(self) -> int | None:
        """The local search's move budget (None: its stages share the time limit)."""
        return self.options.search_moves

    @property
    def open(self) -> bool:
        """True while there is no incumbent, or its gap to the bound exceeds the tolerance."""
        return self.inc_time is None or _gap(self.inc_time, self.bound) > self.tol

    def time_of(self, strategy: Strategy) -> float:
        return strategy_times(self.instance, self.rf, strategy)["iteration_time_s"]

    def offer(self, strategy: Strategy) -> None:
        """Keep ``strategy`` as the incumbent when it is better."""
        t = self.time_of(strategy)
        if self.inc_time is None or t < self.inc_time:
            self.incumbent, self.inc_time = strategy, t

    def placed(self, strategy: Strategy, **fields) -> Solution:
        """The solution that places ``strategy`` on X and names its rings (placement_routing)."""
        w, n = self.instance.workload, self.instance.n
        routing = placement_routing(self.rf, strategy_demand(w, n, strategy)[0])
        return Solution(
            method="exact",
            topology=Topology(self.X),
            placement=strategy_to_dict(strategy),
            routing=routing,
            wall_time_s=time.perf_counter() - self.started,
            details=self.details,
            **fields,
        )

    def incumbent_solution(self) -> Solution:
        """The incumbent with the bound as it stands: optimal when the gap is within the tolerance."""
        gap = _gap(self.inc_time, self.bound)
        return self.placed(
            self.incumbent,
            status="optimal" if gap <= self.tol else "feasible",
            objective=self.inc_time,
            bound=min(self.bound, self.inc_time),
            gap=gap,
            backend=self.options.backend,
        )

    def stopped(self, status: str, backend: str | None = None, **details) -> Solution:
        """A solution without a design (a time limit of 0, infeasible memory, a solver without a point)."""
        self.details.update(details)
        return Solution(
            status=status,
            method="exact",
            topology=None,
            backend=backend or self.options.backend,
            wall_time_s=time.perf_counter() - self.started,
            details=self.details,
        )


def _prepare(
    instance: Instance,
    options: ExactOptions,
    topology: np.ndarray | None,
    max_starts: int | None,
    start: Strategy | dict | None,
    local_search_s: float | None,
    chain_bound_s: float | None,
    exact_blocks: bool,
) -> _PlacementRun:
    """Check the problem and the options, settle the topology, its routing fractions and the start,
    and write the model when asked (before any phase: it is the model of the problem, whichever phase
    settles it)."""
    started = time.perf_counter()
    if instance.workload is None:
        raise InputError(
            "the placement model needs a workload instance (layers and blocks); this instance has a fixed demand"
        )
    check_backend(options)
    formulation = options.formulation or "auto"
    if formulation not in FORMULATIONS:
        raise InputError(
            f"unknown formulation {formulation!r} for the placement problem; choose one of {', '.join(FORMULATIONS)}"
        )
    if formulation == "enumeration" and max_starts is not None:
        raise InputError("max_starts restricts the MILP's coset starts; the enumeration takes every start")
    X = np.asarray(heuristic_topology(instance) if topology is None else topology)
    rings = options.rings or RING_POLICIES[0]
    rf = shortest_path_fractions(X, instance.cluster.link_bytes_per_s, rings)
    if start is None and options.warm_start not in (None, "none", "heuristic"):
        if not os.path.exists(options.warm_start):
            raise InputError(
                f"--warm-start takes 'heuristic', 'none' or a solution file; {options.warm_start!r} is none of these"
            )
        start = load_solution(options.warm_start).placement
        if start is None:
            raise InputError(f"{options.warm_start}: the solution has no placement to start from")
    if isinstance(start, Mapping):  # a placement as a Solution holds it
        start = Strategy(
            tuple(start["layer_degree"]), tuple(start["layer_start"]), tuple(start.get("block_server", ()))
        )
    if instance.objective not in OBJECTIVES:
        raise InputError(f"the placement model minimises iteration_time or comm_time, not {instance.objective!r}")
    if (rf.dist < 0).any():
        raise UnsupportedError("the topology is disconnected; the placement model needs every pair reachable")
    details: dict = {"model": "placement", "routing": "shortest_path (equal split)", "rings": rings}
    if options.export_model:
        details["exported_model"] = _export_placement(instance, X, rf, max_starts, options)
        options = replace(options, export_model=None)
    return _PlacementRun(
        instance=instance,
        options=options,
        X=X,
        rf=rf,
        formulation=formulation,
        max_starts=max_starts,
        local_search_s=local_search_s,
        chain_bound_s=chain_bound_s,
        exact_blocks=exact_blocks,
        start=start,
        started=started,
        scorer=StrategyScorer(instance, rf),
        details=details,
        tol=options.gap if options.gap is not None else 1e-4,
    )


def _incumbent_phase(run: _PlacementRun) -> None:
    """1. The incumbent: the best cheap candidate (or the given start), improved by local search.

    Candidates are scored in order (the cheap ones first, the pipeline starts, whose count grows
    with n, last) until :data:`CANDIDATE_SCORING_SHARE` of the time limit has passed, at least one;
    with a move budget every candidate is scored (the search's starts must not depend on the clock)."""
    instance, options, details = run.instance, run.options, run.details
    w, n = instance.workload, instance.n
    if run.start is not None and validate_strategy(w, n, run.start):
        raise InputError("the start strategy is invalid: " + "; ".join(validate_strategy(w, n, run.start)[:3]))
    given = [run.start] if run.start is not None else []
    cands = [st for st in given + _candidates(w, n, run.rf) if _memory_feasible(w, n, st)]
    if not cands:
        return
    timed = options.time_limit_s is not None and run.moves is None
    stop = run.started + CANDIDATE_SCORING_SHARE * options.time_limit_s if timed else math.inf
    scored = []
    for j, st in enumerate(cands):
        if scored and time.perf_counter() > stop:
            details["candidates_unscored"] = len(cands) - j
            break
        scored.append((run.time_of(st), j))
    details["start_iteration_time_s"] = min(scored)[0]
    run.incumbent = cands[min(scored)[1]]
    if run.local_search_s is None:
        levelled = run.formulation != "milp" and run.max_starts is None and not_levelled(run.scorer) is None
        run.local_search_s = _default_local_search_s(instance, options.time_limit_s, levelled)
    if run.local_search_s > 0:
        t0 = time.perf_counter()
        starts = [cands[j] for j in sorted(range(len(scored)), key=lambda j: scored[j][0])[:LOCAL_SEARCH_STARTS]]
        common = dict(seed=options.seed or 0, ls=run.scorer, exact_blocks=run.exact_blocks)
        if run.moves is None:
            run.incumbent = improve_strategy(instance, run.rf, starts, run.local_search_s, **common)
        else:  # its share of the moves, the time left as the safety net
            limit = math.inf if options.time_limit_s is None else time_left(options, run.started)
            share = max(1, int(LOCAL_SEARCH_SHARE * run.moves))
            run.incumbent = improve_strategy(instance, run.rf, starts, limit, moves=share, **common)
            details["local_search_timed_out"] = time.perf_counter() - t0 >= limit
        details.update(local_search_s=time.perf_counter() - t0, local_search_moves=run.scorer.moves_scored)
    run.inc_time = run.time_of(run.incumbent)
    details["local_search_iteration_time_s"] = run.inc_time


def _volume_bound_phase(run: _PlacementRun) -> None:
    """2. The volume relaxation: a bound valid for the unrestricted problem, without a solver."""
    run.bounds_started = time.perf_counter()
    run.bound = relaxation_bound(run.instance, run.rf, run.scorer)
    run.details["volume_bound_s"] = run.bound


def _enumeration_phase(run: _PlacementRun) -> Solution | None:
    """3. Small problems: the enumeration (exact; it gives up when its states outgrow its budget).
    The solution when it settles the problem, else None."""
    options, details = run.options, run.details
    if run.formulation == "milp" or run.max_starts is not None or not run.open:
        return None
    if not enumeration_fits(run.scorer):
        details["enumeration"] = "not tried: the problem is too large for its tables"
        return None
    if options.time_limit_s is None:
        share = None if run.formulation == "enumeration" else AUTO_ENUMERATION_S
    else:
        remaining = options.time_limit_s - (time.perf_counter() - run.started)
        share = remaining if run.formulation == "enumeration" else 0.5 * remaining
    t1 = time.perf_counter()
    upper = math.inf if run.inc_time is None else run.inc_time
    outcome, found = enumerate_placement(run.scorer, run.bound, upper, deadline=None if share is None else t1 + share)
    details.update(enumeration=outcome, enumeration_s=time.perf_counter() - t1)
    if outcome == "infeasible":
        return run.stopped("infeasible", algorithm="enumeration", infeasible=_MEMORY_INFEASIBLE)
    if outcome == "gave_up":
        return None
    if found is not None:
        details.update(enumeration_cutoffs_s=found.cutoffs, enumeration_states=found.states)
        run.offer(found.strategy)
    details.update(
        algorithm="enumeration", milp="skipped: the enumeration proved the optimum", relaxation_bound_s=run.bound
    )
    return run.placed(
        run.incumbent, status="optimal", objective=run.inc_time, bound=run.inc_time, gap=0.0, backend=options.backend
    )


def _chain_bound_phase(run: _PlacementRun) -> None:
    """The chain bound (arc classes, runs and pair thresholds; anytime: a share of the time limit
    after its precomputation), when the volume relaxation leaves the gap open."""
    options = run.options
    seconds = run.chain_bound_s
    if seconds is None:
        seconds = 5.0 if options.time_limit_s is None else 0.3 * options.time_limit_s
    if options.time_limit_s is not None:
        seconds = min(seconds, time_left(options, run.started))  # none once the limit is used up
    if seconds > 0 and run.open:
        cb, cb_info = chain_bound(run.instance, run.rf, run.scorer, upper=run.inc_time, time_limit_s=seconds)
        run.details.update(cb_info)
        run.bound = max(run.bound, cb)
    run.details.update(relaxation_bound_s=run.bound, relaxation_bound_time_s=time.perf_counter() - run.bounds_started)


def _level_search_phase(run: _PlacementRun) -> None:
    """3b. Layer times on one lattice (identical layers), no blocks: the compute-level search
    (exact; it may prove the incumbent or find a better strategy)."""
    options = run.options
    if run.inc_time is None or not run.open or run.formulation == "milp" or run.max_starts is not None:
        return
    if options.time_limit_s is not None:
        deadline = run.started + options.time_limit_s
    else:
        deadline = None if run.formulation == "enumeration" else time.perf_counter() + AUTO_ENUMERATION_S
    t1 = time.perf_counter()
    # its bound comes out 1e-9 below its threshold (float noise): asked for a hair less than the gap
    lv = level_search(run.scorer, run.inc_time, max(0.0, run.tol - 1e-8), deadline)
    run.details.update(
        level_search=lv.status if lv.status != "not_applicable" else f"not applicable: {lv.reason}",
        level_search_s=time.perf_counter() - t1,
        level_search_nodes=lv.nodes,
    )
    if lv.status != "not_applicable":  # complete, or what it settled before its deadline
        if lv.strategy is not None:
            run.offer(lv.strategy)
        run.bound = max(run.bound, min(lv.bound, run.inc_time))
        run.levels = True


def _settled_without_milp(run: _PlacementRun) -> Solution | None:
    """The solution when the bounds prove the incumbent, the formulation is the enumeration, or too
    little of the time limit is left for the MILP; None when the MILP is to run."""
    options, details = run.options, run.details
    proven = run.inc_time is not None and not run.open
    if proven or (run.inc_time is not None and run.formulation == "enumeration"):
        if proven and run.levels:
            details["milp"] = "skipped: the compute-level search proves the incumbent within the gap"
        elif proven:
            details["milp"] = "skipped: the relaxation bound proves the local-search incumbent within the gap"
        else:
            details["milp"] = "not run (--formulation enumeration)"
        details["algorithm"] = ("levels" if run.levels else "bounds") if proven else "enumeration"
        return run.incumbent_solution()
    left = time_left(options, run.started)
    share = 0.0 if run.formulation == "milp" else MILP_MIN_SHARE
    if run.incumbent is not None and left is not None and left <= share * options.time_limit_s:
        spent = (
            "the local search, the bounds and the compute-level search"
            if run.levels
            else "the local search and the bounds"
        )
        return _without_milp(run, f"not run: {spent} left {left:.3g} s of the time limit")
    return None


def _without_milp(run: _PlacementRun, why: str) -> Solution:
    """The incumbent, the MILP not run (``why``): the time left (with a move budget: the moves left,
    the time left as the safety net), when more than half a second and the local search is on, goes
    to more local search from the incumbent."""
    options, details = run.options, run.details
    remaining = time_left(options, run.started)
    more = None if run.moves is None else run.moves - run.scorer.moves_scored  # the rest of the move budget
    if more is not None:
        remaining = math.inf if remaining is None else remaining
        if more > 0 and run.local_search_s and remaining <= 0.5:
            details["local_search_timed_out"] = True  # moves were left, the time was not
    if run.local_search_s and remaining is not None and remaining > 0.5 and (more is None or more > 0):
        t0 = time.perf_counter()
        cand = improve_strategy(
            run.instance,
            run.rf,
            run.incumbent,
            remaining,
            seed=(options.seed or 0) + 1,
            max_stall=10**9,
            ls=run.scorer,
            exact_blocks=run.exact_blocks,
            moves=more,
        )
        if more is not None:
            details["local_search_timed_out"] = (
                details.get("local_search_timed_out", False) or time.perf_counter() - t0 >= remaining
            )
        run.offer(cand)
        details.update(
            local_search_s=details.get("local_search_s", 0.0) + time.perf_counter() - t0,
            local_search_iteration_time_s=run.inc_time,
            local_search_moves=run.scorer.moves_scored,
        )
        why += "; the time left went to local search" if more is None else "; the moves left went to local search"
    details["milp"] = why
    return run.incumbent_solution()


def _milp_phase(run: _PlacementRun) -> Solution:
    """4. The MILP: unrestricted when it can be built, else (only when no restriction was asked for)
    the largest restriction to evenly spaced starts (plus the incumbent's) that can.

    Each rung is smaller than the one before, so the last refused rung's build time bounds the next
    one's: with an incumbent, a rung that would not fit in the time left is not started."""
    instance, options, details = run.instance, run.options, run.details
    w = instance.workload
    ladder = [run.max_starts] if run.max_starts is not None else [None, 4, 2, 1]
    pm, last_build_s = None, 0.0
    for ms in ladder:
        left = time_left(options, run.started)
        if run.incumbent is not None and left is not None and last_build_s >= left:
            return _without_milp(
                run,
                f"not run: building the next restriction (max_starts={ms}) would take about "
                f"{last_build_s:.3g} s, {left:.3g} s of the time limit was left",
            )
        t0 = time.perf_counter()
        try:
            pm = build_placement(instance, run.X, max_starts=ms, rf=run.rf, start=run.incumbent)
            break
        except UnsupportedError as exc:
            if ms == ladder[-1]:
                raise
            details.setdefault("refused", []).append(f"max_starts={ms}: {exc}")
            last_build_s = time.perf_counter() - t0
    max_starts = ms
    if (
        pm.model.num_nonzeros > MILP_SEARCH_NONZEROS
        and run.incumbent is not None
        and run.local_search_s
        and options.time_limit_s is not None
    ):
        # A model this large does not get past HiGHS' root within a time limit of minutes: the time
        # left goes to more local search. With (almost) nothing left it is not handed to the solver
        # either: loading it alone would overshoot the limit.
        details["skipped_model_nonzeros"] = pm.model.num_nonzeros
        if ms is not None:
            details.update(max_starts=ms)
        return _without_milp(
            run,
            f"skipped: the model that could be built has {pm.model.num_nonzeros:,} non-zeros "
            f"(more than {MILP_SEARCH_NONZEROS:,})",
        )
    alpha = instance.cluster.hop_latency_s / TIME_UNIT_S
    x0 = None
    if options.warm_start not in (None, "none") and pm.incumbent is not None:
        x0 = _point(pm, w, pm.incumbent, alpha, w.overlap, instance.objective)
    if options.time_limit_s is not None:
        options = replace(options, time_limit_s=time_left(options, run.started))  # 0 left: the incumbent stands
    result: SolveResult = run_model(pm.model, options, x0)
    status = solution_status(result)
    details["algorithm"] = "milp"
    details.update(
        variables=pm.model.num_vars, constraints=pm.model.num_rows, nonzeros=pm.model.num_nonzeros, **pm.stats
    )
    if result.message:
        details["solver_message"] = result.message
    if options.warm_start not in (None, "none"):
        details["warm_start"] = options.warm_start
    solver_bound = result.bound * TIME_UNIT_S if result.bound is not None and math.isfinite(result.bound) else None
    if status == "infeasible":
        details["infeasible"] = _MEMORY_INFEASIBLE
    if (result.values is None or status not in ("optimal", "feasible")) and run.incumbent is None:
        return run.stopped(status, backend=result.backend)
    if result.values is not None and status in ("optimal", "feasible"):
        cand = _decode(pm, result.values, len(w.layers))
        details["model_objective_s"] = result.objective * TIME_UNIT_S if result.objective is not None else None
        run.offer(cand)
    strategy, objective = run.incumbent, run.inc_time
    if pm.restricted:
        # The restricted model's bound holds for the restriction only: report the relaxation bound.
        details.update(
            restricted=True,
            max_starts=max_starts,
            restricted_status=status,
            restricted_bound_s=solver_bound,
            restricted_gap=_gap(objective, solver_bound),
            note="starts restricted (heuristic): bound = the relaxation bound, valid for the unrestricted problem",
        )
        bound = run.bound
        status = "optimal" if _gap(objective, bound) <= run.tol else "feasible"
    else:
        bound = run.bound if solver_bound is None else max(run.bound, solver_bound)
        if status not in ("optimal", "feasible"):
            status = "feasible"  # the solver stopped without a point: the incumbent stands
        if _gap(objective, bound) <= run.tol:
            status = "optimal"
    bound = min(bound, objective)
    return run.placed(
        strategy, status=status, objective=objective, bound=bound, gap=_gap(objective, bound), backend=result.backend
    )
