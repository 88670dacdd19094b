"""Topologies as networkx graphs and back (docs/guide/networkx.md).

A topology becomes a :class:`networkx.Graph` (undirected links) or :class:`networkx.DiGraph`
(directed links) with **one edge per connected server pair**: its ``count`` is the number of
parallel links, and ``bandwidth_gbps`` their total bandwidth (``count`` x the per-link bandwidth)
when the per-link bandwidth is given. That is the form networkx's algorithms take as they are:
shortest paths and the diameter see one hop per pair, ``G.degree(weight="count")`` is the number of
interfaces a server uses, and ``nx.maximum_flow(G, s, t, capacity="bandwidth_gbps")`` is the
network's capacity between two servers.

Reading a graph back (:func:`graph_links`) accepts either form: a ``count`` per edge (default 1),
or parallel edges of a :class:`networkx.MultiGraph` (their counts add up). Nodes must be the server
numbers ``0..n-1``; self-loops, non-integer counts and unknown nodes are refused with one
:class:`~topoopt_ilp.errors.InputError` naming the edge or node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from topoopt_ilp.core.checks import as_int, as_number, brief
from topoopt_ilp.core.lazy import nx
from topoopt_ilp.errors import InputError

__all__ = ["COUNT", "BANDWIDTH", "MAX_LINKS_PER_PAIR", "topology_graph", "graph_links", "server_id"]

#: The edge attribute holding the number of parallel links of a server pair.
COUNT = "count"
#: The edge attribute holding the pair's total bandwidth in Gbps (``count`` x the per-link bandwidth).
BANDWIDTH = "bandwidth_gbps"
#: Largest link count one edge may state (an instance's degree never exceeds it either).
MAX_LINKS_PER_PAIR = 1024


def topology_graph(
    matrix: np.ndarray,
    *,
    directed: bool,
    bandwidth_gbps: float | None = None,
    metrics: Mapping[str, Any] | None = None,
) -> nx.Graph:
    """The link-count ``matrix`` as a graph with one edge per connected pair (see the module docstring).

    ``metrics``: optional per-arc values, name -> n x n array (e.g. ``{"load": ..., "utilisation": ...}``
    from :func:`topoopt_ilp.evaluation.link_metrics.link_metrics`), added as edge attributes of that
    name. An undirected edge carries the larger of its two directions (a full-duplex link is as busy as
    its busier direction)."""
    m = np.asarray(matrix)
    n = int(m.shape[0])
    if not isinstance(directed, bool):
        raise InputError(f"expected true or false, got {brief(directed)}", field="directed")
    if bandwidth_gbps is not None:
        bandwidth_gbps = as_number(bandwidth_gbps, "bandwidth_gbps", positive=True)
    if not directed and not np.array_equal(m, m.T):
        i, j = map(int, np.argwhere(m != m.T)[0])
        raise InputError(
            f"an undirected graph needs a symmetric matrix: {int(m[i, j])} links {i} -> {j} but {int(m[j, i])} back",
            field="directed",
        )
    extra: dict[str, np.ndarray] = {}
    for name, values in (metrics or {}).items():
        a = np.asarray(values, dtype=float)
        if a.shape != (n, n):
            raise InputError(f"expected an {n} x {n} array, got shape {a.shape}", field=f"metrics[{brief(name)}]")
        extra[str(name)] = a if directed else np.maximum(a, a.T)
    g: nx.Graph = nx.DiGraph() if directed else nx.Graph()
    g.add_nodes_from(range(n))
    rows, cols = np.nonzero(m if directed else np.triu(m, 1))
    for i, j in zip(rows.tolist(), cols.tolist()):
        count = int(m[i, j])
        attrs: dict[str, Any] = {COUNT: count}
        if bandwidth_gbps is not None:
            attrs[BANDWIDTH] = count * bandwidth_gbps
        for name, a in extra.items():
            attrs[name] = float(a[i, j])
        g.add_edge(i, j, **attrs)
    return g


def server_id(node: Any, n: int) -> int:
    """``node`` as a server number ``0..n-1``, or an :class:`InputError` naming it."""
    if isinstance(node, bool) or not isinstance(node, (int, np.integer)) or not 0 <= int(node) < n:
        raise InputError(f"node {brief(node)} is not a server: nodes must be the integers 0..{n - 1}", field="graph")
    return int(node)


def graph_links(graph: Any, n: int | None = None) -> tuple[int, dict[tuple[int, int], int]]:
    """``(n, {(i, j): count})`` of a networkx graph: arcs ``i -> j`` of a directed graph, pairs
    ``i < j`` of an undirected one. ``n``: the number of servers (default: the graph's number of
    nodes); every node must be one of ``0..n-1`` (a server without links may be left out when ``n``
    is given). Raises :class:`InputError` with field ``graph`` for a node that is not a server, a
    self-loop, or a count that is not an integer ``1..1024``."""
    if not isinstance(graph, nx.Graph):
        raise InputError(f"expected a networkx graph, got {type(graph).__name__}", field="graph")
    if n is None:
        n = graph.number_of_nodes()
    n = as_int(n, "n", low=1)
    for node in graph.nodes:
        server_id(node, n)
    directed = graph.is_directed()
    links: dict[tuple[int, int], int] = {}
    for u, v, data in graph.edges(data=True):
        i, j = int(u), int(v)
        where = f"edge ({i}, {j})"
        if i == j:
            raise InputError(f"{where}: a link from server {i} to itself", field="graph")
        count = as_int(data.get(COUNT, 1), f"{where}.{COUNT}", low=1, high=MAX_LINKS_PER_PAIR)
        key = (i, j) if directed or i < j else (j, i)
        links[key] = links.get(key, 0) + count
    return n, links
