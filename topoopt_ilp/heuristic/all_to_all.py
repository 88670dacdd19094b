"""A circulant for uniform all-to-all traffic, routed by offset routes (docs/methods/heuristic.md).

Under uniform all-to-all every server sends the same bytes ``A`` to every other one. On a circulant
with jumps ``J`` and CoinChangeMod routes, the route of offset ``o`` leaves every server alike, so
the bytes on an arc of jump ``j`` are the same at every server:

    load(j) = A * sum over routes r of fraction[r] * (times j occurs in r)

and the iteration's bandwidth term is ``max_j load(j) / B``. The sum of ``load(j)`` over the coins is
``A`` times the total hop count of all offsets, so the mean hop count (ASPL) bounds it from below,
and how evenly the shortest routes share the coins decides how close the maximum comes to it.

The jump set: the first jump is 1 (every generating set of coprime jumps maps onto one that
contains 1 by a unit multiplier, an isomorphism); the others are drawn among the jumps coprime with
``n`` (seeded, plus TopoOpt's geometric pick), as many sets as :data:`SEARCH_WORK` residues of
breadth-first search allow; the :data:`FINALISTS` of least (ASPL, diameter) are routed by
CoinChangeMod, and the one whose busiest coin carries least wins. With undirected links each
offset is split half and half with the mirror image of its opposite offset's routes
(:func:`mirrored`), so both directions of a link carry the same bytes. The routes are ``n - 1``
offsets (up to twice the decompositions kept, :data:`ROUTE_BUDGET`), so the file grows with
``n x routes``, not n^2.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from math import comb

import numpy as np

from topoopt_ilp.core.routes import OffsetRoutes
from topoopt_ilp.heuristic.coin_change import coin_change_mod
from topoopt_ilp.heuristic.select import geometric_rule, jump_set_score
from topoopt_ilp.heuristic.totient import totient_perms

__all__ = [
    "AllToAllCirculant",
    "all_to_all_circulant",
    "coin_loads",
    "mirrored",
    "SEARCH_WORK",
    "FINALISTS",
    "ROUTE_BUDGET",
]

#: Jump sets x servers scored by breadth-first search over residues (about 1 s of CPU).
SEARCH_WORK = 2**20
#: Fewest jump sets scored, whatever n.
MIN_SAMPLES = 16
#: Jump sets of least ASPL whose CoinChangeMod routes are built to compare their busiest coin.
FINALISTS = 16
#: Shortest decompositions kept per offset (before the mirror images): ROUTE_BUDGET / n, between 2
#: and 8. At n = 1,024 and 4,096, 2 balance the coins as well as 8 (busiest coin within 0.2 %) with
#: a third of the routes; at n <= 512, 8 gave 4-14 % shorter iterations.
ROUTE_BUDGET = 8192


@dataclass(frozen=True, eq=False)
class AllToAllCirculant:
    """The chosen jumps, CoinChangeMod's hop count per residue and its offset routes, and the
    relative load of the busiest coin (``max_j load(j) / A``) and the number of jump sets scored."""

    jumps: tuple[int, ...]
    dist: np.ndarray
    routes: OffsetRoutes
    max_coin_load: float
    sets_scored: int


def coin_loads(n: int, routes: OffsetRoutes) -> np.ndarray:
    """Per residue j: the sum over routes of ``fraction x (times j occurs)``, the bytes on each arc of
    jump j per byte that every server sends to every other one."""
    on = routes.jumps != 0
    weights = np.broadcast_to(routes.fraction[:, None], routes.jumps.shape)[on]
    return np.bincount(routes.jumps[on] % n, weights=weights, minlength=n)


def _jump_classes(n: int, directed: bool) -> np.ndarray:
    """Jumps coprime with n, one per +-pair when undirected (``j < n/2``: ``n/2`` takes one port)."""
    c = totient_perms(n, n)
    return c if directed else c[2 * c < n]


def _sampled_sets(classes: np.ndarray, m: int, n: int, directed: bool, seed: int, anchored: bool) -> np.ndarray:
    """Sorted jump sets of size m drawn from ``classes``: all of them when few enough, else the
    geometric pick and seeded random draws, as many as :data:`SEARCH_WORK` allows. ``anchored``:
    every set contains 1. Alone that loses nothing (a unit multiplier maps any set of coprime jumps
    onto one with 1, an isomorphism); beside jumps the design already has, the multiplier would move
    those too, so the sets are drawn unanchored."""
    first = np.ones(1, dtype=np.int64) if anchored else np.zeros(0, dtype=np.int64)
    rest = classes[classes != 1] if anchored else classes
    k = m - first.size  # jumps drawn per set
    budget = max(MIN_SAMPLES, SEARCH_WORK // n)
    if comb(rest.size, k) <= budget:
        every = list(combinations(rest.tolist(), k))
        others = np.array(every, dtype=np.int64).reshape(len(every), k)
    else:
        rng = np.random.default_rng(seed)
        keys = rng.random((budget, rest.size))
        others = rest[np.argpartition(keys, k - 1, axis=1)[:, :k]] if k > 0 else np.zeros((budget, 0), np.int64)
        geometric = np.array(geometric_rule(classes, m, n=n, directed=directed), dtype=np.int64)
        if np.unique(geometric).size == m and (1 in geometric or not anchored):
            others = np.vstack([geometric[geometric != 1][None, :] if anchored else geometric[None, :], others])
    sets = np.sort(np.hstack([np.broadcast_to(first, (others.shape[0], first.size)), others]), axis=1)
    return np.unique(sets, axis=0)


def all_to_all_circulant(
    n: int,
    d: int,
    *,
    directed: bool = False,
    seed: int = 0,
    max_routes: int | None = None,
    fixed: tuple[int, ...] = (),
) -> AllToAllCirculant | None:
    """The circulant of degree ``d`` on ``n`` servers for uniform all-to-all (module docstring), or
    None when there is none of distinct coprime jumps (an odd undirected degree, or fewer coprime
    jumps than the degree needs). ``max_routes``: CoinChangeMod's decompositions kept per offset
    (default: :data:`ROUTE_BUDGET` / n, between 2 and 8).

    ``fixed``: jumps the topology already has (an AllReduce design's rings); the ``d`` ports are
    then spent on other coprime jumps, chosen with these, and the routes go over both. ``jumps`` of
    the result are the added ones; ``dist`` and ``routes`` cover all of them."""
    if max_routes is None:
        max_routes = max(2, min(8, ROUTE_BUDGET // n))
    if not directed and d % 2:
        return None
    m = d if directed else d // 2
    have = sorted({j % n if directed else min(j % n, n - j % n) for j in fixed} - {0})
    classes = _jump_classes(n, directed)
    classes = classes[~np.isin(classes, have)]
    anchored = not have
    if m < 1 or classes.size < m or (anchored and 1 not in classes):
        return None
    sets = _sampled_sets(classes, m, n, directed, seed, anchored)
    score = jump_set_score(sets, n, directed, tuple(have))
    best: AllToAllCirculant | None = None
    for i in np.argsort(score, kind="stable")[:FINALISTS].tolist():
        jumps = tuple(int(j) for j in sets[i])
        dist, routes = coin_change_mod(n, (*have, *jumps), directed=directed, max_routes=max_routes)
        load = coin_loads(n, routes)
        busiest = float(load.max() if directed else ((load + np.roll(load[::-1], 1)) / 2).max())
        if best is None or busiest < best.max_coin_load:
            best = AllToAllCirculant(jumps, dist, routes, busiest, len(sets))
    if best is None or directed:
        return best
    routes = mirrored(n, best.routes)
    return AllToAllCirculant(best.jumps, best.dist, routes, float(coin_loads(n, routes).max()), best.sets_scored)


def mirrored(n: int, routes: OffsetRoutes) -> OffsetRoutes:
    """Undirected links: every offset o half on its own routes and half on those of ``n - o`` walked
    backwards (each jump negated), equal routes merged. CoinChangeMod keeps the first shortest
    decompositions with the coins in ascending order as residues, so it favours ``j`` over ``n - j``
    (at n = 1,024 the arcs of jump 1 carried about twice those of jump -1); the mirror images carry the
    same bytes on both directions of every link."""
    back = np.where(routes.jumps != 0, (n - routes.jumps) % n, 0)
    offset = np.concatenate([routes.offset, (n - routes.offset) % n])
    rows = np.hstack([offset[:, None], np.vstack([routes.jumps, back])])
    unique, inverse = np.unique(rows, axis=0, return_inverse=True)
    fraction = np.bincount(inverse.ravel(), weights=np.concatenate([routes.fraction, routes.fraction]) / 2)
    return OffsetRoutes(unique[:, 0], unique[:, 1:], fraction)
