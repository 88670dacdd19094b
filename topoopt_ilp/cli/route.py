"""``topoopt route INSTANCE SOLUTION``: the best routing of a design's own traffic on its own topology.

Registered by :func:`add_subcommand` on the ``topoopt`` sub-command parser; ``topoopt solve --reroute``
applies the same step to a fresh solution (:func:`reroute_line` prints its summary). Exit codes
(docs/guide/cli.md): 0 done (re-routed, or the given routing kept because it is as good), 1 the result fails
verification, 2 bad input or usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from topoopt_ilp.cli.arguments import nonneg_float, solution_output_arguments
from topoopt_ilp.cli.output import print_solution, reroute_line
from topoopt_ilp.errors import EXIT_ERROR, EXIT_OK, InputError

__all__ = ["DEFAULT_TIME_LIMIT_S", "add_subcommand", "run_route"]

#: Seconds the routing LP may take unless told (measured: 1.5 s for the 976 pairs of an alternating
#: DLRM-128 design; a 128-server design whose every server talks to every other has ~16k pairs and
#: needs minutes, and then keeps its own routing unless the LP beat it in time).
DEFAULT_TIME_LIMIT_S = 60.0


def add_subcommand(sub: Any) -> argparse.ArgumentParser:
    """Register ``route`` on ``sub`` (the object ``ArgumentParser.add_subparsers`` returned)."""
    p = sub.add_parser(
        "route",
        help="re-route a design: the routing of its traffic that minimises the busiest link",
        description="Keep the solution's topology, placement and AllReduce rings, and route its traffic (MP bytes and "
        "ring transfers) over the paths that minimise the busiest link's time: a linear program solved by "
        "column generation, with a proven bound. The re-routed design is written when the evaluator "
        "scores it better than the solution's own routing; else the solution is kept as it is.",
    )
    p.add_argument("instance", metavar="INSTANCE")
    p.add_argument("solution", metavar="SOLUTION", help="a solution file with a design for INSTANCE")
    p.add_argument(
        "--time-limit",
        type=nonneg_float,
        default=DEFAULT_TIME_LIMIT_S,
        metavar="S",
        help=f"seconds for the routing LP (default {DEFAULT_TIME_LIMIT_S:g}); at the limit the best routing so "
        "far is used, with its bound",
    )
    solution_output_arguments(p)
    p.set_defaults(func=run_route)
    return p


def run_route(args: argparse.Namespace) -> int:
    """The ``route`` command (``args`` from :func:`add_subcommand`'s parser)."""
    from topoopt_ilp.evaluation.verify import verify
    from topoopt_ilp.files import check_writable, load_instance, load_solution, save_solution, solution_to_dict
    from topoopt_ilp.methods.reroute import route

    if args.out is not None:
        check_writable(args.out, "--out", {"instance": args.instance, "solution": args.solution}, "the solution")
    inst = load_instance(args.instance)
    sol = load_solution(args.solution, directed=inst.cluster.directed)
    try:
        result = route(inst, sol, time_limit_s=args.time_limit)
    except InputError as exc:
        if exc.source is None:
            raise type(exc)(exc.reason, source=args.solution, field=exc.field) from None
        raise
    report = verify(inst, result)
    name = os.path.basename(args.instance)
    if args.out is not None:
        save_solution(result, args.out, directed=inst.cluster.directed, instance_name=name)
    if args.json:
        print(json.dumps(solution_to_dict(result, directed=inst.cluster.directed, instance_name=name), indent=1))
    elif not args.quiet:
        print(f"route {args.solution}: {reroute_line(result.details)}")
        print_solution(args, inst, result, report, written=args.out is not None)
    if not report.valid:
        print(f"error: the solution failed verification: {report.violations[0]}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK
