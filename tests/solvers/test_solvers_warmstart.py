"""Warm starts are used, shown per backend on a market-split model where heuristics find nothing.

The solve is stopped early (node limit 0 where the backend has NODE_LIMIT, else a short time
limit): without the start there is no incumbent; with it, the start's objective (or better).
"""

from __future__ import annotations

import numpy as np
import pytest
import solvers_cases as cases

from topoopt_ilp import solvers as S
from topoopt_ilp.solvers import BACKENDS, SolveStatus
from topoopt_ilp.solvers import Capability as C

AVAILABLE = [b for b in S.available_backends() if BACKENDS[b].supports(C.WARM_START)]
MODEL, X_STAR = cases.market_split(4, 30, seed=0)
START_OBJ = MODEL.objective_value(X_STAR)


def _stop_early(backend: str) -> dict:
    if BACKENDS[backend].supports(C.NODE_LIMIT):
        return {"node_limit": 0}
    return {"time_limit_s": 0.5, "isolate": False}


@pytest.mark.parametrize("backend", AVAILABLE)
def test_warm_start_is_used(backend):
    stop = _stop_early(backend)
    cold = S.solve(MODEL, backend, **stop)
    assert cold.status is SolveStatus.NO_SOLUTION, cold.message
    warm = S.solve(MODEL, backend, warm_start=X_STAR, **stop)
    assert warm.status in (SolveStatus.FEASIBLE, SolveStatus.OPTIMAL), warm.message
    assert warm.objective <= START_OBJ + 1e-9  # minimisation: the start or better
    assert MODEL.max_violation(warm.values) < 1e-6


@pytest.mark.parametrize("backend", AVAILABLE)
def test_warm_start_as_mapping(backend):
    start = {j: float(v) for j, v in enumerate(X_STAR)}
    warm = S.solve(MODEL, backend, warm_start=start, **_stop_early(backend))
    assert warm.status in (SolveStatus.FEASIBLE, SolveStatus.OPTIMAL) and warm.objective <= START_OBJ + 1e-9


@pytest.mark.parametrize("backend", AVAILABLE)
def test_partial_warm_start_is_accepted(backend):
    """A partial start (NaN = unset) is passed as partial; the optimum is unchanged."""
    case = cases.knapsack()
    start = np.full(case.model.num_vars, np.nan)
    start[:3] = [1, 0, 1]
    r = S.solve(case.model, backend, warm_start=start)
    assert r.status is SolveStatus.OPTIMAL and r.objective == pytest.approx(case.objective)


def test_highs_completes_a_partial_start():
    """HiGHS completes a partial start with a sub-MIP: fixing all but 4 columns of x* at the root."""
    start = X_STAR.copy()
    start[:4] = np.nan
    r = S.solve(MODEL, "highs", warm_start=start, node_limit=0)
    assert r.status in (SolveStatus.FEASIBLE, SolveStatus.OPTIMAL) and r.objective <= START_OBJ + 1e-9


def test_infeasible_warm_start_does_not_break_the_solve():
    case = cases.knapsack()
    r = S.solve(case.model, "highs", warm_start=np.ones(case.model.num_vars))
    assert r.status is SolveStatus.OPTIMAL and r.objective == pytest.approx(case.objective)
