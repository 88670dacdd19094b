"""Steps the methods share: score a solution with the evaluator, the traffic a placement induces,
and the exact topology for that traffic (one phase of the alternating method)."""

from __future__ import annotations

import time
from dataclasses import replace

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.solution import Solution
from topoopt_ilp.core.strategy import parse_strategy, strategy_to_demand
from topoopt_ilp.evaluation.evaluate import evaluate, objective_value
from topoopt_ilp.heuristic.design import heuristic_for_placement

__all__ = ["finalize", "placement_traffic", "exact_topology_for_placement"]


def finalize(instance: Instance, solution: Solution, routing: str = "given") -> Solution:
    """Attach the evaluator's metrics (and, for non-exact methods, its objective) to a solution."""
    if not solution.has_solution:
        return solution
    metrics = evaluate(instance, solution, routing=routing)
    objective = solution.objective if solution.objective is not None else objective_value(instance, metrics)
    return replace(solution, metrics=metrics.as_dict(), objective=objective)


def alternating_result(best: Solution, started: float, details: dict) -> Solution:
    """The alternating method's answer: its best design, ``feasible`` with no bound (it proves
    nothing), timed from ``started`` (``time.perf_counter()``), with ``details``."""
    return replace(
        best,
        method="alternating",
        status="feasible",
        bound=None,
        gap=None,
        wall_time_s=time.perf_counter() - started,
        details=details,
    )


def placement_traffic(instance: Instance, placement: dict | None) -> Instance | None:
    """The demand instance of the traffic a workload's ``placement`` induces (the instance's cluster
    and topology family, comm-time objective), for the topology models; None when it moves no bytes."""
    strategy = parse_strategy(placement, instance.workload, instance.n)
    demand = strategy_to_demand(instance.workload, instance.n, strategy)
    if not demand.allreduce and not demand.mp:
        return None
    return Instance(
        cluster=instance.cluster,
        demand=demand,
        objective="comm_time",
        topology_family=instance.topology_family,
        name=instance.name,
    )


def exact_topology_for_placement(
    instance: Instance, placement: dict | None, *, time_limit_s: float | None = None, backend: str = "highs"
) -> Solution:
    """The exact topology + routing MILP (``topology_routing``, comm-time objective: AllReduce split
    over TotientPerms rings, multi-commodity flow) for the traffic of a workload's ``placement``."""
    from topoopt_ilp.models import ExactOptions  # start-up time: the models load the solver packages
    from topoopt_ilp.models.topology.solve import solve_topology_routing

    started = time.perf_counter()
    traffic = placement_traffic(instance, placement)
    if traffic is None:  # no traffic: any topology will do
        return heuristic_for_placement(instance, placement)
    options = ExactOptions(backend=backend, time_limit_s=time_limit_s, warm_start="none")
    sol = solve_topology_routing(traffic, options, latency=False)  # its objective is discarded: the bandwidth optimum
    return replace(
        sol,
        placement=placement,
        objective=None,
        bound=None,
        gap=None,
        wall_time_s=time.perf_counter() - started,
        details={**sol.details, "topology_method": "exact"},
    )
