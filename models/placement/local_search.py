"""The placement problem's incumbent and lower bound without a solver (used by :mod:`.placement`).

* :func:`improve_strategy` - iterated local search over strategies on one topology, every move
  scored incrementally by the evaluator's definitions;
* :func:`relaxation_bound` - a lower bound on every strategy's iteration time on that topology,
  valid for the unrestricted problem (the "volume" relaxation, dynamic programming over the chain
  of layers).
"""

from __future__ import annotations

import math
import time

import numpy as np

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.strategy import Strategy, degrees_at_most, place_blocks
from topoopt_ilp.core.workload import Workload
from topoopt_ilp.models.placement.blocks import MIN_POLISH_S, polish_blocks
from topoopt_ilp.models.placement.data import RoutingFractions, objective_of, path_entries, path_floors
from topoopt_ilp.models.placement.scoring import SearchBudget, StrategyScorer

__all__ = ["improve_strategy", "pipeline_starts", "relaxation_bound"]


# ------------------------------------------------------------------------------------------------
# Pipeline starts (more starts for improve_strategy)
#
# The cheap candidates (placement._candidates: the data-parallel start, uniform degrees, pipelines of
# equal layer counts in coset order) miss what the 128-server DLRM rewards: pipelines of data-parallel
# groups whose stages carry equal compute and sit next to each other on the topology. For every
# degree k (g = n/k cosets) and stage count S (2 <= S <= min(g, L)):
#   * layer i runs at its largest allowed degree d_i <= k (else its least), taking tau_i =
#     layer_time(i, d_i) on each of its servers;
#   * the layers are cut into S contiguous stages minimising the largest stage's sum of tau (the
#     linear-partition DP  best_s[j] = min_i max(best_{s-1}[i], tau_i + .. + tau_{j-1}), one
#     (L + 1)^2 numpy step per stage count);
#   * stage j goes on the degree-k coset starting at j p mod g, for each stride p coprime to g (so
#     the S <= g stages get distinct cosets) whose resharding pairs (r g + j, r g + (j + p) mod g)
#     (replica r of one coset to replica r of the next: they hold the same batch slice) are among
#     the STRIDES of least hop total on the topology (ties: the smaller stride first): consecutive
#     stages next to each other. Not only the least: the busiest arc decides, and the nearest
#     cosets' arcs may be the ones the AllReduce rings load (TopoOpt's 128-circulant, k = 16:
#     strides 1, 7 have 160 hops, 3, 5 have 224, and the best DLRM pipeline uses 3);
#   * blocks by strategy.place_blocks.
# Kept because on dlrm-128-d8 they give both a better start and a better search result
# (docs/notes/placement-search.md).
# ------------------------------------------------------------------------------------------------
#: Coset strides tried per (degree, stage count) by :func:`pipeline_starts` (comment block above).
STRIDES = 4


def pipeline_starts(w: Workload, n: int, dist: np.ndarray) -> list[Strategy]:
    """The compute-balanced pipeline strategies of the comment block above (``dist``: hop distances
    of the topology, -1 where unreachable), without duplicates; memory is not checked."""
    L = len(w.layers)
    out: dict[Strategy, None] = {}
    for k in sorted({k for layer in w.layers for k in layer.configs}):
        g = n // k
        if min(g, L) < 2:
            continue
        deg = degrees_at_most(w, k)
        tau = np.array([w.layer_time(i, d) for i, d in enumerate(deg)])
        strides = _adjacent_strides(n, g, dist)
        for cuts in _balanced_cuts(tau, min(g, L)):
            for p in strides:
                start = tuple((j * p) % g % (n // d) for j, (a, b) in enumerate(cuts) for d in deg[a:b])
                out[Strategy(deg, start, place_blocks(w, n, deg, start))] = None
    return list(out)


def _balanced_cuts(tau: np.ndarray, max_stages: int) -> list[list[tuple[int, int]]]:
    """For S = 2..max_stages, a cut of layers 0..L-1 into S contiguous non-empty stages [a, b)
    minimising the largest stage sum of ``tau`` (the linear-partition DP)."""
    L = len(tau)
    prefix = np.concatenate([[0.0], np.cumsum(tau)])
    stage = prefix[None, :] - prefix[:, None]  # stage[i, j] = tau_i + .. + tau_{j-1}
    stage[np.tril_indices(L + 1)] = np.inf  # stages are non-empty
    best = np.full(L + 1, np.inf)
    best[0] = 0.0
    choice = []  # choice[s][j]: where the last of s + 1 stages ending at j starts
    for _ in range(max_stages):
        cand = np.maximum(best[:, None], stage)
        arg = cand.argmin(axis=0)
        best = cand[arg, np.arange(L + 1)]
        choice.append(arg)
    out = []
    for S in range(2, max_stages + 1):
        cuts, j = [], L
        for s in range(S - 1, -1, -1):
            i = int(choice[s][j])
            cuts.append((i, j))
            j = i
        out.append(cuts[::-1])
    return out


def _adjacent_strides(n: int, g: int, dist: np.ndarray) -> list[int]:
    """Strides p (1 <= p < g, gcd(p, g) = 1) whose coset-to-next-coset pairs (r g + j -> r g + (j + p)
    mod g, every replica r and coset j) have the least hop totals on the topology: at most
    :data:`STRIDES` of them."""
    j, r = np.meshgrid(np.arange(g), np.arange(n // g), indexing="ij")
    src = (j + r * g).ravel()
    totals = {p: int(dist[src, ((j + p) % g + r * g).ravel()].sum()) for p in range(1, g) if math.gcd(p, g) == 1}
    return sorted(totals, key=lambda p: (totals[p], p))[:STRIDES]


#: improve_strategy's exact block move (workloads with blocks): the last BLOCK_POLISH_SHARE of its
#: time (or of its moves), at most BLOCK_POLISH_S seconds: at the end, on the same layers, it always
#: gains, while as a move after every new best it gained or lost by more than the search's run-to-run
#: spread (docs/notes/placement-search.md).
BLOCK_POLISH_S, BLOCK_POLISH_SHARE = 3.0, 0.1
#: With a move budget the block MILP stops at this many branch-and-bound nodes, not at a time, so that
#: the search stays reproducible. (Measured on two dlrm-128-d8 local optima: HiGHS proved the 1e-3 gap
#: at its first node, 1.3-1.9 s, the same placement at 1, 10, 100 and 1000 nodes.)
BLOCK_POLISH_NODES = 1000

# No exact move over the types of a window of consecutive layers: most layers load the busiest arc at
# once, so a window rarely moves it, and it gained 0-2 % for 6-30 s of a 60 s budget
# (docs/notes/placement-search.md).


def improve_strategy(
    instance: Instance,
    rf: RoutingFractions,
    start: Strategy | list[Strategy],
    time_limit_s: float,
    seed: int = 0,
    max_stall: int = 30,
    kick_top: int = 8,
    ls: StrategyScorer | None = None,
    exact_blocks: bool = True,
    moves: int | None = None,
) -> Strategy:
    """Iterated local search for at most ``time_limit_s`` seconds and, when given, ``moves`` moves
    (:class:`SearchBudget`: with a move budget that runs out before the time does, the result
    depends only on the seed, not on the machine). ``start`` is one memory-feasible strategy or
    several: each is first descended (:meth:`StrategyScorer.descend`, within half the budget shared
    equally; descents from different starts end in very different local optima), then from the
    best, repeatedly: kick a random run of 1-3 layers onto one of the ``kick_top`` best (k, s) for it
    and descend again, keeping the best. Stops early after ``max_stall`` kicks without improvement
    (small instances converge in well under a second). Never worse than any start.
    ``ls``: a scorer of ``instance`` on ``rf`` to reuse with its pattern caches (its state is
    overwritten); else one is built, inside the time limit. ``exact_blocks``
    (workloads with blocks): the last :data:`BLOCK_POLISH_SHARE` of the budget, at most
    :data:`BLOCK_POLISH_S`, re-places the best strategy's blocks by the exact block MILP
    (:func:`~topoopt_ilp.models.placement.blocks.polish_blocks`, HiGHS; with a move budget stopped at
    :data:`BLOCK_POLISH_NODES` nodes) and descends again from what it gains, while that moves the
    layers (the single-block moves stop where moving several blocks at once pays); then the kicks
    go on with what is left."""

    starts = [start] if isinstance(start, Strategy) else list(start)
    t_begin = time.perf_counter()
    ls = ls or StrategyScorer(instance, rf)
    total = math.inf if moves is None else moves
    budget = SearchBudget(t_begin + time_limit_s, total)
    rng = np.random.default_rng(seed)
    L = len(instance.workload.layers)
    best = None
    for q, st in enumerate(starts):
        ls.load_state(st)
        share = 0.5 * (q + 1) / len(starts)
        cur = ls.descend(budget.part(t_begin + share * time_limit_s, share * total), rng)
        if best is None or cur[0] < best[0] * (1 - 1e-9):
            best, best_t, best_bs = cur, ls.t.copy(), ls.bs.copy()
    ls.t, ls.bs = best_t.copy(), best_bs.copy()
    ls.refresh()
    reserve = min(BLOCK_POLISH_S, BLOCK_POLISH_SHARE * time_limit_s)
    polish = exact_blocks and len(instance.workload.blocks) > 0 and reserve >= MIN_POLISH_S
    # the exact block move's share, at the end
    before_polish = budget.part(budget.deadline - reserve, (1 - BLOCK_POLISH_SHARE) * total) if polish else budget

    def kicks(until: SearchBudget, best, best_t, best_bs) -> bool:
        """Kick and descend from the best (its score, types, block servers) until ``until`` is spent
        or ``max_stall`` kicks without improvement; ls ends at the best; True when the budget ran out."""
        stall = 0
        while not until.spent() and stall < max_stall:
            i = int(rng.integers(L))
            j = min(L - 1, i + int(rng.integers(0, 3)))
            until.charge()
            it, _ = ls.segment_move(i, j)
            it[ls.t[i]] = np.inf if i == j else it[ls.t[i]]  # moving a single layer onto itself is no kick
            allowed = np.flatnonzero(np.isfinite(it))
            stall += 1
            if allowed.size == 0:
                continue
            if kick_top:  # a random one of the best few placements of the run: disturbs without wrecking
                allowed = allowed[np.argsort(it[allowed])][:kick_top]
            ls.t[i : j + 1] = int(rng.choice(allowed))
            ls.refresh()
            cur = ls.descend(until, rng)
            if cur[0] < best[0] * (1 - 1e-9):
                best, best_t, best_bs, stall = cur, ls.t.copy(), ls.bs.copy(), 0
            else:
                ls.t, ls.bs = best_t.copy(), best_bs.copy()
                ls.refresh()
        ls.t, ls.bs = best_t, best_bs
        ls.refresh()
        return stall < max_stall

    ran_out = kicks(before_polish, best, best_t, best_bs)
    if polish:
        # the best strategy's blocks placed exactly for its layers, descended again while that moves the
        # layers; then (unless the kicks had stalled and nothing moved) the kicks go on until the end
        nodes = None if moves is None else BLOCK_POLISH_NODES
        cur = gained = ls.score()
        while (better := polish_blocks(ls, cur[0], budget.deadline, max_nodes=nodes)) is not None:
            cur = ls.descend(budget, rng)
            if cur[0] >= better * (1 - 1e-9):  # the layers stayed: the blocks are already placed
                break
        if ran_out or cur[0] < gained[0] * (1 - 1e-9):
            kicks(budget, cur, ls.t.copy(), ls.bs.copy())
    ls.moves_scored += budget.used
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
# With compute_model critical_path, C >= P(S) >= Pmin, the critical path with every layer at its least
# allowed time (P only grows with each lt), so Cfloor also takes Pmin (placement.data.path_floors).
# ------------------------------------------------------------------------------------------------
def relaxation_bound(instance: Instance, rf: RoutingFractions, ls: StrategyScorer | None = None) -> float:
    """Seconds; a lower bound on the iteration time (or comm time) of every strategy on ``rf``'s
    topology (math in the comment block above)."""
    ls = ls or StrategyScorer(instance, rf)
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
    c_floor = max(
        [(min_total + sum(float(b.compute_s) for b in w.blocks)) / n] + [float(b.compute_s) for b in w.blocks]
    )
    if ls.path_c is not None:
        least = np.where(np.isfinite(ls.lt), ls.lt, np.inf).min(axis=1)
        if np.isfinite(least).all():
            c_floor = max(c_floor, float(path_floors(path_entries(w), least)[1][0]))
    alpha = instance.cluster.hop_latency_s
    objective = instance.objective
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
        best = min(best, float(objective_of(instance, max(float(tau), c_floor), comm)))
    return float(best) if np.isfinite(best) else 0.0
