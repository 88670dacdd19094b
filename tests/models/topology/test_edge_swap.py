"""The edge-swap search (models/topology/edge_swap.py), checked with networkx, which shares no code
with it: degrees and simplicity kept, connectivity, its scores, the Moore bounds' closed forms, known
optima (Petersen, Moore-bound-meeting sizes), determinism for a seed, and its use by --method exact."""

import math

import networkx as nx
import numpy as np
import pytest

from conftest import minimal
from topoopt_ilp import files
from topoopt_ilp.evaluation.verify import verify
from topoopt_ilp.methods import solve
from topoopt_ilp.models.topology import edge_swap as es


def nx_scores(X: np.ndarray) -> tuple[float, float]:
    """(diameter, distance total over ordered pairs) by networkx; (inf, inf) when disconnected."""
    g = nx.from_numpy_array((np.asarray(X) > 0).astype(int))
    if not nx.is_connected(g):
        return math.inf, math.inf
    lengths = dict(nx.all_pairs_shortest_path_length(g))
    return float(nx.diameter(g)), float(sum(sum(row.values()) for row in lengths.values()))


def random_graph(n: int, d: int, seed: int) -> np.ndarray:
    return nx.to_numpy_array(nx.random_regular_graph(d, n, seed=seed), nodelist=range(n), dtype=np.int64)


@pytest.mark.parametrize("n,d,seed", [(12, 3, 0), (20, 4, 1), (33, 4, 2), (70, 3, 3), (130, 5, 4)])
def test_hop_score_matches_networkx(n, d, seed):
    X = random_graph(n, d, seed)
    assert es.hop_totals(X) == nx_scores(X)


def test_hop_score_of_a_disconnected_graph_is_infinite():
    X = np.zeros((8, 8), dtype=np.int64)
    for a, b in [(0, 1), (1, 2), (2, 3), (3, 0), (4, 5), (5, 6), (6, 7), (7, 4)]:
        X[a, b] = X[b, a] = 1
    assert es.hop_totals(X) == (math.inf, math.inf)


@pytest.mark.parametrize(
    "n,d,diameter,aspl",
    [
        (10, 3, 2, 5 / 3),  # Petersen: 3 neighbours, 6 at two hops
        (50, 7, 2, (7 + 2 * 42) / 49),  # Hoffman-Singleton
        (5, 4, 1, 1.0),  # K5
        (22, 3, 3, (3 + 2 * 6 + 3 * 12) / 21),  # the layers 3, 6, 12 exactly
        (16, 4, 2, (4 + 2 * 11) / 15),
    ],
)
def test_moore_bounds_closed_forms(n, d, diameter, aspl):
    lb_diameter, lb_aspl = es.hop_bounds(n, d)
    assert lb_diameter == diameter
    assert lb_aspl == pytest.approx(aspl, rel=1e-12)


@pytest.mark.parametrize("objective", ["diameter", "aspl"])
@pytest.mark.parametrize("n,d,seed", [(16, 3, 0), (24, 4, 1), (31, 4, 2), (40, 5, 3)])
def test_search_keeps_degrees_simple_connected_and_never_worsens_its_start(n, d, seed, objective):
    start = random_graph(n, d, seed + 100)
    res = es.edge_swap_search(
        n, d, [("given", start)], objective=objective, time_limit_s=None, seed=seed, max_swaps=400
    )
    X = res.matrix
    g = nx.from_numpy_array(X)
    assert set(np.unique(X)) <= {0, 1} and not np.diag(X).any() and (X == X.T).all()
    assert sorted(dict(g.degree()).values()) == [d] * n  # every degree kept
    assert nx.is_connected(g)
    diameter, total = nx_scores(X)
    assert (res.diameter, res.distance_total) == (diameter, total)
    # the best start (the given one or the seed's random regular graph), scored independently
    starts = [nx_scores(start), nx_scores(random_graph(n, d, seed))]
    key = (lambda s: s) if objective == "diameter" else (lambda s: (s[1], s[0]))
    assert key((diameter, total)) <= min(key(s) for s in starts)
    assert (res.start_diameter, res.start_distance_total) in starts


def test_search_keeps_a_server_with_a_free_port_and_links_stay_simple():
    # n d odd: one server keeps a free port; the search must neither fill it nor break another degree
    n, d = 11, 3
    ring = np.zeros((n, n), dtype=np.int64)
    ring[np.arange(n), (np.arange(n) + 1) % n] = 1
    start = es.simple_start(ring + ring.T, d)
    degrees = start.sum(axis=1)
    res = es.edge_swap_search(n, d, [("ring", start)], time_limit_s=None, seed=3, max_swaps=300)
    assert (res.matrix.sum(axis=1) == degrees).all()
    assert degrees.sum() == n * d - 1
    assert nx.is_connected(nx.from_numpy_array(res.matrix))


def test_search_is_deterministic_for_a_seed():
    n, d = 30, 4
    starts = es.circulant_starts(n, d)
    a = es.edge_swap_search(n, d, starts, time_limit_s=None, seed=7, max_swaps=600)
    b = es.edge_swap_search(n, d, starts, time_limit_s=None, seed=7, max_swaps=600)
    c = es.edge_swap_search(n, d, starts, time_limit_s=None, seed=8, max_swaps=600)
    assert (a.matrix == b.matrix).all() and a.swaps_accepted == b.swaps_accepted
    assert c.swaps_accepted != a.swaps_accepted or not (c.matrix == a.matrix).all()


@pytest.mark.parametrize("n,d", [(10, 3), (20, 3), (30, 4)])  # Petersen, then optima on the Moore ASPL floor
def test_search_reaches_the_moore_bound_quickly(n, d):
    lb_diameter, lb_aspl = es.hop_bounds(n, d)
    target = (lb_diameter, round(lb_aspl * n * (n - 1)))
    res = es.edge_swap_search(n, d, es.circulant_starts(n, d), time_limit_s=20, seed=0, target=target)
    diameter, total = nx_scores(res.matrix)
    assert diameter == lb_diameter
    assert total / (n * (n - 1)) == pytest.approx(lb_aspl, rel=1e-12)
    assert res.wall_time_s < 20  # stopped at the target


@pytest.mark.parametrize("n,d", [(20, 5), (25, 6)])  # the exact method alone: diameter 3 in 30 s (issue 38)
def test_search_reaches_diameter_two(n, d):
    res = es.edge_swap_search(n, d, es.circulant_starts(n, d), time_limit_s=20, seed=0, target=(2, math.inf))
    assert nx_scores(res.matrix)[0] == 2 == es.hop_bounds(n, d)[0]


def test_petersen_found_is_the_petersen_graph():
    res = es.edge_swap_search(10, 3, es.circulant_starts(10, 3), time_limit_s=10, seed=1, target=(2, 150))
    assert nx.is_isomorphic(nx.from_numpy_array(res.matrix), nx.petersen_graph())


def test_circulant_starts_are_circulants_of_the_degree():
    for n, d in [(16, 4), (20, 3), (64, 4), (300, 6)]:
        for name, X in es.circulant_starts(n, d):
            assert (X.sum(axis=1) == d).all() and (X == X.T).all()
            assert (np.roll(np.roll(X, 1, axis=0), 1, axis=1) == X).all()  # invariant under rotation
            assert name.startswith("circulant")
    assert es.circulant_starts(21, 3) == []  # odd degree needs the jump n/2


def instance(n, d, objective, regular=True):
    cluster = {"servers": n, "degree": d, "link_bandwidth_gbps": 100, "multi_links": False, "regular": regular}
    return files.parse_instance(minimal(cluster=cluster, objective=objective))


def test_exact_above_the_milp_limit_is_the_search_with_the_moore_bound_and_gap():
    inst = instance(40, 3, "diameter")
    sol = solve(inst, method="exact", time_limit_s=3)
    assert sol.details["algorithm"] == "edge_swap"
    assert sol.status in ("feasible", "optimal")
    assert sol.bound == 4.0  # Moore: 1 + 3 + 6 + 12 = 22 < 40 <= 46
    assert sol.objective >= sol.bound
    assert sol.gap == pytest.approx((sol.objective - sol.bound) / sol.objective)
    assert verify(inst, sol).valid
    X = sol.topology.matrix
    assert (X.sum(axis=1) == 3).all() and nx_scores(X)[0] == sol.objective


def test_exact_above_the_milp_limit_aspl_and_limit_zero():
    inst = instance(36, 4, "aspl")
    sol = solve(inst, method="exact", time_limit_s=2)
    n = 36
    assert sol.bound == pytest.approx(es.hop_bounds(36, 4)[1])
    assert sol.objective == pytest.approx(nx_scores(sol.topology.matrix)[1] / (n * (n - 1)), rel=1e-12)
    assert verify(inst, sol).valid
    assert solve(inst, method="exact", time_limit_s=0).status == "no_solution"


def test_exact_below_the_limit_starts_from_the_search():
    inst = instance(20, 3, "diameter")  # the MILP alone returned diameter 5 in 30 s (issue 38)
    sol = solve(inst, method="exact", time_limit_s=20)
    assert sol.status == "optimal" and sol.objective == 3.0
    assert sol.details["edge_swap_start"]["diameter"] == 3
    assert verify(inst, sol).valid


def test_search_does_not_serve_other_objectives_or_directed_links():
    assert es.edge_swap_applies(instance(40, 3, "throughput")) is not None
    assert es.edge_swap_applies(instance(40, 3, "aspl")) is None
    assert es.edge_swap_applies(instance(41, 3, "aspl", regular=False)) is None  # one server keeps a free port


def test_evaluator_score_search_never_worsens_the_evaluators_throughput_and_keeps_degrees():
    from topoopt_ilp.evaluation.evaluate import evaluate

    n, d = 16, 3
    inst = files.parse_instance(
        minimal(cluster={"servers": n, "degree": d, "link_bandwidth_gbps": 100}, objective="throughput")
    )
    starts = es.circulant_starts(n, d)
    res = es.edge_swap_search(n, d, starts, time_limit_s=None, seed=0, max_swaps=300, score=es.evaluator_score(inst))
    before = max(evaluate(inst, X).throughput for _, X in starts + [("random", random_graph(n, d, 0))])
    after = evaluate(inst, res.matrix).throughput
    assert after >= before * (1 - 1e-12)
    assert -res.score == pytest.approx(after, rel=1e-12)
    assert (res.matrix.sum(axis=1) == d).all() and nx.is_connected(nx.from_numpy_array(res.matrix))


def test_exact_aspl_below_the_limit_proves_the_searchs_start_optimal():
    # (16, 3): the search meets the Moore ASPL floor 2.2; the start proof's LPs then close the solve
    inst = instance(16, 3, "aspl")
    sol = solve(inst, method="exact", time_limit_s=20)
    assert sol.status == "optimal" and sol.objective == pytest.approx(2.2, rel=1e-12)
    assert sol.details["edge_swap_start"]["distance_total"] == round(2.2 * 16 * 15)
    assert nx_scores(sol.topology.matrix)[1] == round(2.2 * 16 * 15)
    assert verify(inst, sol).valid
