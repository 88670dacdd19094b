"""``topoopt compare``: every method scored by the evaluator, distances from the proven optimum."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from conftest import INSTANCES
from topoopt_ilp import files
from topoopt_ilp.cli import main
from topoopt_ilp.core.instance import Cluster, Instance
from topoopt_ilp.core.workload import Layer, Workload
from topoopt_ilp.errors import InputError
from topoopt_ilp.experiments.compare import CompareRow, compare, format_rows


def tiny_workload() -> Instance:
    layers = (
        Layer(name="a", compute_s=4e-3, param_bytes=4e7, activation_bytes=2e7, configs=(1, 2)),
        Layer(name="b", compute_s=4e-3, param_bytes=4e7, activation_bytes=1e6, configs=(1, 2)),
    )
    return Instance(
        cluster=Cluster(servers=4, degree=2, link_bandwidth_gbps=100),
        workload=Workload(layers=layers, batch_size=64, server_memory_bytes=1e12),
    )


def test_demand_instance_distances_from_the_optimum():
    inst = files.load_instance(INSTANCES / "coprime-circulant-32.json")
    rows = compare(inst, ["heuristic", "exact"], ["highs"], 60)
    heur, exact = rows
    assert exact.status == "optimal" and exact.verified and heur.verified
    assert exact.distance == 0.0 and exact.reference == "optimum"
    assert heur.distance == pytest.approx((heur.objective - exact.objective) / exact.objective)  # aspl: minimised
    table = format_rows(inst, rows)
    assert table.splitlines()[0].split()[:4] == ["method", "backend", "status", inst.objective]


def test_workload_compares_alternating_with_the_joint_optimum(tmp_path, capsys):
    inst = tiny_workload()
    rows = compare(inst, time_limit_s=60)
    assert [r.method for r in rows] == ["heuristic", "alternating", "exact"]
    by = {r.method: r for r in rows}
    assert by["exact"].status == "optimal" and all(r.verified for r in rows)
    assert all(r.reference == "optimum" for r in rows)
    assert by["exact"].objective <= by["alternating"].objective <= by["heuristic"].objective * (1 + 1e-12)
    path = tmp_path / "w.json"
    files.save_instance(inst, path)
    assert main(["compare", str(path), "--format", "json", "--time-limit", "60"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["method"] for r in data["rows"]] == ["heuristic", "alternating", "exact"]
    assert main(["compare", str(path), "--methods", "heuristic,nonsense"]) == 2
    assert "unknown method" in capsys.readouterr().err


def test_large_workload_exact_row_says_why():
    inst = files.load_instance(INSTANCES / "paper" / "bert-128-d8.json")
    rows = compare(inst, ["heuristic", "exact"], ["highs"], 5)
    exact = rows[1]
    assert exact.status == "error" and "alternating" in exact.message
    assert rows[0].reference == "best" and rows[0].distance == 0.0


def test_native_options_reach_each_backends_exact_solve(capsys):
    """Each exact row reads its own backend's entry; a rejected parameter makes that row an error,
    not the others; on the command line an option for a backend not compared is refused."""
    mix = str(INSTANCES / "mix-8.json")
    inst = files.load_instance(mix)
    native = {"highs": {"no_such_parameter": 1}, "cbc": {"cuts": "off"}}
    highs, cbc = compare(inst, ["exact"], ["highs", "cbc"], 30, native_options=native)
    assert highs.status == "error" and "rejected option no_such_parameter" in highs.message
    assert cbc.status in ("optimal", "feasible") and cbc.verified
    assert main(["compare", mix, "--methods", "exact", "--backends", "highs", "--solver-option", "cbc.cuts=off"]) == 2
    assert "is for cbc" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--methods", ",,"], "no methods given"),
        (["--methods", ""], "no methods given"),
        (["--backends", ""], "no backends given"),
        (["--methods", "heuristic,exact", "--backends", " , "], "no backends given"),
        (["--methods", "heuristic", "--backends", "scip"], "--backends applies to the exact method"),  # was ignored
        (
            ["--methods", "heuristic", "--solver-option", "highs.threads=1"],
            "--solver-option applies to the exact method",
        ),
        (["--methods", "heuristic", "--solver-option", "scip.x=1"], "--solver-option applies to the exact method"),
        (
            ["--backends", "scip", "--solver-option", "scip.limits/gap=0.1"],
            "scip takes no native parameters",
        ),  # was an error row
    ],
)
def test_empty_methods_or_backends_are_bad_usage(args, message, capsys):
    assert main(["compare", str(INSTANCES / "mix-8.json"), *args]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.err.count("\n") == 1 and captured.out == ""


def test_empty_lists_are_refused_by_the_api_too():
    inst = files.load_instance(INSTANCES / "mix-8.json")
    with pytest.raises(InputError, match="no methods given"):
        compare(inst, [])
    with pytest.raises(InputError, match="no backends given"):
        compare(inst, ["exact"], [])
    assert [r.method for r in compare(inst, ["heuristic"], [])] == ["heuristic"]  # no exact, no backend needed


def test_a_failed_rows_message_is_shown_in_full():
    inst = files.load_instance(INSTANCES / "mix-8.json")
    long = "backend cpsat cannot honour continuous variables (this model has flow variables) " + "x" * 100 + " END"
    rows = [
        CompareRow("heuristic", "-", "feasible", 1.0, None, None, 0.0, True),
        CompareRow("exact", "cpsat", "error", None, None, None, 0.0, None, message=long),
    ]
    text = format_rows(inst, rows)
    assert long in text and "error (note 1)" in text
    assert text.splitlines()[-1] == f"note 1: exact [cpsat]: {long}"


def test_a_method_or_backend_named_twice_runs_once():
    from topoopt_ilp.experiments.compare import plan_runs

    inst = files.load_instance(INSTANCES / "mix-8.json")
    runs = plan_runs(inst, ["exact", "heuristic", "exact"], ["highs", "cbc", "highs"])
    assert [(m, b) for m, b, _ in runs] == [("exact", "highs"), ("exact", "cbc"), ("heuristic", "-")]


def test_a_row_that_fails_verification_is_not_a_solution(tmp_path, capsys):
    """Two disjoint triangles fixed, one AllReduce over all six servers: the heuristic's row is
    'feasible' at an infinite time and fails verification; compare exited 0 on it (audit)."""
    path = tmp_path / "disc.json"
    path.write_text(
        json.dumps(
            {
                "format": "topoopt-instance",
                "version": 1,
                "cluster": {"servers": 6, "degree": 2, "link_bandwidth_gbps": 100},
                "fixed_topology": {"links": [[0, 1, 1], [1, 2, 1], [2, 0, 1], [3, 4, 1], [4, 5, 1], [5, 3, 1]]},
                "demand": {"allreduce": [{"members": [0, 1, 2, 3, 4, 5], "bytes": 1e6}]},
            }
        )
    )
    # That design carries nothing between the triangles: the heuristic now says infeasible (exit 3).
    assert main(["compare", str(path), "--methods", "heuristic"]) == 3
    captured = capsys.readouterr()
    assert "infeasible (note 1)" in captured.out and "(proven infeasible)" in captured.err
    assert (
        "note 1: heuristic: the fixed topology cannot carry the demand: no path from 0 to 3 in the topology, but both are members of AllReduce group 0"
        in captured.out
    )
    # and a row that fails verification still never counts as a solution
    from topoopt_ilp.cli.compare import rows_exit

    unverified = CompareRow("heuristic", "-", "feasible", float("inf"), None, None, 0.0, False)
    assert rows_exit([unverified]) == 1 and rows_exit([unverified, replace(unverified, verified=True)]) == 0


def test_csv_names_the_objective_and_json_has_null_for_no_reference():
    """The CSV lost the objective's name (the table heads its column with it; sweep's CSV has it),
    and JSON said "reference": "" next to "distance": null."""
    import csv
    import io as _io

    inst = files.load_instance(INSTANCES / "mix-8.json")
    rows = [
        CompareRow("heuristic", "-", "feasible", 1.0, None, None, 0.0, True, distance=0.5, reference="bound"),
        CompareRow("exact", "cpsat", "error", None, None, None, 0.0, None, message="refused"),
    ]
    table = list(csv.DictReader(_io.StringIO(format_rows(inst, rows, "csv"))))
    assert [r["objective_name"] for r in table] == ["iteration_time"] * 2 and table[0]["objective"] == "1.0"
    data = json.loads(format_rows(inst, rows, "json"))
    assert [r["reference"] for r in data["rows"]] == ["bound", None] and data["rows"][1]["distance"] is None


def test_every_method_at_its_limit_without_a_solution_exits_4(capsys):
    """Exit code 4 = limit reached without a solution (docs/guide/cli.md): a table of no_solution rows
    exits 4, not 1."""
    assert main(["compare", str(INSTANCES / "mix-8.json"), "--methods", "exact", "--time-limit", "0"]) == 4
    assert "no_solution" in capsys.readouterr().out
    from topoopt_ilp.cli.compare import rows_exit

    limit = CompareRow("exact", "highs", "no_solution", None, None, None, 0.0, None)
    assert rows_exit([limit, replace(limit, backend="cbc")]) == 4
    assert rows_exit([limit, CompareRow.failed("heuristic", "-", "refused")]) == 1  # not only limits: 1
    assert rows_exit([limit, replace(limit, status="infeasible")]) == 3  # a proof wins
    assert rows_exit([limit, replace(limit, status="feasible", verified=True)]) == 0


def test_every_method_in_error_is_not_called_a_verification_failure(capsys):
    """compare and sweep said 'no method found a solution that passes verification' when the only
    row was an error (exact on an instance that fixes the topology): nothing had been verified."""
    fixed = str(INSTANCES / "fixed-ring-8.json")
    for argv in (["compare", fixed, "--methods", "exact"], ["sweep", fixed, "--methods", "exact", "--quiet"]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert "every method stopped with an error" in err and "verification" not in err, argv
    from topoopt_ilp.cli.compare import no_solution_reason

    error = CompareRow.failed("exact", "highs", "refused")
    unverified = CompareRow("heuristic", "-", "feasible", 1.0, None, None, 0.0, False)
    assert "passes verification" in no_solution_reason(1, [error, unverified])


def test_an_optimum_among_candidate_rings_is_a_note_in_compare_and_solve(tmp_path, capsys):
    """An AllReduce over 8 servers has more members than every ring order is tried for: the exact
    row's status and bound hold among its candidate rings, which the table's note and solve say."""
    from conftest import minimal

    path = tmp_path / "ar8.json"
    path.write_text(json.dumps(minimal(demand={"allreduce": [{"members": "all", "bytes": 1e6}]})))
    assert main(["compare", str(path), "--methods", "exact", "--time-limit", "30"]) == 0
    out = capsys.readouterr().out
    assert "(note 1)" in out and "candidate rings only" in out and "group 0 (8 members)" in out
    assert main(["solve", str(path), "--method", "exact", "--time-limit", "30"]) == 0
    assert "(status and bound among its candidate rings: rings_restricted below)" in capsys.readouterr().out


def test_progress_names_each_solve_before_it_runs_and_the_exact_solves_report():
    inst = files.load_instance(INSTANCES / "mix-8.json")
    steps, reports = [], []
    rows = compare(
        inst,
        ["heuristic", "exact"],
        ["highs"],
        60,
        progress=lambda *step: steps.append(step),
        solver_progress=reports.append,
    )
    assert steps == [(0, 2, "heuristic"), (1, 2, "exact [highs]"), (2, 2, "")]
    assert [r.status for r in rows] == ["feasible", "optimal"]
    assert reports and all(set(r) == {"incumbent", "bound", "gap"} for r in reports)
    unwatched = compare(inst, ["heuristic", "exact"], ["highs"], 60)
    assert [(r.status, r.objective) for r in rows] == [(r.status, r.objective) for r in unwatched]
