from __future__ import annotations

import networkx as nx
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from topoopt_ilp.heuristic import coin_change_mod


def _check(n, coins, directed, max_routes=8):
    dist, R = coin_change_mod(n, coins, directed=directed, max_routes=max_routes)
    G = nx.DiGraph() if directed else nx.Graph()
    G.add_nodes_from(range(n))
    for j in coins:
        G.add_edges_from((i, (i + j) % n) for i in range(n))
    ref = nx.single_source_shortest_path_length(G, 0)
    for r in range(n):
        assert dist[r] == ref.get(r, -1)
    # every route sums to its offset with dist[offset] coins, each coin a +-jump; fractions sum to 1
    allowed = {j % n for j in coins} | (set() if directed else {(-j) % n for j in coins})
    frac = np.zeros(n)
    for off, js, f in R.to_lists():
        assert sum(js) % n == off
        assert len(js) == dist[off]
        assert set(js) <= allowed
        frac[off] += f
    reach = dist > 0
    assert np.allclose(frac[reach], 1.0)
    assert np.all(frac[~reach] == 0)
    return dist, R


def test_testbed_distances():
    dist, R = _check(12, [1, 5], False)
    assert dist.tolist() == [0, 1, 2, 3, 2, 1, 2, 1, 2, 3, 2, 1]
    assert dist.max() == 3


def test_all_shortest_alternatives_kept():
    # n=12, coins +-1, +-5: offset 2 = 1+1 = 7+7 (i.e. -5-5); offset 6 = 1+5 = 5+1 = 11+7 = 7+11
    dist, R = coin_change_mod(12, [1, 5], max_routes=None)
    routes = {}
    for off, js, f in R.to_lists():
        routes.setdefault(off, []).append(tuple(js))
    assert sorted(routes[2]) == [(1, 1), (7, 7)]
    assert sorted(routes[6]) == [(1, 5), (5, 1), (7, 11), (11, 7)]
    assert routes[1] == [(1,)]


def test_max_routes_caps():
    _, R = coin_change_mod(64, [1, 9], max_routes=3)
    assert np.bincount(R.offset).max() <= 3
    _, R1 = coin_change_mod(64, [1, 9], max_routes=1)
    assert np.bincount(R1.offset, minlength=64)[1:].tolist() == [1] * 63


def test_disconnected_and_directed():
    dist, R = _check(12, [3], False)
    assert (dist[[1, 2, 4]] == -1).all() and dist[3] == 1 and dist[6] == 2
    _check(10, [1, 3], True)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 40), coins=st.lists(st.integers(1, 39), min_size=1, max_size=4), directed=st.booleans())
def test_equals_bfs_on_circulant(n, coins, directed):
    coins = [c % n for c in coins if c % n]
    if not coins:
        return
    _check(n, coins, directed)
