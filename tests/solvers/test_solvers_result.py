"""The uniform post-processing every backend's outcome goes through (result.finish, cbc log parsing)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import solvers_cases as cases

from topoopt_ilp.solvers import SolveOptions, SolveStatus
from topoopt_ilp.solvers.cbc import _bound, stopped_on_limit
from topoopt_ilp.solvers.result import finish, relative_gap

KNAP = cases.knapsack()  # maximise, optimum 53


def _feasible_point() -> np.ndarray:
    x = np.zeros(KNAP.model.num_vars)
    x[[3, 6]] = 1  # weights 35 + 24 = 59 <= 60, value 31 + 22 = 53
    return x


def test_claimed_optimum_with_open_gap_is_reported_feasible():
    x = _feasible_point()
    r = finish(KNAP.model, SolveOptions(), status=SolveStatus.OPTIMAL, backend="t", wall_time_s=1, values=x, bound=60.0)
    assert r.status is SolveStatus.FEASIBLE and "claimed optimality" in r.message
    assert r.objective == 53 and r.gap == pytest.approx(7 / 53)
    ok = finish(
        KNAP.model,
        SolveOptions(rel_gap=0.2),
        status=SolveStatus.OPTIMAL,
        backend="t",
        wall_time_s=1,
        values=x,
        bound=60.0,
    )
    assert ok.status is SolveStatus.OPTIMAL


def test_claimed_mip_optimum_without_bound_is_not_trusted():
    r = finish(
        KNAP.model, SolveOptions(), status=SolveStatus.OPTIMAL, backend="t", wall_time_s=1, values=_feasible_point()
    )
    assert r.status is SolveStatus.FEASIBLE and r.bound is None and r.gap is None


def test_lp_optimum_is_its_own_bound():
    lp = cases.pure_lp()
    r = finish(
        lp.model, SolveOptions(), status=SolveStatus.OPTIMAL, backend="t", wall_time_s=1, values=np.array([3.0, 1.0])
    )
    assert (r.status, r.objective, r.bound, r.gap) == (SolveStatus.OPTIMAL, 11.5, 11.5, 0.0)


def test_point_violating_the_model_is_an_error():
    x = np.ones(KNAP.model.num_vars)  # far over capacity
    r = finish(KNAP.model, SolveOptions(), status=SolveStatus.OPTIMAL, backend="t", wall_time_s=1, values=x, bound=53.0)
    assert r.status is SolveStatus.ERROR and "violating the model by" in r.message and r.values is not None


def test_feasible_without_values_is_no_solution():
    r = finish(KNAP.model, SolveOptions(), status=SolveStatus.FEASIBLE, backend="t", wall_time_s=1, bound=60.0)
    assert r.status is SolveStatus.NO_SOLUTION and r.bound == 60.0 and r.objective is None


def test_log_kept_only_when_asked():
    kw = dict(status=SolveStatus.NO_SOLUTION, backend="t", wall_time_s=1, log="text")
    assert finish(KNAP.model, SolveOptions(), **kw).log is None
    assert finish(KNAP.model, SolveOptions(log=True), **kw).log == "text"


def test_relative_gap_definition():
    assert relative_gap(10.0, 12.0) == pytest.approx(0.2)
    assert relative_gap(5.0, 5.0) == 0.0 and relative_gap(0.0, 1.0) == math.inf
    assert relative_gap(None, 1.0) is None and relative_gap(1.0, math.inf) is None


CBC_MAX_LOG = """Cbc0005I Partial search - best objective -7327 (best possible -7355.6459), took 1 iterations
Cbc0005I Partial search - best objective -7327 (best possible -7355.9608), took 2 iterations
Result - Stopped on time limit
Objective value:                7327.00000000
Gap:                            -0.00
"""
CBC_MIN_NO_INCUMBENT_LOG = """Cbc0010I After 100 nodes, 12 on tree, 1e+50 best solution, best possible 4.25 (0.91 seconds)
Result - Stopped on time limit
Lower bound:                    4.5
"""


def test_cbc_bound_from_log_in_model_sense_and_offset():
    maximise = KNAP.model  # maximisation, no offset: internal values are negated
    assert _bound(CBC_MAX_LOG, maximise, 7327.0) == pytest.approx(7355.9608)
    minimise = cases.assignment().model  # minimisation with offset 10, which CBC never sees
    assert _bound(CBC_MIN_NO_INCUMBENT_LOG, minimise, None) == pytest.approx(14.5)
    assert _bound("nothing useful", minimise, None) is None


def test_cbc_log_of_a_stopped_search_is_never_a_proof():
    """CBC may write "Optimal" after its time limit stopped the search (coin-or/Cbc#364): the log decides."""
    assert stopped_on_limit(CBC_MAX_LOG) and stopped_on_limit(CBC_MIN_NO_INCUMBENT_LOG)
    assert stopped_on_limit("Cbc0020I Exiting on maximum time\nResult - Optimal solution found\n")
    assert not stopped_on_limit("Cbc0012I Integer solution of 3\nResult - Optimal solution found\n")
    assert not stopped_on_limit(None) and not stopped_on_limit("")
