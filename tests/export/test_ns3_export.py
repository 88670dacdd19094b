"""``topoopt export --to ns3``: the file of a small design written out by hand, every shipped design
through the independent check, hand-broken files, and the refusals."""

from __future__ import annotations

import pytest
from export_cases import fixed

from conftest import INSTANCES
from topoopt_ilp import solve
from topoopt_ilp.cli import main
from topoopt_ilp.errors import InputError
from topoopt_ilp.evaluation.ns3 import ns3_violations
from topoopt_ilp.export import export, ns3_lines
from topoopt_ilp.files import load_instance

SHIPPED = sorted(p.name for p in INSTANCES.glob("*.json"))


def test_a_small_design_by_hand():
    """Four servers, degree 2, 100 Gbps, 1 us: a double link 0-1, and 2-3 double too."""
    inst, sol = fixed(4, 2, [[0, 1, 2], [2, 3, 2]])
    assert ns3_lines(inst, sol) == [
        "8 4 6",
        "4 5 6 7",
        "0 4 200Gbps 0us 0",
        "1 5 200Gbps 0us 0",
        "2 6 200Gbps 0us 0",
        "3 7 200Gbps 0us 0",
        "4 5 200Gbps 1us 0",
        "6 7 200Gbps 1us 0",
    ]
    assert ns3_violations(inst, sol, "\n".join(ns3_lines(inst, sol))).valid


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_design_passes(name):
    inst = load_instance(INSTANCES / name)
    sol = solve(inst, method="heuristic")
    report = ns3_violations(inst, sol, "\n".join(ns3_lines(inst, sol)) + "\n")
    assert report.valid, report.violations


RING = "\n".join(["8 4 8", "4 5 6 7"] + [f"{i} {4 + i} 200Gbps 0us 0" for i in range(4)])
RING_LINKS = ["4 5 100Gbps 1us 0", "5 6 100Gbps 1us 0", "6 7 100Gbps 1us 0", "4 7 100Gbps 1us 0"]


@pytest.mark.parametrize(
    "links, kind, words",
    [
        (RING_LINKS[:3], "missing link", "servers 0 and 3 are linked in the design, not in the file"),
        (RING_LINKS[:3] + ["4 7 50Gbps 1us 0"], "rate", "servers 0-3 at 50Gbps"),
        (RING_LINKS[:3] + ["4 7 100Gbps 0.002ms 0"], "latency", "0.002ms"),
        (RING_LINKS[:3] + ["4 6 100Gbps 1us 0"], "extra link", "servers 0 and 2 have no link"),
        (RING_LINKS[:3] + ["0 3 100Gbps 1us 0"], "link", "host 0 is joined to node 3"),
        (RING_LINKS[:3] + ["4 5 100Gbps 1us 0"], "duplicate", "nodes 4 and 5 are joined on 2 lines"),
        (RING_LINKS[:3] + ["4 7 100Gbps 1us 0.1"], "error rate", "error rate 0.1"),
        (RING_LINKS[:3] + ["4 7 1e2Gbps 1us 0"], "line", "not an ns-3 quantity"),
        (RING_LINKS + ["4 6 100Gbps 1us 0"], "header", "the header says 8 links, the file has 9"),
    ],
)
def test_a_broken_file_fails_with_its_fault(links, kind, words):
    inst, sol = fixed(4, 2, [[0, 1, 1], [1, 2, 1], [2, 3, 1], [0, 3, 1]])
    assert ns3_violations(inst, sol, "\n".join([RING, *RING_LINKS])).valid
    found = ns3_violations(inst, sol, "\n".join([RING, *links])).violations
    assert any(v.startswith(kind + ":") and words in v for v in found), found


def test_a_wrong_header_is_named():
    inst, sol = fixed(4, 2, [[0, 1, 1], [1, 2, 1], [2, 3, 1], [0, 3, 1]])
    assert ns3_violations(inst, sol, "8 4\n").violations == (
        "header: the first line must be three integers: nodes switches links",
    )
    found = ns3_violations(inst, sol, "\n".join(["4 0 8", "", *RING.split("\n")[2:], *RING_LINKS])).violations
    assert any(v.startswith("header: 4 nodes and 0 switches") for v in found), found


def test_directed_links_must_be_symmetric(tmp_path):
    inst, sol = fixed(3, 2, [[0, 1, 1], [1, 0, 1], [1, 2, 1], [2, 1, 1], [0, 2, 1], [2, 0, 1]], directed=True)
    assert ns3_violations(inst, sol, "\n".join(ns3_lines(inst, sol))).valid
    one_way, one_way_sol = fixed(3, 1, [[0, 1, 1], [1, 2, 1], [2, 0, 1]], directed=True)
    out = tmp_path / "topo.txt"
    with pytest.raises(InputError, match=r"full duplex: the design has 1 link\(s\) 0->1 but 0 1->0"):
        export(one_way, one_way_sol, str(out), "ns3")
    assert not out.exists()


def test_round_trip_through_verify(tmp_path, capsys):
    testbed = str(INSTANCES / "testbed-12.json")
    sol_path, out = tmp_path / "tb.json", tmp_path / "topo.txt"
    assert main(["solve", testbed, "--out", str(sol_path), "--quiet"]) == 0
    assert main(["export", testbed, str(sol_path), "--to", "ns3", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["verify", testbed, str(sol_path), "--ns3", str(out)]) == 0
    assert "a valid ns-3 topology" in capsys.readouterr().out
    out.write_text(out.read_text().replace("0 12 100Gbps 0us 0\n", ""))
    assert main(["verify", testbed, str(sol_path), "--ns3", str(out)]) == 1
    printed = capsys.readouterr().out
    assert "host link: host 0 is not joined to its switch 12" in printed
    code = main(["export", testbed, str(sol_path), "--to", "ns3", "-o", str(tmp_path / "x.txt"), "--group", "0"])
    assert code == 2 and "takes no option group" in capsys.readouterr().err
