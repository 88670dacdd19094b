"""The wall-clock guard: a worker that overstays is killed, a crash is an error, never a hang."""

from __future__ import annotations

import os
import time

import pytest
import solvers_cases as cases

from topoopt_ilp import solvers as S
from topoopt_ilp.solvers import guard

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = cases.knapsack().model


@pytest.fixture
def test_workers(monkeypatch):
    """Workers that can import solvers_cases (the adapters below live there)."""
    guard._shutdown()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
    guard.prestart()
    yield
    guard._shutdown()


def test_overstaying_solver_is_killed(test_workers):
    opts = S.SolveOptions(time_limit_s=0.5)
    t0 = time.monotonic()
    r = guard.solve_isolated("fake", "solvers_cases", "sleepy", MODEL, opts, t0)
    elapsed = time.monotonic() - t0
    assert r.status is S.SolveStatus.NO_SOLUTION and "guard killed" in r.message
    assert 0.5 + guard.grace_period(0.5) - 0.1 <= elapsed <= 0.5 + guard.grace_period(0.5) + 30  # 30: cold start
    assert r.values is None and r.backend == "fake"


def test_crashing_solver_gives_error(test_workers):
    r = guard.solve_isolated("fake", "solvers_cases", "crashing", MODEL, S.SolveOptions(), time.monotonic())
    assert r.status is S.SolveStatus.ERROR and "died" in r.message and "-11" in r.message


def test_exception_in_worker_is_reraised(test_workers):
    with pytest.raises(AttributeError, match="no_such_adapter"):
        guard.solve_isolated("fake", "solvers_cases", "no_such_adapter", MODEL, S.SolveOptions(), time.monotonic())


def test_isolated_solve_matches_in_process():
    for backend in S.available_backends():
        a = S.solve(MODEL, backend, isolate=True)
        b = S.solve(MODEL, backend, isolate=False)
        assert (a.status, a.objective) == (b.status, b.objective) == (S.SolveStatus.OPTIMAL, 53.0)


def test_worker_is_reused():
    S.solve(MODEL, "highs", isolate=True)
    pids = {p.pid for p in guard._own_pool()}
    S.solve(MODEL, "highs", isolate=True)
    assert pids and {p.pid for p in guard._own_pool()} == pids
