"""Argument types and argument groups the ``topoopt`` commands share.

Each type is an argparse ``type=``: a bad value is one usage line and exit code 2.
"""

from __future__ import annotations

import argparse
import math

from topoopt_ilp.core.instance import MAX_THREADS

__all__ = ["finite_float", "nonneg_float", "pos_float", "int_at_least", "nonneg_int", "pos_int", "threads",
           "solution_output_arguments"]


def finite_float(text: str, *, positive: bool) -> float:
    """A finite number >= 0 (> 0 when ``positive``), for argparse: one message for every bad value."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(v) or v < 0 or (positive and v == 0):
        raise argparse.ArgumentTypeError(f"must be a finite number {'>' if positive else '>='} 0, got {text}")
    return v


def nonneg_float(text: str) -> float:
    return finite_float(text, positive=False)


def pos_float(text: str) -> float:
    return finite_float(text, positive=True)


def int_at_least(text: str, low: int, high: int | None = None) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if v < low:
        raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {v}")
    if high is not None and v > high:
        raise argparse.ArgumentTypeError(f"must be an integer in {low}..{high}, got {v}")
    return v


def nonneg_int(text: str) -> int:
    return int_at_least(text, 0)


def pos_int(text: str) -> int:
    return int_at_least(text, 1)


def threads(text: str) -> int:

    return int_at_least(text, 1, MAX_THREADS)


# ----------------------------------------------------------------------------------------------
# Output helpers
# ----------------------------------------------------------------------------------------------


def solution_output_arguments(p: argparse.ArgumentParser) -> None:
    """``-o/--out`` and ``--json | --quiet`` of the commands that end with a solution (solve, route)."""
    p.add_argument("-o", "--out", default=None, metavar="SOLUTION.json", help="write the solution here (atomically)")
    shown = p.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help="print the solution as JSON")
    shown.add_argument("--quiet", action="store_true", help="print nothing; use the exit code")
