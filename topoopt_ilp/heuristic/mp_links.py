"""MP sub-topology by repeated maximum-weight matching, and MP routing over the combined
topology (docs/methods/heuristic.md, steps 8 and 9)."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from itertools import islice

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, connected_components, shortest_path

from topoopt_ilp.core import graph
from topoopt_ilp.core.lazy import nx
from topoopt_ilp.core.routes import PathSet

try:  # scipy's C BFS kernel without the per-call graph validation of breadth_first_order
    from scipy.sparse.csgraph._traversal import _breadth_first_directed as _BFS_KERNEL
except ImportError:  # pragma: no cover - private API moved: use the public function
    _BFS_KERNEL = None

__all__ = [
    "repeated_matching",
    "distance_tie_break",
    "pair_hop_distances",
    "TIE_BREAKS",
    "blossom_matching",
    "greedy_matching",
    "route_pairs",
    "DEFAULT_MATCHING",
    "BLOSSOM_EDGE_LIMIT",
    "MATCHING_LIBRARIES",
]

#: ``method="auto"`` uses the exact Blossom (compiled, see :func:`blossom_matching`) up to this many demand
#: edges, greedy above: about 0.1 s a round at the limit (benchmarks/heuristic_scale.py).
BLOSSOM_EDGE_LIMIT = 20_000
DEFAULT_MATCHING = "auto"
#: ``repeated_matching(tie_break=...)``: ``"distance"`` (default) or ``"none"`` (the matcher's order).
TIE_BREAKS = ("distance", "none")


def blossom_matching(
    i: np.ndarray, j: np.ndarray, w: np.ndarray, n: int, *, maxcardinality: bool = False, library: str = "auto"
) -> np.ndarray:
    """Exact maximum-weight matching (Edmonds' Blossom, O(n^3)). Returns matched edge indices.

    ``library``: ``"rustworkx"`` (compiled, integer arithmetic), ``"networkx"`` (pure Python, the
    reference the tests compare with) or ``"auto"``: rustworkx whenever the weights scale exactly to
    integers it can hold, else networkx. Floats are dyadic rationals, so scaling by their largest
    denominator makes them integers without changing which matching is heaviest. Both libraries
    return a matching of the maximum weight; where several matchings share it they may differ."""
    if library not in MATCHING_LIBRARIES:
        raise ValueError(f"unknown matching library {library!r}; choose one of {', '.join(MATCHING_LIBRARIES)}")
    weights = _integer_weights(w, n) if library != "networkx" else None
    if library == "rustworkx" and weights is None:
        raise ValueError("these weights do not scale to integers rustworkx can hold (use library='networkx')")
    if weights is None:
        G = nx.Graph()
        G.add_nodes_from(range(n))
        G.add_weighted_edges_from(zip(i.tolist(), j.tolist(), w.tolist()))
        pairs = nx.max_weight_matching(G, maxcardinality=maxcardinality)
        eid = {(int(a), int(b)): e for e, (a, b) in enumerate(zip(i, j))}
        return np.array(sorted(eid[(a, b)] if (a, b) in eid else eid[(b, a)] for a, b in pairs), dtype=np.int64)
    return _blossom_by_component(i, j, weights, n, maxcardinality)


def _blossom_by_component(i: np.ndarray, j: np.ndarray, weights: list[int], n: int, maxcardinality: bool) -> np.ndarray:
    """rustworkx's Blossom on each connected component of the demand graph alone. A matching is the
    union of matchings of the components, and so is a heaviest one (or a heaviest among those of
    largest cardinality): solving them apart gives a matching of the same weight. The compiled
    Blossom scans every node of its graph in each of its stages, so one graph of n nodes costs n^2
    even where the demand is n/2 disjoint pairs (18 s a round at n = 16,384, under a profiler); a
    component of one edge is matched without it."""
    import rustworkx  # start-up time: only the exact MP matching needs it

    if not i.size:
        return np.zeros(0, dtype=np.int64)
    nodes, local = np.unique(np.concatenate([i, j]), return_inverse=True)
    a, b = local[: i.size], local[i.size :]
    _, comp = connected_components(sp.coo_matrix((np.ones(i.size), (a, b)), shape=(nodes.size,) * 2), directed=False)
    edge_comp = comp[a]
    edges_in = np.bincount(edge_comp, minlength=comp.max() + 1)
    alone = edges_in[edge_comp] == 1
    out = [np.flatnonzero(alone if maxcardinality else alone & (np.asarray(weights, dtype=object) > 0))]
    order = np.argsort(edge_comp, kind="stable")
    starts = np.searchsorted(edge_comp[order], np.flatnonzero(edges_in > 1))
    for start, c in zip(starts.tolist(), np.flatnonzero(edges_in > 1).tolist()):
        mine = order[start : start + int(edges_in[c])]
        members, ends = np.unique(np.concatenate([a[mine], b[mine]]), return_inverse=True)
        R = rustworkx.PyGraph()
        R.add_nodes_from(range(members.size))
        R.add_edges_from(list(zip(ends[: mine.size].tolist(), ends[mine.size :].tolist(), [weights[e] for e in mine])))
        pairs = rustworkx.max_weight_matching(R, max_cardinality=maxcardinality, weight_fn=lambda weight: weight)
        eid = {(int(u), int(v)): int(e) for e, u, v in zip(mine, ends[: mine.size], ends[mine.size :])}
        out.append(np.array([eid[(u, v)] if (u, v) in eid else eid[(v, u)] for u, v in pairs], dtype=np.int64))
    return np.sort(np.concatenate(out)).astype(np.int64)


#: ``blossom_matching(library=...)``.
MATCHING_LIBRARIES = ("auto", "rustworkx", "networkx")
#: rustworkx's Blossom keeps weights and duals in signed 128-bit integers (doubled inside): the
#: weights it is given stay below this divided by the number of nodes.
_RUSTWORKX_WEIGHT_LIMIT = 2**120


def _integer_weights(w: np.ndarray, n: int) -> list[int] | None:
    """``w`` as integers proportional to it (None when that needs more than 128-bit arithmetic)."""
    values = w.tolist()
    if not all(type(v) is int for v in values):
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values):
            return None
        fractions = [Fraction(v) for v in values]
        scale = max((f.denominator for f in fractions), default=1)  # powers of two: a multiple of all
        values = [int(f * scale) for f in fractions]
    if max(map(abs, values), default=0) >= _RUSTWORKX_WEIGHT_LIMIT // max(n, 1):
        return None
    return values


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
        if I.size > _SCAN_MIN_EDGES and matched and matched[-1].size < _SCAN_BELOW:
            # The last round matched few edges (e.g. equal weights in index order form one long
            # chain of dependencies: one dominant edge per round, O(n) rounds over all edges).
            # Finish with the sequential greedy over the remaining edges in rank order: the edges
            # still alive are exactly those with both ends free, so the result is the same.
            matched.append(_greedy_scan(I, J, rank, free))
            break
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


#: :func:`greedy_matching` switches to a sequential scan when a vectorized round matched fewer than
#: ``_SCAN_BELOW`` edges while more than ``_SCAN_MIN_EDGES`` edges remain (speed only, same result).
_SCAN_BELOW = 16
_SCAN_MIN_EDGES = 4096


def _greedy_scan(I: np.ndarray, J: np.ndarray, rank: np.ndarray, free: np.ndarray) -> np.ndarray:
    """Sequential greedy over edges given in rank order (heaviest first), updating ``free`` in
    place; returns the ranks of the matched edges. Stops once fewer than two nodes are free."""
    fr = free.tolist()
    left = sum(fr)
    out = []
    for a, b, r in zip(I.tolist(), J.tolist(), rank.tolist()):
        if fr[a] and fr[b]:
            fr[a] = fr[b] = False
            out.append(r)
            left -= 2
            if left < 2:
                break
    free[:] = fr
    return np.array(out, dtype=np.int64)


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


#: Levels :func:`pair_hop_distances` searches with bitsets before it hands the pairs still
#: unanswered to one search per source (past ~64 levels, a bit per source costs more than a BFS each).
BIT_SEARCH_LEVELS = 64


def pair_hop_distances(X, i: np.ndarray, j: np.ndarray, *, chunk: int = 256) -> np.ndarray:
    """Hop distance between ``i[p]`` and ``j[p]`` in the undirected topology ``X`` (link counts, a
    dense array or a scipy sparse matrix; any count > 0 is a link), ``n`` when unreachable. ``i``
    must be sorted (as :func:`_pairs_from` returns it). The distinct ``i`` are searched from in
    blocks with one bit each (:func:`~topoopt_ilp.core.graph.bit_bfs_levels`), each block until all
    its pairs are answered; pairs farther than :data:`BIT_SEARCH_LEVELS` hops get one BFS per
    source, ``chunk`` at a time."""
    n = X.shape[0]
    out = np.full(i.size, n, dtype=np.int64)
    adj = _link_adjacency(X)
    if not i.size or not adj.nnz:
        return out
    into = (adj + adj.T).tocsr()  # undirected: a link either way
    us, first = np.unique(i, return_inverse=True)
    first = first.ravel()  # the position of each pair's source among the distinct sources
    block = graph.bit_block(into)
    far = np.zeros(i.size, dtype=bool)
    for lo in range(0, us.size, block):
        mine = np.flatnonzero((first >= lo) & (first < lo + block))
        word, bit = (first[mine] - lo) // 64, ((first[mine] - lo) % 64).astype(np.uint64)
        open_ = np.ones(mine.size, dtype=bool)
        for level, new in graph.bit_bfs_levels(into, us[lo : lo + block]):
            hit = open_ & ((new[j[mine], word] >> bit) & np.uint64(1)).astype(bool)
            out[mine[hit]] = level
            open_ &= ~hit
            if not open_.any():
                break
            if level == BIT_SEARCH_LEVELS:
                far[mine[open_]] = True
                break
    if far.any():
        out[far] = _pair_distances_per_source(adj, i[far], j[far], n, chunk)
    return out


def _link_adjacency(X) -> sp.csr_matrix:
    """The arcs of ``X`` (dense or scipy sparse link counts; any count > 0 is a link) as a 0/1 int8
    CSR matrix."""
    if sp.issparse(X):
        adj = sp.csr_matrix(X, copy=True)
        adj.sum_duplicates()
        adj.data = (adj.data > 0).astype(np.int8)
        adj.eliminate_zeros()
        return adj
    X = np.asarray(X)
    rows, cols = np.nonzero(X)  # one pass over X; a mask and an int8 copy were two more (n^2 bytes each)
    return sp.csr_matrix((np.ones(rows.size, dtype=np.int8), (rows, cols)), shape=X.shape)


def _pair_distances_per_source(adj: sp.csr_matrix, i: np.ndarray, j: np.ndarray, n: int, chunk: int) -> np.ndarray:
    """:func:`pair_hop_distances` by scipy's search, one per distinct (sorted) ``i``."""
    out = np.full(i.size, n, dtype=np.int64)
    us, starts = np.unique(i, return_index=True)
    bounds = np.append(starts, i.size)
    for lo in range(0, us.size, chunk):
        hi = min(lo + chunk, us.size)
        D = shortest_path(adj, directed=False, unweighted=True, indices=us[lo:hi])
        sl = slice(bounds[lo], bounds[hi])
        row = np.searchsorted(us[lo:hi], i[sl])
        dd = D[row, j[sl]]
        out[sl] = np.where(np.isfinite(dd), dd, n).astype(np.int64)
    return out


def _tie_distances(G, i: np.ndarray, j: np.ndarray, w: np.ndarray, exact: bool) -> np.ndarray:
    """The distances :func:`distance_tie_break` needs. The greedy matcher (``exact`` False) compares
    single edges, so the tie term only reorders pairs of equal weight: a pair whose weight no other
    pair has gets 0 (its place is the same with any tie term), and without ties no BFS runs at all
    (measured: on lognormal MP bytes at n = 4096 these BFS were 2/3 of TopologyFinder's time, for no
    change). Blossom compares whole matchings, whose totals can tie without equal edges: all pairs,
    except a pair that shares no server with another (both matchers take it whatever it weighs: one
    MP partner per server at n = 16,384 made these BFS the matching's largest cost, for nothing)."""
    degree = np.bincount(np.concatenate([i, j]), minlength=G.shape[0])
    contested = (degree[i] > 1) | (degree[j] > 1)
    if not exact:
        _, inverse, counts = np.unique(w, return_inverse=True, return_counts=True)
        contested &= counts[inverse.ravel()] > 1
    dist = np.zeros(w.size, dtype=np.int64)
    if contested.any():
        dist[contested] = pair_hop_distances(G, i[contested], j[contested])
    return dist


def distance_tie_break(
    w: np.ndarray, dist: np.ndarray, n: int, *, exact: bool = False, rng: np.random.Generator | None = None
) -> np.ndarray:
    """Matching weights that break ties between equally heavy matchings in favour of far-apart pairs.

    Returns ``w + eps * t`` with the tie term ``t = dist`` (``dist``: hop distance of each pair in
    the topology built so far, ``n`` when unreachable, see :func:`pair_hop_distances`), and ``eps``
    small enough that no strict difference of the demand weights is ever overridden: only ties are
    decided by distance. On uniform demand every perfect matching of unlinked pairs weighs the same,
    and the matchers' index order then builds near-cliques (groups of ~d servers, almost
    disconnected, long paths); preferring far pairs makes each round join what earlier rounds left
    apart. With ``rng``, ties of equal weight *and* distance are broken at random (``t = dist + u``,
    ``u`` in ``[0, 1)``): with distance alone, pairs in different components all tie at ``n`` and
    the index order merges components like a hypercube (sizes double per round: at ``n = 512``,
    ``d = 8`` still two components), while random picks among them give an expander.

    Why ``eps`` cannot override a demand difference. A matching has at most ``n/2`` edges with tie
    terms in ``[1, n + 1)``, so the tie terms of any matching sum to less than ``S = n*(n+1)/2``,
    and the difference of two matchings' ``eps * t`` totals is below ``eps * S``.

    * ``exact=False`` (float weights; for :func:`greedy_matching`, which only ever compares single
      edges): ``eps = delta / (n*(n+1))`` with ``delta`` the smallest positive difference between
      distinct values among ``w`` and 0 (0 included, so every weight stays positive and below the
      next class). Two edges with ``w_a < w_b`` then keep ``w_a + eps*t_a < w_a + delta/n < w_b``:
      the greedy order changes only among equal weights. ``eps * S = delta/2 < delta`` also covers
      whole matchings whose totals differ by at least ``delta``; but for arbitrary reals two
      matching *totals* can differ by less than ``delta`` (edges 1.0 + 0.35 vs 0.7 + 0.6: totals
      1.35 vs 1.3, ``delta = 0.1``), hence, for the exact matcher:
    * ``exact=True`` (Python ints; for :func:`blossom_matching`, networkx then computes in exact
      integer arithmetic): every float is a dyadic rational, so with ``L`` the largest denominator
      among the weights (a power of two, a multiple of all others) all weights and all matching
      totals lie on the grid ``1/L``: distinct totals differ by at least ``1/L``, the smallest
      positive difference possible. The tie term is an integer ``t = dist*K + r`` (``r`` random in
      ``[0, n)`` with ``rng``, else 0; ``K = (n//2)*n + 1`` exceeds any matching's sum of ``r``, so a
      larger distance total always beats the random part), and the weights are
      ``W = w*L*B + t`` with ``B`` = 1 + the largest possible sum of ``t`` over a matching
      (``(n//2) * (n*K + n - 1)``): this is ``w + eps*t`` with ``eps = 1/(L*B)``, scaled by ``L*B``.
      A difference of demand totals ``>= 1/L`` becomes ``>= B`` in ``W``, more than any difference
      of tie terms, so a maximum of ``W`` is always a maximum of the demand weights.

    In float mode the result is checked after rounding; if rounding would merge two distinct
    weight classes (``delta`` tiny relative to ``w``), ``w`` is returned unchanged: no tie-break,
    never a wrong order. Pairs without demand are not among ``w`` (see :func:`repeated_matching`:
    they only take part in the random completion), so they stay behind every demand pair as before.
    """
    w = np.asarray(w, dtype=float)
    dist = np.asarray(dist, dtype=np.int64)
    if not w.size:
        return w
    if exact:
        fr = [Fraction(x) for x in w.tolist()]
        L = max(f.denominator for f in fr)
        K = (n // 2) * n + 1
        B = (n // 2) * (n * K + n - 1) + 1
        r = rng.integers(0, n, w.size).tolist() if rng is not None else [0] * w.size
        out = np.empty(w.size, dtype=object)
        out[:] = [int(f * L) * B + int(t) * K + q for f, t, q in zip(fr, dist.tolist(), r)]
        return out
    t = dist + rng.random(w.size) if rng is not None else dist.astype(float)
    vals = np.unique(np.append(w, 0.0))
    delta = float(np.diff(vals).min())
    eps = delta / (float(n) * (n + 1))
    v = w + eps * t
    # rounding check: every weight class must stay strictly below the next one
    o = np.argsort(w, kind="stable")
    ws, vs = w[o], v[o]
    first = np.flatnonzero(np.r_[True, ws[1:] != ws[:-1]])
    hi = np.maximum.reduceat(vs, first)
    lo = np.minimum.reduceat(vs, first)
    if (hi[:-1] >= lo[1:]).any() or (lo <= 0).any() or not np.isfinite(v).all():
        return w
    return v


def repeated_matching(
    T,
    rounds: int,
    *,
    seed: int = 0,
    method: str | Callable[..., np.ndarray] = DEFAULT_MATCHING,
    maxcardinality: bool = False,
    directed: bool = False,
    base: np.ndarray | None = None,
    tie_break: str = "distance",
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
    base : (n, n) array_like, optional
        Links that exist before the first round (the AllReduce rings); only used for distances.
    tie_break : {"distance", "none"}
        Undirected rounds: ``"distance"`` breaks ties between equally heavy matchings in favour of
        pairs far apart in ``base`` plus the previous rounds, remaining ties (equal distance) at
        random from ``seed`` (:func:`distance_tie_break`; exact integer weights for the Blossom
        matcher; its own random stream, so without ties the result is that of ``"none"``);
        ``"none"``: the matcher's own order (edge index),
        which on uniform demand builds near-cliques. Never changes which demand weight wins.
        Directed rounds ignore it.

    Returns
    -------
    numpy.ndarray
        ``(n, n)`` int64 link counts; undirected: symmetric with row sums ``rounds`` (odd ``n``: each
        round is a near-perfect matching, one node unmatched, so row sums are at most ``rounds``).

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
        from scipy.optimize import linear_sum_assignment  # start-up time: scipy.optimize costs 0.2 s to import

        A = T.toarray() if sp.issparse(T) else np.asarray(T, dtype=float)
        for _ in range(rounds):
            w = A / (M + 1)
            # forbid self-loops: a diagonal entry below any full permutation's total
            np.fill_diagonal(w, -(w.max() + 1) * n)
            r, c = linear_sum_assignment(w, maximize=True)
            M[r, c] += 1
        return M
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"unknown tie_break {tie_break!r}; choose one of {', '.join(TIE_BREAKS)}")
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
    exact = matcher is blossom_matching
    distances = tie_break == "distance" and bool(w0.size)
    # The links so far as arcs (both directions; the base's arcs first, which only the distances
    # need), not n x n matrices: at n = 16,384 each dense copy is 2 GiB.
    with_base = distances and base is not None
    arcs_from, arcs_to = np.nonzero(np.asarray(base) > 0) if with_base else (np.zeros(0, np.int64),) * 2
    base_arcs = arcs_from.size
    if distances:
        # own stream: the completion draws stay those of tie_break="none" (same result without ties)
        tie_rng = np.random.default_rng([seed, 1])
    for _ in range(rounds):
        w = w0 / (cnt + 1)
        if distances:
            G = sp.csr_matrix((np.ones(arcs_from.size, dtype=np.int8), (arcs_from, arcs_to)), shape=(n, n))
            w = distance_tie_break(w, _tie_distances(G, i, j, w, exact), n, exact=exact, rng=tie_rng)
        e = matcher(i, j, w, n, maxcardinality=maxcardinality)
        a, b = i[e], j[e]
        free = np.ones(n, dtype=bool)
        free[a] = False
        free[b] = False
        rest = rng.permutation(np.flatnonzero(free))
        rest = rest[: rest.size - rest.size % 2]  # odd n: one node stays unmatched this round
        a = np.concatenate([a, rest[0::2]])
        b = np.concatenate([b, rest[1::2]])
        arcs_from = np.concatenate([arcs_from, a, b])
        arcs_to = np.concatenate([arcs_to, b, a])
        if key.size:  # c = links now between i and j, for every demand pair that got a link
            k2 = np.minimum(a, b) * n + np.maximum(a, b)
            pos = np.minimum(np.searchsorted(key, k2), key.size - 1)
            on = key[pos] == k2
            cnt[pos[on]] += 1
    # flat: np.add.at with a pair of index arrays took 8.9 s where this takes 0.2 (n = 16,384, 2026-12-07)
    np.add.at(M.reshape(-1), arcs_from[base_arcs:] * n + arcs_to[base_arcs:], 1)
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
    chunk of sources; the walk length is the distance. Pairs joined by a link need no search: a BFS
    from the source reaches its neighbours first, so their path is the link (at 16,384 servers with
    one MP pair each, the MP links the matching made spared 16,384 searches)."""
    n = adj.shape[0]
    dist = np.full(src.size, -1, dtype=np.int64)
    blocks: list[tuple[np.ndarray, np.ndarray]] = []
    linked = (src != dst) & (np.asarray(adj[src, dst]).ravel() > 0)
    dist[linked] = 1
    routed = np.flatnonzero(linked if shorter_than is None else linked & (shorter_than > 1))
    if routed.size:
        blocks.append((routed, np.stack([src[routed], dst[routed]], axis=1)))
    searched = np.flatnonzero(~linked)
    order = searched[np.argsort(src[searched], kind="stable")]
    us, starts = np.unique(src[order], return_index=True)
    bounds = np.append(starts, order.size)
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
    adj = _link_adjacency(X)
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
