"""``topoopt export`` as a user runs it, and the exporter registry from Python."""

from __future__ import annotations

import csv
import json

import pytest
from export_cases import petersen

from conftest import INSTANCES
from topoopt_ilp.cli import main
from topoopt_ilp.errors import InputError, UnsupportedError
from topoopt_ilp.export import EXPORTERS, export, formats, write_cabling, write_ocs_config
from topoopt_ilp.files import save_instance, save_solution

TESTBED = str(INSTANCES / "testbed-12.json")


@pytest.fixture
def testbed(tmp_path, capsys):
    sol = tmp_path / "tb.json"
    assert main(["solve", TESTBED, "--out", str(sol), "--quiet"]) == 0
    capsys.readouterr()
    return str(sol)


def test_list_names_every_format(capsys):
    assert main(["export", "--list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in EXPORTERS) and set(formats()) == set(EXPORTERS)


@pytest.mark.parametrize("fabric", ["patch_panel", "ocs"])
def test_cabling_round_trip_through_verify(tmp_path, capsys, testbed, fabric):
    plan = tmp_path / "plan.csv"
    assert main(["export", TESTBED, testbed, "--to", "cabling", "-o", str(plan), "--fabric", fabric]) == 0
    rows = list(csv.reader(plan.open()))
    assert rows[0][:4] == ["link", "server_a", "interface_a", "port_a"] and len(rows) == 1 + 12 * 4 // 2
    for row in rows[1:]:
        assert int(row[3]) == int(row[1]) * 4 + int(row[2]) and int(row[6]) == int(row[4]) * 4 + int(row[5])
    capsys.readouterr()
    assert main(["verify", TESTBED, testbed, "--cabling", str(plan), "--fabric", fabric]) == 0
    assert "a valid cabling plan" in capsys.readouterr().out


def test_ocs_round_trip_through_verify(tmp_path, capsys, testbed):
    config = tmp_path / "ocs.json"
    assert main(["export", TESTBED, testbed, "--to", "ocs", "-o", str(config)]) == 0
    data = json.loads(config.read_text())
    assert data["format"] == "topoopt-ocs-config" and data["version"] == 1 and len(data["switches"]) == 4
    assert all(len(s["connections"]) == 6 for s in data["switches"])
    capsys.readouterr()
    assert main(["verify", TESTBED, testbed, "--ocs", str(config)]) == 0
    assert "a valid OCS configuration" in capsys.readouterr().out


def _one_line_no_file(capsys, code, path, *words):
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and not path.exists(), err
    assert all(w in err for w in words), err


def test_bad_input_is_one_line_exit_2_and_no_file(tmp_path, capsys, testbed):
    out = tmp_path / "out.csv"
    code = main(["export", TESTBED, testbed, "--to", "graphviz", "-o", str(out)])
    _one_line_no_file(capsys, code, out, "unknown export format 'graphviz'")
    code = main(["export", TESTBED, testbed, "-o", str(out)])
    _one_line_no_file(capsys, code, out, "--to FORMAT")
    code = main(["export", TESTBED, testbed, "--to", "ocs", "--fabric", "patch_panel", "-o", str(out)])
    _one_line_no_file(capsys, code, out, "one OCS per interface index")
    other = str(INSTANCES / "mix-16.json")  # a solution for another instance
    code = main(["export", other, testbed, "--to", "cabling", "-o", str(out)])
    _one_line_no_file(capsys, code, out, "does not fit the instance")
    code = main(["export", TESTBED, testbed, "--to", "cabling", "-o", testbed])
    assert code == 2 and "solution file itself" in capsys.readouterr().err


def test_a_design_without_a_1_factorisation_is_refused_for_ocs(tmp_path, capsys):
    inst, sol = petersen()
    ipath, spath = tmp_path / "petersen.json", tmp_path / "sol.json"
    save_instance(inst, ipath)
    save_solution(sol, spath, directed=inst.cluster.directed)
    for fmt, extra in (("ocs", []), ("cabling", ["--fabric", "ocs"])):
        out = tmp_path / f"out.{fmt}"
        code = main(["export", str(ipath), str(spath), "--to", fmt, "-o", str(out), *extra])
        _one_line_no_file(capsys, code, out, "no proper 3-edge-colouring", "--fabric patch_panel")
    out = tmp_path / "plan.csv"
    assert main(["export", str(ipath), str(spath), "--to", "cabling", "-o", str(out), "--fabric", "patch_panel"]) == 0
    capsys.readouterr()
    assert main(["verify", str(ipath), str(spath), "--cabling", str(out)]) == 0


def test_python_exporters_take_the_uniform_signature(tmp_path, testbed):
    from topoopt_ilp.files import load_instance, load_solution

    inst, sol = load_instance(TESTBED), load_solution(testbed)
    write_cabling(inst, sol, str(tmp_path / "a.csv"), fabric="ocs", time_limit_s=5)
    write_ocs_config(inst, sol, str(tmp_path / "a.json"))
    export(inst, sol, str(tmp_path / "b.csv"), "cabling")
    assert (tmp_path / "a.csv").read_text().count("\n") == 25
    with pytest.raises(InputError, match="takes no option colour"):
        write_cabling(inst, sol, str(tmp_path / "c.csv"), colour="red")
    with pytest.raises(InputError, match="unknown fabric"):
        export(inst, sol, str(tmp_path / "c.csv"), "cabling", fabric="ethernet")
    assert not (tmp_path / "c.csv").exists()


def test_a_new_format_is_one_entry_in_the_registry(tmp_path, monkeypatch, capsys, testbed):
    def write_links(instance, solution, path, **options):
        """Links (text): one line per pair."""
        with open(path, "w") as fh:
            fh.write(str(solution.topology.links(False)))

    monkeypatch.setitem(EXPORTERS, "links", write_links)
    out = tmp_path / "links.txt"
    assert main(["export", TESTBED, testbed, "--to", "links", "-o", str(out)]) == 0
    assert out.read_text().startswith("[(0, 1, 1)")
    assert main(["export", "--list"]) == 0
    assert "Links (text)" in capsys.readouterr().out


def test_the_unsupported_error_is_an_input_error():
    assert issubclass(UnsupportedError, InputError)
