"""``topoopt evaluate``: score a solution, the instance's fixed topology, or a switched architecture."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from topoopt_ilp.cli.arguments import pos_float, pos_int
from topoopt_ilp.cli.output import fmt_time, metrics_lines, print_json
from topoopt_ilp.errors import EXIT_OK, InputError

__all__ = ["add_subcommand", "run"]


def add_subcommand(sub: Any) -> argparse.ArgumentParser:
    """Register ``evaluate`` on ``sub`` (what ``ArgumentParser.add_subparsers`` returned)."""
    p = sub.add_parser(
        "evaluate",
        help="score a solution (or the instance's fixed topology)",
        description="Compute iteration time, comm time, throughput, diameter, ASPL and link utilization.",
    )
    p.add_argument("instance", metavar="INSTANCE")
    p.add_argument(
        "solution", metavar="SOLUTION", nargs="?", help="solution file; default: the instance's fixed_topology"
    )
    p.add_argument(
        "--routing",
        choices=("given", "shortest_path", "optimal"),
        default="given",
        help="given: the solution's routes (shortest paths when it has none); shortest_path: equal split over "
        "shortest paths; optimal: max-concurrent-flow LP (default: given)",
    )
    p.add_argument(
        "--scenario",
        default=None,
        metavar="K|mean",
        help="score on expert-load scenario K (0-based) of the instance's job, or on their mean, instead of "
        "the scenario the file selects (the numbers of solve --scenarios; the solution's stated metrics are "
        "then not checked)",
    )
    p.add_argument("--json", action="store_true", help="print the metrics as JSON")
    p.add_argument(
        "--architecture",
        choices=("big_switch", "fat_tree", "rail_optimised", "rail_only"),
        type=lambda name: name.replace("-", "_"),
        default=None,
        help="score the traffic on a switched network instead (with SOLUTION: under its placement); "
        "same bandwidth per server unless --bandwidth or --equal-cost",
    )
    p.add_argument(
        "--oversubscription",
        type=float,
        default=1.0,
        metavar="R",
        help="fat_tree, rail networks: leaf uplink oversubscription 1:R",
    )
    p.add_argument(
        "--rack-size",
        type=pos_int,
        default=None,
        metavar="K",
        help="fat_tree, rail networks: servers per rack (default 16)",
    )
    p.add_argument(
        "--equal-cost",
        action="store_true",
        help="fat_tree, rail networks: give each server the bandwidth at which the network costs as much as the "
        "direct-connect cluster (cost model: the instance's 'cost' section, else the defaults)",
    )
    p.add_argument(
        "--bandwidth",
        type=pos_float,
        default=None,
        metavar="GBPS",
        help="with --architecture: bandwidth per server (default: degree x link bandwidth)",
    )
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from topoopt_ilp.core.solution import Topology
    from topoopt_ilp.evaluation.evaluate import evaluate
    from topoopt_ilp.files import load_instance, load_solution

    inst = load_instance(args.instance)
    if args.scenario is not None:
        from topoopt_ilp.cli.scenarios import scenario_of

        inst = scenario_of(inst, args.scenario, args.instance)
    if args.architecture:
        from topoopt_ilp.evaluation.architectures import evaluate_architecture

        placement = None
        if args.solution:
            given = load_solution(args.solution, directed=inst.cluster.directed)
            _warn_if_invalid(inst, given, args.solution, "its placement is scored as given")
            placement = given.placement
        sm = evaluate_architecture(
            inst,
            args.architecture,
            oversubscription=args.oversubscription,
            rack_size=args.rack_size,
            placement=placement,
            server_bandwidth_gbps=args.bandwidth,
            equal_cost=args.equal_cost,
        ).as_dict()
        if args.json:
            print_json(sm)
        else:
            label = sm["architecture"] + (
                f" 1:{sm['oversubscription']:g}, racks of {sm['rack_size']}"
                if sm["architecture"] != "big_switch"
                else ""
            )
            if sm["architecture"] in ("rail_optimised", "rail_only"):
                label += f", {sm['rails']} rails of {sm['server_bandwidth_gbps'] / sm['rails']:.4g} Gbps"
            if sm["equal_cost"]:
                per_server = (
                    f"{sm['server_bandwidth_gbps']:.4g} Gbps per server (equal cost to {inst.d} x "
                    f"{inst.cluster.link_bandwidth_gbps:g} Gbps direct connect: {sm['cost_usd']:,.0f} USD)"
                )
            elif args.bandwidth is not None:
                per_server = f"{sm['server_bandwidth_gbps']:.4g} Gbps per server"
            else:
                per_server = f"{inst.d} x {inst.cluster.link_bandwidth_gbps:g} Gbps per server"
            print(f"{label} with {per_server}, on {args.instance}:")
            print(
                f"  iteration time     {fmt_time(sm['iteration_time_s'])}"
                + (f"  (compute {fmt_time(sm['compute_time_s'])})" if sm["compute_time_s"] else "")
            )
            print(
                f"  comm time          {fmt_time(sm['comm_time_s'])}  (bandwidth {fmt_time(sm['bandwidth_time_s'])}"
                f" + latency {fmt_time(sm['latency_time_s'])})"
            )
            print(
                f"  busiest port       {fmt_time(sm['server_port_time_s'])}; busiest rack uplink "
                f"{fmt_time(sm['rack_uplink_time_s'])}"
                + (f"; busiest scale-up forwarding {fmt_time(sm['forward_time_s'])}" if sm["rails"] > 1 else "")
            )
        return EXIT_OK
    if args.oversubscription != 1.0 or args.rack_size is not None or args.equal_cost or args.bandwidth is not None:
        raise InputError("--oversubscription, --rack-size, --equal-cost and --bandwidth go with --architecture")
    if args.solution:
        from topoopt_ilp.evaluation.verify import direction_mismatch

        target = load_solution(args.solution, directed=inst.cluster.directed)
        if not target.has_solution and inst.fixed_topology is None:
            raise InputError(f"holds no design (status {target.status}): nothing to evaluate", source=args.solution)
        mismatch = direction_mismatch(inst, target)
        if mismatch:
            raise InputError(f"the solution does not match the instance: {mismatch}", source=args.solution)
        what = args.solution
    else:
        if inst.fixed_topology is None:
            raise InputError(
                "the instance has no fixed_topology; give a SOLUTION file to evaluate", source=args.instance
            )
        target = Topology(inst.fixed_topology_matrix(), inst.fixed_topology.jumps)
        what = "the instance's fixed topology"
    from topoopt_ilp.evaluation.evaluate import RoutingError
    from topoopt_ilp.evaluation.verify import reachability_violations as verify_reachability
    from topoopt_ilp.evaluation.verify import verify

    try:
        metrics = evaluate(inst, target, routing=args.routing).as_dict()
    except RoutingError as exc:
        # A solution made for another instance may fail inside the scoring ("no complete route");
        # the verifier names the cause ("has a placement, but this instance has no workload").
        report = verify(inst, target, check_metrics=False) if args.solution else None
        if report is not None and not report.valid:
            raise InputError(
                f"the solution does not match the instance: {report.violations[0]}", source=args.solution
            ) from None
        raise InputError(
            f"cannot be scored: {exc.reason} (see topoopt verify)", source=args.solution or args.instance
        ) from None
    except InputError as exc:  # after RoutingError, one of them
        if exc.source is not None:
            raise
        # about the solution's contents (its placement, a ring): name its file
        raise type(exc)(exc.reason, source=args.solution or args.instance, field=exc.field) from None
    if not args.solution and not math.isfinite(metrics["iteration_time_s"]):
        unreachable = verify_reachability(inst, target.matrix)
        if unreachable:  # scored (infinite), and why
            print(f"note: the fixed topology cannot carry the demand: {unreachable[0]}", file=sys.stderr)
    if args.solution:
        _warn_if_invalid(inst, target, args.solution, "the scores are of the solution as given", args.scenario is None)
    if args.json:
        print_json(metrics)
    else:
        print(f"{what} on {args.instance}:")
        print("\n".join(metrics_lines(metrics)))
    return EXIT_OK


def _warn_if_invalid(inst: Any, sol: Any, path: str, consequence: str, check_metrics: bool = True) -> None:
    """Score anyway (that is evaluate's job), but not silently: one warning line on stderr naming the
    first violation (its rules and, with ``check_metrics``, its recorded metrics, which are of the
    scenario the instance file selects; the scores printed are recomputed)."""
    from topoopt_ilp.evaluation.verify import verify

    report = verify(inst, sol, check_metrics=check_metrics)
    if not report.valid:
        print(
            f"warning: {path} fails verification ({len(report.violations)} violation(s), first: "
            f"{report.violations[0]}); {consequence} (see topoopt verify)",
            file=sys.stderr,
        )
