"""``topoopt export --to simai``: the file of a small design written out by hand, every shipped design
through the independent check, hand-broken files, and the refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from export_cases import fixed

from conftest import INSTANCES
from topoopt_ilp import solve
from topoopt_ilp.cli import main
from topoopt_ilp.errors import InputError
from topoopt_ilp.evaluation.simai import simai_violations
from topoopt_ilp.export import export, simai_lines
from topoopt_ilp.files import load_instance

SHIPPED = sorted(p.name for p in INSTANCES.glob("*.json"))


def test_a_small_design_by_hand():
    """Four servers, degree 2, 100 Gbps, 1 us: a double link 0-1, and 2-3 double too. GPUs 0-3,
    NVSwitches 4-7, switches 8-11."""
    inst, sol = fixed(4, 2, [[0, 1, 2], [2, 3, 2]])
    assert simai_lines(inst, sol, "A100") == [
        "12 1 4 4 10 A100",
        "4 5 6 7 8 9 10 11",
        "0 4 2880Gbps 0.000025ms 0",
        "1 5 2880Gbps 0.000025ms 0",
        "2 6 2880Gbps 0.000025ms 0",
        "3 7 2880Gbps 0.000025ms 0",
        "0 8 200Gbps 0us 0",
        "1 9 200Gbps 0us 0",
        "2 10 200Gbps 0us 0",
        "3 11 200Gbps 0us 0",
        "8 9 200Gbps 1us 0",
        "10 11 200Gbps 1us 0",
    ]
    assert simai_violations(inst, sol, "\n".join(simai_lines(inst, sol))).valid


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_design_passes(name):
    inst = load_instance(INSTANCES / name)
    sol = solve(inst, method="heuristic")
    report = simai_violations(inst, sol, "\n".join(simai_lines(inst, sol)) + "\n")
    assert report.valid, report.violations


HEAD = ["12 1 4 4 12 H100", "4 5 6 7 8 9 10 11"]
GPU_LINKS = [f"{i} {4 + i} 2880Gbps 0.000025ms 0" for i in range(4)] + [f"{i} {8 + i} 200Gbps 0us 0" for i in range(4)]
RING_LINKS = ["8 9 100Gbps 1us 0", "9 10 100Gbps 1us 0", "10 11 100Gbps 1us 0", "8 11 100Gbps 1us 0"]


@pytest.mark.parametrize(
    "head, links, kind, words",
    [
        (HEAD, RING_LINKS[:3], "missing link", "servers 0 and 3 are linked in the design, not in the file"),
        (HEAD, RING_LINKS[:3] + ["8 11 50Gbps 1us 0"], "rate", "50Gbps, the design's 1 link(s) give 100Gbps"),
        (HEAD, RING_LINKS[:3] + ["11 8 100Gbps 0.002ms 0"], "latency", "0.002ms"),
        (HEAD, RING_LINKS[:3] + ["8 10 100Gbps 1us 0"], "extra link", "servers 0 and 2 have no link"),
        (HEAD, RING_LINKS[:3] + ["0 11 100Gbps 1us 0"], "link", "GPU 0 is joined to switch 11"),
        (HEAD, RING_LINKS[:3] + ["0 3 100Gbps 1us 0"], "link", "joins two nodes the layout never joins"),
        (HEAD, RING_LINKS[:3] + ["8 9 100Gbps 1us 0"], "duplicate", "nodes 8 and 9 are joined 2 times"),
        (HEAD, RING_LINKS[:3] + ["8 11 100Gbps 1us 0.1"], "error rate", "error rate '0.1', expected 0"),
        (HEAD, RING_LINKS[:3] + ["8 11 1e2Gbps 1us 0"], "link", "not an ns-3 quantity"),
        (HEAD, RING_LINKS + ["8 10 100Gbps 1us 0"], "header", "the header says 12 links (60 words), 65 words"),
        (["12 1 4 4 12 B200", HEAD[1]], RING_LINKS, "header", "gpu type 'B200' is read as NONE"),
        (["12 2 4 4 12 H100", HEAD[1]], RING_LINKS, "header", "12 nodes, 2 gpus per server"),
        (["12 1 4 4 12 H100", "8 9 10 11 4 5 6 7"], RING_LINKS, "ids", "the NVSwitches 4..7"),
    ],
)
def test_a_broken_file_fails_with_its_fault(head, links, kind, words):
    inst, sol = fixed(4, 2, [[0, 1, 1], [1, 2, 1], [2, 3, 1], [0, 3, 1]])
    assert simai_violations(inst, sol, "\n".join([*HEAD, *GPU_LINKS, *RING_LINKS])).valid
    found = simai_violations(inst, sol, "\n".join([*head, *GPU_LINKS, *links])).violations
    assert any(v.startswith(kind + ":") and words in v for v in found), found


def test_simai_reads_words_not_lines():
    """SimAI reads the file with ``>>``: the same words laid out on other lines are the same file."""
    inst, sol = fixed(4, 2, [[0, 1, 1], [1, 2, 1], [2, 3, 1], [0, 3, 1]])
    assert simai_violations(inst, sol, " ".join([*HEAD, *GPU_LINKS, *RING_LINKS])).valid
    found = simai_violations(inst, sol, "\n".join([*HEAD, *GPU_LINKS[1:], "0 5 2880Gbps 1us 0", *RING_LINKS]))
    assert "nvlink: link 8 (0 5): GPU 0 is joined to NVSwitch 5, SimAI puts it behind 4" in found.violations
    assert "nvlink: GPU 0 is not joined to its NVSwitch 4" in found.violations
    found = simai_violations(inst, sol, "\n".join([*HEAD, "0 4 0Gbps 0.000025ms 0", *GPU_LINKS[1:], *RING_LINKS]))
    assert found.violations == ("nvlink: link 1 (0 4): rate 0Gbps, an NVLink needs a positive rate",)
    assert simai_violations(inst, sol, "12 1 4").violations == (
        "header: the first words must be node_num gpus_per_server nvswitch_num switch_num link_num gpu_type",
    )


def test_directed_links_must_be_symmetric(tmp_path):
    inst, sol = fixed(3, 2, [[0, 1, 1], [1, 0, 1], [1, 2, 1], [2, 1, 1], [0, 2, 1], [2, 0, 1]], directed=True)
    assert simai_violations(inst, sol, "\n".join(simai_lines(inst, sol))).valid
    one_way, one_way_sol = fixed(3, 1, [[0, 1, 1], [1, 2, 1], [2, 0, 1]], directed=True)
    out = tmp_path / "topo.txt"
    with pytest.raises(InputError, match=r"the design has 1 link\(s\) 0->1 but 0 1->0, which the simai format"):
        export(one_way, one_way_sol, str(out), "simai")
    assert not out.exists()
    with pytest.raises(InputError, match="unknown gpu type 'B200'"):
        export(inst, sol, str(out), "simai", gpu_type="B200")
    assert not out.exists()


def test_round_trip_through_verify(tmp_path, capsys):
    testbed = str(INSTANCES / "testbed-12.json")
    sol_path, out = tmp_path / "tb.json", tmp_path / "topo.txt"
    assert main(["solve", testbed, "--out", str(sol_path), "--quiet"]) == 0
    assert main(["export", testbed, str(sol_path), "--to", "simai", "-o", str(out), "--gpu-type", "H800"]) == 0
    assert out.read_text().startswith("36 1 12 12 ")
    assert out.read_text().split("\n")[0].endswith(" H800")
    capsys.readouterr()
    assert main(["verify", testbed, str(sol_path), "--simai", str(out)]) == 0
    assert "a valid SimAI topology" in capsys.readouterr().out
    out.write_text(out.read_text().replace("0 24 100Gbps 0us 0\n", ""))
    assert main(["verify", testbed, str(sol_path), "--simai", str(out)]) == 1
    printed = capsys.readouterr().out
    assert "gpu link: GPU 0 is not joined to its switch 24" in printed
    code = main(["export", testbed, str(sol_path), "--to", "simai", "-o", str(tmp_path / "x.txt"), "--group", "0"])
    assert code == 2 and "takes no option group" in capsys.readouterr().err
    assert not (tmp_path / "x.txt").exists()


def test_a_one_way_design_is_refused_by_the_command(tmp_path, capsys):
    """A directed design with a link in one direction only: exit 2, one line naming the pair, no file."""
    inst_path, sol_path, out = tmp_path / "ring.json", tmp_path / "ring-sol.json", tmp_path / "topo.txt"
    instance = {
        "format": "topoopt-instance",
        "version": 1,
        "cluster": {"servers": 3, "degree": 1, "link_bandwidth_gbps": 100, "links": "directed"},
        "demand": {"mp": {"pairs": [[0, 1, 1e6]]}},
        "fixed_topology": {"links": [[0, 1, 1], [1, 2, 1], [2, 0, 1]]},
    }
    inst_path.write_text(json.dumps(instance))
    assert main(["solve", str(inst_path), "--out", str(sol_path), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["export", str(inst_path), str(sol_path), "--to", "simai", "-o", str(out)]) == 2
    assert "full duplex" in capsys.readouterr().err
    assert not out.exists()


def test_the_guide_shows_the_exporters_file():
    """The example in docs/guide/export.md is what the exporter writes for it (default gpu type)."""
    guide = (Path(__file__).parents[2] / "docs" / "guide" / "export.md").read_text()
    block = guide.split("The same four servers as above (double links 0-1 and 2-3):\n\n```\n")[1].split("```")[0]
    inst, sol = fixed(4, 2, [[0, 1, 2], [2, 3, 2]])
    assert block.splitlines() == simai_lines(inst, sol)
