"""``pair_hop_distances`` (bitset search, per-source search past a number of levels) against
scipy's per-source search and networkx, on random undirected graphs, connected or not."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from topoopt_ilp.core import graph
from topoopt_ilp.heuristic import mp_links
from topoopt_ilp.heuristic.mp_links import pair_hop_distances


def random_case(rng):
    n = int(rng.integers(2, 160))
    p = float(rng.choice([0.005, 0.02, 0.1, 0.5]))
    x = (rng.random((n, n)) < p).astype(np.int64)  # not symmetric: a link either way counts
    np.fill_diagonal(x, 0)
    if rng.random() < 0.4:  # a long ring: distances up to n / 2
        x[np.arange(n), (np.arange(n) + 1) % n] = 1
    m = int(rng.integers(1, 3 * n))
    i = rng.integers(0, n, m)
    j = (i + rng.integers(1, n, m)) % n  # pairs of two servers, as the matching asks
    order = np.argsort(i, kind="stable")
    return x, i[order], j[order]


def by_networkx(x, i, j):
    g = nx.Graph()
    g.add_nodes_from(range(x.shape[0]))
    g.add_edges_from(zip(*np.nonzero(x)))
    lengths = dict(nx.all_pairs_shortest_path_length(g))
    return np.array([lengths[a].get(b, x.shape[0]) for a, b in zip(i.tolist(), j.tolist())])


@pytest.mark.parametrize("seed", range(150))
def test_bitset_pair_distances_equal_per_source_search(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    x, i, j = random_case(rng)
    if seed % 3 == 0:  # several blocks of sources
        monkeypatch.setattr(graph, "BITSET_BLOCK_WORDS", 1)
    if seed % 2 == 0:  # hand far pairs to the per-source search early
        monkeypatch.setattr(mp_links, "BIT_SEARCH_LEVELS", int(rng.integers(0, 6)))
    got = pair_hop_distances(x, i, j)
    adj = (x > 0).astype(np.int8)
    expected = mp_links._pair_distances_per_source(sp.csr_matrix(adj), i, j, x.shape[0], 256)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got, by_networkx(x, i, j))


def test_unreachable_and_own_pairs():
    x = np.zeros((6, 6), dtype=np.int64)
    x[0, 1] = x[2, 1] = 1  # 0 - 1 - 2; 3, 4, 5 alone
    i, j = np.array([0, 0, 0, 3, 4]), np.array([2, 0, 5, 3, 2])
    np.testing.assert_array_equal(pair_hop_distances(x, i, j), [2, 0, 6, 0, 6])
