"""``solve(instance, method=...)``: the one entry point from an instance to a verified Solution.

Each method is a plain function ``(instance, **options) -> Solution`` registered in
:data:`METHODS` (networkx's ``flow_func`` pattern: the algorithm is a parameter with a default).
Whatever the method, the returned solution carries the evaluator's metrics, and its objective is
the evaluator's value unless an exact model reports its own (the verifier checks that the two agree).
"""

from __future__ import annotations

import inspect
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import fields, replace
from typing import Any

import numpy as np

from topoopt_ilp import heuristic as h
from topoopt_ilp.core.instance import Instance, degree_one_refusal
from topoopt_ilp.core.solution import Solution, Topology
from topoopt_ilp.core.traffic import effective_demand, traffic_matrix
from topoopt_ilp.errors import InputError, StartInfeasibleError, UnsupportedError
from topoopt_ilp.evaluation.verify import reachability_violations
from topoopt_ilp.heuristic.design import (  # noqa: F401 - re-exported
    fitting_start_placement,
    heuristic_design,
    heuristic_for_placement,
    start_placement,
)
from topoopt_ilp.heuristic.finder import SELECT_RULES
from topoopt_ilp.heuristic.simple import parallel_link_count, remove_parallel_links
from topoopt_ilp.methods import alternating  # a module, so that a test can patch what the method runs
from topoopt_ilp.methods.steps import exact_topology_for_placement, finalize, placement_traffic  # noqa: F401 - re-exported
from topoopt_ilp.solvers import DEFAULT_REL_GAP

__all__ = ["METHODS", "solve", "finalize", "DEFAULT_METHOD"]

DEFAULT_METHOD = "heuristic"


def _fixed(instance: Instance, started: float) -> Solution:
    """An instance with a fixed topology: nothing to choose in the topology; score it as given. A
    demand it cannot carry (a pair with traffic and no path) makes the instance infeasible: no
    routing exists, so that is proven, and said, rather than scored as an infinite time."""
    ft = instance.fixed_topology
    topo = Topology(instance.fixed_topology_matrix(), ft.jumps)
    placement = start_placement(instance)
    unreachable = reachability_violations(instance, topo.matrix, placement)
    gap = unreachable[0] if unreachable else None
    if gap and instance.workload is None:
        return Solution(
            status="infeasible",
            method="given",
            topology=None,
            wall_time_s=time.perf_counter() - started,
            details={"infeasible": f"the fixed topology cannot carry the demand: {gap}"},
        )
    if gap:  # a workload: another placement might keep its traffic inside the components
        raise StartInfeasibleError(
            f"TopoOpt's start (every layer data-parallel) does not fit the fixed topology: {gap}; "
            "a placement inside its components may exist, which no method here searches "
            "(the exact placement model needs a connected topology)"
        )
    return Solution(
        status="feasible",
        method="given",
        topology=topo,
        placement=placement,
        wall_time_s=time.perf_counter() - started,
        details={"note": "the instance fixes the topology"},
    )


def _heuristic(instance: Instance, *, select: str = "geometric", mode: str = "paper", seed: int = 0) -> Solution:
    """TopoOpt's TopologyFinder on the instance's demand (or only SelectPermutations + CoinChangeMod
    when the instance asks for a circulant family, whose topology must be a pure jump set)."""
    if instance.fixed_topology is not None:
        return _fixed(instance, time.perf_counter())
    return heuristic_design(instance, select=select, mode=mode, seed=seed)


BASELINES = ("expander", "demand_greedy", "torus")


def _baseline(instance: Instance, *, baseline: str = "expander", seed: int = 0) -> Solution:
    """A reference topology routed over shortest paths: random expander, TopoOpt's demand greedy
    ("dheu") or a 2D/3D torus. Labelled as a baseline in the solution, never as an optimum."""
    started = time.perf_counter()
    if instance.fixed_topology is not None:
        return _fixed(instance, started)
    if instance.topology_family != "any":
        raise InputError(
            f"baseline topologies are general graphs; this instance asks for topology_family {instance.topology_family}"
        )
    if instance.cluster.directed:
        raise InputError("the baseline topologies are undirected; this instance has directed links")
    n, d = instance.n, instance.d
    try:
        if baseline == "expander":
            x = h.random_expander(n, d, seed=seed)
        elif baseline == "demand_greedy":
            x = h.demand_greedy(
                n,
                d,
                traffic_matrix(instance, demand=effective_demand(instance, start_placement(instance))[0]),
                seed=seed,
            )
        elif baseline == "torus":
            if d not in (4, 6):
                raise InputError(f"a torus has degree 4 (2D) or 6 (3D); this instance has degree {d}")
            x = h.torus(n, d, dims=d // 2)
        else:
            raise InputError(f"unknown baseline {baseline!r}; choose one of {', '.join(BASELINES)}")
        details: dict[str, Any] = {"baseline": baseline, "seed": seed, "routing": "shortest paths, equal split"}
        if not instance.cluster.multi_links:
            details.update(_simple_links(instance, x, seed))
    except ValueError as exc:
        raise InputError(f"baseline {baseline}: {exc}") from None
    return Solution(
        status="feasible",
        method="baseline",
        topology=Topology(x),
        placement=start_placement(instance),
        wall_time_s=time.perf_counter() - started,
        details=details,
    )


def _simple_links(instance: Instance, x: np.ndarray, seed: int) -> dict:
    """``cluster.multi_links: false``: rewire a baseline's parallel links in place (degree-preserving
    swaps, the links with the least direct traffic first, connectivity kept) and say how many moved."""
    before = parallel_link_count(x)
    if not before:
        return {"multi_links": {"rewired_swaps": 0, "links_rewired": 0}}
    weight = traffic_matrix(instance, demand=effective_demand(instance, start_placement(instance))[0])
    try:
        swaps = remove_parallel_links(x, weight=weight, seed=seed)
    except ValueError as exc:
        raise ValueError(f"cluster.multi_links is false: {exc}") from None
    return {
        "multi_links": {"rewired_swaps": swaps, "links_rewired": 2 * swaps},
        "note": f"multi_links false: {swaps} degree-preserving link swaps ({2 * swaps} links rewired) removed "
        f"{before} parallel links",
    }


def _exact(instance: Instance, **options: Any) -> Solution:
    """The exact models (:func:`topoopt_ilp.models.solve_exact`), handed the starts this layer owns:
    TopoOpt's heuristic method (the general-topology model's warm start) and the alternating
    decomposition (the joint models' incumbent)."""
    from topoopt_ilp.models import ExactOptions, solve_exact

    return solve_exact(
        instance,
        ExactOptions(**{k: v for k, v in options.items() if v is not None}),
        heuristic=METHODS["heuristic"],
        incumbent=alternating.alternating_incumbent,
    )


def _exact_options() -> dict[str, Any]:
    from topoopt_ilp.models import ExactOptions

    return {f.name: None for f in fields(ExactOptions)}  # None means "not given": ExactOptions' default


_exact.options = _exact_options  # type: ignore[attr-defined]


def _alternating(instance: Instance, **options: Any) -> Solution:
    return alternating.solve_alternating(instance, **options)


def _alternating_options() -> dict[str, Any]:
    return _signature_options(alternating.solve_alternating)


_alternating.options = _alternating_options  # type: ignore[attr-defined]


METHODS: dict[str, Callable[..., Solution]] = {
    "heuristic": _heuristic,
    "exact": _exact,
    "alternating": _alternating,
    "baseline": _baseline,
}

#: The ``solver`` section of an instance (:class:`~topoopt_ilp.core.instance.SolverDefaults`) gives these
#: options of the exact method their defaults; a keyword argument of :func:`solve` overrides them.
SOLVER_DEFAULTS = ("backend", "time_limit_s", "gap", "threads")


# ----------------------------------------------------------------------------------------------
# Checking solve()'s keyword arguments: in one place, whatever the method.
# ----------------------------------------------------------------------------------------------
def _signature_options(func: Callable[..., Any]) -> dict[str, Any] | None:
    """The keyword options of a method function (all its parameters but the instance) with their
    defaults; None when it takes ``**kwargs`` or has no readable signature (anything goes)."""
    try:
        params = list(inspect.signature(func).parameters.values())[1:]
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return {
        p.name: (None if p.default is inspect.Parameter.empty else p.default)
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }


def method_options(method: str | Callable[..., Solution]) -> dict[str, Any] | None:
    """The options ``solve(instance, method, **options)`` accepts, with their defaults (None when
    the method takes any keyword)."""
    func = METHODS[method] if isinstance(method, str) else method
    hook = getattr(func, "options", None)
    return hook() if callable(hook) else _signature_options(func)


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and math.isfinite(v)


def _choices(label: str, names) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        names_ = tuple(names() if callable(names) else names)
        if isinstance(v, str) and v in names_:
            return None
        return f"unknown {label} {v!r}; choose one of {', '.join(names_)}"

    return check


def _select_rules() -> tuple[str, ...]:
    return tuple(SELECT_RULES)


def _topology_methods() -> tuple[str, ...]:
    return alternating.TOPOLOGY_METHODS


def _check_select(v: Any) -> str | None:
    return None if callable(v) else _choices("select rule", _select_rules)(v)


def _nonneg_number(v: Any) -> str | None:
    return None if _is_number(v) and v >= 0 else f"must be a finite number >= 0, got {v!r}"


def _path(v: Any) -> str | None:
    return None if isinstance(v, (str, os.PathLike)) else f"expected a string or path, got {type(v).__name__}"


#: What each option of the built-in methods must be: a check returning a message, or None when fine.
_OPTION_CHECKS: dict[str, Callable[[Any], str | None]] = {
    "seed": lambda v: None if _is_int(v) and v >= 0 else f"must be an integer >= 0, got {v!r}",
    "time_limit_s": _nonneg_number,
    "round_time_limit_s": _nonneg_number,
    "gap": _nonneg_number,
    "tol": _nonneg_number,
    "threads": lambda v: None if _is_int(v) and 1 <= v <= 1024 else f"must be an integer in 1..1024, got {v!r}",
    "rounds": lambda v: None if _is_int(v) and v >= 0 else f"must be an integer >= 0, got {v!r}",
    "select": _check_select,
    "mode": _choices("mode", ("paper", "authors")),
    "baseline": _choices("baseline", BASELINES),
    "topology_method": _choices("topology method", _topology_methods),
    "backend": lambda v: None if isinstance(v, str) and v else f"expected a backend name, got {v!r}",
    "formulation": lambda v: None if isinstance(v, str) else f"expected a string, got {type(v).__name__}",
    "warm_start": _path,
    "export_model": _path,
    "log": lambda v: None if isinstance(v, bool) else f"expected True or False, got {v!r}",
    "native_options": lambda v: (
        None if isinstance(v, Mapping) else f"expected a mapping {{backend: {{name: value}}}}, got {type(v).__name__}"
    ),
    "progress": lambda v: None if callable(v) else f"expected a callable, got {type(v).__name__}",
}


def _check_options(name: str, func: Callable[..., Solution], options: dict[str, Any]) -> None:
    """Refuse, before anything runs, an option the method does not take or a value it cannot use."""
    accepted = method_options(func)
    if accepted is None:
        return  # a user's method taking **kwargs: its options are its own business
    for key in options:
        if key not in accepted:
            also = [m for m in METHODS if m != name and key in (method_options(m) or {})]
            hint = f" ({key} is an option of {' and '.join(also)})" if also else ""
            raise InputError(
                f"unknown option {key!r} for method {name}; it takes: {', '.join(accepted) or 'no options'}" + hint,
                source="solve",
            )
    if func not in METHODS.values():
        return  # a user's method checks its own values
    for key, value in options.items():
        if value is None and accepted[key] is None:
            continue  # None is the default (the exact method reads None as "not given")
        check = _OPTION_CHECKS.get(key)
        message = check(value) if check is not None else None
        if message:
            raise InputError(message, source="solve", field=key)


def _with_solver_defaults(
    instance: Instance, options: dict[str, Any], accepted: Mapping[str, Any] | None
) -> dict[str, Any]:
    """A method's options with the instance's ``solver`` section filling those not given (None
    counts as not given, as the CLI passes it: its flags win the same way); only the options the
    method ``accepted`` (exact: all four; alternating: backend and time_limit_s)."""
    merged = dict(options)
    accepted = SOLVER_DEFAULTS if accepted is None else accepted  # a method taking any keyword
    for key in SOLVER_DEFAULTS:
        default = getattr(instance.solver, key)
        if key in accepted and merged.get(key) is None and default is not None:
            merged[key] = default
        if key in merged and merged[key] is None:
            del merged[key]  # not given at all: the method's own default
    return merged


def solve(instance: Instance, method: str | Callable[..., Solution] = DEFAULT_METHOD, **options: Any) -> Solution:
    """Solve ``instance`` with ``method`` (a name from :data:`METHODS` or a callable) and return a
    Solution whose metrics come from the independent evaluator.

    ``options`` are the method's keyword options (see :func:`method_options`); an unknown option or
    a bad value raises :class:`~topoopt_ilp.errors.InputError` before anything runs. For the exact
    and alternating methods, the instance's ``solver`` section (backend, time_limit_s, gap, threads:
    those the method takes) gives the defaults of those options; keyword arguments override it."""
    if not isinstance(instance, Instance):
        hint = " (to solve a file, pass load_instance(path))" if isinstance(instance, (str, os.PathLike)) else ""
        raise InputError(f"expected an Instance, got {type(instance).__name__}{hint}", source="solve", field="instance")
    if callable(method):
        func, name = method, getattr(method, "__name__", "custom")
    else:
        if not isinstance(method, str) or method not in METHODS:
            raise InputError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
        func, name = METHODS[method], method
    if func is _exact or func is _alternating:
        options = _with_solver_defaults(instance, options, method_options(name))
    _check_options(name, func, options)
    if func in METHODS.values():
        problem = degree_one_refusal(instance)
        if problem:  # the models would fail obscurely (a non-finite coefficient, an unroutable pair)
            raise (UnsupportedError if instance.workload is not None else InputError)(problem, field="cluster.degree")
    started = time.perf_counter()
    sol = func(instance, **options)
    if not sol.wall_time_s:
        sol = replace(sol, wall_time_s=time.perf_counter() - started)
    sol = _job_iteration_bound(instance, sol)
    routing = "given" if (len(sol.routing.paths) or len(sol.routing.offset_routes)) else "shortest_path"
    sol = finalize(instance, sol, routing=routing)
    if sol.method == "exact":
        from topoopt_ilp.models import close_gap

        sol = close_gap(instance, sol)
        sol = _optimal_only_when_proven(sol)
    return sol


def _job_iteration_bound(instance: Instance, sol: Solution) -> Solution:
    """A job instance's iteration time is its fixed terms F (compute, bubble, scale-up) plus the
    network's communication time C (overlap ``none``), or ``max(F, C)`` (``full``): increasing in C,
    so a method's bound on C (the models bound the communication of the demand) gives the bound
    ``F + C`` or ``max(F, C)`` on the iteration time. The objective and gap are left to the evaluator
    and :func:`~topoopt_ilp.models.close_gap`, which derive them from the same terms."""
    job = instance.compiled_job
    if job is None or instance.objective != "iteration_time" or sol.bound is None:
        return sol
    fixed = job.fixed_time_s
    bound = max(fixed, sol.bound) if job.overlap == "full" else fixed + sol.bound
    return replace(sol, bound=bound, objective=None, gap=None)


def _optimal_only_when_proven(sol: Solution) -> Solution:
    """A solve that stopped at a requested gap (``gap`` above the default tolerance) found a design
    within that gap of the bound, not a proven optimum: it is ``feasible`` with its gap, as a solve
    stopped by a time limit is. "optimal" always means within the default relative gap."""
    if sol.status == "optimal" and sol.gap is not None and sol.gap > DEFAULT_REL_GAP * (1 + 1e-9):
        return replace(
            sol,
            status="feasible",
            details={**sol.details, "status_note": f"stopped at the requested gap: {sol.gap:.4g} from the bound"},
        )
    return sol
