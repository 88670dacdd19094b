"""Pick a job's split by the evaluator on TopoOpt's heuristic design (docs/guide/llm-jobs.md).

A job section's ``"search"`` ranks the splits that fit memory by a bound that needs no topology
(:func:`~topoopt_ilp.core.job_section.ranked_parallelisations`). Here the ``candidates`` best of that
ranking are each compiled into a job instance with that split, designed with the heuristic method
and scored by the evaluator; the split with the least iteration time wins (ties: the better ranked).
The topology is designed once per split, not jointly with it (issue #40, item 4).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.job_section import ranked_parallelisations
from topoopt_ilp.core.solution import Solution
from topoopt_ilp.errors import InputError
from topoopt_ilp.evaluation.architectures import evaluate_architecture
from topoopt_ilp.heuristic.design import heuristic_design
from topoopt_ilp.jobs.job import Parallelism
from topoopt_ilp.methods.steps import finalize

__all__ = [
    "SplitScore",
    "pick_split_by_heuristic",
    "split_instance",
    "heuristic_job_design",
    "best_split_on_architecture",
]


def split_instance(instance: Instance, parallelism: Parallelism, server_map=None) -> Instance:
    """``instance`` with its job's split (and rank-to-server mapping) fixed."""
    job = replace(instance.job, parallelism=parallelism, server_map=None if server_map is None else tuple(server_map))
    return replace(instance, job=job, demand=None)


def heuristic_job_design(
    instance: Instance, *, select: str = "geometric", mode: str = "paper", seed: int = 0
) -> Solution:
    """TopoOpt's heuristic design of a job instance, scored by the evaluator (as ``solve(instance,
    "heuristic")`` scores it)."""
    sol = heuristic_design(instance, select=select, mode=mode, seed=seed)
    routing = "given" if (len(sol.routing.paths) or len(sol.routing.offset_routes)) else "shortest_path"
    return finalize(instance, sol, routing=routing)


@dataclass(frozen=True)
class SplitScore:
    """One candidate: its split, the ranking's estimate and the heuristic design's iteration time."""

    parallelism: Parallelism
    estimate_s: float
    iteration_time_s: float
    wall_time_s: float


def pick_split_by_heuristic(instance: Instance, candidates: int = 8) -> list[SplitScore]:
    """The ``candidates`` best-ranked splits of ``instance``'s job, each scored by the evaluator on
    its heuristic design, best first (the first is the pick). ``instance`` has a job section (its
    own split is ignored)."""
    if instance.job is None:
        raise InputError("the instance has no job section: there is no split to pick", field="job")
    if isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < 1:
        raise InputError(f"must be an integer >= 1, got {candidates!r}", field="candidates")
    ranked = ranked_parallelisations(instance.job, instance.cluster)[:candidates]
    scores = []
    for estimate, parallelism in ranked:
        started = time.perf_counter()
        metrics = heuristic_job_design(split_instance(instance, parallelism)).metrics
        scores.append(
            SplitScore(parallelism, estimate, float(metrics["iteration_time_s"]), time.perf_counter() - started)
        )
    order = sorted(range(len(scores)), key=lambda k: (scores[k].iteration_time_s, k))
    return [scores[k] for k in order if math.isfinite(scores[k].iteration_time_s)] or [scores[k] for k in order]


def best_split_on_architecture(
    instance: Instance, architecture: str, *, candidates: int | None = None, equal_cost: bool = True
) -> list[SplitScore]:
    """The splits of ``instance``'s job tuned for a switched network: every split that fits memory
    (or the ``candidates`` best-ranked), each scored by the evaluator on ``architecture``
    (:func:`~topoopt_ilp.evaluation.architectures.evaluate_architecture`: ``rail_optimised``,
    ``rail_only``, ``fat_tree``; at equal cost by default), best first (ties: the better ranked).
    The baseline a topology design is compared with: each network with the split that suits it."""
    if instance.job is None:
        raise InputError("the instance has no job section: there is no split to pick", field="job")
    if candidates is not None and (isinstance(candidates, bool) or not isinstance(candidates, int) or candidates < 1):
        raise InputError(f"must be an integer >= 1, got {candidates!r}", field="candidates")
    ranked = ranked_parallelisations(replace(instance.job, parallelism="search", server_map=None), instance.cluster)
    scores = []
    for estimate, parallelism in ranked[:candidates]:
        started = time.perf_counter()
        metrics = evaluate_architecture(split_instance(instance, parallelism), architecture, equal_cost=equal_cost)
        scores.append(SplitScore(parallelism, estimate, float(metrics.iteration_time_s), time.perf_counter() - started))
    order = sorted(range(len(scores)), key=lambda k: (scores[k].iteration_time_s, k))
    return [scores[k] for k in order]
