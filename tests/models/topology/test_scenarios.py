"""The exact multi-scenario topology model (models/topology/scenarios.py) on tiny MoE jobs: with one
scenario it is the topology MILP's optimum; its worst case lies between every scenario's own optimum
and the mean design's worst case; its objective is the evaluator's score of the design it returns on
every scenario; a brute force over every topology agrees; HiGHS and SCIP agree; a time-limited solve
is feasible, never optimal."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import bounded_multigraphs, tiny_moe_doc
from topoopt_ilp.evaluation.evaluate import evaluate
from topoopt_ilp.files.instance_file import parse_instance
from topoopt_ilp.methods import solve
from topoopt_ilp.methods.expert_scenarios import mean_instance, scenario_instances
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.topology.scenarios import scenario_times, solve_scenarios
from topoopt_ilp.solvers import DEFAULT_REL_GAP
from topoopt_ilp.solvers.registry import available_backends

OPTIONS = ExactOptions(warm_start="none", time_limit_s=120)


def moe_instance(parallelism: dict, servers: int, gpus: int, degree: int):
    doc = tiny_moe_doc(expert_load=[{"zipf": 2.0, "scenarios": 3, "seed": 1}], parallelism=parallelism)
    doc["cluster"].update(servers=servers, accelerators_per_server=gpus, degree=degree, hop_latency_us=0)
    return parse_instance(doc)


@pytest.fixture(scope="module")
def eight():
    """8 servers of degree 4; AllReduce groups of 4 servers (ring orders to choose)."""
    return moe_instance({"tp": 2, "pp": 2, "dp": 4, "ep": 4}, 8, 2, 4)


@pytest.fixture(scope="module")
def four():
    """4 servers of degree 2, one AllReduce group of all four; the scenarios move the EP bytes."""
    return moe_instance({"tp": 4, "pp": 1, "dp": 4, "ep": 4}, 4, 4, 2)


def start_for(instance):
    return solve(mean_instance(instance), "heuristic")


@pytest.fixture(scope="module")
def eight_solved(eight):
    scenarios = scenario_instances(eight)
    start = start_for(eight)
    own = [solve_scenarios([s], "worst", OPTIONS, start) for s in scenarios]
    mean_design, _ = solve_scenarios([mean_instance(eight)], "worst", OPTIONS, start)
    robust, times = solve_scenarios(scenarios, "worst", OPTIONS, start)
    return scenarios, own, mean_design, robust, times


def test_one_scenario_is_the_topology_milps_optimum(eight_solved):
    scenarios, own, *_ = eight_solved
    single = solve(scenarios[0], "exact", warm_start="none")
    sol, times = own[0]
    assert sol.status == single.status == "optimal"
    assert sol.objective == pytest.approx(single.objective, rel=DEFAULT_REL_GAP)
    assert times == (sol.objective,)


def test_the_worst_case_lies_between_the_own_optima_and_the_mean_designs(eight_solved):
    scenarios, own, mean_design, robust, times = eight_solved
    assert robust.status == "optimal"
    assert robust.bound <= robust.objective <= robust.bound * (1 + DEFAULT_REL_GAP)
    for sol, _ in own:
        assert robust.objective >= sol.bound
    assert robust.objective <= max(scenario_times(scenarios, mean_design)) * (1 + 1e-9)


def test_the_objective_is_the_evaluators_score_on_every_scenario(eight_solved):
    scenarios, _, _, robust, times = eight_solved
    scored = [evaluate(s, robust, routing="optimal").iteration_time_s for s in scenarios]
    assert times == pytest.approx(scored, rel=1e-12)
    assert robust.objective == pytest.approx(max(scored), rel=1e-12)


def test_a_brute_force_over_every_topology_agrees(four):
    """Rings of two members leave nothing to choose: the optimum is over the topologies alone."""
    inst = moe_instance({"tp": 2, "pp": 2, "dp": 4, "ep": 4}, 4, 4, 2)
    scenarios = scenario_instances(inst)
    assert all(len(g.members) == 2 for g in scenarios[0].demand.allreduce)
    times = []
    for x in bounded_multigraphs(4, 2, regular=True):
        t = [evaluate(s, x.copy(), routing="optimal").iteration_time_s for s in scenarios]
        times.append(t)
    times = np.array(times)
    start = start_for(inst)
    robust, _ = solve_scenarios(scenarios, "worst", OPTIONS, start)
    assert robust.objective == pytest.approx(times.max(axis=1).min(), rel=DEFAULT_REL_GAP)
    mean, _ = solve_scenarios(scenarios, "mean", OPTIONS, start)
    assert mean.objective == pytest.approx(times.mean(axis=1).min(), rel=DEFAULT_REL_GAP)
    for k, s in enumerate(scenarios):
        own, _ = solve_scenarios([s], "worst", OPTIONS, start)
        assert own.objective == pytest.approx(times[:, k].min(), rel=DEFAULT_REL_GAP)


@pytest.mark.skipif("scip" not in available_backends(), reason="SCIP (OR-Tools) is not installed")
def test_highs_and_scip_agree(four):
    scenarios, start = scenario_instances(four), start_for(four)
    by_highs, _ = solve_scenarios(scenarios, "worst", OPTIONS, start)
    by_scip, _ = solve_scenarios(scenarios, "worst", ExactOptions(backend="scip", warm_start="none"), start)
    assert by_highs.status == by_scip.status == "optimal"
    assert by_scip.objective == pytest.approx(by_highs.objective, rel=2 * DEFAULT_REL_GAP)


def test_the_mean_objective_is_no_worse_than_its_start(four):
    scenarios, start = scenario_instances(four), start_for(four)
    sol, times = solve_scenarios(scenarios, "mean", OPTIONS, start)
    assert sol.objective == pytest.approx(np.mean(times), rel=1e-12)
    assert sol.objective <= np.mean(scenario_times(scenarios, start)) * (1 + 1e-12)
    assert sol.bound <= sol.objective


def test_a_time_limited_solve_is_feasible_never_optimal(eight):
    scenarios, start = scenario_instances(eight), start_for(eight)
    sol, times = solve_scenarios(scenarios, "worst", ExactOptions(warm_start="none", time_limit_s=0), start)
    assert sol.status == "feasible"
    assert sol.objective == max(times)


def test_a_hop_latency_leaves_the_design_feasible(eight):
    from dataclasses import replace

    with_latency = replace(eight, cluster=replace(eight.cluster, hop_latency_us=1.0))
    scenarios = scenario_instances(with_latency)
    sol, times = solve_scenarios(scenarios, "worst", OPTIONS, start_for(with_latency))
    assert sol.status == "feasible"
    assert "hop latency" in sol.details["status_note"]
    assert sol.bound <= sol.objective == max(times)


@pytest.mark.parametrize("device_tflops", [1, 1000])
def test_full_overlap_takes_the_larger_of_compute_and_communication(device_tflops):
    """With overlap full, a compute-bound job's worst case is its compute: proven without a model."""
    doc = tiny_moe_doc(
        expert_load=[{"zipf": 2.0, "scenarios": 3, "seed": 1}],
        parallelism={"tp": 4, "pp": 1, "dp": 4, "ep": 4},
        overlap="full",
        device_tflops=device_tflops,
    )
    doc["cluster"].update(servers=4, accelerators_per_server=4, degree=2, hop_latency_us=0)
    inst = parse_instance(doc)
    scenarios = scenario_instances(inst)
    sol, times = solve_scenarios(scenarios, "worst", OPTIONS, start_for(inst))
    assert sol.status == "optimal" and sol.objective == max(times)
    job = scenarios[0].compiled_job
    fixed = job.compute_s + job.bubble_s + job.scale_up_s
    assert sol.objective >= fixed
    if device_tflops == 1:  # compute-bound
        assert sol.objective == pytest.approx(fixed, rel=1e-12) and sol.details["rounds"] == []


def test_no_single_ring_design_beats_the_worst_case_optimum(four):
    """The model may split a group over rings; every topology with every single ring order is a
    design it covers, so none of them is better than its optimum."""
    import itertools

    from topoopt_ilp.core.routes import RingSet, Routing
    from topoopt_ilp.core.solution import Solution, Topology

    scenarios = scenario_instances(four)
    (group,) = scenarios[0].demand.allreduce
    robust, _ = solve_scenarios(scenarios, "worst", OPTIONS, start_for(four))
    first, rest = group.members[0], group.members[1:]
    best = np.inf
    for x in bounded_multigraphs(4, 2, regular=True):
        for order in itertools.permutations(rest):
            rings = Routing(rings=RingSet.from_lists([(0, [first, *order], 1.0)]))
            design = Solution(status="feasible", method="given", topology=Topology(x.copy()), routing=rings)
            best = min(best, max(scenario_times(scenarios, design)))
    assert robust.objective <= best * (1 + 1e-9)
