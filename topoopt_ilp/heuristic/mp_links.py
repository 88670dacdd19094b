"""MP sub-topology by repeated maximum-weight matching, and MP routing over the combined
topology (topoopt.md 3.6-3.7)."""

from __future__ import annotations

from itertools import islice
from typing import Callable

import networkx as nx
import numpy as np
import scipy.sparse as sp
from scipy.optimize import linear_sum_assignment
from scipy.sparse.csgraph import breadth_first_order

from topoopt_ilp.routing import PathSet

try:  # scipy's C BFS kernel without the per-call graph validation of breadth_first_order
    from scipy.sparse.csgraph._traversal import _breadth_first_directed as _BFS_KERNEL
except ImportError:  # pragma: no cover - private API moved: use the public function
    _BFS_KERNEL = None

__all__ = [
    "repeated_matching",
    "blossom_matching",
    "greedy_matching",
    "route_pairs",
    "DEFAULT_MATCHING",
    "BLOSSOM_EDGE_LIMIT",
]

#: ``method="auto"`` uses networkx's exact Blossom up to this many demand edges, greedy above.
BLOSSOM_EDGE_LIMIT = 2000
DEFAULT_MATCHING = "auto"


def blossom_matching(i: np.ndarray, j: np.ndarray, w: np.ndarray, n: int, *, maxcardinality: bool = False) -> np.ndarray:
    """Exact maximum-weight matching (networkx Blossom, O(n^3)). Returns matched edge indices."""
    G = nx.Graph()
    G.add_nodes_from(range(n))
    G.add_weighted_edges_from(zip(i.tolist(), j.tolist(), w.tolist()))
    eid = {(int(a), int(b)): e for e, (a, b) in enumerate(zip(i, j))}
    out = []
    for a, b in nx.max_weight_matching(G, maxcardinality=maxcardinality):
        out.append(eid[(a, b)] if (a, b) in eid else eid[(b, a)])
    return np.array(sorted(out), dtype=np.int64)


def greedy_matching(i: np.ndarray, j: np.ndarray, w: np.ndarray, n: int, *, maxcardinality: bool = False) -> np.ndarray:
    """Greedy maximum-weight matching (heaviest edge first), computed vectorized by repeatedly
    matching *locally dominant* edges (heaviest at both endpoints). With ties broken by edge index
    this yields exactly the sequential greedy matching; weight >= 1/2 of optimal (in practice far
    closer, see ``benchmarks/heuristic_scale.py``). ``maxcardinality`` is ignored (completion to a
    perfect matching is done by the caller)."""
    order = np.lexsort((np.arange(w.size), -w))  # rank 0 = heaviest
    I, J = i[order], j[order]
    rank = np.arange(w.size)
    keep = w[order] > 0
    I, J, rank = I[keep], J[keep], rank[keep]
    free = np.ones(n, dtype=bool)
    matched = []
    big = np.iinfo(np.int64).max
    while I.size:
        best = np.full(n, big, dtype=np.int64)
        # reversed assignment: the last write per node is its smallest rank (heaviest edge)
        best[J[::-1]] = rank[::-1]
        bi = np.full(n, big, dtype=np.int64)
        bi[I[::-1]] = rank[::-1]
        best = np.minimum(best, bi)
        dom = (best[I] == rank) & (best[J] == rank)
        matched.append(rank[dom])
        free[I[dom]] = False
        free[J[dom]] = False
        alive = free[I] & free[J]
        I, J, rank = I[alive], J[alive], rank[alive]
    r = np.concatenate(matched) if matched else np.zeros(0, dtype=np.int64)
    return np.sort(order[r])


_MATCHERS: dict[str, Callable[..., np.ndarray]] = {"blossom": blossom_matching, "greedy": greedy_matching}


def _pairs_from(T, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Undirected demand pairs i < j (sorted by i*n + j) with weight T_ij + T_ji > 0; works on the
    nonzeros only (no dense n x n temporaries)."""
    if sp.issparse(T):
        C = T.tocoo()
        r, c, v = C.row.astype(np.int64), C.col.astype(np.int64), C.data.astype(float)
    else:
        A = np.asarray(T)
        r, c = np.nonzero(A)
        r, c = r.astype(np.int64), c.astype(np.int64)
        v = A[r, c].astype(float)
    m = (r != c) & (v > 0)
    r, c, v = r[m], c[m], v[m]
    key = np.minimum(r, c) * n + np.maximum(r, c)
    uk, inv = np.unique(key, return_inverse=True)
    w = np.bincount(inv, weights=v, minlength=uk.size)
    return uk // n, uk % n, w


def repeated_matching(
    T,
    rounds: int,
    *,
    seed: int = 0,
    method: str | Callable[..., np.ndarray] = DEFAULT_MATCHING,
    maxcardinality: bool = False,
    directed: bool = False,
) -> np.ndarray:
    """MP link matrix from ``rounds`` rounds of maximum-weight matching on the MP demand.

    Parameters
    ----------
    T : (n, n) array_like or scipy sparse matrix
        MP bytes ``i -> j``. Undirected links match on the symmetrised demand ``T + T^T``.
    rounds : int
        ``d_MP``: every round adds one link per node (one port).
    seed : int
        Seeds the random completion of unmatched nodes.
    method : {"auto", "blossom", "greedy"} or callable
        Matching algorithm ``f(i, j, w, n, maxcardinality=...) -> matched edge indices``.
        ``"blossom"``: networkx ``max_weight_matching`` (exact, the faithful choice; O(n^3)).
        ``"greedy"``: :func:`greedy_matching` (vectorized, 1/2-approximation). ``"auto"``: Blossom
        up to :data:`BLOSSOM_EDGE_LIMIT` demand edges, greedy above.
    maxcardinality : bool
        Passed to the matcher. Not needed for regularity: unmatched nodes are paired at random
        afterwards, and "max-weight matching on demand edges + arbitrary completion" is exactly the
        authors' max-weight *perfect* matching on the complete graph (non-demand pairs weigh 0).
    directed : bool
        Directed links: each round is a fixed-point-free permutation maximising the discounted
        demand (``scipy.optimize.linear_sum_assignment``, exact, dense O(n^3)).

    Returns
    -------
    numpy.ndarray
        ``(n, n)`` int64 link counts; undirected: symmetric with row sums ``rounds``.

    Notes
    -----
    After each round the demand is discounted to ``T_ij / (c + 1)`` with ``c`` the links now between
    ``i`` and ``j`` (demand per parallel link), so later rounds cover other pairs unless one pair
    dominates. Random completion links that land on a demand pair count towards ``c`` too.
    """
    n = T.shape[0]
    M = np.zeros((n, n), dtype=np.int64)
    if rounds <= 0:
        return M
    rng = np.random.default_rng(seed)
    if directed:
        A = T.toarray() if sp.issparse(T) else np.asarray(T, dtype=float)
        for _ in range(rounds):
            w = A / (M + 1)
            # forbid self-loops: a diagonal entry below any full permutation's total
            np.fill_diagonal(w, -(w.max() + 1) * n)
            r, c = linear_sum_assignment(w, maximize=True)
            M[r, c] += 1
        return M
    if n % 2:
        raise ValueError("undirected matching rounds need an even number of nodes")
    i, j, w0 = _pairs_from(T, n)
    key = i * n + j  # sorted: _pairs_from returns np.unique keys
    cnt = np.zeros(w0.size, dtype=np.int64)
    matcher = method
    if isinstance(method, str):
        if method == "auto":
            matcher = blossom_matching if w0.size <= BLOSSOM_EDGE_LIMIT else greedy_matching
        elif method in _MATCHERS:
            matcher = _MATCHERS[method]
        else:
            raise ValueError(f"unknown matching method {method!r}")
    for _ in range(rounds):
        e = matcher(i, j, w0 / (cnt + 1), n, maxcardinality=maxcardinality)
        a, b = i[e], j[e]
        free = np.ones(n, dtype=bool)
        free[a] = False
        free[b] = False
        rest = rng.permutation(np.flatnonzero(free))
        a = np.concatenate([a, rest[0::2]])
        b = np.concatenate([b, rest[1::2]])
        M[a, b] += 1
        M[b, a] += 1
        if key.size:  # c = links now between i and j, for every demand pair that got a link
            k2 = np.minimum(a, b) * n + np.maximum(a, b)
            pos = np.minimum(np.searchsorted(key, k2), key.size - 1)
            on = key[pos] == k2
            cnt[pos[on]] += 1
    return M


def _predecessor_bfs(adj: sp.csr_matrix) -> Callable[[int], np.ndarray]:
    """Single-source BFS predecessor arrays (-9999 = unreached or source), as scipy returns them.

    ``breadth_first_order`` re-validates the graph on every call (~0.3 ms at n=4096, as much as the
    BFS itself), so the private kernel is used when it exists and gives the same answer on a probe.
    """
    n = adj.shape[0]

    def public(s: int) -> np.ndarray:
        return breadth_first_order(adj, s, directed=True, return_predecessors=True)[1]

    if _BFS_KERNEL is None:
        return public
    ind = adj.indices.astype(np.int32)
    ptr = adj.indptr.astype(np.int32)
    nodes = np.empty(n, dtype=np.int32)
    pred = np.empty(n, dtype=np.int32)

    def kernel(s: int) -> np.ndarray:
        pred.fill(-9999)
        _BFS_KERNEL(s, ind, ptr, nodes, pred)
        return pred

    try:
        if np.array_equal(kernel(0), public(0)):
            return kernel
    except Exception:  # pragma: no cover - signature changed
        pass
    return public  # pragma: no cover


def _bfs_paths(
    adj: sp.csr_matrix, src: np.ndarray, dst: np.ndarray, shorter_than: np.ndarray | None, chunk: int
) -> tuple[np.ndarray, PathSet]:
    """Hop distances of all pairs, and one shortest path (BFS predecessors) for pairs with
    ``dist < shorter_than``. One C-level BFS per distinct source (scipy ``breadth_first_order``,
    cheaper than unit-weight Dijkstra), then the predecessor walk is vectorized over all pairs of a
    chunk of sources; the walk length is the distance."""
    P = src.size
    n = adj.shape[0]
    dist = np.full(P, -1, dtype=np.int64)
    order = np.argsort(src, kind="stable")
    us, starts = np.unique(src[order], return_index=True)
    bounds = np.append(starts, P)
    blocks: list[tuple[np.ndarray, np.ndarray]] = []
    Pr = np.empty((min(chunk, us.size), n), dtype=np.int64)
    bfs = _predecessor_bfs(adj)
    for lo in range(0, us.size, chunk):
        srcs = us[lo : lo + chunk]
        for r, s0 in enumerate(srcs.tolist()):
            Pr[r] = bfs(s0)
        sel = order[bounds[lo] : bounds[min(lo + chunk, us.size)]]
        row = np.searchsorted(srcs, src[sel])
        s_sel = src[sel]
        cur = dst[sel].copy()
        reach = (cur == s_sel) | (Pr[row, cur] >= 0)
        h = np.zeros(sel.size, dtype=np.int64)
        seq = [cur.copy()]
        act = reach & (cur != s_sel)
        while act.any():  # walk back to the source; at most (max distance) vectorized steps
            cur = np.where(act, Pr[row, cur], cur)
            h += act
            seq.append(cur.copy())
            act = act & (cur != s_sel)
        h[~reach] = -1
        dist[sel] = h
        want = reach if shorter_than is None else reach & (h < shorter_than[sel])
        if not want.any():
            continue
        S = np.stack(seq, axis=1)[want]  # (pairs, H+1): dst, pred(dst), ..., src, src, ...
        hw = h[want]
        col = np.arange(S.shape[1])[None, :]
        idx = hw[:, None] - col  # output column c holds the node at walk step h - c
        nodes = np.where(idx >= 0, np.take_along_axis(S, np.clip(idx, 0, None), axis=1), -1)
        blocks.append((sel[want], nodes))
    if not blocks:
        return dist, PathSet.empty()
    L = max(b.shape[1] for _, b in blocks)
    idx = np.concatenate([s for s, _ in blocks])
    out = np.full((idx.size, L), -1, dtype=np.int64)
    r0 = 0
    for _, b in blocks:
        out[r0 : r0 + b.shape[0], : b.shape[1]] = b
        r0 += b.shape[0]
    o = np.argsort(idx, kind="stable")
    return dist, PathSet(out[o], np.ones(idx.size))


def route_pairs(
    X: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    *,
    method: str = "shortest",
    k: int = 3,
    max_paths: int = 8,
    shorter_than: np.ndarray | None = None,
    chunk: int = 512,
) -> tuple[np.ndarray, PathSet]:
    """Hop-count routes for ``(src[p], dst[p])`` over topology ``X`` (any link count > 0 is a link).

    Parameters
    ----------
    method : {"shortest", "ecmp", "ksp"}
        ``"shortest"``: one BFS shortest path per pair (scipy, vectorized; the authors' final code).
        ``"ecmp"``: up to ``max_paths`` shortest paths, equal split (networkx, per pair: small n).
        ``"ksp"``: the ``k`` shortest simple paths, equal split (networkx ``shortest_simple_paths``,
        the paper's k-shortest-path routing; per pair: small n).
    shorter_than : numpy.ndarray, optional
        Per pair; only pairs with distance strictly below it get paths (``"shortest"`` only).
    chunk : int
        BFS sources per batch (bounds memory at ``chunk * n`` distances).

    Returns
    -------
    dist : numpy.ndarray
        Hop distance per pair (``-1`` unreachable).
    paths : PathSet
        Paths of the routed pairs, in pair order; fractions of one pair sum to 1.
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    if src.size == 0:
        return np.zeros(0, dtype=np.int64), PathSet.empty()
    adj = sp.csr_matrix((np.asarray(X) > 0).astype(np.int8))
    if method == "shortest":
        return _bfs_paths(adj, src, dst, shorter_than, chunk)
    if method not in ("ecmp", "ksp"):
        raise ValueError(f"unknown routing method {method!r}")
    G = nx.from_scipy_sparse_array(adj)
    dist = np.full(src.size, -1, dtype=np.int64)
    plist: list[tuple[list[int], float]] = []
    for p, (s, t) in enumerate(zip(src.tolist(), dst.tolist())):
        try:
            if method == "ecmp":
                ps = list(islice(nx.all_shortest_paths(G, s, t), max_paths))
            else:
                ps = list(islice(nx.shortest_simple_paths(G, s, t), k))
        except nx.NetworkXNoPath:
            continue
        dist[p] = len(ps[0]) - 1
        plist.extend((q, 1.0 / len(ps)) for q in ps)
    return dist, (PathSet.from_lists(plist) if plist else PathSet.empty())
