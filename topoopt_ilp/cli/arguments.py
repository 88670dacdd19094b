"""Argument types and argument groups the ``topoopt`` commands share.

Each type is an argparse ``type=``: a bad value is one usage line and exit code 2.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from topoopt_ilp.core.instance import MAX_THREADS
from topoopt_ilp.errors import InputError

__all__ = [
    "finite_float",
    "nonneg_float",
    "pos_float",
    "int_at_least",
    "nonneg_int",
    "pos_int",
    "threads",
    "solution_output_arguments",
    "comparison_arguments",
    "split_list",
    "server_ids",
    "native_options",
]


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


def split_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def server_ids(text: str | None, n: int) -> tuple[int, ...]:
    """``--servers LIST`` of a topology of ``n`` servers: every server when None."""
    if text is None:
        return tuple(range(n))
    out = []
    for item in split_list(text):
        try:
            s = int(item)
        except ValueError:
            raise InputError(f"--servers must list server ids, got {item[:20]!r}") from None
        if not 0 <= s < n:
            raise InputError(f"--servers: server {s} is not in the topology (servers 0..{n - 1})")
        out.append(s)
    return tuple(out)


def native_options(given: list[str] | None, backends: list[str]) -> dict[str, dict[str, Any]] | None:
    """``--solver-option BACKEND.NAME=VALUE`` flags as ``{backend: {name: value}}``; a value reads as
    a bool (true/false), an int or a float when it is one, else as text. Each must name a backend
    that runs (the Python API ignores other backends' entries; on a command line one is a mistake)."""
    if not given:
        return None
    out: dict[str, dict[str, Any]] = {}
    for item in given:
        key, eq, text = item.partition("=")
        target, dot, name = key.partition(".")
        if not (eq and dot and target and name and text):
            raise InputError(f"--solver-option {item!r}: expected BACKEND.NAME=VALUE, e.g. highs.presolve=off")
        if target not in backends:
            raise InputError(f"--solver-option {item!r} is for {target}, but the solve runs on {', '.join(backends)}")
        from topoopt_ilp.solvers import BACKENDS, Capability, get_backend

        if not get_backend(target).supports(Capability.NATIVE_OPTIONS):  # refused here, not as an error row per solve
            takers = ", ".join(b.name for b in BACKENDS.values() if b.supports(Capability.NATIVE_OPTIONS))
            raise InputError(f"--solver-option {item!r}: {target} takes no native parameters ({takers} do)")
        value: Any = {"true": True, "false": False}.get(text.lower(), text)
        for kind in (int, float):
            if isinstance(value, str):
                try:
                    value = kind(text)
                except ValueError:
                    pass
        out.setdefault(target, {})[name] = value
    return out


def comparison_arguments(p: argparse.ArgumentParser) -> None:
    """The options compare and sweep share."""
    p.add_argument(
        "--methods",
        default=None,
        help="comma-separated: heuristic, exact, alternating (workloads), baseline (default heuristic,exact; "
        "heuristic,alternating,exact for a workload)",
    )
    p.add_argument("--backends", default=None, help="comma-separated back-ends for exact (default highs)")
    p.add_argument(
        "--time-limit",
        type=nonneg_float,
        default=60.0,
        metavar="S",
        help="per exact solve, and the alternating method's budget (default 60)",
    )
    p.add_argument("--seed", type=nonneg_int, default=0, help="heuristic/baseline seed (default 0)")
    p.add_argument(
        "--solver-option",
        action="append",
        default=None,
        metavar="BACKEND.NAME=VALUE",
        help="a native parameter for the exact solves on BACKEND (repeatable; highs and cbc)",
    )
    p.add_argument(
        "--search-moves",
        type=pos_int,
        default=None,
        metavar="N",
        help="budget the placement's local search (alternating; exact on a workload with a fixed "
        "topology) in moves, not seconds: results that do not depend on the machine or the worker",
    )
    p.add_argument("--format", choices=("table", "json", "csv"), default="table")
