"""Solve options shared by every backend."""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields

import numpy as np
from numpy.typing import ArrayLike

from topoopt_ilp.solvers.errors import ModelError, NativeOptionError

__all__ = [
    "SolveOptions",
    "WarmStart",
    "NativeValue",
    "DEFAULT_REL_GAP",
    "DEFAULT_ABS_GAP",
    "PROGRESS_INTERVAL_S",
    "progress_due",
]

#: Least seconds between two periodic progress reports of one solve (improving solutions always report).
PROGRESS_INTERVAL_S = 0.25


def progress_due() -> Callable[[bool], bool]:
    """A back-end's test of whether to report now: ``due(always)`` is true for an improving solution
    (``always``) and otherwise once :data:`PROGRESS_INTERVAL_S` have passed since the last report.
    The back-ends' periodic callbacks run often, so they build a report only when it is due."""
    last = [-math.inf]

    def due(always: bool) -> bool:
        now = time.monotonic()
        if not always and now - last[0] < PROGRESS_INTERVAL_S:
            return False
        last[0] = now
        return True

    return due


#: A native solver parameter's value.
NativeValue = bool | int | float | str

#: A (partial) assignment: ``{column: value}`` or an array over all columns with NaN for "unset".
WarmStart = Mapping[int, float] | ArrayLike

# One termination criterion for every backend, so that "optimal" means the same thing everywhere
# (the solvers' own defaults differ: HiGHS 1e-4, SCIP and CP-SAT 0, CBC ~0).
DEFAULT_REL_GAP = 1e-4
DEFAULT_ABS_GAP = 1e-6


@dataclass(frozen=True)
class SolveOptions:
    """What a solve may use and must respect.

    Attributes
    ----------
    time_limit_s : float, optional
        Wall-clock budget in seconds for the whole call (model translation included).
        ``None``: no limit. ``0``: the solver is not called; the result is ``no_solution``
        at once (a budget that ran out is not an error). Negative or NaN: ``ValueError``.
    rel_gap, abs_gap : float
        The solve is ``optimal`` only when ``|objective - bound|`` is within
        ``rel_gap * |objective|`` or within ``abs_gap``. Passed to every backend.
    threads : int, optional
        Solver threads; ``None`` leaves the backend default. More than 1 needs the
        ``THREADS`` capability.
    seed : int, optional
        Random seed (``SEED`` capability).
    warm_start : mapping or array, optional
        A full or partial assignment (``{col: value}`` or an array with NaN for unset columns).
        Needs ``WARM_START``.
    node_limit : int, optional
        Branch-and-bound node limit (``NODE_LIMIT``); reaching it gives ``feasible``/``no_solution``.
    log : bool
        Capture the solver log into ``SolveResult.log`` (``LOG``).
    verbose : bool
        Let the solver print its log to the console as well.
    isolate : bool, optional
        Run the solve in a child process killed after ``time_limit_s`` plus a grace period
        (protects against solvers that overshoot or crash). ``None`` (default): isolate exactly
        when a time limit is given.
    progress : callable, optional
        Called during the solve with ``{"incumbent", "bound", "gap"}`` (the model's objective and
        bound so far, floats or None) where the back-end reports them (HiGHS and CP-SAT: at each
        improving solution and periodically during the search, at most every
        :data:`PROGRESS_INTERVAL_S`); a solve in the guard's worker sends them back to this process.
        Best effort: a back-end that reports nothing (SCIP, CBC) never calls it.
    native_options : mapping, optional
        Solver parameters passed through as they are, keyed by backend name:
        ``{"highs": {"presolve": "off"}, "cbc": {"cuts": "off"}}``. Only the entry of the backend
        that runs is used, so one call can carry settings for several; that backend needs
        ``NATIVE_OPTIONS``, and a parameter it rejects raises :class:`NativeOptionError`.
    """

    time_limit_s: float | None = None
    rel_gap: float = DEFAULT_REL_GAP
    abs_gap: float = DEFAULT_ABS_GAP
    threads: int | None = None
    seed: int | None = None
    warm_start: WarmStart | None = None
    node_limit: int | None = None
    log: bool = False
    verbose: bool = False
    isolate: bool | None = None
    progress: Callable[[dict[str, float | None]], None] | None = field(default=None, compare=False)
    native_options: Mapping[str, Mapping[str, NativeValue]] | None = None

    def __post_init__(self) -> None:
        if self.progress is not None and not callable(self.progress):
            raise ValueError(f"progress must be a callable or None, got {type(self.progress).__name__}")
        t = self.time_limit_s
        if t is not None and (isinstance(t, bool) or not isinstance(t, numbers.Real) or math.isnan(t) or t < 0):
            raise ValueError(f"time_limit_s must be a number >= 0 or None, got {t!r}")
        for label in ("rel_gap", "abs_gap"):
            g = getattr(self, label)
            if isinstance(g, bool) or not isinstance(g, numbers.Real) or not g >= 0:
                raise ValueError(f"{label} must be a number >= 0, got {g!r}")
        for label, low in (("threads", 1), ("node_limit", 0), ("seed", 0)):
            v = getattr(self, label)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low):
                raise ValueError(f"{label} must be an integer >= {low} or None, got {v!r}")

        if self.native_options is not None:
            object.__setattr__(self, "native_options", _checked_native(self.native_options))

    def native(self, backend: str) -> dict[str, NativeValue]:
        """The native parameters given for ``backend`` (empty when none)."""
        return dict((self.native_options or {}).get(backend, {}))

    @classmethod
    def from_kwargs(cls, base: SolveOptions | None = None, **kwargs: object) -> SolveOptions:
        """``base`` (or the defaults) updated with ``kwargs``; unknown names raise ``TypeError``."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise TypeError(f"unknown solve option(s) {unknown}; known: {sorted(known)}")
        if base is None:
            return cls(**kwargs)  # type: ignore[arg-type]
        merged = {f.name: getattr(base, f.name) for f in fields(cls)} | kwargs
        return cls(**merged)  # type: ignore[arg-type]

    def warm_start_vector(self, num_vars: int) -> np.ndarray | None:
        """The warm start as a float array of ``num_vars`` entries, NaN where unset (None if absent)."""
        ws = self.warm_start
        if ws is None:
            return None
        if isinstance(ws, Mapping):
            vec = np.full(num_vars, np.nan)
            if ws:
                idx = np.fromiter(ws.keys(), dtype=np.int64, count=len(ws))
                if idx.min() < 0 or idx.max() >= num_vars:
                    raise ModelError(f"warm start: a column index is outside 0..{num_vars - 1}")
                vec[idx] = np.fromiter(ws.values(), dtype=np.float64, count=len(ws))
            return vec
        vec = np.asarray(ws, dtype=np.float64).ravel()
        if vec.shape != (num_vars,):
            raise ModelError(f"warm start has {vec.size} entries, the model has {num_vars} columns")
        if np.isinf(vec).any():
            raise ModelError("warm start contains an infinite value")
        return vec


#: Native parameters that the adapters set themselves after the user's (the time limit comes from
#: the deadline, which the guard enforces too; HiGHS' relaxation switch drives the LP-first path), so
#: that a value given here would be silently overridden: refused, with what to use instead.
#: (CBC's command line also takes unique prefixes; these are its usual spellings.)
RESERVED_NATIVE: dict[str, dict[str, str]] = {
    "highs": {"time_limit": "time_limit_s (--time-limit)", "solve_relaxation": "the model's variable kinds"},
    "cbc": {name: "time_limit_s (--time-limit)" for name in ("sec", "seconds", "timelimit")},
}


def _checked_native(given: object) -> dict[str, dict[str, NativeValue]]:
    """A private copy of ``native_options`` (the caller's dicts may change later), checked:
    parameter names as strings, scalar values. The backend names are the registry's to check
    (:func:`topoopt_ilp.solvers.registry.check_native_backends`): this module sits below it."""
    if not isinstance(given, Mapping):
        raise NativeOptionError(
            f"native_options must map backend names to parameter mappings, got {type(given).__name__}"
        )
    out: dict[str, dict[str, NativeValue]] = {}
    for backend, params in given.items():
        if not isinstance(backend, str) or not isinstance(params, Mapping):
            raise NativeOptionError(f"native_options[{backend!r}] must be a mapping of parameter names to values")
        for name, value in params.items():
            if not isinstance(name, str) or not isinstance(value, (bool, int, float, str, np.integer, np.floating)):
                raise NativeOptionError(
                    f"native_options[{backend!r}][{name!r}] = {value!r}: names are strings, values bool, "
                    "int, float or str"
                )
            standard = RESERVED_NATIVE.get(backend, {}).get(name.lower())
            if standard is not None:
                raise NativeOptionError(
                    f"native option {backend}.{name} is set by the standard option {standard}, "
                    "which would override it: use that instead"
                )
        out[backend] = {
            name: value.item() if isinstance(value, np.generic) else value for name, value in params.items()
        }
    return out
