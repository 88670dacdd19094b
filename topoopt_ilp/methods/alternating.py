"""The alternating decomposition (docs/methods/alternating.md): placement <-> topology + routing.

Start from TopoOpt's data-parallel strategy and its TopologyFinder topology (and, when it is better,
from the best pipeline of data-parallel groups with its own topology), then repeat

  (b) fix the topology, optimise the placement (exact: the placement enumeration or MILP,
      time-limited per round);
  (a) fix the placement, rebuild the topology and routing for its traffic (TopologyFinder, or the
      exact topology MILP: ``topology_method``, by default exact up to 12 servers);

until a round improves the iteration time by less than ``tol`` (relative), or the round / time budget
runs out. Every candidate is scored by the independent evaluator and the incumbent only changes
when a candidate is strictly better, so it never gets worse. Every phase is logged in
``Solution.details["rounds"]`` (round 0 for the starts; with two starts, the second trajectory's
rounds count from 1 again). A phase whose input (a topology, a placement) was already solved to
optimality in the run is not solved again: its result is reused and logged ``reused``. With the
exact topology step, a trajectory also ends when its placement's traffic is the image of traffic
whose topology step was already solved to optimality, under a relabelling of the servers
``i -> u*i + r (mod n)`` (u a unit): everything after it would repeat earlier work on relabelled
servers (logged ``repeats_earlier``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from topoopt_ilp.core.graph import is_connected
from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.solution import Solution, Topology
from topoopt_ilp.core.strategy import stage_strategies, strategy_to_dict, validate_strategy
from topoopt_ilp.errors import InputError, InstanceError, StartInfeasibleError, UnsupportedError
from topoopt_ilp.evaluation.evaluate import RoutingError, arc_loads
from topoopt_ilp.heuristic import connect_components
from topoopt_ilp.heuristic.design import fitting_start_placement, heuristic_circulant, heuristic_for_placement
from topoopt_ilp.methods.job_alternating import solve_job_alternating
from topoopt_ilp.methods.steps import (
    alternating_result,
    exact_topology_for_placement,
    finalize,
    placement_traffic,
)

__all__ = ["alternating_incumbent", "solve_alternating"]

Progress = Callable[[dict[str, Any]], None]


TOPOLOGY_METHODS = ("auto", "finder", "exact")
#: ``topology_method="auto"`` uses the exact topology step up to this many servers (where it takes
#: seconds: see ``benchmarks/alternating_quality.py``), TopologyFinder above.
AUTO_EXACT_SERVERS = 12
#: Repeats up to relabelling are looked for up to this many servers (the exact topology-routing step's
#: limit): :func:`relabelling_key` tries n phi(n) maps of the n x n traffic (512 at n = 32; a
#: circulant-family instance of 128 servers would need 8,192 maps, a gigabyte at once).
RELABELLING_MAX_SERVERS = 32


def relabelling_key(traffic: Instance) -> bytes:
    """The same bytes for two demands exactly when one is the other with its servers relabelled by
    an affine map ``i -> u*i + r (mod n)`` (u coprime to n): the smallest encoding over all such maps.

    Equal keys mean equal topology optima: the image of a design carries the image traffic equally
    well. Those maps send every coset ``{s, s + n/k, ...}`` to a coset, so AllReduce groups enter as
    member sets with their bytes (TotientPerms' ring candidates of a coset listed in coset order map
    onto the image coset's: stride p becomes stride u*p). A relabelled strategy does not always
    induce the image traffic (its replicas' sample ranges may shift unequally), which is why the
    traffic, not the strategy, is compared. n phi(n) maps of the n x n matrix: see
    :data:`RELABELLING_MAX_SERVERS`.
    """
    n, demand = traffic.n, traffic.demand
    units = np.array([u for u in range(1, n + 1) if math.gcd(u, n) == 1], dtype=np.int64)
    maps = (units[:, None, None] * np.arange(n)[None, None, :] + np.arange(n)[None, :, None]) % n
    maps = maps.reshape(-1, n)  # maps[m, i] = where server i goes
    inverse = np.argsort(maps, axis=1)
    mp = demand.mp_matrix(n)
    images = mp[inverse[:, :, None], inverse[:, None, :]]  # images[m][pi(i), pi(j)] = mp[i, j]
    members = [np.asarray(g.members, dtype=np.int64) for g in demand.allreduce]
    best = None
    for m in range(maps.shape[0]):
        groups = tuple(
            sorted((tuple(sorted(maps[m, g].tolist())), float(b.bytes)) for g, b in zip(members, demand.allreduce))
        )
        key = (groups, images[m].tobytes())
        if best is None or key < best:
            best = key
    return repr(best[0]).encode() + best[1]


def _topology_phase(
    instance: Instance,
    placement: dict | None,
    select: str,
    mode: str,
    seed: int,
    method: str = "finder",
    time_limit_s: float | None = None,
    backend: str = "highs",
) -> Solution:
    """A topology and routing for the traffic that ``placement`` induces: TopologyFinder, or the exact
    topology + routing MILP (``method="exact"``). An instance that asks for a circulant family gets a
    jump set: SelectPermutations' (finder), or the circulant model's optimum for the traffic (exact).

    The exact MILP gets no warm start: the current topology as a start made HiGHS slower and never
    better, steering its root search away from the rounding that finds these optima at once
    (docs/notes/exact-topology-starts.md). Nothing is lost when a step ends worse than the
    topology it replaces: every round restarts from the trajectory's best."""
    if instance.topology_family != "any":
        return _circulant_phase(instance, placement, select, seed, method, time_limit_s, backend)
    if method == "exact":
        return exact_topology_for_placement(instance, placement, time_limit_s=time_limit_s, backend=backend)
    return heuristic_for_placement(instance, placement, select=select, mode=mode, seed=seed)


def _joined_topology(instance: Instance, sol: Solution) -> np.ndarray:
    """``sol``'s links with its components joined by degree-preserving link swaps, giving up the
    least-loaded links (under ``sol``'s routing) whose removal keeps their component connected
    (:func:`~topoopt_ilp.heuristic.connect_components`).

    The placement step needs every pair reachable, while an optimal topology step for traffic that
    leaves servers idle (or falls into separate clusters) may split them off. That design stays a
    candidate as it is; only the placement step works on the joined one."""
    x = sol.topology.matrix.copy()
    load = arc_loads(instance, sol)
    if not instance.cluster.directed:  # a link carries both directions
        x_links, load = x + x.T, load + load.T
    else:
        x_links = x
    per_link = np.divide(load, x_links, out=np.zeros(x.shape), where=x_links > 0)
    connect_components(x, np.random.default_rng(0), directed=instance.cluster.directed, weight=per_link)
    return x


def _circulant_phase(
    instance: Instance,
    placement: dict | None,
    select: str,
    seed: int,
    method: str,
    time_limit_s: float | None,
    backend: str,
) -> Solution:
    """The topology phase of a circulant-family instance (see :func:`_topology_phase`)."""
    from topoopt_ilp.models import ExactOptions
    from topoopt_ilp.models.topology.circulant import solve_circulant

    started = time.perf_counter()
    if method == "exact":
        traffic = placement_traffic(instance, placement)
        if traffic is not None:
            try:
                sol = solve_circulant(
                    traffic, ExactOptions(backend=backend, time_limit_s=time_limit_s, warm_start="heuristic")
                )
            except (InputError, UnsupportedError) as exc:  # e.g. too large for the model: SelectPermutations' set
                sol = Solution(status="error", method="exact", details={"message": str(exc)})
            if sol.has_solution:
                return replace(
                    sol,
                    placement=placement,
                    objective=None,
                    bound=None,
                    gap=None,
                    wall_time_s=time.perf_counter() - started,
                    details={**sol.details, "topology_method": "exact"},
                )
    sol = heuristic_circulant(instance, placement, select=select, mode="paper", seed=seed)
    return replace(sol, wall_time_s=time.perf_counter() - started)  # the exact attempt's time included


def solve_alternating(
    instance: Instance,
    *,
    rounds: int = 5,
    tol: float = 1e-3,
    round_time_limit_s: float = 30.0,
    time_limit_s: float | None = None,
    backend: str = "highs",
    select: str = "geometric",
    mode: str = "paper",
    seed: int = 0,
    topology_method: str = "auto",
    rings: str = "shortest",
    search_moves: int | None = None,
    progress: Progress | None = None,
) -> Solution:
    """Alternate placement and topology optimisation; return the best solution found.

    Parameters
    ----------
    rounds : maximum number of (placement, topology) rounds after the start.
    tol : stop when a round improves the incumbent by less than this fraction.
    round_time_limit_s : time limit of each placement MILP (and of each exact topology MILP).
    topology_method : ``finder`` (TopoOpt's TopologyFinder), ``exact`` (the ``topology_routing``
        MILP for the placement's traffic, at most 32 servers) or ``auto`` (default: exact for a
        general-topology instance of at most :data:`AUTO_EXACT_SERVERS` servers, else finder).
    time_limit_s : overall budget (checked between phases; a phase is not interrupted).
    rings : the placement step's ring policy (``shortest`` or ``coset``; see
        :func:`topoopt_ilp.models.placement.data.ring_strides`). The topology step chooses its own.
    search_moves : the placement step's local search budgeted in moves, not seconds (each step its
        own budget; ``ExactOptions.search_moves``): with limits that do not cut it, the same seed
        gives the same design on any machine. Default: by each step's time limit.
    progress : called with each log entry as it happens (the CLI prints them live).

    A job instance alternates its split, rank-to-server mapping and topology instead
    (:func:`~topoopt_ilp.methods.job_alternating.solve_job_alternating`: ``rounds``, ``tol``,
    ``time_limit_s``, ``select``, ``mode`` and ``seed`` apply; the placement options do not).
    """
    if instance.job is not None:  # a job: its split, rank mapping and topology (methods/job_alternating.py)
        if topology_method == "exact":
            raise InputError(
                "--topology-method exact is for workloads; a job's alternation designs with TopologyFinder"
            )
        return solve_job_alternating(
            instance,
            rounds=rounds,
            tol=tol,
            time_limit_s=time_limit_s,
            select=select,
            mode=mode,
            seed=seed,
            progress=progress,
        )
    from topoopt_ilp.models import ExactOptions
    from topoopt_ilp.models.placement.data import check_ring_policy

    check_ring_policy(rings)  # before anything runs
    ExactOptions(search_moves=search_moves)  # checks it, before anything runs
    topology_method = _checked_topology_method(instance, topology_method)
    run = _Alternation(
        instance,
        rounds=rounds,
        tol=tol,
        round_time_limit_s=round_time_limit_s,
        time_limit_s=time_limit_s,
        backend=backend,
        select=select,
        mode=mode,
        seed=seed,
        topology_method=topology_method,
        rings=rings,
        search_moves=search_moves,
        progress=progress,
    )
    data_parallel_start, stage_start = run.starts()
    out_of_time = run.descend(stage_start, "stages") if stage_start is not None else False
    if not out_of_time:
        run.descend(data_parallel_start, "data-parallel")
    return run.solution()


def _checked_topology_method(instance: Instance, topology_method: str) -> str:
    """The topology step's method for ``instance`` (``auto`` resolved), after the checks that need
    nothing solved: a workload, no fixed topology, a known method, a size the exact step takes."""
    if instance.workload is None:
        raise InputError(
            "--method alternating optimises a workload's placement; this instance has a fixed demand "
            "(use --method heuristic or exact)"
        )
    if instance.fixed_topology is not None:
        raise InputError(
            "the instance fixes the topology: there is nothing to alternate with; use --method exact "
            "(placement on the fixed topology)"
        )
    if topology_method not in TOPOLOGY_METHODS:
        raise InputError(f"unknown topology method {topology_method!r}; choose one of {', '.join(TOPOLOGY_METHODS)}")
    if topology_method == "auto":
        small = instance.topology_family == "any" and instance.n <= AUTO_EXACT_SERVERS
        topology_method = "exact" if small else "finder"
    if topology_method == "exact":
        from topoopt_ilp.models.topology.milp import MAX_SERVERS

        if instance.n > MAX_SERVERS and instance.topology_family == "any":
            raise InputError(
                f"--topology-method exact is for at most {MAX_SERVERS} servers (this instance has "
                f"{instance.n}); use --topology-method finder"
            )
    return topology_method


def _placement_key(placement: dict) -> bytes:
    return repr(tuple(tuple(placement.get(f, ())) for f in ("layer_degree", "layer_start", "block_server"))).encode()


class _Alternation:
    """One run of the alternating method: its options, the log of every phase, the best solution so
    far, and the phases already settled.

    Settled phases are kept by what they were given: a trajectory that reaches a placement (or
    topology) seen before would only repeat that phase's work. Only results that do not depend on
    where the phase started are kept: proven-optimal ones (and TopologyFinder's, which is
    deterministic)."""

    def __init__(
        self,
        instance: Instance,
        *,
        rounds: int,
        tol: float,
        round_time_limit_s: float,
        time_limit_s: float | None,
        backend: str,
        select: str,
        mode: str,
        seed: int,
        topology_method: str,
        rings: str,
        search_moves: int | None,
        progress: Progress | None,
    ) -> None:
        self.instance = instance
        self.rounds, self.tol = rounds, tol
        self.round_time_limit_s, self.time_limit_s = round_time_limit_s, time_limit_s
        self.backend, self.select, self.mode, self.seed = backend, select, mode, seed
        self.topology_method, self.rings, self.search_moves = topology_method, rings, search_moves
        self.progress = progress
        self.started = time.perf_counter()
        self.log: list[dict[str, Any]] = []
        self.best: Solution | None = None
        self.trajectory = ""
        self.settled_topology: dict[bytes, Solution] = {}
        self.settled_placement: dict[bytes, Solution] = {}
        self.settled_traffic: set[bytes] = set()  # relabelling keys of the exact step's proven-optimal inputs

    def record(
        self,
        round_: int,
        phase: str,
        sol: Solution,
        accepted: bool,
        reused: bool = False,
        repeats_earlier: bool = False,
    ) -> None:
        m = sol.metrics
        entry = {
            "round": round_,
            "phase": phase,
            "iteration_time_s": m.get("iteration_time_s"),
            "compute_time_s": m.get("compute_time_s"),
            "comm_time_s": m.get("comm_time_s"),
            "status": sol.status,
            "accepted": accepted,
            "wall_time_s": round(time.perf_counter() - self.started, 3),
        }
        if repeats_earlier:  # not solved: the placement's traffic relabels one solved before; the trajectory ends
            entry.update(
                status="skipped", repeats_earlier=True, iteration_time_s=None, compute_time_s=None, comm_time_s=None
            )
        if sol.details.get("restricted"):  # the placement model was cut to this many coset starts per degree
            entry["restricted_to_starts"] = sol.details.get("max_starts")
        if reused:  # the same phase input was solved to optimality before in this run
            entry["reused"] = True
        if round_ > 0:  # which start's trajectory this round belongs to (both may run)
            entry["trajectory"] = self.trajectory
        self.log.append(entry)
        if self.progress is not None:
            self.progress(entry)

    def topology_step(self, placement: dict, limit: float) -> tuple[Solution | None, bool, bool]:
        """The topology phase for ``placement``, scored by the evaluator; (solution, usable, reused).
        None (exact step only) when the placement's traffic is a relabelled image of traffic solved
        to optimality before: its optimum is the same, so the trajectory has nothing new to find."""
        instance = self.instance
        key = _placement_key(placement)
        if key in self.settled_topology:
            return self.settled_topology[key], True, True
        traffic_key = None
        if self.topology_method == "exact" and instance.n <= RELABELLING_MAX_SERVERS:
            traffic = placement_traffic(instance, placement)
            traffic_key = None if traffic is None else relabelling_key(traffic)
            if traffic_key in self.settled_traffic:
                return None, False, False
        cand = _topology_phase(
            instance, placement, self.select, self.mode, self.seed, self.topology_method, limit, self.backend
        )
        if not cand.has_solution:
            return cand, False, False
        try:
            out = finalize(instance, cand)
        except RoutingError as exc:  # the exact step's routes left a (noise-sized) pair uncarried
            return replace(cand, status="error", details={**cand.details, "error": str(exc)}), False, False
        # (the exact step's own status is at best "feasible": it does not optimise the latency term)
        if self.topology_method == "finder" or cand.details.get("model_status", cand.status) == "optimal":
            self.settled_topology[key] = out
            if traffic_key is not None:
                self.settled_traffic.add(traffic_key)
        return out, True, False

    def placement_step(self, current: Solution, limit: float) -> tuple[Solution, bool]:
        """The placement phase on ``current``'s topology, scored by the evaluator; (solution, reused).
        Raises UnsupportedError as solve_placement does."""
        from topoopt_ilp.models import ExactOptions
        from topoopt_ilp.models.placement.milp import solve_placement

        topology = current.topology
        if not is_connected(topology.matrix):
            topology = Topology(_joined_topology(self.instance, current))
        key = topology.matrix.tobytes()
        if key in self.settled_placement:
            return self.settled_placement[key], True
        options = ExactOptions(
            backend=self.backend,
            time_limit_s=limit,
            warm_start="heuristic",
            rings=self.rings,
            search_moves=self.search_moves,
        )
        # solve_placement itself falls back to fewer coset starts when the full model is too large
        cand = solve_placement(self.instance, options, topology.matrix, start=current.placement)
        if not cand.has_solution:
            return cand, False
        cand = replace(cand, topology=topology)  # the same links; keeps a circulant's jump set
        out = finalize(self.instance, cand, routing="shortest_path")
        if cand.status == "optimal":
            self.settled_placement[key] = out
        return out, False

    def starts(self) -> tuple[Solution, Solution | None]:
        """The data-parallel start, and the best pipeline of data-parallel groups when one beats it.

        Pipelines of data-parallel groups, each with its own topology, are a second start: from the
        data-parallel start alone the alternation stays near it (its placement step only sees that
        start's topology), while the joint optimum is often such a hybrid. When one beats the
        data-parallel start, both trajectories run (within the time budget) and the best result wins.
        The candidates are scored with TopologyFinder (milliseconds each); the exact topology step,
        when asked for, then rebuilds the topology of the best one only."""
        from topoopt_ilp.models.joint.enumeration import strategy_floor

        instance = self.instance
        placement = fitting_start_placement(instance)
        data_parallel_start = finalize(
            instance, _topology_phase(instance, placement, self.select, self.mode, self.seed)
        )
        self.best = data_parallel_start
        self.record(0, "start: data-parallel + TopologyFinder", self.best, True)
        stage_start, stage_label = None, ""
        for st in stage_strategies(instance.workload, instance.n):
            if validate_strategy(instance.workload, instance.n, st):
                continue  # breaks the memory limit
            if strategy_floor(instance, st) >= self.best.objective:
                continue  # no topology makes it better (e.g. activations too large to pipeline)
            cand = finalize(
                instance, _topology_phase(instance, strategy_to_dict(st), self.select, self.mode, self.seed)
            )
            if cand.objective < self.best.objective:
                self.best = stage_start = cand
                stage_label = f"start: stages of {max(st.layer_degree)}-server data-parallel groups + TopologyFinder"
                self.record(0, stage_label, cand, True)
        if stage_start is not None and self.topology_method == "exact":
            cand, usable, _ = self.topology_step(stage_start.placement, self.round_time_limit_s)
            accepted = usable and cand.objective < self.best.objective
            self.record(0, stage_label.replace("TopologyFinder", "exact topology"), cand, accepted)
            if accepted:
                self.best = stage_start = cand
        return data_parallel_start, stage_start

    def descend(self, start: Solution, label: str) -> bool:
        """Rounds from ``start`` (each from this trajectory's best: TopoOpt's reset-to-best); a
        candidate is *accepted* when it beats everything found so far. True when out of time."""
        self.trajectory = label
        local = start
        for r in range(1, self.rounds + 1):
            round_start = local.objective
            current = local
            for phase in ("placement", "topology"):
                remaining = (
                    None if self.time_limit_s is None else self.time_limit_s - (time.perf_counter() - self.started)
                )
                if remaining is not None and remaining <= 0:
                    return True
                limit = self.round_time_limit_s if remaining is None else min(self.round_time_limit_s, remaining)
                if phase == "placement":
                    try:
                        cand, reused = self.placement_step(current, limit)
                    except UnsupportedError as exc:  # a placement model this topology cannot express
                        failed = replace(current, status="error", metrics={}, details={"error": str(exc)})
                        self.record(r, phase, failed, False)
                        continue
                    if not cand.has_solution:
                        self.record(r, phase, cand, False)
                        continue
                else:
                    cand, usable, reused = self.topology_step(current.placement, limit)
                    if cand is None:  # a relabelled repeat: what follows would be too
                        self.record(r, phase, current, False, repeats_earlier=True)
                        return False
                    if not usable:
                        self.record(r, phase, cand, False)
                        continue
                accepted = cand.objective < self.best.objective  # the instance's objective, as the evaluator scores it
                self.record(r, phase, cand, accepted, reused)
                current = cand  # the next phase works on what this one produced
                local = cand if cand.objective < local.objective else local
                if accepted:
                    self.best = cand
            improvement = (round_start - local.objective) / round_start if round_start else 0.0
            if improvement < self.tol:
                break
        return False

    def solution(self) -> Solution:
        """The best solution found, with the log of every phase (``details["rounds"]``)."""
        details = {
            **self.best.details,
            "rounds": self.log,
            "best_from": next(e for e in reversed(self.log) if e["accepted"])["phase"],
            "topology_method": self.topology_method,
        }
        return alternating_result(self.best, self.started, details)


def alternating_incumbent(instance: Instance, options: Any, budget_s: float) -> Solution | None:
    """The incumbent the exact method hands the joint models (``incumbent`` of
    :func:`topoopt_ilp.models.solve_exact`, :data:`topoopt_ilp.models.joint.milp.Incumbent`): this
    decomposition, 3 rounds within ``budget_s`` seconds (a quarter of it, at least 1 s, per placement
    solve), on ``options.backend``. None when TopoOpt's data-parallel start breaks the memory limit."""
    try:
        return solve_alternating(
            instance,
            rounds=3,
            round_time_limit_s=max(1.0, budget_s / 4),
            time_limit_s=budget_s,
            backend=options.backend,
        )
    except (InstanceError, StartInfeasibleError):  # the data-parallel start breaks the memory limit: no incumbent
        return None
