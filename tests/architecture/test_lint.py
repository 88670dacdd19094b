"""Lint and format: the rules of ``[tool.ruff]`` in pyproject.toml (pyflakes, syntax errors, import
order, pyupgrade) and ``ruff format`` hold over the whole tree."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

TREE = ["topoopt_ilp", "models", "solvers", "tests", "benchmarks"]


def _ruff() -> str:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is a test dependency (pip install -e '.[test]')"
    return ruff


def test_ruff_rules_hold():
    r = subprocess.run(
        [_ruff(), "check", "--output-format", "concise", *TREE], cwd=ROOT, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_tree_is_formatted():
    r = subprocess.run([_ruff(), "format", "--check", *TREE], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, "run `ruff format` (files below would change):\n" + r.stdout + r.stderr
