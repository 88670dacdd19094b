from __future__ import annotations

import pytest

from topoopt_ilp.heuristic import allocate_ports, degree_split


def test_proportional_split_and_fixups():
    assert degree_split(8, 3.0, 1.0) == (6, 2)
    assert degree_split(8, 1.0, 1.0) == (4, 4)
    assert degree_split(8, 5.0, 3.0) == (6, 2)  # 5.0 rounds to 5 -> odd -> 6
    assert degree_split(8, 1.0, 100.0) == (2, 6)  # minimum 2 undirected
    assert degree_split(8, 1.0, 100.0, directed=True) == (1, 7)
    assert degree_split(8, 9.0, 7.0, directed=True) == (5, 3)  # 4.5 half up, no parity when directed
    assert degree_split(4, 1.0, 0.0) == (4, 0)
    assert degree_split(4, 0.0, 5.0) == (0, 4)  # no AllReduce traffic
    assert degree_split(6, 1.0, 1.0) == (4, 2)  # 3 is odd -> 4


def test_all_allreduce_split():
    assert degree_split(8, 1.0, 1e9, split="all_allreduce") == (8, 0)
    assert degree_split(5, 1.0, 1.0, split="all_allreduce") == (4, 1)
    with pytest.raises(ValueError):
        degree_split(4, 1.0, 1.0, split="nope")


def test_allocate_proportional_largest_remainder():
    # 4 units of 2 ports: 12 -> 2.5, 6 -> 1.25, 4 -> 0.25  => 3, 1, 0
    assert allocate_ports({12: 10.0, 6: 5.0, 4: 1.0}, 8, 12) == {12: 6, 6: 2}
    assert allocate_ports({12: 1.0, 6: 1.0}, 4, 12) == {12: 2, 6: 2}
    # directed units of 1
    assert allocate_ports({12: 3.0, 6: 1.0}, 4, 12, directed=True) == {12: 3, 6: 1}


def test_allocate_connectivity_repair():
    # sizes 6 and 4 generate Z_12 (gcd(2, 3) = 1): no repair
    assert allocate_ports({6: 10.0, 4: 5.0}, 8, 12) == {6: 6, 4: 2}
    # only size 6 (jumps even): one ring goes to a full 12-ring
    assert allocate_ports({6: 10.0}, 8, 12) == {6: 6, 12: 2}


def test_allocate_heaviest_authors():
    assert allocate_ports({6: 10.0, 4: 5.0}, 8, 12, mode="heaviest") == {6: 6, 12: 2}
    assert allocate_ports({12: 10.0, 4: 50.0}, 8, 12, mode="heaviest") == {4: 6, 12: 2}
    assert allocate_ports({12: 10.0, 4: 5.0}, 8, 12, mode="heaviest") == {12: 8}
    assert allocate_ports({6: 10.0}, 2, 12, mode="heaviest") == {12: 2}


def test_allocate_errors():
    with pytest.raises(ValueError):
        allocate_ports({5: 1.0}, 4, 12)
    with pytest.raises(ValueError):
        allocate_ports({12: 1.0}, 3, 12)
    assert allocate_ports({}, 4, 12) == {}
