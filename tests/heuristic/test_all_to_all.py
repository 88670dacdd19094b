"""The heuristic's circulant for uniform all-to-all: offset routes for every offset, valid designs,
and the evaluator's bandwidth time equal to the busiest coin's load worked out by hand."""

from __future__ import annotations

from math import gcd

import numpy as np
import pytest
from scipy.sparse.csgraph import shortest_path

from conftest import minimal
from topoopt_ilp import files
from topoopt_ilp.evaluation.evaluate import evaluate
from topoopt_ilp.evaluation.verify import reachability_violations, verify
from topoopt_ilp.heuristic import all_to_all_circulant, circulant_matrix, coin_loads
from topoopt_ilp.methods import solve


def a2a_instance(n, d, *, directed=False, bytes_=1e6, **demand):
    cluster = {"servers": n, "degree": d, "link_bandwidth_gbps": 100, "links": "directed" if directed else "undirected"}
    return files.parse_instance(minimal(cluster=cluster, demand={"all_to_all": bytes_, **demand}))


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("n", [5, 7, 12, 16, 30, 64])
@pytest.mark.parametrize("d", [2, 4, 8])
def test_routes_cover_every_offset_on_the_circulant(n, d, directed):
    design = all_to_all_circulant(n, d, directed=directed)
    m = d if directed else d // 2
    coprime = [j for j in range(1, n) if gcd(j, n) == 1 and (directed or 2 * j < n)]
    if len(coprime) < m:
        assert design is None
        return
    jumps = design.jumps
    assert len(set(jumps)) == m and 1 in jumps and all(j in coprime for j in jumps)
    routes = design.routes
    assert set(routes.offset.tolist()) == set(range(1, n))  # n - 1 offsets, each once or split
    np.testing.assert_allclose(np.bincount(routes.offset, weights=routes.fraction, minlength=n)[1:], 1.0)
    assert ((routes.jumps.sum(axis=1) - routes.offset) % n == 0).all()
    x = circulant_matrix(n, jumps, directed)
    dist = shortest_path(x > 0, unweighted=True, directed=directed)
    np.testing.assert_array_equal(design.dist, dist[0].astype(int))
    assert (routes.hops == design.dist[routes.offset]).all()  # shortest routes only
    load = coin_loads(n, routes)
    assert design.max_coin_load == load.max()
    if not directed:  # mirrored routes: both directions of every link carry the same bytes
        np.testing.assert_allclose(load, np.roll(load[::-1], 1), rtol=1e-12)


def test_no_design_for_an_odd_undirected_degree():
    assert all_to_all_circulant(10, 3) is None


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("n", [9, 16, 33, 64])
def test_solve_gives_a_verified_circulant_with_n_minus_1_offsets(n, directed):
    inst = a2a_instance(n, 4, directed=directed)
    sol = solve(inst)
    assert verify(inst, sol).valid
    assert len(sol.routing.paths) == 0
    assert len(np.unique(sol.routing.offset_routes.offset)) == n - 1
    assert sol.topology.jumps == tuple(sol.details["jumps"])
    # every arc of jump j carries A x coin_loads[j]: the busiest one sets the bandwidth time
    busiest = coin_loads(n, sol.routing.offset_routes).max() * 1e6 / inst.cluster.link_bytes_per_s
    assert evaluate(inst, sol).bandwidth_time_s == pytest.approx(busiest, rel=1e-12)


def test_other_demands_keep_the_matching_design():
    """Only a demand that is all-to-all alone gets the circulant, in paper mode; with an AllReduce
    or MP pairs on top, at an odd degree, and in authors' mode, TopologyFinder runs as before."""
    mixed = a2a_instance(16, 4, allreduce=[{"members": "all", "bytes": 1e9}])
    odd = a2a_instance(16, 3)
    for inst, options in ((mixed, {}), (odd, {}), (a2a_instance(16, 4), {"mode": "authors"})):
        sol = solve(inst, **options)
        assert "design" not in sol.details and verify(inst, sol).valid
        assert "d_mp" in sol.details  # TopologyFinder's design


@pytest.mark.parametrize("directed", [False, True])
def test_reachability_names_the_first_pair_cut(directed):
    """All-to-all on two disjoint rings (and, directed, one way round each): the first pair in
    row-major order without a path, found without the demand's matrix."""
    n = 10
    x = np.zeros((n, n), dtype=np.int64)
    for ring in ([0, 2, 4, 6, 8], [1, 3, 5, 7, 9]):
        for a, b in zip(ring, ring[1:] + ring[:1]):
            x[a, b] += 1
            if not directed:
                x[b, a] += 1
    inst = a2a_instance(n, 1 if directed else 2, directed=directed)
    reach = np.isfinite(shortest_path(x > 0, unweighted=True, directed=directed))
    s, t = map(int, np.argwhere(~reach)[0])
    assert reachability_violations(inst, x) == [
        f"no path from {s} to {t} in the topology, but the demand sends bytes {s}->{t}"
    ]


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("n, fixed", [(16, (1,)), (30, (1, 7)), (64, (5,)), (64, (1, 3, 63))])
def test_jumps_added_beside_fixed_ones_route_every_offset_over_both(n, fixed, directed):
    design = all_to_all_circulant(n, 4, directed=directed, fixed=fixed)
    classes = {j % n if directed else min(j % n, n - j % n) for j in fixed}
    m = 4 if directed else 2
    assert len(set(design.jumps)) == m and not classes & set(design.jumps)
    assert all(gcd(j, n) == 1 for j in design.jumps)
    routes = design.routes
    np.testing.assert_allclose(np.bincount(routes.offset, weights=routes.fraction, minlength=n)[1:], 1.0)
    assert ((routes.jumps.sum(axis=1) - routes.offset) % n == 0).all()
    x = circulant_matrix(n, (*sorted(classes), *design.jumps), directed)
    assert set((routes.jumps[routes.jumps != 0] % n).tolist()) <= set(np.flatnonzero(x[0]).tolist())
    dist = shortest_path(x > 0, unweighted=True, directed=directed)
    np.testing.assert_array_equal(design.dist, dist[0].astype(int))
    assert (routes.hops == design.dist[routes.offset]).all()


def test_without_fixed_jumps_the_design_is_the_anchored_one():
    assert all_to_all_circulant(64, 8).jumps == all_to_all_circulant(64, 8, fixed=()).jumps


def mixed_instance(n, d, a2a_bytes):
    return a2a_instance(n, d, bytes_=a2a_bytes, allreduce=[{"members": "all", "bytes": 1e9}])


@pytest.mark.parametrize("n, d, a2a", [(128, 8, 4e6), (256, 8, 4e6), (64, 4, 4e7)])
def test_allreduce_plus_all_to_all_gets_rings_and_jumps_and_beats_the_matching(n, d, a2a, monkeypatch):
    from topoopt_ilp.heuristic import design as heuristic_design

    inst = mixed_instance(n, d, a2a)
    sol = solve(inst)
    assert verify(inst, sol).valid
    assert sol.details["d_mp"] > 0 and sol.details["all_to_all_jumps"]
    assert len(sol.routing.paths) == 0  # every offset on its routes over the rings' and the added jumps
    assert (sol.topology.matrix.sum(axis=1) == d).all()
    monkeypatch.setattr(heuristic_design, "_rings_and_all_to_all", lambda *a, **k: None)
    matching = solve(inst)  # TopologyFinder's MP matching over the all-to-all demand, explicit paths
    assert verify(inst, matching).valid and len(matching.routing.paths) > 0
    assert sol.metrics["iteration_time_s"] < matching.metrics["iteration_time_s"]


def test_allreduce_plus_light_all_to_all_keeps_topologyfinders_design():
    sol = solve(mixed_instance(64, 8, 1e5))  # the split gives the all-to-all no port
    assert sol.details["d_mp"] == 0 and "all_to_all_jumps" not in sol.details


@pytest.mark.parametrize(
    "cluster, groups",
    [
        ({"servers": 64, "degree": 6, "links": "directed"}, [{"members": "all", "bytes": 1e9}]),
        ({"servers": 60, "degree": 8, "multi_links": False}, [{"members": "all", "bytes": 1e9}]),
        ({"servers": 63, "degree": 8}, [{"members": "all", "bytes": 1e9}]),
        (
            {"servers": 64, "degree": 8},
            [{"members": list(range(0, 64, 4)), "bytes": 5e8}, {"members": "all", "bytes": 1e9}],
        ),
        ({"servers": 64, "degree": 8}, [{"members": [5, 3, 9, 1, 40, 22], "bytes": 2e9}]),  # a ring in member order
    ],
)
def test_rings_and_all_to_all_jumps_on_other_clusters_and_groups(cluster, groups, monkeypatch):
    from topoopt_ilp.heuristic import design as heuristic_design

    doc = minimal(cluster={"link_bandwidth_gbps": 100, **cluster}, demand={"allreduce": groups, "all_to_all": 4e7})
    inst = files.parse_instance(doc)
    sol = solve(inst)
    assert verify(inst, sol).valid and sol.details["all_to_all_jumps"]
    monkeypatch.setattr(heuristic_design, "_rings_and_all_to_all", lambda *a, **k: None)
    assert sol.metrics["iteration_time_s"] < solve(inst).metrics["iteration_time_s"]
