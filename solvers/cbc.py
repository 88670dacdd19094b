"""CBC backend through PuLP (3.3: bundled ``PULP_CBC_CMD``; 4.x: ``COIN_CMD`` with ``pulp[cbc]``).

The adapter is thin on purpose: it builds PuLP objects from (variable, coefficient) pairs row by
row of the CSR matrix (the fast construction per coin-or/pulp#749/#750), runs CBC, and reads back.

How a CBC status is read (PuLP calls a time-limited run "Optimal"): PuLP parses CBC's solution
file; its first line is ``Optimal ...`` for a proof and ``Stopped on time - objective value X`` /
``Stopped on iterations ...`` after a limit. PuLP turns both into ``LpStatusOptimal`` but sets
``sol_status`` to ``LpSolutionOptimal`` (1) only for a proof and to ``LpSolutionIntegerFeasible`` (2)
after a limit, so ``sol_status`` decides between optimal and feasible here - together with the
log, which says when a limit stopped a run CBC still calls optimal (:func:`stopped_on_limit`). The dual bound is read
from CBC's log (always written to a temporary file): ``Lower bound:`` when present, else the
last ``best possible X`` (CBC's internal, minimisation-sense objective: negated for a maximisation).
A run CBC proves optimal prints no bound; it is then the objective (proven within ``rel_gap``).

Other statuses: ``Infeasible`` / ``Integer infeasible`` -> infeasible; ``Unbounded`` -> unbounded
for an LP, but for a MIP CBC says so when the *LP relaxation* is unbounded ("Linear relaxation
unbounded"), which does not prove the MIP feasible, so it is settled by a zero-objective re-solve;
``Stopped`` without an objective -> no_solution.

Warm starts: values are set with ``LpVariable.setInitialValue`` and passed with ``warmStart=True``
(CBC ``-mips FILE``). PuLP writes a 0 for every variable without an initial value, which would turn
a partial start into a full start with zeros; our subclass writes only the given values, so CBC
completes a partial start itself. CBC's mipstart is best effort (coin-or/Cbc#282, #786).

``verbose``: CBC's output goes to the log file PuLP is given, so it is printed after the run.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
import warnings
from typing import Any

import numpy as np

from topoopt_ilp.solvers.errors import NativeOptionError
from topoopt_ilp.solvers.model import LinearModel, Sense
from topoopt_ilp.solvers.options import SolveOptions
from topoopt_ilp.solvers.result import INFEASIBLE_OR_UNBOUNDED, RawOutcome, SolveResult, SolveStatus, complete

__all__ = ["solve", "solve_raw", "build_problem", "stopped_on_limit", "version"]
_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
_BEST_POSSIBLE = re.compile(r"best possible " + _NUMBER)
_PARTIAL = re.compile(r"best objective " + _NUMBER + r" \(best possible " + _NUMBER + r"\)")
_LOWER_BOUND = re.compile(r"^Lower bound:\s*" + _NUMBER, re.MULTILINE)
_VERSION = re.compile(r"^Version:\s*(\S+)", re.MULTILINE)
_solver_class: Any = None


def version(log: str | None = None) -> str:
    """``"CBC <version> via PuLP <version>"`` (the CBC version is read from a log when given)."""
    import pulp

    cbc = _VERSION.search(log or "")
    return f"CBC {cbc.group(1) if cbc else '?'} via PuLP {pulp.__version__}"


def _cbc_class() -> Any:
    """PuLP's CBC command class, with the partial-warm-start fix (built once, lazily)."""
    global _solver_class
    if _solver_class is None:
        import pulp

        base = getattr(pulp, "PULP_CBC_CMD", None) or pulp.COIN_CMD  # PuLP 4 has no bundled CBC

        class _CBC(base):  # type: ignore[misc, valid-type]
            def writesol(self, filename, lp, vs, variablesNames, constraintsNames):  # noqa: N803
                # Same format as PuLP's, minus the zeros it writes for variables without a value.
                lines = ["Stopped on time - objective value 0\n"]
                for i, (name, mps_name) in enumerate(variablesNames.items()):
                    value = self._start.get(name)
                    if value is not None:
                        lines.append(f"{i:>7} {mps_name} {value:>15} {0:>23}\n")
                with open(filename, "w") as f:
                    f.writelines(lines)
                return True

        _solver_class = _CBC
    return _solver_class


def _make_solver(**kwargs: Any) -> Any:
    cls = _cbc_class()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # PuLP 3.3 announces the 4.0 API change
        try:
            return cls(_skip_v4_deprecation=True, **kwargs)
        except TypeError:  # PuLP versions without that keyword
            return cls(**kwargs)


def build_problem(model: LinearModel) -> tuple[Any, list[Any]]:
    """A ``pulp.LpProblem`` of ``model`` and its variables (variable ``j`` is named ``x{j}``).

    Ranged rows become two constraints; rows without bounds are dropped.
    """
    import pulp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        prob = pulp.LpProblem("m", pulp.LpMaximize if model.sense is Sense.MAXIMIZE else pulp.LpMinimize)
        lo = [None if v == -np.inf else v for v in model.col_lower.tolist()]
        hi = [None if v == np.inf else v for v in model.col_upper.tolist()]
        cats = np.where(model.integrality, pulp.LpInteger, pulp.LpContinuous).tolist()
        xs = [pulp.LpVariable(f"x{j}", lo[j], hi[j], cats[j]) for j in range(model.num_vars)]
    nz = np.flatnonzero(model.objective)
    prob.setObjective(
        pulp.LpAffineExpression(
            zip([xs[j] for j in nz.tolist()], model.objective[nz].tolist()), constant=float(model.objective_offset)
        )
    )
    a = model.matrix
    ptr, cols, vals = a.indptr.tolist(), a.indices.tolist(), a.data.tolist()
    rlo, rhi = model.row_lower.tolist(), model.row_upper.tolist()
    EQ, GE, LE = pulp.LpConstraintEQ, pulp.LpConstraintGE, pulp.LpConstraintLE
    for i in range(model.num_rows):
        s, e = ptr[i], ptr[i + 1]
        if s == e:
            continue  # empty rows are checked by the caller
        pairs = list(zip([xs[k] for k in cols[s:e]], vals[s:e]))
        if rlo[i] == rhi[i]:
            prob.addConstraint(pulp.LpConstraint(pulp.LpAffineExpression(pairs), EQ, f"r{i}", rlo[i]))
            continue
        if rlo[i] != -np.inf:
            prob.addConstraint(pulp.LpConstraint(pulp.LpAffineExpression(pairs), GE, f"r{i}", rlo[i]))
        if rhi[i] != np.inf:
            prob.addConstraint(pulp.LpConstraint(pulp.LpAffineExpression(pairs), LE, f"u{i}", rhi[i]))
    return prob, xs


def solve(model: LinearModel, options: SolveOptions, *, deadline: float | None = None) -> SolveResult:
    """Solve ``model`` with CBC. Capabilities are checked by the registry, not here."""
    return complete("cbc", model, options, deadline, solve_raw(model, options, deadline=deadline), solve)


def solve_raw(model: LinearModel, options: SolveOptions, *, deadline: float | None = None) -> RawOutcome:
    """Build the PuLP problem, run CBC and read what it says, before the uniform post-processing."""
    import pulp

    t0 = time.monotonic()
    a = model.matrix
    empty = np.flatnonzero(np.diff(a.indptr) == 0)
    if ((model.row_lower[empty] > 0) | (model.row_upper[empty] < 0)).any():
        return RawOutcome(
            SolveStatus.INFEASIBLE,
            message="an empty row excludes 0",
            wall_time_s=time.monotonic() - t0,
            solver_version=version(),
        )
    prob, xs = build_problem(model)
    start = options.warm_start_vector(model.num_vars)
    given: dict[str, float] = {}
    if start is not None:
        for j in np.flatnonzero(~np.isnan(start)).tolist():
            xs[j].setInitialValue(float(start[j]), check=False)
            given[xs[j].name] = float(start[j])
    extra: list[str] = []
    if options.seed is not None:
        extra.append(f"randomCbcSeed {int(options.seed)}")
    extra += [f"{name} {value}" for name, value in options.native("cbc").items()]
    fd, log_path = tempfile.mkstemp(prefix="cbc-", suffix=".log")
    os.close(fd)
    try:
        kwargs: dict[str, Any] = dict(
            mip=model.is_mip,
            msg=False,
            gapRel=float(options.rel_gap),
            gapAbs=float(options.abs_gap),
            threads=options.threads,
            maxNodes=options.node_limit,
            warmStart=start is not None,
            options=extra,
            logPath=log_path,
        )
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                return RawOutcome(
                    SolveStatus.NO_SOLUTION,
                    message="time limit reached before the solve",
                    wall_time_s=time.monotonic() - t0,
                    solver_version=version(),
                )
            kwargs["timeLimit"] = max(0.01, round(left, 2))  # CBC reads "-sec 0" as "no limit"
        solver = _make_solver(**kwargs)
        solver._start = given
        try:
            prob.solve(solver)
        except pulp.PulpSolverError as exc:
            log = _read(log_path)
            return RawOutcome(
                SolveStatus.ERROR,
                log=log,
                message=f"CBC failed: {exc}",
                wall_time_s=time.monotonic() - t0,
                solver_version=version(log),
            )
        log = _read(log_path)
    finally:
        os.unlink(log_path)
    # CBC reports an unknown parameter in its log and carries on; fail as HiGHS does instead.
    rejected = [name for name in options.native("cbc") if f"No match for {name} " in (log or "")]
    if rejected:
        raise NativeOptionError(f"CBC rejected option(s) {rejected} (see 'cbc -?' for its parameters)")
    if options.verbose:
        print(log)
    ps, ss = prob.status, prob.sol_status
    values = None
    if ps == pulp.LpStatusOptimal:
        raw = [v.varValue for v in xs]
        values = np.array([np.nan if r is None else r for r in raw], dtype=np.float64)
        # PuLP leaves out columns in no row and not in the objective: any bound-feasible value is
        # optimal for them, take the one nearest 0 (rounded up to an integer for integer columns)
        unused = np.isnan(values)
        fill = np.clip(0.0, model.col_lower[unused], model.col_upper[unused])
        ints = model.integrality[unused]
        fill[ints] = np.ceil(fill[ints] - 1e-9)
        values[unused] = fill
    objective = model.objective_value(values) if values is not None else None
    bound = _bound(log, model, objective) if model.is_mip else None
    message = f"CBC via PuLP: status {pulp.LpStatus.get(ps, ps)}, sol_status {ss}"
    if ps == pulp.LpStatusOptimal and ss == pulp.LpSolutionOptimal and not stopped_on_limit(log):
        status = SolveStatus.OPTIMAL
        if model.is_mip and values is not None:
            bound = model.objective_value(values)  # CBC prints no bound for a proven run
    elif ps == pulp.LpStatusOptimal:
        status = SolveStatus.FEASIBLE  # "Stopped on time/nodes - objective value X", or a false proof
    elif ps == pulp.LpStatusInfeasible:
        status = SolveStatus.INFEASIBLE
    elif ps == pulp.LpStatusUnbounded:
        status = INFEASIBLE_OR_UNBOUNDED if model.is_mip else SolveStatus.UNBOUNDED
    elif ps == pulp.LpStatusNotSolved:
        status = SolveStatus.NO_SOLUTION
    else:
        status = SolveStatus.ERROR
    return RawOutcome(status, values, bound, log, message, time.monotonic() - t0, version(log))


def stopped_on_limit(log: str | None) -> bool:
    """Did CBC's log say the search stopped on a limit? CBC may still call the run optimal: its
    solution file says "Optimal" when an incumbent is saved after the time limit stopped the
    search (coin-or/Cbc#364; seen here once in 15 runs of mix-8 with 5 s under load, 0.11 % above
    the optimum with a 0.01 % gap requested), so a proof needs the log's silence too."""
    return bool(log) and any(flag in log for flag in ("Exiting on maximum time", "Partial search", "Result - Stopped"))


def _bound(log: str, model: LinearModel, objective: float | None) -> float | None:
    """CBC's last dual bound in the model's own sense and offset (None when the log has none)."""
    sign = -1.0 if model.sense is Sense.MAXIMIZE else 1.0  # CBC minimises; "-max" negates internally
    pairs = _PARTIAL.findall(log)
    if pairs and objective is not None:
        # "best objective A (best possible B)": internal values; their difference carries over
        # to our objective, which sidesteps how the offset was passed to CBC.
        best, possible = (float(v) for v in pairs[-1])
        return objective + sign * (possible - best)
    m = _LOWER_BOUND.search(log)
    if m and sign > 0:
        return float(m.group(1)) + model.objective_offset
    found = _BEST_POSSIBLE.findall(log)
    return sign * float(found[-1]) + model.objective_offset if found else None


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()
