"""The ``topoopt`` command line: a thin layer over the public API, one module per command.

Exit codes: 0 solved (optimal or feasible) or valid, 1 anything else (including a solution that
fails verification), 2 bad input or usage, 3 proven infeasible, 4 limit reached without a solution.
Errors are one line on stderr, never a traceback (set TOPOOPT_DEBUG=1 to see one).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import threading
from collections.abc import Sequence

from topoopt_ilp.cli import (
    bandwidth,
    collective,
    compare,
    draw,
    evaluate,
    evaluate_paper,
    export,
    generate,
    route,
    schedule,
    solve,
    sweep,
    validate,
    verify,
)
from topoopt_ilp.errors import EXIT_BAD_INPUT, EXIT_ERROR, EXIT_INTERRUPTED, TopoOptError

__all__ = ["main", "build_parser", "COMMANDS"]

#: The command modules, in the order ``topoopt --help`` lists them; each has ``add_subcommand(sub)``.
COMMANDS = (
    validate,
    verify,
    evaluate,
    evaluate_paper,
    solve,
    compare,
    sweep,
    generate,
    draw,
    export,
    bandwidth,
    schedule,
    collective,
    route,
)


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line (plus the usage) with exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        # "argument --seed: must be an integer >= 0, got -1" reads better as "--seed must be ...".
        match = re.fullmatch(r"argument (-[\w-]+(?:/-[\w-]+)?): (must .*)", message, flags=re.S)
        if match:
            message = f"{match.group(1)} {match.group(2)}"
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``topoopt`` parser: each module of :data:`COMMANDS` registers its subcommand."""
    p = _Parser(
        prog="topoopt",
        description="Design the network of a distributed DNN training cluster: "
        "topology, routing and placement, exact (MILP) or heuristic (TopoOpt).",
    )
    from topoopt_ilp import __version__

    p.add_argument("--version", action="version", version=f"topoopt-ilp {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    for command in COMMANDS:
        command.add_subcommand(sub)
    return p


def _terminate(signum, frame) -> None:
    raise KeyboardInterrupt  # SIGTERM ends a run the way Ctrl-C does: workers stopped, exit 130, no partial file


def _small_pages() -> None:
    """Have numpy back this process's large arrays with ordinary 4 KiB pages, unless the user chose
    (numpy's ``NUMPY_MADVISE_HUGEPAGE``, read when numpy is imported, which is before this runs).

    The designs at thousands of servers write a few entries per row of n x n arrays of zeros (link
    counts: 2 GiB at 16,384 servers). With numpy's default ``madvise`` hugepage advice, a write
    faults in a whole 2 MiB page, so the kernel clears all 2 GiB: ``topoopt solve`` on one
    AllReduce plus one MP pair per server at 16,384 servers took 27.7 s (15.3 s of it system time)
    and 6.1 GiB, against 14.7 s (2.9 s) and 2.7 GiB with 4 KiB pages (2026-12-07, 2 cores,
    `/usr/bin/time topoopt solve ... --quiet` without and with ``NUMPY_MADVISE_HUGEPAGE=0``; the
    same solution file). numpy offers the switch only as that variable or a private function, so
    an unknown numpy version is left as it is."""
    if "NUMPY_MADVISE_HUGEPAGE" in os.environ:
        return
    import numpy as np  # start-up time: already imported by the package; the switch is found at run time

    core = getattr(np, "_core", None) or getattr(np, "core", None)
    switch = getattr(getattr(core, "multiarray", None), "_set_madvise_hugepage", None)
    if callable(switch):
        switch(False)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line. ``argv`` None: this process is the ``topoopt`` program (its own arguments,
    and numpy's page advice set for its arrays); a list: a call from Python, which changes nothing
    global but the SIGTERM handler while it runs."""
    if argv is None:
        _small_pages()
    for stream in (sys.stdout, sys.stderr):  # a name the terminal's encoding lacks is escaped, not a crash
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    parser = build_parser()
    args = parser.parse_args(argv)
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminate) if in_main else None
    try:
        return _run(args)
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, previous)


def _run(args: argparse.Namespace) -> int:
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # here, so that a closed pipe is caught below and not at exit
        return code
    except BrokenPipeError:
        # The reader left (``topoopt ... | head``): stop quietly, as Python's documentation advises;
        # stdout goes to /dev/null so that the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR
    except TopoOptError as exc:
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the CLI promises one line, not a traceback
        if os.environ.get("TOPOOPT_DEBUG"):
            raise
        text = one_line(f"{type(exc).__name__}: {exc}")
        print(f"internal error: {text} (set TOPOOPT_DEBUG=1 for a traceback)", file=sys.stderr)
        return EXIT_ERROR


#: The longest error message the CLI prints; the messages cut what they echo well below it.
MAX_MESSAGE_CHARS = 1000


def one_line(message: str) -> str:
    """An error message as the CLI prints it: one line (a newline in an echoed value is escaped) of
    at most :data:`MAX_MESSAGE_CHARS` characters, whatever a message was given to echo."""
    message = message.replace("\r", "\\r").replace("\n", "\\n")
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    return f"{message[: MAX_MESSAGE_CHARS - 40]}... ({len(message):,} characters in all)"


if __name__ == "__main__":
    sys.exit(main())
