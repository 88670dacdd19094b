"""Parallel-link repair for ``cluster.multi_links: false``: degree-preserving swaps that turn a
multigraph into a simple graph (no two links between one pair, no self-loops).

TopoOpt's methods build multigraphs (repeated matchings, the authors' duplicate jumps, a torus side
of 2, random stub pairing). :func:`remove_parallel_links` rewires them in place:

* undirected: a parallel copy of ``u - v`` and a link ``a - b`` become ``u - a`` and ``v - b``
  (``a, b`` outside ``{u, v}``, neither new pair already linked). ``u - v`` keeps a copy and ``a``,
  ``b`` stay joined through ``a - u - v - b``, so connectivity is never lost;
* directed: a parallel copy of ``u -> v`` and an arc ``a -> b`` become ``u -> b`` and ``a -> v``;
  a swap that would split a strongly connected topology is skipped.

Every degree (in- and out-degree when directed) is kept. Among the possible partners the swap
prefers another parallel copy (two duplicates gone in one swap), then the link carrying the least
``weight`` (traffic) per copy, then new pairs with the most traffic. When no parallel copy has a
partner, a random neutral swap of two links (no new duplicate, connectivity kept) changes the graph
and the search goes on; a simple topology with the same degrees exists whenever ``d <= n - 1``
(the instance loader refuses larger degrees with ``multi_links: false``).
"""

from __future__ import annotations

import numpy as np
from scipy.sparse.csgraph import connected_components

__all__ = ["remove_parallel_links", "parallel_link_count"]


def parallel_link_count(X: np.ndarray, directed: bool = False) -> int:
    """Links beyond the first between a pair (``i -> j`` when directed, ``i - j`` otherwise)."""
    m = X if directed else np.triu(X, 1)
    return int(np.maximum(m - 1, 0).sum())


def _connected(X: np.ndarray, directed: bool) -> bool:
    return connected_components(X > 0, directed=directed, connection="strong")[0] <= 1


def _reaches(X, a, b) -> bool:
    """Whether ``a`` reaches ``b`` over the arcs of ``X`` (level-by-level search, stops at ``b``)."""
    seen = np.zeros(X.shape[0], dtype=bool)
    seen[a] = True
    frontier = np.array([a])
    while frontier.size:
        nxt = (X[frontier] > 0).any(axis=0) & ~seen
        if nxt[b]:
            return True
        seen |= nxt
        frontier = np.flatnonzero(nxt)
    return False


def _links(X, directed):
    """Every linked pair as arrays ``(A, B)``; undirected pairs in both orientations."""
    if directed:
        return np.nonzero(X)
    iu, ju = np.nonzero(np.triu(X, 1))
    return np.concatenate([iu, ju]), np.concatenate([ju, iu])


def _candidates(X, u, v, w, A, B, directed):
    """Partner links ``(a, b)`` among ``(A, B)`` for the duplicate ``u - v``, best first. The new
    pairs are ``u - a`` and ``v - b`` (undirected) or the arcs ``u -> b`` and ``a -> v`` (directed)."""
    if directed:
        ok = (B != u) & (A != v) & (X[u, B] == 0) & (X[A, v] == 0)
    else:
        ok = (A != u) & (A != v) & (B != u) & (B != v) & (X[u, A] == 0) & (X[v, B] == 0)
    ok &= X[A, B] > 0
    A, B = A[ok], B[ok]
    if not A.size:
        return A, B
    per_link = w[A, B] / X[A, B]
    gain = w[u, B] + w[A, v] if directed else w[u, A] + w[v, B]
    order = np.lexsort((-gain, per_link, X[A, B] == 1))
    return A[order], B[order]


def _apply(X, directed, moves):
    for a, b, s in moves:
        X[a, b] += s
        if not directed:
            X[b, a] += s


def _swap_moves(directed, u, v, a, b):
    if directed:
        return ((u, v, -1), (a, b, -1), (u, b, 1), (a, v, 1))
    return ((u, v, -1), (a, b, -1), (u, a, 1), (v, b, 1))


def _neutral_move(X, directed, rng):
    """Random degree-preserving moves that add no self-loop and do not add parallel links overall:

    * shift: a parallel copy of ``u - v`` moves as in a repair swap with a partner ``a - b`` whose
      new pair ``v - b`` (directed ``a -> v``) is already linked, so the duplicate moves elsewhere;
    * swap: ``a - b``, ``c - e`` become ``a - c``, ``b - e`` (directed: ``a -> e``, ``c -> b``) on
      unlinked pairs;
    * directed only, reversal of a triangle ``a -> b -> c -> a`` (2-swaps alone cannot reach every
      simple digraph: on 3 servers of degree 2 only the reversal helps).
    """
    n = X.shape[0]
    kind = rng.random()
    if kind < 0.5:
        du, dv = np.nonzero(X > 1 if directed else np.triu(X > 1, 1))
        k = int(rng.integers(du.size))
        u, v = int(du[k]), int(dv[k])
        if not directed and rng.integers(2):
            u, v = v, u
        free = np.flatnonzero(X[u] == 0)
        free = free[free != u]
        if not free.size:
            return None
        if directed:  # u -> v, a -> b  become  u -> b, a -> v
            b = int(rng.choice(free))
            ins = np.flatnonzero(X[:, b] > 0)
            ins = ins[(ins != v) & (ins != u)]
            if not ins.size:
                return None
            a = int(rng.choice(ins))
        else:  # u - v, a - b  become  u - a, v - b
            a = int(rng.choice(free))
            nb = np.flatnonzero(X[a] > 0)
            nb = nb[(nb != v) & (nb != u)]
            if not nb.size:
                return None
            b = int(rng.choice(nb))
        return _swap_moves(directed, u, v, a, b)
    A, B = np.nonzero(X if directed else np.triu(X, 1))
    e = int(rng.integers(A.size))
    a, b = int(A[e]), int(B[e])
    if directed and kind < 0.75:
        cs = np.flatnonzero((X[b] > 0) & (X[:, a] > 0))
        cs = cs[(cs != a) & (cs != b)]
        if not cs.size:
            return None
        c = int(rng.choice(cs))
        moves = ((a, b, -1), (b, c, -1), (c, a, -1), (b, a, 1), (c, b, 1), (a, c, 1))
    else:
        f = int(rng.integers(A.size))
        c, e2 = int(A[f]), int(B[f])
        if not directed and rng.integers(2):
            c, e2 = e2, c
        if e == f or len({a, b, c, e2}) < (3 if directed else 4) or (directed and (a == e2 or c == b)):
            return None
        moves = (
            ((a, b, -1), (c, e2, -1), (a, e2, 1), (c, b, 1))
            if directed
            else ((a, b, -1), (c, e2, -1), (a, c, 1), (b, e2, 1))
        )
    if kind >= 0.5 and any(X[p, q] > 0 for p, q, sg in moves if sg > 0):
        return None
    if any(p == q for p, q, _ in moves) or n < 3:
        return None
    return moves


def _neutral_swap(X, directed, keep_connected, rng) -> bool:
    """Apply one random :func:`_neutral_move` (keeping connectivity when asked); False if none was
    found in 200 tries."""
    for _ in range(200):
        moves = _neutral_move(X, directed, rng)
        if moves is None:
            continue
        _apply(X, directed, moves)
        if keep_connected and not _connected(X, directed):
            _apply(X, directed, [(p, q, -s) for p, q, s in moves])
            continue
        return True
    return False


def remove_parallel_links(
    X: np.ndarray,
    *,
    directed: bool = False,
    weight: np.ndarray | None = None,
    seed: int = 0,
    max_neutral: int | None = None,
) -> int:
    """Rewire ``X`` in place until no pair has two links; return the number of swaps made.

    Parameters
    ----------
    X : (n, n) int array
        Link counts (symmetric when undirected), zero diagonal. Modified in place.
    directed : bool
        Arcs ``i -> j`` (in- and out-degrees kept) instead of undirected links.
    weight : (n, n) array, optional
        Traffic between each pair (any nonnegative scale); links carrying less are moved first.
    seed : int
        Seeds the neutral swaps used when no direct swap removes a parallel link.
    max_neutral : int, optional
        Neutral swaps allowed before giving up (default ``50 * links``).

    Raises
    ------
    ValueError
        If some server needs more distinct neighbours than exist (degree > n - 1), or the search
        gives up.
    """
    n = X.shape[0]
    if np.diag(X).any():
        raise ValueError("the topology has a self-loop")
    deg = [X.sum(axis=1), X.sum(axis=0)] if directed else [X.sum(axis=1)]
    if any((dg > n - 1).any() for dg in deg):
        raise ValueError(
            f"a server has more than {n - 1} links: no simple topology on {n} servers has its degree "
            "(multi_links false)"
        )
    if weight is None:
        w = np.zeros((n, n))
    else:
        w = np.asarray(weight, dtype=float)
        w = np.where(np.isfinite(w), np.abs(w), 0.0)
        if not directed:
            w = w + w.T
    keep_connected = _connected(X, directed)
    rng = np.random.default_rng(seed)
    swaps = neutral = 0
    limit = max_neutral if max_neutral is not None else 50 * (int(X.sum()) + 1)
    while True:
        m = X if directed else np.triu(X, 1)
        du, dv = np.nonzero(m > 1)
        if not du.size:
            return swaps + neutral
        # most copies first, then the least traffic per copy
        order = np.lexsort((w[du, dv] / m[du, dv], -m[du, dv]))
        links = _links(X, directed)  # this round's links; _candidates() rechecks each against X
        progress = False
        for k in order.tolist():
            u, v = int(du[k]), int(dv[k])
            while X[u, v] > 1:
                A, B = _candidates(X, u, v, w, *links, directed)
                for a, b in zip(A.tolist()[:64], B.tolist()[:64]):
                    moves = _swap_moves(directed, u, v, a, b)
                    _apply(X, directed, moves)
                    # directed: u -> v keeps a copy, so only the arc a -> b is lost, and the
                    # topology stays strongly connected iff a still reaches b
                    if directed and keep_connected and not _reaches(X, a, b):
                        _apply(X, directed, [(p, q, -s) for p, q, s in moves])
                        continue
                    swaps += 1
                    progress = True
                    break
                else:
                    break  # no partner for u - v this round
        if progress:
            continue
        if neutral >= limit or not _neutral_swap(X, directed, keep_connected, rng):
            raise ValueError(f"could not remove the parallel links after {neutral} neutral swaps (multi_links false)")
        neutral += 1
