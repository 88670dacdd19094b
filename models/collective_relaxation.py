"""The LP relaxation of the collective schedule model as a fast lower bound (docs/guide/collectives.md).

The model of :func:`topoopt_ilp.models.collective.build_dissemination_model` over T steps, with
every step used (y[t] = 1) and every column continuous: chunks may be split and forwarded in
fractions (a fluid schedule), each fraction still store-and-forward and within the links' counts
per step. A T whose relaxation has no solution has no schedule either, and a schedule that ends
within T steps is one of the model over T steps, so the smallest T whose relaxation is feasible
bounds every schedule's finish step from below. Feasibility grows with T (a fluid schedule of T
steps is one of T + 1 steps that sends nothing in the last), so the smallest T is found by
bisection between the model's own floor (below which the relaxation is infeasible too: its hop,
in-link and volume counts hold for fractions) and the greedy schedule's finish step (feasible).

ReduceScatter (and AllReduce, whose every schedule is a ReduceScatter schedule) is bounded by the
AllGather on the reversed topology, as the model proves it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from topoopt_ilp.core.collective import REDUCTIONS, Collective, LinkModel
from topoopt_ilp.core.solution import Topology
from topoopt_ilp.errors import InputError
from topoopt_ilp.heuristic.collective import chunk_demand, greedy_schedule, hop_distances, trimmed
from topoopt_ilp.models.collective import build_dissemination_model, floor_steps
from topoopt_ilp.models.common import ExactOptions, check_backend, run_model, solution_status

__all__ = ["RELAXATION_KIND", "RelaxationBound", "relaxation_bound"]

#: The name the bound carries where it is reported.
RELAXATION_KIND = "lp relaxation"


@dataclass(frozen=True)
class RelaxationBound:
    """``steps``: the smallest horizon whose relaxation is feasible (every smaller one proven
    infeasible), ``seconds`` that times the step length; ``floor_steps``: the model's own floor,
    where the search began; ``settled``: False when a solve ended at its limit undecided (``steps``
    is then the last horizon proven); ``solves`` and ``solve_s``: the LPs solved and the wall time."""

    kind: str
    steps: int
    seconds: float
    floor_steps: int
    settled: bool
    solves: int
    solve_s: float


def _feasible(matrix: np.ndarray, origin: np.ndarray, sinks: np.ndarray, horizon: int, options: ExactOptions):
    """True, False, or None (undecided at the limit) for the relaxation over ``horizon`` steps."""
    dm = build_dissemination_model(matrix, origin, sinks, horizon, integral_holds=False)
    lower = np.array(dm.model.col_lower)
    lower[dm.used.index] = 1.0
    lp = replace(dm.model, col_kind=np.zeros_like(dm.model.col_kind), col_lower=lower, name="collective_relaxation")
    status = solution_status(run_model(lp, options))
    return {"optimal": True, "feasible": True, "infeasible": False}.get(status)


def relaxation_bound(
    topology: Topology, collective: Collective, link: LinkModel, *, options: ExactOptions | None = None
) -> RelaxationBound:
    """The LP-relaxation bound (module docstring) of ``collective`` on ``topology``; ``options``:
    the LP back-end (HiGHS by default) and a time limit per LP."""
    started = time.perf_counter()
    options = options or ExactOptions()
    check_backend(options, continuous=True)
    matrix = np.asarray(topology.matrix)
    if collective.kind in REDUCTIONS:
        matrix = matrix.T
    outside = [s for s in collective.servers if s >= topology.n]
    if outside:
        raise InputError(f"server {outside[0]} is not in the topology", field="collective.servers")
    origin, sinks = chunk_demand(collective, topology.n)
    sc, sv = np.nonzero(sinks)
    if not np.isfinite(hop_distances(matrix)[origin[sc], sv]).all():
        raise InputError("the topology does not connect the collective's servers", field="collective.servers")
    low = floor_steps(matrix, origin, sinks)
    high = max(s.step for s in trimmed(greedy_schedule(matrix, origin, sinks), origin, sinks)) if low else 0
    floor, solves, settled = low, 0, True
    while low < high:  # low: proven (infeasible below it); high: feasible
        mid = (low + high) // 2
        answer = _feasible(matrix, origin, sinks, mid, options)
        solves += 1
        if answer is None:
            settled = False
            break
        low, high = (low, mid) if answer else (mid + 1, high)
    step_s = link.step_s(collective.chunk_bytes)
    return RelaxationBound(RELAXATION_KIND, low, low * step_s, floor, settled, solves, time.perf_counter() - started)
