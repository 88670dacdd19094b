"""``"fixed_topology": {"file": ...}``: a topology read from GraphML, node-link JSON or an edge list,
checked exactly like inline links, and every bad file one line naming the instance and the field."""

from __future__ import annotations

import json
import time

import networkx as nx
import numpy as np
import pytest

from conftest import minimal
from topoopt_ilp.cli import main
from topoopt_ilp.core.solution import Topology
from topoopt_ilp.errors import InstanceError
from topoopt_ilp.files import load_instance, parse_instance, save_instance
from topoopt_ilp.files.graph_file import read_graph

RING_LINKS = [[i, (i + 1) % 8, 1] for i in range(8)]  # 8 servers, degree 2


def _write_graph(graph: nx.Graph, path) -> None:
    suffix = path.suffix
    if suffix == ".graphml":
        nx.write_graphml(graph, path)
    elif suffix == ".json":
        path.write_text(json.dumps(nx.node_link_data(graph, edges="edges")))
    else:
        nx.write_edgelist(
            graph, path, data=["count"] if all("count" in d for *_, d in graph.edges(data=True)) else False
        )


def _instance(tmp_path, graph_name: str, cluster: dict | None = None, **extra):
    data = minimal(fixed_topology={"file": graph_name}, **extra)
    if cluster:
        data["cluster"].update(cluster)
    p = tmp_path / "inst.json"
    p.write_text(json.dumps(data))
    return p


def _inline_matrix(links, cluster: dict | None = None):
    data = minimal(fixed_topology={"links": links})
    if cluster:
        data["cluster"].update(cluster)
    return parse_instance(data).fixed_topology_matrix()


@pytest.mark.parametrize("suffix", [".graphml", ".json", ".txt", ".edgelist"])
def test_each_format_gives_the_inline_links(tmp_path, suffix):
    _write_graph(nx.cycle_graph(8), tmp_path / f"t{suffix}")
    inst = load_instance(_instance(tmp_path, f"t{suffix}"))
    assert np.array_equal(inst.fixed_topology_matrix(), _inline_matrix(RING_LINKS))


@pytest.mark.parametrize("suffix", [".graphml", ".json", ".txt"])
def test_multi_links_by_count(tmp_path, suffix):
    t = Topology.from_links(8, [(i, (i + 1) % 8, 2) for i in range(8)], directed=False)
    _write_graph(t.to_networkx(directed=False), tmp_path / f"t{suffix}")
    inst = load_instance(_instance(tmp_path, f"t{suffix}", {"degree": 4}))
    assert np.array_equal(inst.fixed_topology_matrix(), t.matrix)


def test_multi_links_by_parallel_edges(tmp_path):
    g = nx.MultiGraph()
    for i in range(8):
        g.add_edge(i, (i + 1) % 8)
        g.add_edge(i, (i + 1) % 8)
    nx.write_graphml(g, tmp_path / "t.graphml")
    inst = load_instance(_instance(tmp_path, "t.graphml", {"degree": 4}))
    assert inst.fixed_topology_matrix()[0, 1] == 2


@pytest.mark.parametrize("suffix", [".graphml", ".json", ".txt"])
def test_directed(tmp_path, suffix):
    t = Topology.from_links(8, [(i, (i + 1) % 8, 1) for i in range(8)] + [(i, (i + 3) % 8, 1) for i in range(8)], True)
    _write_graph(t.to_networkx(directed=True), tmp_path / f"t{suffix}")
    inst = load_instance(_instance(tmp_path, f"t{suffix}", {"links": "directed"}))
    assert np.array_equal(inst.fixed_topology_matrix(), t.matrix)


def test_a_symmetric_directed_graph_on_undirected_links_and_the_converse(tmp_path):
    nx.write_graphml(nx.cycle_graph(8).to_directed(), tmp_path / "t.graphml")
    assert np.array_equal(
        load_instance(_instance(tmp_path, "t.graphml")).fixed_topology_matrix(), _inline_matrix(RING_LINKS)
    )
    nx.write_graphml(nx.cycle_graph(8), tmp_path / "u.graphml")
    inst = load_instance(_instance(tmp_path, "u.graphml", {"links": "directed"}))
    assert np.array_equal(inst.fixed_topology_matrix(), _inline_matrix(RING_LINKS))


def test_the_path_is_relative_to_the_instance_file(tmp_path, monkeypatch):
    (tmp_path / "graphs").mkdir()
    nx.write_graphml(nx.cycle_graph(8), tmp_path / "graphs" / "t.graphml")
    p = _instance(tmp_path, "graphs/t.graphml")
    monkeypatch.chdir("/")
    assert load_instance(p).fixed_topology is not None
    data = minimal(fixed_topology={"file": "graphs/t.graphml"})
    assert parse_instance(data, base_dir=tmp_path).fixed_topology is not None


def test_saved_with_its_links_inline(tmp_path):
    nx.write_graphml(nx.cycle_graph(8), tmp_path / "t.graphml")
    inst = load_instance(_instance(tmp_path, "t.graphml"))
    save_instance(inst, tmp_path / "saved.json")
    saved = json.loads((tmp_path / "saved.json").read_text())
    assert "links" in saved["fixed_topology"]
    assert np.array_equal(load_instance(tmp_path / "saved.json").fixed_topology_matrix(), inst.fixed_topology_matrix())


def test_cli_validate_solve_evaluate(tmp_path, capsys):
    nx.write_graphml(nx.cycle_graph(8), tmp_path / "t.graphml")
    p = str(_instance(tmp_path, "t.graphml"))
    assert main(["validate", p]) == 0
    out = tmp_path / "sol.json"
    assert main(["solve", p, "--out", str(out), "--quiet"]) == 0
    assert main(["evaluate", p]) == 0
    assert main(["evaluate", p, str(out)]) == 0
    assert main(["verify", p, str(out)]) == 0
    assert "fixed topology" in capsys.readouterr().out


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
 <graph edgedefault="undirected"><node id="&lol9;"/></graph>
</graphml>
"""


def _graphml(edges: str, nodes: int = 8, key: str = "int") -> str:
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n<graphml xmlns="http://graphml.graphdrawing.org/xmlns">'
        f'<key id="d0" for="edge" attr.name="count" attr.type="{key}"/>'
        '<graph edgedefault="undirected">'
        + "".join(f'<node id="{i}"/>' for i in range(nodes))
        + edges
        + "</graph></graphml>"
    )


RING = "".join(f'<edge source="{i}" target="{(i + 1) % 8}"/>' for i in range(8))

BAD = {
    "self-loop": ("t.graphml", _graphml(RING + '<edge source="3" target="3"/>'), "to itself"),
    "non-integer count": (
        "t.graphml",
        _graphml(RING.replace("/>", '><data key="d0">1.5</data></edge>', 1), key="double"),
        "expected an integer",
    ),
    "non-integer count in an edge list": ("t.txt", "0 1 1.5\n", "must be an integer"),
    "non-integer count in node-link JSON": (
        "t.json",
        json.dumps({"nodes": [{"id": 0}, {"id": 1}], "edges": [{"source": 0, "target": 1, "count": "2"}]}),
        "expected an integer",
    ),
    "unknown node": ("t.graphml", _graphml(RING).replace('<node id="0"/>', '<node id="n0"/>'), "'n0' is not a server"),
    "node out of range": ("t.txt", "0 1\n1 9\n", "node 9 is not a server"),
    "degree too high": ("t.graphml", _graphml(RING + '<edge source="0" target="4"/>'), "server 0 has 3 links"),
    "asymmetric undirected": (
        "t.json",
        json.dumps(
            {
                "directed": True,
                "nodes": [{"id": i} for i in range(8)],
                "edges": [{"source": i, "target": (i + 1) % 8} for i in range(8)],
            }
        ),
        "arcs must pair up",
    ),
    "missing file": ("nowhere.graphml", None, "cannot read file"),
    "malformed XML": ("t.graphml", _graphml(RING)[:-20], "malformed XML"),
    "DOCTYPE entity file": ("t.graphml", BILLION_LAUGHS, "may not declare a document type"),
    "unknown extension": ("t.gml", "graph [ ]", "unknown graph file extension"),
    "too many edges": ("t.txt", "0 1\n" * 17, "more than the 16"),
    "binary": ("t.graphml", "<\x00g\x00", "not UTF-8"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_graph_files_exit_2_with_one_line(tmp_path, capsys, case):
    name, content, expected = BAD[case]
    if content is not None:
        (tmp_path / name).write_text(content)
    p = str(_instance(tmp_path, name))
    for command in (["validate", p], ["solve", p, "--quiet"], ["evaluate", p]):
        assert main(command) == 2, (case, command)
        err = capsys.readouterr().err
        lines = err.strip().splitlines()
        assert len(lines) == 1, (case, err)
        assert lines[0].startswith(f"error: {p}") and "fixed_topology.file" in lines[0], (case, err)
        assert expected in lines[0] and len(lines[0]) < 400, (case, err)
    with pytest.raises(InstanceError, match="fixed_topology.file"):
        load_instance(p)


def test_billion_laughs_is_refused_before_parsing(tmp_path, monkeypatch):
    (tmp_path / "t.graphml").write_text(BILLION_LAUGHS)

    def never(*args, **kwargs):
        raise AssertionError("the XML parser was reached")

    monkeypatch.setattr(nx, "parse_graphml", never)
    start = time.perf_counter()
    with pytest.raises(InstanceError, match="document type"):
        load_instance(_instance(tmp_path, "t.graphml"))
    assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize("declaration", ["<!doctype x>", "<!ENTITY x 'y'>", "<! DOCTYPE x>"])
def test_any_spelling_of_a_declaration_is_refused(tmp_path, declaration):
    (tmp_path / "t.graphml").write_text(_graphml(RING).replace("<graphml", declaration + "<graphml", 1))
    with pytest.raises(InstanceError, match="document type"):
        load_instance(_instance(tmp_path, "t.graphml"))


def test_file_and_links_together_and_bad_names_are_refused(tmp_path):
    with pytest.raises(InstanceError, match="exactly one of 'links', 'jumps' and 'file'"):
        parse_instance(minimal(fixed_topology={"file": "t.graphml", "links": RING_LINKS}))
    with pytest.raises(InstanceError, match="fixed_topology.file: expected a file name"):
        parse_instance(minimal(fixed_topology={"file": 3}))
    with pytest.raises(InstanceError, match="needs 'jumps', not a graph file"):
        parse_instance(minimal(fixed_topology={"file": "t.graphml"}, topology_family="circulant"))


def test_read_graph_bounds_nodes_before_building(tmp_path):
    (tmp_path / "t.graphml").write_text(_graphml("", nodes=20))
    with pytest.raises(Exception, match="more than the 8"):
        read_graph(tmp_path / "t.graphml", max_nodes=8)


def test_read_graph_counts_prefixed_elements_too(tmp_path):
    text = (
        _graphml("", nodes=20).replace("<graphml xmlns=", "<g:graphml xmlns:g=").replace("</graphml>", "</g:graphml>")
    )
    for tag in ("key", "graph", "node"):
        text = text.replace(f"<{tag} ", f"<g:{tag} ").replace(f"</{tag}>", f"</g:{tag}>")
    (tmp_path / "t.graphml").write_text(text)
    assert read_graph(tmp_path / "t.graphml").number_of_nodes() == 20
    with pytest.raises(Exception, match="has 20 nodes, more than the 8"):
        read_graph(tmp_path / "t.graphml", max_nodes=8)


def test_a_file_name_with_a_newline_stays_on_one_line(tmp_path, capsys):
    p = str(_instance(tmp_path, "a\nb.graphml"))
    assert main(["validate", p]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "'a\\nb.graphml'" in lines[0]


def test_an_empty_fixed_topology_names_the_three_choices():
    with pytest.raises(InstanceError, match="exactly one of 'links', 'jumps' and 'file'"):
        parse_instance(minimal(fixed_topology={}))
