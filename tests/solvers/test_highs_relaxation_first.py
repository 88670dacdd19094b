"""The HiGHS adapter settles a small MIP from its LP relaxation when the relaxation's optimal vertex
is integral, and otherwise runs the MIP solver as before (same optima either way)."""

from __future__ import annotations

import numpy as np
import pytest
import solvers_cases as cases

from topoopt_ilp import solvers as S
from topoopt_ilp.solvers import SolveStatus
from topoopt_ilp.solvers import highs as highs_adapter

pytestmark = pytest.mark.skipif("highs" not in S.available_backends(), reason="highspy missing")

RELAXATION_NOTE = "relaxation's optimal vertex is integral"


def test_integral_relaxation_is_the_optimum_and_matches_the_mip(monkeypatch):
    c = cases.assignment()  # totally unimodular: every LP vertex is integral
    r = S.solve(c.model, backend="highs", isolate=False)
    assert r.status is SolveStatus.OPTIMAL and RELAXATION_NOTE in r.message
    assert r.objective == pytest.approx(c.objective, abs=1e-9) and (r.bound, r.gap) == (r.objective, 0.0)
    assert np.array_equal(r.values[c.model.integrality], np.round(r.values[c.model.integrality]))
    monkeypatch.setattr(highs_adapter, "RELAXATION_FIRST_NONZEROS", -1)
    mip = S.solve(c.model, backend="highs", isolate=False)
    assert RELAXATION_NOTE not in mip.message and mip.objective == pytest.approx(r.objective, abs=1e-9)


@pytest.mark.parametrize("warm", [False, True])
def test_fractional_relaxation_falls_through_to_the_mip(warm):
    c = cases.weak_lp_bound()  # its LP optimum is fractional and differs from the MIP's
    start = None
    if warm:  # the warm start must survive the relaxation solve that runs before it is set
        first = S.solve(c.model, backend="highs", isolate=False)
        start = first.values
    r = S.solve(c.model, backend="highs", isolate=False, time_limit_s=30.0, warm_start=start)
    assert r.status is SolveStatus.OPTIMAL and RELAXATION_NOTE not in r.message
    assert r.objective == pytest.approx(c.objective, abs=1e-6)


def test_large_models_skip_the_relaxation(monkeypatch):
    calls = []
    monkeypatch.setattr(highs_adapter, "_integral_relaxation", lambda h, m: calls.append(m) or None)
    c = cases.assignment()
    monkeypatch.setattr(highs_adapter, "RELAXATION_FIRST_NONZEROS", c.model.num_nonzeros - 1)
    S.solve(c.model, backend="highs", isolate=False)
    assert calls == []
    monkeypatch.setattr(highs_adapter, "RELAXATION_FIRST_NONZEROS", c.model.num_nonzeros)
    S.solve(c.model, backend="highs", isolate=False)
    assert len(calls) == 1
