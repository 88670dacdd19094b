"""The iteration schedule (RCPSP): task graph, list scheduling, the CP-SAT model, the independent check."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from conftest import INSTANCES
from topoopt_ilp.core.graph import circulant
from topoopt_ilp.core.routes import Routing
from topoopt_ilp.core.solution import Solution, Topology
from topoopt_ilp.core.strategy import Strategy, stage_strategies, strategy_to_dict
from topoopt_ilp.core.traffic import effective_demand, traffic_matrix
from topoopt_ilp.errors import InputError, UnsupportedError
from topoopt_ilp.evaluation.evaluate import evaluate, link_loads
from topoopt_ilp.files import load_instance, parse_instance
from topoopt_ilp.methods import heuristic_for_placement, solve
from topoopt_ilp.models.schedule import list_schedule, model_size, solve_schedule
from topoopt_ilp.schedule.iteration_graph import (
    Schedule,
    build_iteration_graph,
    check_schedule,
    graph_from_solution,
    lower_bounds,
)

BW = 1e9  # bytes/s: 8 Gbps links


def _instance(
    n: int, d: int, layers: list[dict], blocks: list[dict] = (), latency_us: float = 0.0, multi: bool = False
):
    return parse_instance(
        {
            "format": "topoopt-instance",
            "version": 1,
            "cluster": {
                "servers": n,
                "degree": d,
                "link_bandwidth_gbps": 8.0,
                "hop_latency_us": latency_us,
                "multi_links": multi,
            },
            "workload": {"batch_size": 64, "server_memory_bytes": 1e12, "layers": layers, "blocks": list(blocks)},
        }
    )


# ----------------------------------------------------------------------------------------------
# A hand-built case: 4 servers on a ring 0-1-2-3-0, three layers and one embedding block.
#   layer 0: degree 2, start 0 -> servers (0, 2); 1.5 ms for the batch, so 0.75 ms per replica
#   layer 1: degree 4          -> servers (0, 1, 2, 3); 2 ms -> 0.5 ms per replica
#   layer 2: degree 1, start 1 -> server 1; 0.9 ms
#   block 0 on server 3, consumer layer 1, 4 MB of lookups (1 MB per replica), 0.5 ms
# ----------------------------------------------------------------------------------------------
HAND_LAYERS = [
    {"name": "l0", "compute_s": 0.0015, "param_bytes": 1e6, "activation_bytes": 2e6, "configs": [2, 4]},
    {"name": "l1", "compute_s": 0.002, "param_bytes": 0.0, "activation_bytes": 1e6, "configs": [4]},
    {"name": "l2", "compute_s": 0.0009, "param_bytes": 3e6, "activation_bytes": 0.0, "configs": [1]},
]
HAND_BLOCKS = [{"name": "emb", "bytes": 1e6, "lookup_bytes": 4e6, "compute_s": 0.0005, "consumer": 1}]
HAND_STRATEGY = Strategy((2, 4, 1), (0, 0, 1), (3,))


@pytest.fixture(scope="module")
def hand():
    inst = _instance(4, 2, HAND_LAYERS, HAND_BLOCKS, latency_us=1.0)
    return inst, build_iteration_graph(inst, HAND_STRATEGY, circulant(4, [1]))


def test_hand_built_graph_has_exactly_the_expected_tasks(hand):
    _, g = hand
    compute = {
        ("block", 0): (3, 0.0005),
        ("fwd", 0, 0): (0, 0.00025),
        ("bwd", 0, 0): (0, 0.0005),
        ("fwd", 0, 1): (2, 0.00025),
        ("bwd", 0, 1): (2, 0.0005),
        **{("fwd", 1, r): (r, 0.0005 / 3) for r in range(4)},
        **{("bwd", 1, r): (r, 0.001 / 3) for r in range(4)},
        ("fwd", 2, 0): (1, 0.0003),
        ("bwd", 2, 0): (1, 0.0006),
    }
    flows = {  # key (piece index last) -> (path, bytes)
        # l0 -> l1: units 0,1 on server 0 go to servers 0 (kept) and 1; units 2,3 on server 2 to 2 (kept) and 3
        ("reshard_fwd", 0, 0, 1, 0): ((0, 1), 5e5),
        ("reshard_fwd", 0, 1, 3, 0): ((2, 3), 5e5),
        ("reshard_bwd", 0, 0, 1, 0): ((1, 0), 5e5),
        ("reshard_bwd", 0, 1, 3, 0): ((3, 2), 5e5),
        # l1 -> l2 (server 1): 0.25 MB from each replica; server 3 is two hops away over two shortest paths
        ("reshard_fwd", 1, 0, 0, 0): ((0, 1), 2.5e5),
        ("reshard_fwd", 1, 2, 0, 0): ((2, 1), 2.5e5),
        ("reshard_fwd", 1, 3, 0, 0): ((3, 0, 1), 1.25e5),
        ("reshard_fwd", 1, 3, 0, 1): ((3, 2, 1), 1.25e5),
        ("reshard_bwd", 1, 0, 0, 0): ((1, 0), 2.5e5),
        ("reshard_bwd", 1, 2, 0, 0): ((1, 2), 2.5e5),
        ("reshard_bwd", 1, 3, 0, 0): ((1, 0, 3), 1.25e5),
        ("reshard_bwd", 1, 3, 0, 1): ((1, 2, 3), 1.25e5),
        # lookups from server 3 to replicas on 0, 1, 2 (replica 3 is local), 1 MB each, and the gradients back
        ("lookup", 0, 0, 0): ((3, 0), 1e6),
        ("lookup", 0, 1, 0): ((3, 0, 1), 5e5),
        ("lookup", 0, 1, 1): ((3, 2, 1), 5e5),
        ("lookup", 0, 2, 0): ((3, 2), 1e6),
        ("lookup_grad", 0, 0, 0): ((0, 3), 1e6),
        ("lookup_grad", 0, 1, 0): ((1, 0, 3), 5e5),
        ("lookup_grad", 0, 1, 1): ((1, 2, 3), 5e5),
        ("lookup_grad", 0, 2, 0): ((2, 3), 1e6),
        # AllReduce of l0 over (0, 2): 2(k-1)/k x 1 MB = 1 MB each way, two shortest paths each
        ("allreduce", 0, 0, 0, 0): ((0, 1, 2), 5e5),
        ("allreduce", 0, 0, 0, 1): ((0, 3, 2), 5e5),
        ("allreduce", 0, 0, 1, 0): ((2, 1, 0), 5e5),
        ("allreduce", 0, 0, 1, 1): ((2, 3, 0), 5e5),
    }
    got_compute = {t.key: (t.server, t.duration_s) for t in g.tasks if t.is_compute}
    got_flows = {t.key: (t.path, t.bytes) for t in g.tasks if t.is_flow}
    milestones = [t for t in g.tasks if not t.is_compute and not t.is_flow]
    assert [(t.key, t.duration_s, t.server, t.path) for t in milestones] == [(("ready", 0), 0.0, -1, ())]
    assert set(got_compute) == set(compute)
    for k, (v, dur) in compute.items():
        assert got_compute[k][0] == v and got_compute[k][1] == pytest.approx(dur, rel=1e-12), k
    assert set(got_flows) == set(flows)
    for k, (path, nbytes) in flows.items():
        assert got_flows[k][0] == path and got_flows[k][1] == pytest.approx(nbytes), k
    for t in g.tasks:
        if t.is_flow:
            assert t.duration_s == pytest.approx(t.bytes / BW) and t.latency_s == pytest.approx(
                1e-6 * (len(t.path) - 1)
            )


def test_hand_built_graph_has_exactly_the_expected_edges(hand):
    _, g = hand

    def keys(prefix):
        return [t.key for t in g.tasks if t.key[: len(prefix)] == prefix]

    want: set[tuple] = set()
    for i, k in ((0, 2), (1, 4), (2, 1)):
        want |= {(("fwd", i, r), ("bwd", i, r)) for r in range(k)}
    # same-server resharding: direct edges both ways
    want |= {
        (("fwd", 0, 0), ("fwd", 1, 0)),
        (("bwd", 1, 0), ("bwd", 0, 0)),
        (("fwd", 0, 1), ("fwd", 1, 2)),
        (("bwd", 1, 2), ("bwd", 0, 1)),
        (("fwd", 1, 1), ("fwd", 2, 0)),
        (("bwd", 2, 0), ("bwd", 1, 1)),
    }
    for a, b in ((0, 1), (1, 3)):
        for key in keys(("reshard_fwd", 0, a, b)):
            want |= {(("fwd", 0, a), key), (key, ("fwd", 1, b))}
        for key in keys(("reshard_bwd", 0, a, b)):
            want |= {(("bwd", 1, b), key), (key, ("bwd", 0, a))}
    for a in (0, 2, 3):
        for key in keys(("reshard_fwd", 1, a, 0)):
            want |= {(("fwd", 1, a), key), (key, ("fwd", 2, 0))}
        for key in keys(("reshard_bwd", 1, a, 0)):
            want |= {(("bwd", 2, 0), key), (key, ("bwd", 1, a))}
    want.add((("block", 0), ("fwd", 1, 3)))  # the replica next to the table reads it locally
    for r in (0, 1, 2):
        for key in keys(("lookup", 0, r)):
            want |= {(("block", 0), key), (key, ("fwd", 1, r))}
        for key in keys(("lookup_grad", 0, r)):
            want.add((("bwd", 1, r), key))
    want |= {(("bwd", 0, 0), ("ready", 0)), (("bwd", 0, 1), ("ready", 0))}  # the group's milestone
    want |= {(("ready", 0), key) for key in keys(("allreduce", 0))}
    got = {(g.tasks[a].key, g.tasks[b].key) for a, b in g.edges.tolist()}
    assert got == want


def test_arc_loads_and_compute_are_the_evaluators(hand):
    """Per arc, the bytes of the pieces are the evaluator's link loads under the same routing; per
    server, the compute is the strategy's: the two lower bounds are the evaluator's terms."""
    inst, g = hand
    sol = Solution("feasible", "given", Topology(g.x), placement=strategy_to_dict(HAND_STRATEGY))
    dm, compute = effective_demand(inst, sol.placement)
    load, _ = link_loads(inst, g.x, traffic_matrix(inst, None, dm), None, "shortest_path")
    ours = np.zeros_like(load)
    for t in g.tasks:
        for u, v in t.arcs:
            ours[u, v] += t.bytes
    np.testing.assert_allclose(ours, load, rtol=1e-12, atol=1e-6)
    per_server = np.zeros(4)
    for t in g.tasks:
        if t.is_compute:
            per_server[t.server] += t.duration_s
    np.testing.assert_allclose(per_server, compute, rtol=1e-12)
    m = evaluate(inst, sol)
    lb = lower_bounds(g)
    assert lb["compute_s"] == pytest.approx(m.compute_time_s, rel=1e-12)
    assert lb["network_s"] == pytest.approx(m.bandwidth_time_s, rel=1e-12)


@pytest.fixture(scope="module")
def dlrm6():
    inst = load_instance(INSTANCES / "dlrm-mini-6.json")
    return inst, solve(inst, method="heuristic")


def test_given_routing_with_split_rings_matches_the_evaluator(dlrm6):
    """The heuristic's design has two rings per group (half the bytes each) and offset routes: the
    graph follows them, and its busiest arc is the evaluator's bandwidth term."""
    inst, sol = dlrm6
    assert len(sol.routing.rings) >= 2 and len(sol.routing.offset_routes) > 0
    g = graph_from_solution(inst, sol)
    assert g.routing == "given"
    m = evaluate(inst, sol)
    dm, _ = effective_demand(inst, sol.placement)
    load, _ = link_loads(inst, g.x, traffic_matrix(inst, sol.routing.rings, dm), sol.routing, "given")
    ours = np.zeros_like(load)
    for t in g.tasks:
        for u, v in t.arcs:
            ours[u, v] += t.bytes
    np.testing.assert_allclose(ours, load, rtol=1e-12, atol=1e-6)
    lb = lower_bounds(g)
    assert lb["network_s"] == pytest.approx(m.bandwidth_time_s, rel=1e-12)
    assert lb["compute_s"] == pytest.approx(m.compute_time_s, rel=1e-12)
    sp = graph_from_solution(inst, sol, routing="shortest_path")
    assert sp.routing == "shortest_path"
    assert lower_bounds(sp)["network_s"] == pytest.approx(evaluate(inst, sol, routing="shortest_path").bandwidth_time_s)


# ----------------------------------------------------------------------------------------------
# Known optima
# ----------------------------------------------------------------------------------------------
def test_single_layer_allreduce_is_a_chain():
    """2 servers, one layer at degree 2: forward, backward, then the AllReduce (S bytes each way,
    2(k-1)/k = 1), plus one hop of latency."""
    inst = _instance(
        2,
        1,
        [{"name": "l", "compute_s": 0.003, "param_bytes": 2e6, "activation_bytes": 0.0, "configs": [2]}],
        latency_us=3.0,
    )
    g = build_iteration_graph(inst, Strategy((2,), (0,), ()), circulant(2, [1]))
    want = 0.0015 + 2e6 / BW + 3e-6
    for sched in (list_schedule(g), solve_schedule(g)):
        assert sched.makespan_s == pytest.approx(want, abs=1e-12)
        assert check_schedule(g, sched) == []
    assert solve_schedule(g).status == "optimal"


def _contention(links: int):
    """Layer 0 on server 0, layer 1 on server 1, a table on server 0 read by layer 1: the resharding
    (1 MB, 1 ms) and the lookup (2 MB, 2 ms) share the arc 0 -> 1, the gradients the arc 1 -> 0."""
    layers = [
        {"name": "a", "compute_s": 0.0015, "param_bytes": 0.0, "activation_bytes": 1e6, "configs": [1]},
        {"name": "b", "compute_s": 0.003, "param_bytes": 0.0, "activation_bytes": 0.0, "configs": [1]},
    ]
    blocks = [{"name": "t", "bytes": 1e6, "lookup_bytes": 2e6, "compute_s": 0.0005, "consumer": 1}]
    inst = _instance(2, links, layers, blocks, multi=links > 1)
    x = np.array([[0, links], [links, 0]])
    return inst, build_iteration_graph(inst, Strategy((1, 1), (0, 1), (0,)), x)


@pytest.mark.parametrize(
    "links, want",
    [
        # one link: the two 0->1 transfers queue (3 ms from 0.5 ms), F1 1 ms, B1 2 ms, then the two 1->0
        # transfers queue (3 ms, the resharding gradient first so that B0 (1 ms) runs under the lookup's)
        (1, 0.0005 + 0.003 + 0.001 + 0.002 + 0.003),
        # two parallel links: table first (0.5 ms), its lookup 0.5-2.5 ms in parallel with F0 and the
        # resharding; F1 2.5-3.5, B1 3.5-5.5, then the 2 ms gradient lookup ends at 7.5 ms
        (2, 0.0025 + 0.001 + 0.002 + 0.002),
    ],
)
def test_link_contention_known_optimum(links, want):
    inst, g = _contention(links)
    ex = solve_schedule(g)
    assert ex.status == "optimal"
    assert ex.makespan_s == pytest.approx(want, abs=1e-12)
    assert check_schedule(g, ex) == []
    heur = list_schedule(g)
    assert heur.makespan_s >= ex.makespan_s - 1e-12 and check_schedule(g, heur) == []


def test_contention_case_exceeds_the_evaluators_overlap_none():
    """Precedence makes the iteration longer than even ``T_compute + T_comm`` here (the schedule is
    not bounded above by the evaluator's ``overlap: none``)."""
    inst, g = _contention(1)
    sol = Solution("feasible", "given", Topology(g.x), placement=strategy_to_dict(g.strategy))
    m = evaluate(inst, sol)
    assert m.compute_time_s == pytest.approx(0.003) and m.bandwidth_time_s == pytest.approx(0.003)
    assert solve_schedule(g).makespan_s == pytest.approx(0.0095)
    assert 0.0095 > m.compute_time_s + m.comm_time_s


# ----------------------------------------------------------------------------------------------
# Shipped instances: bounds, check, exact vs list
# ----------------------------------------------------------------------------------------------
def _graphs():
    out = []
    for name in ("dlrm-mini-6", "paper/resnet50-testbed-12-d4"):
        inst = load_instance(INSTANCES / f"{name}.json")
        out.append((name, inst, graph_from_solution(inst, solve(inst, method="heuristic"))))
        for st in stage_strategies(inst.workload, inst.n)[:3]:
            sol = heuristic_for_placement(inst, strategy_to_dict(st))
            out.append((f"{name} stages {st.layer_degree[0]}", inst, graph_from_solution(inst, sol)))
    return out


@pytest.fixture(scope="module")
def shipped():
    return [(name, inst, g, list_schedule(g), solve_schedule(g, time_limit_s=20)) for name, inst, g in _graphs()]


def test_every_schedule_passes_the_check_and_respects_the_bounds(shipped):
    for name, _, g, heur, exact in shipped:
        lb = lower_bounds(g)
        for sched in (heur, exact):
            assert sched.status in ("optimal", "feasible"), name
            assert check_schedule(g, sched) == [], name
            assert sched.makespan_s >= lb["compute_s"] - 1e-12, name
            assert sched.makespan_s >= lb["network_s"] - 1e-12, name
            assert sched.makespan_s >= lb["critical_path_s"] - 1e-12, name
            assert sched.bound_s <= sched.makespan_s + 1e-12
        assert heur.method == "heuristic" and exact.method == "exact"


def test_exact_is_never_worse_than_the_list_schedule_and_sometimes_better(shipped):
    better = 0
    for name, _, _, heur, exact in shipped:
        assert exact.makespan_s <= heur.makespan_s + 1e-12, name
        better += exact.makespan_s < heur.makespan_s - 1e-9
        if exact.status == "optimal":
            assert exact.gap == 0.0 and exact.bound_s == pytest.approx(exact.makespan_s)
    assert better >= 1  # e.g. dlrm-mini-6 with 3-way stages: 14.264 ms (list) vs 13.105 ms (CP-SAT)


def test_pipeline_stages_pay_the_bubble(shipped):
    """Stages without micro-batches run one after another: the makespan is at least the sum of the
    stages' times, far above the evaluator's busiest-server compute."""
    name, inst, g, _, exact = next(s for s in shipped if s[0] == "paper/resnet50-testbed-12-d4 stages 2")
    lb = lower_bounds(g)
    assert exact.makespan_s >= lb["critical_path_s"] > 2 * lb["compute_s"]


def test_time_limit_zero_gives_no_solution_with_a_bound(shipped):
    _, _, g, heur, _ = shipped[0]
    res = solve_schedule(g, time_limit_s=0.0)
    assert res.status == "no_solution" and not res.has_schedule
    assert res.bound_s == pytest.approx(heur.bound_s)
    assert check_schedule(g, res) == ["the schedule has no task times"]


# ----------------------------------------------------------------------------------------------
# The check catches what it must
# ----------------------------------------------------------------------------------------------
def test_check_schedule_catches_each_kind_of_violation():
    inst, g = _contention(1)
    good = solve_schedule(g)
    assert check_schedule(g, good) == []
    idx = g.index
    s, e = good.start_s.copy(), good.end_s.copy()

    def with_times(start, end, makespan=None):
        return replace(good, start_s=start, end_s=end, makespan_s=good.makespan_s if makespan is None else makespan)

    # precedence: the consumer's forward one unit before its lookup arrives
    j = idx[("fwd", 1, 0)]
    s2, e2 = s.copy(), e.copy()
    s2[j] -= 1e-6
    e2[j] -= 1e-6
    assert any("precedence" in v for v in check_schedule(g, with_times(s2, e2)))
    # duration: the backward of layer 1 cut short
    j = idx[("bwd", 1, 0)]
    e2 = e.copy()
    e2[j] -= 1e-4
    assert any("shorter than its duration" in v for v in check_schedule(g, with_times(s, e2)))
    # server overlap: the table's compute moved on top of the forward of layer 0 (both on server 0)
    a, b = idx[("block", 0)], idx[("fwd", 0, 0)]
    s2, e2 = s.copy(), e.copy()
    s2[a], e2[a] = s[b], s[b] + (e[a] - s[a])
    assert any(v.startswith("server 0:") for v in check_schedule(g, with_times(s2, e2)))
    # arc capacity: the lookup moved onto the resharding's time on the single link 0 -> 1
    look, resh = idx[("lookup", 0, 0, 0)], idx[("reshard_fwd", 0, 0, 0, 0)]
    s2, e2 = s.copy(), e.copy()
    s2[look], e2[look] = s[resh], s[resh] + (e[look] - s[look])
    assert any(v.startswith("arc 0->1") for v in check_schedule(g, with_times(s2, e2)))
    # makespan and bound stated wrong
    assert any("makespan" in v for v in check_schedule(g, with_times(s, e, makespan=good.makespan_s + 1e-3)))
    assert any("bound" in v for v in check_schedule(g, replace(good, bound_s=good.makespan_s + 1e-3)))
    assert any("do not match" in v for v in check_schedule(g, with_times(s[:-1], e[:-1])))


def test_zero_length_tasks_occupy_nothing():
    """A layer with no compute still orders its neighbours but uses no server time."""
    layers = [
        {"name": "a", "compute_s": 0.0015, "param_bytes": 0.0, "activation_bytes": 0.0, "configs": [1]},
        {"name": "b", "compute_s": 0.0, "param_bytes": 0.0, "activation_bytes": 0.0, "configs": [1]},
    ]
    inst = _instance(2, 1, layers)
    g = build_iteration_graph(inst, Strategy((1, 1), (0, 0), ()), circulant(2, [1]))
    for sched in (list_schedule(g), solve_schedule(g)):
        assert sched.makespan_s == pytest.approx(0.0015)
        assert check_schedule(g, sched) == []


# ----------------------------------------------------------------------------------------------
# Inputs
# ----------------------------------------------------------------------------------------------
def test_refusals():
    demand = load_instance(INSTANCES / "dlrm-like-6.json")
    with pytest.raises(InputError, match="workload"):
        build_iteration_graph(demand, None, circulant(6, [1]))
    inst, g = _contention(1)
    with pytest.raises(UnsupportedError, match="limit"):
        solve_schedule(g, max_size=model_size(g) - 1)
    with pytest.raises(UnsupportedError, match="more than 3 tasks"):
        build_iteration_graph(inst, g.strategy, g.x, max_tasks=3)
    with pytest.raises(InputError, match="forward_fraction"):
        build_iteration_graph(inst, g.strategy, g.x, forward_fraction=1.5)
    with pytest.raises(InputError, match="unreachable"):
        hand_inst = _instance(4, 2, HAND_LAYERS, HAND_BLOCKS)
        build_iteration_graph(
            hand_inst, HAND_STRATEGY, np.array([[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]])
        )
    with pytest.raises(InputError, match="no topology"):
        graph_from_solution(inst, Solution("no_solution", "exact", None))
    with pytest.raises(InputError, match="invalid strategy"):
        build_iteration_graph(inst, Strategy((2, 1), (0, 1), (0,)), g.x)
    with pytest.raises(InputError, match="time unit"):
        list_schedule(g, time_unit_s=0.0)


def test_forward_fraction_is_a_parameter(hand):
    inst, g = hand
    half = build_iteration_graph(inst, HAND_STRATEGY, g.x, Routing(), forward_fraction=0.5)
    assert half.task(("fwd", 0, 0)).duration_s == pytest.approx(0.000375) == half.task(("bwd", 0, 0)).duration_s
    assert lower_bounds(half)["compute_s"] == pytest.approx(lower_bounds(g)["compute_s"])


def test_schedule_type_reports_no_times_without_a_schedule():
    res = Schedule("no_solution", "exact", None, 1.0, None, None, None, 1e-6)
    assert not res.has_schedule


# ----------------------------------------------------------------------------------------------
# Hybrid strategies (resharding between different cosets) and the list scheduler's rules
# ----------------------------------------------------------------------------------------------
HYBRIDS = [((2, 1, 3, 1, 6), (1, 3, 1, 1, 0)), ((2, 3, 3, 6, 6), (2, 0, 1, 0, 0)), ((6, 1, 2, 3, 1), (0, 5, 2, 1, 4))]


@pytest.fixture(scope="module")
def hybrids():
    inst = load_instance(INSTANCES / "dlrm-mini-6.json")
    out = []
    for deg, start in HYBRIDS:
        st = Strategy(deg, start, (0, 1, 2, 3))
        out.append(graph_from_solution(inst, heuristic_for_placement(inst, strategy_to_dict(st))))
    return out


def test_hybrid_strategies_schedule_and_check(hybrids):
    for g in hybrids:
        assert any(t.kind == "reshard_fwd" for t in g.tasks)
        rules = {rule: list_schedule(g, priority=rule, justify=0) for rule in ("tail", "after", "earliest")}
        best = list_schedule(g)
        ex = solve_schedule(g, time_limit_s=20)
        for sched in (*rules.values(), best, ex):
            assert check_schedule(g, sched) == []
            assert sched.makespan_s >= lower_bounds(g)["bound_s"] - 1e-12
        assert best.makespan_s <= min(s.makespan_s for s in rules.values()) + 1e-12
        assert ex.makespan_s <= best.makespan_s + 1e-12
        assert ex.status == "optimal"


def test_unknown_priority_rule_is_refused(hybrids):
    with pytest.raises(InputError, match="priority"):
        list_schedule(hybrids[0], priority="random")


# ----------------------------------------------------------------------------------------------
# Micro-batches (GPipe)
# ----------------------------------------------------------------------------------------------
def _graph_signature(g):
    return ([(t.key, t.duration_s, t.server, t.path, t.bytes, t.latency_s) for t in g.tasks], g.edges.tolist())


def test_one_micro_batch_is_the_graph_without_micro_batches(dlrm6):
    """M = 1 keeps every key, duration (to the bit), byte count and edge, and the README's result:
    125 tasks, 9.893 ms (``topoopt schedule instances/dlrm-mini-6.json dlrm6.json``)."""
    inst, sol = dlrm6
    g0, g1 = graph_from_solution(inst, sol), graph_from_solution(inst, sol, micro_batches=1)
    assert _graph_signature(g1) == _graph_signature(g0)
    assert len(g1) == 125 and g1.micro_batches == 1 and all(t.micro_batch is None for t in g1.tasks)
    assert solve_schedule(g1).makespan_s == pytest.approx(0.009893, abs=1e-12)


@pytest.mark.parametrize("M", [2, 3, 8])
def test_micro_batches_keep_the_compute_per_server_and_the_bytes_per_arc(hand, M):
    inst, g1 = hand
    g = build_iteration_graph(inst, HAND_STRATEGY, g1.x, micro_batches=M)
    assert g.micro_batches == M

    def per_server(graph):
        out = np.zeros(graph.n)
        for t in graph.tasks:
            if t.is_compute:
                out[t.server] += t.duration_s
        return out

    def per_arc(graph):
        out = np.zeros((graph.n, graph.n))
        for t in graph.tasks:
            for u, v in t.arcs:
                out[u, v] += t.bytes
        return out

    np.testing.assert_allclose(per_server(g), per_server(g1), rtol=1e-12)
    np.testing.assert_allclose(per_arc(g), per_arc(g1), rtol=1e-12)
    kinds = lambda graph, k: sum(t.kind == k for t in graph.tasks)  # noqa: E731
    for k in ("fwd", "bwd", "block", "reshard_fwd", "reshard_bwd", "lookup", "lookup_grad"):
        assert kinds(g, k) == M * kinds(g1, k), k
    assert kinds(g, "allreduce") == kinds(g1, "allreduce") and kinds(g, "ready") == 1  # once per iteration
    for t in g.tasks:
        if t.kind in ("allreduce", "ready"):
            assert t.micro_batch is None and t.key in g1.index and t.bytes == g1.task(t.key).bytes
        else:
            assert 0 <= t.micro_batch < M and f"mb{t.micro_batch}" in t.name
            base = t.key[:-2] + t.key[-1:] if t.is_flow else t.key[:-1]  # the key without m
            assert t.duration_s == pytest.approx(g1.task(base).duration_s / M, rel=1e-12)
    lb, lb1 = lower_bounds(g), lower_bounds(g1)
    assert lb["compute_s"] == pytest.approx(lb1["compute_s"]) and lb["network_s"] == pytest.approx(lb1["network_s"])


def test_micro_batch_precedence_stays_within_its_micro_batch(hand):
    """Each edge joins tasks of one micro-batch, except into the AllReduce milestone, which waits for
    the backward of every micro-batch of every layer of its group on every member."""
    inst, g1 = hand
    g = build_iteration_graph(inst, HAND_STRATEGY, g1.x, micro_batches=2)
    for a, b in g.edges.tolist():
        ta, tb = g.tasks[a], g.tasks[b]
        if tb.kind == "ready" or ta.kind == "ready":
            continue
        assert ta.micro_batch == tb.micro_batch, (ta.name, tb.name)
    into_ready = {g.tasks[a].key for a, b in g.edges.tolist() if g.tasks[b].kind == "ready"}
    assert into_ready == {("bwd", 0, r, m) for r in range(2) for m in range(2)}
    for m in range(2):
        assert (g.index[("fwd", 2, 0, m)], g.index[("bwd", 2, 0, m)]) in set(map(tuple, g.edges.tolist()))
        assert (g.index[("block", 0, m)], g.index[("fwd", 1, 3, m)]) in set(map(tuple, g.edges.tolist()))


def test_micro_batches_shrink_the_pipeline_bubble():
    """dlrm-mini-6 as a pipeline of single servers (stages k=1): the optimal makespan falls from
    33.053 ms towards the evaluator's overlap none (11.702 ms) and full (8.5 ms) as M grows, and
    drops below none at M = 8 (as measured by benchmarks/schedule_overlap.py --micro-batches)."""
    inst = load_instance(INSTANCES / "dlrm-mini-6.json")
    st = stage_strategies(inst.workload, inst.n)[0]
    assert st.layer_degree == (1,) * len(st.layer_degree)
    sol = heuristic_for_placement(inst, strategy_to_dict(st))
    got = []
    for M in (1, 2, 4, 8):
        g = graph_from_solution(inst, sol, micro_batches=M)
        ex = solve_schedule(g, time_limit_s=20)
        assert ex.status == "optimal" and check_schedule(g, ex) == []
        got.append(ex.makespan_s)
    assert got == pytest.approx([0.033053, 0.020534, 0.014276, 0.011150], abs=1e-12)


def test_check_refuses_a_corrupted_micro_batch_schedule(hand):
    inst, g1 = hand
    g = build_iteration_graph(inst, HAND_STRATEGY, g1.x, micro_batches=2)
    good = solve_schedule(g)
    assert good.status == "optimal" and check_schedule(g, good) == []
    # micro-batch 1 of layer 2 starts before its activations from layer 1 have arrived
    j = g.index[("fwd", 2, 0, 1)]
    s, e = good.start_s.copy(), good.end_s.copy()
    arrive = max(good.end_s[a] + g.tasks[a].latency_s for a, b in g.edges.tolist() if b == j)
    s[j], e[j] = arrive - 1e-5, arrive - 1e-5 + g.tasks[j].duration_s
    bad = check_schedule(g, replace(good, start_s=s, end_s=e))
    assert any(v.startswith("precedence") and v.split(" -> ")[1].startswith("fwd L2 r0 mb1") for v in bad), bad


def test_micro_batches_refused(hand):
    inst, g1 = hand
    for bad in (0, -1, 1.5, True, "2", None):
        with pytest.raises(InputError, match="micro_batches"):
            build_iteration_graph(inst, HAND_STRATEGY, g1.x, micro_batches=bad)
    # refused before building: the compute tasks alone are above the limit
    with pytest.raises(UnsupportedError, match="more than 200,000 tasks .* micro-batches"):
        build_iteration_graph(inst, HAND_STRATEGY, g1.x, micro_batches=10**9)
    with pytest.raises(UnsupportedError, match="more than 100 tasks"):
        build_iteration_graph(inst, HAND_STRATEGY, g1.x, micro_batches=4, max_tasks=100)
