"""``progress``: a solve reports its incumbent, bound and gap as it goes where the back-end can
(HiGHS, CP-SAT), in this process and from the guard's worker alike; a back-end that cannot (CBC,
SCIP) never calls it."""

from __future__ import annotations

import numpy as np
import pytest

import topoopt_ilp.solvers as S


def knapsack(n: int = 60, seed: int = 1) -> S.LinearModel:
    """A 0/1 knapsack that HiGHS does not settle at its root (so branch and bound reports)."""
    rng = np.random.default_rng(seed)
    w = rng.integers(10, 100, n).astype(float)
    v = w + rng.integers(-5, 5, n)
    b = S.ModelBuilder(name="knapsack")
    x = b.add_variables(n, lb=0, ub=1, kind="binary", name="x")
    b.add_constraints(np.zeros(n, dtype=int), x.index, w, lb=-np.inf, ub=float(w.sum() // 2), count=1, name="cap")
    b.set_objective(x.index, -v)
    return b.build()


@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "worker"])
@pytest.mark.parametrize("backend", ["highs", "cpsat"])
def test_the_backends_with_callbacks_report_progress(backend, isolate):
    if backend not in S.available_backends():
        pytest.skip(f"{backend} not installed")
    reports = []
    r = S.solve(knapsack(), backend, progress=reports.append, isolate=isolate, time_limit_s=30 if isolate else None)
    assert r.status is S.SolveStatus.OPTIMAL and reports
    assert all(set(p) == {"incumbent", "bound", "gap"} for p in reports)
    incumbents = [p["incumbent"] for p in reports if p["incumbent"] is not None]
    assert incumbents and min(incumbents) >= r.objective - 1e-6  # never better than the optimum (minimised)


def test_progress_is_checked_and_leaves_results_alone():
    with pytest.raises(ValueError, match="progress must be a callable"):
        S.SolveOptions(progress="yes")
    plain = S.solve(knapsack(), "highs")
    watched = S.solve(knapsack(), "highs", progress=lambda report: None)
    assert plain.objective == watched.objective and plain.status is watched.status


@pytest.mark.parametrize("backend", ["cbc", "scip"])
def test_a_backend_that_cannot_report_never_calls(backend, capfd):
    if backend not in S.available_backends():
        pytest.skip(f"{backend} not installed")
    reports = []
    r = S.solve(knapsack(20), backend, progress=reports.append, isolate=False)
    assert r.status is S.SolveStatus.OPTIMAL and reports == []
    assert capfd.readouterr().err == ""  # nor does it write to the terminal (SCIP's handler would, from C)
