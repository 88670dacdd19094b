"""Instance files: every documented field is read, every violation is one message with its path."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import INSTANCES, minimal
from topoopt_ilp import files
from topoopt_ilp.core.instance import AllReduceGroup, Cluster, Demand, FixedTopology, Instance
from topoopt_ilp.errors import InstanceError


def parse(data):
    return files.parse_instance(data)


def error_of(data) -> InstanceError:
    with pytest.raises(InstanceError) as exc:
        parse(data)
    return exc.value


@pytest.mark.parametrize("path", sorted(INSTANCES.glob("*.json")), ids=lambda p: p.name)
def test_shipped_instances_load_and_round_trip(path):
    inst = files.load_instance(path)
    again = files.parse_instance(json.loads(json.dumps(files.instance_to_dict(inst))))
    assert files.instance_to_dict(again) == files.instance_to_dict(inst)
    if inst.demand is not None:  # (a workload instance has no fixed demand)
        assert np.array_equal(again.demand.mp_matrix(inst.n), inst.demand.mp_matrix(inst.n))
    assert (again.workload is None) == (inst.workload is None)


def test_testbed_values():
    inst = files.load_instance(INSTANCES / "testbed-12.json")
    assert (inst.n, inst.d, inst.cluster.link_bandwidth_gbps) == (12, 4, 25)
    assert inst.cluster.link_bytes_per_s == pytest.approx(25e9 / 8)
    assert inst.demand.allreduce[0].members == tuple(range(12))
    # 2(k-1)/k * S per member for ring AllReduce
    assert inst.demand.allreduce[0].bytes_per_member() == pytest.approx(2 * 11 / 12 * 100e6)
    assert inst.objective == "iteration_time" and inst.topology_family == "any"


def test_defaults_and_all_to_all_matrix():
    inst = parse(minimal())
    c = inst.cluster
    assert (c.links, c.regular, c.multi_links) == ("undirected", True, True)
    m = inst.demand.mp_matrix(8)
    assert m.sum() == pytest.approx(56 * 1e6) and np.all(np.diag(m) == 0)


def test_mp_matrix_form_equals_pairs_form():
    mat = [[0.0] * 6 for _ in range(6)]
    mat[0][3] = 5.0
    mat[4][1] = 7.0
    a = parse(minimal(cluster={"servers": 6, "degree": 2, "link_bandwidth_gbps": 1}, demand={"mp": {"matrix": mat}}))
    b = parse(
        minimal(
            cluster={"servers": 6, "degree": 2, "link_bandwidth_gbps": 1},
            demand={"mp": {"pairs": [[0, 3, 5], [4, 1, 7]]}},
        )
    )
    assert np.array_equal(a.demand.mp_matrix(6), b.demand.mp_matrix(6))


def test_instances_constructible_in_code_are_checked_alike():
    cl = Cluster(servers=6, degree=2, link_bandwidth_gbps=10)
    inst = Instance(cluster=cl, demand=Demand(allreduce=(AllReduceGroup(tuple(range(6)), 1e6),)))
    assert inst.n == 6
    with pytest.raises(InstanceError, match=r"demand.allreduce\[0\].members\[1\]: must be <= 5, got 9"):
        Instance(cluster=cl, demand=Demand(allreduce=(AllReduceGroup((0, 9), 1e6),)))
    with pytest.raises(InstanceError, match="cluster.degree.*odd"):
        Cluster(servers=5, degree=3, link_bandwidth_gbps=1)


@pytest.mark.parametrize(
    "mutate, field, reason",
    [
        (lambda d: d["cluster"].update(degree=-1), "cluster.degree", "must be >= 1"),
        (lambda d: d["cluster"].update(servers=10**9), "cluster.servers", "must be <= 16384"),
        (lambda d: d["cluster"].update(servers="12"), "cluster.servers", "expected an integer, got a string"),
        (lambda d: d["cluster"].update(servers=True), "cluster.servers", "expected an integer, got a boolean"),
        (lambda d: d["cluster"].update(servers=7, degree=3), "cluster.degree", "servers*degree = 21 is odd"),
        (lambda d: d["cluster"].update(degree=8, multi_links=False), "cluster.degree", "needs parallel links"),
        (lambda d: d["cluster"].update(link_bandwidth_gbps=0), "cluster.link_bandwidth_gbps", "must be > 0"),
        (lambda d: d["cluster"].update(links="optical"), "cluster.links", "must be one of undirected, directed"),
        (lambda d: d["cluster"].update(colour="red"), "cluster", "unknown key 'colour'"),
        (lambda d: d.update(objective="speed"), "objective", "must be one of"),
        (lambda d: d.update(topology_family="tree"), "topology_family", "must be one of"),
        (
            lambda d: d.update(demand={"allreduce": [{"members": [0, 1, 1], "bytes": 1}]}),
            "demand.allreduce[0].members[2]",
            "listed twice",
        ),
        (
            lambda d: d.update(demand={"allreduce": [{"members": [0, 8], "bytes": 1}]}),
            "demand.allreduce[0].members[1]",
            "must be <= 7, got 8",
        ),
        (
            lambda d: d.update(demand={"allreduce": [{"members": "all", "bytes": -5}]}),
            "demand.allreduce[0].bytes",
            "must be > 0",
        ),
        (
            lambda d: d.update(demand={"allreduce": [{"members": "some", "bytes": 5}]}),
            "demand.allreduce[0].members",
            "expected a list of server ids",
        ),
        (lambda d: d.update(demand={"mp": {"pairs": [[0, 0, 5]]}}), "demand.mp.pairs[0]", "both server 0"),
        (lambda d: d.update(demand={"mp": {"pairs": [[0, 1, "5"]]}}), "demand.mp.pairs[0][2]", "expected a number"),
        (lambda d: d.update(demand={"mp": {"matrix": [[0]]}}), "demand.mp.matrix", "has 1 rows, expected 8"),
        (lambda d: d.update(demand={}), "demand", "the demand is empty"),
        (lambda d: d.pop("demand"), None, "exactly one of 'demand', 'workload' and 'job' (it has none)"),
        (lambda d: d.update(workload={"layers": []}), None, "(it has demand and workload)"),
        (lambda d: d.update(version=2), "version", "unsupported version"),
        (lambda d: d.update(fixed_topology={"jumps": [1, 7]}), "fixed_topology.jumps[1]", "same undirected jump"),
        (
            lambda d: d.update(fixed_topology={"jumps": [1, 2]}),
            "fixed_topology",
            "server 0 has 4 links, needs exactly 2",
        ),
        (lambda d: d.update(fixed_topology={"links": [[0, 0, 1]]}), "fixed_topology.links[0]", "to itself"),
        (
            lambda d: d.update(topology_family="coprime_circulant", fixed_topology={"jumps": [2]}),
            "fixed_topology.jumps[0]",
            "not coprime",
        ),
        (lambda d: d.update(solver={"time_limit_s": -1}), "solver.time_limit_s", "must be >= 0"),
        (
            lambda d: d.update(solver={"backend": "nope"}),
            "solver.backend",
            "must be one of cbc, cpsat, highs, scip; got 'nope'",
        ),
        (lambda d: d.update(solver={"backend": 3}), "solver.backend", "got int"),
    ],
)
def test_each_violation_names_field_and_reason(mutate, field, reason):
    data = minimal()
    mutate(data)
    err = error_of(data)
    assert err.field == field
    assert reason in err.reason


def test_file_errors_name_the_file(tmp_path):
    p = tmp_path / "broken.json"
    p.write_text('{"format": "topoopt-instance", "version": 1, "cluster": {')
    with pytest.raises(InstanceError) as exc:
        files.load_instance(p)
    assert exc.value.source == str(p) and "malformed JSON at line 1" in str(exc.value)
    p.write_text(json.dumps(minimal()).replace("1000000.0", "NaN"))
    with pytest.raises(InstanceError, match="NaN is not a number JSON allows"):
        files.load_instance(p)
    data = minimal()
    data["cluster"]["servers"] = "5"
    p.write_text(json.dumps(data))
    with pytest.raises(InstanceError, match=r"broken.json: cluster.servers: expected an integer, got a string$"):
        files.load_instance(p)
    with pytest.raises(InstanceError, match="cannot read file"):
        files.load_instance(tmp_path / "missing.json")


def test_directed_instance_allows_odd_product():
    inst = parse(minimal(cluster={"servers": 7, "degree": 3, "link_bandwidth_gbps": 1, "links": "directed"}))
    assert inst.cluster.directed


def test_fixed_topology_matrix_for_jumps_and_links():
    inst = parse(minimal(fixed_topology={"jumps": [1]}))
    x = inst.fixed_topology_matrix()
    assert x.sum(axis=1).tolist() == [2] * 8 and x[0, 1] == x[0, 7] == 1
    half = parse(
        minimal(cluster={"servers": 8, "degree": 3, "link_bandwidth_gbps": 1}, fixed_topology={"jumps": [1, 4]})
    )
    assert half.fixed_topology_matrix()[0, 4] == 1  # jump n/2 adds one link per pair, not two
    assert isinstance(half.fixed_topology, FixedTopology)


@pytest.mark.parametrize(
    "n,d,family,links,why",
    [
        (6, 4, "coprime_circulant", "undirected", "only 1 jump class(es) (2 ports)"),
        (6, 3, "coprime_circulant", "undirected", "is not coprime with n = 6"),
        (9, 9, "circulant", "directed", "only 8 jump(s)"),
        (8, 5, "coprime_circulant", "directed", "only 4 jump(s)"),
    ],
)
def test_a_regular_circulant_family_needs_a_jump_set_of_the_degree(n, d, family, links, why):
    # Found by a user: these validated, then every method refused them.
    doc = minimal(
        cluster={"servers": n, "degree": d, "link_bandwidth_gbps": 100, "links": links}, topology_family=family
    )
    with pytest.raises(InstanceError, match="cluster.degree") as err:
        files.parse_instance(doc)
    assert why in str(err.value)
    files.parse_instance({**doc, "topology_family": "any"})  # the same cluster is fine without the family
    for ok in (
        (8, 4, "coprime_circulant", "undirected"),
        (8, 3, "circulant", "undirected"),
        (8, 4, "coprime_circulant", "directed"),
    ):
        files.parse_instance(
            minimal(
                cluster={"servers": ok[0], "degree": ok[1], "link_bandwidth_gbps": 100, "links": ok[3]},
                topology_family=ok[2],
            )
        )


@pytest.mark.parametrize(
    "section,key,value",
    [
        ("cluster", "link_bandwidth_gbps", 1e308),  # found by a user: the evaluator's loads overflowed into NaN
        ("cluster", "hop_latency_us", 1e300),
        ("demand", "all_to_all", 1e20),
    ],
)
def test_physical_quantities_have_upper_limits(section, key, value):
    doc = minimal()
    doc[section] = {**doc[section], key: value}
    with pytest.raises(InstanceError, match="must be at most"):
        files.parse_instance(doc)
    with pytest.raises(InstanceError, match="must be at most"):
        files.parse_instance(minimal(demand={"allreduce": [{"members": "all", "bytes": 1e300}]}))


def test_degree_one_problem_names_what_cannot_be_carried():
    from topoopt_ilp.core.instance import AllReduceGroup, Cluster, Demand, degree_one_problem

    c = Cluster(8, 1, 100.0)
    assert "chain 3 servers" in degree_one_problem(Demand(mp=((0, 1, 1.0), (1, 2, 1.0))), c)
    assert "group 0 connects 3" in degree_one_problem(Demand(allreduce=(AllReduceGroup((0, 1, 2), 1.0),)), c)
    assert "all-to-all" in degree_one_problem(Demand(all_to_all=1.0), c)
    assert (
        degree_one_problem(Demand(mp=((0, 1, 1.0), (2, 3, 1.0)), allreduce=(AllReduceGroup((4, 5), 1.0),)), c) is None
    )
    assert degree_one_problem(Demand(all_to_all=1.0), Cluster(8, 1, 100.0, links="directed")) is None
    assert degree_one_problem(Demand(all_to_all=1.0), Cluster(8, 2, 100.0)) is None


def test_solver_backend_is_a_registry_name_installed_or_not(tmp_path, monkeypatch, capsys):
    """An unknown backend is refused when the file is read (validate exits 2 naming file and field);
    a known backend whose package is missing still loads (it fails only when it solves)."""
    from topoopt_ilp.cli import main
    from topoopt_ilp.solvers.registry import BACKENDS, BackendInfo

    data = minimal()
    data["solver"] = {"backend": "nope"}
    p = tmp_path / "nope.json"
    p.write_text(json.dumps(data))
    assert main(["validate", str(p)]) == 2
    err = capsys.readouterr().err
    assert f"{p}: solver.backend: must be one of cbc, cpsat, highs, scip; got 'nope'" in err
    monkeypatch.setattr(BackendInfo, "is_available", lambda self: False)
    for name in BACKENDS:
        data["solver"] = {"backend": name}
        assert parse(data).solver.backend == name
