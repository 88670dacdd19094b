"""``topoopt solve INSTANCE --scenarios worst|mean``: one topology for every expert-load scenario of
a MoE job (docs/guide/llm-jobs.md, **Expert load**), the robust design, the mean design and each
scenario's own best side by side; the robust design is the solution written."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from typing import Any

from topoopt_ilp.cli.output import STATUS_EXIT, fmt_time, print_json
from topoopt_ilp.errors import EXIT_ERROR, InputError

__all__ = ["add_arguments", "run", "scenario_of"]

#: The solve options that apply with --scenarios (with --method exact: the solver's).
_EXACT_OPTIONS = ("backend", "time_limit", "gap", "threads")
_REFUSED = ("warm_start", "export_model", "formulation", "solver_option", "rings", "search_moves", "log")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``--scenarios`` on ``topoopt solve``."""
    p.add_argument(
        "--scenarios",
        default=None,
        choices=("worst", "mean"),
        help="design one topology for every expert-load scenario of the instance's job, least worst-case "
        "or mean iteration time (--method heuristic: TopologyFinder's candidates; exact: the multi-scenario "
        "model, at most 32 servers, --time-limit per model); prints the robust, mean and own-best designs "
        "per scenario and writes the robust design",
    )


def scenario_of(inst: Any, text: str, source: str) -> Any:
    """The instance of scenario ``text`` (an index into the job's expert-load scenarios, or
    ``mean``) of ``inst``, read from ``source``."""
    from topoopt_ilp.core.job_section import scenario_count
    from topoopt_ilp.methods.expert_scenarios import mean_instance, scenario_instance

    job = inst.job
    if job is None or not job.expert_load:
        raise InputError("--scenario needs a job with an expert_load section", source=source, field="job.expert_load")
    if text == "mean":
        return mean_instance(inst)
    count = scenario_count(job)
    if not text.isdigit() or int(text) >= count:
        raise InputError(f"--scenario {text!r}: choose 0..{count - 1} or mean", source=source, field="job.expert_load")
    return scenario_instance(inst, int(text))


def _check(args: argparse.Namespace, inst: Any) -> None:
    if inst.job is None or not inst.job.expert_load:
        raise InputError(
            "--scenarios needs a job with an expert_load section", source=args.instance, field="job.expert_load"
        )
    if args.method not in ("heuristic", "exact"):
        raise InputError(f"--scenarios runs with --method heuristic or exact, not {args.method}")
    for key in _REFUSED + (() if args.method == "exact" else _EXACT_OPTIONS):
        if getattr(args, key) is not None:
            raise InputError(f"--{key.replace('_', '-')} does not apply with --scenarios and --method {args.method}")
    if args.reroute or args.verbose or args.select is not None or args.mode is not None:
        raise InputError("--reroute, --verbose, --select and --mode do not apply with --scenarios")


def _report(args: argparse.Namespace, inst: Any):
    from topoopt_ilp.methods import expert_scenarios

    if args.method == "heuristic":
        seed = args.seed if args.seed is not None else 0
        return expert_scenarios.design_over_scenarios(inst, objective=args.scenarios, seed=seed)
    from topoopt_ilp.models.common import ExactOptions  # start-up time: the models load the solver packages

    s = inst.solver
    options = ExactOptions(
        backend=args.backend or s.backend or "highs",
        time_limit_s=args.time_limit if args.time_limit is not None else s.time_limit_s,
        gap=args.gap if args.gap is not None else s.gap,
        threads=args.threads if args.threads is not None else s.threads,
        warm_start="none",
        seed=args.seed,
    )
    return expert_scenarios.exact_design_over_scenarios(inst, objective=args.scenarios, options=options)


def _robust_solution(inst: Any, report: Any, objective: str):
    """The robust design as a solution of ``inst`` as its file compiles it (its expert_scenario):
    scored there by the evaluator with the report's routing, feasible (what the scenario models
    prove is about the scenarios: in ``details["scenarios"]``)."""
    from topoopt_ilp.evaluation.evaluate import RoutingError, evaluate
    from topoopt_ilp.methods import finalize

    design = report.designs[report.robust]
    routing = report.routing
    if routing == "given":
        try:
            evaluate(inst, design)
        except RoutingError:
            routing = "shortest_path"  # as the report scores a design whose routes a scenario refuses
    times = report.times[report.robust]
    summary = {
        "objective": objective,
        "method": design.method,
        "robust": report.names[report.robust],
        "routing": report.routing,
        "times_s": list(times),
        "worst_s": max(times),
        "mean_s": sum(times) / len(times),
    }
    if design.method == "exact":
        summary.update(status=design.status, bound_s=design.bound, gap=design.gap)
    plain = replace(design, status="feasible", objective=None, bound=None, gap=None, metrics=None)
    return finalize(inst, replace(plain, details={**design.details, "scenarios": summary}), routing=routing)


def _table(report: Any) -> list[str]:
    lines = [f"  {'scenario':>8}  {'robust':>11}  {'mean design':>11}  {'own best':>11}  {'price':>7}"]
    for row in report.rows():
        lines.append(
            f"  {row['scenario']:>8}  {fmt_time(row['robust_s']):>11}  {fmt_time(row['mean_design_s']):>11}  "
            f"{fmt_time(row['own_best_s']):>11}  {row['price']:>7.4f}"
        )
    lines.append(
        f"  {'worst':>8}  {fmt_time(report.worst(report.robust)):>11}  {fmt_time(report.worst(report.mean)):>11}  "
        f"{'':>11}  {max(report.price_of_robustness):>7.4f}"
    )
    lines.append(
        f"  {'mean':>8}  {fmt_time(report.average(report.robust)):>11}  {fmt_time(report.average(report.mean)):>11}"
    )
    return lines


def run(args: argparse.Namespace, inst: Any) -> int:
    """Design over the scenarios, print the table, verify and write the robust design."""
    from topoopt_ilp.cli.output import keeps_earlier_out
    from topoopt_ilp.evaluation.verify import verify
    from topoopt_ilp.files import check_writable, save_solution, solution_to_dict

    _check(args, inst)
    if args.out is not None:
        check_writable(args.out, "--out", {"instance": args.instance}, "the solution")
    try:
        report = _report(args, inst)
    except InputError as exc:
        if exc.source is None and exc.field is not None:
            raise type(exc)(exc.reason, source=args.instance, field=exc.field) from None
        raise
    sol = _robust_solution(inst, report, args.scenarios)
    check = verify(inst, sol)
    name = os.path.basename(args.instance)
    written = args.out is not None and not keeps_earlier_out(args.out, sol.status)
    if written:
        save_solution(sol, args.out, directed=inst.cluster.directed, instance_name=name)
    if args.json:
        print_json(
            {
                "solution": solution_to_dict(sol, directed=inst.cluster.directed, instance_name=name),
                "designs": [
                    {"name": n, "status": d.status, "times_s": list(t)}
                    for n, d, t in zip(report.names, report.designs, report.times)
                ],
                "rows": report.rows(),
            }
        )
    elif not args.quiet:
        s = sol.details["scenarios"]
        how = "each design's own routes" if report.routing == "given" else "each scenario routed at best"
        print(
            f"{inst.name or name}: {report.scenarios} expert-load scenarios, {args.scenarios} case, "
            f"method {args.method} (iteration times, {how}: evaluate --scenario K --routing {report.routing})"
        )
        print("\n".join(_table(report)))
        if "status" in s:
            bound = f", bound {fmt_time(s['bound_s'])}" if s.get("bound_s") is not None else ""
            gap = f", gap {s['gap']:.2%}" if s.get("gap") is not None else ""
            print(f"  robust design      the scenario model's: {s['status']}{bound}{gap}")
        else:
            print(f"  robust design      the {s['robust']!r} candidate")
        print(
            f"  as the file asks   {fmt_time(sol.objective)} ({inst.objective} on the scenario the file selects, "
            f"{sol.metrics['routing']} routing)"
        )
        if written:
            print(f"  wrote              {args.out}")
    if not check.valid:
        print(f"error: the solution failed verification: {check.violations[0]}", file=sys.stderr)
        return EXIT_ERROR
    return STATUS_EXIT[sol.status]
