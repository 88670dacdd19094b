"""Design over expert-load scenarios (topoopt_ilp.methods.expert_scenarios) on a tiny MoE job: every
time in the report is the evaluator's on that scenario's instance, the robust design is the least
worst case among the candidates (so no worse than the mean design's), and the price of robustness is
at least 1."""

from __future__ import annotations

import pytest

from conftest import tiny_moe_doc
from topoopt_ilp.evaluation.evaluate import RoutingError, evaluate
from topoopt_ilp.files.instance_file import parse_instance
from topoopt_ilp.methods import expert_scenarios
from topoopt_ilp.methods.expert_scenarios import (
    design_over_scenarios,
    max_demand,
    scenario_instances,
    score,
)


@pytest.fixture(scope="module")
def moe():
    return parse_instance(tiny_moe_doc(expert_load=[{"zipf": 2.0, "scenarios": 3, "seed": 1}]))


@pytest.fixture(scope="module")
def report(moe):
    return design_over_scenarios(moe)


def test_the_report_scores_every_candidate_on_every_scenario_with_the_evaluator(moe, report):
    scenarios = scenario_instances(moe)
    assert report.names == ("max", "mean", "scenario 0", "scenario 1", "scenario 2")
    for design, times in zip(report.designs, report.times):
        assert times == tuple(evaluate(s, design).iteration_time_s for s in scenarios)


def test_the_robust_design_has_the_least_worst_case(report):
    worst = [report.worst(c) for c in range(len(report.names))]
    assert report.worst(report.robust) == min(worst)
    assert report.worst(report.robust) <= report.worst(report.mean)


def test_own_best_and_the_price_of_robustness(report):
    for k, best in enumerate(report.own_best):
        assert best == min(t[k] for t in report.times)
        assert best <= report.times[2 + k][k]  # at most the time of the design made for k
    assert all(p >= 1 for p in report.price_of_robustness)
    rows = report.rows()
    assert [r["price"] for r in rows] == list(report.price_of_robustness)


def test_the_max_demand_covers_every_scenario(moe):
    scenarios = scenario_instances(moe)
    top = {(a, b): v for a, b, v in max_demand(scenarios).mp}
    for inst in scenarios:
        for a, b, v in inst.demand.mp:
            assert top[(a, b)] >= v
    assert max(top.values()) == max(v for s in scenarios for *_, v in s.demand.mp)


def test_the_mean_objective_keeps_the_least_mean(moe, report):
    by_mean = design_over_scenarios(moe, objective="mean")
    assert by_mean.times == report.times  # the same candidates, the same scores
    means = [by_mean.average(c) for c in range(len(by_mean.names))]
    assert by_mean.average(by_mean.robust) == min(means)


def test_a_routing_the_evaluator_refuses_is_scored_on_shortest_paths(moe, report, monkeypatch):
    scenario, design = scenario_instances(moe)[0], report.designs[0]
    real = expert_scenarios.evaluate

    def refusing(instance, solution, routing="given"):
        if routing == "given":
            raise RoutingError("a pair without routes")
        return real(instance, solution, routing=routing)

    monkeypatch.setattr(expert_scenarios, "evaluate", refusing)
    assert score(scenario, design) == real(scenario, design, routing="shortest_path").iteration_time_s


def test_the_exact_report_proves_each_scenarios_own_optimum():
    from conftest import INSTANCES
    from topoopt_ilp.files.instance_file import load_instance
    from topoopt_ilp.methods.expert_scenarios import exact_design_over_scenarios

    inst = load_instance(INSTANCES / "moe" / "tiny-moe-6-d2-zipf1.5.json")
    report = exact_design_over_scenarios(inst)
    assert report.names[:2] == ("robust", "mean") and report.routing == "optimal"
    robust = report.designs[report.robust]
    assert robust.status == "optimal" and robust.objective == report.worst(report.robust)
    assert report.worst(report.robust) <= report.worst(report.mean) * (1 + 1e-12)
    scenarios = scenario_instances(inst)
    for k, own in enumerate(report.designs[2:]):
        assert own.status == "optimal"
        assert report.own_best[k] >= own.bound  # no candidate beats a proven optimum
        assert report.times[2 + k][k] == own.objective
        assert report.times[report.robust][k] == evaluate(scenarios[k], robust, routing="optimal").iteration_time_s
    assert all(p >= 1 - 1e-4 for p in report.price_of_robustness)
