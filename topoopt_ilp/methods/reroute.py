"""Re-route a design: the best routing of its own traffic on its own topology.

Every method fixes a routing rule of its own: the placement model and the fallback route every
pair over its shortest paths, split equally; TopoOpt's heuristic follows CoinChangeMod. For the
design's topology, placement and rings as they are, the routing that minimises the busiest link's
time is a linear program (:func:`~topoopt_ilp.models.reroute.min_max_routing`, by column generation:
it scales to the paper's 128 servers, where the evaluator's arc-flow ``--routing optimal`` does not).
:func:`route` returns the design with that routing as explicit paths when the evaluator scores it
better, else the design itself; either way with what was measured in ``details["reroute"]``.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

from topoopt_ilp.core.instance import Instance, with_job_choice
from topoopt_ilp.core.routes import PathSet, Routing
from topoopt_ilp.core.solution import Solution
from topoopt_ilp.core.traffic import default_rings, effective_demand, traffic_matrix
from topoopt_ilp.errors import InputError
from topoopt_ilp.evaluation.evaluate import evaluate, objective_value
from topoopt_ilp.evaluation.verify import verify

__all__ = ["route"]

#: Relative improvements below this are the routing LP's tolerances, not a better routing: an
#: optimal solution's own routing is kept.
_NOISE = 1e-6


def _better(instance: Instance, a: float, b: float) -> bool:
    """Is objective value ``a`` better than ``b`` by more than the LP's tolerances (throughput is maximised)?"""
    if instance.objective == "throughput":
        return a > b * (1 + _NOISE)
    return a < b * (1 - _NOISE)


def route(instance: Instance, solution: Solution, *, time_limit_s: float | None = None) -> Solution:
    """``solution`` with the routing of its traffic (MP bytes and ring transfers, rings kept: the
    solution's own, else the default ones) that minimises its busiest link's time on its topology,
    as explicit paths, when the evaluator scores that better; else ``solution`` unchanged but for
    ``details["reroute"]``. A better design is returned ``feasible`` with no bound: a bound the
    method proved may rest on its own routing rule (the placement model's holds for shortest paths
    only). Raises InputError for a solution that holds no
    design or fails verification."""
    from topoopt_ilp.models.reroute import min_max_routing

    instance = with_job_choice(instance, solution.job)  # the job's traffic under the split the solution chose
    if time_limit_s is not None and not (
        isinstance(time_limit_s, (int, float)) and math.isfinite(time_limit_s) and time_limit_s >= 0
    ):
        raise InputError(f"time limit must be a finite number >= 0 or None, got {time_limit_s!r}", field="time_limit_s")
    if not solution.has_solution:
        raise InputError(f"the solution holds no design (status {solution.status}): nothing to route")
    # the recorded objective and metrics too: a solution kept as it is must still verify afterwards
    # (one scored for another objective used to print its summary, then fail verification with exit 1)
    report = verify(instance, solution)
    if not report.valid:
        raise InputError(
            f"the solution does not fit the instance ({len(report.violations)} violation(s), first: "
            f"{report.violations[0]}; see topoopt verify)"
        )
    started = time.perf_counter()
    dm, _ = effective_demand(instance, solution.placement)
    rings = solution.routing.rings if len(solution.routing.rings) else default_rings(instance, dm)
    demand = traffic_matrix(instance, rings, dm)
    x = solution.topology.matrix
    result = min_max_routing(x, demand, instance.cluster.link_bytes_per_s, time_limit_s=time_limit_s)
    before = evaluate(instance, solution)
    routed = replace(
        solution,
        routing=Routing(rings=rings, paths=PathSet.from_lists(result.paths)),
        status="feasible",
        objective=None,
        bound=None,
        gap=None,
        metrics={},
    )
    after = evaluate(instance, routed)
    value_before, value_after = objective_value(instance, before), objective_value(instance, after)
    improved = _better(instance, value_after, value_before)
    record = {
        "algorithm": "min_max_routing (column generation, models/reroute.py)",
        "bandwidth_s_before": before.bandwidth_time_s,
        "bandwidth_s": after.bandwidth_time_s,
        "bandwidth_bound_s": result.bound_s,
        "proven": result.proven,
        "objective_before": value_before,
        "objective_rerouted": value_after,
        "applied": improved,
        "paths": len(result.paths),
        "rounds": result.rounds,
        "columns": result.columns,
        "wall_time_s": round(time.perf_counter() - started, 4),
    }
    if not improved:
        record["objective_ignores_routing"] = instance.objective in ("aspl", "diameter")
        record["note"] = (
            f"the objective ({instance.objective}) does not depend on the routing: kept"
            if record["objective_ignores_routing"]
            else "the solution's own routing is as good: kept"
            if result.proven
            else "the routing LP did not beat the solution's own routing within its time limit: kept"
        )
        return replace(solution, details={**solution.details, "reroute": record})
    record["replaced"] = {
        "status": solution.status,
        "objective": solution.objective,
        "bound": solution.bound,
        "gap": solution.gap,
    }
    details = {**solution.details, "reroute": record}
    if isinstance(details.get("routing"), str):  # the method's own words on its routing no longer hold
        details["routing"] = "re-routed: the routing LP's paths (topoopt route), rings kept"
    return replace(
        routed,
        metrics=after.as_dict(),
        objective=value_after,
        wall_time_s=solution.wall_time_s + record["wall_time_s"],
        details=details,
    )
