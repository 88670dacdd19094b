"""``diameter_and_aspl`` (bitset breadth-first search) against scipy's all-pairs distances and
networkx, on random directed and undirected graphs, connected or not, in one block or several."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

from topoopt_ilp.core import graph


def scipy_summaries(x):
    """The former computation: scipy's distance matrix, its largest entry and mean off the diagonal."""
    n = x.shape[0]
    if n <= 1:
        return 0, 0.0
    dist = graph._distance_matrix(x)
    top = float(dist.max())
    if math.isinf(top):
        return math.inf, math.inf
    return int(top), float(dist.sum()) / (n * (n - 1))


def random_topology(rng, n):
    p = float(rng.choice([0.02, 0.08, 0.3, 0.9]))
    x = (rng.random((n, n)) < p).astype(np.int64) * rng.integers(1, 3, (n, n))
    np.fill_diagonal(x, 0)
    if rng.random() < 0.5:  # undirected
        x = np.triu(x) + np.triu(x).T
    if rng.random() < 0.5:  # a ring makes it connected
        x[np.arange(n), (np.arange(n) + 1) % n] = 1
        x[(np.arange(n) + 1) % n, np.arange(n)] = 1
    return x


@pytest.mark.parametrize("seed", range(120))
def test_bitset_search_equals_scipy_distances(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 150))
    x = random_topology(rng, n)
    if seed % 3 == 0:  # many small blocks of sources
        monkeypatch.setattr(graph, "BITSET_BLOCK_WORDS", 1)
    assert graph.diameter_and_aspl(x) == scipy_summaries(x)


def test_against_networkx_on_known_graphs():
    for g in (nx.petersen_graph(), nx.hypercube_graph(6), nx.cycle_graph(131), nx.path_graph(70)):
        x = nx.to_numpy_array(nx.convert_node_labels_to_integers(g), dtype=np.int64)
        diam, mean = graph.diameter_and_aspl(x)
        assert diam == nx.diameter(g)
        assert mean == pytest.approx(nx.average_shortest_path_length(g), rel=1e-15)
    # a directed cycle: distance k to the k-th successor
    n = 100
    x = np.zeros((n, n), dtype=np.int64)
    x[np.arange(n), (np.arange(n) + 1) % n] = 1
    assert graph.diameter_and_aspl(x) == (n - 1, n / 2)
    x[0, 1] = 0  # no longer strongly connected
    assert graph.diameter_and_aspl(x) == (math.inf, math.inf)


def test_popcount_without_numpy_2(monkeypatch):
    words = np.random.default_rng(0).integers(0, 2**63, 1000, dtype=np.int64).astype(np.uint64)
    expected = sum(bin(int(w)).count("1") for w in words)
    assert graph._bits_set(words) == expected
    monkeypatch.delattr(np, "bitwise_count", raising=False)
    assert graph._bits_set(words) == expected


def circulant(n, jumps, directed):
    x = np.zeros((n, n), dtype=np.int64)
    for j in jumps:
        x[np.arange(n), (np.arange(n) + j) % n] += 1
        if not directed:
            x[np.arange(n), (np.arange(n) - j) % n] += 1
    return x


@pytest.mark.parametrize("seed", range(40))
def test_a_circulant_is_searched_from_one_server_with_the_same_summaries(seed):
    """A circulant is searched from server 0 only (it looks the same from every server): the summaries
    equal scipy's all-pairs ones, and a copy with one server's links moved, no longer a circulant,
    is searched from every server."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 80))
    directed = bool(seed % 2)
    x = circulant(n, rng.integers(1, n, int(rng.integers(1, 4))).tolist(), directed)
    assert graph.is_circulant(graph.adjacency_csr(x).T.tocsr())
    assert graph.diameter_and_aspl(x) == scipy_summaries(x)
    order = rng.permutation(n)
    relabelled = x[np.ix_(order, order)]
    assert graph.diameter_and_aspl(relabelled) == scipy_summaries(relabelled)
    moved = x.copy()
    u, v = np.flatnonzero(moved[0])[0], int(rng.integers(1, n))
    if v != u and moved[0, v] == 0:
        moved[0, u], moved[0, v] = 0, 1
        assert not graph.is_circulant(graph.adjacency_csr(moved).T.tocsr())
        assert graph.diameter_and_aspl(moved) == scipy_summaries(moved)
