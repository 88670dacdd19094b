"""Topology <-> networkx (docs/guide/networkx.md): one edge per pair with ``count`` and ``bandwidth_gbps``,
round trips through Graph, DiGraph and multigraphs, and the refusals of ``from_networkx``."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from topoopt_ilp.core.graph import circulant
from topoopt_ilp.core.solution import Topology
from topoopt_ilp.errors import InputError


def _multi_ring() -> Topology:
    # 6 servers, degree 4: a ring with double links, plus chords
    return Topology.from_links(6, [(i, (i + 1) % 6, 2) for i in range(6)], directed=False)


def test_one_edge_per_pair_with_count_and_bandwidth():
    g = _multi_ring().to_networkx(directed=False, bandwidth_gbps=25)
    assert type(g) is nx.Graph and sorted(g.nodes) == list(range(6))
    assert g.number_of_edges() == 6
    assert g.edges[0, 1] == {"count": 2, "bandwidth_gbps": 50.0}
    assert dict(g.degree(weight="count")) == {i: 4 for i in range(6)}  # interfaces used
    assert nx.maximum_flow_value(g, 0, 3, capacity="bandwidth_gbps") == 100.0


def test_without_bandwidth_only_the_count():
    g = _multi_ring().to_networkx(directed=False)
    assert g.edges[2, 3] == {"count": 2}


@pytest.mark.parametrize("directed", [False, True])
def test_round_trip(directed):
    t = Topology(circulant(9, (1, 2) if directed else (1, 3), directed))
    g = t.to_networkx(directed=directed)
    assert g.is_directed() is directed
    back = Topology.from_networkx(g)
    assert np.array_equal(back.matrix, t.matrix)


def test_round_trip_multi_links():
    t = _multi_ring()
    assert np.array_equal(Topology.from_networkx(t.to_networkx(directed=False)).matrix, t.matrix)


def test_directed_asymmetric_round_trip():
    t = Topology.from_links(3, [(0, 1, 1), (1, 2, 2), (2, 0, 1)], directed=True)
    g = t.to_networkx(directed=True, bandwidth_gbps=10)
    assert type(g) is nx.DiGraph and g.edges[1, 2]["bandwidth_gbps"] == 20.0 and not g.has_edge(2, 1)
    assert np.array_equal(Topology.from_networkx(g).matrix, t.matrix)


def test_an_asymmetric_matrix_is_no_undirected_graph():
    t = Topology.from_links(3, [(0, 1, 1)], directed=True)
    with pytest.raises(InputError, match="symmetric"):
        t.to_networkx(directed=False)


def test_parallel_edges_of_a_multigraph_add_up():
    m = nx.MultiGraph([(0, 1), (0, 1), (1, 2)])
    m.add_edge(1, 2, count=2)
    x = Topology.from_networkx(m).matrix
    assert x[0, 1] == x[1, 0] == 2 and x[1, 2] == x[2, 1] == 3
    d = nx.MultiDiGraph([(0, 1), (0, 1), (1, 0)])
    x = Topology.from_networkx(d).matrix
    assert x[0, 1] == 2 and x[1, 0] == 1


def test_n_leaves_room_for_servers_without_links():
    t = Topology.from_networkx(nx.Graph([(0, 1)]), n=4)
    assert t.n == 4 and t.matrix.sum() == 2


def test_metrics_become_edge_attributes_the_busier_direction_for_undirected():
    t = _multi_ring()
    load = np.zeros((6, 6))
    load[0, 1], load[1, 0] = 5.0, 7.0
    g = t.to_networkx(directed=False, metrics={"load": load})
    assert g.edges[0, 1]["load"] == 7.0 and g.edges[3, 4]["load"] == 0.0
    with pytest.raises(InputError, match="6 x 6"):
        t.to_networkx(directed=False, metrics={"load": np.zeros((2, 2))})


@pytest.mark.parametrize(
    "graph, message",
    [
        (nx.Graph([(0, 0)]), "itself"),
        (nx.Graph([(0, "a")]), "node 'a' is not a server"),
        (nx.Graph([(0, 5)]), "node 5 is not a server: nodes must be the integers 0..1"),
        (nx.Graph([(0, 1, {"count": 1.5})]), "edge \\(0, 1\\).count: expected an integer"),
        (nx.Graph([(0, 1, {"count": 0})]), "must be >= 1"),
        (nx.Graph([(0, 1, {"count": "2"})]), "expected an integer"),
        (nx.Graph([(True, 1)]), "not a server"),
    ],
)
def test_from_networkx_refuses(graph, message):
    with pytest.raises(InputError, match=message):
        Topology.from_networkx(graph)


def test_from_networkx_refuses_what_is_not_a_graph():
    with pytest.raises(InputError, match="expected a networkx graph"):
        Topology.from_networkx([(0, 1)])
