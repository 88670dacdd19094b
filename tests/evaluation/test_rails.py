"""Rail-optimised and rail-only networks (evaluation/rails.py) against hand-computed cases, the
Fat-tree they become with one accelerator per server, and the cost model at equal cost."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import INSTANCES, minimal
from topoopt_ilp import files
from topoopt_ilp.cli import main
from topoopt_ilp.errors import InputError
from topoopt_ilp.evaluation.architectures import evaluate_architecture
from topoopt_ilp.evaluation.cost import (
    DEFAULT_PRICES,
    direct_connect_cost,
    equal_cost_rail_bandwidth,
    prices_for,
    rail_cost,
)
from topoopt_ilp.evaluation.rails import RailTraffic, rail_times
from topoopt_ilp.files.instance_file import parse_instance

GB = 1e9
RAIL_GBPS = 8.0  # 1 GB/s per rail port
SCALE_UP_GBPS = 16.0  # 2 GB/s per accelerator


def two_by_two(transfers: list[tuple[int, int, int, int, float]]) -> RailTraffic:
    """2 servers x 2 accelerators: ``(src server, src accelerator, dst server, dst accelerator, bytes)``."""
    cols = list(zip(*transfers))
    return RailTraffic(2, *(np.asarray(c) for c in cols[:4]), np.asarray(cols[4], dtype=float))


def times_of(traffic: RailTraffic):
    return rail_times(traffic, 2, RAIL_GBPS, rack_size=2, oversubscription=1.0, scale_up_gbps=SCALE_UP_GBPS)


def test_same_rail_traffic_stays_on_its_rails():
    # Accelerator 0 of server 0 sends 3 GB to accelerator 0 of server 1, accelerator 1 sends 1 GB to
    # accelerator 1: rail 0's ports carry 3 GB (3 s at 1 GB/s), rail 1's 1 GB; nothing is forwarded.
    t = times_of(two_by_two([(0, 0, 1, 0, 3 * GB), (0, 1, 1, 1, 1 * GB)]))
    assert t.port_s == pytest.approx(3.0) and t.forward_s == 0.0 and t.uplink_s == 0.0
    assert not t.forwarded and t.bandwidth_s == pytest.approx(3.0)


def test_cross_rail_traffic_is_forwarded_over_the_scale_up_fabric_then_takes_the_destination_rail():
    # (0, 0) -> (1, 1) 3 GB and (0, 1) -> (1, 0) 1 GB. The first crosses server 0's NVLink from
    # accelerator 0 to 1 and leaves on rail 1; the second from 1 to 0, leaving on rail 0. Rail 1's
    # ports: 3 GB (3 s); forwarding: accelerator 0 of server 0 sends 3 GB and receives 1 GB over
    # 2 GB/s: 1.5 s. Bandwidth time: the slower stage, 3 s.
    t = times_of(two_by_two([(0, 0, 1, 1, 3 * GB), (0, 1, 1, 0, 1 * GB)]))
    assert t.port_s == pytest.approx(3.0) and t.forward_s == pytest.approx(1.5)
    assert t.forwarded and t.bandwidth_s == pytest.approx(3.0)
    # Both cross to rail 1: rail 1 carries 4 GB (4 s); accelerator 1 of server 0 receives 4 GB over
    # NVLink (2 s); rail 0 carries nothing.
    both = times_of(two_by_two([(0, 0, 1, 1, 3 * GB), (0, 0, 1, 1, 1 * GB)]))
    assert both.port_s == pytest.approx(4.0) and both.forward_s == pytest.approx(2.0)
    # A slow scale-up fabric makes the forwarding the bottleneck: 4 GB at 0.5 GB/s = 8 s.
    slow = rail_times(
        two_by_two([(0, 0, 1, 1, 4 * GB)]), 2, RAIL_GBPS, rack_size=2, oversubscription=1.0, scale_up_gbps=4.0
    )
    assert slow.forward_s == pytest.approx(8.0) and slow.bandwidth_s == pytest.approx(8.0)
    with pytest.raises(InputError, match="scale_up_gbps_per_accelerator"):
        rail_times(two_by_two([(0, 0, 1, 1, GB)]), 2, RAIL_GBPS, rack_size=2, oversubscription=1.0, scale_up_gbps=None)


def test_rail_leaf_uplinks_carry_the_inter_rack_bytes_of_their_rail():
    # 4 servers in racks of 2, 1 rail: server 0 -> 2 and 1 -> 3, 2 GB each. Ports: 2 s. Rack 0's
    # uplink on rail 0 carries 4 GB over 2 ports x 1 GB/s / R: 2 s at R = 1, 8 s at R = 4.
    traffic = RailTraffic(
        1, np.array([0, 1]), np.array([0, 0]), np.array([2, 3]), np.array([0, 0]), np.array([2 * GB, 2 * GB])
    )
    full = rail_times(traffic, 4, RAIL_GBPS, rack_size=2, oversubscription=1.0, scale_up_gbps=None)
    assert full.port_s == pytest.approx(2.0) and full.uplink_s == pytest.approx(2.0) and full.inter_rack
    r4 = rail_times(traffic, 4, RAIL_GBPS, rack_size=2, oversubscription=4.0, scale_up_gbps=None)
    assert r4.uplink_s == pytest.approx(8.0) and r4.bandwidth_s == pytest.approx(8.0)


def _server_pair_instance(g: int):
    # 2 servers x g accelerators, 2 interfaces of 8 Gbps (2 GB/s a server), server 0 sends 4 GB to 1.
    return files.parse_instance(
        minimal(
            cluster={
                "servers": 2,
                "degree": 2,
                "link_bandwidth_gbps": 8,
                "hop_latency_us": 1.0,
                "regular": False,
                "accelerators_per_server": g,
                "scale_up_gbps_per_accelerator": 16,
            },
            demand={"mp": {"pairs": [[0, 1, 4e9]]}},
        )
    )


@pytest.mark.parametrize("architecture", ["rail_optimised", "rail_only"])
def test_server_bytes_spread_over_the_rails(architecture):
    # Without a job the 4 GB split over the 2 rails, 2 GB each on 1 GB/s ports: 2 s, as one 2 GB/s
    # port would take; 2 hops of 1 us (one rack).
    m = evaluate_architecture(_server_pair_instance(2), architecture)
    assert m.rails == 2 and m.server_bandwidth_gbps == 16.0
    assert m.bandwidth_time_s == pytest.approx(2.0) and m.forward_time_s == 0.0
    assert m.latency_time_s == pytest.approx(2e-6)


def test_the_small_job_all_on_its_rails_by_hand():
    """The hand-computed job of tests/core/test_job_section.py (4 servers x 2 accelerators, tp = pp =
    dp = 2): tp = g puts every DP and PP transfer on its ranks' rail. Server 1's rail-0 port sends its
    stage-1 DP member bytes 137792 and one PP backward transfer of 4 x 1024 = 4096: 141888 bytes on a
    rail of d B / g = 100 Gbps."""
    from tests.core.test_job_section import BUBBLE_S, COMPUTE_S, SCALE_UP_S, tiny_doc

    tiny = parse_instance(tiny_doc())
    for arch in ("rail_optimised", "rail_only"):
        m = evaluate_architecture(tiny, arch)
        assert m.bandwidth_time_s == pytest.approx(141888 / 12.5e9, rel=1e-12)
        assert m.forward_time_s == 0.0
        assert m.compute_time_s == pytest.approx(COMPUTE_S + BUBBLE_S + SCALE_UP_S, rel=1e-12)
        assert m.iteration_time_s == pytest.approx(m.compute_time_s + m.comm_time_s, rel=1e-12)


def test_the_small_job_with_cross_rail_pipeline_transfers_by_hand():
    """tp = 1, pp = 2, dp = 4 on 4 servers x 2 accelerators: rank r = d + 4 p; stage 0 on physical
    servers 0, 1 (instance 0, 2), stage 1 on physical 2, 3 (instance 1, 3). PP sends rank d to d + 4:
    same accelerator index, so no forwarding; DP (ZeRO 0, k = 4) rings cross servers twice per ring,
    each crossing 2 (k-1)/k Psi G = 3 Psi bytes, spread over both rails. Stage 1 (Psi 137792): each
    server sends 413376 DP bytes out, half per rail, and 2 ranks x m = 2 micro-batches x 2048 = 4096
    bytes of PP backward per rail: 206688 + 4096 = 210784 per rail port of 100 Gbps."""
    from tests.core.test_job_section import tiny_doc

    inst = parse_instance(tiny_doc(parallelism={"tp": 1, "pp": 2, "dp": 4}))
    m = evaluate_architecture(inst, "rail_optimised")
    assert m.forward_time_s == 0.0
    assert m.server_port_time_s == pytest.approx(210784 / 12.5e9, rel=1e-12)


def test_one_accelerator_per_server_is_the_fat_tree():
    """g = 1: one rail, the rail-optimised network is the equal-cost Fat-tree (same cost, bandwidth,
    times and hops), on a workload instance with 16-server racks and oversubscription."""
    inst = files.load_instance(INSTANCES / "dp-mp-128.json")
    assert inst.cluster.accelerators_per_server == 1
    for over, rack in ((1.0, None), (4.0, 8)):
        ft = evaluate_architecture(inst, "fat_tree", equal_cost=True, oversubscription=over, rack_size=rack)
        ro = evaluate_architecture(inst, "rail_optimised", equal_cost=True, oversubscription=over, rack_size=rack)
        assert ro.server_bandwidth_gbps == pytest.approx(ft.server_bandwidth_gbps, rel=1e-12)
        assert ro.cost_usd == pytest.approx(ft.cost_usd, rel=1e-12)
        for field in ("iteration_time_s", "bandwidth_time_s", "latency_time_s", "rack_uplink_time_s"):
            assert getattr(ro, field) == pytest.approx(getattr(ft, field), rel=1e-9), field


def test_rail_costs_by_hand():
    # n = 4 servers, g = 2 rails, racks of 2, ports of 10 Gbps (NIC 400, switch 500, transceiver 200).
    # Rail-only: each rail 4 NICs, 4 leaf ports + 2 racks x 2 uplinks x 2 ends = 12 switch ports,
    #   8 + 8 = 16 transceivers: 1600 + 6000 + 3200 = 10800 per rail, 21600 for 2.
    # Rail-optimised: 8 endpoints, 4 leaves, 2 upper levels x 4 x 2 = 16 links: 8 NICs, 8 + 32 = 40
    #   switch ports, 16 + 32 = 48 transceivers: 3200 + 20000 + 9600 = 32800.
    only = rail_cost(4, 2, 10.0, DEFAULT_PRICES, rail_only=True, rack_size=2)
    opt = rail_cost(4, 2, 10.0, DEFAULT_PRICES, rack_size=2)
    assert (only.nic_ports, only.switch_ports, only.transceivers, only.total_usd) == (8, 24, 32, 21600)
    assert (opt.nic_ports, opt.switch_ports, opt.transceivers, opt.total_usd) == (8, 40, 48, 32800)
    assert only.server_bandwidth_gbps == opt.server_bandwidth_gbps == 20.0
    # All 4 servers in one rack: a rail-only rail is one switch (8 NICs, 8 switch ports, 16
    # transceivers: 3200 + 4000 + 3200); the rail-optimised network still joins its 2 rail leaves
    # (racks of 4 endpoints) with 2 upper levels of 2 x 4 links: 32800 as above.
    assert rail_cost(4, 2, 10.0, rail_only=True).total_usd == 10400
    assert rail_cost(4, 2, 10.0).total_usd == 32800


@pytest.mark.parametrize("rail_only", [False, True])
@pytest.mark.parametrize("over", [1.0, 2.0])
def test_equal_cost_rails_cost_what_direct_connect_costs(rail_only, over):
    inst = files.load_instance(INSTANCES / "llm" / "llama3-70b-128-d8-400g.json")
    c, prices = inst.cluster, prices_for(inst)
    g = c.accelerators_per_server
    rate = equal_cost_rail_bandwidth(
        inst.n, c.degree, c.link_bandwidth_gbps, g, prices, rail_only=rail_only, oversubscription=over
    )
    target = direct_connect_cost(inst.n, c.degree, c.link_bandwidth_gbps, prices).total_usd
    cost = rail_cost(inst.n, g, rate, prices, rail_only=rail_only, oversubscription=over)
    assert cost.total_usd == pytest.approx(target, rel=1e-9)
    arch = "rail_only" if rail_only else "rail_optimised"
    m = evaluate_architecture(inst, arch, equal_cost=True, oversubscription=over)
    assert m.cost_usd == pytest.approx(target, rel=1e-9) and m.server_bandwidth_gbps == pytest.approx(g * rate)


def test_at_equal_cost_rail_only_ports_are_faster_than_rail_optimised():
    inst = files.load_instance(INSTANCES / "llm" / "llama3-70b-128-d8-400g.json")
    opt = evaluate_architecture(inst, "rail_optimised", equal_cost=True)
    only = evaluate_architecture(inst, "rail_only", equal_cost=True)
    assert only.server_bandwidth_gbps > opt.server_bandwidth_gbps
    assert only.bandwidth_time_s < opt.bandwidth_time_s


def test_cli_scores_a_shipped_llm_instance_on_both_rail_networks(capsys):
    path = str(INSTANCES / "llm" / "llama3-70b-128-d4-400g.json")
    for spelling, name in (("rail-optimised", "rail_optimised"), ("rail_only", "rail_only")):
        assert main(["evaluate", path, "--architecture", spelling, "--equal-cost", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["architecture"] == name and out["rails"] == 8 and out["equal_cost"]
        assert out["iteration_time_s"] >= out["compute_time_s"] > 0
    assert main(["evaluate", path, "--architecture", "rail-only", "--equal-cost"]) == 0
    assert "rail_only 1:1, racks of 16, 8 rails of" in capsys.readouterr().out
    assert main(["evaluate", path, "--architecture", "rail_only", "--rack-size", "7"]) == 2


def test_the_small_job_with_tensor_parallelism_across_servers_forwards_by_hand():
    """tp = 4 > g = 2, pp = 1, dp = 2 on 4 servers x 2 accelerators: rank r = t + 4 d, servers in
    rank order. The TP ring 0 -> 1 -> 2 -> 3 -> 0 crosses servers from accelerator 1 to accelerator
    0 (1 -> 2 and 3 -> 0): forwarded over the scale-up fabric, then on rail 0. A TP member sends
    m L (4) 2 (tp-1)/tp b s h P = 4 x 4 x 4 x 1.5 x 2048 = 196608 bytes. DP (ZeRO 0, k = 2): each
    member sends Psi G = 2 x 275520 / 4 = 137760 to its partner two servers away; a server's two
    members' bytes spread over the two rails, 137760 each. Server 0's rail-0 port: 196608 + 137760
    = 334368 bytes at 12.5 GB/s; its accelerator 1 forwards 196608 bytes at 100 GB/s; 3 hops (leaf
    and the forwarding hop) of 1 us."""
    from tests.core.test_job_section import tiny_doc

    inst = parse_instance(tiny_doc(parallelism={"tp": 4, "pp": 1, "dp": 2}))
    for arch in ("rail_optimised", "rail_only"):
        m = evaluate_architecture(inst, arch)
        assert m.server_port_time_s == pytest.approx(334368 / 12.5e9, rel=1e-12)
        assert m.forward_time_s == pytest.approx(196608 / 1e11, rel=1e-12)
        assert m.latency_time_s == pytest.approx(3e-6, rel=1e-12)
    # The Fat-tree carries the same server bytes (server 0 sends 196608 + 275520 over 200 Gbps):
    # a rail network's port is busier because the TP bytes all take rail 0.
    ft = evaluate_architecture(inst, "fat_tree")
    assert ft.server_port_time_s == pytest.approx((196608 + 275520) / 25e9, rel=1e-12)


def test_a_shipped_moe_job_recounted_transfer_by_transfer():
    """Mixtral 8x7B (tp 4, ep 8: expert all-to-all between accelerators of different rails): the
    busiest rail port and scale-up forwarding recounted one transfer at a time with dictionaries."""
    from collections import defaultdict

    from topoopt_ilp.jobs.iteration import transfers

    inst = files.load_instance(INSTANCES / "llm" / "mixtral-8x7b-128-d8-400g.json")
    g, job = inst.cluster.accelerators_per_server, inst.compiled_job
    server = job.server_of_rank
    out, into, fwd_out, fwd_in = defaultdict(float), defaultdict(float), defaultdict(float), defaultdict(float)
    for kind, (src, dst, size) in transfers(job.job).items():
        for u, v, x in zip(src.tolist(), dst.tolist(), size.tolist()):
            s, t = server[u], server[v]
            if s == t:
                continue
            if kind == "dp":
                for rail in range(g):
                    out[s, rail] += x / g
                    into[t, rail] += x / g
                continue
            out[s, v % g] += x
            into[t, v % g] += x
            if u % g != v % g:
                fwd_out[s, u % g] += x
                fwd_in[s, v % g] += x
    assert fwd_out, "this job is meant to forward"
    m = evaluate_architecture(inst, "rail_only", equal_cost=True)
    rail_rate = m.server_bandwidth_gbps / g * 1e9 / 8
    assert m.server_port_time_s == pytest.approx(max(*out.values(), *into.values()) / rail_rate, rel=1e-9)
    up_rate = inst.cluster.scale_up_gbps_per_accelerator * 1e9 / 8
    assert m.forward_time_s == pytest.approx(max(*fwd_out.values(), *fwd_in.values()) / up_rate, rel=1e-9)
