"""The interface assignment: König's split, the circulant and 2-factor colourings, the exact search,
and what each fabric accepts, each result checked by an independent check."""

from __future__ import annotations

import math

import numpy as np
import pytest
from export_cases import check_assignment, fixed, petersen, proper_colouring, ring

from conftest import INSTANCES
from topoopt_ilp import solve
from topoopt_ilp.errors import InputError, UnsupportedError
from topoopt_ilp.export import assign_interfaces
from topoopt_ilp.export.assignment import circulant_colouring, permutation_split, two_factor_colouring
from topoopt_ilp.files import load_instance, parse_instance
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.interfaces import build_colouring_model, edge_colouring


def _check_split(a, b, colours, n, d):
    assert colours.shape == a.shape and ((colours >= 0) & (colours < d)).all()
    for k in range(d):
        on = colours == k
        assert len(set(a[on].tolist())) == on.sum() and len(set(b[on].tolist())) == on.sum()


@pytest.mark.parametrize("seed", range(6))
def test_konig_splits_a_regular_directed_multigraph_into_permutations(seed):
    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(3, 40)), int(rng.integers(1, 9))
    a, b = [], []
    for _ in range(d):  # a sum of d derangements: d-regular, parallel arcs allowed
        while True:
            p = rng.permutation(n)
            if (p != np.arange(n)).all():
                break
        a += list(range(n))
        b += p.tolist()
    a, b = np.array(a), np.array(b)
    order = rng.permutation(a.size)
    a, b = a[order], b[order]
    colours = permutation_split(a, b, n, d)
    _check_split(a, b, colours, n, d)
    for k in range(d):  # regular: every colour is a whole permutation
        assert (colours == k).sum() == n


def test_konig_splits_a_non_regular_directed_multigraph():
    rng = np.random.default_rng(7)
    n, d = 20, 5
    a = np.repeat(np.arange(n), d)
    b = np.concatenate([rng.permutation(n) for _ in range(d)])
    keep = (a != b) & (rng.random(a.size) < 0.7)
    colours = permutation_split(a[keep], b[keep], n, d)
    _check_split(a[keep], b[keep], colours, n, d)


def test_konig_refuses_a_server_with_too_many_links():
    with pytest.raises(InputError, match="more than 1 links"):
        permutation_split(np.array([0, 0]), np.array([1, 2]), 3, 1)


def _circulant(n, jumps):
    x = np.zeros((n, n), dtype=np.int64)
    for j in jumps:
        for i in range(n):
            x[i, (i + j) % n] += 1
            x[(i + j) % n, i] += 1
    if n % 2 == 0:  # the jump n/2 joins each pair once per copy, not twice
        half = sum(1 for j in jumps if 2 * j == n)
        for i in range(n):
            x[i, (i + n // 2) % n] -= half
    return x


@pytest.mark.parametrize(
    "n, jumps",
    [
        (4, [1]),
        (8, [1, 3]),
        (12, [1, 5]),
        (12, [2, 6]),
        (10, [1, 5]),
        (16, [1, 2, 4, 8]),
        (20, [1, 1, 3]),
        (24, [3, 4]),
    ],
)
def test_circulants_on_an_even_number_of_servers_get_a_1_factorisation(n, jumps):
    x = _circulant(n, jumps)
    d = int(x[0].sum())
    got = np.asarray(circulant_colouring(x))
    assert proper_colouring(got[:, 0], got[:, 1], got[:, 2], n, d)
    y = np.zeros_like(x)
    np.add.at(y, (got[:, 0], got[:, 1]), 1)
    assert np.array_equal(y + y.T, x) and (got[:, 0] < got[:, 1]).all()


def test_circulant_colouring_declines_odd_cycles_and_other_graphs():
    assert circulant_colouring(_circulant(6, [2])) is None  # jump 2 on 6 servers: two triangles
    assert circulant_colouring(_circulant(7, [1])) is None  # odd n
    x = _circulant(8, [1])
    x[0, 1] = x[1, 0] = 0
    assert circulant_colouring(x) is None


def test_a_jump_with_odd_cycles_falls_back_to_the_exact_search():
    # jumps 2 and 3 on 6 servers: jump 2's triangles, but the whole has a 1-factorisation
    n, x = 6, _circulant(6, [2, 3])
    links = [[i, j, int(x[i, j])] for i in range(n) for j in range(i + 1, n) if x[i, j]]
    inst, sol = fixed(n, 3, links)
    plan = assign_interfaces(inst, sol, fabric="ocs")
    assert plan.method in ("two_factors", "kempe", "exact")
    check_assignment(inst, sol, plan, ocs=True)


def test_two_factors_colour_an_even_degree_design():
    x = _circulant(10, [1, 2])
    x[0, 1] = x[1, 0] = x[5, 6] = x[6, 5] = 0  # rewire: no longer circulant, still 4-regular
    x[0, 5] = x[5, 0] = x[1, 6] = x[6, 1] = 1
    a, b = np.nonzero(np.triu(x, 1))
    colours = two_factor_colouring(a, b, 10, 4)
    if colours is not None:  # an orientation may meet odd cycles; the exact search then decides
        assert proper_colouring(a, b, colours, 10, 4)


def test_the_exact_model_finds_a_colouring_and_proves_there_is_none():
    k4 = np.array([[0, 0, 0, 1, 1, 2], [1, 2, 3, 2, 3, 3]])
    res = edge_colouring(k4[0], k4[1], 4, 3)
    assert res.status in ("optimal", "feasible") and proper_colouring(k4[0], k4[1], res.colours, 4, 3)
    tri = np.array([[0, 1, 0], [1, 2, 2]])
    assert edge_colouring(tri[0], tri[1], 3, 2).status == "infeasible"
    limited = edge_colouring(k4[0], k4[1], 4, 3, ExactOptions(backend="cpsat", time_limit_s=0, warm_start="none"))
    assert limited.status == "no_solution" and limited.colours is None


def test_the_exact_model_has_one_row_per_link_and_per_server_colour():
    m = build_colouring_model([0, 1, 0], [1, 2, 2], 3, 2).model
    assert m.num_vars == 6 and m.num_rows == 3 + 3 * 2
    with pytest.raises(InputError, match="itself"):
        build_colouring_model([0], [0], 2, 1)


SHIPPED = ["testbed-12", "mix-8", "mix-16", "all-to-all-16", "coprime-circulant-32", "dp-mp-128"]


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.parametrize("fabric", ["patch_panel", "ocs"])
def test_heuristic_designs_of_shipped_instances(name, fabric):
    inst = load_instance(INSTANCES / f"{name}.json")
    sol = solve(inst, method="heuristic")
    plan = assign_interfaces(inst, sol, fabric=fabric)
    check_assignment(inst, sol, plan, ocs=fabric == "ocs")
    if sol.details.get("mp_links"):
        mp = sum(c for _, _, c in sol.details["mp_links"])
        assert plan.roles.count("mp") == mp and plan.roles.count("allreduce") == len(plan.roles) - mp


def _directed(n, d, seed=0):
    data = {
        "format": "topoopt-instance",
        "version": 1,
        "cluster": {"servers": n, "degree": d, "link_bandwidth_gbps": 100, "links": "directed"},
        "demand": {"all_to_all": 1e6},
    }
    inst = parse_instance(data)
    return inst, solve(inst, method="heuristic", seed=seed)


@pytest.mark.parametrize("n, d", [(8, 2), (9, 3), (16, 4)])
@pytest.mark.parametrize("fabric", ["patch_panel", "ocs"])
def test_directed_designs_split_into_permutations(n, d, fabric):
    inst, sol = _directed(n, d)
    plan = assign_interfaces(inst, sol, fabric=fabric)
    assert plan.method == "konig"
    check_assignment(inst, sol, plan, ocs=True)


def test_parallel_links_take_distinct_interfaces():
    inst, sol = fixed(6, 4, [[i, (i + 1) % 6, 2] for i in range(6)])
    for fabric in ("patch_panel", "ocs"):
        plan = assign_interfaces(inst, sol, fabric=fabric)
        check_assignment(inst, sol, plan, ocs=fabric == "ocs")
    inst, sol = fixed(4, 3, [[0, 1, 3], [2, 3, 3]])
    check_assignment(inst, sol, assign_interfaces(inst, sol, fabric="ocs"), ocs=True)
    inst, sol = fixed(5, 2, [[0, 1, 2], [1, 2, 1], [2, 3, 2]], directed=True, regular=False)
    check_assignment(inst, sol, assign_interfaces(inst, sol), ocs=True)


def test_a_non_regular_cluster_uses_interfaces_at_most_once():
    links = [[0, 1, 1], [1, 2, 1], [2, 3, 1], [3, 4, 1], [4, 0, 1], [0, 2, 1]]  # degrees <= 3 of 3
    inst, sol = fixed(5, 3, links, regular=False)
    for fabric in ("patch_panel", "ocs"):
        plan = assign_interfaces(inst, sol, fabric=fabric)
        check_assignment(inst, sol, plan, ocs=fabric == "ocs")


@pytest.mark.parametrize("design", [petersen, lambda: ring(7)], ids=["petersen", "odd-ring"])
def test_no_1_factorisation_is_refused_for_ocs_and_accepted_for_a_patch_panel(design):
    inst, sol = design()
    with pytest.raises(UnsupportedError, match="patch_panel"):
        assign_interfaces(inst, sol, fabric="ocs")
    check_assignment(inst, sol, assign_interfaces(inst, sol, fabric="patch_panel"), ocs=False)


def test_the_time_limit_is_said_when_the_search_decides_nothing():
    inst, sol = petersen()
    with pytest.raises(UnsupportedError, match="time limit"):
        assign_interfaces(inst, sol, fabric="ocs", time_limit_s=0)


def test_ports_are_server_times_degree_plus_interface():
    inst, sol = ring(8)
    plan = assign_interfaces(inst, sol)
    assert plan.port(3, 1) == 3 * 2 + 1 and math.isclose(plan.d, 2)


def test_the_circulant_part_is_coloured_by_its_jumps_and_the_rest_searched():
    from topoopt_ilp.export.assignment import circulant_part

    ring8 = [[i, (i + 1) % 8, 1] for i in range(8)]
    rest = [[0, 2, 1], [2, 4, 1], [4, 6, 1], [0, 6, 1], [1, 5, 1], [3, 5, 1], [3, 7, 1], [1, 7, 1]]
    inst, sol = fixed(8, 4, ring8 + rest)
    part = circulant_part(sol.topology.matrix)
    assert part.sum() == 16 and (part[np.arange(8), (np.arange(8) + 1) % 8] == 1).all()
    plan = assign_interfaces(inst, sol, fabric="ocs")
    assert plan.method in (
        "two_factors",
        "kempe",
        "circulant+two_factors",
        "circulant+kempe",
        "circulant+exact",
        "exact",
    )
    check_assignment(inst, sol, plan, ocs=True)
    # the heuristic's designs with MP links: rings (a circulant part) plus the MP matching links
    data = {
        "format": "topoopt-instance",
        "version": 1,
        "cluster": {"servers": 64, "degree": 8, "link_bandwidth_gbps": 100},
        "demand": {
            "allreduce": [{"members": list(range(64)), "bytes": 1e9}],
            "mp": {"pairs": [[s, (5 * s + 7) % 64, 1e9] for s in range(64) if (5 * s + 7) % 64 != s]},
        },
    }
    inst = parse_instance(data)
    sol = solve(inst, method="heuristic")
    assert sol.details["d_mp"] > 0
    plan = assign_interfaces(inst, sol, fabric="ocs")
    check_assignment(inst, sol, plan, ocs=True)


@pytest.mark.parametrize("seed", range(4))
def test_the_kempe_search_colours_random_regular_graphs_properly(seed):
    import networkx as nx

    from topoopt_ilp.export.assignment import kempe_colouring

    g = nx.random_regular_graph(5, 40, seed=seed)
    a, b = (np.array(v) for v in zip(*g.edges()))
    colours = kempe_colouring(a, b, 40, 5, seed=seed)
    assert colours is not None and proper_colouring(a, b, colours, 40, 5)
    inst, sol = petersen()  # none exists: the search gives up, within its step budget
    pa, pb = np.nonzero(np.triu(sol.topology.matrix, 1))
    assert kempe_colouring(pa, pb, 10, 3, max_steps=2000) is None


def test_when_the_searches_fail_the_rest_and_then_the_whole_go_to_the_exact_model(monkeypatch):
    from topoopt_ilp.export import assignment

    monkeypatch.setattr(assignment, "kempe_colouring", lambda *args, **kw: None)
    monkeypatch.setattr(assignment, "two_factor_colouring", lambda *args, **kw: None)
    ring8 = [[i, (i + 1) % 8, 1] for i in range(8)]
    rest = [[0, 2, 1], [2, 4, 1], [4, 6, 1], [0, 6, 1], [1, 5, 1], [3, 5, 1], [3, 7, 1], [1, 7, 1]]
    inst, sol = fixed(8, 4, ring8 + rest)
    plan = assign_interfaces(inst, sol, fabric="ocs")
    assert plan.method == "circulant+exact"
    check_assignment(inst, sol, plan, ocs=True)
    inst, sol = fixed(4, 3, [[0, 1, 3], [2, 3, 3]])
    plan = assign_interfaces(inst, sol, fabric="ocs")  # two triple links: no circulant part, the whole searched
    assert plan.method == "exact"
    check_assignment(inst, sol, plan, ocs=True)
