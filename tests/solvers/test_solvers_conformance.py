"""One conformance suite over every registered backend: same status, same objective (1e-6).

Backends are skipped by capability (a model with continuous columns needs
CONTINUOUS_VARIABLES), never by name. Every optimum is known independently (solvers_cases).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import solvers_cases as cases
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from topoopt_ilp import solvers as S
from topoopt_ilp.solvers import BACKENDS, SolveStatus
from topoopt_ilp.solvers import Capability as C
from topoopt_ilp.solvers.guard import grace_period

AVAILABLE = S.available_backends()
CASES = {f.__name__: f() for f in cases.ALL_CASES}


def _needs(model: S.LinearModel) -> set[C]:
    need = {C.INTEGER_VARIABLES} if model.is_mip else set()
    return need | ({C.CONTINUOUS_VARIABLES} if model.has_continuous else set())


def _skip_unless(backend: str, *caps: C) -> None:
    missing = [c.name for c in caps if not BACKENDS[backend].supports(c)]
    if missing:
        pytest.skip(f"{backend} lacks {missing}")


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("backend", AVAILABLE)
def test_known_status_and_objective(backend, case):
    c = CASES[case]
    _skip_unless(backend, *_needs(c.model))
    r = S.solve(c.model, backend=backend)
    assert r.status is c.status, r.message
    assert r.backend == backend and r.solver_version and r.wall_time_s > 0
    if c.status is SolveStatus.OPTIMAL:
        assert r.objective == pytest.approx(c.objective, abs=1e-6)
        assert r.values.shape == (c.model.num_vars,)
        assert c.model.max_violation(r.values) < 1e-6
        assert c.model.objective_value(r.values) == pytest.approx(r.objective, abs=1e-9)
        assert r.bound is not None and r.gap is not None and r.gap <= 1e-4
        if not c.model.is_mip:
            assert (r.bound, r.gap) == (r.objective, 0.0)  # an LP optimum is its own bound
    else:
        assert r.values is None and r.objective is None and r.gap is None
    if c.status is SolveStatus.UNBOUNDED:
        assert r.bound == (math.inf if c.model.sense is S.Sense.MAXIMIZE else -math.inf)


def test_weak_case_needs_branching():
    """The LP relaxation of the weak case is not tight: its optimum differs from the MIP's."""
    c = CASES["weak_lp_bound"]
    relaxed = S.LinearModel(**{**vars(c.model), "col_kind": np.zeros(c.model.num_vars, np.uint8)})
    lp = S.solve(relaxed, "highs")
    assert lp.status is SolveStatus.OPTIMAL and lp.objective == pytest.approx(1.5)
    assert lp.objective - c.objective > 0.4


def test_fractional_coefficients_cpsat_not_rounded():
    """CP-SAT gets 1/3 and 0.3 coefficients (scaled by CP-SAT itself) and returns a true optimum."""
    _skip_unless("cpsat", C.INTEGER_VARIABLES)
    b = S.ModelBuilder()
    x = b.add_variables(2, ub=10, kind="integer")
    b.add_constraints([0, 0], x.index, [1 / 3, 0.3], ub=1.0)
    b.set_objective(x.index, [0.7, 0.6], sense="maximize")
    m = b.build()
    r = S.solve(m, "cpsat")
    ref = S.solve(m, "highs")
    assert r.status is SolveStatus.OPTIMAL and r.objective == pytest.approx(ref.objective, abs=1e-9)
    assert m.max_violation(r.values) <= 1e-12


HARD = cases.hard_knapsack()
TINY = CASES["knapsack"].model


@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "isolated"])
@pytest.mark.parametrize("backend", [b for b in AVAILABLE if BACKENDS[b].supports(C.TIME_LIMIT)])
def test_time_limit_is_honoured_and_never_claims_optimal(backend, isolate):
    limit = 1.0
    if isolate:
        S.solve(TINY, backend, isolate=True)  # warm a worker up: its start-up is not what we time
    r = S.solve(HARD, backend, time_limit_s=limit, isolate=isolate)
    margin = grace_period(limit) if isolate else 0.5
    assert r.wall_time_s <= limit + margin, r.message
    assert r.status in (SolveStatus.FEASIBLE, SolveStatus.NO_SOLUTION), r.message
    if r.status is SolveStatus.FEASIBLE:
        assert r.bound is not None and r.bound > r.objective and r.gap > 1e-4
        assert HARD.max_violation(r.values) < 1e-6


def test_cbc_time_limit_pulp_optimal_trap():
    """PuLP reports "Optimal" for a CBC run stopped on time; we report feasible with a real gap."""
    _skip_unless("cbc", C.TIME_LIMIT)
    r = S.solve(HARD, "cbc", time_limit_s=1.0, isolate=False)
    assert "status Optimal, sol_status 2" in r.message  # what PuLP said
    assert r.status is SolveStatus.FEASIBLE and r.gap > 1e-4 and r.bound > r.objective


@pytest.mark.parametrize("backend", [b for b in AVAILABLE if BACKENDS[b].supports(C.NODE_LIMIT)])
def test_node_limit_gives_feasible_or_no_solution(backend):
    model, _ = cases.market_split(4, 30, seed=0)
    r = S.solve(model, backend, node_limit=1)
    assert r.status in (SolveStatus.FEASIBLE, SolveStatus.NO_SOLUTION), r.message


@st.composite
def small_integer_programs(draw):
    """Up to 3 integer columns in [0, 3] and 3 rows with small integer data: enumerable."""
    n = draw(st.integers(1, 3))
    m = draw(st.integers(1, 3))
    coef = st.integers(-3, 3)
    a = np.array(draw(st.lists(st.lists(coef, min_size=n, max_size=n), min_size=m, max_size=m)), float)
    lo = np.array(draw(st.lists(st.one_of(st.just(-np.inf), st.integers(-4, 4)), min_size=m, max_size=m)), float)
    width = np.array(draw(st.lists(st.one_of(st.just(np.inf), st.integers(0, 5)), min_size=m, max_size=m)), float)
    # a finite lower bound gets lo + width (width inf: no upper bound); a free lower bound gets
    # width as the upper bound, or 6 so that no row is free on both sides
    up = np.where(np.isinf(width), 6.0, width)
    finite = np.isfinite(lo)
    up[finite] = lo[finite] + width[finite]
    c = np.array(draw(st.lists(coef, min_size=n, max_size=n)), float)
    sense = draw(st.sampled_from(["minimize", "maximize"]))
    return a, lo, up, c, sense


@settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(small_integer_programs())
def test_random_small_integer_programs_match_enumeration(program):
    a, lo, up, c, sense = program
    m, n = a.shape
    b = S.ModelBuilder()
    x = b.add_variables(n, ub=3, kind="integer")
    r, k = np.divmod(np.arange(m * n), n)
    b.add_constraints(r, x.index[k], a.ravel(), lb=lo, ub=up, count=m)
    b.set_objective(x.index, c, sense=sense)
    model = b.build()
    points = np.array(list(itertools.product(range(4), repeat=n)), float)
    act = points @ a.T
    feasible = points[((act >= lo - 1e-9) & (act <= up + 1e-9)).all(axis=1)]
    for backend in AVAILABLE:
        res = S.solve(model, backend)
        if feasible.size == 0:
            assert res.status is SolveStatus.INFEASIBLE, (backend, res.message)
        else:
            objs = feasible @ c
            best = objs.min() if sense == "minimize" else objs.max()
            assert res.status is SolveStatus.OPTIMAL, (backend, res.message)
            assert res.objective == pytest.approx(best, abs=1e-6), backend


def test_a_model_highs_refuses_is_one_clear_error():
    """A coefficient of 1e300 (a hostile input's numbers, scaled into a model) is beyond what HiGHS
    represents: the solver layer says so as a ModelError (exit 1, one line), never an internal error."""
    from topoopt_ilp.solvers.errors import ModelError

    b = S.ModelBuilder()
    x = b.add_variables(1, ub=10)
    b.add_constraints([0], x.index, [1e300], ub=1.0)
    b.set_objective(x.index, [1.0], sense="maximize")
    with pytest.raises(ModelError, match="HiGHS rejected the model"):
        S.solve(b.build(), "highs")
