"""Backend registry and capability table (modelled on linopy's ``solver_capabilities``).

Every backend is a frozen :class:`BackendInfo` record: its capabilities, the package it needs
and the adapter function that solves. Nothing is imported or probed at import time;
:func:`available_backends` only asks ``importlib`` whether the packages exist.

Capability table (``True`` = honoured; asking a backend for a ``False`` entry raises
:class:`BackendCapabilityError`):

============== ===== ===== ===== =====
capability     highs scip  cpsat cbc
============== ===== ===== ===== =====
CONTINUOUS_V.  yes   yes   NO    yes
INTEGER_V.     yes   yes   yes   yes
TIME_LIMIT     yes   yes   yes   yes
GAP            yes   yes   yes   yes
THREADS (>1)   yes   NO    yes   yes
SEED           yes   yes   yes   yes
WARM_START     yes   yes   yes   yes
NODE_LIMIT     yes   yes   NO    yes
LOG            yes   yes   yes   yes
EXPORT         yes   NO    NO    NO
============== ===== ===== ===== =====

* ``threads=1`` is accepted everywhere: SCIP as bundled with OR-Tools solves with one thread
  (MathOpt accepts ``threads=2`` for GSCIP and does nothing with it, so we refuse it).
* CP-SAT takes all-integer models only, and MathOpt rejects ``node_limit`` for it.
* ``EXPORT``: :func:`topoopt_ilp.solvers.export.write_model` writes MPS/LP through highspy for
  every model, whichever backend solves it; only the ``highs`` package is needed for it.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import importlib.util
import time
from dataclasses import dataclass

from topoopt_ilp.solvers.errors import (
    BackendCapabilityError,
    BackendUnavailableError,
    NativeOptionError,
    UnknownBackendError,
)
from topoopt_ilp.solvers.guard import solve_isolated
from topoopt_ilp.solvers.model import LinearModel
from topoopt_ilp.solvers.options import DEFAULT_ABS_GAP, DEFAULT_REL_GAP, SolveOptions
from topoopt_ilp.solvers.result import SolveResult, SolveStatus, finish

__all__ = [
    "Capability",
    "BackendInfo",
    "BACKENDS",
    "DEFAULT_BACKEND",
    "available_backends",
    "get_backend",
    "backends_supporting",
    "solve",
    "check_native_backends",
]


class Capability(enum.Enum):
    """What a backend can be asked to do."""

    CONTINUOUS_VARIABLES = "continuous_variables"
    INTEGER_VARIABLES = "integer_variables"
    TIME_LIMIT = "time_limit"
    GAP = "gap"
    THREADS = "threads"  # more than one thread
    SEED = "seed"
    WARM_START = "warm_start"
    NODE_LIMIT = "node_limit"
    LOG = "log"
    EXPORT = "export"
    NATIVE_OPTIONS = "native_options"  # the solver's own parameters, passed through


C = Capability
_COMMON = frozenset({C.INTEGER_VARIABLES, C.TIME_LIMIT, C.GAP, C.SEED, C.WARM_START, C.LOG})


@dataclass(frozen=True)
class BackendInfo:
    """One backend: what it can do, what it needs, and where its adapter lives.

    Attributes
    ----------
    name : str
        Registry key (``"highs"``).
    display_name : str
    capabilities : frozenset of Capability
    package : str
        Import name of the Python package it needs.
    pip_name : str
        What to ``pip install`` when the package is missing.
    module, function : str
        The adapter: ``topoopt_ilp.solvers.<module>.<function>(model, options, deadline=...)``.
    """

    name: str
    display_name: str
    capabilities: frozenset[Capability]
    package: str
    pip_name: str
    module: str
    function: str = "solve"

    def supports(self, capability: Capability | str) -> bool:
        """True when the backend honours ``capability``."""
        return Capability(capability) in self.capabilities

    def is_available(self) -> bool:
        """True when the package it needs is installed (checked without importing it)."""
        return importlib.util.find_spec(self.package) is not None

    @property
    def module_path(self) -> str:
        """Fully qualified module of the adapter."""
        return f"{__package__}.{self.module}"

    def check(self, model: LinearModel, options: SolveOptions) -> None:
        """Raise when the backend is missing or cannot honour the model or an option.

        Raises
        ------
        BackendUnavailableError
            The package is not installed (the message says what to ``pip install``).
        BackendCapabilityError
            A requested feature is not in :attr:`capabilities`.
        """
        check_native_backends(options.native_options)
        if not self.is_available():
            raise BackendUnavailableError(
                f"backend {self.name!r} needs the Python package {self.package!r}: pip install {self.pip_name}"
            )
        need: list[tuple[Capability, str]] = []
        if model.has_continuous:
            first = model.column_name(int((~model.integrality).argmax()))
            need.append(
                (
                    C.CONTINUOUS_VARIABLES,
                    f"the model has continuous columns (first: {first}); "
                    f"{self.display_name} takes all-integer models only and we do not round",
                )
            )
        if model.is_mip:
            need.append((C.INTEGER_VARIABLES, "the model has integer columns"))
        if options.time_limit_s is not None:
            need.append((C.TIME_LIMIT, "a time limit was requested"))
        if (options.rel_gap, options.abs_gap) != (DEFAULT_REL_GAP, DEFAULT_ABS_GAP):
            need.append((C.GAP, "a gap tolerance was requested"))
        if options.threads is not None and options.threads > 1:
            need.append((C.THREADS, f"threads={options.threads} was requested"))
        if options.seed is not None:
            need.append((C.SEED, "a random seed was requested"))
        if options.warm_start is not None:
            need.append((C.WARM_START, "a warm start was given"))
        if options.node_limit is not None:
            need.append((C.NODE_LIMIT, "a node limit was requested"))
        if options.log:
            need.append((C.LOG, "log capture was requested"))
        if options.native(self.name):
            need.append((C.NATIVE_OPTIONS, f"native {self.display_name} parameters were given"))
        for cap, why in need:
            if cap not in self.capabilities:
                others = [b.name for b in BACKENDS.values() if cap in b.capabilities]
                raise BackendCapabilityError(
                    f"{why}, but {self.display_name} lacks capability {cap.name} (backends with it: {', '.join(others) or 'none'})",
                    backend=self.name,
                )

    def solve(self, model: LinearModel, options: SolveOptions | None = None, **kwargs: object) -> SolveResult:
        """Check, then solve ``model`` with this backend. See :func:`solve`."""
        opts = SolveOptions.from_kwargs(options, **kwargs)
        self.check(model, opts)
        t0 = time.monotonic()
        if opts.time_limit_s == 0:
            return finish(
                model,
                opts,
                status=SolveStatus.NO_SOLUTION,
                backend=self.name,
                wall_time_s=0.0,
                message="time limit 0: the solver was not called",
            )
        if opts.warm_start is not None:
            opts.warm_start_vector(model.num_vars)  # validate here, not in a child process
        deadline = None if opts.time_limit_s is None else t0 + float(opts.time_limit_s)
        isolate = opts.isolate if opts.isolate is not None else deadline is not None
        if isolate:
            res = solve_isolated(self.name, self.module_path, self.function, model, opts, t0)
        else:
            fn = getattr(importlib.import_module(self.module_path), self.function)
            res = fn(model, opts, deadline=deadline)
        # One clock for every backend and mode: the whole call, translation and guard included.
        return dataclasses.replace(res, wall_time_s=time.monotonic() - t0)


BACKENDS: dict[str, BackendInfo] = {
    "highs": BackendInfo(
        "highs",
        "HiGHS",
        _COMMON | {C.CONTINUOUS_VARIABLES, C.THREADS, C.NODE_LIMIT, C.EXPORT, C.NATIVE_OPTIONS},
        package="highspy",
        pip_name="highspy",
        module="highs",
    ),
    "scip": BackendInfo(
        "scip",
        "SCIP (OR-Tools MathOpt)",
        _COMMON | {C.CONTINUOUS_VARIABLES, C.NODE_LIMIT},
        package="ortools",
        pip_name="ortools",
        module="mathopt",
        function="solve_scip",
    ),
    "cpsat": BackendInfo(
        "cpsat",
        "CP-SAT (OR-Tools MathOpt)",
        _COMMON | {C.THREADS},
        package="ortools",
        pip_name="ortools",
        module="mathopt",
        function="solve_cpsat",
    ),
    "cbc": BackendInfo(
        "cbc",
        "CBC (PuLP)",
        _COMMON | {C.CONTINUOUS_VARIABLES, C.THREADS, C.NODE_LIMIT, C.NATIVE_OPTIONS},
        package="pulp",
        pip_name="'pulp>=3.3,<4' (Python 3.11) or 'pulp[cbc]>=4' (Python >= 3.12)",
        module="cbc",
    ),
}

DEFAULT_BACKEND = "highs"


def get_backend(name: str) -> BackendInfo:
    """The registry record of backend ``name``.

    Raises
    ------
    UnknownBackendError
        (a ``ValueError``) for a name not in the registry; the message lists the known ones.
    """
    try:
        return BACKENDS[name]
    except (KeyError, TypeError):
        raise UnknownBackendError(
            f"unknown solver backend {name!r}; known backends: {', '.join(sorted(BACKENDS))}"
        ) from None


def available_backends() -> list[str]:
    """Names of the backends whose package is installed, in registry order (no solver is started)."""
    return [name for name, info in BACKENDS.items() if info.is_available()]


def backends_supporting(*capabilities: Capability) -> list[str]:
    """Names of the registered backends having every one of ``capabilities``."""
    return [n for n, b in BACKENDS.items() if all(c in b.capabilities for c in capabilities)]


def solve(
    model: LinearModel, backend: str = DEFAULT_BACKEND, options: SolveOptions | None = None, **kwargs: object
) -> SolveResult:
    """Solve ``model`` with ``backend``.

    Parameters
    ----------
    model : LinearModel
    backend : str
        A registry name: ``"highs"`` (default), ``"scip"``, ``"cpsat"``, ``"cbc"``.
    options : SolveOptions, optional
        Base options; ``kwargs`` (the :class:`SolveOptions` field names) override them.

    Returns
    -------
    SolveResult

    Raises
    ------
    UnknownBackendError, BackendUnavailableError, BackendCapabilityError
        Before any solving starts.
    TypeError
        For an unknown option name.

    Notes
    -----
    Time limits. ``time_limit_s=0`` returns ``no_solution`` at once without calling the solver
    (a budget that ran out is not an error). With a limit, the solve runs by default
    (``isolate=None``) in a reused worker process (:mod:`.guard`): the solver gets the limit, and
    the worker is killed ``grace_period(limit)`` (1 s + 10 %) after it, giving ``no_solution``.
    The budget starts when the worker holds the job, so the first isolated solve of a process
    also pays the worker's start (a second or two; :func:`.guard.prestart` hides it).
    In-process (``isolate=False``, the default without a limit) the limit covers the whole call,
    model translation included, and relies on the solver honouring it.
    """
    return get_backend(backend).solve(model, options, **kwargs)


def check_native_backends(native_options: object) -> None:
    """Raise :class:`NativeOptionError` when ``native_options`` names a backend the registry does not know.

    One call may carry settings for several backends (only the running one's are read), so every
    name is checked, not just the one that solves.
    """
    unknown = sorted(set(native_options or {}) - set(BACKENDS), key=str)
    if unknown:
        raise NativeOptionError(f"native_options names unknown backend(s) {unknown}; known: {sorted(BACKENDS)}")
