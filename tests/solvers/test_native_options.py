"""Native solver parameters: passed through to the backend that runs, checked, and refused clearly."""

from __future__ import annotations

import pytest
import solvers_cases as cases

from topoopt_ilp import solvers as S
from topoopt_ilp.solvers import BACKENDS, BackendCapabilityError, NativeOptionError
from topoopt_ilp.solvers import Capability as C

NATIVE = [b for b in S.available_backends() if BACKENDS[b].supports(C.NATIVE_OPTIONS)]
# A parameter each backend understands, and what it changes in the log (HiGHS: "Solving LP without
# presolve"; CBC echoes its command line).
VISIBLE = {"highs": ({"presolve": "off"}, "without presolve"), "cbc": ({"cuts": "off"}, "-cuts off")}


@pytest.mark.parametrize("isolate", [False, True])
@pytest.mark.parametrize("backend", NATIVE)
def test_native_parameters_reach_the_solver(backend, isolate):
    params, trace = VISIBLE[backend]
    case = cases.general_integer()
    r = S.solve(case.model, backend, native_options={backend: params}, log=True, isolate=isolate)
    assert r.status is S.SolveStatus.OPTIMAL and r.objective == pytest.approx(case.objective)
    assert trace in r.log


@pytest.mark.parametrize("backend", NATIVE)
def test_a_rejected_parameter_is_an_error_not_ignored(backend):
    with pytest.raises(NativeOptionError, match="rejected option.*no_such_parameter"):
        S.solve(cases.knapsack().model, backend, native_options={backend: {"no_such_parameter": 1}})


def test_other_backends_entries_are_not_read():
    """One call may carry tuned settings for several backends: only the running one's are used."""
    r = S.solve(cases.knapsack().model, "highs", native_options={"cbc": {"no_such_parameter": 1}})
    assert r.status is S.SolveStatus.OPTIMAL


@pytest.mark.parametrize("backend", [b for b in S.available_backends() if b not in NATIVE])
def test_backend_without_the_capability_refuses(backend):
    with pytest.raises(BackendCapabilityError, match="NATIVE_OPTIONS"):
        S.solve(cases.knapsack().model, backend, native_options={backend: {"x": 1}})


@pytest.mark.parametrize(
    "given, match",
    [
        ({"gurobi": {"Presolve": 0}}, r"unknown backend\(s\) \['gurobi'\]"),
        ({"highs": {"presolve": [1]}}, "values bool, int, float or str"),
        ({"highs": "presolve=off"}, "must be a mapping"),
        ("highs.presolve=off", "must map backend names"),
    ],
)
def test_malformed_native_options(given, match):
    with pytest.raises(ValueError, match=match):
        S.solve(cases.knapsack().model, "highs", native_options=given)


def test_options_keep_a_private_copy():
    params = {"presolve": "off"}
    opts = S.SolveOptions(native_options={"highs": params})
    params["presolve"] = "bogus"
    assert opts.native("highs") == {"presolve": "off"} and opts.native("cbc") == {}


@pytest.mark.parametrize(
    "backend,name",
    [
        ("highs", "time_limit"),
        ("highs", "TIME_LIMIT"),
        ("highs", "solve_relaxation"),
        ("cbc", "sec"),
        ("cbc", "seconds"),
    ],
)
def test_a_parameter_the_standard_options_set_is_refused(backend, name):
    # Found by a user: highs.time_limit=100 was silently overridden by --time-limit (the adapter
    # sets the limit from the deadline after the native options).
    with pytest.raises(NativeOptionError, match="set by the standard option"):
        S.SolveOptions(native_options={backend: {name: 1}})
