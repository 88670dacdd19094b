"""Exact topology on directed links when a circulant digraph meets the directed Moore bound.

The catalogue search (:mod:`.catalogue`) settles uniform all-to-all demand, aspl and diameter on
undirected links; on directed links (OCS-style TX/RX ports) the isomorphism classes are far too many
to ship. But the Moore bound of digraphs is often attained by a circulant digraph, and then no
topology at all can do better: this module finds such a circulant by enumerating jump sets (no
solver) and proves it optimal by a closed-form bound, or says why it cannot (the caller then runs
the topology MILP). Measured: directed all-to-all n = 12, d = 4 (throughput) took the MILP 59 s; here
one BFS pass and one LP (docs/benchmarks/exact-topology.md).
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass

import numpy as np

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.heuristic import canonical_jump_sets, circulant_matrix, circulant_stats_batch
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.topology.catalogue import flow_lp_lambda
from topoopt_ilp.models.topology.milp import moore_layer_hops, uniform_demand

__all__ = ["MAX_JUMP_SETS", "MooreSearch", "jump_sets", "moore_applies", "moore_floors", "search_moore_circulant"]

#: Jump sets enumerated at most (one batched BFS each): n = 32, d = 4 has 46,376 with repetition.
MAX_JUMP_SETS = 100_000
#: Relative tolerance of "lambda meets the bound" (LP values are exact to about 1e-9).
DEFAULT_TOLERANCE = 1e-7


# ------------------------------------------------------------------------------------------------
# Mathematics and validity proof
#
# Setting. n servers, each with at most d transmit and d receive ports; a topology is a loopless
# directed multigraph X (X[i, j] parallel arcs i -> j), out-degree <= d (= d when ``regular``).
# Demand: one unit between every ordered pair (the model's units; a link carries one unit per unit
# of time); lambda(X) = the max concurrent flow. Objectives: max lambda (throughput; comm_time and
# iteration_time are its bandwidth term), min W (aspl = W / (n (n - 1)), W = the sum over ordered
# pairs of hop distances), min diameter.
#
# (1) Moore layers. From a server s at most d^h servers lie h hops away (each server at distance
#     h - 1 has at most d out-neighbours, parallel arcs counted once or more), so
#     sum_t dist(s, t) >= F := the n - 1 others on layers of widths d, d^2, ... (``moore_layer_hops``)
#     and ecc(s) >= h_F := the last of those layers. Hence W(X) >= n F and diam(X) >= h_F.
# (2) Length bound (weak LP duality, lengths 1): every unit from s to t crosses >= dist(s, t) arcs,
#     so lambda W(X) <= sum over arcs of capacity = E(X) <= n d, and lambda(X) <= n d / (n F) = d / F.
# These hold for every topology the cluster allows (regular or not, with or without parallel arcs),
# so a topology with W = n F is aspl-optimal, one with diam = h_F diameter-optimal, and one with
# lambda = d / F throughput-optimal.
#
# Candidates: circulant digraphs, arcs i -> i + j (mod n) for j in a jump multiset J of size d
# (distinct jumps without ``multi_links``); every server then has d out- and d in-arcs. A circulant
# is vertex-transitive, so W = n sum_t dist(0, t) and diam = ecc(0): one breadth-first search from
# server 0 per jump set, all sets at once (the heuristic's ``circulant_stats_batch``). Multiplying
# J by a unit u mod n gives an isomorphic digraph (i -> u i), so one LP per orbit suffices (orbits
# by the heuristic's ``canonical_jump_sets``).
# Search: the jump sets meeting the floor of the objective, in enumeration order; for aspl and
# diameter the first one is optimal. For throughput a circulant with W = n F can still route
# unevenly, so each orbit's flow LP is solved until one reaches d / F. No set meeting the floor, or
# none reaching d / F: nothing is proven, and the caller runs the MILP.
# ------------------------------------------------------------------------------------------------
def moore_floors(n: int, d: int) -> tuple[float, float]:
    """(least W, least diameter) of any directed topology on n servers with out-degree <= d: steps (1)."""
    hops = moore_layer_hops(n - 1, d, d)
    return float(n * hops.sum()), float(hops.max(initial=0.0))


def _jump_set_count(n: int, d: int, multi_links: bool) -> int:
    return math.comb(n + d - 2, d) if multi_links else math.comb(n - 1, d)


def jump_sets(n: int, d: int, multi_links: bool) -> np.ndarray | None:
    """Every jump multiset of size d from 1..n-1 (sets without ``multi_links``) as a (G, d) array in
    lexicographic order; None when there are more than :data:`MAX_JUMP_SETS`."""
    count = _jump_set_count(n, d, multi_links)
    if count > MAX_JUMP_SETS:
        return None
    pick = itertools.combinations_with_replacement if multi_links else itertools.combinations
    return np.array(list(pick(range(1, n), d)), dtype=np.int64).reshape(count, d)


def moore_applies(instance: Instance, mp: np.ndarray) -> str | None:
    """Why the Moore circulant search cannot settle ``instance`` (None: it may)."""
    c = instance.cluster
    if not c.directed:
        return "undirected links"
    if instance.objective not in ("throughput", "comm_time", "iteration_time", "aspl", "diameter"):
        return f"objective {instance.objective}"
    if instance.objective not in ("aspl", "diameter") and (
        not uniform_demand(instance, mp) or mp.max(initial=0.0) <= 0
    ):
        return "the demand is not uniform all-to-all"
    if c.servers < 3 or c.degree < 1:
        return "fewer than 3 servers or degree below 1"
    if _jump_set_count(c.servers, c.degree, c.multi_links) > MAX_JUMP_SETS:
        return f"more than {MAX_JUMP_SETS:,} jump sets to enumerate"
    return None


@dataclass(frozen=True)
class MooreSearch:
    """Outcome of :func:`search_moore_circulant`. ``topology``: the proven-optimal circulant (None when
    nothing is proven; ``reason`` says why). ``value``: its lambda (model units: per unit of pair
    demand), W or diameter, by the objective. ``timed_out``: the time limit stopped the LPs."""

    topology: np.ndarray | None
    jumps: tuple[int, ...] | None
    value: float
    floor: float
    candidates: int
    meeting_floor: int
    lps_solved: int
    timed_out: bool
    reason: str | None
    wall_time_s: float


def search_moore_circulant(
    instance: Instance, options: ExactOptions, tolerance: float = DEFAULT_TOLERANCE
) -> MooreSearch:
    """The search of the proof comment (call :func:`moore_applies` first)."""
    started = time.perf_counter()
    c = instance.cluster
    n, d = c.servers, c.degree
    sets = jump_sets(n, d, c.multi_links)
    w_floor, diam_floor = moore_floors(n, d)
    unreachable, totals, diameters = circulant_stats_batch(n, sets)  # from server 0: vertex-transitive
    totals = np.where(unreachable == 0, n * totals, np.inf)  # W = n * the distance sum
    diameters = np.where(unreachable == 0, diameters, np.inf)
    hop_objective = instance.objective in ("aspl", "diameter")
    if instance.objective == "diameter":
        meets, floor = diameters <= diam_floor, diam_floor
    else:
        meets, floor = totals <= w_floor, (w_floor if hop_objective else d / (w_floor / n))
    hits = np.flatnonzero(meets)
    lps = 0

    def outcome(
        jumps: np.ndarray | None, value: float, timed_out: bool = False, reason: str | None = None
    ) -> MooreSearch:
        X = None if jumps is None else circulant_matrix(n, jumps, directed=True)
        return MooreSearch(
            X,
            None if jumps is None else tuple(int(j) for j in jumps),
            value,
            floor,
            len(sets),
            len(hits),
            lps,
            timed_out,
            reason,
            time.perf_counter() - started,
        )

    if not hits.size:
        if instance.objective == "diameter":
            what, best, least = "diameter", diameters.min(), diam_floor
        else:
            what, best, least = "W (sum of hop distances)", totals.min(), w_floor
        return outcome(None, math.nan, reason=f"no circulant meets the Moore floor: least {what} {best:g} > {least:g}")
    if hop_objective:
        best = int(hits[0])
        return outcome(sets[best], float(diameters[best] if instance.objective == "diameter" else totals[best]))
    seen, best_lam = set(), -math.inf
    for g, canonical in zip(hits, canonical_jump_sets(sets[hits], n, directed=True)):
        key = tuple(int(j) for j in canonical)
        if key in seen:
            continue
        seen.add(key)
        lam = flow_lp_lambda(circulant_matrix(n, sets[g], directed=True), options, started)
        if lam is None:
            return outcome(None, math.nan, timed_out=True, reason="the time limit ran out")
        lps += 1
        best_lam = max(best_lam, lam)
        if lam >= floor * (1 - tolerance):
            return outcome(sets[g], lam)
    return outcome(
        None,
        math.nan,
        reason=f"{len(seen)} circulant(s) meet the Moore floor of W, but their best lambda "
        f"{best_lam:.6g} is below the bound {floor:.6g} (uneven routing)",
    )
