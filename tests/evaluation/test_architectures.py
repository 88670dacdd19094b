"""Switched baselines against closed forms."""

from __future__ import annotations

import json

import pytest

from conftest import INSTANCES, minimal
from topoopt_ilp import files
from topoopt_ilp.cli import main
from topoopt_ilp.errors import InputError
from topoopt_ilp.evaluation.architectures import evaluate_architecture


def test_big_switch_meets_the_allreduce_bandwidth_bound():
    # p = 8 ranks, S bytes, d links of B per server: T >= 2(p-1)/p * S/(d B) (Patarasuk & Yuan), and a
    # non-blocking switch attains it; plus 2 hops of latency.
    inst = files.parse_instance(
        minimal(
            cluster={"servers": 8, "degree": 2, "link_bandwidth_gbps": 8, "hop_latency_us": 1.0},
            demand={"allreduce": [{"members": "all", "bytes": 8e9}]},
        )
    )
    m = evaluate_architecture(inst, "big_switch")
    assert m.bandwidth_time_s == pytest.approx(2 * 7 / 8 * 8e9 / (2 * 1e9))
    assert m.latency_time_s == pytest.approx(2e-6) and m.rack_uplink_time_s == 0.0


def test_oversubscribed_fat_tree_is_limited_by_rack_uplinks():
    # 8 servers in 2 racks of 4, all-to-all 1 GB: each server sends 7 GB (port time 7 s at 1 GB/s),
    # each rack sends 4*4 GB = 16 GB across; uplink 4 GB/s / r.
    inst = files.parse_instance(
        minimal(
            cluster={"servers": 8, "degree": 1, "link_bandwidth_gbps": 8, "hop_latency_us": 0.0, "regular": False},
            demand={"all_to_all": 1e9},
        )
    )
    full = evaluate_architecture(inst, "fat_tree", rack_size=4)
    assert full.server_port_time_s == pytest.approx(7.0) and full.rack_uplink_time_s == pytest.approx(4.0)
    assert full.bandwidth_time_s == pytest.approx(7.0)
    r4 = evaluate_architecture(inst, "fat_tree", rack_size=4, oversubscription=4)
    assert r4.rack_uplink_time_s == pytest.approx(16.0) and r4.bandwidth_time_s == pytest.approx(16.0)


def test_workload_compute_is_added_and_bad_options_refused(capsys):
    inst = files.load_instance(INSTANCES / "paper" / "bert-testbed-12-d4.json")
    m = evaluate_architecture(inst, "big_switch")
    assert m.compute_time_s > 0 and m.iteration_time_s == pytest.approx(m.compute_time_s + m.comm_time_s)
    with pytest.raises(InputError, match="must divide"):
        evaluate_architecture(inst, "fat_tree", rack_size=5)
    with pytest.raises(InputError, match="no racks"):
        evaluate_architecture(inst, "big_switch", oversubscription=2)
    assert main(["evaluate", str(INSTANCES / "testbed-12.json"), "--architecture", "big_switch"]) == 0
    assert "big_switch with 4 x 25 Gbps per server" in capsys.readouterr().out
    assert main(["evaluate", str(INSTANCES / "testbed-12.json"), "--oversubscription", "2"]) == 2


def _a2a_with_prices():
    # 8 servers x 1 link of 8 Gbps; every price 1 USD per Gbps, panel ports free.
    return files.parse_instance(
        minimal(
            cluster={"servers": 8, "degree": 1, "link_bandwidth_gbps": 8, "hop_latency_us": 0.0, "regular": False},
            demand={"all_to_all": 1e9},
            cost={
                "transceiver_usd": {"1": 1},
                "nic_port_usd": {"1": 1},
                "switch_port_usd": {"1": 1},
                "patch_panel_port_usd": 0,
            },
        )
    )


def test_equal_cost_fat_tree_hand_computed():
    # Direct connect: 8 interfaces x (8 + 8) USD = 128 USD. Fat-tree, 2 racks of 4, 3 tiers, 1:1: 8 NIC ports,
    # 8 + 2*16 switch ports, 16 + 2*16 transceivers = 96 USD per Gbps -> 4/3 Gbps per server.
    inst = _a2a_with_prices()
    m = evaluate_architecture(inst, "fat_tree", rack_size=4, equal_cost=True)
    assert m.equal_cost and m.server_bandwidth_gbps == pytest.approx(4 / 3)
    assert m.cost_usd == pytest.approx(128.0)
    port = 4 / 3 * 1e9 / 8  # bytes/s
    assert m.server_port_time_s == pytest.approx(7e9 / port)  # 7 GB out of each server
    assert m.rack_uplink_time_s == pytest.approx(16e9 / (4 * port))  # 16 GB leave each rack
    assert m.bandwidth_time_s == pytest.approx(42.0)
    # 1:4 spends less on upper tiers: 8 + 2*4 switch ports, 16 + 2*4 transceivers -> 48 USD/Gbps -> 8/3 Gbps
    r4 = evaluate_architecture(inst, "fat_tree", rack_size=4, oversubscription=4, equal_cost=True)
    assert r4.server_bandwidth_gbps == pytest.approx(8 / 3)
    assert r4.server_port_time_s == pytest.approx(m.server_port_time_s / 2)
    assert r4.rack_uplink_time_s == pytest.approx(16e9 / (1 * 8 / 3 * 1e9 / 8))


def test_explicit_server_bandwidth_and_equal_cost_errors():
    inst = _a2a_with_prices()
    base = evaluate_architecture(inst, "big_switch")
    assert base.server_bandwidth_gbps == 8.0 and not base.equal_cost and base.cost_usd is None
    double = evaluate_architecture(inst, "big_switch", server_bandwidth_gbps=16)
    assert double.bandwidth_time_s == pytest.approx(base.bandwidth_time_s / 2)
    with pytest.raises(InputError, match="sizes a fat_tree"):
        evaluate_architecture(inst, "big_switch", equal_cost=True)
    with pytest.raises(InputError, match="not both"):
        evaluate_architecture(inst, "fat_tree", rack_size=4, equal_cost=True, server_bandwidth_gbps=10)
    with pytest.raises(InputError, match="server bandwidth must be"):
        evaluate_architecture(inst, "fat_tree", rack_size=4, server_bandwidth_gbps=0.0)


def test_cli_equal_cost_fat_tree(tmp_path, capsys):
    path = tmp_path / "a2a.json"
    path.write_text(json.dumps(files.instance_to_dict(_a2a_with_prices())))
    assert main(["evaluate", str(path), "--architecture", "fat_tree", "--rack-size", "4", "--equal-cost"]) == 0
    out = capsys.readouterr().out
    assert (
        "fat_tree 1:1, racks of 4 with 1.333 Gbps per server (equal cost to 1 x 8 Gbps direct connect: 128 USD)" in out
    )
    assert "iteration time     42 s" in out
    assert (
        main(["evaluate", str(path), "--architecture", "fat_tree", "--rack-size", "4", "--equal-cost", "--json"]) == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["equal_cost"] is True and data["server_bandwidth_gbps"] == pytest.approx(4 / 3)
    assert main(["evaluate", str(path), "--architecture", "big_switch", "--bandwidth", "16", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bandwidth_time_s"] == pytest.approx(7e9 / 2e9)
    assert main(["evaluate", str(path), "--equal-cost"]) == 2
    assert "go with --architecture" in capsys.readouterr().err
    assert main(["evaluate", str(path), "--architecture", "big_switch", "--equal-cost"]) == 2
    with pytest.raises(SystemExit) as exc:  # argparse usage error
        main(["evaluate", str(path), "--architecture", "fat_tree", "--bandwidth", "0"])
    assert exc.value.code == 2 and "--bandwidth must be a finite number > 0" in capsys.readouterr().err
