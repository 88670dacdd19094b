"""benchmarks/llm_jobs.py --quick: one job, both methods and both tuned rail networks, in one record."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT


def test_the_quick_run_writes_every_method_and_the_speedups(tmp_path):
    out, chart = tmp_path / "llm_jobs.json", tmp_path / "llm_jobs.png"
    script = ROOT / "benchmarks" / "llm_jobs.py"
    argv = [sys.executable, str(script), "--quick", "--chart", str(chart), "--out", str(out)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    record = json.loads(out.read_text())
    parts, speed = record["tables"]
    methods = [row[parts["columns"].index("method")] for row in parts["rows"]]
    assert methods == ["heuristic", "alternating", "rail_optimised", "rail_only"]
    times = dict(zip(methods, (row[parts["columns"].index("iteration_s")] for row in parts["rows"])))
    assert times["alternating"] <= times["heuristic"] * (1 + 1e-12)
    assert len(speed["rows"]) == 1 and chart.stat().st_size > 1000
