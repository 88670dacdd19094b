"""The paper-style architecture comparison (``topoopt evaluate-paper``) on the 12-server testbed workloads."""

from __future__ import annotations

import csv
import math

import pytest

from conftest import INSTANCES
from topoopt_ilp import files
from topoopt_ilp.cli import main
from topoopt_ilp.evaluation.architectures import evaluate_architecture
from topoopt_ilp.evaluation.cost import equal_cost_bandwidth
from topoopt_ilp.experiments.paper import (
    ARCHITECTURE_LABELS,
    FAT_TREES,
    PaperResult,
    default_instance_paths,
    evaluate_paper_instance,
    format_table,
    write_outputs,
)

CANDLE = INSTANCES / "paper" / "candle-testbed-12-d4.json"
RESNET = INSTANCES / "paper" / "resnet50-testbed-12-d4.json"
QUICK = dict(time_limit_s=3.0, rounds=1, round_time_limit_s=1.0, rack_size=4)


@pytest.fixture(scope="module")
def candle():
    inst = files.load_instance(CANDLE)
    return inst, evaluate_paper_instance(inst, name="candle-testbed-12-d4", **QUICK)


def test_every_architecture_is_scored(candle):
    _, res = candle
    assert list(res.iteration_time_s) == list(ARCHITECTURE_LABELS)
    assert all(math.isfinite(t) and t > 0 for t in res.iteration_time_s.values())
    assert set(res.strategy_used) == set(ARCHITECTURE_LABELS)


def test_alternating_is_never_worse_than_topoopts_rule(candle):
    _, res = candle
    assert res.iteration_time_s["alternating"] <= res.details["topoopt_data_parallel_s"]
    # On CANDLE the data-parallel start is far from the best strategy; the placement MILP finds a
    # better one even within a 1 s round, and TopoOpt's rule with the strategy-search substitute uses it.
    assert res.iteration_time_s["alternating"] < 0.5 * res.details["topoopt_data_parallel_s"]
    assert res.iteration_time_s["topoopt"] <= res.details["topoopt_data_parallel_s"]
    assert res.speedup("alternating", "topoopt") == pytest.approx(
        res.iteration_time_s["topoopt"] / res.iteration_time_s["alternating"]
    )


def test_the_rerouted_design_is_the_alternating_one_never_worse(candle):
    inst, res = candle
    assert res.iteration_time_s["routed"] <= res.iteration_time_s["alternating"]
    assert res.details["reroute"]["proven"]  # a 12-server design: the routing LP proves its optimum at once
    assert res.speedup("routed", "fat_tree_1") >= res.speedup("alternating", "fat_tree_1")
    assert "R/FT 1:1" in format_table([res])


def test_fat_tree_bandwidth_is_the_cost_models(candle):
    inst, res = candle
    for key, ratio in zip(FAT_TREES, (1, 2, 4)):
        b = equal_cost_bandwidth(12, 4, 25, oversubscription=ratio, rack_size=4)
        assert res.fat_tree_bandwidth_gbps[key] == pytest.approx(b)
    # default prices, 12 servers in 3 racks of 4, 3 tiers: 4 x (1000 + 500 + 100) = 6400 USD per server;
    # the full-bisection tree costs 40 + 5 x 50 + 6 x 20 = 410 USD per Gbps and server.
    assert res.fat_tree_bandwidth_gbps["fat_tree_1"] == pytest.approx(6400 / 410)
    assert res.direct_connect_cost_usd == pytest.approx(12 * 6400)


def test_switched_baselines_keep_their_best_candidate_strategy(candle):
    inst, res = candle
    from topoopt_ilp.methods import start_placement

    assert "data-parallel start" in res.details["strategy_candidates"]
    dp = evaluate_architecture(inst, "fat_tree", rack_size=4, equal_cost=True, placement=start_placement(inst))
    assert res.iteration_time_s["fat_tree_1"] <= dp.iteration_time_s
    assert res.iteration_time_s["big_switch"] <= evaluate_architecture(inst, "big_switch").iteration_time_s
    # an equal-cost 1:1 tree gives each server 15.6 Gbps against the ideal switch's 100: never faster
    assert res.iteration_time_s["fat_tree_1"] >= res.iteration_time_s["big_switch"]
    assert res.fat_tree_bandwidth_gbps["fat_tree_1"] < 100


def test_table_formats(candle):
    _, res = candle
    text = format_table([res])
    assert "candle-testbed-12-d4" in text and "FT 1:4" in text and "A/FT 1:1" in text
    rows = list(csv.DictReader(format_table([res], "csv").splitlines()))
    assert len(rows) == 1
    assert float(rows[0]["fat_tree_1_gbps"]) == pytest.approx(6400 / 410, rel=1e-5)
    assert float(rows[0]["speedup_alternating_vs_fat_tree_1"]) == pytest.approx(
        res.speedup("alternating", "fat_tree_1"), rel=1e-5
    )


def _fake(name: str = "x") -> PaperResult:
    times = {k: 0.001 * (i + 1) for i, k in enumerate(ARCHITECTURE_LABELS)}
    return PaperResult(
        name,
        12,
        4,
        25.0,
        times,
        {k: "data-parallel start" for k in times},
        {k: 10.0 for k in FAT_TREES},
        1.0,
        0.1,
        0.2,
        1,
        "start",
    )


def test_outputs_are_written_atomically(tmp_path, monkeypatch):
    paths = write_outputs([_fake("a"), _fake("b")], tmp_path)
    assert sorted(p.name for p in paths) == ["architectures.csv", "architectures.json", "architectures.png"]
    assert (tmp_path / "architectures.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in paths)  # no temporary left

    import topoopt_ilp.draw as draw

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(draw, "draw_architectures", broken)
    out = tmp_path / "again"
    with pytest.raises(RuntimeError):
        write_outputs([_fake()], out)
    assert sorted(p.name for p in out.iterdir()) == ["architectures.csv", "architectures.json"]  # no partial PNG


def test_cli_evaluate_paper(tmp_path, capsys):
    out = tmp_path / "out"
    assert (
        main(
            [
                "evaluate-paper",
                "--instances",
                str(RESNET),
                "--time-limit",
                "2",
                "--rounds",
                "1",
                "--round-time-limit",
                "0.5",
                "--rack-size",
                "4",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert "resnet50-testbed-12-d4" in captured.out and "speedup" in captured.out
    progress = captured.err.splitlines()  # not a terminal: a line as the instance starts and as it ends
    assert progress[0] == "resnet50-testbed-12-d4: solving ..." and progress[1].startswith(
        "resnet50-testbed-12-d4: TopoOpt"
    )
    assert (out / "architectures.png").stat().st_size > 1000
    rows = list(csv.DictReader((out / "architectures.csv").read_text().splitlines()))
    assert [r["instance"] for r in rows] == ["resnet50-testbed-12-d4"]
    assert float(rows[0]["alternating_ms"]) <= float(rows[0]["topoopt_ms"]) * (1 + 1e-9)


def test_cli_evaluate_paper_refuses_bad_input(tmp_path, capsys):
    assert main(["evaluate-paper", "--instances", str(tmp_path / "missing.json")]) == 2
    assert "cannot read file" in capsys.readouterr().err
    assert main(["evaluate-paper", "--instances", str(INSTANCES / "testbed-12.json")]) == 2
    assert "fixed demand" in capsys.readouterr().err
    afile = tmp_path / "file.txt"
    afile.write_text("x")
    assert main(["evaluate-paper", "--instances", str(RESNET), "--out", str(afile)]) == 2
    assert "--out must be a directory" in capsys.readouterr().err


def test_default_instances_exist():
    paths = default_instance_paths(INSTANCES / "paper")
    assert len(paths) == 8 and all(p.exists() for p in paths)
    assert {p.name for p in paths} >= {"dlrm-128-d4.json", "vgg16-128-d8.json"}


def test_cli_evaluate_paper_shows_a_bar_on_a_terminal(monkeypatch, capsys):
    import sys

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    args = ["evaluate-paper", "--instances", str(RESNET), "--time-limit", "2", "--rounds", "1"]
    assert main([*args, "--round-time-limit", "0.5", "--rack-size", "4"]) == 0
    captured = capsys.readouterr()
    assert "evaluate-paper [" in captured.err and "0/1" in captured.err and "| resnet50-testbed-12-d4:" in captured.err
    assert "\r\x1b[2Kresnet50-testbed-12-d4: TopoOpt" in captured.err and captured.err.endswith("\r\x1b[2K")
    assert "\r" not in captured.out and "speedup" in captured.out
