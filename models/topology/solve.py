"""Exact topology + routing, orchestrated: which exact search answers an instance, and in what order.

:func:`solve_topology_routing` is the entry point. With the strong formulation and uniform
all-to-all demand on undirected links it answers by the catalogue search (:mod:`.catalogue`) or the
Moore-circulant search (:mod:`.moore_circulant`) where those cover (n, d); otherwise it builds the
MILP of :mod:`.milp`, first tries to prove a cheap start optimal from the LP relaxation (the start
proof below), then solves the MILP and decodes it. With a hop latency, :func:`optimise_latency`
then settles the latency term with hop-limited copies of the model; ``diameter`` is a sequence of
feasibility models (:func:`solve_diameter`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np

from topoopt_ilp.core.graph import diameter as graph_diameter
from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.solution import Solution, Topology
from topoopt_ilp.errors import InputError, UnsupportedError
from topoopt_ilp.evaluation.evaluate import evaluate, objective_value
from topoopt_ilp.models.common import (
    ExactOptions,
    check_backend,
    exact_no_solution,
    export_model,
    run_model,
    solution_status,
    time_left,
)
from topoopt_ilp.models.topology import catalogue, moore_circulant, starts
from topoopt_ilp.models.topology.milp import (
    LP_TUNING_NONZEROS,
    MAX_SERVERS,
    RING_MATCHING_SHARE,
    STRONG_TUNING,
    TopologyRoutingModel,
    build_diameter_feasibility,
    build_topology_routing,
    moore_diameter_bound,
    to_solution,
    uniform_demand,
    with_links_fixed,
)
from topoopt_ilp.solvers import DEFAULT_REL_GAP, SolveResult, SolveStatus, relative_gap

__all__ = ["solve_topology_routing", "optimise_latency", "solve_diameter", "export_problem_model", "StartProof"]


def solve_topology_routing(
    instance: Instance,
    options: ExactOptions,
    warm_start_topology: np.ndarray | None = None,
    use_catalogue: bool = True,
    latency: bool = True,
) -> Solution:
    """Build, solve and decode; the returned objective is in the instance's terms.

    With the strong formulation and uniform all-to-all demand on undirected links, the exact method
    is the search over the shipped catalogue of regular graphs (:mod:`.catalogue`) when one
    covers (n, d) and no topology outside it can win; ``use_catalogue=False`` always runs the MILP.
    Objective comm_time / iteration_time with a hop latency: the bandwidth optimum is followed by
    :func:`optimise_latency` (``latency=False``: not, the latency term is then only bounded)."""
    started = time.perf_counter()
    sol = _solve_bandwidth(instance, options, warm_start_topology, use_catalogue)
    return optimise_latency(instance, options, sol, started) if latency else sol


def _solve_bandwidth(
    instance: Instance, options: ExactOptions, warm_start_topology: np.ndarray | None, use_catalogue: bool
) -> Solution:
    """:func:`solve_topology_routing` up to the bandwidth term (objectives throughput, aspl and
    diameter: the whole solve)."""
    if instance.topology_family != "any":
        raise InputError(
            f"topology_routing optimises general topologies; this instance asks for {instance.topology_family}"
        )
    if instance.fixed_topology is not None:
        raise UnsupportedError("the instance fixes the topology: there is nothing for topology_routing to choose")
    if instance.n > MAX_SERVERS:
        raise UnsupportedError(
            f"{instance.n} servers is too large for the exact general-topology model (at most {MAX_SERVERS}); "
            "use --method heuristic or topology_family circulant"
        )
    check_backend(options)
    started = time.perf_counter()
    formulation = options.formulation or "strong"
    if formulation == "strong" and use_catalogue:
        sol = _solve_by_catalogue(instance, options, warm_start_topology, started)
        if sol is None:
            sol = _solve_by_moore_circulant(instance, options, started)
        if isinstance(sol, Solution):
            return sol
        if sol is not None:  # the catalogue ran but cannot prove: the MILP gets the time left
            note = sol
            milp = _solve_bandwidth(
                instance,
                replace(options, time_limit_s=time_left(options, started)),
                warm_start_topology,
                use_catalogue=False,
            )
            return replace(milp, details={**milp.details, "catalogue_not_applied": note})
    if instance.objective == "diameter":
        return solve_diameter(instance, options, warm_start_topology)
    m = build_topology_routing(instance, formulation)
    start, proof = None, None
    if formulation == "strong":
        proof = _start_proof(instance, m, warm_start_topology, options, started)
        if proof is not None and proof.proved:
            if options.export_model:  # the model is the problem's, though its MILP never ran
                export_model(m.model, options)
            sol = to_solution(instance, proof.fixed, proof.result, time.perf_counter() - started)
            return replace(
                sol,
                details={
                    **sol.details,
                    "algorithm": "start_proof",
                    "start_proved": (
                        f"{proof.source}'s links, routed at best (an LP), meet the LP relaxation's bound: no MILP ran"
                    ),
                },
            )
        options = replace(options, time_limit_s=time_left(options, started))  # what the LPs left of the limit
    elif warm_start_topology is not None:  # the naive formulation: HiGHS gets the start, as it always has
        start = np.full(m.model.num_vars, np.nan)
        X = warm_start_topology
        start[m.x_cols] = X[m.edges[:, 0], m.edges[:, 1]]
    result = run_model(m.model, options, start, tuning=STRONG_TUNING if formulation == "strong" else None)
    if proof is not None and _start_beats(proof, result, m.objective):
        # The MILP stopped at its limit below the best start it was not given (see _start_proof):
        # that start, with its best routing, is the design, under the better of the two bounds.
        bounds = [b for b in (proof.bound, result.bound) if b is not None]
        bound = (max if m.objective == "aspl" else min)(bounds)
        kept = replace(
            proof.result, status=SolveStatus.FEASIBLE, bound=bound, gap=relative_gap(proof.result.objective, bound)
        )
        sol = to_solution(instance, proof.fixed, kept, time.perf_counter() - started)
        milp = "no design" if result.objective is None else f"a design of model objective {result.objective:.6g}"
        return replace(
            sol,
            details={
                **sol.details,
                "milp_status": result.status.value,
                "returned": (
                    f"{proof.source} (model objective {proof.result.objective:.6g}, routed at best by an LP): the MILP ended "
                    f"its time with {milp}"
                ),
            },
        )
    return to_solution(instance, m, result, time.perf_counter() - started)


def _start_beats(proof: StartProof, result: SolveResult, objective: str) -> bool:
    """True when the MILP's ``result`` is not proven and the start proof's best start is better
    than its design (or it has none)."""
    if result.status not in (SolveStatus.FEASIBLE, SolveStatus.NO_SOLUTION):
        return False
    if result.objective is None or result.values is None:
        return True
    return _better(proof.result.objective, result.objective, objective, rtol=1e-9)


def _better(value: float, than: float, objective: str, rtol: float = 0.0) -> bool:
    """True when model objective ``value`` beats ``than`` by more than ``rtol`` of it: lambda is
    maximised, aspl's hop total minimised."""
    return value < than * (1 - rtol) if objective == "aspl" else value > than * (1 + rtol)


# ------------------------------------------------------------------------------------------------
# A start that proves itself, or none (strong formulation)
#
# LPs: the model's relaxation (every column continuous: an upper bound R on lambda), then per start
# the model with the start's links fixed (the start's own best routing: lambda S). The starts are
# the warm start (when given), a rounding of the relaxation and the ring-and-matching starts (both
# in :mod:`.relaxation_rounding`; the latter only until RING_MATCHING_SHARE of the limit). When
# S >= R (1 - gap) (for aspl, whose hop total is minimised and R a lower bound: S <= R (1 + gap)),
# the start is optimal and no MILP runs: the LP solution is decoded as the model's would be, status
# optimal with bound R. Else the MILP runs *without* the starts; when it stops at its limit with no
# design or one below the best start (``_start_beats``), that start with its LP routing is returned,
# feasible, under the better of R and the MILP's bound. Small models' LPs run without presolve (the
# model's HiGHS tuning, up to LP_TUNING_NONZEROS), which is faster there and far slower on large ones.
# The starts are not handed to HiGHS: given a start that is not optimal, its root search leaves the
# rounding that finds these optima at once, and it took 2-4x longer on the benchmark mixes
# (docs/notes/exact-topology-starts.md). The method layer still returns the start when the evaluator
# scores it better than what the MILP found.
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StartProof:
    """A start the start proof scored: the model with its links fixed (an LP), that LP's result
    (when ``proved``: as an optimal solve with the relaxation's bound), which start it was, and the
    relaxation's bound (model units)."""

    fixed: TopologyRoutingModel
    result: SolveResult
    source: str
    bound: float
    proved: bool


def _start_proof(
    instance: Instance,
    m: TopologyRoutingModel,
    x: np.ndarray | None,
    options: ExactOptions,
    started: float,
    rounding: bool = True,
) -> StartProof | None:
    """The start that proves itself optimal within the gap (the warm start ``x`` or, with
    ``rounding``, one of the relaxation's roundings), else the best one scored (``proved`` False);
    None when none was scored (no start, the relaxation not solved, or the time limit ran out first)."""

    if time_left(options, started) == 0 or (x is None and not rounding):  # out of time, or no start to prove
        return None
    tuning = STRONG_TUNING if m.model.num_nonzeros <= LP_TUNING_NONZEROS else None
    relaxed = replace(m.model, col_kind=np.zeros_like(m.model.col_kind), name="relaxation")
    relaxation = catalogue.solve_lp(relaxed, options, time_left(options, started), tuning=tuning)
    if relaxation.status != SolveStatus.OPTIMAL or time_left(options, started) == 0:
        return None
    bound = float(relaxation.objective)
    tolerance = options.gap if options.gap is not None else DEFAULT_REL_GAP
    candidates = [] if x is None else [("the warm start", np.asarray(x))]
    if rounding:
        c = instance.cluster
        candidates.append(
            (
                "a rounding of the LP relaxation",
                starts.relaxation_rounding(m, relaxation.values, c.degree, c.multi_links),
            )
        )
        candidates += [
            (f"ring-and-matching start {i + 1}", X)
            for i, X in enumerate(starts.ring_matching_starts(m, relaxation.values, c.degree, c.multi_links))
        ]
    relabel = m.objective == "aspl" or uniform_demand(
        instance, m.mp
    )  # the symmetry rows ask for a labelling; any is as good
    tried, best = set(), None
    for source, start in candidates:
        key = np.asarray(start, dtype=np.int64).tobytes()
        if key in tried:  # a ring-and-matching start may repeat the rounding or the warm start
            continue
        tried.add(key)
        if (
            source.startswith("ring-and-matching")
            and options.time_limit_s is not None
            and time_left(options, started) < (1 - RING_MATCHING_SHARE) * options.time_limit_s
        ):
            return best  # the MILP keeps the rest of the limit
        fixed = with_links_fixed(m, catalogue.symmetric_labelling(start) if relabel else start)
        own = catalogue.solve_lp(fixed.model, options, time_left(options, started), tuning=tuning)
        if own.status != SolveStatus.OPTIMAL:  # e.g. a start that breaks a symmetry or degree row, or out of time
            if time_left(options, started) == 0:
                return best
            continue
        # lambda is maximised (the relaxation bounds it from above); aspl's hop total is minimised
        if (
            own.objective >= bound * (1 - tolerance)
            if m.objective != "aspl"
            else own.objective <= bound * (1 + tolerance)
        ):
            proved = replace(own, status=SolveStatus.OPTIMAL, bound=bound, gap=relative_gap(own.objective, bound))
            return StartProof(fixed, proved, source, bound, True)
        if best is None or _better(own.objective, best.result.objective, m.objective):
            best = StartProof(fixed, own, source, bound, False)
        if time_left(options, started) == 0:
            return best
    return best


def _solve_by_catalogue(
    instance: Instance, options: ExactOptions, warm_start_topology: np.ndarray | None, started: float
) -> Solution | str | None:
    """The catalogue search as a Solution; None when it does not apply to the instance, and the
    reason when it ran but a topology outside the catalogue might beat its best (the caller then
    runs the MILP)."""

    mp = instance.demand.mp_matrix(instance.n)
    if catalogue.catalogue_applies(instance, mp) is not None:
        return None
    if instance.objective in ("aspl", "diameter"):
        return _solve_hops_by_catalogue(instance, options, started)
    if options.export_model:  # the MILP is the model of the problem (the search solves LPs derived from it)
        export_model(build_topology_routing(instance, "strong").model, options)
    search, m = catalogue.search_catalogue(instance, options, warm_start_topology)
    if not search.applies:
        outside = ", ".join(f"{u.name} <= {u.bound:.6g}" for u in search.uncovered if u.bound > search.lam)
        return f"best catalogue lambda {search.lam:.6g} (model units) does not exclude {outside}"
    details = {
        "algorithm": "catalogue",
        "catalogue_candidates": search.candidates,
        "catalogue_lps": search.lps_solved,
        "catalogue_lambda": search.lam if math.isfinite(search.lam) else None,
        "catalogue_seeded": search.seeded,
        "catalogue_units": "lambda per unit of pair demand: throughput = lambda x link bytes/s / bytes per pair",
        "catalogue_outside_bounds": {u.name: u.bound for u in search.uncovered},
        "catalogue_search_s": round(search.wall_time_s, 4),
    }
    wall = time.perf_counter() - started
    if search.result is None:
        return exact_no_solution(
            options.backend,
            wall,
            {"model": "topology_routing", "formulation": "strong", "model_status": "no_solution", **details},
        )
    if search.proven:  # the best LP value is the optimum: the bound equals it
        result = replace(search.result, status=SolveStatus.OPTIMAL, objective=search.lam, bound=search.lam, gap=0.0)
    else:  # a time limit hit mid-search: the best so far, and what the unsolved classes could still reach
        gap = (search.bound - search.lam) / search.lam if search.lam > 0 else math.inf
        result = replace(search.result, status=SolveStatus.FEASIBLE, objective=search.lam, bound=search.bound, gap=gap)
    sol = to_solution(instance, m, result, wall)
    return replace(sol, details={**sol.details, **details})


def _solve_by_moore_circulant(instance: Instance, options: ExactOptions, started: float) -> Solution | str | None:
    """Directed links: a circulant digraph proven optimal by the Moore bound (:mod:`.moore_circulant`)
    as a Solution; None when the search does not apply, and the reason when it ran but proved nothing
    (the caller then runs the MILP). A time limit of 0 gives no_solution, as for every exact method."""

    if moore_circulant.moore_applies(instance, instance.demand.mp_matrix(instance.n)) is not None:
        return None
    details = {"model": "topology_routing", "algorithm": "moore_circulant"}
    if options.time_limit_s == 0:
        return exact_no_solution(options.backend, 0.0, {**details, "model_status": "no_solution"})
    export_problem_model(instance, options)  # when asked: the MILP (diameter: its first feasibility model)
    search = moore_circulant.search_moore_circulant(instance, options)
    if search.topology is None:
        return f"Moore circulant search: {search.reason}"
    details.update(
        moore_jumps=list(search.jumps),
        moore_candidates=search.candidates,
        moore_meeting_floor=search.meeting_floor,
        moore_lps=search.lps_solved,
        moore_search_s=round(search.wall_time_s, 4),
    )
    if instance.objective in ("aspl", "diameter"):
        value = search.value / (instance.n * (instance.n - 1)) if instance.objective == "aspl" else search.value
        return Solution(
            status="optimal",
            method="exact",
            topology=Topology(search.topology),
            objective=value,
            bound=value,
            gap=0.0,
            backend=options.backend,
            wall_time_s=time.perf_counter() - started,
            details={**details, "model_status": "optimal", "solver_calls": 0},
        )

    m, result = catalogue.routing_with_links_fixed(
        build_topology_routing(instance, "strong"), search.topology, search.value, options
    )
    result = replace(result, status=SolveStatus.OPTIMAL, objective=result.objective, bound=result.objective, gap=0.0)
    sol = to_solution(instance, m, result, time.perf_counter() - started)
    details["moore_lambda"] = search.value
    return replace(sol, details={**sol.details, **details})


def _solve_hops_by_catalogue(instance: Instance, options: ExactOptions, started: float) -> Solution | str:
    """Objective aspl or diameter from the catalogue: the best class by its hop statistics (no solver
    call), proven when no topology outside the catalogue can beat it; else the reason (the caller
    runs the MILP). A time limit of 0 gives no_solution, as for every exact method."""

    if options.time_limit_s == 0:
        return exact_no_solution(
            options.backend, 0.0, {"model": "topology_routing", "algorithm": "catalogue", "model_status": "no_solution"}
        )
    export_problem_model(instance, options)  # when asked: the MILP (diameter: its first feasibility model)
    X, value, proven, outside = catalogue.search_hop_objective(instance)
    if not proven:
        return f"best catalogue {instance.objective} {value:.6g} does not exclude topologies outside it (those reach >= {outside:.6g})"
    details = {
        "model": "topology_routing",
        "algorithm": "catalogue",
        "model_status": "optimal",
        "catalogue_candidates": len(catalogue.regular_graphs(instance.n, instance.cluster.degree)),
        "catalogue_outside_floor": outside,
        "solver_calls": 0,
    }
    return Solution(
        status="optimal",
        method="exact",
        topology=Topology(X),
        objective=value,
        bound=value,
        gap=0.0,
        backend=options.backend,
        wall_time_s=time.perf_counter() - started,
        details=details,
    )


def export_problem_model(instance: Instance, options: ExactOptions) -> None:
    """Write the model of the problem to ``options.export_model`` when a search answers instead of
    it: the strong MILP, or for objective ``diameter`` the first feasibility model of
    :func:`solve_diameter`, 'diameter <= the Moore bound' (:func:`build_diameter_feasibility`)."""
    if not options.export_model:
        return
    if instance.objective == "diameter":
        c = instance.cluster
        export_model(
            build_diameter_feasibility(instance, moore_diameter_bound(c.servers, c.degree, c.directed))[0], options
        )
    else:
        export_model(build_topology_routing(instance, "strong").model, options)


# ------------------------------------------------------------------------------------------------
# The latency term: hop-limited models
#
# comm_time = 1/lambda + alpha H, H the hops of the longest used path. Let lambda_H be the best lambda
# of any design whose every path has at most H hops (the model with hop limit H). A design with
# longest path H' scores at least 1/lambda_H' + alpha H', and the design attaining lambda_H at most
# 1/lambda_H + alpha H, so OPT = min_H (1/lambda_H + alpha H). Given the bandwidth optimum (lambda_ub
# its bound; U the evaluator's comm time of the best design so far, first the bandwidth optimum's):
#   * 1/lambda_ub + alpha H >= U (1 - tol): no design with longest path >= H beats U by more than the
#     relative gap tol asked of every solve (lambda_H <= lambda_ub), so H = 1, 2, ... stops there (at
#     the latest past n - 1: no simple path is longer);
#   * otherwise the hop-limited model with lambda >= 1/(U (1 - tol) - alpha H) (only designs that beat
#     U by more than tol) is solved: infeasible gives the term
#     U (1 - tol); a design may improve U (and H_U); the model's bound b gives the term 1/b + alpha H
#     (designs below the threshold score at least U (1 - tol)).
# The bound is the least term (an H left unsolved by the time limit: 1/lambda_ub + alpha H for it and
# every larger H), capped at the final U. First, one model settles every H at once: with top the
# largest H still open, the model with hop limit top and the lowest threshold, 1/(U (1 - tol) - alpha)
# (counted at one hop): infeasible means lambda_H <= lambda_top < that threshold <= H's own for every
# H <= top. Only when it finds a design are the limits H = 1, 2, ... solved one by one.
# ------------------------------------------------------------------------------------------------
def optimise_latency(instance: Instance, options: ExactOptions, sol: Solution, started: float) -> Solution:
    """``sol`` (the bandwidth optimum for objective comm_time / iteration_time) with the latency term
    settled by the hop-limited models of the comment above; ``sol`` itself when there is no latency
    term, no design, or no bound on lambda (the naive formulation keeps its bandwidth-only answer)."""
    alpha = instance.cluster.hop_latency_s
    lam_ub = sol.details.get("milp_throughput_bound")  # instance units: iterations per second
    if (
        instance.objective not in ("comm_time", "iteration_time")
        or alpha <= 0
        or sol.topology is None
        or not lam_ub
        or (options.formulation or "strong") != "strong"
    ):
        return sol

    def score(candidate: Solution) -> tuple[float, int]:
        metrics = evaluate(instance, candidate, routing="given")
        return float(objective_value(instance, metrics)), int(metrics.max_hops)

    best = sol
    U, H_best = score(sol)
    if not math.isfinite(U):  # a design the evaluator cannot score: nothing to settle
        return sol
    U_bandwidth_optimum = U
    tolerance = options.gap if options.gap is not None else DEFAULT_REL_GAP
    models: list[dict] = []
    terms = [U]

    def limited(H: int, at_hops: int):
        """Solve the model with hop limit H and lambda >= 1/(U (1 - tol) - alpha at_hops); a design it
        finds may improve U. Returns ((status, its bound as a bandwidth time) or None when no time
        was left, whether a limit stopped it)."""
        nonlocal best, U, H_best
        left = time_left(options, started)
        if left == 0:
            return None, True
        m = build_topology_routing(instance, "strong", max_hops=H)
        unit = instance.cluster.link_bytes_per_s / m.scale
        lower = m.model.col_lower.copy()
        lower[m.lam_col] = 1.0 / (U * (1 - tolerance) - alpha * at_hops) / unit  # beat U by more than the tolerance
        m = replace(m, model=replace(m.model, col_lower=lower, name=f"topology_routing_hops_le_{H}"))
        result = run_model(m.model, replace(options, time_limit_s=left, export_model=None), tuning=STRONG_TUNING)
        status = solution_status(result)
        models.append(
            {"max_hops": H, "threshold_hops": at_hops, "status": status, "time_s": round(result.wall_time_s, 3)}
        )
        if result.values is not None and status in ("optimal", "feasible"):
            candidate = to_solution(instance, m, result, time.perf_counter() - started)
            if candidate.topology is not None:
                value, hops = score(candidate)
                models[-1]["comm_time_s"] = value
                if value < U:
                    best, U, H_best = candidate, value, hops
        bound = None if result.bound is None or result.bound <= 0 else 1.0 / (result.bound * unit)
        return (status, bound), status not in ("optimal", "infeasible")

    def open_hops() -> int:
        """The most hops a design may have and still beat U by more than the tolerance."""
        return max([h for h in range(1, instance.n) if 1.0 / lam_ub + alpha * h < U * (1 - tolerance)], default=0)

    H = 1
    top = open_hops()
    if top >= 2:
        # One model for every H <= top at once: lambda_H <= lambda_top, and the threshold counted at
        # one hop is the lowest, so 'no design of at most top hops reaches it' rules them all out.
        outcome, stopped = limited(top, 1)
        if outcome is not None and outcome[0] == "infeasible":
            terms.append(U * (1 - tolerance))
            H = top + 1
        elif stopped:
            H = instance.n  # nothing settled: the floor at one hop below is the bound
            terms.append(1.0 / lam_ub + alpha)
    while H <= open_hops():
        outcome, stopped = limited(H, H)
        if outcome is None:
            break
        status, time_bound = outcome
        if status == "infeasible":  # no design of at most H hops scores below U (1 - tolerance)
            terms.append(U * (1 - tolerance))
        elif time_bound is not None:
            terms.append(time_bound + alpha * H)
        if stopped:  # a limit stopped it: H (and every larger H) is not settled
            break
        H += 1
    terms.append(1.0 / lam_ub + alpha * H)  # every H not settled above
    bound = min(min(terms), U)
    gap = relative_gap(U, bound)
    details = {k: v for k, v in best.details.items() if k != "status_note"}
    details["milp_throughput_bound"] = lam_ub  # of any design (a hop-limited model's own bound is lower)
    details["latency"] = {
        "hop_limited_models": models,
        "max_hops": H_best,
        "bandwidth_optimum_comm_time_s": U_bandwidth_optimum,
    }
    # "optimal" as for every MILP here: within the default relative gap (a looser requested gap is not a proof)
    status = "optimal" if gap is not None and gap <= DEFAULT_REL_GAP * (1 + 1e-9) else "feasible"
    if status == "feasible":
        details["status_note"] = (
            f"comm time within {gap:.4g} of its bound (bandwidth and hop-limited models; "
            "a time limit or a requested gap stopped them)"
        )
    return replace(
        best,
        status=status,
        objective=U,
        bound=bound,
        gap=gap,
        wall_time_s=time.perf_counter() - started,
        details=details,
    )


def solve_diameter(instance: Instance, options: ExactOptions, start: np.ndarray | None) -> Solution:
    """Smallest diameter: the heuristic (or start) gives an upper bound, the Moore bound a lower one;
    feasibility models for H = lower, lower+1, ... close the gap. ``options.export_model`` writes
    the first of them, H = the Moore bound (also when the start meets that bound and none is solved)."""
    c = instance.cluster
    n, d, directed = c.servers, c.degree, c.directed
    started = time.perf_counter()
    lower = moore_diameter_bound(n, d, directed)
    best_x = start
    upper = graph_diameter(start) if start is not None else math.inf
    details = {"model": "topology_routing/diameter", "moore_lower_bound": lower, "feasibility_models": []}
    if options.export_model:
        details["exported_model"] = f"diameter <= {lower} (the Moore bound; the first feasibility model)"
        export_problem_model(instance, options)
    H = lower
    status = "optimal"
    while H < upper:
        if H > n - 1:  # no connected topology of this degree exists
            return Solution(
                status="infeasible",
                method="exact",
                topology=None,
                backend=options.backend,
                wall_time_s=time.perf_counter() - started,
                details=details,
            )
        remaining = time_left(options, started)
        if remaining == 0:
            status = "feasible"
            break
        model, xcols, edges = build_diameter_feasibility(instance, H)
        result = run_model(model, ExactOptions(**{**options.__dict__, "time_limit_s": remaining, "export_model": None}))
        st = solution_status(result)
        details["feasibility_models"].append({"diameter_le": H, "status": st, "time_s": round(result.wall_time_s, 3)})
        if st in ("optimal", "feasible"):
            xv = np.rint(result.values[xcols]).astype(np.int64)
            X = np.zeros((n, n), dtype=np.int64)
            X[edges[:, 0], edges[:, 1]] = xv
            if not directed:
                X[edges[:, 1], edges[:, 0]] = xv
            best_x, upper = X, H
            break
        if st == "infeasible":
            lower = H + 1
            H += 1
            continue
        status = "feasible"  # a limit was hit before H was decided
        break
    if best_x is None or not math.isfinite(upper):  # no start, or a disconnected one: nothing found
        return exact_no_solution(options.backend, time.perf_counter() - started, details)
    if lower < upper:
        status = "feasible"
    gap = (upper - lower) / upper if upper else 0.0
    return Solution(
        status=status,
        method="exact",
        topology=Topology(best_x),
        objective=float(upper),
        bound=float(lower),
        gap=gap,
        backend=options.backend,
        wall_time_s=time.perf_counter() - started,
        details=details,
    )
