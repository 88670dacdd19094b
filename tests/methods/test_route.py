"""``route`` / ``topoopt route`` / ``solve --reroute``: a design re-routed over the paths that minimise
its busiest link, checked by the evaluator's own arc-flow LP (``routing="optimal"``, separate code)."""

from __future__ import annotations

import json

import pytest

from conftest import INSTANCES
from topoopt_ilp import evaluate, load_instance, solve, verify
from topoopt_ilp.cli import main
from topoopt_ilp.errors import InputError
from topoopt_ilp.methods.reroute import route

FIXED = INSTANCES / "dlrm-mini-8-fixed.json"


@pytest.mark.parametrize("name", ["dlrm-mini-8-fixed", "mix-8", "fixed-links-6", "dlrm-mini-6"])
def test_rerouted_design_meets_the_evaluators_optimal_routing(name):
    inst = load_instance(INSTANCES / f"{name}.json")
    sol = solve(inst, method="heuristic")
    routed = route(inst, sol)
    record = routed.details["reroute"]
    assert record["proven"] and record["applied"]
    assert verify(inst, routed).valid
    optimal = evaluate(inst, sol, routing="optimal")  # same rings, every routing: the arc-flow LP
    assert routed.metrics["bandwidth_time_s"] == pytest.approx(optimal.bandwidth_time_s, rel=1e-6)
    assert record["bandwidth_bound_s"] <= routed.metrics["bandwidth_time_s"] * (1 + 1e-9)
    assert routed.objective == pytest.approx(evaluate(inst, routed).iteration_time_s)
    assert routed.objective < sol.objective and routed.status == "feasible" and routed.bound is None
    assert routed.placement == sol.placement and (routed.topology.matrix == sol.topology.matrix).all()


def test_a_routing_that_is_already_optimal_is_kept():
    inst = load_instance(FIXED)
    once = route(inst, solve(inst, method="heuristic"))
    twice = route(inst, once)
    assert twice.details["reroute"]["applied"] is False
    assert twice.routing is once.routing and twice.objective == once.objective


def test_a_solution_without_a_design_or_for_another_instance_is_refused():
    inst = load_instance(FIXED)
    sol = solve(inst, method="heuristic")
    with pytest.raises(InputError, match="does not fit the instance"):
        route(load_instance(INSTANCES / "mix-8.json"), sol)
    # the same design scored for another objective: refused up front (it was kept, printed, then
    # failed the output's verification with exit 1)
    from dataclasses import replace

    mix = load_instance(INSTANCES / "mix-8.json")
    with pytest.raises(InputError, match="the evaluator gives"):
        route(replace(mix, objective="aspl"), solve(mix, method="heuristic"))


def test_cli_route_and_solve_reroute(tmp_path, capsys):
    plain, routed, again = (tmp_path / f"{k}.json" for k in ("plain", "routed", "again"))
    assert main(["solve", str(FIXED), "-o", str(plain), "--quiet"]) == 0
    assert main(["route", str(FIXED), str(plain), "-o", str(routed)]) == 0
    out = capsys.readouterr().out
    assert "bandwidth 10.16 ms -> 5.08 ms" in out and "verified           yes" in out
    data = json.loads(routed.read_text())
    assert data["details"]["reroute"]["applied"] and data["routing"]["paths"]
    assert main(["verify", str(FIXED), str(routed)]) == 0
    assert main(["solve", str(FIXED), "--reroute", "-o", str(again)]) == 0
    assert "rerouted           bandwidth 10.16 ms -> 5.08 ms" in capsys.readouterr().out
    assert json.loads(again.read_text())["metrics"]["iteration_time_s"] == pytest.approx(
        data["metrics"]["iteration_time_s"]
    )
    none = tmp_path / "none.json"
    mix = str(INSTANCES / "mix-8.json")
    assert main(["solve", mix, "--method", "exact", "--time-limit", "0", "-o", str(none), "--quiet"]) == 4
    capsys.readouterr()
    assert main(["route", mix, str(none)]) == 2
    assert "holds no design" in capsys.readouterr().err


def test_bad_time_limits_and_objectives_the_routing_does_not_change():
    inst = load_instance(FIXED)
    sol = solve(inst, method="heuristic")
    for bad in (-1.0, float("nan"), float("inf"), "5"):
        with pytest.raises(InputError, match="time limit"):
            route(inst, sol, time_limit_s=bad)
    circ = load_instance(INSTANCES / "coprime-circulant-32.json")  # objective aspl: routing cannot change it
    kept = route(circ, solve(circ, method="heuristic"))
    assert kept.details["reroute"]["applied"] is False
    assert "does not depend on the routing" in kept.details["reroute"]["note"]


def test_a_rerouted_alternating_design_says_how_it_is_routed(capsys):
    inst = load_instance(INSTANCES / "dlrm-mini-6.json")
    sol = solve(inst, method="alternating", time_limit_s=20)
    routed = route(inst, sol)
    if routed.details["reroute"]["applied"]:
        assert routed.details["routing"].startswith("re-routed")
    else:
        assert routed.details.get("routing") == sol.details.get("routing")
