"""The evaluator against closed forms (max-concurrent-flow lambda of rings and hypercubes) and hand computations."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

from conftest import minimal
from topoopt_ilp import files
from topoopt_ilp.core.routes import OffsetRoutes, PathSet, RingSet, Routing
from topoopt_ilp.core.solution import Solution, Topology
from topoopt_ilp.evaluation.evaluate import RoutingError, evaluate

GBPS = 8.0  # 8 Gbps = 1e9 bytes/s: capacities come out in round numbers


def a2a_instance(n, d, directed=False):
    return files.parse_instance(
        minimal(
            cluster={
                "servers": n,
                "degree": d,
                "link_bandwidth_gbps": GBPS,
                "hop_latency_us": 0.0,
                "links": "directed" if directed else "undirected",
            },
            demand={"all_to_all": 1e9},
        )
    )


def matrix_of(g: nx.Graph) -> np.ndarray:
    return nx.to_numpy_array(g, nodelist=sorted(g), dtype=np.int64)


# With 1e9 B/s per link and 1e9 B per pair, throughput is the unit-capacity max-concurrent-flow lambda.
@pytest.mark.parametrize(
    "name, graph, lam",
    [
        ("ring C9", nx.cycle_graph(9), 2 / math.floor(81 / 4)),
        ("ring C10", nx.cycle_graph(10), 2 / math.floor(100 / 4)),
        ("hypercube Q3", nx.convert_node_labels_to_integers(nx.hypercube_graph(3)), 2 / 8),
        ("hypercube Q4", nx.convert_node_labels_to_integers(nx.hypercube_graph(4)), 2 / 16),
        ("torus 4x4", nx.convert_node_labels_to_integers(nx.grid_2d_graph(4, 4, periodic=True)), 2 / (4 * 4)),
        ("torus 5x5", nx.convert_node_labels_to_integers(nx.grid_2d_graph(5, 5, periodic=True)), 2 / (5 * 6)),
        ("Petersen", nx.petersen_graph(), 1 / 5),
        ("K6", nx.complete_graph(6), 1.0),
    ],
)
def test_optimal_routing_gives_published_lambda(name, graph, lam):
    x = matrix_of(graph)
    n, d = x.shape[0], int(x.sum(axis=1)[0])
    m = evaluate(a2a_instance(n, d), Topology(x), routing="optimal")
    assert m.throughput == pytest.approx(lam, rel=1e-6)
    assert m.comm_time_s == pytest.approx(1 / lam, rel=1e-6)
    # These graphs are arc-transitive: equal-split shortest paths are optimal too.
    sp = evaluate(a2a_instance(n, d), Topology(x), routing="shortest_path")
    assert sp.throughput == pytest.approx(lam, rel=1e-6)
    assert m.diameter == nx.diameter(graph)
    assert m.aspl == pytest.approx(nx.average_shortest_path_length(graph))


def test_latency_term_and_times_on_a_ring():
    # 6-ring, 1 us per hop, one 6 MB AllReduce in member order: each member sends 2*5/6*6e6 = 1e7 B to its
    # successor over one direct link of 1e9 B/s -> 10 ms + 1 hop * 1 us.
    inst = files.parse_instance(
        minimal(
            cluster={"servers": 6, "degree": 2, "link_bandwidth_gbps": GBPS, "hop_latency_us": 1.0},
            demand={"allreduce": [{"members": "all", "bytes": 6e6}]},
        )
    )
    x = inst_ring = np.roll(np.eye(6, dtype=np.int64), 1, axis=1)
    x = inst_ring + inst_ring.T
    m = evaluate(inst, Topology(x), routing="shortest_path")
    assert m.bandwidth_time_s == pytest.approx(1e7 / 1e9)
    assert m.latency_time_s == pytest.approx(1e-6)
    assert m.comm_time_s == pytest.approx(0.01 + 1e-6)
    assert m.group_times_s == pytest.approx((0.01 + 1e-6,))
    assert m.max_link_utilization == pytest.approx(0.01 / (0.01 + 1e-6))
    assert m.mean_link_utilization == pytest.approx(0.5 * 0.01 / (0.01 + 1e-6))  # only the forward arcs are busy
    assert m.iteration_time_s == m.comm_time_s
    # Patarasuk & Yuan lower bound with one link: T >= 2(p-1)/p * S/B
    assert m.bandwidth_time_s >= 2 * 5 / 6 * 6e6 / 1e9 - 1e-15


def test_ring_order_changes_traffic_and_rings_split_bytes():
    inst = files.parse_instance(
        minimal(
            cluster={"servers": 6, "degree": 2, "link_bandwidth_gbps": GBPS, "hop_latency_us": 0.0},
            demand={"allreduce": [{"members": "all", "bytes": 6e6}]},
        )
    )
    ring = np.roll(np.eye(6, dtype=np.int64), 1, axis=1)
    x = ring + ring.T
    two_rings = RingSet.from_lists([(0, [0, 1, 2, 3, 4, 5], 0.5), (0, [0, 5, 4, 3, 2, 1], 0.5)])
    sol = Solution("feasible", "given", Topology(x), routing=Routing(rings=two_rings))
    m = evaluate(inst, sol, routing="shortest_path")
    assert m.bandwidth_time_s == pytest.approx(0.5e7 / 1e9)  # both directions used: half the time
    bad_order = RingSet.from_lists([(0, [0, 2, 4, 1, 3, 5], 1.0)])
    m2 = evaluate(
        inst, Solution("feasible", "given", Topology(x), routing=Routing(rings=bad_order)), routing="shortest_path"
    )
    assert m2.bandwidth_time_s > m.bandwidth_time_s * 2


def ring_offset_routes(n):
    routes = []
    for o in range(1, n):
        if 2 * o < n:
            routes.append((o, [1] * o, 1.0))
        elif 2 * o > n:
            routes.append((o, [n - 1] * (n - o), 1.0))
        else:
            routes += [(o, [1] * o, 0.5), (o, [n - 1] * o, 0.5)]
    return OffsetRoutes.from_lists(routes)


def test_given_offset_routes_equal_shortest_paths_on_a_ring():
    inst = a2a_instance(8, 2)
    x = inst_x = files.parse_instance(minimal(fixed_topology={"jumps": [1]})).fixed_topology_matrix()
    sol = Solution(
        "feasible", "heuristic", Topology(inst_x, (1,)), routing=Routing(offset_routes=ring_offset_routes(8))
    )
    given = evaluate(inst, sol, routing="given")
    sp = evaluate(inst, Topology(x), routing="shortest_path")
    assert given.routing == "given"
    assert given.throughput == pytest.approx(sp.throughput) == pytest.approx(2 / 16)
    assert given.max_hops == 4


def test_given_routing_must_carry_every_pair():
    inst = a2a_instance(8, 2)
    x = files.parse_instance(minimal(fixed_topology={"jumps": [1]})).fixed_topology_matrix()
    partial = OffsetRoutes.from_lists([(o, [1] * o, 1.0) for o in range(1, 7)])  # offset 7 missing
    with pytest.raises(RoutingError, match="no complete route for pair 0->7"):
        evaluate(inst, Solution("feasible", "x", Topology(x), routing=Routing(offset_routes=partial)))
    half = PathSet.from_lists([([0, 1], 0.5)])
    routes = ring_offset_routes(8)
    with pytest.raises(RoutingError, match="pair 0->1 carry 0.5"):
        evaluate(inst, Solution("feasible", "x", Topology(x), routing=Routing(paths=half, offset_routes=routes)))


def test_explicit_paths_override_offset_routes():
    inst = a2a_instance(8, 2)
    x = files.parse_instance(minimal(fixed_topology={"jumps": [1]})).fixed_topology_matrix()
    detour = PathSet.from_lists([([0, 7, 6, 5, 4, 3, 2, 1], 1.0)])  # 0->1 the long way round
    sol = Solution("feasible", "x", Topology(x), routing=Routing(paths=detour, offset_routes=ring_offset_routes(8)))
    m = evaluate(inst, sol)
    assert m.max_hops == 7
    assert m.bandwidth_time_s > evaluate(inst, Topology(x), routing="shortest_path").bandwidth_time_s


def test_disconnected_topology_is_infinite_not_an_error():
    inst = a2a_instance(8, 2)
    x = np.zeros((8, 8), dtype=np.int64)
    for a, b in [(0, 1), (1, 2), (2, 3), (3, 0), (4, 5), (5, 6), (6, 7), (7, 4)]:
        x[a, b] = x[b, a] = 1
    m = evaluate(inst, Topology(x), routing="shortest_path")
    assert not m.connected and math.isinf(m.comm_time_s) and m.throughput == 0.0


def test_directed_circulant_throughput():
    # Directed ring on n nodes, unit capacity, all-to-all: total hop-load n(n-1)/2 per arc-set of n arcs.
    n = 7
    inst = a2a_instance(n, 1, directed=True)
    x = np.roll(np.eye(n, dtype=np.int64), 1, axis=1)
    m = evaluate(inst, Topology(x), routing="optimal")
    # every arc carries sum_{h=1}^{n-1} h / n * n = n(n-1)/2 units (each pair's unique path crosses h arcs)
    assert m.bandwidth_time_s == pytest.approx(n * (n - 1) / 2)
    assert m.throughput == pytest.approx(2 / (n * (n - 1)))


def test_a_solution_for_another_instance_is_refused_in_one_line():
    """Rings naming groups the instance lacks (a solution made for another instance) are bad input,
    not an IndexError deep in the traffic code."""
    from topoopt_ilp.errors import InputError

    two = files.parse_instance(
        minimal(demand={"allreduce": [{"members": "all", "bytes": 1e6}, {"members": [0, 2, 4, 6], "bytes": 1e6}]})
    )
    one = files.parse_instance(minimal(demand={"allreduce": [{"members": "all", "bytes": 1e6}]}))
    ring = np.roll(np.eye(8, dtype=np.int64), 1, axis=1)
    rings = RingSet.from_lists([(0, list(range(8)), 1.0), (1, [0, 2, 4, 6], 1.0)])
    sol = Solution("feasible", "x", Topology(ring + ring.T), routing=Routing(rings=rings))
    assert math.isfinite(evaluate(two, sol).comm_time_s)
    with pytest.raises(
        InputError,
        match="the solution does not match the instance: ring 1 names AllReduce group 1, the instance has 1 group",
    ):
        evaluate(one, sol)
    bad = Solution(
        "feasible", "x", Topology(ring + ring.T), routing=Routing(rings=RingSet.from_lists([(0, [0, 1, 2], 1.0)]))
    )
    with pytest.raises(InputError, match="ring 0 does not visit each member of AllReduce group 0 exactly once"):
        evaluate(one, bad)


def test_self_loops_are_bad_input():
    from topoopt_ilp.errors import InputError

    inst = files.parse_instance(minimal())
    ring = np.roll(np.eye(8, dtype=np.int64), 1, axis=1)
    x = ring + ring.T
    x[3, 3] = 2
    with pytest.raises(InputError, match="server 3 has a link to itself"):
        evaluate(inst, Topology(x))


def _two_pair_groups():
    """Degree 1 on 6 servers, two disjoint pair groups: 1 MB over {1, 2} (not a coset), 100 MB over
    the coset {0, 3}; the matching {0-3, 1-2, 4-5} carries both (a user's case)."""
    return files.parse_instance(
        minimal(
            cluster={"servers": 6, "degree": 1, "link_bandwidth_gbps": 100},
            demand={"allreduce": [{"members": [1, 2], "bytes": 1e6}, {"members": [0, 3], "bytes": 1e8}]},
        )
    )


def test_a_group_the_solution_rings_not_is_scored_not_dropped():
    """A solution that rings group 0 only was scored as if group 1 sent nothing (81 us instead of
    8.001 ms), and the exact method returned that start as better than its own optimum."""
    inst = _two_pair_groups()
    X = np.zeros((6, 6), dtype=int)
    for a, b in ((0, 3), (1, 2), (4, 5)):
        X[a, b] = X[b, a] = 1
    only_first = Solution("feasible", "given", Topology(X), Routing(rings=RingSet.from_lists([(0, [1, 2], 1.0)])))
    m = evaluate(inst, only_first)
    assert m.iteration_time_s == pytest.approx(8.001e-3) and m.group_times_s[1] == pytest.approx(8.001e-3)


def test_heuristic_and_exact_carry_every_pair_group_at_degree_one():
    from topoopt_ilp import solve
    from topoopt_ilp.evaluation.verify import verify

    inst = _two_pair_groups()
    for method in ("heuristic", "exact"):
        sol = solve(inst, method=method)
        assert verify(inst, sol).valid and sol.objective == pytest.approx(8.001e-3), method
    assert solve(inst, method="heuristic").details["group_kind"] == ["ordered", "routed"]


def test_rings_that_carry_part_of_a_group_are_refused_not_scaled_down():
    """A group whose ring fractions sum to 0.46 was scored with 46 % of its bytes, under every
    routing mode (user test 7); partial paths were already refused the same way."""
    from topoopt_ilp.errors import InputError
    from topoopt_ilp.evaluation.evaluate import critical_path_s

    inst = _two_pair_groups()
    X = np.zeros((6, 6), dtype=int)
    for a, b in ((0, 3), (1, 2), (4, 5)):
        X[a, b] = X[b, a] = 1
    half = Solution(
        "feasible", "given", Topology(X), Routing(rings=RingSet.from_lists([(0, [1, 2], 1.0), (1, [0, 3], 0.46)]))
    )
    for mode in ("given", "shortest_path", "optimal"):
        with pytest.raises(RoutingError, match="the rings of AllReduce group 1 carry 0.46 of its bytes"):
            evaluate(inst, half, routing=mode)
    with pytest.raises(InputError, match="this instance has a fixed demand"):  # was a bare AttributeError
        critical_path_s(inst, None)


def test_a_solution_scored_twice_in_a_row_is_evaluated_once(monkeypatch):
    """The method scores its design and verify checks the stated metrics: the second call returns the
    first's result, and anything that changes the score (routing mode, topology, placement) does not."""
    from dataclasses import replace

    from topoopt_ilp import load_instance, solve
    from topoopt_ilp.evaluation import evaluate as module

    inst = load_instance("instances/mix-8.json")
    sol = solve(inst, method="heuristic")  # scores its design: the next call on it is free
    assert module._LAST_SCORED and module._LAST_SCORED[0][1][1] is sol.topology
    module._LAST_SCORED.clear()
    calls = []
    real = module._evaluate
    monkeypatch.setattr(module, "_evaluate", lambda *a: calls.append(a[2]) or real(*a))
    first = evaluate(inst, sol)
    assert evaluate(inst, replace(sol, metrics={})) is first and calls == ["given"]
    assert evaluate(inst, sol, routing="shortest_path") is not first and calls == ["given", "shortest_path"]
    other = Topology(np.roll(np.roll(sol.topology.matrix, 1, axis=0), 1, axis=1))
    evaluate(inst, replace(sol, topology=other, routing=Routing()))
    assert len(calls) == 3
    assert evaluate(inst, sol.topology) is not first and len(calls) == 4  # bare topologies are not kept
