"""Solver back-ends behind one small interface (installed as ``topoopt_ilp.solvers``).

Build a model once as arrays with :class:`ModelBuilder`, then::

    from topoopt_ilp import solvers
    result = solvers.solve(model, backend="highs", time_limit_s=10, rel_gap=1e-4)
    result.status, result.objective, result.bound, result.values

Back-ends: ``highs`` (highspy, default), ``scip`` and ``cpsat`` (OR-Tools MathOpt), ``cbc``
(PuLP). What each can be asked is in :data:`BACKENDS` (see :mod:`.registry` for the table);
an option a backend cannot honour raises :class:`BackendCapabilityError`.

Statuses (:class:`SolveStatus`): ``optimal`` only when the gap to the proven bound is within
``rel_gap``/``abs_gap`` (whatever the solver or PuLP says), ``feasible`` after a limit with an
incumbent, ``infeasible``/``unbounded`` when proven (a solver's "infeasible or unbounded" is
settled by a zero-objective re-solve), ``no_solution`` after a limit without an incumbent,
``error`` otherwise (also when a returned point violates the model).

Time limits: ``time_limit_s=0`` gives ``no_solution`` without calling the solver; with a limit
the solve runs in a guarded worker process by default (see :func:`solve` and :mod:`.guard`).
"""

from __future__ import annotations

from topoopt_ilp.solvers.errors import (
    BackendCapabilityError,
    BackendUnavailableError,
    ModelError,
    NativeOptionError,
    SolverError,
    UnknownBackendError,
)
from topoopt_ilp.solvers.export import write_model
from topoopt_ilp.solvers.model import LinearModel, ModelBuilder, RowBlock, Sense, VarBlock, VarKind
from topoopt_ilp.solvers.options import DEFAULT_ABS_GAP, DEFAULT_REL_GAP, NativeValue, SolveOptions
from topoopt_ilp.solvers.registry import (
    BACKENDS,
    DEFAULT_BACKEND,
    BackendInfo,
    Capability,
    available_backends,
    backends_supporting,
    check_native_backends,
    get_backend,
    solve,
)
from topoopt_ilp.solvers.result import SolveResult, SolveStatus, relative_gap

__all__ = [
    "BACKENDS",
    "DEFAULT_ABS_GAP",
    "DEFAULT_BACKEND",
    "DEFAULT_REL_GAP",
    "BackendCapabilityError",
    "BackendInfo",
    "BackendUnavailableError",
    "Capability",
    "LinearModel",
    "NativeValue",
    "ModelBuilder",
    "ModelError",
    "NativeOptionError",
    "RowBlock",
    "Sense",
    "SolveOptions",
    "SolveResult",
    "SolveStatus",
    "SolverError",
    "UnknownBackendError",
    "VarBlock",
    "VarKind",
    "available_backends",
    "backends_supporting",
    "check_native_backends",
    "get_backend",
    "relative_gap",
    "solve",
    "write_model",
]
