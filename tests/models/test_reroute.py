"""``min_max_routing``: the column-generation routing LP, checked against the evaluator's arc-flow LP
(independent code: one commodity per source, no path variables), closed forms, and its own paths'
loads recomputed here."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from topoopt_ilp.core.routes import PathSet
from topoopt_ilp.evaluation.flows import max_concurrent_flow, path_loads
from topoopt_ilp.models.reroute import min_max_routing

CAP = 12.5e9


def _check_paths(X: np.ndarray, D: np.ndarray, res) -> float:
    """Every path is a walk on X from its pair's source to its destination, every pair with demand
    is routed in full, and the busiest arc of the paths' loads is ``res.busy_s``; returns that."""
    n = X.shape[0]
    share = np.zeros((n, n))
    for p, f in res.paths:
        assert f > 0 and len(p) >= 2 and len(set(p)) == len(p)  # simple paths
        assert all(X[u, v] > 0 for u, v in zip(p, p[1:]))
        share[p[0], p[-1]] += f
    np.testing.assert_allclose(share[D > 0], 1.0, atol=1e-9)
    assert not share[D == 0].any()
    load = path_loads(n, PathSet.from_lists(res.paths), D)
    busy = float((load[X > 0] / (CAP * X[X > 0])).max())
    assert busy == pytest.approx(res.busy_s, rel=1e-9)
    return busy


@pytest.mark.parametrize("seed", range(6))
def test_equals_the_arc_flow_optimum_on_random_designs(seed):
    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(5, 13)), int(rng.integers(2, 5))
    n += (n * d) % 2
    G = next(g for k in range(100) if nx.is_connected(g := nx.random_regular_graph(d, n, seed=100 * seed + k)))
    X = nx.to_numpy_array(G).astype(int)
    if seed % 2:  # parallel links: capacity 2 on some arcs
        u, v = map(int, np.argwhere(X > 0)[0])
        X[u, v] = X[v, u] = 2
    D = rng.random((n, n)) * (rng.random((n, n)) < 0.5) * 1e6
    np.fill_diagonal(D, 0)
    res = min_max_routing(X, D, CAP)
    reference = 1.0 / max_concurrent_flow(X, D, CAP, return_flows=False).lam
    assert res.proven and res.bound_s <= res.busy_s
    assert res.busy_s == pytest.approx(reference, rel=1e-6)
    assert res.bound_s == pytest.approx(reference, rel=1e-6)
    _check_paths(X, D, res)


def test_directed_circulant_against_the_arc_flow_optimum():
    n = 9
    X = np.zeros((n, n), dtype=int)
    for j in (1, 3):
        X[np.arange(n), (np.arange(n) + j) % n] = 1
    D = np.zeros((n, n))
    D[0, 5], D[2, 1], D[7, 3] = 4e6, 1e6, 2e6
    res = min_max_routing(X, D, CAP)
    assert res.busy_s == pytest.approx(1.0 / max_concurrent_flow(X, D, CAP, return_flows=False).lam, rel=1e-6)
    _check_paths(X, D, res)


def test_closed_form_one_pair_across_a_ring():
    """0 -> 2 on the 4-cycle: two disjoint 2-hop paths, half the bytes each."""
    X = nx.to_numpy_array(nx.cycle_graph(4)).astype(int)
    D = np.zeros((4, 4))
    D[0, 2] = 1e9
    res = min_max_routing(X, D, CAP)
    assert res.busy_s == pytest.approx(0.5e9 / CAP, rel=1e-7)
    assert sorted(p for p, _ in res.paths) == [[0, 1, 2], [0, 3, 2]]


def test_no_detours_where_the_optimum_needs_none():
    """A star's leaves talk only to the hub: every path is the direct link."""
    X = nx.to_numpy_array(nx.complete_graph(5)).astype(int)
    D = np.zeros((5, 5))
    D[0, 1:] = 1e6
    res = min_max_routing(X, D, CAP)
    assert res.busy_s == pytest.approx(1e6 / CAP)
    assert all(len(p) == 2 for p, _ in res.paths)


def test_a_pair_without_a_path_is_refused():
    X = np.zeros((4, 4), dtype=int)
    X[0, 1] = X[1, 0] = X[2, 3] = X[3, 2] = 1
    D = np.zeros((4, 4))
    D[0, 2] = 1.0
    with pytest.raises(ValueError, match="no path from 0 to 2"):
        min_max_routing(X, D, CAP)


def test_no_demand_and_a_zero_time_limit():
    X = nx.to_numpy_array(nx.cycle_graph(6)).astype(int)
    assert min_max_routing(X, np.zeros((6, 6)), CAP).paths == []
    D = np.ones((6, 6)) - np.eye(6)
    res = min_max_routing(X, D, CAP, time_limit_s=0.0)  # no LP solved: the starting shortest paths
    assert res.rounds == 0 and res.bound_s <= res.busy_s
    _check_paths(X, D, res)
