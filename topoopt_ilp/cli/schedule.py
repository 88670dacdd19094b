"""``topoopt schedule INSTANCE SOLUTION``: schedule one training iteration of a design (RCPSP).

Registered by :func:`add_subcommand` on the ``topoopt`` sub-command parser. Prints the makespan, its
bound and gap, the status, the evaluator's iteration time with ``overlap`` none and full for
comparison, and the busiest server and arc. Exit codes (docs/guide/cli.md): 0 solved (optimal or feasible),
2 bad input or usage, 4 time limit without a schedule, 1 anything else; errors are one line (the
``topoopt`` entry point turns every :class:`~topoopt_ilp.errors.TopoOptError` into one).

``--check SCHEDULE.json`` instead reads a schedule file written by ``--out``
(:func:`~topoopt_ilp.models.schedule.read_schedule`), refuses it unless the instance and solution
files are those it was made from (their SHA-256), rebuilds the task graph with the file's
parameters and runs the independent :func:`~topoopt_ilp.schedule.iteration_graph.check_schedule` on its
times: exit 0 valid, 1 a violation (the first is printed), 2 a malformed file or other inputs.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from topoopt_ilp.cli.arguments import nonneg_float, pos_float, threads
from topoopt_ilp.cli.output import fmt_time, report_check
from topoopt_ilp.errors import EXIT_NO_SOLUTION, EXIT_OK, InputError

__all__ = ["add_subcommand", "check_made_from", "load_design", "run_schedule"]


def _fraction(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not 0 <= v <= 1:
        raise argparse.ArgumentTypeError(f"must be a number >= 0 and <= 1, got {text}")
    return v


def add_subcommand(sub: Any) -> argparse.ArgumentParser:
    """Register ``schedule`` on ``sub`` (the object ``ArgumentParser.add_subparsers`` returned)."""
    p = sub.add_parser(
        "schedule",
        help="schedule one training iteration of a design (compute and flows, RCPSP)",
        description="Schedule every compute task (forward/backward per layer replica, block lookups) and every flow "
        "(resharding, lookups, AllReduce ring edges, split over their routes) of one training iteration on "
        "the solution's topology, minimising the makespan: exactly with CP-SAT (default) or by list "
        "scheduling. Prints the makespan, bound, gap and status next to the evaluator's iteration time "
        "with overlap none and full.",
    )
    p.add_argument("instance", metavar="INSTANCE", help="a workload instance")
    p.add_argument("solution", metavar="SOLUTION", help="a solution file (topology, placement, rings, routes)")
    p.add_argument(
        "--method",
        choices=("exact", "heuristic"),
        default=None,
        help="exact: CP-SAT, warm-started from the list schedule (default); heuristic: the list schedule",
    )
    p.add_argument(
        "--time-limit",
        type=nonneg_float,
        default=None,
        metavar="S",
        help="exact: CP-SAT's time limit in seconds (default: none; the result is then proven optimal)",
    )
    p.add_argument(
        "--time-unit-us",
        type=pos_float,
        default=None,
        metavar="U",
        help="time resolution: durations are rounded up to multiples of U microseconds (default 1; "
        "at most the longest task)",
    )
    p.add_argument(
        "--forward-fraction",
        type=_fraction,
        default=None,
        metavar="F",
        help="share of a layer's time spent in its forward pass (default 1/3: backward = 2 x forward)",
    )
    p.add_argument(
        "--routing",
        choices=("given", "shortest_path"),
        default=None,
        help="given: the solution's routes (shortest paths when it has none; default); shortest_path: "
        "every pair split equally over its shortest paths (the evaluator's modes)",
    )
    p.add_argument("--threads", type=threads, default=None, metavar="T", help="exact: CP-SAT workers (default 2)")
    p.add_argument(
        "--micro-batches",
        default=None,
        metavar="M",
        help="split the batch into M micro-batches (GPipe): every compute task and every flow but the "
        "AllReduce becomes M of 1/M each (default 1)",
    )
    p.add_argument(
        "-o",
        "--out",
        default=None,
        metavar="SCHEDULE.json",
        help="write the schedule (every task's times and what the graph is rebuilt from) here, atomically",
    )
    p.add_argument(
        "--check",
        default=None,
        metavar="SCHEDULE.json",
        help="check a schedule file written by --out against INSTANCE and SOLUTION (the files it was made "
        "from) instead of scheduling: exit 0 valid, 1 a violation",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run_schedule)
    return p


def _fmt(v: float | None) -> str:
    return fmt_time(v, digits=6)


#: Options that choose how to schedule; --check takes all of them from the file.
_SCHEDULING_OPTIONS = (
    "method",
    "time_limit",
    "time_unit_us",
    "forward_fraction",
    "routing",
    "threads",
    "micro_batches",
    "out",
)


def _micro_batches(text: str | None) -> int:
    """``--micro-batches``: refused as one InputError line (argparse's usage block is two)."""
    if text is None:
        return 1
    try:
        m = int(text)
    except ValueError:
        m = 0
    if m < 1:
        raise InputError(f"--micro-batches must be an integer >= 1, got {text!r}")
    return m


def _load_design(args: argparse.Namespace) -> tuple[Any, Any]:
    """The instance and the solution, refused unless the solution is a design for the instance."""
    return load_design(args.instance, args.solution, workload=True)


def load_design(instance: str, solution: str, *, workload: bool) -> tuple[Any, Any]:
    """The instance and solution files, refused (InputError) unless the solution holds a design that
    fits the instance (``topoopt verify`` without the metrics); ``workload``: refuse an instance
    without one (a fixed demand)."""
    from topoopt_ilp.core.instance import with_job_choice  # start-up time: loads the job compiler
    from topoopt_ilp.evaluation.verify import verify
    from topoopt_ilp.files import load_instance, load_solution

    inst = load_instance(instance)
    if workload and inst.workload is None:
        kind = "a job section (its iteration is not a task graph yet)" if inst.job is not None else "a fixed demand"
        raise InputError(
            f"scheduling needs a workload instance (layers and blocks); this instance has {kind}",
            source=instance,
        )
    sol = load_solution(solution, directed=inst.cluster.directed)
    inst = with_job_choice(inst, sol.job)  # a job's traffic under the split and mapping the solution chose
    if sol.topology is None:
        raise InputError(f"the solution holds no design (status {sol.status}): nothing to schedule", source=solution)
    report = verify(inst, sol, check_metrics=False)  # e.g. a solution made for another instance of the same size
    if not report.valid:
        raise InputError(
            f"the solution does not fit the instance ({len(report.violations)} violation(s), first: "
            f"{report.violations[0]}; see topoopt verify)",
            source=solution,
        )
    return inst, sol


def check_made_from(schedule: str, files: dict[str, tuple[str, str | None, str | None]], *, writer: str) -> None:
    """Refuse (InputError naming ``schedule``) a schedule file unless each input file is the one it
    was made from: ``files`` maps a role (instance, solution) to (the path given, the SHA-256 the
    schedule records, the name it records); ``writer``: the command that writes such files."""
    from topoopt_ilp.models.schedule import file_sha256

    for role, (path, recorded, made) in files.items():
        if recorded is None:
            raise InputError(
                f"the schedule records no SHA-256 of its {role} file (it was not written by {writer}): "
                f"cannot tell whether it was made from {path}",
                source=schedule,
            )
        actual = file_sha256(path)
        if actual != recorded:
            raise InputError(
                f"the schedule was made from another {role} file"
                + (f" ({made})" if made else "")
                + f" than {path}: SHA-256 {recorded[:12]}... in the schedule, {actual[:12]}... of {path}",
                source=schedule,
            )


def run_schedule(args: argparse.Namespace) -> int:
    """The ``schedule`` command (``args`` from :func:`add_subcommand`'s parser)."""
    from topoopt_ilp.files import check_writable, json_safe
    from topoopt_ilp.models.schedule import file_sha256, list_schedule, solve_schedule, write_schedule
    from topoopt_ilp.schedule.iteration_graph import DEFAULT_FORWARD_FRACTION, check_schedule, graph_from_solution

    if args.check is not None:
        if not args.check.strip():
            raise InputError(f"--check needs a schedule file name, got {args.check!r}")
        given = [f"--{k.replace('_', '-')}" for k in _SCHEDULING_OPTIONS if getattr(args, k) is not None]
        if given:
            raise InputError(f"{given[0]} does not go with --check (the schedule file says how it was made)")
        return _run_check(args)
    method = args.method or "exact"
    if method == "heuristic" and (args.time_limit is not None or args.threads is not None):
        raise InputError("--time-limit and --threads go with --method exact (list scheduling takes neither)")
    micro_batches = _micro_batches(args.micro_batches)
    if args.out is not None:
        check_writable(args.out, "--out", {"instance": args.instance, "solution": args.solution}, "the schedule")
    inst, sol = _load_design(args)
    hashes = (file_sha256(args.instance), file_sha256(args.solution)) if args.out is not None else (None, None)
    ff = DEFAULT_FORWARD_FRACTION if args.forward_fraction is None else args.forward_fraction
    routing = args.routing or "given"
    graph = graph_from_solution(inst, sol, routing=routing, forward_fraction=ff, micro_batches=micro_batches)
    unit = (1.0 if args.time_unit_us is None else args.time_unit_us) * 1e-6
    if method == "heuristic":
        sched = list_schedule(graph, time_unit_s=unit)
    else:
        sched = solve_schedule(graph, time_limit_s=args.time_limit, time_unit_s=unit, threads=args.threads or 2)
    if sched.has_schedule:
        problems = check_schedule(graph, sched)
        if problems:  # never hand out a schedule the independent check refuses
            raise RuntimeError(f"the schedule fails its check: {problems[0]}")
    summary = _summary(
        inst,
        sol,
        graph,
        instance=args.instance,
        solution=args.solution,
        method=method,
        claims=(sched.status, sched.makespan_s, sched.bound_s, sched.gap, sched.wall_time_s),
        time_unit_s=unit,
    )
    lb = sched.details["lower_bounds"]
    if sched.has_schedule and args.out is not None:
        write_schedule(
            args.out,
            graph,
            sched,
            summary=summary,
            instance=args.instance,
            instance_sha256=hashes[0],
            solution=args.solution,
            solution_sha256=hashes[1],
        )
    if args.json:
        print(json.dumps(json_safe(summary), indent=1))
    else:
        how = "CP-SAT" if method == "exact" else "list scheduling"
        print(f"schedule of {args.solution} on {args.instance} ({how}): {sched.status}")
        if sched.has_schedule:
            gap = "-" if sched.gap is None else f"{sched.gap:.4g}"
            print(
                f"  makespan           {_fmt(sched.makespan_s)}  (bound {_fmt(sched.bound_s)} with durations rounded up "
                f"to {_fmt(unit)}, gap {gap})"
            )
            if sched.details.get("source", "").startswith("list schedule"):
                print(f"  note               {sched.details['source']}")
        else:
            print(
                f"  makespan           none found within the time limit (bound {_fmt(sched.bound_s)}); "
                "--method heuristic always gives one"
            )
        ev = summary["evaluator"]
        print(
            f"  evaluator          overlap none {_fmt(ev['overlap_none_s'])}, overlap full {_fmt(ev['overlap_full_s'])}"
            f"  (compute {_fmt(ev['compute_time_s'])}, comm {_fmt(ev['comm_time_s'])})"
        )
        print(
            f"  lower bounds       compute {_fmt(lb['compute_s'])}, network {_fmt(lb['network_s'])}, "
            f"critical path {_fmt(lb['critical_path_s'])}"
        )
        print(f"  busiest server     {lb['busiest_server']}: {_fmt(lb['compute_s'])} of compute")
        if lb["busiest_arc"] is not None:
            u, v = lb["busiest_arc"]
            print(
                f"  busiest arc        {u}->{v}: {_fmt(lb['network_s'])} of transfer per link ({int(graph.x[u, v])} link(s))"
            )
        else:
            print("  busiest arc        - (no traffic)")
        milestones = len(graph) - graph.num_compute - graph.num_flow_pieces
        print(
            f"  tasks              {len(graph)} ({graph.num_compute} compute, {graph.num_flow_pieces} flow pieces, "
            f"{milestones} milestone{'' if milestones == 1 else 's'}), "
            f"time unit {_fmt(unit)}, routing {graph.routing}, "
            + (f"{graph.micro_batches} micro-batches, " if graph.micro_batches > 1 else "")
            + f"solve {sched.wall_time_s:.3g} s"
        )
        if args.out is not None and sched.has_schedule:
            print(f"  wrote              {args.out}")
    if not sched.has_schedule:
        print(
            "error: no_solution: no schedule within the time limit (--method heuristic always gives one)",
            file=sys.stderr,
        )
    return EXIT_OK if sched.has_schedule else EXIT_NO_SOLUTION


def _summary(
    inst: Any,
    sol: Any,
    graph: Any,
    *,
    instance: str,
    solution: str,
    method: str,
    claims: tuple[str, float | None, float | None, float | None, float],
    time_unit_s: float,
) -> dict[str, Any]:
    """What ``schedule`` prints and writes beside a schedule: its claims (status, makespan, bound, gap,
    wall time), the evaluator's iteration time for the same design, and the task graph's lower bounds.
    ``--check`` recomputes it from the file's claims, so a summary edited by hand is a violation."""
    from topoopt_ilp.evaluation.evaluate import evaluate
    from topoopt_ilp.schedule.iteration_graph import lower_bounds

    status, makespan_s, bound_s, gap, wall_time_s = claims
    m = evaluate(inst, sol, routing=graph.routing)
    lb = lower_bounds(graph)
    return {
        "instance": instance,
        "solution": solution,
        "method": method,
        "status": status,
        "makespan_s": makespan_s,
        "bound_s": bound_s,
        "gap": gap,
        "wall_time_s": wall_time_s,
        "evaluator": {
            "overlap_none_s": m.compute_time_s + m.comm_time_s,
            "overlap_full_s": max(m.compute_time_s, m.comm_time_s),
            "instance_overlap": inst.workload.overlap,
            "compute_time_s": m.compute_time_s,
            "comm_time_s": m.comm_time_s,
        },
        "lower_bounds": {
            "compute_s": lb["compute_s"],
            "network_s": lb["network_s"],
            "critical_path_s": lb["critical_path_s"],
        },
        "busiest_server": {"server": lb["busiest_server"], "compute_s": lb["compute_s"]},
        "busiest_arc": None
        if lb["busiest_arc"] is None
        else {"arc": list(lb["busiest_arc"]), "time_s": lb["network_s"], "links": int(graph.x[lb["busiest_arc"]])},
        "tasks": len(graph),
        "compute_tasks": graph.num_compute,
        "flow_pieces": graph.num_flow_pieces,
        "time_unit_s": time_unit_s,
        "routing": graph.routing,
        "forward_fraction": graph.forward_fraction,
        "micro_batches": graph.micro_batches,
    }


def summary_violations(said: Any, truth: Any, field: str = "summary") -> list[str]:
    """Where a schedule file's summary differs from the one recomputed for it (numbers to a relative
    1e-9, everything else exactly); at most 20."""
    from topoopt_ilp.core.checks import brief  # start-up time: numpy, not needed for --help

    if isinstance(truth, dict) and isinstance(said, dict):
        out = [f"{field}.{key}: the file omits it" for key in truth if key not in said]
        out += [f"{field}.{brief(key)}: not part of a schedule summary" for key in said if key not in truth]
        for key in truth.keys() & said.keys():
            out += summary_violations(said[key], truth[key], f"{field}.{key}")
        return out[:20]
    if isinstance(truth, list) and isinstance(said, list) and len(truth) == len(said):
        return [v for k, (a, b) in enumerate(zip(said, truth)) for v in summary_violations(a, b, f"{field}[{k}]")][:20]
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (said, truth))
    if numbers and math.isclose(said, truth, rel_tol=1e-9, abs_tol=1e-15):
        return []
    if not numbers and said == truth and type(said) is type(truth):
        return []
    return [f"{field}: the file says {brief(said)}, recomputed {brief(truth)}"]


def _run_check(args: argparse.Namespace) -> int:
    """``--check SCHEDULE.json``: the file against the files it names by SHA-256, then the independent check."""
    from topoopt_ilp.models.schedule import claim_violations, read_schedule
    from topoopt_ilp.schedule.iteration_graph import check_schedule, graph_from_solution

    sf = read_schedule(args.check)
    check_made_from(
        args.check,
        {
            "instance": (args.instance, sf.instance_sha256, sf.instance),
            "solution": (args.solution, sf.solution_sha256, sf.solution),
        },
        writer="topoopt schedule --out",
    )
    inst, sol = _load_design(args)
    graph = graph_from_solution(
        inst, sol, routing=sf.routing, forward_fraction=sf.forward_fraction, micro_batches=sf.micro_batches
    )
    sched = sf.schedule(graph)
    problems = check_schedule(graph, sched) + claim_violations(graph, sf)
    if sf.summary is not None:
        recomputed = _summary(
            inst,
            sol,
            graph,
            instance=sf.instance,
            solution=sf.solution,
            method=sf.method,
            claims=(sf.status, sf.makespan_s, sf.bound_s, sf.gap, sf.wall_time_s),
            time_unit_s=sf.time_unit_s,
        )
        problems += summary_violations(sf.summary, recomputed)
    facts = {
        "makespan_s": sf.makespan_s,
        "status": sf.status,
        "method": sf.method,
        "tasks": len(graph),
        "micro_batches": sf.micro_batches,
    }
    line = (
        f"makespan           {_fmt(sf.makespan_s)}  ({sf.status}, {sf.method}; {len(graph)} tasks, "
        f"{sf.micro_batches} micro-batch{'' if sf.micro_batches == 1 else 'es'}, time unit {_fmt(sf.time_unit_s)}, "
        f"routing {sf.routing})"
    )
    return report_check(args, "schedule", facts, line, problems)
