"""The Moore circulant search on directed links (models/topology/moore_circulant.py): its floors against brute
force over every small digraph, its BFS against the graph catalogue's, its optima against the MILP,
and its place in the exact method (proven, fallback, time limit)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from conftest import minimal
from topoopt_ilp import files
from topoopt_ilp.evaluation.verify import verify
from topoopt_ilp.heuristic import circulant_matrix, circulant_stats_batch
from topoopt_ilp.methods import solve
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.topology import moore_circulant as mc
from topoopt_ilp.models.topology.catalogue import hop_statistics, max_concurrent_flow_lp
from topoopt_ilp.models.topology.solve import solve_topology_routing
from topoopt_ilp.solvers import solve as solver_solve

B = 8.0  # Gbps: 1e9 bytes/s per link, so with 1e9 bytes per pair lambda is in the model's units


def inst(n, d, *, objective="throughput", multi=True, regular=True, demand=None):
    cluster = {
        "servers": n,
        "degree": d,
        "link_bandwidth_gbps": B,
        "hop_latency_us": 0.0,
        "links": "directed",
        "multi_links": multi,
        "regular": regular,
    }
    return files.parse_instance(minimal(cluster=cluster, demand=demand or {"all_to_all": 1e9}, objective=objective))


def every_digraph(n, d):
    """Every labelled loopless directed multigraph on n servers with out-degree <= d (in-degrees free:
    the floors only use out-degrees), as an (N, n, n) stack."""
    rows = []
    for i in range(n):
        others = [j for j in range(n) if j != i]
        options = []
        for k in range(d + 1):
            for picks in itertools.combinations_with_replacement(others, k):
                r = np.zeros(n, dtype=np.int64)
                np.add.at(r, list(picks), 1)
                options.append(r)
        rows.append(options)
    return np.array([np.stack(choice) for choice in itertools.product(*rows)])


@pytest.mark.parametrize("n,d", [(4, 1), (4, 2), (5, 1), (3, 2)])
def test_floors_hold_for_every_small_digraph(n, d):
    graphs = every_digraph(n, d)
    W, diam = hop_statistics(graphs)
    w_floor, diam_floor = mc.moore_floors(n, d)
    assert W.min() >= w_floor and diam.min() >= diam_floor
    assert W.min() == w_floor  # tight on these sizes: the floor is not a loose constant
    # The length bound lambda <= d / F: the LP of every connected digraph of the 30 smallest W.
    for g in np.argsort(W, kind="stable")[:30]:
        lam = solver_solve(max_concurrent_flow_lp(graphs[g]), backend="highs").objective
        assert lam <= d / (w_floor / n) * (1 + 1e-9)


def test_the_directed_batch_bfs_agrees_with_the_catalogue_bfs():
    # The search scores directed circulants with the heuristic's batched BFS from server 0.
    rng = np.random.default_rng(3)
    for n, d in [(7, 2), (10, 3), (12, 4), (16, 2)]:
        sets = mc.jump_sets(n, d, multi_links=True)
        pick = sets[rng.choice(len(sets), size=min(40, len(sets)), replace=False)]
        unreachable, total, diam = circulant_stats_batch(n, pick)
        W2, diam2 = hop_statistics(np.stack([circulant_matrix(n, J, directed=True) for J in pick]))
        connected = unreachable == 0
        np.testing.assert_array_equal(np.where(connected, n * total, np.inf), W2)
        np.testing.assert_array_equal(np.where(connected, diam, np.inf), diam2)


def test_jump_sets_count_and_refuse_beyond_the_limit():
    assert len(mc.jump_sets(8, 3, multi_links=True)) == 84 and len(mc.jump_sets(8, 3, multi_links=False)) == 35
    assert mc.jump_sets(64, 8, multi_links=True) is None
    assert "jump sets" in mc.moore_applies(inst(32, 6), np.ones((32, 32)))


@pytest.mark.parametrize("n,d,objective", [(8, 4, "throughput"), (8, 3, "aspl"), (8, 2, "diameter"), (10, 4, "aspl")])
def test_the_search_equals_the_milp(n, d, objective):
    instance = inst(n, d, objective=objective)
    options = ExactOptions(backend="highs", warm_start="none", time_limit_s=120)
    milp = solve_topology_routing(instance, options, use_catalogue=False)
    search = solve_topology_routing(instance, options)
    assert milp.status == search.status == "optimal" and "algorithm" not in milp.details
    assert search.details["algorithm"] == "moore_circulant"
    assert search.objective == pytest.approx(milp.objective, rel=1e-9)


@pytest.mark.parametrize("objective", ["throughput", "aspl", "diameter"])
def test_proven_through_solve_verified_and_scored_by_the_evaluator(objective):
    instance = inst(13, 4, objective=objective)
    sol = solve(instance, method="exact", time_limit_s=60)
    assert sol.status == "optimal" and sol.gap == 0.0 and sol.details["algorithm"] == "moore_circulant"
    assert verify(instance, sol).valid, verify(instance, sol).violations
    X = sol.topology.matrix
    assert (X.sum(axis=0) == 4).all() and (X.sum(axis=1) == 4).all() and np.diagonal(X).sum() == 0
    w_floor, diam_floor = mc.moore_floors(13, 4)
    expected = {"throughput": 4 / (w_floor / 13), "aspl": w_floor / (13 * 12), "diameter": diam_floor}[objective]
    assert sol.objective == pytest.approx(expected, rel=1e-9) and sol.bound == pytest.approx(expected, rel=1e-9)
    metric = {"throughput": "throughput", "aspl": "aspl", "diameter": "diameter"}[objective]
    assert sol.metrics[metric] == pytest.approx(sol.objective, rel=1e-6)


def test_without_parallel_links_only_distinct_jumps():
    sol = solve(inst(8, 4, multi=False, objective="diameter"), method="exact", warm_start="none")
    assert sol.details["algorithm"] == "moore_circulant" and len(set(sol.details["moore_jumps"])) == 4
    assert sol.topology.matrix.max() == 1


def test_the_milp_decides_when_no_circulant_reaches_the_bound():
    # 8x3: four circulants meet W's floor, but none routes evenly (lambda 1/4 < 3/11); the MILP
    # proves 3409.09 / 12500 = 0.2727... = 3/11 with another digraph.
    sol = solve(inst(8, 3), method="exact", warm_start="none", time_limit_s=120)
    assert "algorithm" not in sol.details and "uneven routing" in sol.details["catalogue_not_applied"]
    assert sol.status == "optimal" and sol.objective == pytest.approx(3 / 11, rel=1e-6)
    # 12x3: no circulant meets the floor at all.
    reason = mc.search_moore_circulant(inst(12, 3, objective="aspl"), ExactOptions()).reason
    assert "no circulant meets the Moore floor" in reason and "228" in reason


def test_time_limit_zero_and_cases_that_keep_the_milp():
    assert solve(inst(10, 4), method="exact", time_limit_s=0).status == "no_solution"
    assert solve(inst(10, 4, objective="aspl"), method="exact", time_limit_s=0).status == "no_solution"
    mix = {"all_to_all": 1e9, "mp": {"pairs": [[0, 1, 5e9]]}}
    assert mc.moore_applies(inst(8, 4, demand=mix), inst(8, 4, demand=mix).demand.mp_matrix(8)) is not None
    sol = solve(inst(8, 4, demand=mix), method="exact", warm_start="none", time_limit_s=60)
    assert "algorithm" not in sol.details and "catalogue_not_applied" not in sol.details


def test_export_writes_the_topology_milp(tmp_path):
    path = tmp_path / "m.lp"
    sol = solve(inst(10, 4), method="exact", export_model=str(path))
    assert sol.details["algorithm"] == "moore_circulant" and path.stat().st_size > 0
