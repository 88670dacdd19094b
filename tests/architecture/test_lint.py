"""pyflakes-class checks (undefined names, unused imports and variables, syntax errors) over the tree."""

from __future__ import annotations

import shutil
import subprocess
import sys

from conftest import ROOT


def test_ruff_finds_no_undefined_or_unused_names():
    ruff = shutil.which("ruff", path=str(__import__("pathlib").Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is a test dependency (pip install -e '.[test]')"
    r = subprocess.run(
        [
            ruff,
            "check",
            "--select",
            "F,E9",
            "--output-format",
            "concise",
            "topoopt_ilp",
            "models",
            "solvers",
            "tests",
            "benchmarks",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr
