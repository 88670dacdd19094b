"""The independent degree check of a chosen topology (topoopt_ilp/evaluation/degree_check.py) on hand-made
topologies, each fault alone."""

from __future__ import annotations

import numpy as np

from topoopt_ilp.evaluation.degree_check import degree_violations


def test_degree_check_catches_each_fault():
    ring = np.array([[0, 1, 0, 1], [1, 0, 1, 0], [0, 1, 0, 1], [1, 0, 1, 0]])
    assert degree_violations(ring, 2, directed=False, regular=True) == []
    assert degree_violations(ring, 3, directed=False, regular=True)
    assert degree_violations(ring, 3, directed=False, regular=False) == []
    loop = ring.copy()
    loop[0, 0] = 1
    assert any("itself" in v for v in degree_violations(loop, 3, directed=False, regular=False))
    one_way = np.triu(ring)
    assert any("symmetric" in v for v in degree_violations(one_way, 2, directed=False, regular=False))
    double = np.array([[0, 2], [2, 0]])
    assert any("parallel" in v for v in degree_violations(double, 2, directed=False, regular=True, multi_links=False))


def test_directed_degrees_count_out_and_in_links():
    one_way_ring = np.roll(np.eye(4, dtype=np.int64), 1, axis=1)
    assert degree_violations(one_way_ring, 1, directed=True, regular=True) == []
    star = np.zeros((3, 3), dtype=np.int64)
    star[0, 1] = star[0, 2] = 1
    problems = degree_violations(star, 1, directed=True, regular=False)
    assert any("out-degree 2" in v for v in problems)
