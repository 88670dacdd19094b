"""Math programs, one module per problem (installed as ``topoopt_ilp.models``).

* :mod:`.topology_routing` - general topology: integer link counts + multi-commodity flow.
* :mod:`.circulant` - the jump set of a circulant topology as binaries.
* :mod:`.mp_matching` - exact b-matching for model-parallel links.
* :mod:`.ocs_permutations` - SiP-ML-style OCS permutation planes.
* :mod:`.placement` - a workload's placement (configs per layer, servers per block) on a fixed topology
  (``formulation``: ``auto`` tries :mod:`.placement_enumeration` before the MILP).
* :mod:`.joint` - placement + topology + routing in one MILP (small clusters).
* :mod:`.joint_enumeration` - the same problem strategy by strategy: enumeration with bounds, each
  surviving strategy's topology by MILP (``formulation``: ``auto`` picks it or the joint MILP).

:func:`solve_exact` picks the model an instance needs and warm-starts it from the heuristic.
"""

from __future__ import annotations

import math
import os
from dataclasses import replace

from topoopt_ilp.errors import InputError, UnsupportedError
from topoopt_ilp.instance import Instance
from topoopt_ilp.solution import Solution

from .common import ExactOptions

__all__ = ["JOINT_FORMULATIONS", "ExactOptions", "solve_exact"]

#: ``formulation`` of a workload's joint problem: ``auto`` (default: the enumeration when its bounds
#: leave few strategies, else the MILP), ``milp`` (models/joint.py), ``enumeration``.
JOINT_FORMULATIONS = ("auto", "milp", "enumeration")


def _warm_start_topology(instance: Instance, options: ExactOptions):
    """The topology to start from: the heuristic's, a solution file's, or none."""
    choice = options.warm_start
    if choice in (None, "none"):
        return None
    if choice == "heuristic":
        from topoopt_ilp.solve import METHODS

        return METHODS["heuristic"](instance).topology  # only its links are needed: no evaluation
    if not os.path.exists(choice):
        raise InputError(f"--warm-start takes 'heuristic', 'none' or a solution file; {choice!r} is none of these")
    from topoopt_ilp.io import load_solution

    sol = load_solution(choice, directed=instance.cluster.directed)
    if sol.topology is None or sol.topology.n != instance.n:
        raise InputError(f"{choice}: no topology for {instance.n} servers to start from")
    return sol.topology


def solve_exact(instance: Instance, options: ExactOptions | None = None, **kwargs) -> Solution:
    """Solve ``instance`` exactly with the model its topology family calls for."""
    options = options or ExactOptions(**{k: v for k, v in kwargs.items() if v is not None})
    if instance.workload is not None:
        if instance.fixed_topology is not None:  # only the placement is free: its model is the exact one
            from .placement import solve_placement

            return solve_placement(instance, options)
        formulation = options.formulation or "auto"
        if formulation not in JOINT_FORMULATIONS:
            raise InputError(f"unknown formulation {formulation!r} for a workload's joint problem; choose one of "
                             f"{', '.join(JOINT_FORMULATIONS)}")
        if formulation == "milp":
            from .joint import solve_joint

            return solve_joint(instance, options)
        from .joint_enumeration import solve_joint_enumeration

        return solve_joint_enumeration(instance, options, fallback_to_milp=formulation == "auto")
    if instance.fixed_topology is not None:
        raise UnsupportedError("the instance fixes the topology; there is no topology to optimise exactly "
                               "(evaluate it with 'topoopt evaluate', or use --routing optimal)")
    if instance.topology_family == "any":
        from .topology_routing import solve_topology_routing

        start = _warm_start_topology(instance, options)
        sol = solve_topology_routing(instance, options, None if start is None else start.matrix)
    else:
        try:
            from .circulant import solve_circulant
        except ImportError:
            raise UnsupportedError("the exact circulant model is not available in this version") from None
        sol = solve_circulant(instance, options)
    if options.warm_start not in (None, "none"):
        sol = replace(sol, details={**sol.details, "warm_start": options.warm_start})
    return sol


def close_gap(instance: Instance, sol: Solution) -> Solution:
    """After the evaluator has set a minimisation objective, derive the gap from the model's bound."""
    if sol.objective is None or sol.bound is None or sol.gap is not None:
        return sol
    obj, bound = sol.objective, sol.bound
    gap = max(0.0, (obj - bound) / abs(obj)) if obj and math.isfinite(obj) else None
    return replace(sol, gap=gap)
