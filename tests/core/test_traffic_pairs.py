"""``group_traffic_pairs`` against the matrix of ``group_traffic``: the same pairs, the same bytes
to the last bit, on random AllReduce groups split over random rings."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import minimal
from topoopt_ilp import files
from topoopt_ilp.core.routes import RingSet
from topoopt_ilp.core.traffic import group_traffic, group_traffic_pairs, traffic_matrix, traffic_pairs


@pytest.mark.parametrize("seed", range(60))
def test_pairs_equal_the_matrix(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 30))
    groups = []
    for _ in range(int(rng.integers(1, 4))):
        members = sorted(rng.choice(n, int(rng.integers(2, n + 1)), replace=False).tolist())
        groups.append({"members": members, "bytes": float(rng.choice([1e9, 3.7e8 * rng.random() + 1.0]))})
    inst = files.parse_instance(
        minimal(cluster={"servers": n, "degree": 2, "link_bandwidth_gbps": 100}, demand={"allreduce": groups})
    )
    rings = []
    for g, grp in enumerate(groups):
        for fraction in [[1.0], [0.5, 0.5], [0.3, 0.3, 0.4], [1 / 3, 2 / 3]][int(rng.integers(4))]:
            rings.append((g, rng.permutation(grp["members"]).tolist(), float(fraction)))
    ring_set = RingSet.from_lists(rings) if seed % 7 else None  # None: one ring per group in member order
    for g in range(len(groups)):
        matrix = group_traffic(inst, ring_set, g)
        pair, amount = group_traffic_pairs(inst, ring_set, g)
        expected = np.flatnonzero(matrix)
        np.testing.assert_array_equal(pair, expected)
        np.testing.assert_array_equal(amount, matrix.ravel()[expected])


def test_a_ring_of_three_by_hand():
    inst = files.parse_instance(
        minimal(
            cluster={"servers": 4, "degree": 2, "link_bandwidth_gbps": 100},
            demand={"allreduce": [{"members": [0, 1, 3], "bytes": 3e9}]},
        )
    )
    pair, amount = group_traffic_pairs(inst, RingSet.from_lists([(0, [3, 0, 1], 1.0)]), 0)
    assert pair.tolist() == [0 * 4 + 1, 1 * 4 + 3, 3 * 4 + 0]
    assert amount.tolist() == [4e9, 4e9, 4e9]  # 2 (k - 1) / k * S = 2 * 2 / 3 * 3e9


@pytest.mark.parametrize("seed", range(40))
def test_all_traffic_as_pairs_equals_the_matrix(seed):
    """``traffic_pairs`` of every ring and MP pair (repeated pairs, pairs on the rings) has the pairs and
    the bytes of ``traffic_matrix``, to the last bit."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 30))
    groups = [
        {"members": sorted(rng.choice(n, int(rng.integers(2, n + 1)), replace=False).tolist()), "bytes": 1e9 / 3}
        for _ in range(int(rng.integers(0, 3)))
    ]
    pairs = [[int(a), int(b), float(rng.lognormal(18, 2))] for a, b in rng.integers(0, n, (int(rng.integers(1, n)), 2))]
    pairs = [p for p in pairs if p[0] != p[1]] or [[0, 1, 7.0]]
    demand = {"mp": {"pairs": pairs + pairs[: len(pairs) // 2]}}  # some pairs twice
    if groups:
        demand["allreduce"] = groups
    inst = files.parse_instance(minimal(cluster={"servers": n, "degree": 2, "link_bandwidth_gbps": 100}, demand=demand))
    matrix = traffic_matrix(inst)
    pair, amount = traffic_pairs(inst)
    expected = np.flatnonzero(matrix)
    np.testing.assert_array_equal(pair, expected)
    np.testing.assert_array_equal(amount, matrix.ravel()[expected])


def test_all_to_all_traffic_is_not_given_as_pairs():
    inst = files.parse_instance(
        minimal(cluster={"servers": 4, "degree": 2, "link_bandwidth_gbps": 100}, demand={"all_to_all": 1e6})
    )
    with pytest.raises(ValueError, match="every pair"):
        traffic_pairs(inst)
