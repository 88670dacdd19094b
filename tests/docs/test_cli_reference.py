"""The command-line reference page is what the parser says (docs/hooks/cli_reference.py)."""

from __future__ import annotations

import importlib.util

from conftest import ROOT


def _hook():
    spec = importlib.util.spec_from_file_location("cli_reference", ROOT / "docs" / "hooks" / "cli_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_page_matches_the_parser():
    hook = _hook()
    assert hook.PAGE.read_text() == hook.render(), "run `python docs/hooks/cli_reference.py` and commit the page"


def test_every_command_has_a_section():
    text = _hook().render()
    for command in (
        "validate",
        "verify",
        "evaluate",
        "evaluate-paper",
        "solve",
        "compare",
        "sweep",
        "generate",
        "draw",
        "bandwidth",
        "import-libra",
        "schedule",
        "route",
    ):
        assert f"\n## topoopt {command}\n" in text
