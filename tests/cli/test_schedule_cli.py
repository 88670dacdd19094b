"""``topoopt schedule INSTANCE SOLUTION`` through :func:`topoopt_ilp.cli.main`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import INSTANCES
from topoopt_ilp.cli import main
from topoopt_ilp.files import load_instance, save_solution
from topoopt_ilp.methods import solve

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


@pytest.mark.parametrize(
    "argv_tail, needle",
    [
        ([str(INSTANCES / "dlrm-like-6.json")], "workload"),
        ([DLRM, "/nonexistent/solution.json"], "solution.json"),
    ],
)
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


def test_a_unit_coarser_than_every_task_is_bad_input(solution_file, capsys):
    """--time-unit-us 1e12 made every task one unit: "optimal, makespan 1.9e+07 s" for a 10 ms
    iteration, which --check then accepted (a stress run's report)."""
    assert main(["schedule", DLRM, solution_file, "--time-unit-us", "1e12"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "coarser than the longest task" in err


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


# ----------------------------------------------------------------------------------------------
# --micro-batches
# ----------------------------------------------------------------------------------------------
def test_micro_batches_option(solution_file, capsys):
    assert main(["schedule", DLRM, solution_file, "--micro-batches", "2", "--json"]) == 0
    two = json.loads(capsys.readouterr().out)
    assert main(["schedule", DLRM, solution_file, "--json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert one["micro_batches"] == 1 and one["tasks"] == 125
    assert two["micro_batches"] == 2 and two["tasks"] == 237 and two["status"] == "optimal"
    assert two["lower_bounds"]["compute_s"] == pytest.approx(one["lower_bounds"]["compute_s"])
    assert two["lower_bounds"]["network_s"] == pytest.approx(one["lower_bounds"]["network_s"])
    assert two["evaluator"] == one["evaluator"]
    assert main(["schedule", DLRM, solution_file, "--micro-batches", "2", "--method", "heuristic"]) == 0
    assert "2 micro-batches" in capsys.readouterr().out


@pytest.mark.parametrize(
    "value, needle",
    [
        ("0", "--micro-batches must be an integer >= 1, got '0'"),
        ("-3", "--micro-batches must be an integer >= 1"),
        ("1.5", "--micro-batches must be an integer >= 1, got '1.5'"),
        ("two", "--micro-batches must be an integer >= 1"),
        ("1000000", "more than 200,000 tasks"),
        ("600", "less than one of its 64 samples each (batch 384): at most 64 micro-batches"),  # was scheduled
    ],
)
def test_bad_micro_batches_is_one_line_exit_2(solution_file, capsys, value, needle):
    assert main(["schedule", DLRM, solution_file, "--micro-batches", value]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1


# ----------------------------------------------------------------------------------------------
# Schedule files: --out, --check, read_schedule
# ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def schedule_file(solution_file, tmp_path_factory):
    path = tmp_path_factory.mktemp("schedfile") / "s.json"
    assert main(["schedule", DLRM, solution_file, "--micro-batches", "2", "--out", str(path)]) == 0
    return path


def _edited(tmp_path, schedule_file, edit, name="edited.json"):
    data = json.loads(schedule_file.read_text())
    edit(data)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


def test_out_states_what_the_graph_is_rebuilt_from(schedule_file, solution_file):
    from topoopt_ilp.models.schedule import file_sha256

    data = json.loads(schedule_file.read_text())
    assert data["format"] == "topoopt-schedule" and data["version"] == 2
    assert data["micro_batches"] == 2 and data["routing"] == "given" and data["time_unit_s"] == 1e-6
    assert data["forward_fraction"] == pytest.approx(1 / 3)
    assert data["instance_sha256"] == file_sha256(DLRM) and data["solution_sha256"] == file_sha256(solution_file)
    assert data["instance"] == DLRM and data["solution"] == solution_file
    assert len(data["tasks"]) == 237 and data["summary"]["micro_batches"] == 2


def test_check_a_written_schedule(schedule_file, solution_file, capsys):
    capsys.readouterr()
    assert main(["schedule", DLRM, solution_file, "--check", str(schedule_file)]) == 0
    out = capsys.readouterr().out
    assert ": valid" in out and "237 tasks, 2 micro-batches" in out
    makespan = json.loads(schedule_file.read_text())["makespan_s"]
    assert main(["schedule", DLRM, solution_file, "--check", str(schedule_file), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["valid"] and res["violations"] == 0 and res["makespan_s"] == makespan and res["micro_batches"] == 2


def test_check_names_a_precedence_violation(schedule_file, solution_file, tmp_path, capsys):
    """A micro-batch's forward moved to time 0, before the lookup that feeds it: exit 1, named."""
    from topoopt_ilp.files import load_solution
    from topoopt_ilp.schedule.iteration_graph import graph_from_solution

    g = graph_from_solution(load_instance(DLRM), load_solution(solution_file), micro_batches=2)
    target = next(
        g.tasks[b].name
        for a, b in g.edges.tolist()
        if g.tasks[a].kind == "lookup" and g.tasks[b].kind == "fwd" and g.tasks[b].micro_batch == 1
    )

    def edit(d):
        for t in d["tasks"]:
            if t["name"] == target:
                t["start_s"] = 0.0

    path = _edited(tmp_path, schedule_file, edit)
    assert main(["schedule", DLRM, solution_file, "--check", path]) == 1
    out = capsys.readouterr().out
    assert "invalid" in out and "first violation    precedence " in out and f"-> {target}: starts at 0 s" in out


def _first_task(d, kind):
    return next(t for t in d["tasks"] if t["kind"] == kind)


@pytest.mark.parametrize(
    "edit, needle",
    [
        # a coarser unit widened the makespan tolerance to one (false) unit: a later makespan passed
        (
            lambda d: d.update(time_unit_s=1.0, makespan_s=d["makespan_s"] + 0.5),
            "is not a whole number of time units of 1 s",
        ),
        (lambda d: d.update(bound_s=1e-4, gap=0.0), "is below"),
        (lambda d: d.update(gap=0.5), "gap 0.5 is not (makespan - bound) / makespan"),
        (lambda d: d.update(bound_s=d["makespan_s"] * 0.99, gap=0.01), "status optimal, but the bound"),
        (
            lambda d: _first_task(d, "block").update(server=_first_task(d, "block")["server"] + 1),
            "the file says server",
        ),
        (lambda d: _first_task(d, "fwd").update(duration_s=99.0), "the file says duration_s 99.0"),
        (lambda d: _first_task(d, "block").update(kind="fwd"), "the file says kind 'fwd', the task graph 'block'"),
    ],
)
def test_check_refuses_false_claims(schedule_file, solution_file, tmp_path, capsys, edit, needle):
    """--check accepted a false makespan under an edited time unit, a bound below what every
    schedule meets, an inconsistent gap or status, and edited task descriptions (user test 6)."""
    path = _edited(tmp_path, schedule_file, edit)
    assert main(["schedule", DLRM, solution_file, "--check", path]) == 1
    out = capsys.readouterr().out
    assert "invalid" in out and needle in out


def test_check_refuses_a_list_schedule_that_claims_optimal(solution_file, tmp_path, capsys):
    path = tmp_path / "h.json"
    assert main(["schedule", DLRM, solution_file, "--method", "heuristic", "--out", str(path)]) == 0
    assert main(["schedule", DLRM, solution_file, "--check", str(path)]) == 0
    data = json.loads(path.read_text())
    data.update(status="optimal", bound_s=data["makespan_s"], gap=0.0)
    path.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["schedule", DLRM, solution_file, "--check", str(path)]) == 1
    assert "list scheduling's bound is" in capsys.readouterr().out


@pytest.mark.parametrize(
    "edit, needle",
    [
        (lambda d: d.update(version=1), "version: unsupported version 1"),
        (lambda d: d.update(format="topoopt-solution"), "format: expected 'topoopt-schedule', got 'topoopt-solution'"),
        (lambda d: d.pop("micro_batches"), "missing required key 'micro_batches'"),
        (lambda d: d.update(colour="red"), "unknown key 'colour'"),
        (lambda d: d.update(micro_batches=0), "micro_batches: must be >= 1, got 0"),
        (lambda d: d["tasks"][3].update(start_s=-1.0), "tasks[3].start_s"),
        (lambda d: d["tasks"][3].update(end_s="soon"), "tasks[3].end_s"),
        (lambda d: d["tasks"][3].update(colour="red"), "tasks[3]: unknown key 'colour'"),
        (lambda d: d["tasks"][3].pop("start_s"), "tasks[3]: missing required key 'start_s'"),
        (lambda d: d["tasks"].pop(3), "is missing from the schedule"),
        (
            lambda d: d["tasks"].append(
                {"name": "fwd L9 r0", "kind": "compute", "start_s": 0, "end_s": 0, "duration_s": 0}
            ),
            "'fwd L9 r0' is not in the iteration graph",
        ),
        # every key the tool writes is required (the summary only comes from the CLI), and values are typed
        (lambda d: d.pop("bound_s"), "missing required key 'bound_s'"),
        (lambda d: d.pop("wall_time_s"), "missing required key 'wall_time_s'"),
        (lambda d: d["tasks"][3].pop("kind"), "tasks[3]: missing required key 'kind'"),
        (lambda d: d.update(version=2.0), "version: unsupported version 2.0"),
        (
            lambda d: d["tasks"][0].update(server="0"),
            "tasks[0].server: expected an integer, got a string (task 'block B0 mb0')",
        ),
        (lambda d: d["tasks"].append(dict(d["tasks"][0])), "appears twice"),
        (lambda d: d.update(instance_sha256="0" * 64), "made from another instance file"),
        (lambda d: d.update(solution_sha256=None), "records no SHA-256 of its solution file"),
        # integers too large for a float or for the graph: refused by their length, never echoed in full
        (lambda d: d.update(bound_s=10**400), "bound_s: must be a finite number, got an integer of 401 digits"),
        (
            lambda d: d["tasks"][2].update(end_s=10**400),
            "tasks[2].end_s: must be a finite number, got an integer of 401 digits (task 'block B1 mb0')",
        ),
        (lambda d: d.update(micro_batches=10**4000), "micro_batches: must be <= 200000, got an integer of 4001 digits"),
        (lambda d: d["tasks"][0].update(server={"a": {"a": {"a": 1}}}), "tasks[0].server"),
    ],
)
def test_a_bad_schedule_file_is_one_line_exit_2(schedule_file, solution_file, tmp_path, capsys, edit, needle):
    path = _edited(tmp_path, schedule_file, edit)
    assert main(["schedule", DLRM, solution_file, "--check", path]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1 and err.startswith(f"error: {path}"), err
    assert len(err) < 400, err


def test_a_number_that_overflows_to_infinity_is_refused(schedule_file, solution_file, tmp_path, capsys):
    """JSON's Infinity is malformed, but 1e999 is valid JSON that reads as infinity."""
    for key in ("makespan_s", "wall_time_s", "time_unit_s"):
        path = tmp_path / f"{key}.json"
        path.write_text(re.sub(rf'"{key}": [^,]+,', f'"{key}": 1e999,', Path(schedule_file).read_text(), count=1))
        assert main(["schedule", DLRM, solution_file, "--check", str(path)]) == 2
        err = capsys.readouterr().err.strip()
        assert f"{key}: must be a finite number, got inf" in err and len(err.splitlines()) == 1, err


def test_check_against_other_files_or_malformed_json_exits_2(schedule_file, solution_file, tmp_path, capsys):
    import shutil
    from dataclasses import replace

    other = tmp_path / "other.json"  # the same design, but another file: refused by its SHA-256
    again = solve(load_instance(DLRM), method="heuristic", seed=1)
    save_solution(replace(again, wall_time_s=again.wall_time_s + 1.0), other, directed=False)  # never byte-equal
    assert main(["schedule", DLRM, str(other), "--check", str(schedule_file)]) == 2
    assert "made from another solution file" in capsys.readouterr().err
    inst = tmp_path / "inst.json"
    shutil.copy(DLRM, inst)
    inst.write_text(inst.read_text() + "\n")
    assert main(["schedule", str(inst), solution_file, "--check", str(schedule_file)]) == 2
    assert "made from another instance file" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text(schedule_file.read_text()[:-20])
    assert main(["schedule", DLRM, solution_file, "--check", str(broken)]) == 2
    assert "malformed JSON" in capsys.readouterr().err
    assert main(["schedule", DLRM, solution_file, "--check", solution_file]) == 2
    assert "(this is a solution file)" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra",
    [
        ["--out", "x.json"],
        ["--method", "heuristic"],
        ["--micro-batches", "2"],
        ["--time-unit-us", "5"],
        ["--routing", "given"],
        ["--time-limit", "3"],
    ],
)
def test_check_refuses_scheduling_options(schedule_file, solution_file, capsys, extra):
    assert main(["schedule", DLRM, solution_file, "--check", str(schedule_file)] + extra) == 2
    assert f"{extra[0]} does not go with --check" in capsys.readouterr().err


def test_python_round_trip(solution_file, tmp_path):
    from topoopt_ilp.files import load_solution
    from topoopt_ilp.models.schedule import file_sha256, list_schedule, read_schedule, write_schedule
    from topoopt_ilp.schedule.iteration_graph import check_schedule, graph_from_solution

    inst = load_instance(DLRM)
    g = graph_from_solution(inst, load_solution(solution_file), micro_batches=3, routing="shortest_path")
    sched = list_schedule(g, time_unit_s=1e-5)
    path = tmp_path / "api.json"
    write_schedule(path, g, sched, instance_sha256=file_sha256(DLRM), solution_sha256=file_sha256(solution_file))
    sf = read_schedule(path)
    assert (sf.micro_batches, sf.routing, sf.time_unit_s, sf.forward_fraction) == (
        3,
        "shortest_path",
        1e-5,
        g.forward_fraction,
    )
    assert sf.instance_sha256 == file_sha256(DLRM) and sf.instance is None
    back = sf.schedule(g)
    assert back.makespan_s == sched.makespan_s and back.status == "feasible" and back.method == "heuristic"
    assert (back.start_s == sched.start_s).all() and (back.end_s == sched.end_s).all()
    assert check_schedule(g, back) == []
    with pytest.raises(Exception, match="micro_batches 3, the graph 1"):
        sf.schedule(graph_from_solution(inst, load_solution(solution_file)))
