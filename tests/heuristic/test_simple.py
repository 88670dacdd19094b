"""remove_parallel_links: degree-preserving swaps that turn a multigraph into a simple graph."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse.csgraph import connected_components

from topoopt_ilp.heuristic import random_expander, torus
from topoopt_ilp.heuristic.simple import parallel_link_count, remove_parallel_links


def _connected(X, directed):
    return connected_components(X > 0, directed=directed, connection="strong")[0] == 1


def _check(X, before, directed):
    assert X.max() <= 1 and not np.diag(X).any()
    assert np.array_equal(X.sum(axis=1), before.sum(axis=1)) and np.array_equal(X.sum(axis=0), before.sum(axis=0))
    if not directed:
        assert np.array_equal(X, X.T)
    if _connected(before, directed):
        assert _connected(X, directed)


def _random_digraph(n, d, rng):
    X = np.zeros((n, n), dtype=np.int64)
    for _ in range(d):
        while True:
            p = rng.permutation(n)
            if (p != np.arange(n)).all():
                break
        X[np.arange(n), p] += 1
    return X


@pytest.mark.parametrize("n", [3, 4, 5, 8, 9, 12])
def test_random_multigraphs_become_simple(n):
    for d in range(1, n):
        for seed in range(8):
            rng = np.random.default_rng(seed)
            X = _random_digraph(n, d, rng)
            before = X.copy()
            remove_parallel_links(X, directed=True, weight=rng.random((n, n)), seed=seed)
            _check(X, before, True)
            if (n * d) % 2 or (d < 2 and n > 2):
                continue
            X = random_expander(n, d, seed=seed)
            before = X.copy()
            remove_parallel_links(X, weight=rng.random((n, n)), seed=seed)
            _check(X, before, False)


@pytest.mark.parametrize("directed", [False, True])
def test_all_copies_of_one_matching_become_simple(directed):
    """Worst case: d copies of one perfect matching (undirected) or of one permutation (directed),
    including d = n - 1, whose only simple form is the complete graph."""
    for n in (4, 6, 8):
        for d in range(1, n):
            X = np.zeros((n, n), dtype=np.int64)
            i = np.arange(n)
            if directed:
                X[i, (i + 1) % n] = d
            else:
                X[i[0::2], i[1::2]] = d
                X[i[1::2], i[0::2]] = d
            before = X.copy()
            remove_parallel_links(X, directed=directed)
            _check(X, before, directed)
            if d == n - 1:
                assert X.sum() == n * (n - 1)


def test_three_servers_directed_need_a_triangle_reversal():
    X = np.zeros((3, 3), dtype=np.int64)
    X[[0, 1, 2], [1, 2, 0]] = 2  # a doubled directed triangle: no 2-swap helps
    remove_parallel_links(X, directed=True)
    assert np.array_equal(X, 1 - np.eye(3, dtype=np.int64))


def test_least_traffic_links_move_first():
    """The doubled pair 0-1 can swap with 2-3, 2-4, 3-5 or 4-5; it takes 2-3, the one without traffic."""
    n = 6
    X = np.zeros((n, n), dtype=np.int64)
    for a, b, c in [
        (0, 1, 2),
        (2, 3, 1),
        (4, 5, 1),
        (0, 2, 1),
        (1, 3, 1),
        (2, 4, 1),
        (3, 5, 1),
        (0, 5, 1),
        (1, 4, 1),
        (2, 5, 1),
        (3, 4, 1),
    ]:
        X[a, b] += c
        X[b, a] += c
    assert (X.sum(axis=1) == 4).all()
    W = np.ones((n, n))
    W[2, 3] = W[3, 2] = 0.0  # link 2-3: no traffic
    before = X.copy()
    assert parallel_link_count(X) == 1 and remove_parallel_links(X, weight=W) == 1
    _check(X, before, False)
    assert X[2, 3] == 0 and X[0, 1] == 1


def test_torus_with_a_side_of_two():
    X = torus(8, 4)  # 2 x 4: the side of 2 doubles its links
    before = X.copy()
    assert parallel_link_count(X) > 0
    remove_parallel_links(X)
    _check(X, before, False)


def test_degree_above_n_minus_1_is_refused():
    X = np.array([[0, 2], [2, 0]])
    with pytest.raises(ValueError, match="multi_links"):
        remove_parallel_links(X)
