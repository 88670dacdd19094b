"""Array-level graph routines used by the evaluator (independent of every optimisation model).

Conventions
-----------
A *topology* is an ``n x n`` non-negative integer matrix ``X`` with zero diagonal: ``X[i, j]`` is the
number of parallel links ``i -> j``. An undirected topology is a symmetric ``X`` (every link is full
duplex). Hop distances and shortest-path counts are properties of the *simple* graph ``X > 0``:
parallel links add capacity, not distinct node paths.

Everything here is vectorized over all sources at once. The breadth-first searches are
level-synchronous: the frontier of all sources is a sparse matrix multiplied by the adjacency of
``X > 0``, so the total work is ``O(n * m)`` for ``m`` arcs (``O(n^2 d)`` for degree ``d``), with a
dense (BLAS) product on levels that would need more than ``2 n^2`` multiply-adds (dense graphs).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, shortest_path

__all__ = [
    "validate_topology",
    "circulant",
    "circulant_distances",
    "hop_distances",
    "diameter",
    "diameter_and_aspl",
    "is_circulant",
    "bit_bfs_levels",
    "bit_block",
    "aspl",
    "is_connected",
    "split_link",
    "degree_vectors",
    "links_to_matrix",
    "matrix_to_links",
    "adjacency_csr",
]


# ----------------------------------------------------------------------------------------------
# validation and conversion
# ----------------------------------------------------------------------------------------------


def validate_topology(X: np.ndarray) -> np.ndarray:
    """Check a topology matrix and return it as a C-contiguous ``int64`` array.

    Parameters
    ----------
    X : array_like
        Square matrix of non-negative integer link counts with zero diagonal. Float arrays are
        accepted if every entry is integral (solver outputs are often floats).

    Returns
    -------
    numpy.ndarray
        ``int64`` copy/view of ``X``.

    Raises
    ------
    ValueError
        If ``X`` is not square, has negative, non-integral or non-finite entries, or self-loops.
    """
    A = np.asarray(X)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"topology must be a square matrix, got shape {A.shape}")
    if A.dtype.kind == "b":
        A = A.astype(np.int64)
    elif A.dtype.kind == "f":
        if not np.all(np.isfinite(A)):
            raise ValueError("topology has non-finite entries")
        R = np.rint(A)
        # Solver outputs carry ~1e-9 noise; anything further from an integer is a bug upstream.
        if np.any(np.abs(A - R) > 1e-6):
            raise ValueError("topology has non-integral link counts")
        A = R
    elif A.dtype.kind not in "iu":
        raise ValueError(f"topology has unsupported dtype {A.dtype}")
    A = np.ascontiguousarray(A, dtype=np.int64)
    if np.any(A < 0):
        raise ValueError("topology has negative link counts")
    if np.any(np.diagonal(A) != 0):
        raise ValueError("topology has self-loops (non-zero diagonal)")
    return A


def adjacency_csr(X: np.ndarray) -> sp.csr_matrix:
    """CSR matrix of the simple graph ``X > 0`` (data = 1.0, sorted indices).

    The CSR position of an arc is used as its arc id by :mod:`topoopt_ilp.evaluation.flows`.
    """
    A = validate_topology(X)
    rows, cols = np.nonzero(A)  # row-major: no dense float copy of X (2 GiB at n = 16,384)
    M = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=A.shape)
    M.sort_indices()
    return M


def links_to_matrix(n: int, links: Iterable[Sequence[int]], directed: bool = False) -> np.ndarray:
    """Build a topology matrix from a link list.

    Parameters
    ----------
    n : int
        Number of nodes.
    links : iterable of (i, j, count)
        ``count`` parallel links between ``i`` and ``j``. Duplicate ``(i, j)`` entries add up; in the
        undirected case ``(i, j)`` and ``(j, i)`` are the same link.
    directed : bool
        If False, ``count`` is put on both ``X[i, j]`` and ``X[j, i]``.

    Returns
    -------
    numpy.ndarray
        ``(n, n)`` int64 topology.
    """
    arr = np.asarray(list(links), dtype=np.int64).reshape(-1, 3)
    i, j, c = arr[:, 0], arr[:, 1], arr[:, 2]
    if np.any((i < 0) | (i >= n) | (j < 0) | (j >= n)):
        raise ValueError("link endpoint out of range")
    if np.any(i == j):
        raise ValueError("self-loop in link list")
    if np.any(c < 0):
        raise ValueError("negative link count")
    X = np.zeros((n, n), dtype=np.int64)
    np.add.at(X.reshape(-1), i * n + j, c)  # flat: np.add.at with a pair of index arrays is 10-40x slower
    if not directed:
        np.add.at(X.reshape(-1), j * n + i, c)
    return X


def matrix_to_links(X: np.ndarray, directed: bool = False) -> list[tuple[int, int, int]]:
    """Inverse of :func:`links_to_matrix`: ``[(i, j, count)]`` for every non-zero entry.

    In the undirected case only ``i < j`` is listed and ``X`` must be symmetric.
    """
    A = validate_topology(X)
    if not directed:
        if not np.array_equal(A, A.T):
            raise ValueError("undirected topology must be symmetric")
        A = np.triu(A, 1)
    i, j = np.nonzero(A)
    return [(int(a), int(b), int(c)) for a, b, c in zip(i, j, A[i, j])]


def degree_vectors(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Out- and in-degree of every node counted in links (ports), parallel links included.

    Returns
    -------
    out_deg, in_deg : numpy.ndarray
        ``X.sum(axis=1)`` and ``X.sum(axis=0)`` as int64. For an undirected topology both equal the
        number of ports used at each node.
    """
    A = validate_topology(X)
    return A.sum(axis=1), A.sum(axis=0)


def split_link(X: np.ndarray, u: int, v: int, a: int, b: int, directed: bool = False) -> None:
    """Replace one link ``u -> v`` by ``u -> b`` and ``a -> v``, in place (undirected: both
    directions of each). ``u`` and ``v`` keep their degrees; ``a`` gains an out-port and ``b`` an
    in-port (undirected, ``a == b``: two ports on one node). This closes free ports that no new link
    can take: the last ones on a single node, or, without parallel links, ports on nodes already
    linked to each other."""
    X[u, v] -= 1
    X[u, b] += 1
    X[a, v] += 1
    if not directed:
        X[v, u] -= 1
        X[b, u] += 1
        X[v, a] += 1


# ----------------------------------------------------------------------------------------------
# circulants
# ----------------------------------------------------------------------------------------------


def _canonical_jumps(n: int, jumps: Iterable[int], directed: bool) -> np.ndarray:
    """Distinct jump residues; undirected jumps are folded to ``min(r, n - r)``."""
    if n < 1:
        raise ValueError("n must be positive")
    r = np.asarray(list(jumps), dtype=np.int64) % n
    if r.size and np.any(r == 0):
        raise ValueError("a circulant jump must not be 0 mod n")
    if not directed:
        r = np.minimum(r, n - r)
    return np.unique(r)


def circulant(n: int, jumps: Iterable[int], directed: bool = False) -> np.ndarray:
    """Circulant topology on ``Z_n``.

    Parameters
    ----------
    n : int
        Number of nodes.
    jumps : iterable of int
        Jump residues. They are a *set*: repeating a jump does not add parallel links.
    directed : bool
        Directed: node ``i`` has one link ``i -> i + j mod n`` per jump.
        Undirected: node ``i`` is linked to ``i + j`` and ``i - j``; jumps ``j`` and ``n - j`` denote
        the same undirected jump (given together they count once). The jump ``j = n/2`` (even ``n``)
        joins the pair ``{i, i + n/2}`` with ONE link, using one port at each end, so it adds 1 (not
        2) to every node's degree.

    Returns
    -------
    numpy.ndarray
        ``(n, n)`` int64 0/1 topology.

    Raises
    ------
    ValueError
        If a jump is ``0 mod n``.
    """
    r = _canonical_jumps(n, jumps, directed)
    X = np.zeros((n, n), dtype=np.int64)
    i = np.arange(n)
    for j in r:  # loop over the handful of jumps only
        X[i, (i + j) % n] = 1
        if not directed:
            X[(i + j) % n, i] = 1  # for j = n/2 this rewrites the same single link
    return X


def circulant_distances(n: int, jumps: Iterable[int], directed: bool = False) -> np.ndarray:
    """Hop distance from node 0 to every residue of a circulant (``-1`` if unreachable).

    (The heuristic has its own BFS over residues on purpose: the evaluator shares no code with the
    methods whose results it scores.)

    A circulant is vertex-transitive, so ``dist(s, t) = result[(t - s) mod n]``: one BFS over
    ``Z_n`` instead of ``n``.
    """
    r = _canonical_jumps(n, jumps, directed)
    steps = r if directed else np.unique(np.concatenate([r, (n - r) % n]))
    dist = np.full(n, -1, dtype=np.int64)
    dist[0] = 0
    frontier = np.array([0], dtype=np.int64)
    k = 0
    while frontier.size:
        k += 1
        nxt = np.unique((frontier[:, None] + steps[None, :]).ravel() % n)
        nxt = nxt[dist[nxt] < 0]
        dist[nxt] = k
        frontier = nxt
    return dist


# ----------------------------------------------------------------------------------------------
# all-pairs BFS
# ----------------------------------------------------------------------------------------------


def expand_rows(indptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For frontier entries whose node is ``rows[e]``, list all out-arcs.

    Returns ``(owner, pos)``: ``owner[k]`` is the frontier entry and ``pos[k]`` the CSR position (arc
    id) of the k-th expanded arc. Pure index arithmetic, no Python loop.
    """
    start = indptr[rows]
    deg = indptr[rows + 1] - start
    total = int(deg.sum())
    owner = np.repeat(np.arange(rows.size, dtype=np.int64), deg)
    # position = start of the owner's adjacency + rank inside it
    #          = (start - offset of the owner's block in the output) + output index
    first = np.cumsum(deg) - deg
    pos = np.repeat(start - first, deg) + np.arange(total, dtype=np.int64)
    return owner, pos


def bfs_levels(A: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """Level-synchronous all-sources BFS with path counting on a CSR 0/1 adjacency.

    The frontier of level ``k`` is the sparse matrix ``F[s, v] = sigma[s, v]`` for ``dist[s, v] = k``;
    ``F @ A`` sums, for every ``(s, w)``, the counts of all in-neighbours of ``w`` at level ``k``, and
    its entries with ``w`` not yet reached form level ``k + 1``. The sparse product (scipy's C++
    SMMP, which also merges duplicates) costs ``nnz(F) * degree`` per level, so ``O(n * m)`` in total.
    """
    n = A.shape[0]
    if n <= DENSE_BFS_MAX_NODES:
        return _bfs_levels_dense(A.toarray())
    deg = np.diff(A.indptr)
    dist = np.full((n, n), -1, dtype=np.int64)
    sigma = np.zeros((n, n), dtype=np.float64)
    idx = np.arange(n, dtype=np.int64)
    dist[idx, idx] = 0
    sigma[idx, idx] = 1.0
    fs, fv, fsig = idx, idx, np.ones(n)
    Ad = None
    level = 0
    while fs.size:
        level += 1
        if int(deg[fv].sum()) > 2 * n * n:
            # Dense graph: one BLAS product beats a sparse product with > 2 n^2 multiply-adds.
            if Ad is None:
                Ad = A.toarray()
            F = np.zeros((n, n))
            F[fs, fv] = fsig
            S = F @ Ad
            fs, fv = np.nonzero((S > 0) & (dist < 0))
            fsig = S[fs, fv]
        else:
            F = sp.csr_matrix((fsig, (fs, fv)), shape=(n, n))
            P = (F @ A).tocoo()
            new = dist[P.row, P.col] < 0  # only nodes not reached at an earlier level
            fs, fv, fsig = P.row[new].astype(np.int64), P.col[new].astype(np.int64), P.data[new]
        dist[fs, fv] = level
        sigma[fs, fv] = fsig
    return dist, sigma


#: Up to this many nodes :func:`bfs_levels` works on dense arrays: a sparse product's fixed cost
#: (about 0.1 ms in scipy) dominates small graphs, where the dense search is 5-20x faster
#: (measured at n = 6..64; at n = 128 the sparse search wins).
DENSE_BFS_MAX_NODES = 64


def _bfs_levels_dense(Ad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`bfs_levels` on a dense 0/1 adjacency: the frontier is the dense ``F``, and
    ``F @ Ad`` restricted to unreached nodes is the next level with its path counts."""
    n = Ad.shape[0]
    dist = np.full((n, n), -1, dtype=np.int64)
    np.fill_diagonal(dist, 0)
    sigma = np.eye(n)
    F = sigma
    level = 0
    while True:
        level += 1
        F = F @ Ad
        F[dist >= 0] = 0.0
        new = F > 0
        if not new.any():
            return dist, sigma
        dist[new] = level
        sigma[new] = F[new]


def hop_distances(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All-pairs hop distances and shortest-path counts.

    Parameters
    ----------
    X : numpy.ndarray
        Topology (directed or undirected); only the simple graph ``X > 0`` matters.

    Returns
    -------
    dist : numpy.ndarray
        ``(n, n)`` int64, ``dist[s, t]`` = hop distance, ``-1`` if ``t`` is unreachable from ``s``.
    sigma : numpy.ndarray
        ``(n, n)`` float64, number of distinct shortest node paths ``s -> t`` (``sigma[s, s] = 1``,
        ``0`` if unreachable). Parallel links do not multiply paths. Exact up to ``2**53``.

    Notes
    -----
    Level-synchronous BFS from all sources at once: ``sigma[s, w] = sum of sigma[s, v]`` over
    in-neighbours ``v`` of ``w`` one level closer. Work ``O(n * m)``.
    """
    A = validate_topology(X)
    if A.shape[0] <= DENSE_BFS_MAX_NODES:  # (skips building the CSR matrix too)
        return _bfs_levels_dense((A > 0).astype(np.float64))
    return bfs_levels(adjacency_csr(A))


def is_connected(X: np.ndarray) -> bool:
    """True if every node reaches every other (strong connectivity for directed ``X``)."""
    A = validate_topology(X)
    if A.shape[0] <= 1:
        return True
    ncomp, _ = connected_components(sp.csr_matrix(A > 0), directed=True, connection="strong")
    return ncomp == 1


def _distance_matrix(X: np.ndarray) -> np.ndarray:
    """Hop distances only (float, ``inf`` if unreachable) from scipy's compiled search.

    :func:`diameter` and :func:`aspl` need no path counts, and this is several times faster than
    the counting BFS; it is also a second implementation the tests compare against.
    """
    return shortest_path(adjacency_csr(X), method="D", directed=True, unweighted=True)


#: :func:`diameter_and_aspl` searches from blocks of 64 x (this many / arcs) sources at a time, so its
#: memory stays near 32 MiB per level whatever the cluster's size.
BITSET_BLOCK_WORDS = 2**22

_BYTE_BITS = np.array([bin(b).count("1") for b in range(256)], dtype=np.int64)


def _bits_set(words: np.ndarray) -> int:
    """Number of 1 bits in an array of uint64 words."""
    if hasattr(np, "bitwise_count"):  # numpy >= 2.0
        return int(np.bitwise_count(words).sum(dtype=np.int64))
    return int(_BYTE_BITS[np.ascontiguousarray(words).view(np.uint8)].sum())


def bit_bfs_levels(into: sp.csr_matrix, sources: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """A breadth-first search from all ``sources`` at once, level by level.

    Each server holds one bit per source (source k is bit ``k % 64`` of word ``k // 64``); a level
    is one gather of the frontier words over the arcs and one OR per server of its in-neighbours'
    words (``into``: row v lists the servers with an arc into v), minus the bits already seen.
    Yields ``(level, new)`` from level 0 (the sources themselves) on, ``new[v]`` the bits of the
    sources that first reach v at that level, until a level reaches nothing. Memory: the
    (arcs x words) gather of one level."""
    n = into.shape[0]
    has_in = np.flatnonzero(np.diff(into.indptr))
    starts, senders = into.indptr[has_in], into.indices
    seen = np.zeros((n, (len(sources) + 63) // 64), dtype=np.uint64)
    bit = np.arange(len(sources))
    seen[sources, bit // 64] |= np.left_shift(np.uint64(1), (bit % 64).astype(np.uint64))
    frontier, level = seen.copy(), 0
    while True:
        yield level, frontier
        level += 1
        new = np.zeros_like(seen)
        if len(senders):
            new[has_in] = np.bitwise_or.reduceat(frontier[senders], starts, axis=0)
        new &= ~seen
        if not new.any():
            return
        seen |= new
        frontier = new


def bit_block(into: sp.csr_matrix) -> int:
    """How many sources :func:`bit_bfs_levels` takes at a time: 64 x (:data:`BITSET_BLOCK_WORDS` /
    arcs), so that one level's gather stays near 32 MiB."""
    return 64 * max(1, BITSET_BLOCK_WORDS // max(into.nnz, into.shape[0]))


def diameter_and_aspl(X: np.ndarray) -> tuple[int | float, float]:
    """Both distance summaries from one all-pairs search (see :func:`diameter`, :func:`aspl`): the
    pairs first reached at level k add k to the sum of distances; the last level that reaches any
    is the diameter. Blocks of sources (:func:`bit_bfs_levels`), so no distance matrix is kept;
    ``O(n * m * levels / 64)`` word operations for m arcs."""
    n = np.shape(X)[0]
    if n <= 1:
        return 0, 0.0
    into = adjacency_csr(X).T.tocsr()
    block = bit_block(into)
    # A circulant (each server's links those of server 0 turned by its number) looks the same from
    # every server: server 0's distances, n times over, are all of them.
    everyone = np.arange(1 if is_circulant(into) else n)
    top, total = 0, 0
    for lo in range(0, everyone.size, block):
        sources = everyone[lo : lo + block]
        reached = 0
        for level, new in bit_bfs_levels(into, sources):
            count = _bits_set(new)
            top, total, reached = max(top, level), total + level * count, reached + count
        if reached < len(sources) * n:
            return math.inf, math.inf
    total *= n // everyone.size
    return int(top), float(total) / (n * (n - 1))


def is_circulant(adjacency: sp.csr_matrix) -> bool:
    """Whether every row ``v`` of the 0/1 matrix is row 0 turned by ``v`` (``A[v, u] = A[0, u - v mod n]``)."""
    n = adjacency.shape[0]
    per_row = np.diff(adjacency.indptr)
    if (per_row != per_row[0]).any():
        return False
    rows = np.repeat(np.arange(n), per_row)
    offsets = np.sort(((adjacency.indices - rows) % n).reshape(n, -1), axis=1)
    return bool((offsets == offsets[0]).all())


def diameter(X: np.ndarray) -> int | float:
    """Largest hop distance over ordered pairs; ``math.inf`` if not (strongly) connected."""
    return diameter_and_aspl(X)[0]


def aspl(X: np.ndarray) -> float:
    """Average shortest path length over ordered pairs ``s != t``.

    ``math.inf`` if some pair is unreachable; ``0.0`` for a single node (no pairs).
    """
    return diameter_and_aspl(X)[1]
