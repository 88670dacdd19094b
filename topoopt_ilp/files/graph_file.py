"""Graph files read safely: a topology as GraphML, networkx node-link JSON or an edge list
(docs/guide/networkx.md), for an instance's ``"fixed_topology": {"file": ...}``.

The format follows the extension: ``.graphml`` (GraphML, XML), ``.json`` (networkx node-link JSON),
``.txt`` or ``.edgelist`` (networkx's edge list: ``source target [count]`` per line, ``#`` comments).
Every reader is as strict as the JSON ones: a file over :data:`~topoopt_ilp.files.jsonio.MAX_FILE_BYTES`
or not UTF-8 is refused before parsing, and so is a file with more nodes or edges than the limits the
caller gives (the cluster's servers, and servers x degree links). GraphML is XML, parsed by the standard
library's ElementTree (expat): a document type declaration is refused before parsing, so that no
entity is ever defined, let alone expanded (the "billion laughs" file), and no external entity named.
Node ids must be the server numbers ``0..n-1`` (as integers, or as their decimal strings in the text
formats). Errors are :class:`~topoopt_ilp.errors.InputError` naming the graph file.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from topoopt_ilp.core.checks import as_bool, brief, type_name
from topoopt_ilp.core.instance import Cluster
from topoopt_ilp.core.lazy import nx
from topoopt_ilp.core.nxgraph import COUNT, graph_links
from topoopt_ilp.errors import InputError
from topoopt_ilp.files.jsonio import MAX_FILE_BYTES, json_list, json_object, read_json

__all__ = ["GRAPH_EXTENSIONS", "graph_format", "read_graph", "fixed_links"]

#: File extension -> graph format.
GRAPH_EXTENSIONS = {".graphml": "graphml", ".json": "node-link", ".txt": "edgelist", ".edgelist": "edgelist"}

_NUMBER = re.compile(r"0|[1-9][0-9]{0,9}")
#: What may not appear in a GraphML file: a document type declaration (where entities are defined).
_DECLARATION = re.compile(r"<!\s*(DOCTYPE|ENTITY)", re.I)
#: GraphML's node and edge elements, with or without a namespace prefix (counted before parsing).
_ELEMENT = {kind: re.compile(rf"<(?:[\w.-]+:)?{kind}[\s/>]") for kind in ("node", "edge")}
#: How much of a parser's own message an error repeats.
_MESSAGE_CHARS = 160


def graph_format(path: str | os.PathLike) -> str:
    """The format of a graph file by its extension, or :class:`InputError`."""
    suffix = Path(path).suffix.lower()
    if suffix not in GRAPH_EXTENSIONS:
        known = ", ".join(f"{ext} ({fmt})" for ext, fmt in GRAPH_EXTENSIONS.items())
        raise InputError(f"unknown graph file extension {brief(suffix or '(none)')}; use {known}")
    return GRAPH_EXTENSIONS[suffix]


def _read_text(path: str | os.PathLike) -> str:
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}") from None
    if size > MAX_FILE_BYTES:
        raise InputError(f"file is {size / 2**20:.0f} MiB, larger than the {MAX_FILE_BYTES // 2**20} MiB limit")
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}") from None
    if b"\x00" in data:  # UTF-16 and UTF-32 text, or binary: neither is read
        raise InputError("file is not UTF-8 text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("file is not UTF-8 text") from None


def _server(node: Any, where: str | None = None) -> int:
    """A node id as the integer it names: an integer, or its decimal string (``"7"``)."""
    if isinstance(node, int) and not isinstance(node, bool):
        return node
    if isinstance(node, str) and _NUMBER.fullmatch(node):
        return int(node)
    raise InputError(
        f"{where + ': ' if where else ''}node {brief(node)} is not a server number (nodes are the integers 0..n-1)"
    )


def _limit(kind: str, found: int, most: int | None, why: str) -> None:
    if most is not None and found > most:
        raise InputError(f"has {found} {kind}, more than the {most} {why}")


def _numbered(graph: nx.Graph) -> nx.Graph:
    """``graph`` with its nodes as integers and only the ``count`` attribute on its edges."""
    out = graph.__class__()
    for node in graph.nodes:
        out.add_node(_server(node))
    for u, v, data in graph.edges(data=True):
        attrs = {COUNT: data[COUNT]} if COUNT in data else {}
        out.add_edge(_server(u), _server(v), **attrs)
    return out


def _graphml(text: str, max_nodes: int | None, max_edges: int | None) -> nx.Graph:
    if _DECLARATION.search(text):
        raise InputError("a GraphML file may not declare a document type or entities (<!DOCTYPE, <!ENTITY)")
    nodes, edges = (sum(1 for _ in _ELEMENT[kind].finditer(text)) for kind in ("node", "edge"))
    _limit("nodes", nodes, max_nodes, "servers of the cluster")
    _limit("edges", edges, max_edges, "links the cluster's servers and degree allow")
    try:
        graph = nx.parse_graphml(text)
    except ET.ParseError as exc:
        raise InputError(f"malformed XML: {str(exc)[:_MESSAGE_CHARS]}") from None
    except (nx.NetworkXError, ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        raise InputError(f"malformed GraphML: {brief(str(exc))[:_MESSAGE_CHARS]}") from None
    return _numbered(graph)


def _node_link(path: str | os.PathLike, max_nodes: int | None, max_edges: int | None) -> nx.Graph:
    data = read_json(path, InputError, MAX_FILE_BYTES)
    top = json_object(data, "", {"directed", "multigraph", "graph", "nodes", "edges", "links"}, {"nodes"}, InputError)
    if "edges" in top and "links" in top:
        raise InputError("give either 'edges' or 'links', not both")
    directed = as_bool(top.get("directed", False), "directed")
    multigraph = as_bool(top.get("multigraph", False), "multigraph")
    graph: nx.Graph = (
        (nx.MultiDiGraph if directed else nx.MultiGraph)() if multigraph else (nx.DiGraph if directed else nx.Graph)()
    )
    for k, node in enumerate(json_list(top["nodes"], "nodes", InputError, max_len=max_nodes)):
        if not isinstance(node, dict) or "id" not in node:
            raise InputError(f"expected an object with an 'id', got {type_name(node)}", field=f"nodes[{k}]")
        graph.add_node(_server(node["id"], f"nodes[{k}].id"))
    key = "edges" if "edges" in top else "links"
    for k, edge in enumerate(json_list(top.get(key, []), key, InputError, max_len=max_edges)):
        where = f"{key}[{k}]"
        if not isinstance(edge, dict) or "source" not in edge or "target" not in edge:
            raise InputError(f"expected an object with 'source' and 'target', got {type_name(edge)}", field=where)
        attrs = {COUNT: edge[COUNT]} if COUNT in edge else {}
        graph.add_edge(_server(edge["source"], f"{where}.source"), _server(edge["target"], f"{where}.target"), **attrs)
    return graph


def _edgelist(text: str, directed: bool, max_edges: int | None) -> nx.Graph:
    graph: nx.Graph = nx.MultiDiGraph() if directed else nx.MultiGraph()
    edges = 0
    for number, line in enumerate(text.splitlines(), start=1):
        tokens = line.split("#", 1)[0].split()
        if not tokens:
            continue
        where = f"line {number}"
        if len(tokens) not in (2, 3):
            raise InputError(f"{where}: expected 'source target [count]', got {len(tokens)} fields")
        edges += 1
        _limit("edges", edges, max_edges, "links the cluster's servers and degree allow")
        attrs: dict[str, Any] = {}
        if len(tokens) == 3:
            if not _NUMBER.fullmatch(tokens[2]):
                raise InputError(f"{where}: the link count must be an integer >= 1, got {brief(tokens[2])}")
            attrs[COUNT] = int(tokens[2])
        graph.add_edge(_server(tokens[0], where), _server(tokens[1], where), **attrs)
    return graph


def read_graph(
    path: str | os.PathLike,
    *,
    directed: bool = False,
    max_nodes: int | None = None,
    max_edges: int | None = None,
) -> nx.Graph:
    """The graph in ``path`` (format by extension, :func:`graph_format`), its nodes as integers.
    ``directed``: how to read an edge list, which does not say (GraphML and node-link JSON do).
    ``max_nodes``, ``max_edges``: refuse a larger graph before building it. Raises
    :class:`InputError` (without the file name: the caller adds it)."""
    fmt = graph_format(path)
    if fmt == "node-link":
        try:
            return _node_link(path, max_nodes, max_edges)
        except InputError as exc:  # read_json names the file itself: keep only the reason
            raise InputError(": ".join(p for p in (exc.field, exc.reason) if p)) from None
    text = _read_text(path)
    if fmt == "graphml":
        return _graphml(text, max_nodes, max_edges)
    return _edgelist(text, directed, max_edges)


def fixed_links(graph: nx.Graph, cluster: Cluster) -> tuple[tuple[int, int, int], ...]:
    """The links ``(i, j, count)`` of ``graph`` as an instance's ``fixed_topology.links`` on ``cluster``
    (undirected: each pair once, ``i < j``). A directed graph on undirected links must be symmetric
    (one link is an arc each way); an undirected graph on directed links gives an arc each way."""
    _, links = graph_links(graph, cluster.servers)
    if graph.is_directed() == cluster.directed:
        return tuple((i, j, c) for (i, j), c in sorted(links.items()))
    if cluster.directed:
        return tuple(sorted([(i, j, c) for (i, j), c in links.items()] + [(j, i, c) for (i, j), c in links.items()]))
    for (i, j), c in sorted(links.items()):
        back = links.get((j, i), 0)
        if back != c:
            raise InputError(
                f"the graph is directed and cluster.links undirected, so its arcs must pair up: "
                f"{c} link(s) {i} -> {j} but {back} back"
            )
    return tuple((i, j, c) for (i, j), c in sorted(links.items()) if i < j)
