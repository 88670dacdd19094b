from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from topoopt_ilp.heuristic import blossom_matching, circulant_matrix, greedy_matching, repeated_matching, route_pairs


def _demand(n, density, seed):
    rng = np.random.default_rng(seed)
    T = rng.random((n, n)) * (rng.random((n, n)) < density)
    np.fill_diagonal(T, 0)
    return T


def test_single_round_is_max_weight_perfect_matching():
    T = np.zeros((6, 6))
    T[0, 1], T[1, 2], T[2, 3], T[3, 4], T[4, 5] = 3, 4, 3, 4, 3
    M = repeated_matching(T, 1, method="blossom")
    assert (M.sum(axis=1) == 1).all() and (M == M.T).all()
    # best matching: 0-1, 2-3, 4-5 (weight 9) beats 1-2, 3-4 (8)
    assert M[0, 1] == M[2, 3] == M[4, 5] == 1


def test_discount_lets_a_dominant_pair_repeat():
    n = 8
    T = np.zeros((n, n))
    T[0, 1] = 100.0
    T[2, 3] = 30.0
    T[4, 5] = 45.0
    M = repeated_matching(T, 3, method="blossom")
    # 0-1 discounted 100 -> 50 -> 33.3: gets a link in each of the three rounds
    assert M[0, 1] == 3
    assert (M.sum(axis=1) == 3).all() and (M == M.T).all() and np.trace(M) == 0


def test_symmetrised_demand_is_used():
    T = np.zeros((4, 4))
    T[0, 1] = 1.0
    T[1, 0] = 1.0
    T[0, 2] = 1.5
    M = repeated_matching(T, 1, method="blossom")
    assert M[0, 1] == 1  # 2.0 (both directions) beats 1.5


@pytest.mark.parametrize("seed", range(3))
def test_greedy_vs_blossom(seed):
    n = 40
    T = _demand(n, 0.2, seed)
    W = T + T.T
    i, j = np.nonzero(np.triu(W, 1))
    w = W[i, j]
    eb = blossom_matching(i, j, w, n)
    eg = greedy_matching(i, j, w, n)
    # greedy is a valid matching with >= 1/2 of the optimum
    used = np.concatenate([i[eg], j[eg]])
    assert np.unique(used).size == used.size
    assert w[eg].sum() >= 0.5 * w[eb].sum()
    assert w[eb].sum() >= w[eg].sum()
    # greedy equals the sequential heaviest-first greedy
    seq, free = 0.0, np.ones(n, bool)
    for e in np.lexsort((np.arange(w.size), -w)):
        if free[i[e]] and free[j[e]]:
            free[i[e]] = free[j[e]] = False
            seq += w[e]
    assert w[eg].sum() == pytest.approx(seq)


def test_sparse_input_and_regularity():
    T = _demand(30, 0.1, 1)
    M1 = repeated_matching(T, 2, seed=3)
    M2 = repeated_matching(sp.csr_matrix(T), 2, seed=3)
    assert np.array_equal(M1, M2)
    assert (M1.sum(axis=1) == 2).all()


def test_directed_rounds_are_permutations():
    T = _demand(10, 0.3, 2)
    M = repeated_matching(T, 2, directed=True)
    assert (M.sum(axis=0) == 2).all() and (M.sum(axis=1) == 2).all() and np.trace(M) == 0


def test_odd_n_rejected():
    with pytest.raises(ValueError):
        repeated_matching(np.ones((5, 5)), 1)


def test_route_pairs_shortest_and_filter():
    X = circulant_matrix(12, [1, 5])
    src = np.array([0, 0, 3, 4])
    dst = np.array([6, 1, 9, 4 + 3])
    dist, P = route_pairs(X, src, dst)
    assert dist.tolist() == [2, 1, 2, 3]
    for path, f in P.to_lists():
        assert f == 1.0
        assert all(X[a, b] > 0 for a, b in zip(path, path[1:]))
    assert [(p[0], p[-1]) for p, _ in P.to_lists()] == [(0, 6), (0, 1), (3, 9), (4, 7)]
    _, P2 = route_pairs(X, src, dst, shorter_than=np.array([2, 9, 9, 3]))
    assert [(p[0], p[-1]) for p, _ in P2.to_lists()] == [(0, 1), (3, 9)]


def test_route_pairs_ecmp_and_ksp():
    X = circulant_matrix(12, [1, 5])
    d, P = route_pairs(X, np.array([0]), np.array([6]), method="ecmp")
    assert d.tolist() == [2] and len(P) == 4 and np.isclose(P.fraction.sum(), 1)
    d, P = route_pairs(X, np.array([0]), np.array([6]), method="ksp", k=5)
    assert len(P) == 5 and P.hops.min() == 2 and np.isclose(P.fraction.sum(), 1)


def test_bfs_public_fallback_matches_kernel(monkeypatch):
    import topoopt_ilp.heuristic.mp_links as ml

    rng = np.random.default_rng(5)
    X = repeated_matching(_demand(24, 0.3, 5), 2) + circulant_matrix(24, [1, 7])
    src, dst = rng.integers(0, 24, 60), rng.integers(0, 24, 60)
    d1, p1 = route_pairs(X, src, dst, chunk=7)
    monkeypatch.setattr(ml, "_BFS_KERNEL", None)
    d2, p2 = route_pairs(X, src, dst, chunk=5)
    assert np.array_equal(d1, d2)
    G = nx.from_numpy_array((X > 0).astype(int))
    assert d1.tolist() == [nx.shortest_path_length(G, int(s), int(t)) for s, t in zip(src, dst)]
    assert np.array_equal(p1.hops, d1) and np.array_equal(p2.hops, d2)
    assert np.array_equal(p1.src, src) and np.array_equal(p1.dst, dst)
