"""SCIP and CP-SAT backends through OR-Tools MathOpt.

The model goes to MathOpt as a ``ModelProto`` filled from the CSR arrays (the Python
``mathopt.Model`` object API costs seconds per 10^5 terms), and the result is read from the
``SolveResultProto``; no per-variable Python objects are created.

We call ``ortools.math_opt.core.python.solver.solve`` directly and read the ``StatusNotOk`` it
raises ourselves: in OR-Tools 9.15 the wrapper ``mathopt.solve`` masks every INVALID_ARGUMENT
behind ``AttributeError: 'StatusNotOk' object has no attribute 'canonical_code'``.

Status mapping (``TerminationReasonProto``): OPTIMAL -> optimal (checked against the gap),
FEASIBLE -> feasible, NO_SOLUTION_FOUND -> no_solution, INFEASIBLE -> infeasible,
UNBOUNDED -> unbounded, INFEASIBLE_OR_UNBOUNDED (CP-SAT says this for every unbounded model
we tried; SCIP sometimes after presolve) -> decided by a zero-objective re-solve,
IMPRECISE / NUMERICAL_ERROR / OTHER_ERROR -> error.

CP-SAT and fractional data: MathOpt hands CP-SAT a MIP, which CP-SAT converts to its integer
model by scaling each constraint's coefficients to integers (``SatParameters.mip_wanted_precision``,
default 1e-6; ``mip_max_activity_exponent``). Coefficients such as 1/3 or 0.3 were handled
exactly in our probes; a coefficient set that cannot be scaled within the precision is relaxed
by CP-SAT by at most that precision. We never round anything ourselves, and every returned point
is re-checked against the original model (:func:`topoopt_ilp.solvers.result.finish`), so a point
that is feasible only for the scaled model comes back with status ``error``. Continuous columns
are refused before we get here (CP-SAT returned a wrong "optimum" on a continuous flow model).
"""

from __future__ import annotations

import time
from datetime import timedelta

import numpy as np

from topoopt_ilp.solvers.model import LinearModel, Sense
from topoopt_ilp.solvers.options import SolveOptions, progress_due
from topoopt_ilp.solvers.result import (
    INFEASIBLE_OR_UNBOUNDED,
    RawOutcome,
    SolveResult,
    SolveStatus,
    complete,
    finite_or_none,
    relative_gap,
)

__all__ = ["solve_scip", "solve_cpsat", "solve_raw", "to_model_proto", "version"]


def version(solver: str) -> str:
    """e.g. ``"SCIP via OR-Tools 9.15.6755"``."""
    import ortools

    return f"{solver} via OR-Tools {ortools.__version__}"


def to_model_proto(model: LinearModel) -> object:
    """A MathOpt ``ModelProto`` of ``model``, filled from its arrays (ids = column / row index)."""
    from ortools.math_opt import model_pb2

    proto = model_pb2.ModelProto(name=model.name)
    n, m = model.num_vars, model.num_rows
    v = proto.variables
    v.ids.extend(np.arange(n, dtype=np.int64))
    v.lower_bounds.extend(model.col_lower)
    v.upper_bounds.extend(model.col_upper)
    v.integers.extend(model.integrality)
    c = proto.linear_constraints
    c.ids.extend(np.arange(m, dtype=np.int64))
    c.lower_bounds.extend(model.row_lower)
    c.upper_bounds.extend(model.row_upper)
    a = model.matrix
    mat = proto.linear_constraint_matrix  # row-major order is required: CSR with sorted indices
    mat.row_ids.extend(np.repeat(np.arange(m, dtype=np.int64), np.diff(a.indptr)))
    mat.column_ids.extend(a.indices.astype(np.int64))
    mat.coefficients.extend(a.data)
    obj = proto.objective
    obj.maximize = model.sense is Sense.MAXIMIZE
    obj.offset = float(model.objective_offset)
    nz = np.flatnonzero(model.objective)
    obj.linear_coefficients.ids.extend(nz)
    obj.linear_coefficients.values.extend(model.objective[nz])
    return proto


def solve_scip(model: LinearModel, options: SolveOptions, *, deadline: float | None = None) -> SolveResult:
    """Solve with SCIP (MathOpt ``SolverType.GSCIP``)."""
    return complete("scip", model, options, deadline, solve_raw("scip", model, options, deadline=deadline), solve_scip)


def solve_cpsat(model: LinearModel, options: SolveOptions, *, deadline: float | None = None) -> SolveResult:
    """Solve an all-integer model with CP-SAT (MathOpt ``SolverType.CP_SAT``)."""
    return complete(
        "cpsat", model, options, deadline, solve_raw("cpsat", model, options, deadline=deadline), solve_cpsat
    )


def solve_raw(backend: str, model: LinearModel, options: SolveOptions, *, deadline: float | None = None) -> RawOutcome:
    """Run SCIP or CP-SAT and read what it says, before the uniform post-processing."""
    from ortools.math_opt import model_parameters_pb2, result_pb2, solution_pb2
    from ortools.math_opt.core.python import solver as core_solver
    from ortools.math_opt.python import mathopt
    from pybind11_abseil.status import StatusNotOk

    t0 = time.monotonic()
    solver_version = version("SCIP" if backend == "scip" else "CP-SAT")
    solver_type = mathopt.SolverType.GSCIP if backend == "scip" else mathopt.SolverType.CP_SAT
    proto = to_model_proto(model)
    params = mathopt.SolveParameters(
        enable_output=bool(options.verbose),
        relative_gap_tolerance=float(options.rel_gap),
        absolute_gap_tolerance=float(options.abs_gap),
        threads=options.threads,
        random_seed=options.seed,
        node_limit=options.node_limit,
    )
    if deadline is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            return RawOutcome(
                SolveStatus.NO_SOLUTION,
                message="time limit reached before the solve",
                wall_time_s=time.monotonic() - t0,
                solver_version=solver_version,
            )
        params.time_limit = timedelta(seconds=left)
    model_params = model_parameters_pb2.ModelSolveParametersProto()
    start = options.warm_start_vector(model.num_vars)
    if start is not None:
        known = np.flatnonzero(~np.isnan(start))
        hint = model_params.solution_hints.add()
        hint.variable_values.ids.extend(known)
        hint.variable_values.values.extend(start[known])
    lines: list[str] = []
    msg_cb = lines.extend if options.log else None
    registration, callback = mathopt.CallbackRegistration().to_proto(), None
    if options.progress is not None and model.is_mip and backend == "cpsat":
        registration, callback = _progress_callback(options.progress)
    try:
        res = core_solver.solve(
            proto,
            solver_type.value,
            mathopt.StreamableSolverInitArguments().to_proto(),
            params.to_proto(),
            model_params,
            msg_cb,
            registration,
            callback,
            None,
        )
    except StatusNotOk as e:  # read the real message (see the module docstring)
        text = f"MathOpt {backend}: {e.status.message()} (code {e.status.code()})"
        return RawOutcome(
            SolveStatus.ERROR,
            log="\n".join(lines) or None,
            message=text,
            wall_time_s=time.monotonic() - t0,
            solver_version=solver_version,
        )
    log = "\n".join(lines) if options.log else None
    R = result_pb2
    reason = res.termination.reason
    values = None
    for sol in res.solutions:
        ps = sol.primal_solution
        if sol.HasField("primal_solution") and ps.feasibility_status == solution_pb2.SOLUTION_STATUS_FEASIBLE:
            values = np.zeros(model.num_vars)
            values[np.asarray(ps.variable_values.ids, dtype=np.int64)] = np.asarray(ps.variable_values.values)
            break
    bound = float(res.termination.objective_bounds.dual_bound) if model.is_mip else None
    mapping = {
        R.TERMINATION_REASON_OPTIMAL: SolveStatus.OPTIMAL,
        R.TERMINATION_REASON_FEASIBLE: SolveStatus.FEASIBLE,
        R.TERMINATION_REASON_NO_SOLUTION_FOUND: SolveStatus.NO_SOLUTION,
        R.TERMINATION_REASON_INFEASIBLE: SolveStatus.INFEASIBLE,
        R.TERMINATION_REASON_UNBOUNDED: SolveStatus.UNBOUNDED,
        R.TERMINATION_REASON_INFEASIBLE_OR_UNBOUNDED: INFEASIBLE_OR_UNBOUNDED,
    }
    status = mapping.get(reason, SolveStatus.ERROR)
    if status is SolveStatus.ERROR:
        values = None
    detail = res.termination.detail.strip()
    message = f"MathOpt {backend}: {R.TerminationReasonProto.Name(reason)}" + (f" ({detail})" if detail else "")
    return RawOutcome(status, values, bound, log, message, time.monotonic() - t0, solver_version)


def _progress_callback(progress):
    """CP-SAT's callback registration and callback that pass the search's primal and dual bounds to
    ``progress``: at each new solution, and at most every :data:`~.options.PROGRESS_INTERVAL_S` from
    the periodic ``MIP`` event. SCIP gets none: through MathOpt its event handler prints an error from
    C on every solve that registers one (``SCIPcatchEvent does not support variable or row change
    events``, OR-Tools 9.15), which would break the live line and the user's stderr."""
    from ortools.math_opt import callback_pb2

    solution = callback_pb2.CALLBACK_EVENT_MIP_SOLUTION
    registration = callback_pb2.CallbackRegistrationProto(
        request_registration=[solution, callback_pb2.CALLBACK_EVENT_MIP]
    )
    due = progress_due()

    def callback(data):
        if due(data.event == solution):
            incumbent = finite_or_none(data.mip_stats.primal_bound)
            bound = finite_or_none(data.mip_stats.dual_bound)
            progress({"incumbent": incumbent, "bound": bound, "gap": relative_gap(incumbent, bound)})
        return callback_pb2.CallbackResultProto()

    return registration, callback
