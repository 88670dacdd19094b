"""``solve(instance, method=...)``: the one entry point from an instance to a verified Solution.

Each method is a plain function ``(instance, **options) -> Solution`` registered in
:data:`METHODS` (networkx's ``flow_func`` pattern: the algorithm is a parameter with a default).
Whatever the method, the returned solution carries the evaluator's metrics, and its objective is
the evaluator's value unless an exact model proved one (then the two are checked to agree).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Callable

import numpy as np

from .errors import InputError, UnsupportedError
from .evaluate import evaluate, objective_value
from .instance import Instance
from .routing import Routing
from .solution import Solution, Topology

__all__ = ["METHODS", "solve", "finalize", "DEFAULT_METHOD"]

DEFAULT_METHOD = "heuristic"


def finalize(instance: Instance, solution: Solution, routing: str = "given") -> Solution:
    """Attach the evaluator's metrics (and, for non-exact methods, its objective) to a solution."""
    if not solution.has_solution:
        return solution
    metrics = evaluate(instance, solution, routing=routing)
    objective = solution.objective if solution.objective is not None else objective_value(instance, metrics)
    return replace(solution, metrics=metrics.as_dict(), objective=objective)


def _fixed(instance: Instance, started: float) -> Solution:
    """An instance with a fixed topology: nothing to choose in the topology; score it as given."""
    ft = instance.fixed_topology
    topo = Topology(instance.fixed_topology_matrix(), ft.jumps)
    return Solution(status="feasible", method="given", topology=topo, wall_time_s=time.perf_counter() - started,
                    details={"note": "the instance fixes the topology; default rings, shortest-path routing"})


def _heuristic(instance: Instance, *, select: str = "geometric", mode: str = "paper", seed: int = 0) -> Solution:
    from .heuristic import solve_heuristic  # imported lazily: the CLI's start-up stays fast

    started = time.perf_counter()
    if instance.fixed_topology is not None:
        return _fixed(instance, started)
    return solve_heuristic(instance, select=select, mode=mode, seed=seed)


def _baseline(instance: Instance, *, baseline: str = "expander", seed: int = 0) -> Solution:
    from .heuristic import baseline_topology

    started = time.perf_counter()
    if instance.fixed_topology is not None:
        return _fixed(instance, started)
    if instance.topology_family != "any":
        raise InputError(f"baseline topologies are general graphs; this instance asks for topology_family {instance.topology_family}")
    x = baseline_topology(instance, baseline, seed=seed)
    return Solution(status="feasible", method="baseline", topology=Topology(x), wall_time_s=time.perf_counter() - started,
                    details={"baseline": baseline, "seed": seed, "routing": "shortest paths, equal split"})


def _exact(instance: Instance, **options: Any) -> Solution:
    try:
        from .models import solve_exact  # type: ignore[attr-defined]
    except ImportError:
        raise UnsupportedError(
            "no exact topology model is available in this version yet (tracked as the exact-topology issue); "
            "use --method heuristic"
        ) from None
    return solve_exact(instance, **options)


METHODS: dict[str, Callable[..., Solution]] = {
    "heuristic": _heuristic,
    "exact": _exact,
    "baseline": _baseline,
}


def solve(instance: Instance, method: str | Callable[..., Solution] = DEFAULT_METHOD, **options: Any) -> Solution:
    """Solve ``instance`` with ``method`` (a name from :data:`METHODS` or a callable) and return a
    Solution whose metrics come from the independent evaluator."""
    if callable(method):
        func = method
    else:
        if method not in METHODS:
            raise InputError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
        func = METHODS[method]
    started = time.perf_counter()
    sol = func(instance, **options)
    if not sol.wall_time_s:
        sol = replace(sol, wall_time_s=time.perf_counter() - started)
    routing = "given" if (len(sol.routing.paths) or len(sol.routing.offset_routes)) else "shortest_path"
    return finalize(instance, sol, routing=routing)
