"""Designing one topology for MoE traffic that moves: a job whose ``expert_load`` lists scenarios
(docs/guide/llm-jobs.md, **Expert load**).

Each scenario compiles to its own instance (:func:`scenario_instance`: the same job, cluster and
fixed terms; the EP bytes of that scenario's load), and the mean of the scenarios' routing shares to
one more (:func:`mean_instance`). The heuristic over scenarios (:func:`design_over_scenarios`):

* candidates: TopologyFinder (the ``heuristic`` method) on the element-wise maximum of the
  scenarios' demands (every pair at its largest bytes; the AllReduce groups do not depend on the
  load), on the mean instance, and on each scenario's own instance;
* every candidate (its topology, rings and MP routes, as the heuristic returns them) is scored by
  the one evaluator (:func:`~topoopt_ilp.evaluation.evaluate.evaluate`, ``given`` routing) on every
  scenario's instance: the AllReduce groups are the same in every scenario and the MP pairs are
  those of the EP groups, so the design's routes carry each scenario's bytes. Should the evaluator
  refuse the design's routing on a scenario (``RoutingError``), that scenario is scored with
  shortest-path routing (:func:`score`);
* the **robust** design is the candidate with the least worst case over the scenarios (ties: the
  least mean, then the candidates' order), or with ``objective="mean"`` the least mean (ties: the
  least worst case); the **mean** design is the one for the mean instance;
  scenario k's **own best** is the least time any candidate reaches on k (at most the time of the
  design made for k).

The price of robustness on scenario k is ``robust_k / own_best_k`` (>= 1); the report gives each
and their maximum. Because the mean design is a candidate, the robust worst case is at most the mean
design's worst case.

The exact version (:func:`exact_design_over_scenarios`, small n) solves the models of
:mod:`topoopt_ilp.models.topology.scenarios`: each scenario's own optimum and the mean matrix's
optimal design (one scenario each), then the robust design (every scenario under one topology),
started from the best of those. A design there is a topology and its rings; every scenario is
routed at best, so each time is the evaluator's with ``optimal`` routing, and a scenario's own best
is its proven optimum (within the solver's gap).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from topoopt_ilp.core.instance import Demand, Instance
from topoopt_ilp.core.job_section import scenario_count
from topoopt_ilp.core.solution import Solution
from topoopt_ilp.errors import InputError
from topoopt_ilp.evaluation.evaluate import RoutingError, evaluate
from topoopt_ilp.methods import solve

__all__ = [
    "scenario_instance",
    "mean_instance",
    "scenario_instances",
    "max_demand",
    "OBJECTIVES",
    "score",
    "ScenarioReport",
    "design_over_scenarios",
    "exact_design_over_scenarios",
]


def _with_scenario(instance: Instance, scenario) -> Instance:
    job = instance.job
    if job is None or not job.expert_load:
        raise InputError("the instance's job has no expert_load scenarios", field="job.expert_load")
    return replace(instance, job=replace(job, expert_scenario=scenario), demand=None)


def scenario_instance(instance: Instance, k: int) -> Instance:
    """``instance`` whose demand is scenario ``k``'s traffic (its job's ``expert_scenario = k``)."""
    return _with_scenario(instance, k)


def mean_instance(instance: Instance) -> Instance:
    """``instance`` whose demand is the traffic of the mean of the scenarios' routing shares."""
    return _with_scenario(instance, "mean")


def scenario_instances(instance: Instance) -> list[Instance]:
    """One instance per scenario of the job's expert load, in the section's order."""
    return [scenario_instance(instance, k) for k in range(scenario_count(instance.job))]


def max_demand(instances: list[Instance]) -> Demand:
    """The element-wise maximum of the instances' demands: every MP pair at its largest bytes, every
    AllReduce group at its largest size."""
    pairs: dict[tuple[int, int], float] = {}
    groups: dict[tuple[int, ...], object] = {}
    for inst in instances:
        for a, b, size in inst.demand.mp:
            pairs[(a, b)] = max(pairs.get((a, b), 0.0), size)
        for group in inst.demand.allreduce:
            kept = groups.get(group.members)
            if kept is None or group.bytes > kept.bytes:
                groups[group.members] = group
    mp = tuple((a, b, size) for (a, b), size in sorted(pairs.items()))
    return replace(instances[0].demand, allreduce=tuple(groups[m] for m in sorted(groups)), mp=mp)


def score(scenario: Instance, design: Solution) -> float:
    """The evaluator's iteration time of ``design`` on ``scenario``: its own rings and routes, or
    shortest paths when they do not carry the scenario's demand."""
    try:
        return evaluate(scenario, design).iteration_time_s
    except RoutingError:
        return evaluate(scenario, design, routing="shortest_path").iteration_time_s


@dataclass(frozen=True)
class ScenarioReport:
    """Per candidate design (``names[c]``), its iteration time on every scenario (``times[c][k]``,
    seconds); ``robust`` and ``mean`` index the robust and the mean-matrix designs; ``own_best[k]``
    the least time of any candidate on scenario k; ``routing`` the evaluator's routing mode of the
    times (``given``: each design's own routes, shortest paths where the evaluator refuses them;
    ``optimal``: every scenario routed at best)."""

    names: tuple[str, ...]
    designs: tuple[Solution, ...]
    times: tuple[tuple[float, ...], ...]
    robust: int
    mean: int
    routing: str = "given"  # how every time was scored: the designs' own routes, or "optimal"

    @property
    def scenarios(self) -> int:
        return len(self.times[0])

    def worst(self, c: int) -> float:
        return max(self.times[c])

    def average(self, c: int) -> float:
        return sum(self.times[c]) / self.scenarios

    @property
    def own_best(self) -> tuple[float, ...]:
        return tuple(min(t[k] for t in self.times) for k in range(self.scenarios))

    @property
    def price_of_robustness(self) -> tuple[float, ...]:
        """``robust_k / own_best_k`` per scenario."""
        return tuple(r / b for r, b in zip(self.times[self.robust], self.own_best))

    def rows(self) -> list[dict[str, float | str]]:
        """Per scenario: the robust, mean and own-best designs' times and the price of robustness."""
        return [
            {
                "scenario": k,
                "robust_s": self.times[self.robust][k],
                "mean_design_s": self.times[self.mean][k],
                "own_best_s": self.own_best[k],
                "price": self.price_of_robustness[k],
            }
            for k in range(self.scenarios)
        ]


OBJECTIVES = ("worst", "mean")


def design_over_scenarios(
    instance: Instance, *, objective: str = "worst", own: bool = True, seed: int = 0
) -> ScenarioReport:
    """The heuristic of the module docstring on ``instance`` (a job with an ``expert_load``);
    ``objective`` ranks the candidates by their worst case or their mean over the scenarios;
    ``own=False`` skips the per-scenario designs (then ``own_best`` is over the max and mean designs)."""
    if objective not in OBJECTIVES:
        raise InputError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}", field="objective")
    scenarios = scenario_instances(instance)
    designs: list[tuple[str, Instance]] = [
        ("max", replace(instance, job=None, demand=max_demand(scenarios))),
        ("mean", mean_instance(instance)),
    ]
    if own:
        designs += [(f"scenario {k}", inst) for k, inst in enumerate(scenarios)]
    names, solutions, times = [], [], []
    for name, design_instance in designs:
        design = solve(design_instance, "heuristic", seed=seed)
        names.append(name)
        solutions.append(design)
        times.append(tuple(score(s, design) for s in scenarios))

    def rank(c: int) -> tuple[float, float, int]:
        worst, total = max(times[c]), sum(times[c])
        return (worst, total, c) if objective == "worst" else (total, worst, c)

    robust = min(range(len(names)), key=rank)
    return ScenarioReport(tuple(names), tuple(solutions), tuple(times), robust, names.index("mean"))


def exact_design_over_scenarios(instance: Instance, *, objective: str = "worst", options=None) -> ScenarioReport:
    """The exact version of the module docstring on ``instance`` (a job with an ``expert_load``, at
    most :data:`~topoopt_ilp.models.topology.milp.MAX_SERVERS` servers; ``options`` a
    :class:`~topoopt_ilp.models.common.ExactOptions`, its time limit for each of the 2 + K
    models). Candidates, in order: ``robust``, ``mean`` and ``scenario k``; each design's Solution
    carries its status, objective (its worst case or mean over its scenarios) and bound."""
    # start-up time: the models load the solver packages
    from topoopt_ilp.models.common import ExactOptions
    from topoopt_ilp.models.topology.scenarios import (
        SCENARIO_OBJECTIVES,
        check_scenarios,
        scenario_times,
        solve_scenarios,
    )

    if objective not in SCENARIO_OBJECTIVES:
        raise InputError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}", field="objective")
    options = options if options is not None else ExactOptions(warm_start="none")
    scenarios = scenario_instances(instance)
    check_scenarios(scenarios)  # before any solve
    mean_inst = mean_instance(instance)
    start = solve(mean_inst, "heuristic")
    names, designs, times = [], [], []
    mean_design, _ = solve_scenarios([mean_inst], "worst", options, start)
    own = [solve_scenarios([s], "worst", options, start)[0] for s in scenarios]
    for name, design in [("mean", mean_design)] + [(f"scenario {k}", d) for k, d in enumerate(own)]:
        names.append(name)
        designs.append(design)
        times.append(scenario_times(scenarios, design))

    def value(c: int) -> float:
        return max(times[c]) if objective == "worst" else sum(times[c]) / len(times[c])

    best = min(range(len(names)), key=value)
    least = np.array([d.bound if d.bound is not None else 0.0 for d in own])  # own optima bound any design
    robust, robust_times = solve_scenarios(scenarios, objective, options, designs[best], least)
    return ScenarioReport(
        ("robust", *names), (robust, *designs), (robust_times, *times), robust=0, mean=1, routing="optimal"
    )
