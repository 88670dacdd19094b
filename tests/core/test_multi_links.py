"""cluster.multi_links false: the TopoOpt heuristic and every baseline return simple topologies
(no parallel links), keep every degree and connectivity, and pass the verifier."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.sparse.csgraph import connected_components

from conftest import INSTANCES, instance_data, minimal
from topoopt_ilp.cli import main
from topoopt_ilp.evaluation.verify import verify
from topoopt_ilp.files import parse_instance
from topoopt_ilp.methods import solve


def _instance(name=None, *, degree=None, directed=False, multi=False, **cluster):
    data = instance_data(name) if name else minimal()
    c = data["cluster"]
    c["multi_links"] = multi
    if degree is not None:
        c["degree"] = degree
    if directed:
        c["links"] = "directed"
    c.update(cluster)
    return parse_instance(data)


def _check(inst, sol):
    assert sol.status == "feasible"
    x = sol.topology.matrix
    d, directed = inst.d, inst.cluster.directed
    assert x.max() <= 1 and not np.diag(x).any()
    assert (x.sum(axis=1) == d).all() and (x.sum(axis=0) == d).all()  # regular: every interface used
    assert connected_components(x > 0, directed=directed, connection="strong")[0] == 1
    assert sol.metrics["connected"]
    report = verify(inst, sol)
    assert report.valid, report.violations
    assert "multi_links" in sol.details


HEURISTIC = [{}, {"select": "best"}, {"mode": "authors"}]


@pytest.mark.parametrize("options", HEURISTIC, ids=["geometric", "best", "authors"])
@pytest.mark.parametrize("degree", [4, 6, 7])
@pytest.mark.parametrize("directed", [False, True], ids=["undirected", "directed"])
def test_heuristic_on_mix8(options, degree, directed):
    inst = _instance("mix-8", degree=degree, directed=directed)
    _check(inst, solve(inst, method="heuristic", **options))


@pytest.mark.parametrize(
    "name,degree", [("testbed-12", 3), ("dlrm-like-6", 3), ("mix-16", 6), ("all-to-all-16", 5), ("dlrm-mini-6", 2)]
)
@pytest.mark.parametrize("directed", [False, True], ids=["undirected", "directed"])
def test_heuristic_on_other_instances(name, degree, directed):
    inst = _instance(name, degree=degree, directed=directed)
    for options in HEURISTIC:
        _check(inst, solve(inst, **options))


@pytest.mark.parametrize("n,d", [(6, 5), (8, 7), (10, 4), (12, 11)])
@pytest.mark.parametrize("directed", [False, True], ids=["undirected", "directed"])
def test_heuristic_all_to_all_up_to_complete_graph(n, d, directed):
    """d = n - 1: the only simple topology is the complete graph."""
    inst = _instance(degree=d, directed=directed, servers=n)
    for options in HEURISTIC:
        sol = solve(inst, **options)
        _check(inst, sol)
        if d == n - 1:
            assert sol.topology.matrix.sum() == n * (n - 1)


@pytest.mark.parametrize(
    "baseline,name,degree",
    [
        ("expander", "mix-8", 6),
        ("expander", "mix-8", 7),
        ("expander", "testbed-12", 3),
        ("expander", "dlrm-like-6", 3),
        ("torus", "mix-8", 4),
        ("torus", "mix-8", 6),
        ("torus", "testbed-12", 4),
        ("torus", "testbed-12", 6),
        ("demand_greedy", "mix-8", 4),
        ("demand_greedy", "mix-8", 6),
        ("demand_greedy", "mix-8", 7),
        ("demand_greedy", "testbed-12", 3),
        ("demand_greedy", "dlrm-like-6", 3),
    ],
)
def test_baselines(baseline, name, degree):
    inst = _instance(name, degree=degree)
    for seed in range(4):
        _check(inst, solve(inst, method="baseline", baseline=baseline, seed=seed))


def test_details_count_the_rewired_links():
    inst = _instance("mix-8", degree=6)
    sol = solve(inst)
    info = sol.details["multi_links"]
    assert info["rewired_swaps"] > 0 and info["links_rewired"] == 2 * info["rewired_swaps"]
    assert any("multi_links false" in note and "links rewired" in note for note in sol.details["notes"])
    base = solve(inst, method="baseline", baseline="torus")
    assert base.details["multi_links"]["rewired_swaps"] > 0 and "multi_links false" in base.details["note"]


def test_multi_links_true_keeps_the_multigraph():
    """The default (multi_links true) is untouched: same topology as before, parallel links kept."""
    multi, simple = _instance("mix-8", degree=6, multi=True), _instance("mix-8", degree=6)
    sol = solve(multi)
    assert sol.topology.matrix.max() > 1 and "multi_links" not in sol.details
    assert verify(multi, sol).valid
    assert not np.array_equal(sol.topology.matrix, solve(simple).topology.matrix)


def test_degree_needing_parallel_links_is_refused(tmp_path, capsys):
    data = instance_data("mix-8")
    data["cluster"].update(degree=8, multi_links=False)
    path = tmp_path / "i.json"
    path.write_text(json.dumps(data))
    assert main(["solve", str(path)]) == 2
    assert "multi_links" in capsys.readouterr().err


def test_cli_solve_and_verify(tmp_path, capsys):
    data = json.loads((INSTANCES / "mix-8.json").read_text())
    data["cluster"].update(degree=6, multi_links=False)
    inst, out = tmp_path / "ml.json", tmp_path / "sol.json"
    inst.write_text(json.dumps(data))
    for args in (
        [],
        ["--method", "baseline", "--baseline", "torus"],
        ["--method", "baseline", "--baseline", "demand_greedy"],
        ["--method", "baseline", "--baseline", "expander"],
    ):
        assert main(["solve", str(inst), "--out", str(out), *args]) == 0
        assert main(["verify", str(inst), str(out)]) == 0
    capsys.readouterr()
