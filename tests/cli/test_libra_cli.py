"""``topoopt bandwidth`` (LIBRA's bandwidth allocation) as a user runs it: table, JSON, --out,
exit codes, one-line errors."""

from __future__ import annotations

import json

import pytest

from conftest import INSTANCES
from topoopt_ilp.cli import main
from topoopt_ilp.libra.problem import evaluate_bandwidths, load_hierarchy

GPT3 = str(INSTANCES / "libra" / "gpt3-4d.json")
PPC = str(INSTANCES / "libra" / "gpt3-3d-perf-per-cost.json")
SMALL = str(INSTANCES / "libra" / "small-2d.json")


def test_table_shows_every_dimension_and_the_equal_split(capsys):
    assert main(["bandwidth", GPT3]) == 0
    out = capsys.readouterr().out
    assert "status: optimal" in out
    for name, kind in (("chiplet", "ring"), ("package", "fully_connected"), ("node", "ring"), ("pod", "switch")):
        assert any(line.split()[:2] == [name, kind] for line in out.splitlines())
    assert "equal split" in out and "250.0000" in out and "x faster" in out
    assert "budget: 1000 GB/s per NPU" in out


def test_json_output_matches_the_evaluator(capsys):
    assert main(["bandwidth", GPT3, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["format"] == "topoopt-libra-solution" and data["status"] == "optimal"
    assert data["gap"] <= 1e-6 and data["instance"] == "gpt3-4d.json"
    problem = load_hierarchy(GPT3)
    bw = [data["bandwidths_gbps"][n] for n in problem.dimension_names]
    ev = evaluate_bandwidths(problem, bw)
    assert ev.feasible and data["iteration_time_s"] == pytest.approx(ev.iteration_time_s, rel=1e-12)
    assert data["equal_split"]["bandwidths_gbps"] == {n: 250.0 for n in problem.dimension_names}
    assert data["speedup_vs_equal"] > 1


def test_perf_per_cost_from_the_file_and_from_the_option(capsys):
    assert main(["bandwidth", PPC]) == 0
    out = capsys.readouterr().out
    assert "objective perf_per_cost" in out and "time x cost" in out and "(spent exactly)" in out
    assert main(["bandwidth", SMALL, "--objective", "perf_per_cost", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["objective_name"] == "perf_per_cost"


def test_out_is_written_atomically(tmp_path, capsys):
    out = tmp_path / "sol.json"
    assert main(["bandwidth", SMALL, "--out", str(out), "--backend", "highs", "--gap", "1e-4"]) == 0
    data = json.loads(out.read_text())
    assert data["status"] == "optimal" and set(data["bandwidths_gbps"]) == {"ring", "switch"}
    assert [p.name for p in tmp_path.iterdir()] == ["sol.json"]
    assert "status: optimal" in capsys.readouterr().out


def test_out_in_a_missing_directory_is_refused_before_solving(tmp_path, capsys):
    assert main(["bandwidth", SMALL, "--out", str(tmp_path / "no" / "sol.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not exist" in err


def _write(tmp_path, edit):
    data = json.loads((INSTANCES / "libra" / "small-2d.json").read_text())
    edit(data)
    path = tmp_path / "case.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_infeasible_exits_3_with_the_reason(tmp_path, capsys):
    path = _write(tmp_path, lambda d: d["constraints"].update(fixed_gbps={"ring": 300, "switch": 150}))
    out = tmp_path / "sol.json"
    assert main(["bandwidth", path, "--out", str(out)]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "infeasible" in err and "more than the budget" in err
    assert json.loads(out.read_text())["status"] == "infeasible"


def test_time_limit_zero_exits_4(capsys):
    assert main(["bandwidth", GPT3, "--time-limit", "0"]) == 4
    captured = capsys.readouterr()
    assert "no_solution" in captured.out and captured.err.count("\n") == 1


def test_a_run_without_a_result_keeps_an_existing_out_file(tmp_path, capsys):
    """The rule of every --out (as for solve): exit 4 never replaces a file; with none, the record is written."""
    out = tmp_path / "bw.json"
    out.write_text('{"earlier": "result"}')
    assert main(["bandwidth", SMALL, "--time-limit", "0", "--out", str(out)]) == 4
    assert "not replaced" in capsys.readouterr().err and out.read_text() == '{"earlier": "result"}'
    fresh = tmp_path / "fresh.json"
    assert main(["bandwidth", SMALL, "--time-limit", "0", "--out", str(fresh)]) == 4
    assert json.loads(fresh.read_text())["status"] == "no_solution"
    assert main(["bandwidth", SMALL, "--out", str(out)]) == 0  # a result replaces it
    assert json.loads(out.read_text())["status"] == "optimal"


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda d: d["constraints"].update(fixed_gbps={"ring": -5}), "constraints.fixed_gbps.ring: must be >= 0"),
        (lambda d: d["workload"]["communicators"].update(tp=[16, -1]), "larger than dimension 'ring'"),
        (lambda d: d["dimensions"][0].update(kind="torus"), "dimensions[0].kind: must be one of"),
    ],
)
def test_bad_files_exit_2_in_one_line(tmp_path, capsys, edit, message):
    path = _write(tmp_path, edit)
    assert main(["bandwidth", path]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and path in err and "Traceback" not in err


def test_malformed_json_exits_2(tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    assert main(["bandwidth", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "malformed JSON" in err


@pytest.mark.parametrize(
    "args,message",
    [
        (["bandwidth", GPT3, "--backend", "nosuch"], "unknown solver backend"),
        (["bandwidth", GPT3, "--backend", "cpsat"], "all-integer"),
        (["bandwidth", GPT3, "--objective", "perf_per_cost"], "no optimum"),
        (["bandwidth", str(INSTANCES / "libra" / "missing.json")], "cannot read file"),
    ],
)
def test_bad_requests_exit_2(capsys, args, message):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


@pytest.mark.parametrize(
    "args",
    [
        ["bandwidth", GPT3, "--gap", "-1"],
        ["bandwidth", GPT3, "--time-limit", "x"],
        ["bandwidth", GPT3, "--objective", "throughput"],
    ],
)
def test_bad_options_exit_2(args):
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 2
