"""The evaluator's per-link numbers, for a design drawn or analysed as a graph (docs/guide/networkx.md).

:func:`link_metrics` gives, per arc ``i -> j``, the bytes one iteration sends across it (``load``,
summed over its parallel links, as :func:`~topoopt_ilp.evaluation.evaluate.arc_loads` scores the
solution with its own routing) and its ``utilisation``: the arc's busy time over the iteration's
communication time, the quantity whose maximum and mean are the evaluator's
``max_link_utilization`` and ``mean_link_utilization``. :func:`solution_graph` puts both on the
edges of :meth:`Topology.to_networkx <topoopt_ilp.core.solution.Topology.to_networkx>`.
"""

from __future__ import annotations

import math

import numpy as np

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.lazy import nx
from topoopt_ilp.core.solution import Solution
from topoopt_ilp.errors import InputError
from topoopt_ilp.evaluation.evaluate import RoutingError, arc_loads, evaluate

__all__ = ["link_metrics", "solution_graph"]


def link_metrics(instance: Instance, solution: Solution) -> dict[str, np.ndarray]:
    """``{"load": bytes per iteration, "utilisation": busy time / comm time}``, n x n arrays over
    arcs (0 where there is no link)."""
    if solution.topology is None:
        raise InputError("the solution has no topology")
    x = solution.topology.matrix
    if x.shape != (instance.n, instance.n):
        raise RoutingError(f"the topology has {x.shape[0]} servers, the instance {instance.n}")
    load = np.asarray(arc_loads(instance, solution), dtype=float)
    comm = evaluate(instance, solution).comm_time_s
    arcs = x > 0
    util = np.zeros_like(load)
    if comm > 0 and math.isfinite(comm):
        util[arcs] = load[arcs] / (instance.cluster.link_bytes_per_s * x[arcs]) / comm
    return {"load": load, "utilisation": util}


def solution_graph(instance: Instance, solution: Solution) -> nx.Graph:
    """The solution's topology as a networkx graph (:meth:`~topoopt_ilp.core.solution.Topology.to_networkx`:
    ``count``, ``bandwidth_gbps``) with the evaluator's ``load`` (bytes per iteration) and
    ``utilisation`` on every edge; an undirected edge carries its busier direction's values."""
    metrics = link_metrics(instance, solution)
    return solution.topology.to_networkx(
        directed=instance.cluster.directed,
        bandwidth_gbps=instance.cluster.link_bandwidth_gbps,
        metrics=metrics,
    )
