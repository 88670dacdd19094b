"""The cost model: prices, component counts, the equal-cost Fat-tree, and the instance's cost section."""

from __future__ import annotations

import json

import pytest

from conftest import minimal
from topoopt_ilp import files
from topoopt_ilp.cli import main
from topoopt_ilp.core.instance import CostModel
from topoopt_ilp.errors import InputError, InstanceError
from topoopt_ilp.evaluation.cost import (
    DEFAULT_PRICES,
    Prices,
    direct_connect_cost,
    equal_cost_bandwidth,
    fat_tree_cost,
    port_price,
    prices_for,
)

# Flat per-Gbps prices make every cost linear in the rate, so the equal-cost bandwidth has a closed form.
LINEAR = Prices(
    transceiver_usd=((100.0, 100.0),),
    nic_port_usd=((100.0, 300.0),),
    switch_port_usd=((100.0, 200.0),),
    patch_panel_port_usd=50.0,
    ocs_port_usd=400.0,
)


def test_port_price_interpolates_inside_and_scales_outside_the_table():
    table = ((10.0, 100.0), (100.0, 400.0))
    assert port_price(table, 10) == 100.0 and port_price(table, 100) == 400.0
    assert port_price(table, 55) == pytest.approx(250.0)  # halfway: linear
    assert port_price(table, 5) == pytest.approx(50.0)  # below: 10 USD/Gbps of the first entry
    assert port_price(table, 200) == pytest.approx(800.0)  # above: 4 USD/Gbps of the last entry
    assert port_price(table, 0) == 0.0


def test_direct_connect_counts_one_nic_port_transceiver_and_panel_port_per_interface():
    c = direct_connect_cost(128, 4, 100, LINEAR)
    assert (c.nic_ports, c.transceivers, c.panel_ports, c.switch_ports) == (512, 512, 512, 0)
    assert c.total_usd == pytest.approx(512 * (300 + 100 + 50))
    assert direct_connect_cost(128, 4, 100, LINEAR, fabric="ocs").total_usd == pytest.approx(512 * (300 + 100 + 400))
    with pytest.raises(InputError, match="fabric"):
        direct_connect_cost(8, 2, 100, LINEAR, fabric="copper")


def test_fat_tree_counts_five_switch_ports_per_server_at_full_bisection():
    # 128 servers, racks of 16 (8 racks), 3 tiers: 128 ToR down-ports; 8 x 16 uplinks on each of the two
    # upper link levels, 2 switch ports and 2 transceivers per link.
    full = fat_tree_cost(128, 100, LINEAR, rack_size=16)
    assert full.switch_ports == 128 + 2 * 2 * 8 * 16 == 5 * 128
    assert full.transceivers == 2 * 128 + 2 * 2 * 8 * 16
    assert full.nic_ports == 128
    assert full.total_usd == pytest.approx(128 * 300 + 640 * 200 + 768 * 100)
    r4 = fat_tree_cost(128, 100, LINEAR, rack_size=16, oversubscription=4)
    assert r4.switch_ports == 128 + 2 * 2 * 8 * 4
    one_rack = fat_tree_cost(16, 100, LINEAR, rack_size=16)  # a single switch: no upper tiers
    assert (one_rack.switch_ports, one_rack.transceivers) == (16, 32)
    assert fat_tree_cost(128, 100, LINEAR, rack_size=16, tiers=2).switch_ports == 128 + 2 * 8 * 16
    with pytest.raises(InputError, match="must divide"):
        fat_tree_cost(128, 100, LINEAR, rack_size=12)


def test_equal_cost_bandwidth_hand_computed():
    # Direct connect: 128 x 4 x (300 + 100 + 50) = 230400 USD.
    # Fat-tree 1:1 per Gbps: 128 NIC x 3 + 640 switch x 2 + 768 xcvr x 1 = 2432 USD/Gbps -> b = 94.737 Gbps.
    b = equal_cost_bandwidth(128, 4, 100, LINEAR, rack_size=16)
    assert b == pytest.approx(230400 / 2432, rel=1e-9)
    assert fat_tree_cost(128, b, LINEAR, rack_size=16).total_usd == pytest.approx(
        direct_connect_cost(128, 4, 100, LINEAR).total_usd
    )
    # 1:4: 128 x 3 + 256 x 2 + 384 x 1 = 1280 USD/Gbps.
    assert equal_cost_bandwidth(128, 4, 100, LINEAR, rack_size=16, oversubscription=4) == pytest.approx(230400 / 1280)


def test_equal_cost_bandwidth_with_the_default_prices():
    # Defaults: 40 (NIC), 50 (switch), 20 (transceiver) USD per Gbps, 100 USD per patch-panel port.
    # d=4, B=100: 4 x (4000 + 2000 + 100) = 24400 USD per server; full-bisection tree 40 + 5x50 + 6x20 = 410 USD/Gbps.
    assert prices_for(None) is DEFAULT_PRICES
    assert equal_cost_bandwidth(128, 4, 100) == pytest.approx(24400 / 410)
    assert equal_cost_bandwidth(128, 4, 100, oversubscription=2) == pytest.approx(24400 / 270)


def test_equal_cost_bandwidth_is_monotone():
    # More or faster interfaces cost more, so the equal-cost tree gets more bandwidth; so does more
    # oversubscription (fewer upper-tier ports for the same money); a dearer panel port too.
    bs = [equal_cost_bandwidth(64, d, 100, LINEAR, rack_size=8) for d in (1, 2, 4, 8)]
    assert all(a < b for a, b in zip(bs, bs[1:]))
    rates = [equal_cost_bandwidth(64, 4, r, LINEAR, rack_size=8) for r in (10, 25, 100, 400)]
    assert all(a < b for a, b in zip(rates, rates[1:]))
    ratios = [equal_cost_bandwidth(64, 4, 100, LINEAR, rack_size=8, oversubscription=r) for r in (1, 2, 4, 8)]
    assert all(a < b for a, b in zip(ratios, ratios[1:]))
    assert equal_cost_bandwidth(64, 4, 100, LINEAR, rack_size=8, fabric="ocs") > ratios[0]
    # a non-linear price table: still the unique crossing of a continuous increasing cost
    curved = Prices(
        transceiver_usd=((10.0, 50.0), (100.0, 150.0), (400.0, 900.0)),
        nic_port_usd=((100.0, 300.0),),
        switch_port_usd=((25.0, 100.0), (100.0, 200.0)),
        patch_panel_port_usd=50.0,
        ocs_port_usd=400.0,
    )
    b = equal_cost_bandwidth(64, 4, 100, curved, rack_size=8)
    assert fat_tree_cost(64, b, curved, rack_size=8).total_usd == pytest.approx(
        direct_connect_cost(64, 4, 100, curved).total_usd
    )
    assert (
        fat_tree_cost(64, b * 0.99, curved, rack_size=8).total_usd < direct_connect_cost(64, 4, 100, curved).total_usd
    )


def test_zero_prices_have_no_equal_cost_bandwidth():
    free = Prices(
        transceiver_usd=((1.0, 0.0),),
        nic_port_usd=((1.0, 0.0),),
        switch_port_usd=((1.0, 0.0),),
        patch_panel_port_usd=10.0,
        ocs_port_usd=10.0,
    )
    with pytest.raises(InputError, match="does not grow"):
        equal_cost_bandwidth(8, 2, 100, free, rack_size=4)


def _with_cost(cost) -> dict:
    return minimal(cost=cost)


def test_cost_section_parses_overrides_and_round_trips():
    data = _with_cost({"transceiver_usd": {"400": 900, "100": 250}, "patch_panel_port_usd": 80, "fabric": "ocs"})
    inst = files.parse_instance(data)
    assert inst.cost == CostModel(
        transceiver_usd=((100.0, 250.0), (400.0, 900.0)), patch_panel_port_usd=80, fabric="ocs"
    )
    p = prices_for(inst)
    assert p.transceiver_usd == ((100.0, 250.0), (400.0, 900.0)) and p.fabric == "ocs"
    assert p.nic_port_usd == DEFAULT_PRICES.nic_port_usd and p.ocs_port_usd == DEFAULT_PRICES.ocs_port_usd
    again = files.parse_instance(json.loads(json.dumps(files.instance_to_dict(inst))))
    assert again.cost == inst.cost
    assert files.parse_instance(minimal()).cost is None and "cost" not in files.instance_to_dict(
        files.parse_instance(minimal())
    )


@pytest.mark.parametrize(
    "cost, message",
    [
        ({"transceiver": {"100": 1}}, "cost: unknown key 'transceiver'"),
        ({"nic_port_usd": {"100": -5}}, 'cost.nic_port_usd["100"]: must be >= 0'),
        ({"nic_port_usd": {"fast": 5}}, 'cost.nic_port_usd["fast"]: a rate must be a number of Gbps > 0'),
        ({"nic_port_usd": {"-10": 5}}, 'cost.nic_port_usd["-10"]: a rate must be'),
        ({"nic_port_usd": {"NaN": 5}}, 'cost.nic_port_usd["NaN"]: a rate must be'),
        ({"nic_port_usd": {}}, "cost.nic_port_usd: expected at least one"),
        ({"nic_port_usd": 400}, "cost.nic_port_usd: expected an object"),
        (
            {"switch_port_usd": {"10": 500, "100": 300}},
            "cost.switch_port_usd: a 100 Gbps port costs 300 USD, less than",
        ),
        ({"switch_port_usd": {"10": "cheap"}}, 'cost.switch_port_usd["10"]: expected a number, got a string'),
        ({"patch_panel_port_usd": -1}, "cost.patch_panel_port_usd: must be >= 0"),
        ({"ocs_port_usd": True}, "cost.ocs_port_usd: expected a number, got a boolean"),
        ({"fabric": "copper"}, "cost.fabric: must be one of patch_panel, ocs"),
        ([1, 2], "cost: expected an object, got a list"),
    ],
)
def test_malformed_cost_section_is_one_clear_error(cost, message):
    with pytest.raises(InstanceError) as err:
        files.parse_instance(_with_cost(cost))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_nan_price_is_refused_in_code_and_in_files(tmp_path, capsys):
    from topoopt_ilp.core.instance import Cluster, Demand, Instance

    with pytest.raises(InstanceError, match=r"cost.ocs_port_usd: must be a finite number"):
        Instance(Cluster(8, 2, 100.0), demand=Demand(all_to_all=1.0), cost=CostModel(ocs_port_usd=float("nan")))
    bad = tmp_path / "nan.json"
    bad.write_text(json.dumps(minimal())[:-1] + ', "cost": {"ocs_port_usd": NaN}}')
    assert main(["validate", str(bad)]) == 2
    assert "NaN is not a number JSON allows" in capsys.readouterr().err


def test_cli_validate_refuses_a_malformed_cost_section(tmp_path, capsys):
    path = tmp_path / "bad-cost.json"
    path.write_text(json.dumps(_with_cost({"transceiver_usd": {"100": -250}})))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f'error: {path}: cost.transceiver_usd["100"]: must be >= 0, got -250'
    good = tmp_path / "good-cost.json"
    good.write_text(json.dumps(_with_cost({"transceiver_usd": {"100": 250}, "fabric": "ocs"})))
    assert main(["validate", str(good)]) == 0
