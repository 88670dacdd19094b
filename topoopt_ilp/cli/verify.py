"""``topoopt verify``: check a solution against its instance (exit 0 valid, 1 with the violations)."""

from __future__ import annotations

import argparse
from typing import Any

from topoopt_ilp.errors import EXIT_ERROR, EXIT_OK

__all__ = ["add_subcommand", "run"]


def add_subcommand(sub: Any) -> argparse.ArgumentParser:
    """Register ``verify`` on ``sub`` (what ``ArgumentParser.add_subparsers`` returned)."""
    p = sub.add_parser(
        "verify",
        help="check a solution against its instance",
        description="Check ports, degrees, family, rings, routes and stated metrics. Exit 0 when valid, 1 with a list of violations.",
    )
    p.add_argument("instance", metavar="INSTANCE")
    p.add_argument("solution", metavar="SOLUTION")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from topoopt_ilp.evaluation.verify import verify
    from topoopt_ilp.files import load_instance, load_solution

    inst = load_instance(args.instance)
    sol = load_solution(args.solution, directed=inst.cluster.directed)
    report = verify(inst, sol)
    if report.valid and not sol.has_solution:  # consistent, but there is no design to use
        print(f"{args.solution}: holds no design (status {sol.status}, method {sol.method}): nothing to verify")
        return EXIT_ERROR
    if report.valid:
        print(f"{args.solution}: valid for {args.instance} ({sol.status}, method {sol.method})")
        return EXIT_OK
    print(f"{args.solution}: {len(report.violations)} violation(s) against {args.instance}:")
    for v in report.violations:
        print(f"  - {v}")
    return EXIT_ERROR
