"""GRAPH_FORMATS: every writer's file read back by networkx itself gives the design's link matrix,
and read as an instance's fixed topology gives it again."""

from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest

from conftest import minimal
from topoopt_ilp.core.solution import Solution, Topology
from topoopt_ilp.errors import InputError
from topoopt_ilp.evaluation.link_metrics import link_metrics, solution_graph
from topoopt_ilp.export.graph_formats import GRAPH_FORMATS, design_graph
from topoopt_ilp.files import load_instance, parse_instance
from topoopt_ilp.methods import solve

SUFFIX = {"graphml": ".graphml", "node-link": ".json", "edgelist": ".txt"}


def _read_back(fmt: str, path, directed: bool) -> nx.Graph:
    if fmt == "graphml":
        return nx.read_graphml(path, node_type=int)
    if fmt == "node-link":
        return nx.node_link_graph(json.loads(path.read_text()), edges="edges")
    return nx.read_edgelist(
        path, nodetype=int, data=[("count", int)], create_using=nx.DiGraph if directed else nx.Graph
    )


def _design(directed: bool, multi: bool):
    n = 8
    if multi:
        links = [(i, (i + 1) % n, 2) for i in range(n)]
        degree = 2 if directed else 4
    else:
        links = [(i, (i + 1) % n, 1) for i in range(n)] + [(i, (i + 3) % n, 1) for i in range(n)]
        degree = 2 if directed else 4
    data = minimal()
    data["cluster"].update({"degree": degree, "links": "directed" if directed else "undirected"})
    data["fixed_topology"] = {"links": [list(link) for link in links]}
    inst = parse_instance(data)
    return inst, solve(inst)


CASES = [(False, False), (True, False), (False, True), (True, True)]


@pytest.mark.parametrize("fmt", sorted(GRAPH_FORMATS))
@pytest.mark.parametrize("directed, multi", CASES, ids=["undirected", "directed", "multi", "directed-multi"])
def test_round_trip_through_networkx(tmp_path, fmt, directed, multi):
    inst, sol = _design(directed, multi)
    path = tmp_path / f"design{SUFFIX[fmt]}"
    GRAPH_FORMATS[fmt](inst, sol, str(path))
    graph = _read_back(fmt, path, directed)
    assert graph.is_directed() is directed
    back = Topology.from_networkx(graph, n=inst.n)
    assert np.array_equal(back.matrix, sol.topology.matrix)
    # and as an instance's fixed topology
    data = minimal()
    data["cluster"].update({"degree": inst.d, "links": inst.cluster.links})
    data["fixed_topology"] = {"file": path.name}
    (tmp_path / "inst.json").write_text(json.dumps(data))
    assert np.array_equal(load_instance(tmp_path / "inst.json").fixed_topology_matrix(), sol.topology.matrix)


def test_graphml_carries_bandwidth_and_the_design(tmp_path):
    inst, sol = _design(False, True)
    GRAPH_FORMATS["graphml"](inst, sol, tmp_path / "d.graphml")
    g = nx.read_graphml(tmp_path / "d.graphml", node_type=int)
    assert g.edges[0, 1] == {"count": 2, "bandwidth_gbps": 200.0}
    assert g.graph["servers"] == 8 and g.graph["links"] == "undirected" and g.graph["method"] == "given"


def test_edge_metrics_option_and_link_metrics(tmp_path):
    inst, sol = _design(False, False)
    metrics = link_metrics(inst, sol)
    util = metrics["utilisation"]
    assert util.max() == pytest.approx(sol.metrics["max_link_utilization"])
    for fmt in ("graphml", "node-link"):
        path = tmp_path / f"d{SUFFIX[fmt]}"
        GRAPH_FORMATS[fmt](inst, sol, path, edge_metrics=metrics)
        g = _read_back(fmt, path, False)
        busiest = max(d["utilisation"] for *_, d in g.edges(data=True))
        assert busiest == pytest.approx(util.max())
        assert all(d["load"] >= 0 for *_, d in g.edges(data=True))
    g = solution_graph(inst, sol)
    assert {"count", "bandwidth_gbps", "load", "utilisation"} <= set(g.edges[0, 1])


def test_the_edge_list_is_networkx_weighted_edge_list(tmp_path):
    inst, sol = _design(False, True)
    GRAPH_FORMATS["edgelist"](inst, sol, tmp_path / "d.txt")
    g = nx.read_weighted_edgelist(tmp_path / "d.txt", nodetype=int)
    assert g.edges[0, 1]["weight"] == 2.0
    lines = (tmp_path / "d.txt").read_text().splitlines()
    assert lines[0].startswith("#") and "undirected" in lines[0] and lines[2] == "0 1 2"


def test_writes_are_atomic_and_refuse_a_design_without_topology(tmp_path):
    inst, sol = _design(False, False)
    empty = Solution(status="no_solution", method="exact", topology=None)
    for fmt, write in GRAPH_FORMATS.items():
        path = tmp_path / f"d{SUFFIX[fmt]}"
        with pytest.raises(InputError, match="no topology"):
            write(inst, empty, path)
        assert not path.exists()
        with pytest.raises(InputError, match="cannot write"):
            write(inst, sol, tmp_path / "missing" / f"d{SUFFIX[fmt]}")
    assert list(tmp_path.iterdir()) == []


def test_a_topology_of_another_size_is_refused():
    inst, _ = _design(False, False)
    other = Solution(status="feasible", method="given", topology=Topology(np.zeros((3, 3), dtype=int)))
    with pytest.raises(InputError, match="3 servers, the instance 8"):
        design_graph(inst, other)


@pytest.mark.parametrize(
    "fmt, read",
    [("graphml", nx.read_graphml), ("edgelist", lambda p: nx.read_edgelist(p, data=(("count", int),)))],
)
def test_the_export_command_writes_graph_files(tmp_path, capsys, fmt, read):
    """`topoopt export --to graphml|node-link|edgelist` goes through the same registry as the cabling plan."""
    from conftest import INSTANCES
    from topoopt_ilp.cli import main
    from topoopt_ilp.files import save_solution

    inst = load_instance(INSTANCES / "testbed-12.json")
    sol = solve(inst)
    sol_path = tmp_path / "s.json"
    save_solution(sol, sol_path, directed=False)
    out = tmp_path / f"t.{fmt}"
    assert main(["export", str(INSTANCES / "testbed-12.json"), str(sol_path), "--to", fmt, "-o", str(out)]) == 0
    G = read(out)
    assert G.number_of_nodes() == 12 and G.number_of_edges() == 24
    assert main(["export", "--list"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in ("graphml", "node-link", "edgelist", "cabling", "ocs"))
