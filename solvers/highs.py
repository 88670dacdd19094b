"""HiGHS backend through highspy: the CSR arrays of the model go to ``Highs.passModel`` as they are.

Status mapping (``HighsModelStatus``): ``kOptimal`` -> optimal (then checked against the requested
gap), ``kInfeasible`` -> infeasible, ``kUnbounded`` -> unbounded, ``kUnboundedOrInfeasible`` ->
decided by a zero-objective re-solve (see :func:`topoopt_ilp.solvers.result.complete`),
time/iteration/node/solution limits and interrupts -> feasible when HiGHS holds a feasible
primal solution, else no_solution; load/solve errors -> error.

Small MIPs (at most :data:`RELAXATION_FIRST_NONZEROS` non-zeros) are first solved as LPs: when the
relaxation's optimal vertex is integral on the integer columns it is feasible for the MIP and no
MIP point can beat it, so it is the MIP optimum (bound = objective). HiGHS's MIP solver spends
about 10 ms even on a model it settles at the root (presolve, symmetry detection, its worker
threads); its LP solver about 2 ms. The alternating method solves many such tiny topology models.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from topoopt_ilp.solvers.errors import ModelError, NativeOptionError
from topoopt_ilp.solvers.model import LinearModel, Sense
from topoopt_ilp.solvers.options import SolveOptions, progress_due
from topoopt_ilp.solvers.result import (
    INFEASIBLE_OR_UNBOUNDED,
    RawOutcome,
    SolveResult,
    SolveStatus,
    complete,
    finite_or_none,
)

__all__ = ["solve", "solve_raw", "load", "new_highs", "version"]


def version() -> str:
    """HiGHS version string, e.g. ``"1.16.0"``."""
    import highspy

    return f"{highspy.HIGHS_VERSION_MAJOR}.{highspy.HIGHS_VERSION_MINOR}.{highspy.HIGHS_VERSION_PATCH}"


_banner_done = False

#: MIPs up to this many non-zeros try their LP relaxation first (see the module docstring); a
#: fractional relaxation costs one extra LP, small next to the MIP solve that follows.
RELAXATION_FIRST_NONZEROS = 5_000
#: How far from an integer an integer column of the relaxation's vertex may be to count as integral.
INTEGRALITY_TOLERANCE = 1e-9


def new_highs() -> object:
    """A silent ``highspy.Highs``.

    HiGHS prints its banner to the C-level stdout when the first instance of a process is built,
    before any option can be set; that would corrupt a CLI's JSON on stdout, so the first
    construction runs with file descriptor 1 pointed at /dev/null.
    """
    global _banner_done
    import highspy

    if _banner_done:
        h = highspy.Highs()
    else:
        sys.stdout.flush()
        saved = os.dup(1)
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, 1)
            h = highspy.Highs()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            os.close(devnull)
        _banner_done = True
    h.setOptionValue("output_flag", False)
    return h


def load(model: LinearModel, h: object | None = None) -> object:
    """Load ``model`` into a (new) ``highspy.Highs`` instance with one array call and return it."""
    import highspy

    if h is None:
        h = new_highs()
    a = model.matrix
    integrality = model.integrality.astype(np.int32)
    status = h.passModel(
        model.num_vars,
        model.num_rows,
        model.num_nonzeros,
        int(highspy.MatrixFormat.kRowwise),
        int(highspy.ObjSense.kMaximize if model.sense is Sense.MAXIMIZE else highspy.ObjSense.kMinimize),
        float(model.objective_offset),
        model.objective,
        model.col_lower,
        model.col_upper,
        model.row_lower,
        model.row_upper,
        a.indptr[:-1],  # HiGHS takes the start of each row only
        a.indices,
        a.data,
        integrality,
    )
    if status == highspy.HighsStatus.kError:
        # HiGHS refuses values it cannot represent (|coefficient| above 1e15, say): the input's numbers
        # span more than the solver takes. One clear line (exit 1), not an internal error.
        raise ModelError(
            "HiGHS rejected the model: a coefficient or bound lies outside the range it accepts "
            "(its numbers span too many orders of magnitude; rescale the input)"
        )
    return h


def _set(h: object, name: str, value: object, error: type[Exception] = ValueError) -> None:
    import highspy

    if h.setOptionValue(name, value) == highspy.HighsStatus.kError:
        raise error(f"HiGHS rejected option {name}={value!r}")


def solve(model: LinearModel, options: SolveOptions, *, deadline: float | None = None) -> SolveResult:
    """Solve ``model`` with HiGHS. Capabilities are checked by the registry, not here.

    ``deadline`` is an absolute ``time.monotonic()`` instant; the solver gets what is left of it.
    """
    return complete("highs", model, options, deadline, solve_raw(model, options, deadline=deadline), solve)


def solve_raw(model: LinearModel, options: SolveOptions, *, deadline: float | None = None) -> RawOutcome:
    """Run HiGHS and read what it says, before the uniform post-processing."""
    import highspy

    t0 = time.monotonic()
    if options.threads is not None:
        # HiGHS runs one process-wide task scheduler, created at the first run with the then
        # current "threads" value; it must be reset for a new value to take effect.
        highspy.Highs.resetGlobalScheduler(True)
    h = new_highs()
    log_path = None
    _set(h, "output_flag", bool(options.verbose or options.log))
    _set(h, "log_to_console", bool(options.verbose))
    if options.log:
        fd, log_path = tempfile.mkstemp(prefix="highs-", suffix=".log")
        os.close(fd)
        _set(h, "log_file", log_path)
    try:
        load(model, h)
        _set(h, "mip_rel_gap", float(options.rel_gap))
        _set(h, "mip_abs_gap", float(options.abs_gap))
        if options.threads is not None:
            _set(h, "threads", int(options.threads))
        if options.seed is not None:
            _set(h, "random_seed", int(options.seed))
        if options.node_limit is not None:
            _set(h, "mip_max_nodes", int(options.node_limit))
        for name, value in options.native("highs").items():
            _set(h, name, value, NativeOptionError)
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                return RawOutcome(
                    SolveStatus.NO_SOLUTION,
                    log=_read(log_path),
                    message="time limit reached before the solve",
                    wall_time_s=time.monotonic() - t0,
                    solver_version=version(),
                )
            _set(h, "time_limit", float(left))
        if model.is_mip and model.num_nonzeros <= RELAXATION_FIRST_NONZEROS and options.node_limit is None:
            relaxed = _integral_relaxation(h, model)
            if relaxed is not None:
                if log_path is not None:
                    h.setOptionValue("log_file", "")
                return RawOutcome(
                    SolveStatus.OPTIMAL,
                    relaxed,
                    model.objective_value(relaxed),
                    _read(log_path),
                    "HiGHS: Optimal (the LP relaxation's optimal vertex is integral)",
                    time.monotonic() - t0,
                    version(),
                )
            if deadline is not None:
                _set(h, "time_limit", float(max(deadline - time.monotonic(), 0.0)))
        start = options.warm_start_vector(model.num_vars)
        if start is not None:
            known = np.flatnonzero(~np.isnan(start)).astype(np.int32)
            if known.size == model.num_vars:
                sol = highspy.HighsSolution()
                sol.col_value = start.tolist()
                sol.value_valid = True
                h.setSolution(sol)
            else:  # partial start: HiGHS completes it with a sub-MIP
                h.setSolution(int(known.size), known, start[known])
        if options.progress is not None and model.is_mip:
            _report_progress(h, options.progress)
        with stoppable(h):
            h.run()
        if log_path is not None:
            h.setOptionValue("log_file", "")  # closes (and flushes) the log file before we read it
        ms = h.getModelStatus()
        info = h.getInfo()
        has_point = info.primal_solution_status == 2  # kSolutionStatusFeasible
        values = np.asarray(h.getSolution().col_value, dtype=np.float64) if has_point else None
        bound = float(info.mip_dual_bound) if model.is_mip else None
        M = highspy.HighsModelStatus
        message = f"HiGHS: {h.modelStatusToString(ms)}"
        if ms == M.kOptimal:
            status = SolveStatus.OPTIMAL
        elif ms == M.kModelEmpty:
            status, values = SolveStatus.OPTIMAL, np.zeros(0)
        elif ms == M.kInfeasible:
            status = SolveStatus.INFEASIBLE
        elif ms == M.kUnbounded:
            status = SolveStatus.UNBOUNDED
        elif ms == M.kUnboundedOrInfeasible:
            status = INFEASIBLE_OR_UNBOUNDED
        elif ms in (
            M.kTimeLimit,
            M.kIterationLimit,
            M.kSolutionLimit,
            M.kInterrupt,
            M.kHighsInterrupt,
            M.kObjectiveBound,
            M.kObjectiveTarget,
            M.kUnknown,
            M.kMemoryLimit,
        ):
            status = SolveStatus.FEASIBLE if has_point else SolveStatus.NO_SOLUTION
        else:
            status, values = SolveStatus.ERROR, None
        return RawOutcome(status, values, bound, _read(log_path), message, time.monotonic() - t0, version())
    finally:
        if log_path is not None:
            os.unlink(log_path)


def _integral_relaxation(h: object, model: LinearModel) -> np.ndarray | None:
    """Solve the loaded MIP's LP relaxation; its optimal vertex when that is integral, else None
    (``h`` is left ready for the MIP solve)."""
    import highspy

    _set(h, "solve_relaxation", True)
    try:
        with stoppable(h):
            h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
        values = np.asarray(h.getSolution().col_value, dtype=np.float64)
    finally:
        _set(h, "solve_relaxation", False)
    on_integer = values[model.integrality]
    rounded = np.round(on_integer)
    if np.abs(on_integer - rounded).max(initial=0.0) > INTEGRALITY_TOLERANCE:
        # Forget the LP's basis and solution: the MIP solve would start from them and can take a
        # worse path (the strong topology model of an AllReduce + MP mix, n = 10, d = 3: 4.2 s after
        # the LP against 1.9 s from scratch).
        h.clearSolver()
        return None
    values[model.integrality] = rounded
    return values


#: The signals that stop a running solve (Ctrl-C, and the SIGTERM of a scheduler or ``kill``).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def stoppable(h: object) -> Iterator[None]:
    """Let Ctrl-C and SIGTERM stop ``h.run()`` now, not when the solve ends.

    A solve holds the main thread inside HiGHS for as long as it runs, and Python runs its signal
    handlers there between bytecodes. HiGHS asks its interrupt callbacks (simplex, IPM, branch and
    bound) as it works, from whichever of its threads; Python's C-level handler writes each
    signal's number to the wakeup file descriptor (``signal.set_wakeup_fd``) at once, and the
    callbacks read it and tell HiGHS to stop. Meanwhile the stop signals' handlers only note the
    signal: a handler that raises (KeyboardInterrupt) inside a callback is lost there. Once ``run``
    has returned, each noted signal goes to the handler it had (KeyboardInterrupt for Ctrl-C, the
    command line's exit for SIGTERM; the default action when it had none) and to the wakeup
    descriptor it had, if any (an asyncio loop's). A signal that is ignored
    stays ignored, and off the main thread (where Python sets no handler) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    hooked = [sig for sig, handler in previous.items() if handler not in (signal.SIG_IGN, None)]
    noted: list[int] = []
    reader, writer = os.pipe()
    os.set_blocking(reader, False)
    os.set_blocking(writer, False)
    stop = set(hooked)
    heard: list[bool] = []

    def note(signum: int, frame: object) -> None:
        noted.append(signum)

    def check(event: object) -> None:
        if not heard:
            try:
                if stop.intersection(os.read(reader, 64)):
                    heard.append(True)
            except BlockingIOError:
                return
        if heard:
            event.interrupt()

    callbacks = (h.cbSimplexInterrupt, h.cbIpmInterrupt, h.cbMipInterrupt)
    for sig in hooked:
        signal.signal(sig, note)
    previous_fd = signal.set_wakeup_fd(writer, warn_on_full_buffer=False)
    for callback in callbacks:
        callback.subscribe(check)
    try:
        yield
    finally:
        for callback in callbacks:
            callback.unsubscribe(check)
        signal.set_wakeup_fd(previous_fd)
        os.close(reader)
        os.close(writer)
        for sig in hooked:
            signal.signal(sig, previous[sig])
    for sig in dict.fromkeys(noted):  # each stop signal once, in the order it came
        if previous_fd >= 0:  # its owner (an asyncio loop) learns of signals from its descriptor
            try:
                os.write(previous_fd, bytes([sig]))
            except OSError:
                pass
        handler = previous[sig]
        if callable(handler):
            handler(sig, None)
        else:
            signal.raise_signal(sig)  # SIG_DFL: the default action


def _read(path: str | None) -> str | None:
    if path is None:
        return None
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def _report_progress(h, progress) -> None:
    """Subscribe ``progress`` to HiGHS' branch and bound: every improving solution, and its periodic
    interrupt checks at most every :data:`~.options.PROGRESS_INTERVAL_S`."""
    due = progress_due()

    def report(event, always: bool) -> None:
        if not due(always):
            return
        out = event.data_out
        progress(
            {
                "incumbent": finite_or_none(out.objective_function_value),
                "bound": finite_or_none(out.mip_dual_bound),
                "gap": finite_or_none(out.mip_gap),
            }
        )

    h.cbMipImprovingSolution.subscribe(lambda event: report(event, True))
    h.cbMipInterrupt.subscribe(lambda event: report(event, False))
