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


def main(argv: Sequence[str] | None = None) -> int:
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
