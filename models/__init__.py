"""The exact models (installed as ``topoopt_ilp.models``), one sub-package per problem family.

* :mod:`.topology` - topology and routing: :mod:`~.topology.solve` picks the exact search an
  instance needs (:mod:`~.topology.milp`, the general MILP of integer link counts and multi-commodity
  flow, with the starts of :mod:`~.topology.starts`; the catalogue of regular graphs,
  :mod:`~.topology.catalogue`; :mod:`~.topology.moore_circulant`); :mod:`~.topology.circulant` (the
  jump set of a circulant as binaries), :mod:`~.topology.mp_matching` (exact b-matching for
  model-parallel links), :mod:`~.topology.ocs` (SiP-ML-style OCS permutation planes).
* :mod:`.placement` - a workload's placement (configs per layer, servers per block) on a fixed
  topology: :mod:`~.placement.milp` (the model and :func:`~.placement.milp.solve_placement`), the
  scorer every search builds on (:mod:`~.placement.scoring`), local search, enumeration, the
  compute-level search (:mod:`~.placement.levels`), bounds and the exact block move.
* :mod:`.joint` - placement, topology and routing at once: the joint MILP (:mod:`~.joint.milp`) and
  the strategy-by-strategy enumeration (:mod:`~.joint.enumeration`), with symmetry and cycle cuts.
* :mod:`.reroute` (min-max routing by column generation), :mod:`.libra` (LIBRA's bandwidth
  allocation), :mod:`.schedule` (one iteration's schedule with CP-SAT), :mod:`.common` (the options
  and solve helpers every model shares), :mod:`.flow_decomposition`.

:func:`solve_exact` picks the model an instance needs and warm-starts it from the heuristic.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.solution import Solution
from topoopt_ilp.errors import InputError, UnsupportedError
from topoopt_ilp.evaluation.evaluate import RoutingError, evaluate, objective_value
from topoopt_ilp.evaluation.verify import verify
from topoopt_ilp.files import load_solution
from topoopt_ilp.heuristic.design import heuristic_for_placement
from topoopt_ilp.models.common import ExactOptions, check_start
from topoopt_ilp.models.joint.enumeration import solve_joint_enumeration
from topoopt_ilp.models.joint.milp import solve_joint
from topoopt_ilp.models.placement.milp import solve_placement
from topoopt_ilp.models.topology import edge_swap
from topoopt_ilp.models.topology.circulant import solve_circulant
from topoopt_ilp.models.topology.milp import MAX_SERVERS
from topoopt_ilp.models.topology.solve import solve_topology_routing

if TYPE_CHECKING:
    from topoopt_ilp.models.joint.milp import Incumbent

__all__ = ["JOINT_FORMULATIONS", "ExactOptions", "solve_exact"]

#: ``formulation`` of a workload's joint problem: ``auto`` (default: the enumeration when its bounds
#: leave few strategies, else the MILP), ``milp`` (models/joint/milp.py), ``enumeration``.
JOINT_FORMULATIONS = ("auto", "milp", "enumeration")


#: A method that solves an instance on its own, e.g. TopoOpt's heuristic (``topoopt_ilp.methods``
#: passes its ``METHODS["heuristic"]``): ``heuristic(instance) -> Solution``.
Heuristic = Callable[[Instance], Solution]


def _warm_start(instance: Instance, options: ExactOptions, heuristic: Heuristic | None = None) -> Solution | None:
    """The solution to start from: the heuristic's (``heuristic(instance)``; without one, TopoOpt's
    TopologyFinder, :func:`topoopt_ilp.heuristic.design.heuristic_for_placement`), a solution
    file's, or none."""
    choice = options.warm_start
    if choice in (None, "none"):
        return None
    if choice == "heuristic":
        if heuristic is not None:
            return heuristic(instance)

        return heuristic_for_placement(instance, None)
    if not os.path.exists(choice):
        raise InputError(f"--warm-start takes 'heuristic', 'none' or a solution file; {choice!r} is none of these")

    sol = load_solution(choice, directed=instance.cluster.directed)
    if sol.topology is None or sol.topology.n != instance.n:
        raise InputError(f"{choice}: no topology for {instance.n} servers to start from")
    check_start(instance, sol, choice)
    return sol


def _score(instance: Instance, sol: Solution) -> float | None:
    """The evaluator's objective of ``sol`` as a value to minimise (None when it cannot be scored,
    or when it breaks the instance's rules: such a start is never returned, however it scores)."""
    if not sol.has_solution or not verify(instance, sol, check_metrics=False).valid:
        return None
    try:
        value = objective_value(instance, evaluate(instance, sol))
    except (RoutingError, InputError):
        return None
    if not math.isfinite(value):
        return None
    return -value if instance.objective == "throughput" else value


#: The warm start replaces the model's design only when the evaluator scores it better by more than
#: this relative amount: the two scores of equally good designs differ in the last bits.
START_TOLERANCE = 1e-9


def _not_worse_than_start(
    instance: Instance, sol: Solution, start: Solution | None, time_limit_s: float | None
) -> Solution:
    """The exact solve's design, or its warm start when the evaluator scores the start strictly
    better or the model stopped at its time limit with no design at all - whatever the model's
    status. A start better than a model 'optimum' happens when the model does not optimise the
    whole objective (the naive formulation leaves the latency term to the evaluator: an equally wide
    design can use longer paths), when its optimum is over candidate rings only (groups above
    ``ALL_RINGS_UP_TO`` members: TotientPerms rings of the listed order), or within its gap (CBC
    rounds its values to 8 digits). The start keeps the model's bound when it does not beat it,
    except after an 'optimal' over restricted rings (that optimum was a claim about the candidate
    rings only, and the start just beat it); it is ``optimal`` when the model's design was and the
    bound stays (within the model's gap of it too), else ``feasible``. A time limit of 0 runs
    nothing: no_solution."""
    if start is None or time_limit_s == 0:
        return sol
    if not sol.has_solution and sol.status != "no_solution":
        return sol  # infeasible, error: the start cannot change that
    mine, theirs = _score(instance, sol), _score(instance, start)
    if theirs is None or (mine is not None and mine <= theirs + START_TOLERANCE * abs(theirs)):
        return sol  # not better by more than rounding (7.000000000000002e-05 vs 7e-05 is a tie)
    details = {**sol.details}
    if not sol.has_solution:
        note = "the warm start: the model found no design in its time"
    elif sol.status == "optimal":
        note = "the warm start: the evaluator scores it better than the model's 'optimal' design" + (
            " (the model's optimum is over its candidate rings only, see rings_restricted)"
            if sol.details.get("rings_restricted")
            else ""
        )
    else:
        note = "the warm start: the evaluator scores it better than the model's design"
    bound = sol.bound
    if bound is not None:
        # the bound as a value to minimise, like the scores (a comm-time bound is one already)
        own = -bound if instance.objective == "throughput" else bound
        beaten = own > theirs + START_TOLERANCE * abs(theirs)
        if beaten or (sol.status == "optimal" and sol.details.get("rings_restricted")):
            bound = None
            details["bound_dropped"] = (
                "the warm start beats the model's bound, which holds among its candidate rings only"
                if sol.details.get("rings_restricted")
                else "the warm start beats the model's bound"
                if beaten
                else "the model's optimum holds among its candidate rings only"
            )
    details.pop("status_note", None)  # it described the model's design, not the one returned
    # Better than a design the model proved within its gap of a bound that still holds: so is the start.
    status = (
        "optimal"
        if sol.status == "optimal" and bound is not None and not sol.details.get("rings_restricted")
        else "feasible"
    )
    return replace(
        start,
        status=status,
        method="exact",
        objective=None,
        gap=None,
        bound=bound,
        backend=sol.backend,
        wall_time_s=sol.wall_time_s,
        details={**details, "returned": note},
    )


def solve_exact(
    instance: Instance,
    options: ExactOptions | None = None,
    *,
    heuristic: Heuristic | None = None,
    incumbent: Incumbent | None = None,
    **kwargs,
) -> Solution:
    """Solve ``instance`` exactly with the model its topology family calls for.

    The method layer hands in the starts it owns (this layer never imports it: docs/architecture.md):

    heuristic : ``heuristic(instance) -> Solution``, optional
        The warm start of the general-topology model when ``options.warm_start`` is ``"heuristic"``
        (``topoopt_ilp.methods`` passes TopoOpt's heuristic method). Default: TopoOpt's TopologyFinder
        from the core heuristic modules (:func:`topoopt_ilp.heuristic.design.heuristic_for_placement`), the same links and
        routing.
    incumbent : ``incumbent(instance, options, budget_s) -> Solution | None``, optional
        The incumbent of a workload's joint problem when ``options.warm_start`` is ``"heuristic"``
        (``topoopt_ilp.methods`` passes the alternating decomposition,
        ``topoopt_ilp.methods.alternating.alternating_incumbent``). Default: TopoOpt's data-parallel start
        with its TopologyFinder topology (:func:`.joint.heuristic_incumbent`), the alternating
        decomposition's first step.
    """
    options = options or ExactOptions(**{k: v for k, v in kwargs.items() if v is not None})
    if options.rings is not None and (instance.workload is None or instance.fixed_topology is None):
        raise InputError(
            "the ring policy (rings) is the placement problem's: it applies to a workload with a "
            "fixed_topology (and to the alternating method); the topology and joint models choose their "
            "own rings"
        )
    if options.search_moves is not None and (instance.workload is None or instance.fixed_topology is None):
        raise InputError(
            "search moves budget the placement problem's local search: they apply to a workload with "
            "a fixed_topology (and to the alternating method); the other exact models have no local search"
        )
    if instance.workload is not None:
        if instance.fixed_topology is not None:  # only the placement is free: its model is the exact one
            return solve_placement(instance, options)
        formulation = options.formulation or "auto"
        if formulation not in JOINT_FORMULATIONS:
            raise InputError(
                f"unknown formulation {formulation!r} for a workload's joint problem; choose one of "
                f"{', '.join(JOINT_FORMULATIONS)}"
            )
        if formulation == "milp":
            return solve_joint(instance, options, incumbent=incumbent)

        return solve_joint_enumeration(instance, options, fallback_to_milp=formulation == "auto", incumbent=incumbent)
    if instance.fixed_topology is not None:
        raise UnsupportedError(
            "the instance fixes the topology; there is no topology to optimise exactly "
            "(score it with 'topoopt evaluate INSTANCE SOLUTION --routing optimal')"
        )
    if instance.topology_family == "any":
        started = time.perf_counter()
        start = _warm_start(instance, options, heuristic)
        x0 = None if start is None else start.topology.matrix
        if edge_swap.edge_swap_applies(instance) is None and instance.n > MAX_SERVERS:
            # Above the MILP's size limit the edge-swap search is the method (undirected links). It
            # scores bare topologies (default rings, shortest paths): a start with its own rings and
            # routes may score better.
            sol = edge_swap.solve_by_edge_swap(instance, _time_left(options, started), x0)
            if instance.objective in edge_swap.SCORE_OBJECTIVES:
                sol = _not_worse_than_start(instance, sol, start, options.time_limit_s)
        else:
            x0, swapped = edge_swap.swap_start(instance, options, x0)
            if swapped is None:
                sol = solve_topology_routing(instance, options, x0)
            else:  # the MILP gets what the search left of the limit
                sol = solve_topology_routing(instance, _time_left(options, started), x0)
                sol = replace(sol, details={**sol.details, "edge_swap_start": swapped})
            sol = _not_worse_than_start(instance, sol, start, options.time_limit_s)
    else:
        sol = solve_circulant(instance, options)
    if options.warm_start not in (None, "none"):
        sol = replace(sol, details={**sol.details, "warm_start": options.warm_start})
    return sol


def _time_left(options: ExactOptions, started: float) -> ExactOptions:
    """``options`` with the time limit less what has run since ``started``."""
    if options.time_limit_s is None:
        return options
    return replace(options, time_limit_s=max(0.0, options.time_limit_s - (time.perf_counter() - started)))


#: A ``feasible`` exact result whose objective is within this relative distance of its own valid
#: bound is proven optimal (e.g. the latency term met its one-hop floor).
PROVEN_GAP = 1e-9


def close_gap(instance: Instance, sol: Solution) -> Solution:
    """After the evaluator has set the objective, derive the gap from the model's bound (and call the
    result optimal when the bound meets it). Throughput is maximised: its bound is above."""
    if sol.objective is None or sol.bound is None or sol.gap is not None:
        return sol
    obj, bound = sol.objective, sol.bound
    excess = bound - obj if instance.objective == "throughput" else obj - bound
    gap = max(0.0, excess / abs(obj)) if obj and math.isfinite(obj) else None
    if sol.status == "feasible" and gap is not None and gap <= PROVEN_GAP:
        return replace(
            sol,
            gap=gap,
            status="optimal",
            details={**sol.details, "status_note": "the objective meets the model's bound"},
        )
    return replace(sol, gap=gap)
