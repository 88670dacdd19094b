"""Circulant helpers: link matrices and BFS over residues.

A circulant (Cayley graph of Z_n) is vertex-transitive, so the distances from node 0 to every
residue give every distance: ``dist(a, b) = dist0[(b - a) mod n]``. One BFS over ``n`` residues
replaces an all-pairs computation. Kept local to the heuristic (no dependency on
``topoopt_ilp.core.graph``).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = [
    "circulant_arcs",
    "circulant_matrix",
    "coin_set",
    "circulant_distances",
    "circulant_stats",
    "circulant_stats_batch",
]


def coin_set(n: int, jumps: Iterable[int], directed: bool = False) -> np.ndarray:
    """Distinct nonzero residues reachable in one hop: the jumps, plus their negatives when undirected."""
    j = np.asarray(list(jumps), dtype=np.int64) % n
    if not directed:
        j = np.concatenate([j, (-j) % n])
    j = np.unique(j)
    return j[j != 0]


def circulant_arcs(n: int, jumps: Iterable[int], directed: bool = False) -> np.ndarray:
    """The circulant's links as flat positions ``i * n + j`` of its link-count matrix, one per link
    and direction (repeats for parallel links): ``np.add.at(X.reshape(-1), arcs, 1)`` adds them."""
    idx = np.arange(n, dtype=np.int64)
    parts = []
    for j in jumps:
        j = int(j) % n
        if j == 0:
            raise ValueError("jump 0 would be a self-loop")
        parts.append(idx * n + (idx + j) % n)
        if not directed and 2 * j != n:
            parts.append(idx * n + (idx - j) % n)
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def circulant_matrix(n: int, jumps: Iterable[int], directed: bool = False) -> np.ndarray:
    """Link-count matrix of the circulant with the given jumps (repeats allowed: parallel links).

    Undirected: each jump ``j`` adds links ``i <-> i + j``; row sums grow by 2 per jump, except
    ``j == n/2`` which adds one link ``i <-> i + n/2`` (1 port). Directed: links ``i -> i + j``.
    """
    X = np.zeros((n, n), dtype=np.int64)
    np.add.at(X.reshape(-1), circulant_arcs(n, jumps, directed), 1)
    return X


def circulant_distances(n: int, coins: Iterable[int]) -> np.ndarray:
    """Hop distance from 0 to every residue using steps in ``coins`` (already including negatives
    for undirected graphs). ``-1`` marks unreachable residues."""
    c = np.unique(np.asarray(list(coins), dtype=np.int64) % n)
    dist = np.full(n, -1, dtype=np.int64)
    dist[0] = 0
    frontier = np.array([0], dtype=np.int64)
    h = 0
    while frontier.size:
        h += 1
        nxt = np.unique((frontier[:, None] + c[None, :]).ravel() % n)
        nxt = nxt[dist[nxt] < 0]
        dist[nxt] = h
        frontier = nxt
    return dist


def circulant_stats(n: int, jumps: Iterable[int], directed: bool = False) -> tuple[int, float]:
    """``(diameter, mean hops)`` of the circulant with these jumps; mean over the ``n - 1`` nonzero
    residues. Raises if the circulant is disconnected."""
    d = circulant_distances(n, coin_set(n, jumps, directed))
    if (d < 0).any():
        raise ValueError("circulant is disconnected")
    return int(d.max()), float(d[1:].sum() / (n - 1))


def circulant_stats_batch(n: int, coin_sets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """BFS over residues from 0 for many coin sets, each set's frontier an ``n``-bit integer.

    A step by coin ``c`` rotates the frontier's bits by ``c``, so a BFS level is one rotation and
    one OR per coin on ``n``-bit integers: it beat a numpy BFS batched across the sets 30-90x at
    1,024-16,384 servers and was not slower at 32 (2026-12-07, 2 cores, the heuristic's sampled
    sets and random ones).

    Parameters
    ----------
    coin_sets : numpy.ndarray
        Shape ``(B, c)``: one-hop steps of each set (negatives included for undirected graphs).

    Returns
    -------
    unreachable, total, diameter : numpy.ndarray
        Per set: number of residues not reachable from 0, sum of distances over reachable
        residues, and the largest finite distance.
    """
    coin_sets = np.asarray(coin_sets, dtype=np.int64) % n
    B = coin_sets.shape[0]
    unreach = np.empty(B, dtype=np.int64)
    total = np.empty(B, dtype=np.int64)
    diam = np.empty(B, dtype=np.int64)
    everyone = (1 << n) - 1
    for k, row in enumerate(coin_sets.tolist()):
        coins = sorted({c for c in row if c})
        visited = frontier = 1  # bit r: residue r
        reached, tot, h = 1, 0, 0
        while True:
            new = 0
            for c in coins:
                new |= (frontier << c | frontier >> (n - c)) & everyone
            new &= ~visited
            if not new:
                break
            h += 1
            count = new.bit_count()
            tot += h * count
            reached += count
            visited |= new
            frontier = new
        unreach[k], total[k], diam[k] = n - reached, tot, h
    return unreach, total, diam
