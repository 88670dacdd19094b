"""``topoopt solve``: design a topology (and routing, and placement) for an instance, verified."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from topoopt_ilp.cli import scenarios
from topoopt_ilp.cli.arguments import (
    native_options,
    nonneg_float,
    nonneg_int,
    pos_int,
    solution_output_arguments,
    threads,
)
from topoopt_ilp.cli.output import STATUS_EXIT, LiveLine, keeps_earlier_out, print_round, print_solution
from topoopt_ilp.cli.sweep import open_executor
from topoopt_ilp.errors import EXIT_ERROR, InputError

__all__ = ["add_subcommand", "run"]


def add_subcommand(sub: Any) -> argparse.ArgumentParser:
    """Register ``solve`` on ``sub`` (what ``ArgumentParser.add_subparsers`` returned)."""
    p = sub.add_parser(
        "solve",
        help="design a topology (and routing) for an instance",
        description="Solve an instance. The result is verified and scored by the independent evaluator.",
    )
    p.add_argument("instance", metavar="INSTANCE")
    p.add_argument(
        "--method",
        choices=("heuristic", "exact", "alternating", "baseline"),
        default="heuristic",
        help="heuristic: TopoOpt's TopologyFinder (default); exact: MILP; alternating: placement MILP <-> "
        "TopologyFinder rounds (workloads), split + rank mapping <-> TopologyFinder (jobs); baseline: a reference topology",
    )
    p.add_argument("--rounds", type=pos_int, default=None, help="alternating: at most this many rounds (default 5)")
    p.add_argument(
        "--round-time-limit",
        type=nonneg_float,
        default=None,
        metavar="S",
        help="alternating: time limit of each placement MILP (default 30)",
    )
    p.add_argument(
        "--topology-method",
        default=None,
        choices=("auto", "finder", "exact"),
        help="alternating: topology step by TopoOpt's TopologyFinder or the exact topology + routing "
        "MILP (at most 32 servers); auto (default): exact up to 12 servers, else TopologyFinder",
    )
    p.add_argument(
        "--select",
        default=None,
        choices=("geometric", "best"),
        help="heuristic: SelectPermutations rule (default geometric, TopoOpt's)",
    )
    p.add_argument(
        "--mode",
        default=None,
        choices=("paper", "authors"),
        help="heuristic: follow the paper (default) or the authors' published code",
    )
    p.add_argument(
        "--baseline",
        default=None,
        choices=("expander", "demand_greedy", "torus"),
        help="baseline: which reference topology (default expander)",
    )
    p.add_argument(
        "--backend", default=None, help="exact, alternating: solver back-end (highs, scip, cpsat, cbc; default highs)"
    )
    p.add_argument(
        "--time-limit",
        type=nonneg_float,
        default=None,
        metavar="S",
        help="exact: time limit in seconds; alternating: overall budget",
    )
    p.add_argument(
        "--gap",
        type=nonneg_float,
        default=None,
        metavar="G",
        help="exact: relative gap at which the solver may stop (optimal still means within 1e-4; above it the result is feasible)",
    )
    p.add_argument("--threads", type=threads, default=None, metavar="T", help="exact: solver threads")
    p.add_argument(
        "--warm-start", default=None, metavar="heuristic|none|FILE", help="exact: warm start (default heuristic)"
    )
    p.add_argument("--export-model", default=None, metavar="FILE.mps|FILE.lp", help="exact: also write the model")
    p.add_argument(
        "--log",
        default=None,
        metavar="FILE",
        help="exact: keep the back-end's own log of every solve in FILE (written when the run ends)",
    )
    p.add_argument(
        "--verbose", action="store_true", help="exact: show the back-end's log live, on stderr (not with --quiet)"
    )
    p.add_argument(
        "--solver-option",
        action="append",
        default=None,
        metavar="BACKEND.NAME=VALUE",
        help="exact: a native parameter of a solver, passed through (repeatable; highs and cbc), e.g. "
        "highs.presolve=off; it overrides the model's own setting of it",
    )
    p.add_argument(
        "--formulation",
        default=None,
        metavar="NAME",
        help="exact: the model's formulation - general topology: strong (default) or naive; circulant: "
        "strong (default) or basic; a workload (joint problem, or placement on a fixed topology): auto (default), "
        "milp or enumeration",
    )
    p.add_argument(
        "--rings",
        default=None,
        choices=("shortest", "coset"),
        help="exact (a workload on a fixed topology), alternating: how the placement problem rings each "
        "AllReduce group - shortest (default): split equally over its TotientPerms rings of least hop "
        "total; coset: one ring in coset order",
    )
    p.add_argument(
        "--search-moves",
        type=pos_int,
        default=None,
        metavar="N",
        help="exact (a workload on a fixed topology), alternating: budget the placement's local search in moves, not "
        "seconds, so that the same seed finds the same strategy on any machine (the time limit stays "
        "the safety net; the solution's details say when it cut the search)",
    )
    p.add_argument(
        "--seed",
        type=nonneg_int,
        default=None,
        help="random seed of the heuristic/baseline (default 0) and, when given with --method exact, of the solver",
    )
    p.add_argument(
        "--seeds",
        type=pos_int,
        default=None,
        metavar="K",
        help="exact, where the edge-swap search runs (general topologies, undirected links): search from K "
        "seeds (--seed, --seed + 1, ...) and keep the best; they share the search's time (default 1)",
    )
    p.add_argument(
        "--jobs",
        type=pos_int,
        default=None,
        metavar="N",
        help="exact with --seeds: run N seeds at a time, in worker processes or (--dask) Dask workers "
        "(default 1: one after another here)",
    )
    p.add_argument(
        "--dask",
        default=None,
        metavar="ADDRESS|local",
        help="exact with --seeds: run the seeds on the Dask scheduler at ADDRESS (its workers need this "
        "package; --jobs: how many run at once), or on a local Dask cluster of --jobs workers; needs pip "
        "install 'topoopt-ilp[dask]'",
    )
    p.add_argument(
        "--reroute",
        action="store_true",
        help="then route the design's traffic over the paths that minimise its busiest link (as topoopt "
        "route does) and keep that routing when it scores better",
    )
    scenarios.add_arguments(p)
    solution_output_arguments(p)
    p.set_defaults(func=run)
    return p


_EXACT_ONLY = (
    "backend",
    "time_limit",
    "gap",
    "threads",
    "warm_start",
    "export_model",
    "formulation",
    "solver_option",
    "rings",
    "search_moves",
    "log",
    "seeds",
    "jobs",
    "dask",
)


def _solver_options(args: argparse.Namespace, inst) -> dict[str, Any]:
    """Options for --method exact; CLI flags override the instance's ``solver`` defaults."""
    s = inst.solver
    backend = args.backend or s.backend or "highs"
    return {
        "backend": backend,
        "time_limit_s": args.time_limit if args.time_limit is not None else s.time_limit_s,
        "gap": args.gap if args.gap is not None else s.gap,
        "threads": args.threads if args.threads is not None else s.threads,
        "warm_start": args.warm_start,
        "export_model": args.export_model,
        "seed": args.seed,
        "formulation": args.formulation,
        "rings": args.rings,
        "search_moves": args.search_moves,
        "swap_seeds": args.seeds,
        "swap_workers": args.jobs,
        "verbose": args.verbose,
        "native_options": native_options(args.solver_option, [backend]),
    }


def _keep_log(scratch: str, path: str, finished: bool) -> None:
    """Write the run's solver log to ``path``, atomically, when a solve wrote one or the run
    finished (then perhaps with no solve to log); drop the scratch folder."""
    from topoopt_ilp.files import write_atomic

    log = os.path.join(scratch, "solver.log")
    try:
        if os.path.exists(log):
            write_atomic(path, lambda tmp: shutil.copyfile(log, tmp))
        elif finished:
            write_atomic(path, lambda tmp: Path(tmp).write_text("(no solve of this run went through a solver)\n"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run(args: argparse.Namespace) -> int:
    from topoopt_ilp.evaluation.verify import verify
    from topoopt_ilp.files import check_writable, dumps, load_instance, solution_to_dict, write_atomic
    from topoopt_ilp.methods import solve

    inst = load_instance(args.instance)
    if args.scenarios is not None:
        return scenarios.run(args, inst)
    for key in _EXACT_ONLY:
        methods = ("exact", "alternating") if key in ("backend", "time_limit", "rings", "search_moves") else ("exact",)
        if getattr(args, key) is not None and args.method not in methods:
            raise InputError(f"--{key.replace('_', '-')} applies to --method {' or '.join(methods)}, not {args.method}")
    if args.method != "alternating" and (
        args.rounds is not None or args.round_time_limit is not None or args.topology_method is not None
    ):
        raise InputError("--rounds, --round-time-limit and --topology-method apply to --method alternating only")
    if args.method not in ("heuristic", "alternating") and (args.select is not None or args.mode is not None):
        raise InputError(f"--select and --mode apply to --method heuristic or alternating, not {args.method}")
    if args.method != "baseline" and args.baseline is not None:
        raise InputError(f"--baseline applies to --method baseline, not {args.method}")
    if args.verbose and args.method != "exact":
        raise InputError(f"--verbose applies to --method exact, not {args.method}")
    if args.verbose and args.quiet:
        raise InputError("--verbose and --quiet ask for opposite things: choose one")
    ws = args.warm_start
    if ws is not None and ws not in ("heuristic", "none") and ("/" in ws or os.sep in ws or os.path.splitext(ws)[1]):
        # It names a file (a path or a file name with an extension): say what is wrong with it.
        if not os.path.exists(ws):
            raise InputError(f"warm start file {ws} does not exist")
        if os.path.isdir(ws):
            raise InputError(f"warm start file {ws} is a directory")
    # Output paths are checked before solving: a typo must not cost the whole solve.
    if args.out is not None:
        check_writable(args.out, "--out", {"instance": args.instance}, "the solution")
    if args.export_model is not None:
        check_writable(args.export_model, "--export-model")
    if args.log is not None:
        others = {"--out": args.out, "--export-model": args.export_model}
        for option, other in others.items():
            if other is not None and os.path.abspath(other) == os.path.abspath(args.log):
                raise InputError(f"--log {args.log} is the {option} file too: give them different names")
        check_writable(args.log, "--log", {"instance": args.instance}, "the log")
    live = None
    if args.method == "exact":
        options = _solver_options(args, inst)
        if not (args.quiet or args.json or args.verbose) and sys.stderr.isatty():
            options["progress"] = live = LiveLine(f"exact [{options['backend']}]")
    else:
        options = {"seed": args.seed if args.seed is not None else 0}
        if args.method in ("heuristic", "alternating"):
            options.update(select=args.select or "geometric", mode=args.mode or "paper")
        if args.method == "baseline":
            options.update(baseline=args.baseline or "expander")
        if args.method == "alternating":
            options.update(
                rounds=args.rounds if args.rounds is not None else 5,
                round_time_limit_s=args.round_time_limit if args.round_time_limit is not None else 30.0,
                time_limit_s=args.time_limit,
                backend=args.backend,  # None: the instance's, else default
                topology_method=args.topology_method or "auto",
                rings=args.rings or "shortest",
                search_moves=args.search_moves,
            )
            if not (args.quiet or args.json):
                options["progress"] = print_round
    # The solves append to a scratch file, which replaces --log when the run ends (interrupted too);
    # a run stopped by bad input before any solve leaves an earlier log as it was.
    scratch = tempfile.mkdtemp(prefix="topoopt-log-") if args.log is not None else None
    if scratch is not None:
        options["log_file"] = os.path.join(scratch, "solver.log")
    finished = False
    try:
        with contextlib.ExitStack() as stack:
            if args.method == "exact":
                executor = open_executor(stack, args.jobs or 1, args.dask)
                if executor is not None:
                    options["swap_executor"] = executor
            sol = solve(inst, method=args.method, **options)
        finished = True
    except InputError as exc:
        if exc.source is None and exc.field is not None:  # about the instance's contents: name its file
            raise type(exc)(exc.reason, source=args.instance, field=exc.field) from None
        raise
    finally:
        if live is not None:
            live.close()
        if scratch is not None:
            _keep_log(scratch, args.log, finished)
    if args.reroute and sol.has_solution:
        from topoopt_ilp.cli.route import DEFAULT_TIME_LIMIT_S
        from topoopt_ilp.methods.reroute import route

        sol = route(inst, sol, time_limit_s=DEFAULT_TIME_LIMIT_S)
    report = verify(inst, sol) if sol.has_solution else None
    # a run that found nothing does not replace a file that holds something (a design, an earlier record)
    written = (
        args.out is not None
        and not keeps_earlier_out(args.out, sol.status)
        and (sol.has_solution or sol.status in ("infeasible", "no_solution"))
    )
    if written or args.json:  # one text for both (made twice, it was a third of a 1,024-server run)
        text = dumps(
            solution_to_dict(sol, directed=inst.cluster.directed, instance_name=os.path.basename(args.instance))
        )
    if written:
        write_atomic(args.out, lambda tmp: Path(tmp).write_text(text))
    if args.json:
        sys.stdout.write(text)
    elif not args.quiet:
        print_solution(args, inst, sol, report, written)
    if report is not None and not report.valid:
        print(f"error: the solution failed verification: {report.violations[0]}", file=sys.stderr)
        return EXIT_ERROR
    return STATUS_EXIT[sol.status]
