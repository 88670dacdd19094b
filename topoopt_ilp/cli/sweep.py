"""``topoopt sweep``: the comparison of ``compare`` over many instance files, in parallel."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from concurrent.futures import Executor
from contextlib import ExitStack
from typing import Any

from topoopt_ilp.cli.arguments import comparison_arguments, native_options, pos_int
from topoopt_ilp.cli.compare import methods_and_backends, no_solution_reason, rows_exit
from topoopt_ilp.cli.output import ProgressBar, fmt_duration, print_text, with_newline
from topoopt_ilp.errors import EXIT_ERROR, EXIT_INFEASIBLE, EXIT_OK, InputError

__all__ = ["add_subcommand", "open_executor", "run"]


def add_subcommand(sub: Any) -> argparse.ArgumentParser:
    """Register ``sweep`` on ``sub`` (what ``ArgumentParser.add_subparsers`` returned)."""
    p = sub.add_parser(
        "sweep",
        help="compare methods and back-ends on many instance files, in parallel",
        description="The comparison of 'compare' on every instance file named (files, directories, or "
        "quoted glob patterns such as 'instances/**/*.json'); the solves run one after another, "
        "in --jobs processes, or on a Dask cluster. Every file is checked before any solve.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="instance file, directory of .json files, or glob pattern")
    comparison_arguments(p)
    p.add_argument(
        "--jobs",
        type=pos_int,
        default=1,
        metavar="N",
        help="solves at a time, in worker processes (default 1: one after another here); with --dask local, "
        "the number of Dask workers",
    )
    p.add_argument(
        "--dask",
        default=None,
        metavar="ADDRESS|local",
        help="run the solves on the Dask scheduler at ADDRESS (e.g. tcp://10.0.0.1:8786; its workers need "
        "this package), or on a local Dask cluster of --jobs workers; needs pip install 'topoopt-ilp[dask]'",
    )
    p.add_argument(
        "-o", "--out", default=None, metavar="FILE", help="write the results here (atomically) instead of printing them"
    )
    p.add_argument(
        "--journal",
        default=None,
        metavar="FILE",
        help="append each solve's row to FILE (JSON lines) as it ends; run again with the same FILE to "
        "reuse the rows already there (resume an interrupted sweep)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    from concurrent.futures import ProcessPoolExecutor
    from pathlib import Path

    from topoopt_ilp.experiments.compare import run_label
    from topoopt_ilp.experiments.sweep import expand_paths, format_sweep, read_journal, sweep
    from topoopt_ilp.files import check_writable, write_atomic

    paths = expand_paths(args.paths)
    methods, backends = methods_and_backends(args)
    if args.out is not None:
        check_writable(args.out, "--out", {"instance": paths}, "the results")
    if args.journal is not None:
        check_writable(args.journal, "--journal", {"instance": paths}, "the journal")
        if args.out is not None and os.path.realpath(args.out) == os.path.realpath(args.journal):
            raise InputError("--out and --journal name the same file; the results would overwrite the journal")
        if not args.quiet and os.path.exists(args.journal):
            print(
                f"{args.journal}: {len(read_journal(args.journal))} solve(s) recorded; those of this sweep are reused",
                file=sys.stderr,
            )
    progress, bar = None, None
    if not args.quiet:
        started, solved = time.monotonic(), [0]
        if sys.stderr.isatty():  # the lines scroll above a bar that a person waiting watches
            bar = ProgressBar("sweep", total=0)

        def progress(done, total, path, row):
            what = run_label(row.method, row.backend)
            value = "-" if row.objective is None else f"{row.objective:.6g}"
            solved[0] += 1  # solves of this run (rows a journal already held are not timed)
            elapsed = time.monotonic() - started
            eta = elapsed / solved[0] * (total - done)
            line = (
                f"[{done}/{total}, {fmt_duration(elapsed)}, ETA {fmt_duration(eta)}] {path}: {what} {row.status} "
                f"{value} ({row.time_s:.2f} s)"
            )
            if bar is None:
                print(line, file=sys.stderr, flush=True)
            else:
                bar.step(done, eta_s=eta, total=total)
                bar.write_line(line)

    with ExitStack() as stack:
        if bar is not None:
            stack.callback(bar.close)
        executor = open_executor(stack, args.jobs, args.dask)
        try:
            rows = sweep(
                paths,
                methods,
                backends,
                args.time_limit,
                seed=args.seed,
                native_options=native_options(args.solver_option, backends),
                executor=executor,
                progress=progress,
                journal=args.journal,
                search_moves=args.search_moves,
            )
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: stop the workers now, not after their solves
            if args.dask is not None:
                _quiet_dask_shutdown()
            if isinstance(executor, ProcessPoolExecutor):
                for proc in list((getattr(executor, "_processes", None) or {}).values()):
                    proc.terminate()
                executor.shutdown(wait=False, cancel_futures=True)
            raise
    text = format_sweep(rows, args.format)
    if args.out is not None:
        write_atomic(args.out, lambda tmp: Path(tmp).write_text(with_newline(text)))
        if not args.quiet:
            print(f"wrote {args.out}", file=sys.stderr)
    else:
        print_text(text)
    rows_of = {p: [r.row for r in rows if r.instance == p] for p in paths}
    codes = {p: rows_exit(rows_of[p]) for p in paths}
    for p, code in codes.items():
        if code != EXIT_OK:
            print(f"error: {p}: {no_solution_reason(code, rows_of[p])}", file=sys.stderr)
    return max(codes.values(), key=lambda c: (c != EXIT_OK, c == EXIT_ERROR, c == EXIT_INFEASIBLE))  # 1, 3, 4, 0


def open_executor(stack: ExitStack, jobs: int, dask: str | None) -> Executor | None:
    """The executor of ``--jobs N`` and ``--dask ADDRESS|local``, closed with ``stack``: a client of
    the Dask scheduler at ADDRESS, a local Dask cluster of ``jobs`` workers, a pool of ``jobs``
    worker processes, or None (``jobs`` 1 without Dask: one task after another here)."""
    from concurrent.futures import ProcessPoolExecutor  # start-up time: only when tasks run in parallel
    from multiprocessing import get_context

    if dask is not None:
        try:
            from distributed import Client, LocalCluster  # start-up time: Dask only with --dask
        except ImportError:
            raise InputError("--dask needs Dask's distributed package: pip install 'topoopt-ilp[dask]'") from None
        if dask == "local":
            # silence_logs: Ctrl-C cancels the running tasks, which Dask logs per task and per worker as
            # warnings and errors; a worker that really fails reaches the user as its task's error
            try:
                cluster = LocalCluster(
                    n_workers=jobs,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    silence_logs=logging.CRITICAL,
                )
            except KeyboardInterrupt:  # while its workers start
                _quiet_dask_shutdown()
                raise
            stack.callback(_close_local_cluster, cluster)
            client = stack.enter_context(Client(cluster))
        else:
            try:
                client = stack.enter_context(Client(dask))  # waits distributed.comm.timeouts.connect (Dask config)
            except (OSError, TimeoutError, ValueError) as exc:
                raise InputError(f"--dask {dask}: cannot connect to the scheduler ({exc})") from None
        return client.get_executor()
    if jobs > 1:
        # spawn: a forked worker would share this process's imported solver state
        return stack.enter_context(ProcessPoolExecutor(jobs, mp_context=get_context("spawn")))
    return None


def _close_local_cluster(cluster: Any) -> None:
    """Close ``sweep --dask local``'s cluster. Interrupted while a worker (re)starts, Dask's own close
    fails an assertion: that must not turn the user's Ctrl-C into an internal error (the worker
    processes end with this one)."""
    try:
        cluster.close(timeout=10)
    except Exception:  # noqa: BLE001 - see the docstring
        pass


def _quiet_dask_shutdown() -> None:
    """An interrupted Dask sweep: the cancelled tasks and the closing nannies log warnings and
    tracebacks, and Dask's exit hook retries a close that failed and reports it as an unraisable
    exception; interrupted while a nanny starts, asyncio logs that start's failed task ("Task
    exception was never retrieved") when it is collected. The user pressed Ctrl-C and gets one
    line, "interrupted"."""
    names = [n for n in logging.root.manager.loggerDict if n.startswith("distributed")] + ["distributed", "asyncio"]
    for name in names:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    sys.unraisablehook = lambda unraisable: None
