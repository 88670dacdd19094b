"""Workload instances end to end: load, solve (heuristic), verify, evaluate compute + comm."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import INSTANCES
from topoopt_ilp import files
from topoopt_ilp.cli import main
from topoopt_ilp.core.strategy import data_parallel, strategy_demand, strategy_to_dict
from topoopt_ilp.evaluation.evaluate import evaluate
from topoopt_ilp.evaluation.verify import verify
from topoopt_ilp.methods import solve

PAPER = sorted((INSTANCES / "paper").glob("*.json"))


@pytest.mark.parametrize("path", PAPER, ids=lambda p: p.name)
def test_zoo_instance_solves_and_verifies(path: Path, tmp_path):
    inst = files.load_instance(path)
    sol = solve(inst, method="heuristic")
    assert verify(inst, sol).valid, verify(inst, sol).violations
    strategy = data_parallel(inst.workload, inst.n)
    assert sol.placement == strategy_to_dict(strategy)
    _, _, compute = strategy_demand(inst.workload, inst.n, strategy)
    m = sol.metrics
    assert m["compute_time_s"] == pytest.approx(compute.max())
    assert m["iteration_time_s"] == pytest.approx(m["compute_time_s"] + m["comm_time_s"])  # overlap: none
    out = tmp_path / "sol.json"
    files.save_solution(sol, out, directed=False)
    assert verify(inst, files.load_solution(out)).valid


def test_placement_is_checked_by_the_verifier():
    inst = files.load_instance(INSTANCES / "paper" / "bert-testbed-12-d4.json")
    sol = solve(inst, method="heuristic")
    wrong_degree = dict(sol.placement, layer_degree=[5] * len(sol.placement["layer_degree"]))
    assert any("placement" in v for v in verify(inst, replace(sol, placement=wrong_degree)).violations)
    assert any("states no placement" in v for v in verify(inst, replace(sol, placement=None)).violations)


def test_full_overlap_takes_the_max():
    path = INSTANCES / "paper" / "candle-testbed-12-d4.json"
    data = json.loads(path.read_text())
    data["workload"]["overlap"] = "full"
    inst = files.parse_instance(data)
    sol = solve(inst, method="heuristic")
    m = evaluate(inst, sol)
    assert m.iteration_time_s == pytest.approx(max(m.compute_time_s, m.comm_time_s))
    assert m.compute_time_s > 0


def test_generate_command_writes_a_loadable_instance(tmp_path, capsys):
    out = tmp_path / "dlrm16.json"
    assert main(["generate", "dlrm", "--servers", "16", "--degree", "4", "--bandwidth", "100", "-o", str(out)]) == 0
    inst = files.load_instance(out)
    assert inst.n == 16 and len(inst.workload.blocks) == 64
    assert main(["solve", str(out), "--quiet"]) == 0
    assert main(["generate", "dlrm", "--servers", "2", "--degree", "1", "--bandwidth", "100"]) == 2
    assert "no feasible placement" in capsys.readouterr().err


def test_exact_on_a_workload_is_the_joint_model(tmp_path, capsys):
    path = INSTANCES / "paper" / "bert-testbed-12-d4.json"
    out = tmp_path / "sol.json"
    assert main(["solve", str(path), "--method", "exact", "--time-limit", "6", "--out", str(out)]) == 0
    sol = json.loads(out.read_text())
    assert sol["status"] in ("optimal", "feasible") and sol["details"]["model"] == "joint"
    heur = solve(files.load_instance(path), method="heuristic")
    assert sol["objective"] <= heur.objective * (1 + 1e-9)  # it starts from the alternating method, itself from this
    assert sol["bound"] is None or sol["bound"] <= sol["objective"] * (1 + 1e-9)
    assert main(["verify", str(path), str(out)]) == 0
    big = INSTANCES / "paper" / "bert-128-d8.json"
    assert main(["solve", str(big), "--method", "exact"]) == 2
    assert "use --method alternating" in capsys.readouterr().err


def test_a_start_that_breaks_memory_is_said_plainly(tmp_path, capsys):
    """Five 600 MB and three 450 MB tables on six 1 GB servers: no simple rule packs them and no
    placement exists (no pair of the first five shares a server, nor three of the others), which the
    checks before solving do not see (aggregate 4.35 GB; 5 above C/2, 8 above C/3).
    The heuristic and alternating said "placement: server 0: memory ... exceeds" with exit 2, as if the
    user had given a bad placement; now they say their start does not fit (exit 1), and compare shows
    the exact method's proof of infeasibility (exit 3)."""
    from topoopt_ilp.errors import StartInfeasibleError

    layers = [{"name": "l0", "compute_s": 0.003, "param_bytes": 1e7, "activation_bytes": 1e6, "configs": [1, 2, 3, 6]}]
    blocks = [
        {"name": f"t{i}", "bytes": b, "lookup_bytes": 1e6, "consumer": 0} for i, b in enumerate([6e8] * 5 + [4.5e8] * 3)
    ]
    path = tmp_path / "binpack.json"
    path.write_text(
        json.dumps(
            {
                "format": "topoopt-instance",
                "version": 1,
                "cluster": {"servers": 6, "degree": 2, "link_bandwidth_gbps": 100},
                "workload": {"batch_size": 64, "server_memory_bytes": 1e9, "layers": layers, "blocks": blocks},
            }
        )
    )
    inst = files.load_instance(path)
    for method in ("heuristic", "alternating"):
        with pytest.raises(StartInfeasibleError, match="does not fit server memory"):
            solve(inst, method=method)
    assert main(["solve", str(path)]) == 1
    assert main(["compare", str(path), "--time-limit", "20"]) == 3
    assert "does not fit server memory" in capsys.readouterr().out


def test_a_warm_start_file_that_does_not_fit_is_refused(tmp_path):
    """An undirected solution given as the start of a directed workload instance was used silently
    (and gave a worse result); it is refused, naming the mismatch (a user's report)."""
    from topoopt_ilp.errors import InputError

    start = tmp_path / "start.json"
    assert main(["solve", str(INSTANCES / "dlrm-mini-6.json"), "--out", str(start), "--quiet"]) == 0
    data = json.loads((INSTANCES / "dlrm-mini-6.json").read_text())
    data["cluster"]["links"] = "directed"
    inst = files.parse_instance(data)
    with pytest.raises(InputError, match="not a feasible design for this instance.*undirected"):
        solve(inst, method="exact", time_limit_s=10, warm_start=str(start))
