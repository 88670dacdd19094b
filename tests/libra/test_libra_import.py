"""``topoopt import-libra``: LIBRA's own input files (network / workload / communicator / cost YAML
and ASTRA-sim text) read as the problem the shipped topoopt-libra file states."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT
from topoopt_ilp.cli import main
from topoopt_ilp.errors import InstanceError
from topoopt_ilp.libra.astra_import import import_libra
from topoopt_ilp.libra.problem import load_hierarchy
from topoopt_ilp.models.libra import solve_bandwidth

GPT3 = ROOT / "instances" / "libra" / "gpt3-4d.json"
_TOKEN = {
    "all_reduce": "ALLREDUCE",
    "reduce_scatter": "REDUCESCATTER",
    "all_gather": "ALLGATHER",
    "all_to_all": "ALLTOALL",
}


def libra_files(tmp_path, data=None):
    """The shipped GPT-3 problem written back in LIBRA's four formats (cycles at 1 GHz)."""
    data = data or json.loads(GPT3.read_text())
    dims = data["dimensions"]
    kinds = {"ring": "Ring", "fully_connected": "FullyConnected", "switch": "Switch"}
    (tmp_path / "net.yml").write_text(
        "# LIBRA network\n"
        f"Topology: [ {', '.join(kinds[d['kind']] for d in dims)} ]\n"
        f"NpusCount: [ {', '.join(str(d['size']) for d in dims)} ]\n"
        f"CostDimension: [ {', '.join(d['name'] for d in dims)} ]\n"
    )
    cost = ""
    for d in dims:
        prices = d["prices_usd_per_gbps"]
        cost += f"{d['name']}:\n" + "".join(f"  {k.capitalize()}: {v}\n" for k, v in prices.items())
        if d["kind"] != "switch":
            cost += "  Switch: 13.0\n"  # LIBRA's files price switches for every dimension; only switch ones pay
    (tmp_path / "cost.yml").write_text(cost)
    comms = data["workload"]["communicators"]
    lines, used = [], {}
    for layer in data["workload"]["layers"]:
        tokens = [layer["name"], "-1"]
        for phase in ("forward", "input_grad", "weight_grad"):
            ph = layer.get(phase, {})
            coll = ph.get("collective")
            tokens += [
                repr(ph.get("compute_us", 0.0) * 1e3),
                _TOKEN[coll["type"]] if coll else "NONE",
                str(int(coll["bytes"])) if coll else "0",
            ]
            if coll:
                used.setdefault(phase, coll["communicator"])
        lines.append(" ".join(tokens + ["10"]))
    (tmp_path / "work.txt").write_text("\n".join(lines) + "\n")
    yml = {"forward": "Forward", "input_grad": "InputGrad", "weight_grad": "WeightGrad"}
    (tmp_path / "comm.yml").write_text("".join(f"{yml[p]}: {comms[used.get(p, 'tp')]}\n" for p in yml))
    return [str(tmp_path / f) for f in ("net.yml", "work.txt", "comm.yml", "cost.yml")]


def test_import_reproduces_the_shipped_problem(tmp_path):
    shipped = load_hierarchy(GPT3)
    net, work, comm, cost = libra_files(tmp_path)
    imported = import_libra(net, work, comm, cost, total_bandwidth_gbps=1000.0)
    assert [(d.name, d.kind, d.size, d.npu_unit_cost) for d in imported.dimensions] == [
        (d.name, d.kind, d.size, d.npu_unit_cost) for d in shipped.dimensions
    ]  # Switch prices of rings unused
    assert len(imported.layers) == len(shipped.layers)
    for a, b in zip(imported.layers, shipped.layers):
        for p in ("forward", "input_grad", "weight_grad"):
            pa, pb = a.phase(p), b.phase(p)
            assert pa.compute_us == pytest.approx(pb.compute_us)
            assert (pa.collective is None) == (pb.collective is None)
            if pa.collective is not None:
                assert (pa.collective.type, pa.collective.bytes, pa.collective.communicator) == (
                    pb.collective.type,
                    pb.collective.bytes,
                    pb.collective.communicator,
                )
    # same problem, same optimum (the shipped file adds orderings: compare without them)
    from dataclasses import replace

    from topoopt_ilp.libra.problem import Constraints

    free = replace(shipped, constraints=Constraints())
    assert solve_bandwidth(imported).objective == pytest.approx(solve_bandwidth(free).objective, rel=1e-6)


def test_cli_writes_a_file_that_bandwidth_solves(tmp_path, capsys):
    net, work, comm, cost = libra_files(tmp_path)
    out = tmp_path / "gpt3.json"
    assert (
        main(
            [
                "import-libra",
                "--network",
                net,
                "--workload",
                work,
                "--communicator",
                comm,
                "--cost-model",
                cost,
                "--total-bandwidth",
                "1000",
                "--name",
                "gpt3",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    assert "4 dimensions, 4096 NPUs, 18 layers" in capsys.readouterr().out
    assert main(["bandwidth", str(out)]) == 0
    assert "status: optimal" in capsys.readouterr().out
    assert (
        main(
            [
                "import-libra",
                "--network",
                net,
                "--workload",
                work,
                "--communicator",
                comm,
                "--cost",
                "1e7",
                "-o",
                str(tmp_path / "c.json"),
            ]
        )
        == 2
    )  # a cost budget needs the prices
    assert "needs the cost of every dimension" in capsys.readouterr().err


@pytest.mark.parametrize(
    "which,text,match",
    [
        ("work.txt", "Q1 -1 100 NONE 0 100 NONE 0\n", "12"),
        ("work.txt", "Q1 -1 100 BCAST 8 100 NONE 0 100 NONE 0 10\n", "unknown collective 'BCAST'"),
        ("work.txt", "Q1 -1 x NONE 0 100 NONE 0 100 NONE 0 10\n", "must be numbers"),
        ("work.txt", "\n", "no layers"),
        (
            "net.yml",
            "Topology: [ Ring, Torus, Ring, Switch ]\nNpusCount: [4, 8, 4, 32]\nCostDimension: [a, b, c, d]\n",
            "unknown building block 'Torus'",
        ),
        ("net.yml", "Topology: [ Ring ]\nNpusCount: [4, 8]\nCostDimension: [a]\n", "one length"),
        ("net.yml", "Topology: [ Ring\n", "not a YAML file"),
        ("comm.yml", "Forward: [4, 4, -1, -1]\n", "missing key 'InputGrad'"),
        (
            "comm.yml",
            "Forward: [4, 4, -1, -1]\nInputGrad: [4, 4, -1, -1]\nWeightGrad: [-1, 2, 4, 64]\n",
            "larger than dimension",
        ),
        ("cost.yml", "InterChiplet:\n  Link: 2\n", "no prices for cost dimension"),
    ],
)
def test_bad_libra_files_are_named(tmp_path, which, text, match):
    files = libra_files(tmp_path)
    (tmp_path / which).write_text(text)
    with pytest.raises(InstanceError, match=match):
        import_libra(*files, total_bandwidth_gbps=1000.0)


def test_shipped_libra_format_files_are_the_gpt3_problem(tmp_path):
    """instances/libra/libra-format/ (the README's example) is the shipped GPT-3 problem in LIBRA's formats."""
    shipped = ROOT / "instances" / "libra" / "libra-format"
    written = libra_files(tmp_path)
    names = ("gpt3-4d-network.yml", "gpt3-workload.txt", "gpt3-4d-communicator.yml", "gpt3-4d-cost.yml")
    for ours, theirs in zip(names, written):
        assert (shipped / ours).read_text() == open(theirs).read()


@pytest.mark.parametrize("which", ["net.yml", "work.txt", "comm.yml", "cost.yml"])
def test_out_may_not_overwrite_an_input(tmp_path, capsys, which):
    net, work, comm, cost = files = libra_files(tmp_path)
    before = (tmp_path / which).read_text()
    assert (
        main(
            [
                "import-libra",
                "--network",
                net,
                "--workload",
                work,
                "--communicator",
                comm,
                "--cost-model",
                cost,
                "--total-bandwidth",
                "1000",
                "-o",
                str(tmp_path / which),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the import would overwrite it" in err
    assert (tmp_path / which).read_text() == before and str(tmp_path / which) in files


@pytest.mark.parametrize(
    "which,edit,match",
    [
        (
            "net.yml",
            lambda t: t.replace("NpusCount: [ 4, 8,", "NpusCount: [ 4, 8.5,"),
            r"net.yml: NpusCount\[1\]: expected an integer",
        ),
        (
            "comm.yml",
            lambda t: t.replace("Forward: [4, 4, -1, -1]", "Forward: [4, 4, -1]"),
            r"comm.yml: Forward: has 3 entries",
        ),
        (
            "work.txt",
            lambda t: t.replace("Q1 -1 9375000.0", "Q1 -1 -100", 1),
            r"work.txt: line 1, forward compute cycles: must be a finite number >= 0, got -100",
        ),
        ("cost.yml", lambda t: t.replace("Link: 2.0", "Link: -3", 1), r"cost.yml: chiplet.Link: must be > 0"),
        # each of these must be refused: a dimension named None, a key given twice (the last kept), bytes
        # of -7 in a phase without a collective, an unknown price element, a NaN price a ring does not pay
        (
            "net.yml",
            lambda t: t.replace("CostDimension: [ chiplet,", "CostDimension: [ null,"),
            r"net.yml: CostDimension\[0\]: expected a name",
        ),
        (
            "net.yml",
            lambda t: t + "NpusCount: [ 2, 2, 2, 2 ]\n",
            r"net.yml: .*key 'NpusCount' is given twice \(line 5\)",
        ),
        (
            "work.txt",
            lambda t: t.replace("NONE 0", "NONE -7", 1),
            r"work.txt: line 1, forward collective bytes: must be a finite number >= 0, got -7",
        ),
        (
            "cost.yml",
            lambda t: t.replace("Link: 2.0", "Link: 2.0\n  Cable: 3", 1),
            r"cost.yml: chiplet: unknown element 'Cable'",
        ),
        (
            "cost.yml",
            lambda t: t.replace("Switch: 13.0", "Switch: .nan", 1),
            r"cost.yml: chiplet.Switch: must be a finite number",
        ),
    ],
)
def test_problems_are_named_in_libra_terms(tmp_path, which, edit, match):
    """A value the topoopt-libra parser refuses is reported with the LIBRA file and key it came from."""
    files = libra_files(tmp_path)
    (tmp_path / which).write_text(edit((tmp_path / which).read_text()))
    with pytest.raises(InstanceError, match=match):
        import_libra(*files, total_bandwidth_gbps=1000.0)


def test_name_option_and_exponent_prices(tmp_path, capsys):
    """--name was overwritten by the last dimension's name ("pod"); a price written 2e0 (YAML 1.1 wants a
    dot) was a string, refused as 'expected a number'."""
    net, work, comm, cost = libra_files(tmp_path)
    (tmp_path / "cost.yml").write_text((tmp_path / "cost.yml").read_text().replace("Link: 2.0", "Link: 2e0", 1))
    out = tmp_path / "gpt3.json"
    assert (
        main(
            [
                "import-libra",
                "--network",
                net,
                "--workload",
                work,
                "--communicator",
                comm,
                "--cost-model",
                cost,
                "--total-bandwidth",
                "1000",
                "--name",
                "gpt3",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    problem = load_hierarchy(out)
    assert problem.name == "gpt3" and dict(problem.dimensions[0].prices_usd_per_gbps)["link"] == 2.0
    assert import_libra(net, work, comm, cost, total_bandwidth_gbps=1000.0).name == ""


def test_a_cost_budget_without_prices_says_give_the_cost_model(tmp_path):
    net, work, comm, _ = libra_files(tmp_path)
    with pytest.raises(InstanceError, match="needs the cost of every dimension: give --cost-model"):
        import_libra(net, work, comm, cost_usd=1e7)


def test_dimensions_may_share_a_cost_dimension(tmp_path):
    """CostDimension is a price class (LIBRA's parser accepts repeats): the dimensions get unique names."""
    net, work, comm, cost = libra_files(tmp_path)
    text = (tmp_path / "net.yml").read_text()
    (tmp_path / "net.yml").write_text(
        text.replace("CostDimension: [ chiplet, package,", "CostDimension: [ chiplet, chiplet,")
    )
    problem = import_libra(net, work, comm, cost, total_bandwidth_gbps=1000.0)
    assert [d.name for d in problem.dimensions] == ["chiplet-1", "chiplet-2", "node", "pod"]
    assert dict(problem.dimensions[1].prices_usd_per_gbps) == {"link": 2.0}  # chiplet's price, not package's 4.0
    assert problem.dimensions[1].kind == "fully_connected" and problem.dimensions[1].size == 8
