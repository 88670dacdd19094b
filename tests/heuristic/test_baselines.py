from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse.csgraph import connected_components

from topoopt_ilp.heuristic import demand_greedy, random_expander, torus


def _regular_connected(X, d):
    return (X.sum(axis=1) == d).all() and (X == X.T).all() and np.trace(X) == 0 and connected_components(X > 0)[0] == 1


@pytest.mark.parametrize("n,d", [(12, 4), (9, 4), (16, 3), (50, 6), (4, 3), (128, 8)])
def test_random_expander(n, d):
    for seed in range(5):
        assert _regular_connected(random_expander(n, d, seed), d)
    assert np.array_equal(random_expander(n, d, 7), random_expander(n, d, 7))


def test_random_expander_errors():
    with pytest.raises(ValueError):
        random_expander(9, 3)
    with pytest.raises(ValueError):
        random_expander(10, 1)


def test_demand_greedy_links_heaviest_pairs():
    n, d = 16, 4
    T = np.zeros((n, n))
    T[0, 1] = 100.0
    T[3, 2] = 40.0
    T[4, 5] = 1.0
    X = demand_greedy(n, d, T, seed=0)
    assert _regular_connected(X, d)
    # keys 100, 50, 40, 25, 20, 12.5, ...: 0-1 gets links until a port runs out, 2-3 likewise
    assert X[0, 1] >= 3 and X[2, 3] >= 3 and X[4, 5] >= 1


@pytest.mark.parametrize("seed", range(5))
def test_demand_greedy_random(seed):
    rng = np.random.default_rng(seed)
    n, d = 20, 4
    T = rng.random((n, n)) * (rng.random((n, n)) < 0.15)
    np.fill_diagonal(T, 0)
    assert _regular_connected(demand_greedy(n, d, T, seed), d)


def test_torus():
    X = torus(12, 4)  # 3 x 4
    assert _regular_connected(X, 4)
    X = torus(27, 6, dims=3)
    assert _regular_connected(X, 6)
    # 4x4 torus has diameter 4
    from scipy.sparse.csgraph import shortest_path

    assert shortest_path(torus(16, 4) > 0, unweighted=True).max() == 4
    X = torus(8, 4, shape=(2, 4))  # side 2 -> double link
    assert (X.sum(axis=1) == 4).all() and X[0, 4] == 2
    with pytest.raises(ValueError):
        torus(7, 4)
    with pytest.raises(ValueError):
        torus(16, 6)


@pytest.mark.parametrize("seed", range(6))
def test_connect_components_directed_keeps_degrees(seed):
    from topoopt_ilp.heuristic import connect_components

    rng = np.random.default_rng(seed)
    n, d = 14, 2
    X = np.zeros((n, n), dtype=np.int64)
    sizes = [3, 4, 7]  # three directed components, each a union of d permutation cycles inside it
    start = 0
    for size in sizes:
        nodes = np.arange(start, start + size)
        for _ in range(d):
            perm = rng.permutation(nodes)
            X[perm, np.roll(perm, 1)] += 1
        start += size
    before_out, before_in = X.sum(axis=1).copy(), X.sum(axis=0).copy()
    assert connected_components(X > 0, directed=True, connection="strong")[0] >= 3
    connect_components(X, rng, directed=True)
    assert connected_components(X > 0, directed=True, connection="strong")[0] == 1
    assert np.array_equal(X.sum(axis=1), before_out) and np.array_equal(X.sum(axis=0), before_in)
    assert np.trace(X) == 0 and X.min() >= 0
