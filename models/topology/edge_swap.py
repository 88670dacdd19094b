"""A primal search for general degree-d topologies: degree-preserving edge swaps (graph golf).

The order/degree problem (Graph Golf, research.nii.ac.jp/graphgolf): among undirected graphs of n
vertices and degree at most d, the least diameter, and among those the least average shortest path
length (ASPL). :func:`edge_swap_search` starts from the best of several graphs (the best circulants,
TopoOpt's design, a random regular graph) and improves it by swaps that keep every degree; it
proves nothing, and :func:`hop_bounds` gives what can be proven (the Moore bounds) so that the
caller reports the gap. Objectives ``throughput``, ``comm_time`` and ``iteration_time`` are scored by
the evaluator (:func:`evaluator_score`), cheap floors first (:func:`score_floor`), against the bound
:func:`moore_traffic_bound`. Used by ``--method exact`` on undirected links: as the start of the
MILP, and above the MILP's size limit as the method itself (docs/methods/edge-swap.md).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from itertools import combinations

import numpy as np

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.lazy import nx
from topoopt_ilp.core.solution import Solution, Topology
from topoopt_ilp.core.traffic import traffic_matrix
from topoopt_ilp.errors import InputError
from topoopt_ilp.evaluation.evaluate import RoutingError, evaluate, job_term, objective_value
from topoopt_ilp.heuristic.circulant import circulant_stats_batch
from topoopt_ilp.models.common import ExactOptions, exact_no_solution
from topoopt_ilp.models.topology.catalogue import catalogue_applies, catalogue_sizes, layered_floor
from topoopt_ilp.models.topology.milp import MAX_SERVERS, moore_diameter_bound, moore_hop_bound, moore_layer_hops
from topoopt_ilp.solvers import relative_gap

__all__ = [
    "SwapResult",
    "edge_swap_search",
    "circulant_starts",
    "hop_bounds",
    "hop_totals",
    "simple_start",
    "CIRCULANT_SAMPLE",
    "edge_swap_applies",
    "swap_start",
    "solve_by_edge_swap",
    "START_SHARE",
    "DEFAULT_TIME_LIMIT_S",
    "evaluator_score",
    "best_of_seeds",
    "score_floor",
    "moore_traffic_bound",
    "HOP_OBJECTIVES",
    "SCORE_OBJECTIVES",
]

#: Objectives of the topology alone, scored by the bitset BFS below (with annealing).
HOP_OBJECTIVES = ("aspl", "diameter")
#: Objectives of the demand, scored by the evaluator (:func:`evaluator_score`), moves kept when not worse.
SCORE_OBJECTIVES = ("throughput", "comm_time", "iteration_time")

#: At most this many circulant jump sets x servers are scored (one vectorised BFS each) for the
#: starts; beyond it a seeded sample (390 sets at 512 servers, about 0.5 s).
CIRCULANT_SAMPLE = 200_000

#: Moves per annealing cycle (at least; CYCLE_SWAPS_PER_SERVER x n on larger graphs): the
#: temperature falls from T0 to its end over this many moves tried, then the search reheats. Short
#: cycles find the small optima in a second where one slow schedule over the limit took 5-9 s.
CYCLE_SWAPS = 10_000
CYCLE_SWAPS_PER_SERVER = 400

#: Swaps without a new best before the search goes back to its best graph and reheats.
STALL_SWAPS = 2000

#: A move is refused unscored only when its floor is above the current score by more than this
#: relative margin: the floor and the evaluator sum the same bytes in different orders.
FLOOR_TOLERANCE = 1e-9


@dataclass(frozen=True)
class SwapResult:
    """The best graph the search found and how it got there. ``distance_total``: the sum of hop
    distances over ordered pairs (ASPL = distance_total / (n (n - 1)))."""

    matrix: np.ndarray
    diameter: int
    distance_total: int
    start: str
    start_diameter: int
    start_distance_total: int
    swaps_tried: int
    swaps_accepted: int
    restarts: int
    wall_time_s: float
    best_found_s: float  # when the returned graph was first reached
    score: float | None = None  # the ``score`` function's value of the graph, when one was given
    start_score: float | None = None
    scored: int = 0  # calls of ``score`` (starts included)
    refused_by_floor: int = 0  # moves refused by ``score_floor`` without a call of ``score``
    seed: int = 0

    @property
    def aspl(self) -> float:
        n = len(self.matrix)
        return self.distance_total / (n * (n - 1)) if n > 1 else 0.0


# ------------------------------------------------------------------------------------------------
# The score: bitset BFS from every source at once
#
# Row v of R holds, as bits, the servers within h hops of v. One hop more: R'[v] = R[v] | OR over
# the neighbours u of v of R[u] (nbr, an n x d array; a missing port points to v itself, which adds
# nothing). The pairs still unreached after h hops each add 1 to the distance total, so
# total = sum_h (n^2 - reached_h), and the diameter is the number of hops until every bit is set; a
# hop that sets no new bit means a disconnected graph (inf). Cost per hop: n d words of n/64 bits.
# ------------------------------------------------------------------------------------------------
def _neighbour_array(A: np.ndarray, d: int) -> np.ndarray:
    """(n, d) neighbours of each server of the simple 0/1 adjacency A, padded with the server itself."""
    n = len(A)
    nbr = np.repeat(np.arange(n)[:, None], d, axis=1)
    for v in range(n):
        u = np.flatnonzero(A[v])
        nbr[v, : len(u)] = u
    return nbr


def _hop_score(nbr: np.ndarray) -> tuple[float, float]:
    """(diameter, distance total) of the graph of the neighbour array; (inf, inf) when disconnected."""
    n, d = nbr.shape
    words = (n + 63) // 64
    R = np.zeros((n, words), dtype=np.uint64)
    v = np.arange(n)
    R[v, v // 64] = np.left_shift(np.uint64(1), (v % 64).astype(np.uint64))
    reached, total, hops = n, 0, 0
    while reached < n * n:
        total += n * n - reached
        nxt = R | np.bitwise_or.reduce(R[nbr], axis=1)
        now = int(np.bitwise_count(nxt).sum())
        if now == reached:
            return math.inf, math.inf
        R, reached, hops = nxt, now, hops + 1
    return float(hops), float(total)


def hop_totals(X: np.ndarray) -> tuple[float, float]:
    """(diameter, distance total over ordered pairs) of a link-count matrix (links as 0/1)."""
    A = np.asarray(X) > 0
    return _hop_score(_neighbour_array(A, max(int(A.sum(axis=1).max(initial=0)), 1)))


def hop_bounds(n: int, d: int) -> tuple[int, float]:
    """(least diameter, least ASPL) any undirected graph of n servers and degree at most d allows:
    the Moore bound (at most d (d-1)^(h-1) servers h hops from any server; for the ASPL, every server
    sees the others on the nearest such layers, Cerf et al. 1974)."""
    return moore_diameter_bound(n, d, False), layered_floor(n - 1, d, d - 1) / (n - 1)


# ------------------------------------------------------------------------------------------------
# Starts
# ------------------------------------------------------------------------------------------------
def circulant_starts(n: int, d: int, seed: int = 0, count: int = 2) -> list[tuple[str, np.ndarray]]:
    """The ``count`` best undirected circulants of degree d on n servers by (diameter, distance
    total), over every jump set (a seeded sample of :data:`CIRCULANT_SAMPLE` / n sets when there
    are more).
    Odd d needs even n (the jump n/2 takes one port); none otherwise."""
    if d < 2 or n <= d:
        return []
    fixed = []
    m = d // 2
    if d % 2:
        if n % 2:
            return []
        fixed = [n // 2]
    pool = np.arange(1, (n - 1) // 2 + 1)  # jumps j < n/2: each takes two ports
    if m > len(pool):
        return []
    rng = np.random.default_rng(seed)
    sample = max(CIRCULANT_SAMPLE // n, 16)
    if math.comb(len(pool), m) <= sample:
        sets = np.array(list(combinations(pool.tolist(), m)), dtype=np.int64).reshape(-1, m)
    else:
        sets = np.sort(np.array([rng.choice(pool, m, replace=False) for _ in range(sample)]), axis=1)
        sets[0] = np.arange(1, m + 1) * max(1, (n // 2) // (m + 1))  # a spread set, whatever the sample
        sets = np.unique(sets, axis=0)
    if fixed:
        sets = np.concatenate([sets, np.full((len(sets), 1), fixed[0])], axis=1)
    coins = np.concatenate([sets, (-sets) % n], axis=1)
    unreachable, total, diameter = circulant_stats_batch(n, coins)
    ok = np.flatnonzero(unreachable == 0)
    best = ok[np.lexsort((total[ok], diameter[ok]))][:count]
    out = []
    for i in best:
        jumps = sorted({int(j) for j in sets[i]})
        X = np.zeros((n, n), dtype=np.int64)
        v = np.arange(n)
        for j in jumps:
            X[v, (v + j) % n] = X[(v + j) % n, v] = 1
        out.append((f"circulant {tuple(jumps)}", X))
    return out


def simple_start(X: np.ndarray, d: int) -> np.ndarray:
    """A simple graph (0/1, no loops) from a link-count matrix: parallel links become one, then free
    ports are paired greedily between servers not yet linked (least-linked first), and the ports
    left (on servers linked already) by giving a link (c, e) way to (a, c), (b, e), so the swaps,
    which keep degrees, start from as many links as fit."""
    A = (np.asarray(X) > 0).astype(np.int64)
    np.fill_diagonal(A, 0)
    n = len(A)
    for _ in range(n * d):
        free = d - A.sum(axis=1)
        open_ = np.flatnonzero(free > 0)
        pairs = [(a, b) for i, a in enumerate(open_) for b in open_[i + 1 :] if not A[a, b]]
        if not pairs:
            break
        a, b = min(pairs, key=lambda p: (-(free[p[0]] + free[p[1]]), p))
        A[a, b] = A[b, a] = 1
    _pair_the_rest(A, d)
    return A


def _pair_the_rest(A: np.ndarray, d: int) -> None:
    """Free ports left on servers that are linked already (or on one server): a link (c, e) gives
    way to (a, c) and (b, e), two ports used more, while such a link exists."""
    while True:
        free = d - A.sum(axis=1)
        open_ = np.flatnonzero(free > 0)
        if free[open_].sum() < 2:
            return
        a = int(open_[0])
        b = a if free[a] >= 2 else int(open_[1])
        for c, e in np.argwhere(A > 0).tolist():  # every link, both ways round
            if len({a, b, c, e}) == 3 + (a != b) and not A[a, c] and not A[b, e]:
                A[c, e] = A[e, c] = 0
                A[a, c] = A[c, a] = A[b, e] = A[e, b] = 1
                break
        else:
            return


def evaluator_score(instance: Instance) -> Callable[[np.ndarray], float]:
    """The evaluator's objective of a bare topology of ``instance`` (default rings, shortest-path
    routes) as a value to minimise (throughput negated), for :func:`edge_swap_search`'s ``score``:
    the throughput and comm/iteration-time objectives. inf when the evaluator cannot score it."""

    def score(A: np.ndarray) -> float:
        try:
            value = objective_value(instance, evaluate(instance, A))
        except (RoutingError, InputError):
            return math.inf
        if not math.isfinite(value):
            return math.inf
        return -value if instance.objective == "throughput" else value

    return score


# ------------------------------------------------------------------------------------------------
# Cheap floors of the evaluator's score (objectives throughput, comm_time, iteration_time)
#
# A bare topology is scored with the default rings and shortest-path routes (split equally over
# every shortest path), so its traffic T (bytes i sends to j) does not depend on the links, and the
# bytes summed over all arcs are exactly H = sum_ij T[i, j] dist(i, j). Every arc of a simple graph
# carries B bytes/s (B the link rate), so the busiest arc needs at least H / (B arcs) seconds: the
# bandwidth time t_bw >= H / (B sum(A)), throughput = 1 / t_bw. The latency term is exact: alpha
# times the longest distance between a pair with traffic. The iteration time is the job term of the
# communication time (compute + comm, or their maximum), increasing in it. So
#   floor(A) = F(H(A) / (B sum(A)) + alpha max{dist(i, j) : T[i, j] > 0})
# (F the objective of the communication time; throughput: -1 / t_bw, as a value to minimise) is at
# most the evaluator's score of A: a swap whose floor is above the score of the graph it would
# replace cannot be kept, and is refused without running the evaluator. H comes from the same
# bitset BFS as the hop score: sum_h (sum T - the bytes of the pairs reached within h hops).
#
# The bound of the problem (any design: any links, rings and routes) is the MILP's Moore cut
# (models/topology/milp.py) summed over sources: the model-parallel bytes M of source s cross at
# least moore_hop_bound(M[s]) arcs (heaviest destinations on the nearest Moore layers), a ring's
# bytes at least one arc whatever the ring's order, and the arcs of degree-d servers carry at most
# B n d bytes/s; the longest used path is at least the Moore layer of the farthest of a source's
# destinations with traffic.
# ------------------------------------------------------------------------------------------------
def _bits_reached(R: np.ndarray, n: int) -> np.ndarray:
    """The bitset rows R (n x words, bit v % 64 of word v // 64) as an n x n boolean matrix."""
    return np.unpackbits(R.astype("<u8", copy=False).view(np.uint8), axis=1, bitorder="little")[:, :n].astype(bool)


def _hop_bytes(nbr: np.ndarray, T: np.ndarray) -> tuple[float, int]:
    """(sum_ij T[i, j] dist(i, j), the longest distance of a pair with traffic) of the graph of the
    neighbour array; (inf, -1) when a pair with traffic is disconnected."""
    n, _ = nbr.shape
    words = (n + 63) // 64
    R = np.zeros((n, words), dtype=np.uint64)
    v = np.arange(n)
    R[v, v // 64] = np.left_shift(np.uint64(1), (v % 64).astype(np.uint64))
    traffic = T > 0
    total, hops, reached_count = 0.0, 0, n
    reached = _bits_reached(R, n)
    while (traffic & ~reached).any():
        total += float(T[~reached].sum())
        R = R | np.bitwise_or.reduce(R[nbr], axis=1)
        now = int(np.bitwise_count(R).sum())
        if now == reached_count:
            return math.inf, -1
        reached, reached_count, hops = _bits_reached(R, n), now, hops + 1
    return total, hops


def _comm_to_score(instance: Instance) -> Callable[[float, float], float]:
    """The evaluator's objective, as a value to minimise, of a bandwidth time and a latency time."""
    compute, overlap = job_term(instance, 0.0, "none")  # a demand instance computes nothing; a job its fixed terms

    def to_score(t_bw: float, t_lat: float) -> float:
        if instance.objective == "throughput":
            return -1.0 / t_bw if t_bw > 0 else -math.inf
        comm = t_bw + t_lat
        if instance.objective == "iteration_time":
            return max(compute, comm) if overlap == "full" else compute + comm
        return comm

    return to_score


def score_floor(instance: Instance) -> Callable[[np.ndarray, np.ndarray], float]:
    """A floor of :func:`evaluator_score` of a simple graph, from its 0/1 adjacency and neighbour
    array (the comment above): for :func:`edge_swap_search`'s ``score_floor``."""
    T = traffic_matrix(instance)
    np.fill_diagonal(T, 0.0)
    rate, alpha = instance.cluster.link_bytes_per_s, instance.cluster.hop_latency_s
    to_score = _comm_to_score(instance)

    def floor(A: np.ndarray, nbr: np.ndarray) -> float:
        hop_bytes, hops = _hop_bytes(nbr, T)
        if not math.isfinite(hop_bytes):
            return math.inf
        return to_score(hop_bytes / (rate * float(A.sum())), alpha * hops)

    return floor


def moore_traffic_bound(instance: Instance) -> float:
    """The best objective any design of the demand ``instance`` can reach (the comment above): an
    upper bound on throughput, a lower bound on the communication time (comm_time and
    iteration_time: the exact method's bounds are of the communication time, a job's fixed terms
    are added by the caller)."""
    n, d = instance.n, instance.cluster.degree
    demand = instance.demand
    M = demand.mp_matrix(n).astype(float)
    np.fill_diagonal(M, 0.0)
    sends = M > 0
    destinations = sends.sum(axis=1)
    successor_new = np.zeros(n, dtype=bool)  # every ring successor s may have is a new destination
    ring_bytes = 0.0
    for group in demand.allreduce:
        members = np.unique(np.asarray(group.members, dtype=np.int64))
        if len(members) > 1:
            ring_bytes += len(members) * group.bytes_per_member()
            for s in members.tolist():
                others = members[members != s]
                successor_new[s] |= not sends[s, others].any()
    destinations = destinations + successor_new
    hop_bytes = sum(moore_hop_bound(M[s], d, False) for s in range(n)) + ring_bytes
    t_bw = hop_bytes / (instance.cluster.link_bytes_per_s * n * d)
    farthest = max(
        (int(moore_layer_hops(int(k), d, d - 1)[-1]) for k in np.minimum(destinations, n - 1) if k > 0), default=0
    )
    if instance.objective == "throughput":
        return 1.0 / t_bw if t_bw > 0 else math.inf
    return t_bw + instance.cluster.hop_latency_s * farthest


def _random_regular(n: int, d: int, seed: int) -> np.ndarray | None:
    if (n * d) % 2 or d >= n:
        return None
    return nx.to_numpy_array(nx.random_regular_graph(d, n, seed=seed), nodelist=range(n), dtype=np.int64)


# ------------------------------------------------------------------------------------------------
# The search
#
# State: a simple graph as its edge list, its neighbour array and a 0/1 adjacency. Move: two links
# (a, b), (c, e) become (a, c), (b, e) or (a, e), (b, c) (either at random); refused when the four
# servers are not distinct or a new link exists already, so every degree is kept and the graph
# stays simple. Key: (diameter, distance total) for objective diameter, (distance total,
# diameter) for aspl, compared lexicographically. Acceptance (simulated annealing on the distance
# total): a move that does not worsen the key is taken; one that worsens the total by D while the
# diameter stays (objective diameter; objective aspl: whatever the diameter) with probability
# exp(-D / T), T falling geometrically from T0 = n / 4 to 0.05 over a cycle of moves (CYCLE_SWAPS),
# or over the time limit when that is slower; a longer diameter, under objective diameter, never. After STALL_SWAPS moves without a new best the search
# returns to its best graph. Deterministic for a seed up to the time limit: the moves come from one
# seeded generator, and ``max_swaps`` bounds the work independently of the machine.
# ------------------------------------------------------------------------------------------------
def edge_swap_search(
    n: int,
    d: int,
    starts: list[tuple[str, np.ndarray]],
    *,
    objective: str = "diameter",
    time_limit_s: float = 30.0,
    seed: int = 0,
    max_swaps: int | None = None,
    target: tuple[float, float] | None = None,
    score: Callable[[np.ndarray], float] | None = None,
    score_floor: Callable[[np.ndarray, np.ndarray], float] | None = None,
) -> SwapResult:
    """Improve the best of ``starts`` (name, link-count matrix) by degree-preserving swaps.

    ``starts`` are made simple (:func:`simple_start`); the random regular graph of the seed joins
    them; with neither, a ring with its free ports paired. ``target``: (diameter, distance total)
    at which to stop early (a proven bound met). ``score``: another objective to minimise, a
    function of the 0/1 adjacency (e.g. the evaluator's, :func:`evaluator_score`), instead of
    ``objective``; its moves are kept only when they do not worsen it (no annealing: its
    differences have no common scale). ``score_floor(A, nbr)``: a value ``score`` never goes below
    (e.g. :func:`score_floor`); a move whose floor is above the current score is refused without
    calling ``score``, which changes no decision. ``target``: with ``score``, (value, inf) stops the
    search at that score. The returned diameter and total are the best graph's.
    """
    if score is None and objective not in ("diameter", "aspl"):
        raise ValueError(f"the edge-swap search scores diameter or aspl, not {objective!r}")
    started = time.perf_counter()
    pool = [(name, simple_start(X, d)) for name, X in starts]
    random_start = _random_regular(n, d, seed)
    if random_start is not None:
        pool.append((f"random regular graph (seed {seed})", random_start))
    if not pool:
        ring = np.zeros((n, n), dtype=np.int64)
        v = np.arange(n)
        ring[v, (v + 1) % n] = ring[(v + 1) % n, v] = 1
        pool.append(("a ring with its free ports paired", simple_start(ring, d)))

    def key(state: tuple[float, float]) -> tuple[float, float]:
        return state if objective == "diameter" or score is not None else (state[1], state[0])

    calls = refused = 0

    def measure(A: np.ndarray, nbr: np.ndarray) -> tuple[float, float]:
        nonlocal calls
        if score is None:
            return _hop_score(nbr)
        calls += 1
        value = score(A)
        return (value, 0.0) if math.isfinite(value) else (math.inf, math.inf)

    scored = []
    for name, A in pool:
        sc = measure(A, _neighbour_array(A, d))
        scored.append((key(sc), name, A, sc))
    scored.sort(key=lambda s: s[0])
    _, start_name, A, state = scored[0]
    start_A, start_state = A, state
    A = A.copy()
    rng = np.random.default_rng(seed)
    edges = np.argwhere(np.triu(A) > 0)
    nbr = _neighbour_array(A, d)
    best_A, best_state, best_found = A.copy(), state, time.perf_counter() - started
    tried = accepted = restarts = since_best = 0
    t0, t_end = max(n / 4.0, 1.0), 0.05
    limit = time_limit_s if time_limit_s is not None else math.inf
    cycle = max(CYCLE_SWAPS, CYCLE_SWAPS_PER_SERVER * n)
    m = len(edges)
    while m >= 2:
        if max_swaps is not None and tried >= max_swaps:
            break
        elapsed = time.perf_counter() - started
        if elapsed >= limit or (target is not None and key(best_state) <= key(target)):
            break
        # the later of the cycle's and the time limit's schedules (above a few hundred servers a cycle
        # is longer than the limit allows)
        frac = max((tried % cycle) / cycle, min(elapsed / limit, 1.0) if math.isfinite(limit) else 0.0)
        temperature = t0 * (t_end / t0) ** frac
        i, j = rng.choice(m, 2, replace=False)
        a, b = edges[i]
        c, e = edges[j] if rng.random() < 0.5 else edges[j][::-1]
        tried += 1
        if len({a, b, c, e}) < 4 or A[a, c] or A[b, e]:
            continue
        _swap(A, nbr, a, b, c, e)
        if score_floor is not None and score_floor(A, nbr) > state[0] + FLOOR_TOLERANCE * abs(state[0]):
            _swap(A, nbr, a, c, b, e)  # cannot be kept: undone unscored
            refused += 1
            continue
        new = measure(A, nbr)
        worse = key(new) > key(state)
        if worse:
            same_diameter = new[0] == state[0]
            take = score is None and (objective == "aspl" or same_diameter) and math.isfinite(new[1])
            take = take and rng.random() < math.exp(-(new[1] - state[1]) / temperature)
            if not take:
                _swap(A, nbr, a, c, b, e)  # undo: (a, c), (b, e) back to (a, b), (c, e)
                continue
        edges[i], edges[j] = (a, c), (b, e)
        state = new
        accepted += 1
        since_best += 1
        if key(state) < key(best_state):
            best_A, best_state, since_best = A.copy(), state, 0
            best_found = time.perf_counter() - started
        elif since_best >= STALL_SWAPS:
            A = best_A.copy()
            edges = np.argwhere(np.triu(A) > 0)
            nbr = _neighbour_array(A, d)
            state, since_best = best_state, 0
            restarts += 1
    best_hops, start_hops = hop_totals(best_A), hop_totals(start_A)
    return SwapResult(
        matrix=best_A,
        diameter=_finite_int(best_hops[0]),
        distance_total=_finite_int(best_hops[1]),
        start=start_name,
        start_diameter=_finite_int(start_hops[0]),
        start_distance_total=_finite_int(start_hops[1]),
        score=best_state[0] if score is not None else None,
        start_score=start_state[0] if score is not None else None,
        scored=calls,
        refused_by_floor=refused,
        seed=seed,
        swaps_tried=tried,
        swaps_accepted=accepted,
        restarts=restarts,
        wall_time_s=time.perf_counter() - started,
        best_found_s=best_found,
    )


def _finite_int(value: float) -> int:
    """A hop count as an int; -1 for a disconnected graph's infinity."""
    return int(value) if math.isfinite(value) else -1


def _swap(A: np.ndarray, nbr: np.ndarray, a: int, b: int, c: int, e: int) -> None:
    """Links (a, b), (c, e) become (a, c), (b, e), in the adjacency and the neighbour array."""
    A[a, b] = A[b, a] = A[c, e] = A[e, c] = 0
    A[a, c] = A[c, a] = A[b, e] = A[e, b] = 1
    for v, old, new in ((a, b, c), (b, a, e), (c, e, a), (e, c, b)):
        nbr[v, np.flatnonzero(nbr[v] == old)[0]] = new


# ------------------------------------------------------------------------------------------------
# In the exact method (models.solve_exact): undirected links, objectives aspl and diameter (the hop
# score, annealed) and throughput, comm_time and iteration_time (the evaluator's score)
# ------------------------------------------------------------------------------------------------
#: Below the MILP's size limit the search takes this share of the time limit as the MILP's start
#: (at most START_CAP_S; START_CAP_S without a limit); above it the search is the method.
START_SHARE = 0.25
START_CAP_S = 10.0
#: The search's time when it is the method and no time limit is given.
DEFAULT_TIME_LIMIT_S = 30.0
#: For the evaluator's objectives the search is the MILP's start from this many servers: smaller
#: MILPs get the whole limit.
SCORE_START_MIN_SERVERS = 13


def edge_swap_applies(instance: Instance) -> str | None:
    """Why the edge-swap search does not serve ``instance`` in the exact method (None: it does)."""
    c = instance.cluster
    if instance.objective not in HOP_OBJECTIVES + SCORE_OBJECTIVES:
        return f"objective {instance.objective} (the search scores {', '.join(HOP_OBJECTIVES + SCORE_OBJECTIVES)})"
    if c.directed:
        return "directed links (the swaps keep undirected degrees)"
    if instance.topology_family != "any" or instance.fixed_topology is not None or instance.workload is not None:
        return "not a general topology of a demand"
    if c.degree < 2 or instance.n <= c.degree:
        return "degree below 2 or a complete graph"
    if c.regular and (instance.n * c.degree) % 2:
        return "n d odd: no d-regular graph exists"
    return None


def _target(instance: Instance) -> tuple[float, float]:
    """Where the search may stop: the bound of the instance's objective met (the Moore bounds; for
    the evaluator's objectives, :func:`moore_traffic_bound` as a score to minimise)."""
    n, d = instance.n, instance.cluster.degree
    if instance.objective in SCORE_OBJECTIVES:
        bound = moore_traffic_bound(instance)
        if instance.objective == "throughput":
            return (-bound, math.inf)
        return (_comm_to_score(instance)(bound, 0.0), math.inf)  # the bound holds both terms
    diameter, aspl = hop_bounds(n, d)
    return (diameter, math.inf) if instance.objective == "diameter" else (math.inf, round(aspl * n * (n - 1)))


def _search(instance: Instance, start: np.ndarray | None, time_limit_s: float, seed: int) -> SwapResult:
    """The search from the best circulants and ``start`` (TopoOpt's design). For the evaluator's
    objectives, ``start`` itself is returned when it scores better than the search's graph (it may
    have parallel links, which the swaps do not keep)."""
    n, d = instance.n, instance.cluster.degree
    starts = circulant_starts(n, d, seed=seed)
    if start is not None:
        starts.insert(0, ("TopoOpt's design (the warm start)", np.asarray(start)))
    by_evaluator = instance.objective in SCORE_OBJECTIVES
    score = evaluator_score(instance) if by_evaluator else None
    res = edge_swap_search(
        n,
        d,
        starts,
        objective=instance.objective if not by_evaluator else "diameter",
        time_limit_s=time_limit_s,
        seed=seed,
        target=_target(instance),
        score=score,
        score_floor=score_floor(instance) if by_evaluator else None,
    )
    if score is None or start is None:
        return res
    own = score(np.asarray(start))
    if res.score is not None and own < res.score:
        diameter, total = hop_totals(start)
        return replace(
            res,
            matrix=np.asarray(start).copy(),
            diameter=_finite_int(diameter),
            distance_total=_finite_int(total),
            score=own,
            start="TopoOpt's design (the warm start), better than every simple graph found",
        )
    return res


def _result_key(instance: Instance, res: SwapResult) -> tuple[float, float]:
    """The objective's key of a search's graph (less is better; a disconnected graph last)."""
    if res.score is not None:
        return (res.score, 0.0)
    hops = tuple(math.inf if v < 0 else float(v) for v in (res.diameter, res.distance_total))
    return hops if instance.objective == "diameter" else (hops[1], hops[0])


def best_of_seeds(
    instance: Instance, start: np.ndarray | None, time_limit_s: float, options: ExactOptions
) -> tuple[SwapResult, dict]:
    """The search from ``options.swap_seeds`` seeds (``options.seed``, ``seed + 1``, ...; one without
    it), run by ``options.swap_executor`` ``options.swap_workers`` at a time (without an executor,
    here one after another), each in ``time_limit_s`` / the number of such rounds; the best graph
    (the lowest seed among equals) and ``{"seeds": [...]}``, each seed's key, when there were several."""
    first = options.seed or 0
    count = options.swap_seeds or 1
    if count == 1:
        return _search(instance, start, time_limit_s, first), {}
    seeds = list(range(first, first + count))
    executor = options.swap_executor
    workers = min(options.swap_workers or 1, count) if executor is not None else 1
    each = time_limit_s / math.ceil(count / workers)
    if executor is None:
        results = [_search(instance, start, each, seed) for seed in seeds]
    else:
        futures = [executor.submit(_search, instance, start, each, seed) for seed in seeds]
        results = [future.result() for future in futures]
    best = min(results, key=lambda res: _result_key(instance, res))  # the first of equals: the lowest seed
    summary = [
        {
            "seed": res.seed,
            "key": [v if math.isfinite(v) else None for v in _result_key(instance, res)],
            "search_s": round(res.wall_time_s, 4),
        }
        for res in results
    ]
    return best, {"seeds": summary, "seed_time_s": each, "seed_workers": workers}


def _details(res: SwapResult) -> dict:
    out = {
        "start": res.start,
        "start_diameter": res.start_diameter,
        "start_distance_total": res.start_distance_total,
        "diameter": res.diameter,
        "distance_total": res.distance_total,
        "swaps_tried": res.swaps_tried,
        "swaps_accepted": res.swaps_accepted,
        "restarts": res.restarts,
        "search_s": round(res.wall_time_s, 4),
        "seed": res.seed,
    }
    if res.score is not None:
        out.update(
            start_score=res.start_score,
            score=res.score,
            evaluations=res.scored,
            refused_by_floor=res.refused_by_floor,
        )
    return out


def _valid(instance: Instance, res: SwapResult) -> bool:
    """The graph is a topology of the instance: connected, degree at most d (exactly d when regular)."""
    degrees = res.matrix.sum(axis=1)
    d = instance.cluster.degree
    return res.diameter > 0 and bool((degrees == d).all() if instance.cluster.regular else (degrees <= d).all())


def _catalogue_answers(instance: Instance) -> bool:
    """True when the catalogue search (models/topology/catalogue.py) answers the instance in the MILP's place."""
    if instance.objective in HOP_OBJECTIVES:
        return (instance.n, instance.cluster.degree) in catalogue_sizes()
    return catalogue_applies(instance, instance.demand.mp_matrix(instance.n)) is None


def swap_start(
    instance: Instance, options: ExactOptions, start: np.ndarray | None
) -> tuple[np.ndarray | None, dict | None]:
    """The MILP's start for an instance the search serves below the MILP's size limit: the search's
    graph from ``start`` (TopoOpt's design) and the best circulants, in START_SHARE of the limit, with
    what it did; ``(start, None)`` when it does not apply or the catalogue answers the instance, and
    for the evaluator's objectives below SCORE_START_MIN_SERVERS or when ``options.warm_start`` is
    ``"none"`` (the search is a start: the MILP then has only its own, models/topology/starts.py)."""
    if edge_swap_applies(instance) is not None or _catalogue_answers(instance):
        return start, None
    if instance.objective in SCORE_OBJECTIVES and (
        options.warm_start in (None, "none") or instance.n < SCORE_START_MIN_SERVERS
    ):
        return start, None
    limit = options.time_limit_s
    budget = START_CAP_S if limit is None else min(START_SHARE * limit, START_CAP_S)
    if budget <= 0:
        return start, None
    res, seeds = best_of_seeds(instance, start, budget, options)
    if not _valid(instance, res):
        return start, None
    return res.matrix, {**_details(res), **seeds}


def solve_by_edge_swap(instance: Instance, options: ExactOptions, start: np.ndarray | None) -> Solution:
    """The exact method above the MILP's size limit (undirected links): the search's graph,
    ``feasible`` under the bound it can prove (``optimal`` when it meets it), with the gap;
    ``no_solution`` at a time limit of 0, as for every exact method. aspl and diameter: the Moore
    bounds; throughput, comm_time, iteration_time: :func:`moore_traffic_bound`, the objective the
    evaluator's score of the design (shortest-path routes, default rings)."""
    started = time.perf_counter()
    details: dict = {"model": "topology_routing", "algorithm": "edge_swap", "milp_size_limit": MAX_SERVERS}
    limit = DEFAULT_TIME_LIMIT_S if options.time_limit_s is None else options.time_limit_s
    if limit == 0:
        return exact_no_solution(options.backend, 0.0, {**details, "model_status": "no_solution"})
    res, seeds = best_of_seeds(instance, start, limit, options)
    if instance.objective in SCORE_OBJECTIVES:
        value, bound, gap = _score_result(instance, res)
        details["moore_traffic_bound"] = bound
    else:
        value, bound, gap = _hop_result(instance, res)
        details["moore_lower_bound"] = dict(zip(("diameter", "aspl"), hop_bounds(instance.n, instance.cluster.degree)))
    status = "optimal" if gap == 0 else "feasible"
    details.update(edge_swap={**_details(res), **seeds}, model_status=status)
    if not _valid(instance, res):
        return exact_no_solution(
            options.backend, time.perf_counter() - started, {**details, "model_status": "no_solution"}
        )
    return Solution(
        status=status,
        method="exact",
        topology=Topology(res.matrix),
        objective=value,
        bound=bound,
        gap=gap,
        backend=options.backend,
        wall_time_s=time.perf_counter() - started,
        details=details,
    )


def _hop_result(instance: Instance, res: SwapResult) -> tuple[float, float, float | None]:
    """(objective, Moore bound, gap) of the search's graph, objective aspl or diameter."""
    n, d = instance.n, instance.cluster.degree
    diameter_lb, aspl_lb = hop_bounds(n, d)
    if instance.objective == "diameter":
        value, bound = float(res.diameter), float(diameter_lb)
    else:
        value, bound = res.aspl, aspl_lb
        if res.distance_total <= round(aspl_lb * n * (n - 1)):  # the floor met: equal, not a rounding apart
            bound = value
    return value, bound, relative_gap(value, bound)


def _score_result(instance: Instance, res: SwapResult) -> tuple[float, float, float | None]:
    """(objective, bound, gap) of the search's graph, an objective of the evaluator. A job's
    iteration time: the bound is of the communication time and the gap is left to the caller, who
    adds the job's fixed terms to it (topoopt_ilp.methods)."""
    value = -res.score if instance.objective == "throughput" else res.score
    bound = moore_traffic_bound(instance)
    if instance.objective == "iteration_time" and instance.compiled_job is not None:
        return value, bound, None
    if instance.objective == "iteration_time":
        bound = _comm_to_score(instance)(bound, 0.0)
    gap = relative_gap(value, bound)
    return value, bound, None if gap is None else max(gap, 0.0)
