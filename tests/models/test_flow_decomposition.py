"""Decoded paths cleaned of solver noise (models/flow_decomposition.paths_on_links)."""

from __future__ import annotations

import numpy as np
import pytest

from topoopt_ilp.errors import UnsupportedError
from topoopt_ilp.models.flow_decomposition import paths_on_links


def _ring(n: int) -> np.ndarray:
    X = np.zeros((n, n), dtype=np.int64)
    for i in range(n):
        X[i, (i + 1) % n] = X[(i + 1) % n, i] = 1
    return X


def test_noise_paths_are_dropped_and_each_pair_sums_to_one():
    X = _ring(6)
    decoded = {
        (0, 2): [([0, 1, 2], 3.0), ([0, 3, 2], 1e-8)],  # 0-3 is no link: noise
        (1, 4): [([1, 2, 3, 4], 1.0), ([1, 0, 5, 4], 1.0)],
    }
    rows = paths_on_links(X, decoded, [(0, 2), (1, 4)], keep_unconnected=False)
    assert rows == [([0, 1, 2], 1.0), ([1, 2, 3, 4], 0.5), ([1, 0, 5, 4], 0.5)]


def test_a_wanted_pair_without_a_clean_path_takes_a_shortest_one():
    X = _ring(6)
    rows = paths_on_links(X, {(0, 3): [([0, 3], 1.0)]}, [(0, 3), (2, 1)], keep_unconnected=True)
    assert dict((tuple(p[:: len(p) - 1]), (len(p), f)) for p, f in rows) == {(0, 3): (4, 1.0), (2, 1): (2, 1.0)}


def test_an_unconnected_pair_keeps_its_decoded_paths_or_is_refused():
    X = _ring(6)
    X[0, 1] = X[1, 0] = X[3, 4] = X[4, 3] = 0  # two components: {1, 2, 3} and {4, 5, 0}
    decoded = {(1, 5): [([1, 0, 5], 1.0)]}
    assert paths_on_links(X, decoded, [(1, 5)], keep_unconnected=True) == [([1, 0, 5], 1.0)]
    with pytest.raises(UnsupportedError, match="does not connect"):
        paths_on_links(X, decoded, [(1, 5)], keep_unconnected=False)
    with pytest.raises(UnsupportedError, match="does not connect"):
        paths_on_links(X, {}, [(1, 5)], keep_unconnected=True)
