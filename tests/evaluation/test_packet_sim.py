"""The packet-level check (topoopt_ilp.evaluation.packet_sim): the transfers it derives, against hand
counts (no ns-3 needed), and one small ns-3 run against the closed form of a TCP transfer (skipped
without the ``sim`` extra)."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import INSTANCES
from topoopt_ilp.core.routes import PathSet, RingSet, Routing
from topoopt_ilp.core.solution import Solution, Topology
from topoopt_ilp.errors import InputError
from topoopt_ilp.evaluation.evaluate import evaluate
from topoopt_ilp.evaluation.packet_sim import (
    SEGMENT_BYTES,
    WIRE_BYTES_PER_SEGMENT,
    Flow,
    iteration_flows,
    max_min_fair_time,
    ns3_available,
    pair_bytes,
    simulate,
    simulate_flows,
)
from topoopt_ilp.files import load_instance, parse_instance
from topoopt_ilp.methods import solve


def ring_instance(n: int, mp: list, allreduce_bytes: float = 4e6) -> object:
    allreduce = [{"members": "all", "bytes": allreduce_bytes}] if allreduce_bytes else []
    return parse_instance(
        {
            "format": "topoopt-instance",
            "version": 1,
            "cluster": {"servers": n, "degree": 2, "link_bandwidth_gbps": 10, "hop_latency_us": 1.0},
            "demand": {"allreduce": allreduce, "mp": {"pairs": mp}},
        }
    )


def ring_design(n: int, routing: Routing) -> Solution:
    x = np.zeros((n, n), dtype=np.int64)
    for i in range(n):
        x[i, (i + 1) % n] = x[(i + 1) % n, i] = 1
    return Solution(status="feasible", method="given", topology=Topology(x), routing=routing)


def test_a_ring_allreduce_sends_2_k_minus_1_over_k_S_per_hop_split_over_its_rings():
    inst = ring_instance(4, [])
    rings = RingSet.from_lists([(0, [0, 1, 2, 3], 0.5), (0, [0, 3, 2, 1], 0.5)])
    flows = iteration_flows(inst, ring_design(4, Routing(rings=rings)))
    # 2 (4 - 1) / 4 x 4 MB = 6 MB per member, half on each direction's ring: 3 MB on each of 8 arcs
    assert sorted((f.nodes, f.bytes) for f in flows) == sorted(
        [((i, (i + 1) % 4), 3_000_000) for i in range(4)] + [((i, (i - 1) % 4), 3_000_000) for i in range(4)]
    )


def test_a_pair_follows_its_given_paths_and_a_design_without_routes_splits_over_shortest_paths():
    inst = ring_instance(4, [[0, 2, 1e6]], allreduce_bytes=0)
    given = ring_design(4, Routing(paths=PathSet.from_lists([([0, 1, 2], 1.0)])))
    assert Flow((0, 1, 2), 1_000_000) in iteration_flows(inst, given)
    assert len(iteration_flows(inst, given)) == 1
    bare = iteration_flows(inst, ring_design(4, Routing()))
    assert {f.nodes: f.bytes for f in bare if f.src == 0 and f.dst == 2} == {(0, 1, 2): 500_000, (0, 3, 2): 500_000}
    # with an AllReduce, the default ring 0-1-2-3 adds 6 MB on each of its hops
    assert pair_bytes(ring_instance(4, []), ring_design(4, Routing()))[0, 1] == pytest.approx(6e6)


def test_a_route_over_a_missing_link_is_refused():
    inst = ring_instance(4, [[0, 2, 1e6]], allreduce_bytes=0)
    with pytest.raises(InputError, match="lacks"):
        iteration_flows(inst, ring_design(4, Routing(paths=PathSet.from_lists([([0, 2], 1.0)]))))


def test_max_min_fair_sharing_by_hand():
    """Links 0-1-2 at 1 GB/s. A: 1 MB over 0->1->2, B: 3 MB over 0->1. Both get 0.5 GB/s on 0->1 until A
    ends at 2 ms; B then has 2 MB left at 1 GB/s: 4 ms, plus 2 hops x 5 us of latency."""
    r = np.zeros((3, 3))
    r[0, 1] = r[1, 0] = r[1, 2] = r[2, 1] = 8e9
    flows = [Flow((0, 1, 2), 1_000_000), Flow((0, 1), 3_000_000)]
    assert max_min_fair_time(r, 5e-6, flows, wire=False) == pytest.approx(4e-3 + 10e-6, rel=1e-12)
    assert max_min_fair_time(r, 0.0, flows) == pytest.approx(4e-3 * WIRE_BYTES_PER_SEGMENT / SEGMENT_BYTES)


def test_the_transfers_carry_the_evaluators_loads_on_a_shipped_design():
    """mix-8's heuristic design (rings both ways, offset routes): the busiest arc of the transfers, at
    fair fluid rates, takes the evaluator's communication time (its bandwidth and latency terms)."""
    inst = load_instance(INSTANCES / "mix-8.json")
    sol = solve(inst)
    flows = iteration_flows(inst, sol)
    assert sum(f.bytes for f in flows) == pytest.approx(pair_bytes(inst, sol).sum(), abs=len(flows))
    rate = sol.topology.matrix * inst.cluster.link_bandwidth_gbps * 1e9
    fair = max_min_fair_time(rate, inst.cluster.hop_latency_s, flows, wire=False)
    assert fair == pytest.approx(evaluate(inst, sol).comm_time_s, rel=1e-6)


@pytest.fixture(scope="module")
def ns3():
    if not ns3_available():
        pytest.skip("the ns-3 bindings are not installed: pip install '.[sim]'")


def test_two_transfers_on_their_own_paths_each_take_bytes_over_rate_plus_headers_and_latency(ns3):
    """A triangle 0-1-2 at 10 Gbit/s, 1 us per hop: 10 MB from 0 to 2 over 1 (2 hops) and 10 MB from 0
    to 2 directly. Routed as given, the two share no link, so the last byte arrives after the wire
    time of one transfer (payload x 1502/1448: TCP/IP/PPP headers) plus two hops of latency, and
    within 2% of it (TCP's handshake and slow start at microsecond round trips). Routed by shortest
    path, both would cross 0->2 and take twice as long."""
    rate, latency, size = 10e9, 1e-6, 10_000_000
    r = np.zeros((3, 3))
    for a, b in [(0, 1), (1, 2), (0, 2)]:
        r[a, b] = r[b, a] = rate
    result = simulate_flows(r, latency, [Flow((0, 1, 2), size), Flow((0, 2), size)])
    wire = size * WIRE_BYTES_PER_SEGMENT / SEGMENT_BYTES * 8 / rate + 2 * latency
    assert result.payload_bytes == 2 * size and result.lost_packets == 0
    assert wire <= result.comm_time_s <= 1.02 * wire


def test_a_shipped_design_replays_no_faster_than_its_busiest_link_allows(ns3):
    """mix-8's design at 2% of its bytes, end to end (rings both ways, offset routes): every byte of
    the busiest arc must cross it, headers included, so ns-3 cannot beat the evaluator's bandwidth
    term times 1502/1448; TCP's start-up adds at most half of it at this size (measured 1.21x)."""
    inst = load_instance(INSTANCES / "mix-8.json")
    sol = solve(inst)
    result = simulate(inst, sol, scale=0.02)
    m = evaluate(inst, sol)
    wire = m.bandwidth_time_s * 0.02 * WIRE_BYTES_PER_SEGMENT / SEGMENT_BYTES
    assert result.flows == len(iteration_flows(inst, sol, 0.02))
    assert wire <= result.comm_time_s <= 1.5 * (wire + m.latency_time_s)
