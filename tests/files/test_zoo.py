"""The model zoo: shipped files are what generate() produces, and their numbers are the documented ones."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from topoopt_ilp.core.strategy import data_parallel, server_memory, strategy_demand, validate_strategy
from topoopt_ilp.files import zoo
from topoopt_ilp.files.instance_file import parse_workload, workload_to_dict

PAPER = Path(__file__).resolve().parents[2] / "instances" / "paper"


def load(name: str) -> dict:
    return json.loads((PAPER / name).read_text())


def test_shipped_files_are_up_to_date_and_complete():
    expected = {zoo.zoo_filename(m, n, d) for m, n, d, _ in zoo.ZOO}
    assert expected <= {p.name for p in PAPER.glob("*.json")}
    assert {
        "dlrm-128-d4.json",
        "dlrm-128-d8.json",
        "bert-128-d8.json",
        "candle-128-d4.json",
        "vgg16-128-d8.json",
        "resnet50-128-d4.json",
        "ncf-128-d8.json",
        "candle-testbed-12-d4.json",
        "bert-testbed-12-d4.json",
        "resnet50-testbed-12-d4.json",
        "vgg16-testbed-12-d4.json",
    } <= expected
    for model, n, d, bw in zoo.ZOO:
        assert load(zoo.zoo_filename(model, n, d)) == zoo.generate(model, n, d, bw), model


@pytest.mark.parametrize("model, n, d, bw", zoo.ZOO, ids=[f"{m}-{n}-d{d}" for m, n, d, _ in zoo.ZOO])
def test_every_file_is_a_valid_workload_instance(model, n, d, bw):
    data = load(zoo.zoo_filename(model, n, d))
    assert data["format"] == "topoopt-instance" and data["version"] == 1 and data["objective"] == "iteration_time"
    assert data["cluster"] == {"servers": n, "degree": d, "link_bandwidth_gbps": bw, "hop_latency_us": 1.0}
    assert "Source: " in data["description"] and data["name"] == f"{model}-{n}-d{d}"
    w = parse_workload(data["workload"], n)
    assert parse_workload(workload_to_dict(w), n) == w
    s = data_parallel(w, n)
    assert validate_strategy(w, n, s) == []  # TopoOpt's initial strategy fits in memory
    groups, mp, compute = strategy_demand(w, n, s)
    assert len(groups) == 1 and groups[0].members == tuple(range(n))  # pure data parallel: one AllReduce
    assert np.all(compute > 0)


def test_dlrm_numbers():
    data = load("dlrm-128-d4.json")
    w = parse_workload(data["workload"], 128)
    assert w.batch_size == 128 * 4 * 128  # local batch 128 per GPU, 4 GPUs per server
    assert len(w.blocks) == 64 and {b.bytes for b in w.blocks} == {10_000_000 * 128 * 4}  # 5.12 GB
    assert {b.lookup_bytes for b in w.blocks} == {65536 * 128 * 4} and {b.consumer for b in w.blocks} == {8}
    assert [x.name for x in w.layers[7:9]] == ["bottom7", "top0"] and len(w.layers) == 24
    assert w.layers[8].param_bytes == (10240 * 4096 + 4096) * 4
    assert w.server_memory_bytes == 160e9 and w.device_flops == pytest.approx(4 * 312e12 * 0.4)
    s = data_parallel(w, 128)
    assert s.block_server == tuple(range(64))
    groups, mp, _ = strategy_demand(w, 128, s)
    # each table sends 1/128 of its lookups (262,144 bytes) to each other server and gets as much
    # back; between two table servers both directions carry a lookup share and a gradient share
    share = 65536 * 512 / 128
    assert mp[0, 100] == mp[100, 0] == share
    assert mp[0, 1] == mp[1, 0] == 2 * share
    assert mp.sum() == pytest.approx(64 * 2 * 65536 * 512 * 127 / 128)
    assert mp[64:, 64:].sum() == 0  # servers without tables exchange nothing
    assert groups[0].bytes == 4 * sum(x.param_bytes / 4 for x in w.layers)


def test_transformer_cnn_mlp_numbers():
    bert = parse_workload(load("bert-128-d8.json")["workload"], 128)
    assert len(bert.layers) == 12 and bert.batch_size == 16 * 4 * 128
    assert bert.layers[0].param_bytes == 4 * (12 * 1024**2 + 13 * 1024)  # ~12.6M params
    assert bert.layers[0].flops == 3 * (2 * 64 * 12 * 1024**2 + 4 * 64**2 * 1024) * 8192
    assert bert.layers[0].activation_bytes == 64 * 1024 * 4 * 8192

    vgg = parse_workload(load("vgg16-128-d4.json")["workload"], 128)
    assert sum(x.param_bytes for x in vgg.layers) == 4 * 138_357_544 and len(vgg.layers) == 16
    assert sum(x.flops for x in vgg.layers) / 3 / 2 / vgg.batch_size == pytest.approx(15.47e9, rel=1e-3)  # MACs
    assert vgg.layers[0].configs == (8, 16, 32, 64, 128)  # conv1_1 activations (842 GB) need k >= 8

    resnet = parse_workload(load("resnet50-128-d4.json")["workload"], 128)
    assert sum(x.param_bytes for x in resnet.layers) == 4 * 25_557_032
    assert sum(x.flops for x in resnet.layers) / 3 / resnet.batch_size == pytest.approx(8.18e9, rel=1e-3)

    candle = parse_workload(load("candle-128-d8.json")["workload"], 128)
    assert len(candle.layers) == 24 and candle.batch_size == 256 * 4 * 128
    assert {x.param_bytes for x in candle.layers} == {4 * (16384**2 + 16384)}

    ncf = parse_workload(load("ncf-128-d4.json")["workload"], 128)
    assert len(ncf.blocks) == 32 and {b.bytes for b in ncf.blocks} == {1_000_000 * 128 * 4}
    assert len(ncf.layers) == 8 and ncf.layers[0].param_bytes == 4 * (4096 * 4096 + 4096)


def test_testbed_variants():
    candle = parse_workload(load("candle-testbed-12-d4.json")["workload"], 12)
    assert len(candle.layers) == 12 and candle.batch_size == 120 and candle.server_memory_bytes == 40e9
    assert candle.layers[0].configs == (1, 2, 3, 4, 6, 12)
    assert candle.device_flops == pytest.approx(312e12 * 0.4)
    bert = parse_workload(load("bert-testbed-12-d4.json")["workload"], 12)
    assert len(bert.layers) == 6 and bert.batch_size == 24
    assert load("vgg16-testbed-12-d4.json")["cluster"]["link_bandwidth_gbps"] == 25


def test_generate_options_and_errors(tmp_path):
    small = zoo.generate("BERT", 16, 4, 100, batch=4)
    w = parse_workload(small["workload"], 16)
    assert w.batch_size == 4 and w.layers[0].configs == (1, 2, 4)  # degrees above the batch are dropped
    assert zoo.generate("bert", 16, 4, 100)["workload"]["batch_size"] == 16 * 4 * 16
    assert zoo.generate("candle_testbed", 12, 4, 25) == zoo.generate("candle-testbed", 12, 4, 25)
    # fewer servers than tables is fine while the tables fit: 64 x 5.12 GB on 4 x 160 GB
    w = parse_workload(zoo.generate("dlrm", 4, 2, 100)["workload"], 4)
    s = data_parallel(w, 4)
    assert s.block_server[:5] == (0, 1, 2, 3, 0) and validate_strategy(w, 4, s) == []
    assert server_memory(w, 4, s).max() > 16 * 5.12e9
    with pytest.raises(ValueError, match="unknown model 'gpt'; choose one of dlrm, bert"):
        zoo.generate("gpt", 128, 4, 100)
    with pytest.raises(ValueError, match="no feasible placement"):  # 327.7 GB of tables on 2 x 160 GB
        zoo.generate("dlrm", 2, 2, 100)
    with pytest.raises(ValueError, match="servers must be between 2"):
        zoo.generate("bert", 1, 2, 100)
    with pytest.raises(ValueError, match="servers x degree = 15 is odd"):
        zoo.generate("bert", 5, 3, 100)
    with pytest.raises(ValueError, match="batch must be a positive integer"):
        zoo.generate("bert", 8, 2, 100, batch=0)
    with pytest.raises(ValueError, match="link_bandwidth_gbps"):
        zoo.generate("bert", 8, 2, -1)
    paths = zoo.write_zoo(tmp_path / "out")
    assert sorted(p.name for p in paths) == sorted(zoo.zoo_filename(m, n, d) for m, n, d, _ in zoo.ZOO)
    assert not list((tmp_path / "out").glob("*.tmp"))
    assert all(p.stat().st_size < 20_000 for p in paths)  # no dense matrices
