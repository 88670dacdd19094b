"""``topoopt collective INSTANCE --joint``: topology and schedule together from the command line, on
clusters of 4, 6 and 8 servers (the proven optima of docs/guide/collectives.md), the files it writes
passing ``--check``, the known designs above the joint model's size, and bad input."""

from __future__ import annotations

import json

import pytest

from conftest import INSTANCES
from topoopt_ilp.cli import main
from topoopt_ilp.core.collective import Collective, LinkModel
from topoopt_ilp.evaluation.collective_check import check_schedule
from topoopt_ilp.files import load_solution
from topoopt_ilp.models.collective_file import read_collective_schedule


def _instance(tmp_path, n: int, d: int) -> str:
    path = tmp_path / f"cluster-{n}-{d}.json"
    data = {
        "format": "topoopt-instance",
        "version": 1,
        "name": f"cluster-{n}-{d}",
        "cluster": {"servers": n, "degree": d, "link_bandwidth_gbps": 100},
        "demand": {"allreduce": [{"members": list(range(n)), "bytes": 1e6}]},
    }
    path.write_text(json.dumps(data))
    return str(path)


def _json(argv, capsys) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# (servers, degree) -> the optimal AllGather steps with one chunk per server: the floor
# max(ceil((n - 1) / d), ceil(log_{d+1} n)), met by the complete graph, the 4-ring and the hypercube
@pytest.mark.parametrize("n, d, steps", [(4, 3, 1), (4, 2, 2), (6, 3, 2), (8, 3, 3), (8, 2, 4)])
def test_proven_optima(tmp_path, capsys, n, d, steps):
    inst = _instance(tmp_path, n, d)
    out = _json(
        ["collective", inst, "--joint", "--collective", "allgather", "--bytes", "1e6", "--time-limit", "30"], capsys
    )
    assert out["steps"] == steps and out["bound_steps"] == steps
    assert out["status"] == "optimal" and out["over_class"].startswith("optimal over every topology")
    assert out["chosen_by"] == "joint model"
    step_s = 1e-6 + 1e6 / n / 12.5e9  # alpha 1 us + one chunk over 100 Gb/s
    assert out["finish_s"] == pytest.approx(steps * step_s)


def test_files_written_pass_check_and_the_design_has_the_degree(tmp_path, capsys):
    inst = _instance(tmp_path, 6, 3)
    schedule, design = tmp_path / "s.json", tmp_path / "d.json"
    argv = ["collective", inst, "--joint", "--collective", "allreduce", "--bytes", "1e6", "--chunks", "2"]
    assert main([*argv, "--time-limit", "30", "-o", str(schedule), "--design-out", str(design)]) == 0
    assert "wrote" in capsys.readouterr().out
    assert main(["collective", inst, str(design), "--check", str(schedule)]) == 0
    topology = load_solution(design).topology
    assert (topology.matrix.sum(axis=1) == 3).all() and (topology.matrix == topology.matrix.T).all()
    sf = read_collective_schedule(schedule)
    # the replay on the written design, by the independent checker, once more
    gather = Collective("allreduce", tuple(range(6)), 1e6, 2)
    assert check_schedule(topology, gather, LinkModel(1e-6, 12.5e9), sf.schedule).valid


def test_above_the_model_size_the_known_designs(tmp_path, capsys):
    inst = _instance(tmp_path, 16, 4)
    out = _json(
        ["collective", inst, "--joint", "--collective", "allgather", "--bytes", "1e6", "--method", "heuristic"], capsys
    )
    assert out["chosen_by"] == "best known design" and out["over_class"].startswith("not proven")
    # 16 servers of degree 4: at least ceil(15 / 4) = 4 steps, and the greedy schedule of C(16; 1, 6) takes 4
    assert out["steps"] == 4 and out["bound_steps"] == 4


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["-o", "s.json"], "--design-out"),
        (["--servers", "0,1"], "--servers"),
        (["--method", "ring"], "exact or heuristic"),
        (["--to", "msccl", "-o", "a.xml"], "--to msccl"),
        (["--time-limit", "0"], "no time"),
    ],
)
def test_bad_requests_exit_2(tmp_path, capsys, extra, needle):
    inst = _instance(tmp_path, 4, 2)
    extra = [str(tmp_path / e) if e.endswith((".json", ".xml")) else e for e in extra]
    assert main(["collective", inst, "--joint", "--collective", "allgather", "--bytes", "1e6", *extra]) == 2
    assert needle in capsys.readouterr().err
    assert not list(tmp_path.glob("*.xml")) and not (tmp_path / "s.json").exists()


def test_a_solution_with_joint_exits_2(tmp_path, capsys):
    inst = _instance(tmp_path, 4, 2)
    assert main(["collective", inst, inst, "--joint", "--collective", "allgather", "--bytes", "1e6"]) == 2
    assert "no SOLUTION" in capsys.readouterr().err


def test_fixed_topology_and_missing_solution(capsys):
    ring = str(INSTANCES / "fixed-ring-8.json")
    assert main(["collective", ring, "--joint", "--collective", "allgather", "--bytes", "1e6"]) == 2
    assert "fixes its topology" in capsys.readouterr().err
    assert main(["collective", ring, "--collective", "allgather", "--bytes", "1e6"]) == 2
    assert "SOLUTION is required" in capsys.readouterr().err


@pytest.mark.parametrize(
    "kind, extra, steps", [("broadcast", ["--root", "4", "--chunks", "2"], 3), ("alltoall", [], 5)]
)
def test_broadcast_and_alltoall(tmp_path, capsys, kind, extra, steps):
    # 6 servers of degree 2: a broadcast of two pieces (floor 2, proven too short) and the all-to-all
    # (two servers 1 hop away, two 2, one 3 on the 6-ring: 9 hops over 2 links, 5 steps)
    inst = _instance(tmp_path, 6, 2)
    schedule, design = tmp_path / "s.json", tmp_path / "d.json"
    argv = ["collective", inst, "--joint", "--collective", kind, "--bytes", "1e6", *extra, "--time-limit", "30"]
    out = _json([*argv, "-o", str(schedule), "--design-out", str(design)], capsys)
    assert out["steps"] == steps and out["over_class"].startswith("optimal over every topology")
    assert main(["collective", inst, str(design), "--check", str(schedule)]) == 0
    if kind == "broadcast":
        assert {s.src for s in read_collective_schedule(schedule).schedule.sends if s.step == 1} == {4}
    capsys.readouterr()
    assert main(["collective", inst, "--joint", "--collective", "allgather", "--bytes", "1e6", "--root", "1"]) == 2
    assert "--root goes with --collective broadcast" in capsys.readouterr().err
