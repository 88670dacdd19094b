"""``topoopt collective INSTANCE SOLUTION`` through :func:`topoopt_ilp.cli.main`: the table against
closed forms on a ring, the schedule file and ``--check`` (hand-broken files fail it), bad input."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import INSTANCES
from conftest import cli_exit_code as _exit_code
from conftest import cli_json as _json
from topoopt_ilp.cli import main
from topoopt_ilp.files import load_instance, save_solution
from topoopt_ilp.methods import solve

RING = str(INSTANCES / "fixed-ring-8.json")  # 8 servers in a ring, 100 Gb/s links, hop latency 0
MIX = str(INSTANCES / "mix-8.json")
BANDWIDTH = 100e9 / 8
M = 8e6  # bytes: one chunk of 1 MB per server


def _solution(tmp_path_factory, instance: str, name: str) -> str:
    path = tmp_path_factory.mktemp("coll") / name
    save_solution(solve(load_instance(instance), method="heuristic"), path, directed=False)
    return str(path)


@pytest.fixture(scope="module")
def ring_solution(tmp_path_factory):
    return _solution(tmp_path_factory, RING, "ring.json")


@pytest.fixture(scope="module")
def mix_solution(tmp_path_factory):
    return _solution(tmp_path_factory, MIX, "mix.json")


def test_ring_allgather_closed_forms(ring_solution, capsys):
    """On the 8-ring: the ring schedule takes n - 1 = 7 steps of M / (n B), i.e. (n - 1)/n x M / B;
    the bidirectional optimum is 4 steps (7 chunks over 2 in-links, and the eccentricity 4)."""
    data = _json(
        ["collective", RING, ring_solution, "--collective", "allgather", "--bytes", str(M), "--method", "all"], capsys
    )
    rows = {r["method"]: r for r in data["results"]}
    assert list(rows) == ["ring", "greedy", "exact"]
    step = (M / 8) / BANDWIDTH
    assert rows["ring"]["steps"] == 7 and rows["ring"]["finish_s"] == pytest.approx(7 / 8 * M / BANDWIDTH)
    assert rows["exact"]["steps"] == 4 and rows["exact"]["status"] == "optimal" and rows["exact"]["gap"] == 0
    assert rows["exact"]["finish_s"] == pytest.approx(4 * step)
    assert rows["exact"]["algbw_Bps"] == pytest.approx(M / (4 * step))
    assert rows["ring"]["status"] == "feasible" and rows["ring"]["bound_steps"] == 4
    assert rows["ring"]["gap"] == pytest.approx(3 / 7)
    assert rows["greedy"]["steps"] >= 4


def test_table_shows_every_method(ring_solution, capsys):
    argv = ["collective", RING, ring_solution, "--collective", "allreduce", "--bytes", "1e6", "--method", "all"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("allreduce of 1e+06 bytes over 8 servers")
    assert lines[1].split() == ["method", "finish", "steps", "algbw", "status", "bound", "gap", "solve"]
    assert [line.split()[0] for line in lines[2:5]] == ["ring", "greedy", "exact"]
    assert " 14 " in lines[2]  # ring AllReduce: 2 (n - 1) steps


def test_ring_method_skipped_where_there_is_no_ring_schedule(ring_solution, capsys):
    data = _json(
        [
            "collective",
            RING,
            ring_solution,
            "--collective",
            "alltoall",
            "--bytes",
            "8e3",
            "--method",
            "all",
            "--time-limit",
            "20",
        ],
        capsys,
    )
    assert [r["method"] for r in data["results"]] == ["greedy", "exact"]
    assert "alltoall" in data["skipped"]["ring"]
    assert (
        main(["collective", RING, ring_solution, "--collective", "alltoall", "--bytes", "8e3", "--method", "ring"]) == 2
    )


@pytest.fixture(scope="module")
def mix_schedule(mix_solution, tmp_path_factory):
    path = tmp_path_factory.mktemp("collsched") / "s.json"
    argv = ["collective", MIX, mix_solution, "--collective", "allgather", "--bytes", "1e6", "--chunks", "2"]
    assert main([*argv, "--method", "all", "--time-limit", "30", "-o", str(path)]) == 0
    return path


def test_written_file_states_its_claims_and_passes_check(mix_schedule, mix_solution, capsys):
    from topoopt_ilp.models.schedule import file_sha256

    capsys.readouterr()
    data = json.loads(mix_schedule.read_text())
    assert data["format"] == "topoopt-collective-schedule" and data["version"] == 1
    assert data["instance_sha256"] == file_sha256(MIX) and data["solution_sha256"] == file_sha256(mix_solution)
    assert data["finish_s"] == pytest.approx(data["steps"] * data["step_s"])
    assert data["collective"] == {
        "kind": "allgather",
        "servers": list(range(8)),
        "bytes": 1e6,
        "chunks": 2,
        "root": None,
    }
    assert main(["collective", MIX, mix_solution, "--check", str(mix_schedule)]) == 0
    assert ": valid" in capsys.readouterr().out


def _edited(tmp_path, schedule, edit) -> str:
    data = json.loads(schedule.read_text())
    edit(data)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    return str(path)


def _send_before_held(d):
    """Move the first relayed send (a chunk leaving a server that is not its origin) to step 1, in
    place of the step-1 sends on its link (so that the link's capacity still holds)."""
    chunks = d["collective"]["chunks"]
    relayed = next(s for s in d["sends"] if s[2] != d["collective"]["servers"][s[1] // chunks])
    d["sends"] = [s for s in d["sends"] if not (s[0] == 1 and s[2:4] == relayed[2:4])]
    relayed[0] = 1


@pytest.mark.parametrize(
    "edit, needle",
    [
        (lambda d: d["sends"].pop(), "lacks the complete chunk"),
        (lambda d: d.update(steps=d["steps"] - 1, finish_s=(d["steps"] - 1) * d["step_s"]), "the replay finishes in"),
        (lambda d: d.update(finish_s=d["finish_s"] / 2), "the replay finishes at"),
        (_send_before_held, "does not hold the complete chunk"),
        (
            lambda d: d.update(bound_steps=d["steps"] + 1, bound_s=(d["steps"] + 1) * d["step_s"]),
            "is above the schedule",
        ),
        (lambda d: d.update(bound_steps=0, bound_s=0.0), "below the independent bound"),
        (lambda d: d.update(gap=0.5), "gap 0.5 is not"),
        (lambda d: d.update(method="heuristic", status="optimal"), "never claims optimal"),
        (lambda d: d["link"].update(alpha_s=1.0), "link.alpha_s 1, the instance's"),
        (lambda d: d.update(step_s=d["step_s"] / 2), "step length"),
    ],
)
def test_check_refuses_hand_broken_schedules(mix_schedule, mix_solution, tmp_path, capsys, edit, needle):
    path = _edited(tmp_path, mix_schedule, edit)
    assert main(["collective", MIX, mix_solution, "--check", path]) == 1
    out = capsys.readouterr().out
    assert "invalid" in out and needle in out, out


@pytest.mark.parametrize(
    "edit, needle",
    [
        (lambda d: d.pop("sends"), "missing required key 'sends'"),
        (lambda d: d.update(version=2), "version: unsupported version 2"),
        (lambda d: d.update(status="infeasible"), "status: must be optimal or feasible"),
        (lambda d: d["sends"][0].__setitem__(0, 0), "sends[0][0]"),
        (lambda d: d["sends"][1].__setitem__(4, "yes"), "sends[1][4]: expected true or false"),
        (lambda d: d["sends"].__setitem__(2, [1, 2]), "sends[2]: expected [step, chunk, src, dst, partial]"),
        (lambda d: d["collective"].update(kind="gather"), "collective.kind: must be one of"),
        (lambda d: d["collective"].update(bytes=-1), "collective.bytes"),
        (lambda d: d["collective"].update(chunks=10**400), "collective.chunks"),
        (lambda d: d.update(steps="x" * 10_000), "steps: expected an integer, got a string"),
        (lambda d: d.update(instance_sha256="00"), "instance_sha256: expected a SHA-256"),
        (lambda d: d.update(extra=1), "extra"),
        (
            lambda d: d["collective"].update(servers=list(range(100)), chunks=10_000),
            "collective.chunks: 100 servers x 1000000 chunks, more than the 10000000 the check replays",
        ),
    ],
)
def test_a_malformed_schedule_file_is_one_line_exit_2(mix_schedule, mix_solution, tmp_path, capsys, edit, needle):
    path = _edited(tmp_path, mix_schedule, edit)
    assert main(["collective", MIX, mix_solution, "--check", path]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1 and err.startswith(f"error: {path}"), err
    assert len(err) < 400, err


def test_check_against_other_files_exits_2(mix_schedule, mix_solution, ring_solution, tmp_path, capsys):
    assert main(["collective", MIX, ring_solution, "--check", str(mix_schedule)]) == 2
    assert "made from another solution file" in capsys.readouterr().err
    inst = tmp_path / "inst.json"
    shutil.copy(MIX, inst)
    inst.write_text(inst.read_text() + "\n")
    assert main(["collective", str(inst), mix_solution, "--check", str(mix_schedule)]) == 2
    assert "made from another instance file" in capsys.readouterr().err
    assert main(["collective", MIX, mix_solution, "--check", mix_solution]) == 2
    assert "(this is a solution file)" in capsys.readouterr().err
    assert main(["collective", MIX, mix_solution, "--check", str(mix_schedule), "--bytes", "5"]) == 2
    assert "--bytes does not go with --check" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--bytes", "0"], "--bytes must be"),
        (["--bytes", "-5"], "--bytes must be"),
        (["--bytes", "1e6", "--chunks", "0"], "--chunks must be"),
        (["--bytes", "1e6", "--chunks", "2000000"], "--chunks: must be <= 1000000, got 2000000"),
        (["--bytes", "1e30"], "--bytes: must be at most 1e+18"),
        (["--bytes", "1e6", "--chunks", "200000"], "--chunks: 1600000 chunks, at most 1000000"),
        (["--bytes", "1e6", "--servers", "0,0"], "--servers: a server is listed twice"),
        (["--bytes", "1e6", "--time-limit", "0"], "--time-limit 0"),
        (["--bytes", "1e6", "--servers", "0,1,99"], "server 99 is not in the topology"),
        (["--bytes", "1e6", "--servers", "3"], "at least 2 servers"),
        (["--bytes", "1e6", "--root", "1"], "--root goes with --collective broadcast"),
        (["--bytes", "1e6", "--method", "heuristic", "--time-limit", "5"], "--time-limit and --backend go with"),
        ([], "--bytes is required"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_no_file(ring_solution, tmp_path, capsys, extra, needle):
    out = tmp_path / "s.json"
    argv = ["collective", RING, ring_solution, "--collective", "allgather", *extra, "-o", str(out)]
    assert _exit_code(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1, err
    assert not out.exists()


def test_servers_the_topology_does_not_connect(tmp_path, capsys):
    """Two disjoint 4-rings: an AllGather across them is refused, within one it is scheduled."""
    inst = json.loads((INSTANCES / "fixed-ring-8.json").read_text())
    inst["demand"] = {"mp": {"pairs": [[0, 1, 1e6], [4, 5, 1e6]]}}
    inst["fixed_topology"] = {
        "links": [[a, b, 1] for a, b in ((0, 1), (1, 2), (2, 3), (3, 0), (4, 5), (5, 6), (6, 7), (7, 4))]
    }
    inst_path = tmp_path / "two-rings.json"
    inst_path.write_text(json.dumps(inst))
    sol = tmp_path / "sol.json"
    save_solution(solve(load_instance(str(inst_path)), method="heuristic"), sol, directed=False)
    out = tmp_path / "s.json"
    argv = ["collective", str(inst_path), str(sol), "--collective", "allgather", "--bytes", "1e6", "-o", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "does not connect server" in err and len(err.splitlines()) == 1, err
    assert not out.exists()
    assert main([*argv, "--servers", "4,5,6,7", "--method", "ring"]) == 0
    assert main(["collective", str(inst_path), str(sol), "--check", str(out)]) == 0


def test_broadcast_and_reductions_written_files_pass_check(ring_solution, tmp_path, capsys):
    for kind, extra in (("broadcast", ["--root", "3", "--chunks", "2"]), ("reducescatter", []), ("allreduce", [])):
        out = tmp_path / f"{kind}.json"
        argv = ["collective", RING, ring_solution, "--collective", kind, "--bytes", "1e6", *extra]
        assert main([*argv, "--method", "heuristic", "-o", str(out)]) == 0
        assert main(["collective", RING, ring_solution, "--check", str(out)]) == 0, capsys.readouterr().out


def test_an_exact_allreduce_states_its_phases_optimal_and_passes_check(ring_solution, tmp_path, capsys):
    """On the 8-ring, AllReduce as ReduceScatter + AllGather of 4 steps each: 8 steps, optimal as that
    composition; the bound (for every AllReduce schedule) may be below it, and --check accepts it."""
    out = tmp_path / "ar.json"
    argv = ["collective", RING, ring_solution, "--collective", "allreduce", "--bytes", "8e6", "-o", str(out)]
    assert main(argv) == 0
    assert "each phase optimal" in capsys.readouterr().out or json.loads(out.read_text())["gap"] == 0
    data = json.loads(out.read_text())
    assert data["status"] == "optimal" and data["steps"] == 8
    assert main(["collective", RING, ring_solution, "--check", str(out)]) == 0
    path = _edited(tmp_path, out, lambda d: d.update(method="ring"))
    assert main(["collective", RING, ring_solution, "--check", path]) == 1


def test_verify_checks_a_collective_schedule_too(mix_schedule, mix_solution, tmp_path, capsys):
    assert main(["verify", MIX, mix_solution, "--collective-schedule", str(mix_schedule)]) == 0
    assert f"{mix_schedule}: a valid collective schedule" in capsys.readouterr().out
    path = _edited(tmp_path, mix_schedule, lambda d: d["sends"].pop())
    assert main(["verify", MIX, mix_solution, "--collective-schedule", path]) == 1
    assert "lacks the complete chunk" in capsys.readouterr().out
    path = _edited(tmp_path, mix_schedule, lambda d: d.update(steps=-1))
    assert main(["verify", MIX, mix_solution, "--collective-schedule", path]) == 2
    assert "steps: must be" in capsys.readouterr().err
