"""CoinChangeMod: shortest jump decompositions of every residue mod n (docs/methods/heuristic.md).

The coins are the chosen ring jumps (and their negatives when links are undirected). The fewest
coins summing to ``r (mod n)`` is the hop distance from 0 to ``r`` in the circulant (Cayley graph)
with those generators, and by translation invariance the same jump sequence routes every pair
``(s, s + r)``. The authors keep one random back-pointer per residue; here all shortest
decompositions are enumerated level by level (vectorized over residues), keeping at most
``max_routes`` per residue so the output stays polynomial (the number of shortest sequences is
exponential in the distance: a sum of ``h`` coins has up to ``h!`` orderings).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from topoopt_ilp.core.routes import OffsetRoutes
from topoopt_ilp.heuristic.circulant import coin_set

__all__ = ["coin_change_mod", "DEFAULT_MAX_ROUTES"]

#: Default cap on shortest decompositions kept per residue.
DEFAULT_MAX_ROUTES = 8


def coin_change_mod(
    n: int, coins: Iterable[int], *, directed: bool = False, max_routes: int | None = DEFAULT_MAX_ROUTES
) -> tuple[np.ndarray, OffsetRoutes]:
    """Shortest decompositions of every nonzero residue as a sum of coins mod ``n``.

    Parameters
    ----------
    n : int
        Modulus (number of servers).
    coins : iterable of int
        Chosen jumps. When ``directed`` is False their negatives are added (a bidirectional link
        can be crossed both ways). Repeats and residues equal to 0 are dropped.
    directed : bool
        Whether links are one-way.
    max_routes : int or None
        Keep at most this many shortest decompositions per residue (``None``: all of them, which can
        be exponential). Kept alternatives are the first in lexicographic order of
        ``(... , last coin)`` with coins sorted ascending as residues, so the result is deterministic.

    Returns
    -------
    dist : numpy.ndarray
        ``dist[r]`` = fewest coins summing to ``r`` (``dist[0] = 0``; ``-1`` if unreachable). Equals
        BFS distance from 0 to ``r`` in the circulant graph.
    routes : OffsetRoutes
        For every reachable nonzero offset, its kept decompositions (jumps as residues, ``n - j``
        meaning ``-j``) with equal fractions summing to 1.
    """
    c = coin_set(n, coins, directed)
    K = np.iinfo(np.int64).max if max_routes is None else int(max_routes)
    if K < 1:
        raise ValueError("max_routes must be >= 1")
    dist = np.full(n, -1, dtype=np.int64)
    dist[0] = 0
    # routes of the previous level, indexed by position in `level_res`
    level_res = np.array([0], dtype=np.int64)
    level_routes = np.zeros((1, 1, 0), dtype=np.int64)  # (residues, K', h)
    level_count = np.array([1], dtype=np.int64)
    pos = np.full(n, -1, dtype=np.int64)  # position of a residue within its level
    pos[0] = 0
    out_off, out_jumps, out_frac = [], [], []
    h = 0
    while level_res.size and c.size:
        h += 1
        nxt = np.unique((level_res[:, None] + c[None, :]).ravel() % n)
        nxt = nxt[dist[nxt] < 0]
        if not nxt.size:
            break
        dist[nxt] = h
        kp = level_routes.shape[1]
        blocks, masks = [], []
        for coin in c:  # one predecessor per coin: r - coin must be on the previous level
            p = (nxt - coin) % n
            ok = dist[p] == h - 1
            pp = np.where(ok, pos[p], 0)
            r = level_routes[pp]  # (len(nxt), kp, h-1)
            blk = np.concatenate([r, np.full((nxt.size, kp, 1), coin, dtype=np.int64)], axis=2)
            blocks.append(blk)
            masks.append(ok[:, None] & (np.arange(kp)[None, :] < level_count[pp][:, None]))
        allr = np.concatenate(blocks, axis=1)  # (len(nxt), kp*|c|, h)
        allm = np.concatenate(masks, axis=1)
        cnt = allm.sum(axis=1)
        keep = min(K, int(cnt.max()))
        order = np.argsort(~allm, axis=1, kind="stable")[:, :keep]  # valid ones first, in order
        level_routes = np.take_along_axis(allr, order[:, :, None], axis=1)
        level_count = np.minimum(cnt, keep)
        pos[nxt] = np.arange(nxt.size)
        level_res = nxt
        valid = np.arange(keep)[None, :] < level_count[:, None]
        out_off.append(np.repeat(nxt, level_count))
        out_jumps.append(level_routes[valid])
        out_frac.append(np.repeat(1.0 / level_count, level_count))
    if not out_off:
        return dist, OffsetRoutes.empty()
    H = max(a.shape[1] for a in out_jumps)
    jumps = np.zeros((sum(a.shape[0] for a in out_jumps), H), dtype=np.int64)
    row = 0
    for a in out_jumps:
        jumps[row : row + a.shape[0], : a.shape[1]] = a
        row += a.shape[0]
    off = np.concatenate(out_off)
    order = np.argsort(off, kind="stable")
    return dist, OffsetRoutes(off[order], jumps[order], np.concatenate(out_frac)[order])
