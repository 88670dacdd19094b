"""A design as a graph file networkx (and Gephi, igraph, yEd ...) reads (docs/guide/networkx.md).

Every writer has the signature ``(instance, solution, path, **options) -> None`` and writes
atomically (:func:`~topoopt_ilp.files.jsonio.write_atomic`): the graph of
:meth:`Topology.to_networkx <topoopt_ilp.core.solution.Topology.to_networkx>`, nodes ``0..n-1``, one
edge per connected server pair with ``count`` (parallel links) and ``bandwidth_gbps`` (their total
bandwidth), directed when the instance's links are.

- ``graphml``: GraphML (``nx.read_graphml(path, node_type=int)``), with the design's name, sizes,
  method and status as graph attributes;
- ``node-link``: networkx's node-link JSON (``nx.node_link_graph(json.load(f))``; edges under ``"edges"``);
- ``edgelist``: networkx's weighted edge list, ``source target count`` per line after ``#`` comments
  (``nx.read_edgelist(path, nodetype=int, data=[("count", int)])``); the text does not say whether
  links are directed, the header comment does.

Option ``edge_metrics``: per-arc n x n arrays added as edge attributes of their name, e.g.
:func:`topoopt_ilp.evaluation.link_metrics.link_metrics` (``load``, ``utilisation``); GraphML and
node-link JSON carry them, the edge list carries the link count only.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from typing import Any

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.lazy import nx
from topoopt_ilp.core.nxgraph import COUNT
from topoopt_ilp.core.solution import Solution
from topoopt_ilp.errors import InputError
from topoopt_ilp.files.jsonio import json_safe, write_atomic, write_json_atomic

__all__ = ["GRAPH_FORMATS", "design_graph", "write_graphml", "write_node_link", "write_edgelist"]


def design_graph(instance: Instance, solution: Solution, edge_metrics: Mapping[str, Any] | None = None) -> nx.Graph:
    """The solution's topology as the graph the writers write, with the design's description as
    graph attributes (scalars only, which every format carries)."""
    if not isinstance(solution, Solution) or solution.topology is None:
        raise InputError("the solution has no topology to export")
    n = instance.n
    if solution.topology.n != n:
        raise InputError(f"the solution's topology has {solution.topology.n} servers, the instance {n}")
    c = instance.cluster
    graph = solution.topology.to_networkx(
        directed=c.directed, bandwidth_gbps=c.link_bandwidth_gbps, metrics=edge_metrics
    )
    graph.graph.update(
        {
            "name": instance.name,
            "servers": n,
            "degree": c.degree,
            "link_bandwidth_gbps": float(c.link_bandwidth_gbps),
            "hop_latency_us": float(c.hop_latency_us),
            "links": c.links,
            "method": solution.method,
            "status": solution.status,
        }
    )
    if solution.objective is not None and math.isfinite(solution.objective):
        graph.graph["objective"] = float(solution.objective)
    return graph


def write_graphml(instance: Instance, solution: Solution, path: str | os.PathLike, **options: Any) -> None:
    """GraphML; options: ``edge_metrics``."""
    graph = design_graph(instance, solution, **options)

    def render(tmp: str) -> None:
        nx.write_graphml(graph, tmp)

    write_atomic(path, render)


def write_node_link(instance: Instance, solution: Solution, path: str | os.PathLike, **options: Any) -> None:
    """networkx node-link JSON (edges under ``"edges"``, networkx's default since 3.4); options: ``edge_metrics``."""
    graph = design_graph(instance, solution, **options)
    data = {
        "directed": graph.is_directed(),
        "multigraph": False,
        "graph": dict(graph.graph),
        "nodes": [{"id": node} for node in graph.nodes],
        "edges": [{"source": u, "target": v, **attrs} for u, v, attrs in graph.edges(data=True)],
    }
    write_json_atomic(path, json_safe(data))


def write_edgelist(instance: Instance, solution: Solution, path: str | os.PathLike, **options: Any) -> None:
    """networkx's weighted edge list: ``source target count`` per line; options: ``edge_metrics``
    (accepted for the uniform signature; the edge list carries the count only)."""
    graph = design_graph(instance, solution, **options)
    links = "directed" if graph.is_directed() else "undirected"
    name = " ".join(instance.name.split()) or "design"  # one comment line, whatever the name holds
    header = [
        f"# {name}: {instance.n} servers, {links} links of "
        f"{instance.cluster.link_bandwidth_gbps:g} Gbps ({solution.method}, {solution.status})",
        "# source target count",
    ]

    def render(tmp: str) -> None:
        with open(tmp, "w") as fh:
            fh.write("\n".join(header) + "\n")
            fh.writelines(f"{u} {v} {attrs[COUNT]}\n" for u, v, attrs in graph.edges(data=True))

    write_atomic(path, render)


#: Format name -> writer ``(instance, solution, path, **options) -> None``.
GRAPH_FORMATS: dict[str, Callable[..., None]] = {
    "graphml": write_graphml,
    "node-link": write_node_link,
    "edgelist": write_edgelist,
}
