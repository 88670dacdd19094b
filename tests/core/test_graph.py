"""Tests of topoopt_ilp.core.graph against networkx, brute force and published closed forms."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topoopt_ilp.core import graph as graph_module
from topoopt_ilp.core.graph import (
    _distance_matrix,
    aspl,
    circulant,
    circulant_distances,
    degree_vectors,
    diameter,
    hop_distances,
    is_connected,
    links_to_matrix,
    matrix_to_links,
    split_link,
    validate_topology,
)


def _random_topology(rng: np.random.Generator, n: int, p: float, directed: bool, multi: bool = True) -> np.ndarray:
    """Random (multi)graph as a link-count matrix."""
    X = (rng.random((n, n)) < p).astype(np.int64)
    if multi:
        X *= rng.integers(1, 4, size=(n, n))  # parallel links must not change distances or counts
    np.fill_diagonal(X, 0)
    if not directed:
        X = np.triu(X, 1)
        X = X + X.T
    return X


def _nx(X: np.ndarray) -> nx.DiGraph:
    return nx.from_numpy_array((X > 0).astype(int), create_using=nx.DiGraph)


# ---------------------------------------------------------------------------------------------
# circulant
# ---------------------------------------------------------------------------------------------


def test_circulant_undirected_structure() -> None:
    X = circulant(10, [1, 3])
    assert X.dtype == np.int64
    assert np.array_equal(X, X.T)
    assert np.all(np.diagonal(X) == 0)
    assert np.all(X.sum(axis=1) == 4)
    assert X[0, 1] == X[0, 9] == X[0, 3] == X[0, 7] == 1
    assert X[0, 2] == 0


def test_circulant_half_jump_is_one_link() -> None:
    # jump n/2: the pair {i, i+n/2} gets ONE link, one port per end -> degree 2*1 + 1 = 3
    X = circulant(8, [1, 4])
    assert np.all(X.sum(axis=1) == 3)
    assert X[0, 4] == X[4, 0] == 1
    assert np.array_equal(X, X.T)
    # n = 2, jump 1 = n/2: a single link
    assert np.array_equal(circulant(2, [1]), np.array([[0, 1], [1, 0]]))


def test_circulant_j_and_n_minus_j_are_the_same_jump() -> None:
    assert np.array_equal(circulant(12, [1, 11]), circulant(12, [1]))
    assert np.array_equal(circulant(12, [5, 7, 1]), circulant(12, [1, 5]))
    assert np.array_equal(circulant(12, [-1, 13]), circulant(12, [1]))
    assert np.all(circulant(12, [1, 11, 5]).sum(axis=1) == 4)


def test_circulant_directed() -> None:
    X = circulant(7, [1, 3], directed=True)
    assert np.all(X.sum(axis=1) == 2) and np.all(X.sum(axis=0) == 2)
    assert X[0, 1] == 1 and X[1, 0] == 0 and X[0, 3] == 1
    # directed: j and n-j are different jumps
    assert np.all(circulant(7, [1, 6], directed=True).sum(axis=1) == 2)


@pytest.mark.parametrize("jumps", [[0], [12], [1, 24], [-12]])
def test_circulant_rejects_zero_jump(jumps: list[int]) -> None:
    with pytest.raises(ValueError):
        circulant(12, jumps)
    with pytest.raises(ValueError):
        circulant_distances(12, jumps)


@pytest.mark.parametrize(
    "n, jumps, diam, mean",
    [
        (12, [1, 5], 3, 20 / 11),
        (128, [1, 13], 10, 5.62),
        (128, [1, 5, 13, 39], 5, 2.96),
        (1024, [1, 7, 33, 181], 8, 5.12),
    ],
)
def test_circulant_distances_published(n: int, jumps: list[int], diam: int, mean: float) -> None:
    cd = circulant_distances(n, jumps)
    assert cd[0] == 0 and np.all(cd >= 0)
    assert cd.max() == diam
    assert cd[1:].mean() == pytest.approx(mean, abs=0.005)


def test_circulant_distances_match_bfs_and_networkx() -> None:
    for n, jumps, directed in [
        (12, [1, 5], False),
        (30, [2, 7], False),
        (17, [1, 4], True),
        (20, [10, 3], False),
        (15, [3], False),
    ]:
        X = circulant(n, jumps, directed)
        cd = circulant_distances(n, jumps, directed)
        dist, _ = hop_distances(X)
        s, t = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        assert np.array_equal(dist, cd[(t - s) % n]), (n, jumps, directed)
        G = _nx(X)
        ref = nx.single_source_shortest_path_length(G, 0)
        assert all(cd[v] == ref.get(v, -1) for v in range(n))
    # gcd(3, 15) = 3: only multiples of 3 are reachable
    cd = circulant_distances(15, [3])
    assert np.all((cd >= 0) == (np.arange(15) % 3 == 0))


# ---------------------------------------------------------------------------------------------
# hop distances and path counts
# ---------------------------------------------------------------------------------------------


@pytest.fixture(params=["dense", "sparse"])
def bfs_kind(request, monkeypatch):
    """Run a test with the small-graph dense search (the default below 65 nodes) and with the sparse one."""
    if request.param == "sparse":
        monkeypatch.setattr(graph_module, "DENSE_BFS_MAX_NODES", 0)
    return request.param


@pytest.mark.parametrize("directed", [False, True])
def test_hop_distances_vs_networkx_bruteforce(directed: bool, bfs_kind: str) -> None:
    rng = np.random.default_rng(7 + directed)
    for _ in range(25):
        n = int(rng.integers(1, 13))
        X = _random_topology(rng, n, float(rng.uniform(0.1, 0.6)), directed)
        dist, sigma = hop_distances(X)
        assert dist.dtype == np.int64 and sigma.dtype == np.float64
        # the counting BFS agrees with the compiled search used by diameter/aspl
        ref = _distance_matrix(X)
        assert np.array_equal(np.where(np.isinf(ref), -1, ref).astype(np.int64), dist)
        G = _nx(X)
        for s in range(n):
            lengths = nx.single_source_shortest_path_length(G, s)
            for t in range(n):
                if t in lengths:
                    assert dist[s, t] == lengths[t]
                    assert sigma[s, t] == len(list(nx.all_shortest_paths(G, s, t)))
                else:
                    assert dist[s, t] == -1 and sigma[s, t] == 0


def test_hop_distances_dense_fallback_matches_networkx(bfs_kind: str) -> None:
    # n=60 at density 0.9 makes the level expansion exceed 2 n^2, exercising the BLAS branch
    rng = np.random.default_rng(3)
    X = _random_topology(rng, 60, 0.9, directed=True)
    dist, sigma = hop_distances(X)
    G = _nx(X)
    for s in (0, 17, 59):
        for t, d in nx.single_source_shortest_path_length(G, s).items():
            assert dist[s, t] == d
    for s, t in [(0, 1), (5, 9), (40, 2), (59, 58)]:
        assert sigma[s, t] == len(list(nx.all_shortest_paths(G, s, t)))
    K = np.ones((50, 50), dtype=np.int64) - np.eye(50, dtype=np.int64)
    dist, sigma = hop_distances(K)
    assert np.array_equal(dist, K) and np.array_equal(sigma, np.ones((50, 50)))


def test_sigma_closed_forms(bfs_kind: str) -> None:
    # hypercube: number of shortest paths between nodes at distance k is k!
    m = 5
    X = nx.to_numpy_array(nx.hypercube_graph(m), dtype=np.int64)
    dist, sigma = hop_distances(X)
    fact = np.array([math.factorial(k) for k in range(m + 1)], dtype=float)
    assert np.array_equal(sigma, fact[dist])
    # even ring: the antipode is reached both ways
    dist, sigma = hop_distances(circulant(10, [1]))
    assert sigma[0, 5] == 2 and sigma[0, 4] == 1 and dist[0, 5] == 5
    # parallel links do not multiply paths
    dist2, sigma2 = hop_distances(3 * circulant(10, [1]))
    assert np.array_equal(sigma, sigma2) and np.array_equal(dist, dist2)


def _bfs_rounds(fn):
    """Run ``fn()`` and record each round of :func:`graph.bfs_levels` (counts, not
    seconds): its frontier (entries ``(source, node)``) and the arcs it expands (sum of their degrees),
    read from the search's own variables when it starts a level (its line ``level += 1``)."""
    import inspect
    import sys

    code = graph_module.bfs_levels.__code__
    src, first = inspect.getsourcelines(graph_module.bfs_levels)
    (start_line,) = [first + k for k, line in enumerate(src) if line.strip() == "level += 1"]
    rounds: list[tuple[int, int]] = []

    def local(frame, event, arg):
        if event == "line" and frame.f_lineno == start_line:
            fv, deg = frame.f_locals["fv"], frame.f_locals["deg"]
            rounds.append((int(fv.size), int(deg[fv].sum())))
        return local

    previous = sys.gettrace()
    sys.settrace(lambda frame, event, arg: local if frame.f_code is code else None)
    try:
        result = fn()
    finally:
        sys.settrace(previous)
    return result, rounds


def test_hop_distances_n1024_does_o_nm_work() -> None:
    """The all-sources level-synchronous search at n = 1024: one round per
    level, every (source, node) pair expanded once, so n * m arcs in all (not n searches, not n^2
    per level)."""
    n, jumps = 1024, [1, 7, 33, 181]
    X = circulant(n, jumps)
    assert n > graph_module.DENSE_BFS_MAX_NODES  # the sparse search, with its BLAS levels
    (dist, sigma), rounds = _bfs_rounds(lambda: hop_distances(X))
    cd = circulant_distances(n, jumps)
    assert np.array_equal(dist[0], cd) and np.array_equal(dist[517], np.roll(cd, 517))
    assert sigma[0, 1] == 1 and np.all(sigma >= 1)
    m = int((X > 0).sum())
    assert len(rounds) == int(cd.max()) + 1  # levels 0..eccentricity each expanded once
    assert sum(size for size, _ in rounds) == n * n
    assert sum(arcs for _, arcs in rounds) == n * m


# ---------------------------------------------------------------------------------------------
# diameter, ASPL, connectivity
# ---------------------------------------------------------------------------------------------


def test_diameter_aspl_vs_networkx() -> None:
    rng = np.random.default_rng(11)
    checked = 0
    for _ in range(40):
        n = int(rng.integers(2, 20))
        X = _random_topology(rng, n, 0.3, directed=bool(rng.integers(2)))
        G = _nx(X)
        if nx.is_strongly_connected(G):
            checked += 1
            assert is_connected(X)
            assert diameter(X) == nx.diameter(G)
            assert aspl(X) == pytest.approx(nx.average_shortest_path_length(G), rel=1e-12)
        else:
            assert not is_connected(X)
            assert diameter(X) == math.inf and aspl(X) == math.inf
    assert checked >= 10


def test_closed_form_aspl() -> None:
    P = nx.to_numpy_array(nx.petersen_graph(), dtype=np.int64)
    assert diameter(P) == 2 and aspl(P) == pytest.approx(5 / 3)
    for m in (3, 4, 6):
        Q = nx.to_numpy_array(nx.hypercube_graph(m), dtype=np.int64)
        n = 2**m
        assert diameter(Q) == m
        assert aspl(Q) == pytest.approx(m * 2 ** (m - 1) / (n - 1))
    for n in (5, 8, 13):
        R = circulant(n, [1])
        assert diameter(R) == n // 2
        assert aspl(R) == pytest.approx((n * n // 4) / (n - 1))
    X = circulant(12, [1, 5])
    assert diameter(X) == 3 and aspl(X) == pytest.approx(20 / 11)
    # single node: no pairs
    assert diameter(np.zeros((1, 1), dtype=int)) == 0 and aspl(np.zeros((1, 1), dtype=int)) == 0.0


def test_is_connected_directed_means_strong() -> None:
    path = np.zeros((3, 3), dtype=int)
    path[0, 1] = path[1, 2] = 1
    assert not is_connected(path)
    cyc = path.copy()
    cyc[2, 0] = 1
    assert is_connected(cyc)
    assert diameter(cyc) == 2 and aspl(cyc) == pytest.approx(1.5)


# ---------------------------------------------------------------------------------------------
# conversions and validation
# ---------------------------------------------------------------------------------------------


def test_links_roundtrip_and_duplicates() -> None:
    X = links_to_matrix(4, [(0, 1, 2), (1, 2, 1), (1, 0, 1), (3, 2, 1)], directed=False)
    assert X[0, 1] == X[1, 0] == 3  # (0,1,2) + (1,0,1): same undirected link
    assert X[1, 2] == X[2, 1] == 1 and X[2, 3] == X[3, 2] == 1
    assert matrix_to_links(X) == [(0, 1, 3), (1, 2, 1), (2, 3, 1)]
    assert np.array_equal(links_to_matrix(4, matrix_to_links(X)), X)
    Y = links_to_matrix(3, [(0, 1, 1), (0, 1, 1), (2, 0, 4)], directed=True)
    assert Y[0, 1] == 2 and Y[1, 0] == 0 and Y[2, 0] == 4
    assert matrix_to_links(Y, directed=True) == [(0, 1, 2), (2, 0, 4)]
    assert np.array_equal(links_to_matrix(3, matrix_to_links(Y, True), True), Y)
    assert np.array_equal(links_to_matrix(3, []), np.zeros((3, 3)))


def test_links_errors() -> None:
    with pytest.raises(ValueError):
        links_to_matrix(3, [(0, 0, 1)])
    with pytest.raises(ValueError):
        links_to_matrix(3, [(0, 3, 1)])
    with pytest.raises(ValueError):
        links_to_matrix(3, [(0, 1, -1)])
    with pytest.raises(ValueError):
        matrix_to_links(np.array([[0, 1], [0, 0]]), directed=False)  # asymmetric


def test_degree_vectors() -> None:
    X = links_to_matrix(3, [(0, 1, 2), (1, 2, 1), (2, 0, 1)], directed=True)
    out_deg, in_deg = degree_vectors(X)
    assert out_deg.tolist() == [2, 1, 1] and in_deg.tolist() == [1, 2, 1]
    o, i = degree_vectors(circulant(8, [1, 4]))
    assert o.tolist() == [3] * 8 and i.tolist() == [3] * 8


def test_validate_topology() -> None:
    assert validate_topology(np.array([[0.0, 2.0], [1.0 + 1e-10, 0.0]])).tolist() == [[0, 2], [1, 0]]
    for bad in (
        np.array([[0, -1], [1, 0]]),
        np.array([[1, 1], [1, 0]]),
        np.array([[0, 0.5], [1, 0]]),
        np.zeros((2, 3)),
        np.array([[0, np.nan], [1, 0]]),
    ):
        with pytest.raises(ValueError):
            validate_topology(bad)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 40), st.lists(st.integers(-100, 100), min_size=1, max_size=4))
def test_circulant_properties(n: int, jumps: list[int]) -> None:
    if any(j % n == 0 for j in jumps):
        with pytest.raises(ValueError):
            circulant(n, jumps)
        return
    X = circulant(n, jumps)
    # degree = 2 per distinct undirected jump, 1 for the jump n/2
    folded = {min(j % n, n - j % n) for j in jumps}
    assert np.all(X.sum(axis=1) == sum(1 if 2 * j == n else 2 for j in folded))
    assert np.array_equal(X, X.T) and X.max() == 1
    cd = circulant_distances(n, jumps)
    dist, _ = hop_distances(X)
    assert np.array_equal(dist[0], cd)
    assert is_connected(X) == (math.gcd(n, *folded) == 1)


@pytest.mark.parametrize("directed", [False, True])
def test_split_link_moves_one_link_end_to_each_free_port(directed: bool) -> None:
    X = circulant(6, [1], directed=directed)
    out0, in0 = degree_vectors(X)
    split_link(X, 1, 2, 4, 5, directed)  # link 1 -> 2 becomes 1 -> 5 and 4 -> 2
    out1, in1 = degree_vectors(X)
    assert X[1, 2] == 0 and X[1, 5] == 1 and X[4, 2] == 1
    e = np.eye(6, dtype=np.int64)
    if directed:  # a (4) gains an out-port, b (5) an in-port, nobody else changes
        assert np.array_equal(out1 - out0, e[4]) and np.array_equal(in1 - in0, e[5])
    else:  # a and b gain a port each
        assert np.array_equal(out1 - out0, e[4] + e[5]) and np.array_equal(X, X.T)


@pytest.mark.parametrize("seed", range(20))
def test_adjacency_csr_is_the_csr_of_the_links(seed):
    """The CSR built from the links' positions equals scipy's CSR of the dense 0/1 float matrix."""
    import scipy.sparse as sp

    from topoopt_ilp.core.graph import adjacency_csr

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    x = rng.integers(0, 3, (n, n)) * (rng.random((n, n)) < 0.3)
    np.fill_diagonal(x, 0)
    ours, dense = adjacency_csr(x), sp.csr_matrix((x > 0).astype(np.float64))
    dense.sort_indices()
    assert ours.has_sorted_indices and ours.dtype == dense.dtype and ours.shape == dense.shape
    for a, b in ((ours.indptr, dense.indptr), (ours.indices, dense.indices), (ours.data, dense.data)):
        np.testing.assert_array_equal(a, b)
