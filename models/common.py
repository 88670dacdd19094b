"""What every exact model shares: its options, running a built model, and turning a result into a Solution.

A model module builds a :class:`~topoopt_ilp.solvers.LinearModel` with array operations, then calls
:func:`run_model`, which applies the user's options (backend, limits, warm start, export) and maps
solver errors onto the package's error types, so the CLI reports them with the documented exit codes.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from topoopt_ilp.core.solution import Solution
from topoopt_ilp.errors import InputError, UnsupportedError
from topoopt_ilp.evaluation.verify import verify
from topoopt_ilp.models.placement.data import check_ring_policy
from topoopt_ilp.solvers import (
    BackendCapabilityError,
    BackendUnavailableError,
    Capability,
    LinearModel,
    NativeOptionError,
    NativeValue,
    SolveOptions,
    SolveResult,
    UnknownBackendError,
    check_native_backends,
    get_backend,
    write_model,
)
from topoopt_ilp.solvers import solve as solver_solve

__all__ = [
    "ExactOptions",
    "run_model",
    "append_log",
    "time_left",
    "native_options",
    "export_model",
    "check_backend",
    "check_start",
    "solution_status",
    "exact_no_solution",
    "MAX_MODEL_NONZEROS",
]

# Beyond this many constraint-matrix non-zeros a model no longer builds and solves in reasonable
# memory on a 24 GiB machine; refuse before building rather than after an out-of-memory kill.
MAX_MODEL_NONZEROS = 50_000_000


@dataclass(frozen=True)
class ExactOptions:
    """Options of ``--method exact`` (docs/methods/topology.md).

    ``warm_start``: ``"heuristic"``, ``"none"`` or a solution file."""

    backend: str = "highs"
    time_limit_s: float | None = None
    gap: float | None = None
    threads: int | None = None
    warm_start: str | None = "heuristic"
    export_model: str | None = None
    seed: int | None = None
    formulation: str | None = None  # None: the model's default (strong; auto for a workload's joint problem)
    rings: str | None = None  # the placement problem's ring policy (placement.data.RING_POLICIES); None: shortest
    # The placement problem's local search budgeted in moves (placement.scoring.SearchBudget), not seconds:
    # reproducible on any machine while the time limit does not cut it. None: by the time limit.
    search_moves: int | None = None
    log: bool = False
    # Every solve's own log (the back-end's), appended to this file as each solve ends; None: not kept.
    log_file: str | None = None
    verbose: bool = False  # the back-ends print their logs live, on stderr
    # Called with {"incumbent", "bound", "gap"} of each MILP as it solves, where the back-end reports
    # them (topoopt_ilp.solvers.SolveOptions.progress); the CLI's live line on a terminal.
    progress: Callable[[dict[str, float | None]], None] | None = field(default=None, compare=False)
    native_options: Mapping[str, Mapping[str, NativeValue]] | None = None  # {backend: {parameter: value}}
    # The edge-swap search (models/topology/edge_swap.py) from this many seeds (seed, seed + 1, ...),
    # the best kept; swap_executor (any concurrent.futures.Executor: a process pool, a Dask client's
    # get_executor()) runs swap_workers of them at once, else they run here one after another. The
    # seeds share the search's time: each gets it divided by the rounds of swap_workers they take.
    swap_seeds: int | None = None
    swap_executor: Executor | None = field(default=None, compare=False)
    swap_workers: int | None = None

    def __post_init__(self) -> None:
        if self.time_limit_s is not None and (not math.isfinite(self.time_limit_s) or self.time_limit_s < 0):
            raise InputError(f"time limit must be a finite number >= 0, got {self.time_limit_s}")
        if self.gap is not None and (not math.isfinite(self.gap) or self.gap < 0):
            raise InputError(f"gap must be a finite number >= 0, got {self.gap}")
        if self.search_moves is not None and (
            isinstance(self.search_moves, bool) or not isinstance(self.search_moves, int) or self.search_moves < 1
        ):
            raise InputError(f"search moves must be an integer >= 1, got {self.search_moves!r}")
        for name in ("swap_seeds", "swap_workers"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise InputError(f"{name} must be an integer >= 1, got {value!r}")
        if self.swap_executor is not None and not callable(getattr(self.swap_executor, "submit", None)):
            raise InputError(
                f"swap_executor must be an Executor (with submit), got {type(self.swap_executor).__name__}"
            )
        if self.rings is not None:
            check_ring_policy(self.rings)
        if self.log_file is not None and (not isinstance(self.log_file, (str, os.PathLike)) or not str(self.log_file)):
            raise InputError(f"log_file must be a file name, got {self.log_file!r}")
        if self.export_model is not None and Path(self.export_model).suffix.lower() not in (".mps", ".lp"):
            raise InputError(f"--export-model needs a .mps or .lp file name, got {self.export_model!r}")
        if self.native_options is not None:
            try:  # SolveOptions checks the types and keeps a private copy; the registry knows the backends
                native = SolveOptions(native_options=self.native_options).native_options
                check_native_backends(native)
            except NativeOptionError as exc:
                raise InputError(str(exc)) from None
            object.__setattr__(self, "native_options", native)


def check_backend(options: ExactOptions, *, continuous: bool = True) -> None:
    """Refuse, before any model is built, a backend that is unknown, missing, or cannot honour the options."""
    try:
        info = get_backend(options.backend)
    except (UnknownBackendError, BackendUnavailableError) as exc:
        raise InputError(str(exc)) from None
    wanted = []
    if options.threads is not None and options.threads > 1:
        wanted.append((Capability.THREADS, "--threads"))
    if options.warm_start not in (None, "none"):
        wanted.append((Capability.WARM_START, "--warm-start"))
    if continuous:
        wanted.append((Capability.CONTINUOUS_VARIABLES, "continuous variables (this model has flow variables)"))
    for cap, what in wanted:
        if not info.supports(cap):
            raise UnsupportedError(f"backend {options.backend} cannot honour {what}")


def check_start(instance, sol, source: str) -> None:
    """Refuse a warm-start solution (read from ``source``) that is not a feasible design for
    ``instance`` - wrong link direction, degrees, a pair it cannot connect - naming the first
    violation: a solver would drop such a start without a word."""
    from dataclasses import replace

    if sol.status not in ("optimal", "feasible"):  # verify refuses such a file whatever it carries
        raise InputError(f"{source}: its status is {sol.status}, so it holds no design to start from")
    report = verify(instance, replace(sol, status="feasible", bound=None, gap=None), check_metrics=False)
    if not report.valid:
        raise InputError(f"{source}: not a feasible design for this instance, so no start: {report.violations[0]}")


def export_model(model: LinearModel, options: ExactOptions) -> None:
    """Write ``model`` to ``options.export_model`` (MPS or LP by its suffix) when one is asked for."""
    if options.export_model:
        try:
            write_model(model, options.export_model)
        except OSError as exc:
            raise InputError(f"cannot write {options.export_model}: {exc.strerror or exc}") from None


def run_model(
    model: LinearModel,
    options: ExactOptions,
    warm_start: np.ndarray | None = None,
    tuning: Mapping[str, Mapping[str, NativeValue]] | None = None,
) -> SolveResult:
    """Export (when asked) and solve ``model`` under ``options``.

    ``tuning``: the model's own native solver parameters (``{backend: {parameter: value}}``, measured
    to help it); the user's ``options.native_options`` override them parameter by parameter."""
    if model.num_nonzeros > MAX_MODEL_NONZEROS:
        raise UnsupportedError(
            f"the model has {model.num_nonzeros:,} non-zeros, more than {MAX_MODEL_NONZEROS:,}: too large to solve here"
        )
    export_model(model, options)
    kwargs: dict[str, Any] = {
        "time_limit_s": options.time_limit_s,
        "threads": options.threads,
        "log": options.log or options.log_file is not None,
        "verbose": options.verbose,
    }
    if options.progress is not None:
        kwargs["progress"] = options.progress
    if options.gap is not None:
        kwargs["rel_gap"] = options.gap
    if options.seed is not None:
        kwargs["seed"] = options.seed
    if warm_start is not None:
        kwargs["warm_start"] = warm_start
    native = native_options(options, tuning)
    if native:
        kwargs["native_options"] = native
    try:
        result = solver_solve(model, backend=options.backend, **kwargs)
    except (UnknownBackendError, BackendUnavailableError, BackendCapabilityError, NativeOptionError) as exc:
        raise InputError(str(exc)) from None
    if options.log_file is not None:
        append_log(options.log_file, model, result)
    return result


def append_log(path: str | os.PathLike, model: LinearModel, result: SolveResult) -> None:
    """Append one solve's log to ``path``: a header line naming the model, the back-end and the
    outcome, then the back-end's own log as it printed it."""
    head = (
        f"==== {model.name}: {model.num_vars:,} columns, {model.num_rows:,} rows, {model.num_nonzeros:,} non-zeros; "
        f"{result.backend} {result.solver_version or ''}".rstrip()
        + f"; {result.status.value} in {result.wall_time_s:.3g} s ====\n"
    )
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(head + (result.log or "(the back-end returned no log)").rstrip("\n") + "\n\n")


def time_left(options: ExactOptions, started: float) -> float | None:
    """Seconds of ``options.time_limit_s`` left since ``started`` (a ``time.perf_counter()``), never
    below 0; None without a limit."""
    if options.time_limit_s is None:
        return None
    return max(0.0, options.time_limit_s - (time.perf_counter() - started))


def native_options(
    options: ExactOptions, tuning: Mapping[str, Mapping[str, NativeValue]] | None = None
) -> dict[str, dict[str, NativeValue]] | None:
    """The native parameters a solve on ``options.backend`` gets: a model's ``tuning`` for that
    backend, overridden parameter by parameter by the user's ``options.native_options`` (None when
    there are none; other backends' entries are never read, so they are left out)."""
    merged = {**(tuning or {}).get(options.backend, {}), **(options.native_options or {}).get(options.backend, {})}
    return {options.backend: merged} if merged else None


def solution_status(result: SolveResult) -> str:
    """The Solution status for a solver status (they share one vocabulary, docs/guide/solvers.md)."""
    return str(getattr(result.status, "value", result.status))


def exact_no_solution(backend: str | None, wall_time_s: float, details: Mapping[str, Any]) -> Solution:
    """What an exact method returns without a design: a limit reached first (a time limit of 0
    included) or nothing the model found carries the demand. ``details`` say which, as each method
    records it."""
    return Solution(
        status="no_solution", method="exact", topology=None, backend=backend, wall_time_s=wall_time_s, details=details
    )
