"""The independent check of cabling plans and OCS configurations: exported files pass, hand-made
broken ones fail with a message that names the fault."""

from __future__ import annotations

import json

import pytest

from conftest import INSTANCES
from topoopt_ilp import solve
from topoopt_ilp.cli import main
from topoopt_ilp.evaluation.cabling import check_cabling, check_ocs_config
from topoopt_ilp.files import load_instance, parse_instance, save_solution

HEADER = "link,server_a,interface_a,port_a,server_b,interface_b,port_b,role\n"


@pytest.fixture(scope="module")
def ring4():
    """A 4-server ring, degree 2: links 0-1, 1-2, 2-3, 0-3."""
    data = {
        "format": "topoopt-instance",
        "version": 1,
        "cluster": {"servers": 4, "degree": 2, "link_bandwidth_gbps": 100},
        "demand": {"all_to_all": 1e6},
        "fixed_topology": {"jumps": [1]},
    }
    inst = parse_instance(data)
    return inst, solve(inst)


GOOD = ["0,0,0,0,1,0,2,link", "1,0,1,1,3,1,7,link", "2,1,1,3,2,1,5,link", "3,2,0,4,3,0,6,link"]


def _plan(tmp_path, rows, header=HEADER):
    p = tmp_path / "plan.csv"
    p.write_text(header + "".join(r + "\n" for r in rows))
    return p


def test_a_good_plan_passes_for_both_fabrics(tmp_path, ring4):
    inst, sol = ring4
    for fabric in ("patch_panel", "ocs"):
        assert check_cabling(inst, sol, _plan(tmp_path, GOOD), fabric).valid


@pytest.mark.parametrize(
    "rows, fabric, message",
    [
        (GOOD[:3], "patch_panel", "missing link: 1 of the 1 link(s) 2-3"),
        (GOOD + ["4,0,0,0,2,1,5,link"], "patch_panel", "extra link: 1 link(s) 0-2"),
        ([GOOD[0], "1,0,0,0,3,1,7,link", *GOOD[2:]], "patch_panel", "interface 0 of server 0 is used twice"),
        ([GOOD[0], "1,0,1,2,3,1,7,link", *GOOD[2:]], "patch_panel", "port 2 for interface 1 of server 0, expected 1"),
        ([GOOD[0], "1,0,2,2,3,1,7,link", *GOOD[2:]], "patch_panel", "interface 2 of server 0 is outside 0..1"),
        ([GOOD[0], "1,0,1,1,3,0,6,link", GOOD[2], "3,2,0,4,3,1,7,link"], "ocs", "sit on different OCSes"),
        ([GOOD[0], GOOD[1], GOOD[2], "3,2,0,4,3,0,6,ring"], "patch_panel", "role 'ring'"),
        ([GOOD[0], GOOD[2], GOOD[1], GOOD[3]], "patch_panel", "link number 2, expected 1"),
        (["0,0,0,0,0,1,1,link", *GOOD[1:]], "patch_panel", "linked to itself"),
        (["0,0,0,0,9,0,18,link", *GOOD[1:]], "patch_panel", "server 9 is outside 0..3"),
        (["0,0,x,0,1,0,2,link", *GOOD[1:]], "patch_panel", "must be integers"),
    ],
)
def test_a_broken_plan_fails_with_its_fault(tmp_path, ring4, rows, fabric, message):
    inst, sol = ring4
    report = check_cabling(inst, sol, _plan(tmp_path, rows), fabric)
    assert not report.valid
    assert any(message in v for v in report.violations), report.violations


def test_a_regular_cluster_uses_every_interface(tmp_path, ring4):
    inst, sol = ring4
    rows = [GOOD[0], GOOD[1], GOOD[2], "3,2,0,4,3,0,6,link"]
    assert check_cabling(inst, sol, _plan(tmp_path, rows)).valid
    report = check_cabling(inst, sol, _plan(tmp_path, GOOD[:3]))
    assert any("unused interface" in v for v in report.violations)


def test_a_plan_with_the_wrong_header_is_named(tmp_path, ring4):
    inst, sol = ring4
    report = check_cabling(inst, sol, _plan(tmp_path, GOOD, header="a,b\n"))
    assert report.violations == ("header: expected the columns " + HEADER.strip(),)


GOOD_OCS = {
    "format": "topoopt-ocs-config",
    "version": 1,
    "servers": 4,
    "degree": 2,
    "links": "undirected",
    "switches": [{"switch": 0, "connections": [[0, 1], [2, 3]]}, {"switch": 1, "connections": [[0, 3], [1, 2]]}],
}


def _config(tmp_path, change):
    data = json.loads(json.dumps(GOOD_OCS))
    change(data)
    p = tmp_path / "ocs.json"
    p.write_text(json.dumps(data))
    return p


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d.update(format="topoopt-solution"), "format is 'topoopt-solution'"),
        (lambda d: d.update(degree=3), "degree is 3, expected 2"),
        (lambda d: d["switches"].pop(), "a list of 2 switches"),
        (lambda d: d["switches"][1].update(connections=[[0, 3], [0, 2]]), "port 0 is used twice (not a matching)"),
        (lambda d: d["switches"][1].update(connections=[[0, 3]]), "not a perfect matching"),
        (lambda d: d["switches"][1].update(connections=[[0, 3], [1, 2], [1, 1]]), "port 1 is connected to itself"),
        (lambda d: d["switches"][1].update(connections=[[0, 2], [1, 3]]), "missing link"),
        (lambda d: d["switches"][1].update(connections=[[0, 3], [1, 9]]), "is not a pair of ports"),
        (lambda d: d["switches"][0].update(switch=1), "entry 0 must be"),
        (lambda d: d.update(extra=1), "unknown key(s) extra"),
    ],
)
def test_a_broken_ocs_configuration_fails_with_its_fault(tmp_path, ring4, change, message):
    inst, sol = ring4
    assert check_ocs_config(inst, sol, _config(tmp_path, lambda d: None)).valid
    report = check_ocs_config(inst, sol, _config(tmp_path, change))
    assert not report.valid and any(message in v for v in report.violations), report.violations


def test_a_directed_configuration_must_be_permutations(tmp_path):
    data = {
        "format": "topoopt-instance",
        "version": 1,
        "cluster": {"servers": 3, "degree": 1, "link_bandwidth_gbps": 100, "links": "directed"},
        "demand": {"all_to_all": 1e6},
        "fixed_topology": {"jumps": [1]},
    }
    inst = parse_instance(data)
    sol = solve(inst)
    config = {k: v for k, v in GOOD_OCS.items() if k != "switches"}
    config.update(servers=3, degree=1, links="directed")
    p = tmp_path / "d.json"
    p.write_text(json.dumps({**config, "switches": [{"switch": 0, "connections": [[0, 1], [1, 2], [2, 0]]}]}))
    assert check_ocs_config(inst, sol, p).valid
    p.write_text(json.dumps({**config, "switches": [{"switch": 0, "connections": [[0, 1], [1, 2], [0, 2]]}]}))
    report = check_ocs_config(inst, sol, p)
    assert any("input port 0 is used twice (not a permutation)" in v for v in report.violations)


def test_verify_exits_1_with_the_violations_of_a_broken_plan(tmp_path, capsys):
    inst = load_instance(INSTANCES / "testbed-12.json")
    sol = solve(inst, method="heuristic")
    spath = tmp_path / "sol.json"
    save_solution(sol, spath, directed=inst.cluster.directed)
    plan = tmp_path / "plan.csv"
    plan.write_text(HEADER + "0,0,0,0,1,0,4,link\n")
    code = main(["verify", str(INSTANCES / "testbed-12.json"), str(spath), "--cabling", str(plan)])
    out = capsys.readouterr().out
    assert code == 1 and "violation(s) of the cabling plan" in out and "missing link" in out
    assert main(["verify", str(INSTANCES / "testbed-12.json"), str(spath), "--ocs", str(tmp_path / "no.json")]) == 2
    assert "cannot read file" in capsys.readouterr().err
