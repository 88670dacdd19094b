"""``topoopt schedule INSTANCE SOLUTION`` through :func:`topoopt_ilp.cli.main`."""

from __future__ import annotations

import json

import pytest

from conftest import INSTANCES
from topoopt_ilp.cli import main
from topoopt_ilp.io import load_instance, save_solution
from topoopt_ilp.solve import solve

DLRM = str(INSTANCES / "dlrm-mini-6.json")


@pytest.fixture(scope="module")
def solution_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("sched") / "dlrm6.json"
    save_solution(solve(load_instance(DLRM), method="heuristic"), path, directed=False)
    return str(path)


def test_exact_prints_the_comparison(solution_file, capsys):
    assert main(["schedule", DLRM, solution_file]) == 0
    out = capsys.readouterr().out
    assert "(CP-SAT): optimal" in out
    for label in ("makespan", "overlap none", "overlap full", "busiest server", "busiest arc", "gap 0"):
        assert label in out


def test_json_and_out(solution_file, tmp_path, capsys):
    target = tmp_path / "sched.json"
    assert main(["schedule", DLRM, solution_file, "--json", "--out", str(target)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["status"] == "optimal" and summary["gap"] == 0.0
    assert summary["bound_s"] == pytest.approx(summary["makespan_s"])
    ev = summary["evaluator"]
    assert ev["overlap_full_s"] <= ev["overlap_none_s"]
    lb = summary["lower_bounds"]
    assert summary["makespan_s"] >= max(lb["compute_s"], lb["network_s"], lb["critical_path_s"]) - 1e-12
    data = json.loads(target.read_text())
    assert data["format"] == "topoopt-schedule" and data["makespan_s"] == summary["makespan_s"]
    assert len(data["tasks"]) == summary["tasks"]
    assert max(t["end_s"] + t.get("latency_s", 0.0) for t in data["tasks"]) == pytest.approx(summary["makespan_s"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sched.json"]  # no temporary left


def test_heuristic_is_feasible_and_not_better_than_exact(solution_file, capsys):
    assert main(["schedule", DLRM, solution_file, "--method", "heuristic", "--json"]) == 0
    heur = json.loads(capsys.readouterr().out)
    assert main(["schedule", DLRM, solution_file, "--json"]) == 0
    exact = json.loads(capsys.readouterr().out)
    assert heur["status"] == "feasible" and heur["method"] == "heuristic"
    assert exact["makespan_s"] <= heur["makespan_s"] + 1e-12


def test_time_limit_without_a_schedule_exits_4_and_writes_nothing(solution_file, tmp_path, capsys):
    target = tmp_path / "s.json"
    assert main(["schedule", DLRM, solution_file, "--time-limit", "0", "--out", str(target)]) == 4
    assert "no_solution" in capsys.readouterr().out
    assert not target.exists()


@pytest.mark.parametrize("argv_tail, needle", [
    ([str(INSTANCES / "dlrm-like-6.json")], "workload"),
    ([DLRM, "/nonexistent/solution.json"], "solution.json"),
])
def test_bad_input_is_one_line_exit_2(solution_file, capsys, argv_tail, needle):
    argv = ["schedule"] + argv_tail + ([solution_file] if len(argv_tail) == 1 else [])
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_bad_options_exit_2(solution_file, tmp_path, capsys):
    for extra in (["--time-limit", "-1"], ["--forward-fraction", "2"], ["--time-unit-us", "0"], ["--method", "magic"]):
        with pytest.raises(SystemExit) as exc:
            main(["schedule", DLRM, solution_file] + extra)
        assert exc.value.code == 2
    capsys.readouterr()
    assert main(["schedule", DLRM, solution_file, "--out", str(tmp_path / "missing" / "s.json")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["schedule", DLRM, solution_file, "--method", "heuristic", "--time-limit", "5"]) == 2
    assert "--method exact" in capsys.readouterr().err


@pytest.mark.parametrize("unit_us", ["10", "0.3", "1000"])
def test_a_unit_that_does_not_divide_the_hop_latency(solution_file, unit_us, capsys):
    """The grid holds each 1 us hop latency for whole units; the check took the makespan to be the
    exact end + latency and every such unit ended in "internal error" (a user's report)."""
    assert main(["schedule", DLRM, solution_file, "--time-unit-us", unit_us, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["makespan_s"] >= summary["lower_bounds"]["critical_path_s"] * (1 - 1e-9)


def test_a_unit_too_fine_is_bad_input(solution_file, capsys):
    assert main(["schedule", DLRM, solution_file, "--time-unit-us", "1e-15"]) == 2
    assert "too fine" in capsys.readouterr().err


def test_out_may_not_overwrite_the_inputs(solution_file, tmp_path, capsys):
    import shutil

    copy = tmp_path / "sol.json"
    shutil.copy(solution_file, copy)
    before = copy.read_text()
    assert main(["schedule", DLRM, str(copy), "--out", str(copy)]) == 2
    assert "the schedule would overwrite it" in capsys.readouterr().err and copy.read_text() == before


def test_a_short_time_limit_keeps_the_list_schedule(solution_file, monkeypatch, capsys):
    """CP-SAT finding nothing in its time gave no_solution although the list schedule it started
    from was in hand; a time limit of 0 still runs nothing (exit 4), as for every exact method."""
    from ortools.sat.python import cp_model

    real = cp_model.CpSolver.solve

    def finds_nothing(self, model, *args):
        real(self, cp_model.CpModel())  # a real (empty) solve, so that the solver's statistics exist
        return cp_model.UNKNOWN

    monkeypatch.setattr(cp_model.CpSolver, "solve", finds_nothing)
    assert main(["schedule", DLRM, solution_file, "--time-limit", "5"]) == 0
    out = capsys.readouterr().out
    assert "(CP-SAT): feasible" in out and "list schedule (CP-SAT found no schedule" in out
    assert main(["schedule", DLRM, solution_file, "--time-limit", "0"]) == 4
    assert "no_solution" in capsys.readouterr().err
