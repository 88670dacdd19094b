"""Registry, capability table and option checks: what a backend cannot honour is an error."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
import solvers_cases as cases

from topoopt_ilp import solvers as S
from topoopt_ilp.solvers import BACKENDS, BackendCapabilityError
from topoopt_ilp.solvers import Capability as C

AVAILABLE = S.available_backends()

# The table documented in solvers/registry.py, restated so a change to either is noticed.
EXPECTED = {
    "highs": {
        C.CONTINUOUS_VARIABLES,
        C.INTEGER_VARIABLES,
        C.TIME_LIMIT,
        C.GAP,
        C.THREADS,
        C.SEED,
        C.WARM_START,
        C.NODE_LIMIT,
        C.LOG,
        C.EXPORT,
        C.NATIVE_OPTIONS,
    },
    "scip": {
        C.CONTINUOUS_VARIABLES,
        C.INTEGER_VARIABLES,
        C.TIME_LIMIT,
        C.GAP,
        C.SEED,
        C.WARM_START,
        C.NODE_LIMIT,
        C.LOG,
    },
    "cpsat": {C.INTEGER_VARIABLES, C.TIME_LIMIT, C.GAP, C.THREADS, C.SEED, C.WARM_START, C.LOG},
    "cbc": {
        C.CONTINUOUS_VARIABLES,
        C.INTEGER_VARIABLES,
        C.TIME_LIMIT,
        C.GAP,
        C.THREADS,
        C.SEED,
        C.WARM_START,
        C.NODE_LIMIT,
        C.LOG,
        C.NATIVE_OPTIONS,
    },
}


def test_capability_table():
    assert {name: set(info.capabilities) for name, info in BACKENDS.items()} == EXPECTED
    assert BACKENDS["cpsat"].supports("warm_start") and not BACKENDS["cpsat"].supports(C.CONTINUOUS_VARIABLES)
    assert S.backends_supporting(C.NODE_LIMIT, C.CONTINUOUS_VARIABLES) == ["highs", "scip", "cbc"]


def test_all_backends_installed_here():
    assert AVAILABLE == ["highs", "scip", "cpsat", "cbc"]


def test_unknown_backend_is_a_value_error_listing_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown solver backend 'gurobi'; known backends: cbc, cpsat, highs, scip$"):
        S.get_backend("gurobi")
    with pytest.raises(S.UnknownBackendError):
        S.solve(cases.knapsack().model, backend="glpk")


def test_missing_package_names_what_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "highspy" else real(name, *a))
    assert "highs" not in S.available_backends()
    with pytest.raises(S.BackendUnavailableError, match="pip install highspy"):
        S.solve(cases.knapsack().model, backend="highs")


def test_import_probes_no_solver():
    code = (
        "import sys, topoopt_ilp.solvers; print(sorted(m for m in ('highspy', 'ortools', 'pulp') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("backend", [b for b in AVAILABLE if not BACKENDS[b].supports(C.CONTINUOUS_VARIABLES)])
def test_continuous_model_refused_not_rounded(backend):
    with pytest.raises(BackendCapabilityError, match=r"continuous columns \(first: flow\[0\]\).*do not round"):
        S.solve(cases.fixed_charge_flow().model, backend=backend)


@pytest.mark.parametrize(
    "option, cap",
    [
        ({"threads": 2}, C.THREADS),
        ({"node_limit": 5}, C.NODE_LIMIT),
        ({"warm_start": {0: 1.0}}, C.WARM_START),
        ({"seed": 3}, C.SEED),
        ({"log": True}, C.LOG),
        ({"time_limit_s": 5}, C.TIME_LIMIT),
        ({"rel_gap": 0.1}, C.GAP),
    ],
)
@pytest.mark.parametrize("backend", AVAILABLE)
def test_unsupported_option_is_an_error(backend, option, cap):
    """Every backend lacking a capability refuses the option asking for it; the others accept it."""
    model = cases.knapsack().model
    if BACKENDS[backend].supports(cap):
        BACKENDS[backend].check(model, S.SolveOptions(**option))
    else:
        with pytest.raises(BackendCapabilityError, match=cap.name):
            S.solve(model, backend=backend, **option)


def test_one_thread_is_accepted_everywhere():
    for backend in AVAILABLE:
        BACKENDS[backend].check(cases.knapsack().model, S.SolveOptions(threads=1))


@pytest.mark.parametrize("backend", AVAILABLE)
def test_time_limit_zero_returns_no_solution_without_solving(backend):
    r = S.solve(cases.knapsack().model, backend=backend, time_limit_s=0)
    assert r.status is S.SolveStatus.NO_SOLUTION and r.values is None and r.objective is None
    assert "not called" in r.message and r.wall_time_s < 0.5


def test_unknown_option_name_is_a_type_error():
    with pytest.raises(TypeError, match="timelimit"):
        S.solve(cases.knapsack().model, timelimit=3)


def test_options_object_and_keywords_combine():
    base = S.SolveOptions(rel_gap=0.5)
    r = S.solve(cases.knapsack().model, "highs", base, log=True)
    # rel_gap=0.5 reached HiGHS: it stops at the root with a bound above the incumbent, and
    # that is "optimal" within the requested gap
    assert r.status is S.SolveStatus.OPTIMAL and r.log and 0 < r.gap <= 0.5 and r.bound > r.objective
    assert S.solve(cases.knapsack().model, "highs", base).log is None


@pytest.mark.parametrize("backend", [b for b in AVAILABLE if BACKENDS[b].supports(C.LOG)])
def test_log_captured_only_on_request(backend):
    model = cases.general_integer().model
    with_log = S.solve(model, backend, log=True)
    assert with_log.log and len(with_log.log) > 100
    assert S.solve(model, backend).log is None


@pytest.mark.parametrize("backend", [b for b in AVAILABLE if BACKENDS[b].supports(C.SEED)])
def test_seed_and_threads_are_passed(backend):
    threads = 2 if BACKENDS[backend].supports(C.THREADS) else 1
    r = S.solve(cases.knapsack().model, backend, seed=7, threads=threads, log=True)
    assert r.status is S.SolveStatus.OPTIMAL and r.objective == cases.knapsack().objective
    if backend == "cbc":
        assert "-randomCbcSeed 7" in r.log and "-threads 2" in r.log
