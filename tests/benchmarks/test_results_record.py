"""benchmarks/_results.py: the record a script writes with --out (fields, atomic write, NaN -> null,
the default path) and the tables that print each row from the values the record keeps."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import _results  # noqa: E402
from _results import Column, Record, Table, add_out_argument  # noqa: E402


def _parse(*argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=float, default=60.0)
    ap.add_argument("--sizes", default="8x2,8x3")
    add_out_argument(ap)
    return ap.parse_args(list(argv))


def test_out_alone_or_auto_is_the_dated_default_path_and_a_value_is_that_path(tmp_path, monkeypatch):
    monkeypatch.setattr(_results, "RESULTS", tmp_path / "results")
    assert _parse().out is None
    assert _parse("--out").out == _parse("--out", "auto").out == "auto"
    argv = ["benchmarks/demo.py", "--out"]
    rec = Record(_parse("--out"), argv=argv)
    assert rec.path == tmp_path / "results" / f"demo-{rec.date:%Y-%m-%d}.json"
    assert re.fullmatch(r"demo-\d{4}-\d{2}-\d{2}\.json", rec.path.name)
    written = rec.write()
    assert written == rec.path and written.exists()
    assert Record(_parse("--out", str(tmp_path / "x.json")), argv=argv).path == tmp_path / "x.json"
    assert Record(_parse(), argv=["benchmarks/demo.py"]).write() is None  # no --out: nothing written
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted(["results", written.name])


def test_the_record_holds_every_field(tmp_path):
    args = _parse("--limit", "5", "--out", str(tmp_path / "r.json"))
    rec = Record(
        args,
        argv=["/somewhere/benchmarks/demo.py", "--limit", "5", "--sizes", "8x2 8x3", "--out", str(tmp_path / "r.json")],
    )
    t = rec.table("a title", [("instance", "<10"), ("time_s", ">7.2f"), ("ratio", ">6.1f", "x")])
    t.add("a", 1.25, 2.0)
    t.note("a note")
    rec.ratios["speed-up"] = 2.0
    data = json.loads(rec.write().read_text())
    assert set(data) == {"script", "command", "commit", "date", "machine", "parameters", "tables", "ratios"}
    assert data["script"] == "demo"
    assert data["command"] == f"python benchmarks/demo.py --limit 5 --sizes '8x2 8x3' --out {tmp_path / 'r.json'}"
    assert re.fullmatch(r"([0-9a-f]{4,40}(-dirty)?|unknown)", data["commit"])
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", data["date"])
    assert (
        data["machine"]
        == {"cores": os.cpu_count(), "platform": data["machine"]["platform"], "python": data["machine"]["python"]}
        and data["machine"]["platform"]
    )
    assert data["parameters"] == {"limit": 5.0, "sizes": "8x2,8x3"}  # the parsed arguments, --out aside
    assert data["tables"] == [
        {
            "title": "a title",
            "columns": ["instance", "time_s", "ratio"],
            "formats": ["{}", "{:.2f}", "{:.1f}x"],
            "rows": [["a", 1.25, 2.0]],
            "notes": ["a note"],
        }
    ]
    assert data["ratios"] == {"speed-up": 2.0}


def test_nan_and_infinity_are_null_and_numpy_values_plain_json(tmp_path):
    rec = Record({"out": str(tmp_path / "r.json"), "array": np.arange(3), "seed": np.int64(4)}, argv=["x.py"])
    t = rec.table("t", [("a", ">6.2f"), ("b", ">6.2f"), ("c", ">6"), ("d", ">6.2f"), ("e", ""), ("f", "")])
    line = t.add(float("nan"), np.float64("inf"), np.int64(7), np.float32(0.5), (1, np.int64(2)), {3: np.bool_(True)})
    rec.ratios["r"] = float("-inf")
    text = rec.write().read_text()
    assert "NaN" not in text and "Infinity" not in text
    data = json.loads(text)
    assert data["tables"][0]["rows"] == [[None, None, 7, 0.5, [1, 2], {"3": True}]]
    assert data["ratios"] == {"r": None} and data["parameters"] == {"array": [0, 1, 2], "seed": 4}
    assert line.split()[:4] == ["-", "-", "7", "0.50"]  # printed: a missing value is "-"
    assert _results.json_safe({"x": (math.nan, [np.nan, 1.5])}) == {"x": [None, [None, 1.5]]}


def test_the_write_is_atomic_an_interrupted_one_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    _results.write_json(path, {"a": 1})
    assert json.loads(path.read_text()) == {"a": 1}

    def fail(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(_results.os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        _results.write_json(path, {"a": 2})
    assert json.loads(path.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary file left behind


def _git(repo, *args):
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=repo, check=True, capture_output=True
    )


def test_commit_is_short_head_dirty_for_changed_tracked_files_but_not_results_and_unknown_outside_git(
    tmp_path, monkeypatch
):
    repo = tmp_path / "repo"
    (repo / "benchmarks" / "results").mkdir(parents=True)
    (repo / "code.py").write_text("1\n")
    (repo / "benchmarks" / "results" / "old.json").write_text("{}\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "c")
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True
    ).stdout.strip()
    monkeypatch.setattr(_results, "ROOT", repo)
    assert _results.commit() == head
    (repo / "new.py").write_text("untracked\n")
    (repo / "benchmarks" / "results" / "old.json").write_text('{"a": 1}\n')  # a re-run's record
    assert _results.commit() == head
    (repo / "code.py").write_text("2\n")
    assert _results.commit() == head + "-dirty"
    outside = tmp_path / "plain"
    outside.mkdir()
    monkeypatch.setattr(_results, "ROOT", outside)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    assert _results.commit() == "unknown"


def test_a_table_prints_aligned_lines_from_the_values_it_keeps():
    t = Table("t", [("instance", "<8"), "|", ("ms", ">7.3f"), ("speed-up", ">5.1f", "x"), ("ok", ">5"), ("nnz", ">8,")])
    assert t.header() == "instance | " + " " * 5 + "ms speed-up    ok      nnz"
    lines = [t.add("dlrm", 1.23456, 12.0, True, 1234567), t.add("a-longer-name", None, "n/a", False, 3)]
    assert lines[0] == "dlrm     |   1.235    12.0x  True 1,234,567"
    assert lines[1].startswith("a-longer-name |       -      n/a False")
    assert t.rows == [["dlrm", 1.23456, 12.0, True, 1234567], ["a-longer-name", None, "n/a", False, 3]]
    assert [c.template for c in t.columns] == ["{}", "{:.3f}", "{:.1f}x", "{}", "{:,}"]
    with pytest.raises(ValueError, match="2 values for 5 columns"):
        t.add(1, 2)
    with pytest.raises(ValueError, match="not a format spec"):
        Column("x", "9.3q")


def test_a_script_run_with_out_records_the_rows_it_printed(tmp_path):
    out = tmp_path / "srm.json"
    r = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "select_rule_misses.py"),
            "--nmin",
            "16",
            "--nmax",
            "18",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    assert data["script"] == "select_rule_misses"
    assert data["command"] == f"python benchmarks/select_rule_misses.py --nmin 16 --nmax 18 --out {out}"
    assert data["parameters"] == {"nmin": 16, "nmax": 18, "worst": 5}
    summary, worst = data["tables"]
    assert [row[0] for row in summary["rows"]] == [4, 6, 8]
    printed = r.stdout.splitlines()
    for row in worst["rows"]:  # each row printed with the formats the record keeps
        d, n, jumps = row[:3]
        assert any(line.split()[:2] == [str(d), str(n)] and f"{row[3]:.3f}" in line for line in printed)
