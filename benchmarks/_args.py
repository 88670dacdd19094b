"""Argument types shared by the benchmark scripts.

Each is an argparse ``type=``: a bad value becomes one usage line and exit 2, as in the CLI, instead
of a traceback from deep inside a solve. argparse applies a ``type`` to a string default too, so the
defaults are checked the same way.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from topoopt_ilp import files
from topoopt_ilp.core.instance import Instance
from topoopt_ilp.errors import InstanceError

ROOT = Path(__file__).resolve().parent.parent
PAPER = ROOT / "instances" / "paper"


def _items(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


def names_from(known: list[str], what: str):
    """A type for a comma list of names drawn from ``known`` (an empty list stays empty: "all")."""

    def parse(text: str) -> list[str]:
        names = _items(text)
        if unknown := [s for s in names if s not in known]:
            raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(unknown)}; choose from {', '.join(known)}")
        return names

    return parse


def paper_names(text: str) -> list[str]:
    """A comma list of instance names of ``instances/paper`` (file stems), at least one."""
    names = names_from(sorted(p.stem for p in PAPER.glob("*.json")), "paper instance")(text)
    if not names:
        raise argparse.ArgumentTypeError("give at least one paper instance name")
    return names


def paper_name(text: str) -> str:
    """One instance name of ``instances/paper``."""
    names = paper_names(text)
    if len(names) != 1:
        raise argparse.ArgumentTypeError(f"give one paper instance name, not {len(names)}")
    return names[0]


def load_paper(name: str) -> Instance:
    return files.load_instance(PAPER / f"{name}.json")


def instance_file(text: str) -> str:
    """The absolute path of an instance file that loads, given absolute or from the project root."""
    path = ROOT / text
    try:
        files.load_instance(path)
    except InstanceError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return str(path)


def instance_files(text: str) -> list[str]:
    """A comma list of :func:`instance_file` (none: the script's default set)."""
    return [instance_file(s) for s in _items(text)]


def seconds(text: str) -> float:
    """A time limit: a finite number of seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"not a number of seconds >= 0: {text!r}")
    return value


def int_list(text: str) -> list[int]:
    """A non-empty comma list of integers >= 0 (seeds)."""
    try:
        values = [int(s) for s in _items(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma list of integers: {text!r}") from None
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError(f"give one or more integers >= 0, not {text!r}")
    return values
