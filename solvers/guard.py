"""Wall-clock guard: run one solve in a child process and kill it when it overstays.

Solvers overshoot their own limits (CBC through PuLP waits on the binary with no timeout;
HiGHS#947; pywraplp CBC ran 14.4 s on a 10 s limit) and some crash the interpreter. The child is
forked from a ``forkserver`` that has numpy, scipy and the installed solver packages preloaded,
so one isolated solve costs tens of milliseconds rather than a fresh interpreter's imports
(see ``benchmarks/model_build.py`` for the measured overhead). The child starts its own process
group, so killing it also kills a solver binary it started (CBC).
"""

from __future__ import annotations

import importlib
import importlib.util
import multiprocessing
import os
import signal
import time
from typing import Any

from .model import LinearModel
from .options import SolveOptions
from .result import SolveResult, SolveStatus, finish

__all__ = ["solve_isolated", "grace_period"]

_PRELOAD = ["numpy", "scipy.sparse", "highspy", "ortools.math_opt.python.mathopt", "pulp"]
_context: Any = None


def grace_period(time_limit_s: float) -> float:
    """Extra seconds a solver gets past its limit before the guard kills it: 1 s + 10 %."""
    return 1.0 + 0.1 * time_limit_s


def _get_context() -> Any:
    global _context
    if _context is None:
        ctx = multiprocessing.get_context("forkserver")
        preload = [m for m in _PRELOAD if importlib.util.find_spec(m.split(".")[0]) is not None]
        ctx.set_forkserver_preload(preload + [__name__])
        _context = ctx
    return _context


def _child(conn: Any, module: str, func: str, model: LinearModel, options: SolveOptions, deadline: float | None) -> None:
    os.setpgrp()  # own process group: the parent kills the whole group (and CBC with it)
    try:
        fn = getattr(importlib.import_module(module), func)
        conn.send(("ok", fn(model, options, deadline=deadline)))
    except BaseException as exc:  # noqa: BLE001 - anything goes back to the parent to re-raise
        try:
            conn.send(("exc", exc))
        except Exception:  # an unpicklable exception: send its text
            conn.send(("exc", RuntimeError(f"{type(exc).__name__}: {exc}")))
    finally:
        conn.close()


def solve_isolated(
    backend: str, module: str, func: str, model: LinearModel, options: SolveOptions, deadline: float | None, t0: float
) -> SolveResult:
    """Run ``module.func(model, options, deadline=deadline)`` in a child process.

    The child is killed at ``deadline + grace_period(limit)``; the result is then well-formed:
    ``no_solution`` (the incumbent dies with the child). A child that crashes gives ``error``.
    Exceptions raised in the child are re-raised here.
    """
    ctx = _get_context()
    recv_conn, send_conn = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send_conn, module, func, model, options, deadline), daemon=True)
    proc.start()
    send_conn.close()
    limit = None if options.time_limit_s is None else float(options.time_limit_s)
    kill_at = None if deadline is None or limit is None else deadline + grace_period(limit)
    try:
        ready = recv_conn.poll(None if kill_at is None else max(0.0, kill_at - time.monotonic()))
        if not ready:
            _kill(proc)
            return finish(
                model, options, status=SolveStatus.NO_SOLUTION, backend=backend, wall_time_s=time.monotonic() - t0,
                message=f"wall-clock guard killed the solver {time.monotonic() - deadline:.2f} s after its time limit",
            )
        try:
            kind, payload = recv_conn.recv()
        except EOFError:
            proc.join(5)
            return finish(
                model, options, status=SolveStatus.ERROR, backend=backend, wall_time_s=time.monotonic() - t0,
                message=f"solver process died (exit code {proc.exitcode})",
            )
    finally:
        recv_conn.close()
    proc.join(5)
    if proc.is_alive():
        _kill(proc)
    if kind == "exc":
        raise payload
    return payload


def _kill(proc: Any) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()  # the child had not yet made its own group
    proc.join(5)
