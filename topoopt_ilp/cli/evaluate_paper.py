"""``topoopt evaluate-paper``: TopoOpt's 128-server comparison against equal-cost Fat-trees."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from topoopt_ilp.cli.arguments import nonneg_float, nonneg_int, pos_int, split_list
from topoopt_ilp.cli.output import ProgressBar
from topoopt_ilp.errors import EXIT_OK, InputError

__all__ = ["add_subcommand", "run"]


def add_subcommand(sub: Any) -> argparse.ArgumentParser:
    """Register ``evaluate-paper`` on ``sub`` (what ``ArgumentParser.add_subparsers`` returned)."""
    p = sub.add_parser(
        "evaluate-paper",
        help="TopoOpt's 128-server comparison against equal-cost Fat-trees",
        description="For each workload instance: TopoOpt's rule (authors' mode), the alternating method, "
        "a random expander, the ideal switch (d x B per server) and equal-cost Fat-trees 1:1, "
        "1:2, 1:4, each switched baseline under its best candidate strategy. Prints iteration "
        "times and speedups; --out writes the table (CSV, JSON) and a bar chart (PNG).",
    )
    p.add_argument(
        "--instances",
        default=None,
        metavar="FILE,FILE,...",
        help="instance files (default: instances/paper/{dlrm,bert,candle,vgg16}-128-d{4,8}.json)",
    )
    p.add_argument(
        "--time-limit",
        type=nonneg_float,
        default=100.0,
        metavar="S",
        help="budget of each alternating run (default 100)",
    )
    p.add_argument("--rounds", type=pos_int, default=5, help="alternating: at most this many rounds (default 5)")
    p.add_argument(
        "--round-time-limit",
        type=nonneg_float,
        default=30.0,
        metavar="S",
        help="alternating: time limit of each placement MILP (default 30)",
    )
    p.add_argument(
        "--rack-size", type=pos_int, default=None, metavar="K", help="Fat-tree servers per rack (default 16)"
    )
    p.add_argument("--seed", type=nonneg_int, default=0, help="heuristic/expander seed (default 0)")
    p.add_argument("-o", "--out", default=None, metavar="DIR", help="write architectures.csv, .json and .png here")
    p.add_argument("--title", default=None, help="chart title")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table", help="what to print (default table)")
    p.add_argument("--quiet", action="store_true", help="print nothing; with --out, only write the files")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from topoopt_ilp.experiments.paper import default_instance_paths, evaluate_paper, format_table, write_outputs

    paths = split_list(args.instances) if args.instances else [str(p) for p in default_instance_paths()]
    if not paths:
        raise InputError("--instances lists no instance file")
    if args.out is not None:  # made and probed now: a bad directory must not cost the whole comparison
        from topoopt_ilp.files import check_writable

        if not args.out.strip():
            raise InputError(f"--out needs a directory name, got {args.out!r}")
        if os.path.exists(args.out) and not os.path.isdir(args.out):
            raise InputError("--out must be a directory", source=args.out)
        try:
            os.makedirs(args.out, exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot make directory {args.out}: {exc.strerror or exc}") from None
        check_writable(os.path.join(args.out, "architectures.csv"), "--out")
    bar = ProgressBar("evaluate-paper", len(paths)) if not args.quiet and sys.stderr.isatty() else None

    def progress(done: int, total: int, name: str, result: str | None) -> None:
        if bar is None:  # not a terminal: one line per instance as it starts and as it ends
            print(result or f"{name}: solving ...", file=sys.stderr, flush=True)
        elif result is None:
            bar.step(done, f"{name}: solving")
        else:
            bar.step(done)
            bar.write_line(result)

    try:
        results = evaluate_paper(
            paths,
            progress=None if args.quiet else progress,
            time_limit_s=args.time_limit,
            rounds=args.rounds,
            round_time_limit_s=args.round_time_limit,
            rack_size=args.rack_size,
            seed=args.seed,
        )
    finally:
        if bar is not None:
            bar.close()
    if not args.quiet:
        print(format_table(results, args.format))
    if args.out is not None:
        for path in write_outputs(results, args.out, title=args.title):
            if not args.quiet:
                print(f"wrote {path}", file=sys.stderr)
    return EXIT_OK
