"""The alternating method on a job instance (docs/guide/llm-jobs.md, **Choosing the split, the
mapping and the topology**): the split, the rank-to-server mapping and the topology, in turn.

Splits: a ``"search"`` job's ``candidates`` best-ranked splits
(:func:`~topoopt_ilp.core.job_section.ranked_parallelisations`), each designed with TopoOpt's
heuristic and scored by the evaluator (:func:`~topoopt_ilp.methods.job_split.pick_split_by_heuristic`,
the start); the ``splits`` fastest of them are then improved in that order. A job with a fixed split
keeps it (only its mapping and topology change).

For one split, from its heuristic design (the default server numbering, DP groups on cosets), repeat

  (a) fix the topology, improve the mapping: moves that exchange the servers of two pipeline stages
      (every pair) and then of two servers (``moves`` random pairs), each scored by the hop-bytes
      of the traffic on the fixed topology (every transfer's bytes times its hop distance; the
      logical rings follow the ranks to their new servers: :class:`_HopTraffic`); the best improving
      move is taken until none improves;
  (b) fix the mapping, design the topology for its traffic: TopologyFinder with each of its select
      rules in each of its modes (:data:`TOPOLOGY_VARIANTS`), scored by the evaluator;

until a round improves the split's best by less than ``tol`` or ``rounds`` / ``time_limit_s`` run
out (checked between steps). The compute, bubble and scale-up terms do not depend on the mapping (a
permutation of servers), so the communication time orders mappings as the iteration time does; the
hop-bytes only steer the mapping step, every design is then scored by the evaluator.
Every design is scored by the evaluator on the job instance with its split and mapping, and the
incumbent only changes when a candidate is strictly faster: never worse than the start. The result
records its split and mapping (``Solution.job``), so ``topoopt evaluate`` and ``topoopt verify``
score the same job.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from topoopt_ilp.core.graph import hop_distances
from topoopt_ilp.core.instance import Demand, Instance, job_choice
from topoopt_ilp.core.job_section import server_numbering
from topoopt_ilp.core.solution import Solution, Topology
from topoopt_ilp.errors import InputError
from topoopt_ilp.heuristic.finder import SELECT_RULES
from topoopt_ilp.jobs.job import Parallelism
from topoopt_ilp.methods.job_split import heuristic_job_design, pick_split_by_heuristic, split_instance
from topoopt_ilp.methods.steps import alternating_result

__all__ = ["solve_job_alternating", "DEFAULT_CANDIDATES", "DEFAULT_SPLITS", "DEFAULT_MOVES"]

Progress = Callable[[dict[str, Any]], None]

#: Best-ranked splits designed for the start (as ``topoopt generate --pick heuristic``).
DEFAULT_CANDIDATES = 8
#: Splits (the start's fastest first) whose mapping and topology are improved.
DEFAULT_SPLITS = 8
#: The topology step's TopologyFinder settings: each select rule in each mode (``authors`` gives
#: every port to the AllReduce rings and routes the MP pairs over them, which can beat the paper's
#: proportional split: Llama-3.1 405B tp8 pp64 dp8 at 512 servers runs 37.8 s instead of 50.6 s).
TOPOLOGY_VARIANTS = tuple((rule, mode) for mode in ("paper", "authors") for rule in SELECT_RULES)
#: Random server-pair exchanges tried per pass of the mapping step (after every pair of stages).
DEFAULT_MOVES = 2048


def solve_job_alternating(
    instance: Instance,
    *,
    rounds: int = 5,
    tol: float = 1e-3,
    time_limit_s: float | None = None,
    candidates: int = DEFAULT_CANDIDATES,
    splits: int = DEFAULT_SPLITS,
    moves: int = DEFAULT_MOVES,
    select: str = "geometric",
    mode: str = "paper",
    seed: int = 0,
    progress: Progress | None = None,
) -> Solution:
    """The split, mapping and topology of ``instance``'s job in turn (module docstring); the best
    design found, its split and mapping in ``Solution.job`` and every step in ``details["rounds"]``."""
    if instance.job is None:
        raise InputError("the instance has no job section", field="job")
    for name, value, low in (
        ("rounds", rounds, 1),
        ("candidates", candidates, 1),
        ("splits", splits, 1),
        ("moves", moves, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise InputError(f"must be an integer >= {low}, got {value!r}", field=name)
    if time_limit_s is not None and (isinstance(time_limit_s, bool) or not time_limit_s > 0):
        raise InputError(f"must be a positive number of seconds, got {time_limit_s!r}", field="time_limit_s")
    run = _JobAlternation(instance, rounds, tol, time_limit_s, moves, select, mode, seed, progress)
    if isinstance(instance.job.parallelism, Parallelism):
        starts = [instance.job.parallelism]
    else:
        scores = pick_split_by_heuristic(instance, candidates)
        starts = [s.parallelism for s in scores][:splits]
    for parallelism in starts:
        if run.out_of_time():
            break
        run.descend(parallelism)
    return run.solution()


class _JobAlternation:
    """One run: its options, the log of every step and the best design so far."""

    def __init__(self, instance, rounds, tol, time_limit_s, moves, select, mode, seed, progress) -> None:
        self.instance = instance
        self.rounds, self.tol, self.time_limit_s, self.moves = rounds, tol, time_limit_s, moves
        self.select, self.mode, self.seed, self.progress = select, mode, seed, progress
        self.started = time.perf_counter()
        self.log: list[dict[str, Any]] = []
        self.best: Solution | None = None

    def out_of_time(self) -> bool:
        return self.time_limit_s is not None and time.perf_counter() - self.started >= self.time_limit_s

    def record(self, parallelism: Parallelism, round_: int, phase: str, sol: Solution | None, accepted: bool) -> None:
        entry = {
            "split": str(parallelism),
            "round": round_,
            "phase": f"{parallelism}: {phase}",
            "iteration_time_s": None if sol is None else sol.metrics.get("iteration_time_s"),
            "compute_time_s": None if sol is None else sol.metrics.get("compute_time_s"),
            "comm_time_s": None if sol is None else sol.metrics.get("comm_time_s"),
            "accepted": accepted,
            "wall_time_s": round(time.perf_counter() - self.started, 3),
        }
        self.log.append(entry)
        if self.progress is not None:
            self.progress(entry)

    def offer(self, sol: Solution) -> bool:
        better = self.best is None or sol.objective < self.best.objective
        if better:
            self.best = sol
        return better

    def design(self, parallelism: Parallelism, server_map: np.ndarray, select: str, mode: str) -> Solution:
        """TopologyFinder's design for the split and mapping, scored on that job, recording both."""
        trial = split_instance(self.instance, parallelism, server_map)
        sol = heuristic_job_design(trial, select=select, mode=mode, seed=self.seed)
        return replace(sol, job=job_choice(parallelism, server_map))

    def descend(self, parallelism: Parallelism) -> None:
        """Rounds of (a) mapping and (b) topology for one split, from its heuristic design."""
        job = split_instance(self.instance, parallelism).compiled_job.job
        stages = _stage_blocks(job)
        hops = _HopTraffic.of(_physical_demand(self.instance, parallelism))
        mapping = server_numbering(job)
        local = self.design(parallelism, mapping, self.select, self.mode)
        self.record(parallelism, 0, "start: heuristic design", local, self.offer(local))
        for r in range(1, self.rounds + 1):
            round_start = local.objective
            if self.out_of_time():
                return
            moved = self.mapping_step(hops, mapping, local.topology, stages)
            if moved is not None:
                mapping, before, after = moved
                self.record(
                    parallelism, r, f"mapping: hop-bytes {before:.4g} -> {after:.4g} on the split's best topology",
                    None, False,
                )  # fmt: skip
            for rule, mode in TOPOLOGY_VARIANTS:
                if self.out_of_time():
                    return
                cand = self.design(parallelism, mapping, rule, mode)
                self.record(parallelism, r, f"topology ({rule}, {mode})", cand, self.offer(cand))
                local = cand if cand.objective < local.objective else local
            if (round_start - local.objective) / round_start < self.tol:
                return

    def mapping_step(
        self, hops: _HopTraffic, mapping: np.ndarray, topology: Topology, stages: list[np.ndarray]
    ) -> tuple[np.ndarray, float, float] | None:
        """The mapping that improving moves reach from ``mapping`` on ``topology``, with its hop-bytes
        before and after; None when no move improves them."""
        dist, _ = hop_distances(topology.matrix)
        if (dist < 0).any():  # a split topology: every mapping keeps some traffic unreachable
            return None
        dist = dist.astype(float)
        rng = np.random.default_rng(self.seed)
        current = mapping.copy()
        start = value = hops.cost(current, dist)
        while not self.out_of_time():
            best_move, best_value = None, value
            for a, b in _moves(len(mapping), stages, self.moves, rng):
                trial = current.copy()
                trial[a], trial[b] = current[b], current[a]
                v = hops.cost(trial, dist)
                if v < best_value * (1 - 1e-12):
                    best_move, best_value = trial, v
            if best_move is None:
                break
            current, value = best_move, best_value
        return (current, start, value) if value < start else None

    def solution(self) -> Solution:
        details = {**self.best.details, "rounds": self.log}
        return alternating_result(self.best, self.started, details)


def _physical_demand(instance: Instance, parallelism: Parallelism) -> Demand:
    """The split's demand with every server at its rank-order id (``server_map`` the identity): a
    mapping ``m`` turns it into the job's demand by relabelling server ``s`` as ``m[s]``. The
    AllReduce members stay in ring order, so the rings follow the ranks."""
    ident = split_instance(instance, parallelism, np.arange(instance.n))
    return ident.demand


@dataclass(frozen=True)
class _HopTraffic:
    """A split's traffic as transfers between physical servers: every AllReduce member to its ring
    successor (``2 (k-1)/k S`` bytes), every MP pair. Under a mapping ``m`` on a topology of hop
    distances ``dist`` its hop-bytes are ``sum bytes x dist[m[src], m[dst]]``: the bytes the links
    carry in total on shortest paths, the mapping step's score (the evaluator's busiest link needs
    the routes, a third of a second at 128 servers; this takes microseconds)."""

    src: np.ndarray
    dst: np.ndarray
    bytes: np.ndarray

    @classmethod
    def of(cls, demand: Demand) -> _HopTraffic:
        src, dst, size = [], [], []
        for g in demand.allreduce:
            members = np.asarray(g.members)
            k = len(members)
            src.append(members)
            dst.append(np.roll(members, -1))
            size.append(np.full(k, 2.0 * (k - 1) / k * g.bytes))
        for a, b, x in demand.mp:
            src.append(np.array([a]))
            dst.append(np.array([b]))
            size.append(np.array([x]))
        if not src:
            return cls(np.zeros(0, int), np.zeros(0, int), np.zeros(0))
        return cls(np.concatenate(src), np.concatenate(dst), np.concatenate(size))

    def cost(self, mapping: np.ndarray, dist: np.ndarray) -> float:
        return float(self.bytes @ dist[mapping[self.src], mapping[self.dst]])


def _stage_blocks(job) -> list[np.ndarray]:
    """The physical servers of each pipeline stage, when each server holds one stage's ranks (the
    stage exchanges need them); else none."""
    n, g, par = job.servers, job.training.gpus_per_server, job.parallelism
    if par.pp == 1 or (par.tp * par.dp) % g:
        return []
    return list(np.arange(n).reshape(par.pp, n // par.pp))


def _moves(n: int, stages: list[np.ndarray], budget: int, rng: np.random.Generator) -> list[tuple[Any, Any]]:
    """Exchanges to try, as (positions, positions) of the mapping: every pair of stages, then
    ``budget`` random pairs of servers."""
    out: list[tuple[Any, Any]] = [(stages[p], stages[q]) for p in range(len(stages)) for q in range(p + 1, len(stages))]
    pairs = rng.integers(0, n, size=(budget, 2))
    return out + [(int(a), int(b)) for a, b in pairs if a != b]
