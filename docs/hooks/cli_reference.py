"""The command-line reference page, generated from the ``topoopt`` parser so that it never drifts.

``python docs/hooks/cli_reference.py`` rewrites ``docs/guide/cli-reference.md``; as a MkDocs hook it
does the same before each build, and ``tests/docs/test_cli_reference.py`` fails when the committed
page differs from what the parser says.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "guide" / "cli-reference.md"


def _help(parser: argparse.ArgumentParser) -> str:
    os.environ["COLUMNS"] = "100"  # one width for every machine, so the page is the same everywhere
    return parser.format_help().rstrip()


def render() -> str:
    """The page: every command's ``--help``, in the order ``topoopt --help`` lists them."""
    from topoopt_ilp.cli import build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = [
        "# Command-line reference",
        "",
        "Every command's `--help`, generated from the parser (`python docs/hooks/cli_reference.py`).",
        "For what the commands are for and worked examples, see [the command line](cli.md).",
        "",
        "## topoopt",
        "",
        "```text",
        _help(parser),
        "```",
    ]
    for name, sub in subparsers.choices.items():
        out += ["", f"## topoopt {name}", "", "```text", _help(sub), "```"]
    return "\n".join(out) + "\n"


def write() -> bool:
    """Rewrite the page when it differs; True when it changed."""
    text = render()
    if PAGE.exists() and PAGE.read_text() == text:
        return False
    PAGE.write_text(text)
    return True


def on_pre_build(config) -> None:  # MkDocs hook
    write()


if __name__ == "__main__":
    print(f"{'wrote' if write() else 'unchanged:'} {PAGE}")
