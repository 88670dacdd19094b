"""``topoopt export``: a design as the files that build it: a cabling plan, OCS configurations, graph
files, an MSCCL algorithm, an ns-3 topology."""

from __future__ import annotations

import argparse
from typing import Any

from topoopt_ilp.cli.arguments import nonneg_float
from topoopt_ilp.errors import EXIT_OK, InputError, SolutionFileError

__all__ = ["add_subcommand", "run"]


def add_subcommand(sub: Any) -> argparse.ArgumentParser:
    """Register ``export`` on ``sub`` (what ``ArgumentParser.add_subparsers`` returned)."""
    p = sub.add_parser(
        "export",
        help="write a solution as a cabling plan, OCS configurations, a graph file, an MSCCL algorithm or an "
        "ns-3 topology for ASTRA-sim or SimAI",
        description="Write a verified solution in another format (see --list): the cabling plan (CSV, one row per "
        "link with its interfaces and patch-panel ports, port = server x degree + interface), the cross-connects "
        "of one OCS per interface index (JSON), the topology as a graph file, or the AllReduce rings of one group as an "
        "MSCCL algorithm (XML), or an ns-3 topology for ASTRA-sim or SimAI (text). Exit 2, and no file, when the solution does not fit the instance or "
        "the format cannot express the design.",
    )
    p.add_argument("instance", metavar="INSTANCE", nargs="?")
    p.add_argument("solution", metavar="SOLUTION", nargs="?")
    p.add_argument("--to", dest="format", default=None, metavar="FORMAT", help="the format (see --list)")
    p.add_argument("-o", "--output", "--out", dest="output", default=None, metavar="FILE")
    p.add_argument(
        "--fabric",
        choices=("patch_panel", "ocs"),
        default=None,
        help="what joins the interfaces: one patch panel (any port to any port) or one OCS per interface index "
        "(default: the instance's cost.fabric, else patch_panel; ocs for --to ocs)",
    )
    p.add_argument(
        "--time-limit",
        type=nonneg_float,
        default=None,
        metavar="S",
        help="time limit of the exact interface assignment in seconds (default 60)",
    )
    p.add_argument(
        "--group",
        type=int,
        default=None,
        metavar="G",
        help="--to msccl: the AllReduce group whose rings to write (default: the only group the solution rings)",
    )
    p.add_argument(
        "--gpu-type",
        choices=("H100", "H800", "A100", "A800"),
        default=None,
        help="--to simai: the gpu type of the file's header (default H100)",
    )
    p.add_argument("--list", action="store_true", help="list the formats and exit")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from topoopt_ilp.export import EXPORTERS, export, formats

    if args.list:
        for name, text in formats().items():
            print(f"{name:12} {text}")
        return EXIT_OK
    missing = [what for what, v in (("INSTANCE", args.instance), ("SOLUTION", args.solution)) if v is None]
    if missing or args.format is None or args.output is None:
        need = missing + [opt for opt, v in (("--to FORMAT", args.format), ("-o FILE", args.output)) if v is None]
        raise InputError(f"export needs {', '.join(need)} (or --list)")
    if args.format not in EXPORTERS:
        raise InputError(f"unknown export format {args.format!r}; choose one of {', '.join(EXPORTERS)}")
    from topoopt_ilp.core.instance import with_job_choice  # start-up time: loads the job compiler
    from topoopt_ilp.files import check_writable, load_instance, load_solution

    check_writable(args.output, "-o", {"instance": args.instance, "solution": args.solution}, "the export")
    inst = load_instance(args.instance)
    sol = load_solution(args.solution, directed=inst.cluster.directed)
    inst = with_job_choice(inst, sol.job)  # a job's traffic under the split and mapping the solution chose
    given = (
        ("fabric", args.fabric),
        ("time_limit_s", args.time_limit),
        ("group", args.group),
        ("gpu_type", args.gpu_type),
    )
    options = {k: v for k, v in given if v is not None}
    try:
        export(inst, sol, args.output, args.format, **options)
    except SolutionFileError as exc:  # the design does not fit: say which file holds it
        if exc.source is not None:
            raise
        raise SolutionFileError(exc.reason, source=args.solution, field=exc.field) from None
    print(f"wrote {args.output} ({args.format})")
    return EXIT_OK
