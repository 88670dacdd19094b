"""Topology.from_links against a link-by-link sum, and its refusals."""

from __future__ import annotations

import numpy as np
import pytest

from topoopt_ilp.core.solution import Topology
from topoopt_ilp.errors import InputError


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("seed", range(20))
def test_from_links_adds_every_link_as_a_loop_would(seed, directed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 30))
    links = [
        (int(a), int(b), int(c)) for a, b, c in rng.integers([0, 0, 1], [n, n, 4], size=(int(rng.integers(0, 60)), 3))
    ]
    expected = np.zeros((n, n), dtype=np.int64)
    for i, j, c in links:  # repeated pairs and self-loops included: they add up
        expected[i, j] += c
        if not directed:
            expected[j, i] += c
    topology = Topology.from_links(n, links, directed)
    np.testing.assert_array_equal(topology.matrix, expected)
    assert not topology.matrix.flags.writeable
    assert sorted(topology.links(directed)) == sorted(
        (i, j, int(expected[i, j])) for i, j in zip(*np.nonzero(expected)) if directed or i < j
    )


@pytest.mark.parametrize("link", [(0, 5, 1), (-1, 2, 1), (2, 9, 1)])
def test_from_links_refuses_a_server_outside_the_topology(link):
    with pytest.raises(InputError, match=r"server ids must be 0\.\.4") as err:
        Topology.from_links(5, [(0, 1, 1), link], directed=False)
    assert err.value.field == "topology.links"


def test_from_links_refuses_a_negative_count():
    with pytest.raises(InputError, match=">= 0"):
        Topology.from_links(4, [(0, 1, -2)], directed=True)


def test_from_links_of_no_link_is_an_empty_topology():
    assert not Topology.from_links(3, [], directed=False).matrix.any()
