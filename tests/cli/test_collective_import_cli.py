"""Topologies from other tools for ``topoopt collective``: link lists and TE-CCL inputs through
``--topology`` (the readers' strictness, TE-CCL's topologies rebuilt, schedules written and checked),
and per-link rates in an instance's fixed topology (docs/guide/collectives.md)."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest

from conftest import INSTANCES
from conftest import cli_exit_code as _exit_code
from conftest import cli_json as _json
from topoopt_ilp.cli import main
from topoopt_ilp.errors import InputError, InstanceError
from topoopt_ilp.files import instance_to_dict, load_instance, parse_instance, save_solution
from topoopt_ilp.files.link_list import read_link_list
from topoopt_ilp.files.teccl import read_teccl, teccl_capacity
from topoopt_ilp.methods import solve

TECCL = INSTANCES / "teccl"
DGX1 = str(TECCL / "dgx1-allgather.json")
MESH = str(TECCL / "mesh-3-alltoall.json")
MIXED = str(INSTANCES / "fixed-mixed-rates-6.json")


def _write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# -- link lists ---------------------------------------------------------------------------------------


def test_link_list_rates_latencies_and_parallel_links(tmp_path):
    path = _write(tmp_path, "edges.txt", "# a path\n0 1 100 1.5  # fast\n1,2,50\n1 2 50\n2 3\n")
    linked = read_link_list(path, gbps=25, latency_us=2)
    assert linked.matrix.tolist() == [[0, 1, 0, 0], [1, 0, 2, 0], [0, 2, 0, 1], [0, 0, 1, 0]]
    arcs = {(u, v): (a, b) for u, v, a, b in linked.link.arcs}
    assert arcs[(0, 1)] == (pytest.approx(1.5e-6), 100e9 / 8)
    assert arcs[(2, 1)] == (pytest.approx(2e-6), 50e9 / 8)  # a line without a latency: the default
    assert arcs[(3, 2)] == (pytest.approx(2e-6), 25e9 / 8)
    directed = read_link_list(_write(tmp_path, "d.txt", "0 1 10\n1 0 20\n"), directed=True)
    assert directed.matrix.tolist() == [[0, 1], [1, 0]]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0 1\n", "line 1: the link 0 - 1 has no rate"),
        ("0 1 10\n1 1 10\n", "line 2: a link from server 1 to itself"),
        ("0 1 -10\n", "line 1: gbps must be > 0"),
        ("0 1 0\n", "line 1: gbps must be > 0"),
        ("0 1 1e-300\n", "line 1: gbps must be > 0, within [1e-06"),
        ("0 1 10 -1\n", "line 1: latency_us must be >= 0"),
        ("0 1 ten\n", "line 1: gbps must be a number"),
        ("0 -1 10\n", "line 1: dst must be a server id"),
        ("a 1 10\n", "line 1: src must be a server id"),
        ("0 1 10 1 9\n", "line 1: expected 'src dst [gbps] [latency_us]'"),
        ("0 1 10\n1 0 20\n", "line 2: the link 1 - 0 repeats line 1 with another rate"),
        ("0 1 10\n1 3 10\n", "server 2 has no link"),
        ("# nothing\n", "no link in the file"),
    ],
)
def test_link_list_bad_input_is_one_line_naming_file_and_line(tmp_path, text, message):
    path = _write(tmp_path, "bad.txt", text)
    with pytest.raises(InputError, match=re.escape(message)) as exc:
        read_link_list(path)
    assert str(exc.value).startswith(path)
    out = tmp_path / "s.json"
    argv = ["collective", "--topology", path, "--collective", "allgather", "--bytes", "1e6", "-o", str(out)]
    assert _exit_code(argv) == 2
    assert not out.exists()


def test_link_list_schedule_written_and_checked(tmp_path, capsys):
    """A path 0 - 1 - 2 whose second link is half as fast: AllGather of one chunk per server in 4
    steps of chunk / B (server 2 receives two chunks over the slow link, two steps each)."""
    path = _write(tmp_path, "path.txt", "0 1 80\n1 2 40\n")
    out = str(tmp_path / "s.json")
    argv = ["collective", "--topology", path, "--collective", "allgather", "--bytes", "3e6", "-o", out]
    data = _json(argv, capsys)
    (row,) = data["results"]
    chunk_s = 1e6 / 10e9
    assert (row["steps"], row["status"], row["bound_steps"]) == (4, "optimal", 4)
    assert row["finish_s"] == pytest.approx(4 * chunk_s)
    assert main(["collective", "--topology", path, "--check", out]) == 0
    # read with other rates, the file's link model is not the list's
    assert main(["collective", "--topology", path, "--check", out, "--directed"]) == 1


def test_topology_option_conflicts(tmp_path):
    path = _write(tmp_path, "p.txt", "0 1 10\n")
    base = ["--collective", "allgather", "--bytes", "1e6"]
    assert _exit_code(["collective", MIXED, "--topology", path, *base]) == 2
    assert _exit_code(["collective", "--topology", path, "--joint", *base]) == 2
    assert _exit_code(["collective", MIXED, "x.json", "--gbps", "10", *base]) == 2
    assert _exit_code(["collective", "--topology", DGX1, "--gbps", "10"]) == 2
    assert _exit_code(["collective", *base]) == 2


# -- TE-CCL inputs -----------------------------------------------------------------------------------


def test_teccl_topologies_as_teccl_builds_them():
    dgx1 = np.array(teccl_capacity("DGX1"))
    assert dgx1.shape == (8, 8) and (dgx1 == dgx1.T).all()
    assert sorted(np.unique(dgx1).tolist()) == [0.0, 25.0, 50.0]
    assert ((dgx1 > 0).sum(axis=1) == 4).all() and (dgx1.sum(axis=1) == 150).all()  # 6 NVLinks per GPU
    mesh = np.array(teccl_capacity("Mesh", side_length=3))
    assert mesh[2, 3] == 100 and mesh[0, 3] == 100 and mesh[0, 4] == 0  # TE-CCL's i +- 1 joins rows
    amd = np.array(teccl_capacity("AMD"))
    assert amd.shape == (16, 16) and amd[0, 1] == 200 and amd[0, 4] == 100 and amd[0, 8] == 50


def test_teccl_dgx1_allgather(tmp_path, capsys):
    linked = read_teccl(DGX1)
    assert linked.collective.kind == "allgather" and linked.collective.chunks == 1
    assert linked.collective.bytes == pytest.approx(8 * 1e6)  # 8 GPUs x 1 chunk x 0.001 GB
    out = str(tmp_path / "s.json")
    data = _json(["collective", "--topology", DGX1, "--method", "all", "-o", out], capsys)
    rows = {r["method"]: r for r in data["results"]}
    # tau = alpha + chunk over a doubled NVLink (50 GB/s); a single NVLink takes 2 steps
    tau = 0.7e-6 + 1e6 / 50e9
    assert rows["exact"]["step_s"] == pytest.approx(tau)
    assert rows["exact"]["status"] == "optimal"
    assert rows["exact"]["steps"] <= rows["greedy"]["steps"] <= rows["ring"]["steps"]
    assert rows["exact"]["bound_steps"] <= rows["exact"]["steps"]
    assert main(["collective", "--topology", DGX1, "--check", out]) == 0
    capsys.readouterr()
    # the command line replaces the file's collective
    data = _json(["collective", "--topology", DGX1, "--collective", "allreduce", "--method", "heuristic"], capsys)
    assert data["collective"] == "allreduce"


def test_teccl_mesh_alltoall(capsys):
    data = _json(["collective", "--topology", MESH, "--time-limit", "30"], capsys)
    assert data["collective"] == "alltoall" and data["servers"] == 9 and data["chunks"] == 1
    (row,) = data["results"]
    assert row["bound_steps"] <= row["steps"]


def _teccl(tmp_path, edit) -> str:
    data = json.loads(open(DGX1).read())
    edit(data)
    return _write(tmp_path, "t.json", json.dumps(data))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["InstanceParams"].update(collective=3), "InstanceParams.collective: unknown TE-CCL collective 3"),
        (lambda d: d["InstanceParams"].update(collective=[1]), "unknown TE-CCL collective"),
        (lambda d: d["InstanceParams"].update(num_chunks=10**400), "InstanceParams.num_chunks"),
        (lambda d: d["TopologyParams"].update(name="Torus"), "unknown TE-CCL topology 'Torus'"),
        (lambda d: d["TopologyParams"].update(name="NDv2"), "switch nodes"),
        (lambda d: d["TopologyParams"].update(name="AMD", chassis=2), "TopologyParams.chassis: AMD with 2 chassis"),
        (lambda d: d.pop("GurobiParams"), "missing required key 'GurobiParams'"),
        (lambda d: d["TopologyParams"].update(chunk_size=0), "TopologyParams.chunk_size: expected a number > 0"),
        (lambda d: d["TopologyParams"].update(alpha=[-1, 0]), r"TopologyParams.alpha\[0\]"),
        (lambda d: d["InstanceParams"].update(num_chunk=2), "unknown key 'num_chunk'"),
    ],
)
def test_teccl_bad_input(tmp_path, edit, message):
    path = _teccl(tmp_path, edit)
    with pytest.raises(InputError, match=message) as exc:
        read_teccl(path)
    assert str(exc.value).startswith(path)
    out = tmp_path / "s.json"
    assert _exit_code(["collective", "--topology", path, "-o", str(out)]) == 2
    assert not out.exists()


# -- per-link rates in an instance --------------------------------------------------------------------


def test_instance_link_rates_round_trip_and_link_model():
    inst = load_instance(MIXED)
    again = parse_instance(instance_to_dict(inst))
    assert again.fixed_topology == inst.fixed_topology
    arcs = {(u, v): (a, b) for u, v, a, b in inst.fixed_topology.arc_rates(inst.cluster)}
    assert arcs[(0, 3)] == arcs[(3, 0)] == (pytest.approx(5e-6), 12.5e9 / 8)
    assert (0, 1) not in arcs  # the cluster's rate


@pytest.mark.parametrize(
    ("links", "message"),
    [
        ([[0, 1, 1, -5, 1]], r"fixed_topology.links\[0\]\[3\]"),
        ([[0, 1, 1, 10, -1]], r"fixed_topology.links\[0\]\[4\]"),
        ([[0, 1, 1, 10, 1, 3]], r"expected \[i, j, count\] or \[i, j, count, gbps, latency_us\]"),
        ([[0, 1, 1, 10], [1, 0, 1, 20]], "different rates"),
    ],
)
def test_instance_link_rates_bad_input(links, message):
    data = json.loads(open(MIXED).read())
    data["fixed_topology"]["links"] = links + [[i, i + 1, 1] for i in range(1, 5)] + [[5, 0, 1]]
    data["cluster"]["degree"] = 3
    with pytest.raises(InstanceError, match=message):
        parse_instance(data)


def test_instance_link_rates_schedule_and_check(tmp_path, capsys):
    sol = tmp_path / "sol.json"
    save_solution(solve(load_instance(MIXED), method="heuristic"), sol, directed=False)
    out = str(tmp_path / "s.json")
    argv = ["collective", MIXED, str(sol), "--collective", "allgather", "--bytes", "6e6", "--chunks", "2"]
    data = _json([*argv, "--method", "all", "-o", out], capsys)
    rows = {r["method"]: r for r in data["results"]}
    assert rows["exact"]["status"] == "optimal" and rows["exact"]["steps"] <= rows["greedy"]["steps"]
    written = json.loads(open(out).read())
    assert len(written["link"]["arcs"]) == 6  # the three links between the triangles, both ways
    assert main(["collective", MIXED, str(sol), "--check", out]) == 0
    # the file's rates edited: a violation
    written["link"]["arcs"][0][3] *= 2
    with open(out, "w") as fh:
        json.dump(written, fh)
    assert main(["collective", MIXED, str(sol), "--check", out]) == 1
    assert os.path.exists(out)


@pytest.mark.parametrize(
    ("arcs", "message"),
    [
        ([[0, 3, 5e-6]], r"link.arcs\[0\]: expected \[u, v, alpha_s, bandwidth_Bps\]"),
        ([[0, 3, "5e-6", 1.0]], r"link.arcs\[0\]\[2\]"),
        ([[0, 3, 5e-6, 1.0], [0, 3, 5e-6, 1.0]], "listed twice"),
        ("all", r"link.arcs: expected a list"),
    ],
)
def test_schedule_file_with_bad_arcs_is_refused(tmp_path, capsys, arcs, message):
    sol = tmp_path / "sol.json"
    save_solution(solve(load_instance(MIXED), method="heuristic"), sol, directed=False)
    out = tmp_path / "s.json"
    argv = ["collective", MIXED, str(sol), "--collective", "broadcast", "--bytes", "1e6", "--method", "heuristic"]
    assert main([*argv, "-o", str(out)]) == 0
    written = json.loads(out.read_text())
    written["link"]["arcs"] = arcs
    out.write_text(json.dumps(written))
    capsys.readouterr()
    assert main(["collective", MIXED, str(sol), "--check", str(out)]) == 2
    assert re.search(message, capsys.readouterr().err)
