"""The outcome of a solve, the same for every backend."""

from __future__ import annotations

import dataclasses
import enum
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from topoopt_ilp.solvers.model import LinearModel, Sense
from topoopt_ilp.solvers.options import SolveOptions

__all__ = [
    "SolveStatus",
    "SolveResult",
    "RawOutcome",
    "INFEASIBLE_OR_UNBOUNDED",
    "relative_gap",
    "finite_or_none",
    "finish",
    "complete",
]

#: Raw status of a solver that proved "infeasible or unbounded" without saying which
#: (settled by :func:`complete`, never shown to users).
INFEASIBLE_OR_UNBOUNDED = "infeasible_or_unbounded"


class SolveStatus(str, enum.Enum):
    """Status of a solve.

    ``OPTIMAL``: proven within the requested gap. ``FEASIBLE``: a limit (time, nodes) was hit
    with an incumbent, or the solver claimed optimality without the gap to back it.
    ``INFEASIBLE`` / ``UNBOUNDED``: proven. ``NO_SOLUTION``: a limit was hit without an incumbent
    (also: time limit 0, the wall-clock guard killed the solver, or infeasible-vs-unbounded could
    not be decided in time). ``ERROR``: the solver failed, crashed, or returned a point that
    violates the model.
    """

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    NO_SOLUTION = "no_solution"
    ERROR = "error"


@dataclass(frozen=True, eq=False)
class SolveResult:
    """Outcome of one solve.

    Attributes
    ----------
    status : SolveStatus
    objective : float or None
        Objective of ``values`` (offset included), None without a solution.
    bound : float or None
        Best proven dual bound (equal to ``objective`` for an LP solved to optimality).
    gap : float or None
        ``|objective - bound| / |objective|`` (0 when they are equal, inf when the objective is 0
        and the bound is not); None when either is missing.
    wall_time_s : float
        Wall-clock time of the whole call, model translation included.
    values : numpy array or None
        Column values indexed like the model's columns; None without a solution.
    backend, solver_version : str
    log : str or None
        Solver log, only when ``SolveOptions.log`` asked for it.
    message : str
        Human-readable detail (the solver's own termination text, downgrades, guard kills).
    """

    status: SolveStatus
    objective: float | None
    bound: float | None
    gap: float | None
    wall_time_s: float
    values: np.ndarray | None
    backend: str
    solver_version: str = ""
    log: str | None = None
    message: str = ""

    @property
    def has_solution(self) -> bool:
        """True when ``values`` holds a (primal feasible) assignment."""
        return self.values is not None

    @property
    def is_optimal(self) -> bool:
        """True for a proven optimum."""
        return self.status is SolveStatus.OPTIMAL


@dataclass(frozen=True, eq=False)
class RawOutcome:
    """What an adapter read from its solver, before the uniform post-processing of :func:`finish`."""

    status: SolveStatus | str
    values: np.ndarray | None = None
    bound: float | None = None
    log: str | None = None
    message: str = ""
    wall_time_s: float = 0.0
    solver_version: str = ""


def finite_or_none(value: float) -> float | None:
    """``value`` as a float, or None where a back-end reports an infinite or undefined bound."""
    return float(value) if math.isfinite(value) else None


def relative_gap(objective: float | None, bound: float | None) -> float | None:
    """``|objective - bound| / |objective|``; 0 when equal, inf for a zero objective; None if undefined."""
    if objective is None or bound is None or not (math.isfinite(objective) and math.isfinite(bound)):
        return None
    diff = abs(objective - bound)
    if diff == 0.0:
        return 0.0
    return diff / abs(objective) if objective != 0.0 else math.inf


def _gap_closed(objective: float, bound: float, options: SolveOptions) -> bool:
    diff = abs(objective - bound)
    # Solvers measure the gap with different denominators (SCIP: min(|p|,|d|), HiGHS: |p|);
    # the larger denominator plus a relative epsilon avoids downgrading their honest optima.
    scale = max(abs(objective), abs(bound))
    return diff <= options.abs_gap * (1 + 1e-9) + 1e-9 or diff <= options.rel_gap * scale * (1 + 1e-9) + 1e-9


def _feasibility_tolerance(model: LinearModel) -> float:
    # Solvers check feasibility on scaled models with ~1e-6 tolerances; scale ours by the
    # magnitude of the bounds so that large right-hand sides do not produce false alarms.
    finite = [a[np.isfinite(a)] for a in (model.row_lower, model.row_upper)]
    big = max((float(np.abs(a).max()) for a in finite if a.size), default=0.0)
    return 1e-5 * (1.0 + big)


def finish(
    model: LinearModel,
    options: SolveOptions,
    *,
    status: SolveStatus,
    backend: str,
    wall_time_s: float,
    values: np.ndarray | None = None,
    bound: float | None = None,
    solver_version: str = "",
    log: str | None = None,
    message: str = "",
) -> SolveResult:
    """Turn what an adapter read from its solver into a :class:`SolveResult`, uniformly.

    The objective is recomputed from ``values`` (so every backend reports it the same way),
    a claimed optimum is checked against the requested gap, an LP optimum gets ``bound =
    objective``, and a returned point is checked against the model: a point violating it turns
    the status into ``error`` (the values are kept for inspection).
    """
    notes = [message] if message else []
    objective = None
    if values is not None:
        values = np.asarray(values, dtype=np.float64) + 0.0  # + 0.0 turns solvers' -0.0 into 0.0
        objective = model.objective_value(values)
        violation = model.max_violation(values)
        if violation > _feasibility_tolerance(model):
            notes.append(f"solver returned a point violating the model by {violation:.3g}")
            status = SolveStatus.ERROR
    elif status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE):
        notes.append(f"solver reported {status.value} without a solution")
        status = SolveStatus.NO_SOLUTION
    if bound is not None and not math.isfinite(bound):
        bound = None
    if status is SolveStatus.OPTIMAL and objective is not None:
        if not model.is_mip and bound is None:
            bound = objective  # an LP optimum is its own bound (strong duality)
        if bound is None or not _gap_closed(objective, bound, options):
            notes.append(
                f"solver claimed optimality but the gap to bound {bound} is not within "
                f"rel_gap={options.rel_gap:g}/abs_gap={options.abs_gap:g}; reported as feasible"
            )
            status = SolveStatus.FEASIBLE
    if status in (SolveStatus.INFEASIBLE, SolveStatus.UNBOUNDED, SolveStatus.NO_SOLUTION):
        values = objective = None
    if status is SolveStatus.UNBOUNDED:
        bound = -math.inf if model.sense is Sense.MINIMIZE else math.inf
    elif status is SolveStatus.INFEASIBLE:
        bound = None
    return SolveResult(
        status=status,
        objective=objective,
        bound=bound,
        gap=relative_gap(objective, bound),
        wall_time_s=float(wall_time_s),
        values=values,
        backend=backend,
        solver_version=solver_version,
        log=log if options.log else None,
        message="; ".join(notes),
    )


def complete(
    backend: str,
    model: LinearModel,
    options: SolveOptions,
    deadline: float | None,
    raw: RawOutcome,
    solve_again: Callable[..., SolveResult],
) -> SolveResult:
    """Turn an adapter's :class:`RawOutcome` into a :class:`SolveResult` the same way for every backend.

    A solver's "infeasible or unbounded" is settled by solving the zero-objective problem with
    the same backend (``solve_again``, the adapter's own solve function, called as
    ``solve_again(model, options, deadline=deadline)``): feasible then means unbounded (the solver proved one of the two),
    infeasible means infeasible; if that second solve cannot decide (limit), the status is
    ``no_solution`` with a message saying so. Everything else goes through :func:`finish`.
    """
    if raw.status != INFEASIBLE_OR_UNBOUNDED:
        return finish(
            model,
            options,
            status=SolveStatus(raw.status),
            backend=backend,
            wall_time_s=raw.wall_time_s,
            values=raw.values,
            bound=raw.bound,
            solver_version=raw.solver_version,
            log=raw.log,
            message=raw.message,
        )
    t0 = time.monotonic()
    second_opts = dataclasses.replace(options, warm_start=None, node_limit=None, isolate=False)
    feas = solve_again(model.with_objective(None), second_opts, deadline=deadline)
    base = "solver reported infeasible-or-unbounded; the zero-objective problem is "
    if feas.status is SolveStatus.INFEASIBLE:
        status, note = SolveStatus.INFEASIBLE, base + "infeasible"
    elif feas.has_solution:
        status, note = SolveStatus.UNBOUNDED, base + "feasible, so the model is unbounded"
    else:
        status, note = SolveStatus.NO_SOLUTION, base + f"undecided ({feas.status.value}: {feas.message})"
    logs = [t for t in (raw.log, feas.log) if t]
    return finish(
        model,
        options,
        status=status,
        backend=backend,
        wall_time_s=raw.wall_time_s + time.monotonic() - t0,
        solver_version=raw.solver_version or feas.solver_version,
        log="\n".join(logs) if logs else None,
        message=note,
    )
