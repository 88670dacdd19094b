"""Switched baselines against closed forms."""

from __future__ import annotations

import pytest

from conftest import INSTANCES, minimal
from topoopt_ilp import io
from topoopt_ilp.architectures import evaluate_architecture
from topoopt_ilp.cli import main
from topoopt_ilp.errors import InputError


def test_big_switch_meets_the_allreduce_bandwidth_bound():
    # p = 8 ranks, S bytes, d links of B per server: T >= 2(p-1)/p * S/(d B) (Patarasuk & Yuan), and a
    # non-blocking switch attains it; plus 2 hops of latency.
    inst = io.parse_instance(minimal(cluster={"servers": 8, "degree": 2, "link_bandwidth_gbps": 8, "hop_latency_us": 1.0},
                                     demand={"allreduce": [{"members": "all", "bytes": 8e9}]}))
    m = evaluate_architecture(inst, "big_switch")
    assert m.bandwidth_time_s == pytest.approx(2 * 7 / 8 * 8e9 / (2 * 1e9))
    assert m.latency_time_s == pytest.approx(2e-6) and m.rack_uplink_time_s == 0.0


def test_oversubscribed_fat_tree_is_limited_by_rack_uplinks():
    # 8 servers in 2 racks of 4, all-to-all 1 GB: each server sends 7 GB (port time 7 s at 1 GB/s),
    # each rack sends 4*4 GB = 16 GB across; uplink 4 GB/s / r.
    inst = io.parse_instance(minimal(cluster={"servers": 8, "degree": 1, "link_bandwidth_gbps": 8, "hop_latency_us": 0.0,
                                              "regular": False},
                                     demand={"all_to_all": 1e9}))
    full = evaluate_architecture(inst, "fat_tree", rack_size=4)
    assert full.server_port_time_s == pytest.approx(7.0) and full.rack_uplink_time_s == pytest.approx(4.0)
    assert full.bandwidth_time_s == pytest.approx(7.0)
    r4 = evaluate_architecture(inst, "fat_tree", rack_size=4, oversubscription=4)
    assert r4.rack_uplink_time_s == pytest.approx(16.0) and r4.bandwidth_time_s == pytest.approx(16.0)


def test_workload_compute_is_added_and_bad_options_refused(capsys):
    inst = io.load_instance(INSTANCES / "paper" / "bert-testbed-12-d4.json")
    m = evaluate_architecture(inst, "big_switch")
    assert m.compute_time_s > 0 and m.iteration_time_s == pytest.approx(m.compute_time_s + m.comm_time_s)
    with pytest.raises(InputError, match="must divide"):
        evaluate_architecture(inst, "fat_tree", rack_size=5)
    with pytest.raises(InputError, match="no racks"):
        evaluate_architecture(inst, "big_switch", oversubscription=2)
    assert main(["evaluate", str(INSTANCES / "testbed-12.json"), "--architecture", "big_switch"]) == 0
    assert "big_switch with 4 x 25 Gbps per server" in capsys.readouterr().out
    assert main(["evaluate", str(INSTANCES / "testbed-12.json"), "--oversubscription", "2"]) == 2
