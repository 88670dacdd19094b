"""``topoopt solve INSTANCE --scenarios worst|mean`` and ``topoopt evaluate --scenario K``: the
table's times are what ``evaluate --scenario K`` gives for the written robust design, the written
design verifies, and bad input stops before any solve with one line and exit 2."""

from __future__ import annotations

import json

import pytest

from conftest import INSTANCES
from topoopt_ilp.cli import main

MOE = INSTANCES / "moe" / "tiny-moe-6-d2-zipf1.5.json"


def solve_json(capsys, tmp_path, *extra):
    out = tmp_path / "robust.json"
    code = main(["solve", str(MOE), "--scenarios", *extra, "--out", str(out), "--json"])
    return code, json.loads(capsys.readouterr().out), out


def evaluated(capsys, solution, k, routing):
    assert main(["evaluate", str(MOE), str(solution), "--scenario", str(k), "--routing", routing, "--json"]) == 0
    return json.loads(capsys.readouterr().out)["iteration_time_s"]


@pytest.mark.parametrize("method, routing", [("exact", "optimal"), ("heuristic", "given")])
def test_the_table_is_what_evaluate_gives_on_each_scenario(capsys, tmp_path, method, routing):
    code, shown, out = solve_json(capsys, tmp_path, "worst", "--method", method)
    assert code == 0
    rows = shown["rows"]
    assert len(rows) == 4
    for row in rows:
        assert evaluated(capsys, out, row["scenario"], routing) == pytest.approx(row["robust_s"], rel=1e-9)
        assert row["own_best_s"] <= row["robust_s"] * (1 + 1e-4) and row["price"] >= 1 - 1e-4
    assert main(["verify", str(MOE), str(out)]) == 0
    written = json.loads(out.read_text())
    summary = written["details"]["scenarios"]
    assert summary["worst_s"] == pytest.approx(max(r["robust_s"] for r in rows), rel=1e-12)
    assert written["status"] == "feasible"
    if method == "exact":
        assert summary["status"] == "optimal" and summary["bound_s"] <= summary["worst_s"]
    capsys.readouterr()


def test_the_exact_table_names_the_proof(capsys):
    assert main(["solve", str(MOE), "--scenarios", "worst", "--method", "exact"]) == 0
    text = capsys.readouterr().out
    assert "the scenario model's: optimal" in text and "evaluate --scenario K --routing optimal" in text


@pytest.mark.parametrize(
    "argv, words",
    [
        (["solve", str(INSTANCES / "mix-8.json"), "--scenarios", "worst"], "needs a job with an expert_load section"),
        (["solve", str(MOE), "--scenarios", "worst", "--method", "alternating"], "heuristic or exact"),
        (["solve", str(MOE), "--scenarios", "worst", "--time-limit", "5"], "--time-limit does not apply"),
        (["solve", str(MOE), "--scenarios", "mean", "--method", "exact", "--formulation", "naive"], "--formulation"),
        (["solve", str(MOE), "--scenarios", "best"], "invalid choice"),
        (["evaluate", str(MOE), str(MOE), "--scenario", "4"], "choose 0..3 or mean"),
        (
            ["solve", str(INSTANCES / "llm" / "mixtral-8x7b-128-d8-400g-zipf1.2.json"), "--scenarios", "worst"]
            + ["--method", "exact"],
            "at most 32",
        ),
        (["evaluate", str(INSTANCES / "mix-8.json"), "--scenario", "0"], "expert_load"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, argv, words):
    out = tmp_path / "never.json"
    if argv[0] == "solve":
        argv = [*argv, "--out", str(out)]
    try:
        code = main(argv)
    except SystemExit as stop:  # argparse's own refusal of a choice
        code = stop.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err, err
    assert not out.exists()


@pytest.mark.parametrize(
    "load, words",
    [([{"matrix": [[1] * 12] * 5}], "has 5 rows, expected 6"), ([{"matrix": [[1] * 11 + [-1]] * 6}], "must be >= 0")],
)
def test_a_bad_expert_load_matrix_stops_before_any_solve(capsys, tmp_path, load, words):
    doc = json.loads(MOE.read_text())
    doc["job"]["expert_load"] = load
    path, out = tmp_path / "bad.json", tmp_path / "never.json"
    path.write_text(json.dumps(doc))
    assert main(["solve", str(path), "--scenarios", "worst", "--method", "exact", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err and "bad.json" in err, err
    assert not out.exists()
