"""Every benchmark script takes --out (its --help lists it), so each can write its tables as a record."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import report  # noqa: E402

SUBCOMMANDS = {"graph_catalogue": [["generate"], ["search"]]}  # scripts whose options live on subcommands


def test_the_scripts_are_found():
    names = {p.stem for p in report.benchmark_scripts()}
    assert len(names) >= 25 and {"backends", "placement_scale", "graph_catalogue"} <= names
    assert not names & {"report", "small_workloads", "_args", "_results"}


@pytest.mark.parametrize("script", [p.stem for p in report.benchmark_scripts()])
def test_a_script_accepts_out(script):
    for sub in SUBCOMMANDS.get(script, [[]]):
        r = subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / f"{script}.py"), *sub, "--help"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
        )
        assert r.returncode == 0, r.stderr
        assert "--out [" in r.stdout, f"{script} {' '.join(sub)} --help lists no --out [PATH]"
