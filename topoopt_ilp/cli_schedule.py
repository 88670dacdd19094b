"""``topoopt schedule INSTANCE SOLUTION``: schedule one training iteration of a design (RCPSP).

Registered by :func:`add_subcommand` on the ``topoopt`` sub-command parser. Prints the makespan, its
bound and gap, the status, the evaluator's iteration time with ``overlap`` none and full for
comparison, and the busiest server and arc. Exit codes (design §6): 0 solved (optimal or feasible),
2 bad input or usage, 4 time limit without a schedule, 1 anything else; errors are one line (the
``topoopt`` entry point turns every :class:`~topoopt_ilp.errors.TopoOptError` into one).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any

from .cli import _fmt_time as fmt_time
from .cli import _nonneg_float, _pos_float, _pos_int
from .errors import EXIT_NO_SOLUTION, EXIT_OK, InputError

__all__ = ["add_subcommand", "run_schedule"]


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
        "schedule", help="schedule one training iteration of a design (compute and flows, RCPSP)",
        description="Schedule every compute task (forward/backward per layer replica, block lookups) and every flow "
                    "(resharding, lookups, AllReduce ring edges, split over their routes) of one training iteration on "
                    "the solution's topology, minimising the makespan: exactly with CP-SAT (default) or by list "
                    "scheduling. Prints the makespan, bound, gap and status next to the evaluator's iteration time "
                    "with overlap none and full.")
    p.add_argument("instance", metavar="INSTANCE", help="a workload instance")
    p.add_argument("solution", metavar="SOLUTION", help="a solution file (topology, placement, rings, routes)")
    p.add_argument("--method", choices=("exact", "heuristic"), default="exact",
                   help="exact: CP-SAT, warm-started from the list schedule (default); heuristic: the list schedule")
    p.add_argument("--time-limit", type=_nonneg_float, default=None, metavar="S",
                   help="exact: CP-SAT's time limit in seconds (default: none; the result is then proven optimal)")
    p.add_argument("--time-unit-us", type=_pos_float, default=1.0, metavar="U",
                   help="time resolution: durations are rounded up to multiples of U microseconds (default 1)")
    p.add_argument("--forward-fraction", type=_fraction, default=1.0 / 3.0, metavar="F",
                   help="share of a layer's time spent in its forward pass (default 1/3: backward = 2 x forward)")
    p.add_argument("--routing", choices=("given", "shortest_path"), default="given",
                   help="given: the solution's routes (shortest paths when it has none; default); shortest_path: "
                        "every pair split equally over its shortest paths (the evaluator's modes)")
    p.add_argument("--threads", type=_pos_int, default=None, metavar="T", help="exact: CP-SAT workers (default 2)")
    p.add_argument("--out", default=None, metavar="SCHEDULE.json", help="write the schedule (every task's times) here, atomically")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=run_schedule)
    return p


def _fmt(v: float | None) -> str:
    return fmt_time(v, digits=6)


def run_schedule(args: argparse.Namespace) -> int:
    """The ``schedule`` command (``args`` from :func:`add_subcommand`'s parser)."""
    from .evaluate import evaluate
    from .io import check_writable, json_safe, load_instance, load_solution, write_json_atomic
    from .iteration_graph import check_schedule, graph_from_solution
    from .models.schedule import list_schedule, schedule_to_dict, solve_schedule
    from .verify import verify

    if args.method == "heuristic" and (args.time_limit is not None or args.threads is not None):
        raise InputError("--time-limit and --threads go with --method exact (list scheduling takes neither)")
    if args.out:
        check_writable(args.out)
        for given in (args.instance, args.solution):
            if os.path.exists(args.out) and os.path.exists(given) and os.path.samefile(args.out, given):
                raise InputError(f"--out {args.out} is the file {given} itself: the schedule would overwrite it")
    inst = load_instance(args.instance)
    if inst.workload is None:
        raise InputError("scheduling needs a workload instance (layers and blocks); this instance has a fixed demand",
                         source=args.instance)
    sol = load_solution(args.solution, directed=inst.cluster.directed)
    if sol.topology is None:
        raise InputError(f"the solution holds no design (status {sol.status}): nothing to schedule", source=args.solution)
    report = verify(inst, sol, check_metrics=False)  # e.g. a solution made for another instance of the same size
    if not report.valid:
        raise InputError(f"the solution does not fit the instance ({len(report.violations)} violation(s), first: "
                         f"{report.violations[0]}; see topoopt verify)", source=args.solution)
    graph = graph_from_solution(inst, sol, routing=args.routing, forward_fraction=args.forward_fraction)
    unit = args.time_unit_us * 1e-6
    if args.method == "heuristic":
        sched = list_schedule(graph, time_unit_s=unit)
    else:
        sched = solve_schedule(graph, time_limit_s=args.time_limit, time_unit_s=unit, threads=args.threads or 2)
    if sched.has_schedule:
        problems = check_schedule(graph, sched)
        if problems:  # never hand out a schedule the independent check refuses
            raise RuntimeError(f"the schedule fails its check: {problems[0]}")
    m = evaluate(inst, sol, routing=args.routing)
    lb = sched.details["lower_bounds"]
    summary: dict[str, Any] = {
        "instance": args.instance, "solution": args.solution, "method": args.method, "status": sched.status,
        "makespan_s": sched.makespan_s, "bound_s": sched.bound_s, "gap": sched.gap, "wall_time_s": sched.wall_time_s,
        "evaluator": {"overlap_none_s": m.compute_time_s + m.comm_time_s, "overlap_full_s": max(m.compute_time_s, m.comm_time_s),
                      "instance_overlap": inst.workload.overlap, "compute_time_s": m.compute_time_s, "comm_time_s": m.comm_time_s},
        "lower_bounds": {"compute_s": lb["compute_s"], "network_s": lb["network_s"], "critical_path_s": lb["critical_path_s"]},
        "busiest_server": {"server": lb["busiest_server"], "compute_s": lb["compute_s"]},
        "busiest_arc": None if lb["busiest_arc"] is None else {"arc": list(lb["busiest_arc"]), "time_s": lb["network_s"],
                                                               "links": int(graph.x[lb["busiest_arc"]])},
        "tasks": len(graph), "compute_tasks": graph.num_compute, "flow_pieces": graph.num_flow_pieces,
        "time_unit_s": unit, "routing": graph.routing, "forward_fraction": graph.forward_fraction,
    }
    if sched.has_schedule and args.out:
        write_json_atomic(args.out, json_safe({**schedule_to_dict(graph, sched), "summary": summary}))
    if args.json:
        print(json.dumps(json_safe(summary), indent=1))
    else:
        how = "CP-SAT" if args.method == "exact" else "list scheduling"
        print(f"schedule of {args.solution} on {args.instance} ({how}): {sched.status}")
        if sched.has_schedule:
            gap = "-" if sched.gap is None else f"{sched.gap:.4g}"
            print(f"  makespan           {_fmt(sched.makespan_s)}  (bound {_fmt(sched.bound_s)} with durations rounded up "
                  f"to {_fmt(unit)}, gap {gap})")
            if sched.details.get("source", "").startswith("list schedule"):
                print(f"  note               {sched.details['source']}")
        else:
            print(f"  makespan           none found within the time limit (bound {_fmt(sched.bound_s)}); "
                  "--method heuristic always gives one")
        ev = summary["evaluator"]
        print(f"  evaluator          overlap none {_fmt(ev['overlap_none_s'])}, overlap full {_fmt(ev['overlap_full_s'])}"
              f"  (compute {_fmt(ev['compute_time_s'])}, comm {_fmt(ev['comm_time_s'])})")
        print(f"  lower bounds       compute {_fmt(lb['compute_s'])}, network {_fmt(lb['network_s'])}, "
              f"critical path {_fmt(lb['critical_path_s'])}")
        print(f"  busiest server     {lb['busiest_server']}: {_fmt(lb['compute_s'])} of compute")
        if lb["busiest_arc"] is not None:
            u, v = lb["busiest_arc"]
            print(f"  busiest arc        {u}->{v}: {_fmt(lb['network_s'])} of transfer per link ({int(graph.x[u, v])} link(s))")
        else:
            print("  busiest arc        - (no traffic)")
        milestones = len(graph) - graph.num_compute - graph.num_flow_pieces
        print(f"  tasks              {len(graph)} ({graph.num_compute} compute, {graph.num_flow_pieces} flow pieces, "
              f"{milestones} milestone{'' if milestones == 1 else 's'}), "
              f"time unit {_fmt(unit)}, routing {graph.routing}, solve {sched.wall_time_s:.3g} s")
        if args.out and sched.has_schedule:
            print(f"  wrote              {args.out}")
    if not sched.has_schedule:
        print("error: no_solution: no schedule within the time limit (--method heuristic always gives one)", file=sys.stderr)
    return EXIT_OK if sched.has_schedule else EXIT_NO_SOLUTION
