"""Wall-clock guard: run a solve in a worker process and kill it when it overstays.

Solvers overshoot their own limits (PuLP waits on the CBC binary with no timeout; HiGHS#947;
pywraplp CBC ran 14.4 s on a 10 s limit) and some crash the interpreter (pywraplp HiGHS +
SetHint). The worker is a fresh interpreter started with ``subprocess``: ``multiprocessing``'s
spawn and forkserver children re-import the caller's ``__main__`` (breaking scripts without an
``if __name__ == "__main__"`` guard), and fork would copy HiGHS's thread pool into the child.

Workers are kept and reused: a fresh interpreter with numpy, scipy and a solver imported costs a
second or two, a reused one a few milliseconds (pickling the model). A worker is
discarded when it is killed or dies. The budget starts when the worker has the job (it
acknowledges it), so a cold start does not eat the solver's time: the worker is killed at
``ack + time_limit_s + grace_period(time_limit_s)``. Call :func:`prestart` to pay the cold start
ahead of time. Each worker leads its own session, so killing its process group also kills a
CBC binary it started. Console output of a solver (``verbose``) goes to the worker's stderr,
because its stdout carries the results. A solve with a ``progress`` callback keeps the callback
here: the worker sends each report as a ``("progress", payload)`` message before its outcome, and
the guard calls the callback with it.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from typing import Any, BinaryIO

from topoopt_ilp.solvers.model import LinearModel
from topoopt_ilp.solvers.options import SolveOptions
from topoopt_ilp.solvers.result import SolveResult, SolveStatus, finish

__all__ = ["solve_isolated", "grace_period", "prestart", "STARTUP_ALLOWANCE_S"]

#: How long a worker may take to start and acknowledge a job before it counts as dead.
STARTUP_ALLOWANCE_S = 30.0
_WORKER_CODE = "import sys; from topoopt_ilp.solvers.guard import _worker_main; _worker_main(int(sys.argv[1]))"
_HEADER = struct.Struct("<Q")
_idle: list[subprocess.Popen[bytes]] = []
_owner = os.getpid()  # a forked copy of this module must not use (or kill) its parent's workers
_lock = threading.Lock()


def _own_pool() -> list[subprocess.Popen[bytes]]:
    global _idle, _owner
    if os.getpid() != _owner:
        _idle, _owner = [], os.getpid()
    return _idle


def grace_period(time_limit_s: float) -> float:
    """Seconds a solver may run past its limit before the guard kills it: 1 s + 10 % of the limit."""
    return 1.0 + 0.1 * time_limit_s


# -- framing: an 8-byte length, then a pickle --------------------------------------------------------
def _send(stream: BinaryIO, obj: object) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:  # a raw (unbuffered) pipe may take only part of a large write
        view = view[stream.write(view) :]
    stream.flush()


def _read_exact(stream: BinaryIO, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _recv(stream: BinaryIO) -> Any:
    (n,) = _HEADER.unpack(_read_exact(stream, _HEADER.size))
    return pickle.loads(_read_exact(stream, n))


def _die_with_parent() -> None:
    """Linux: have the kernel kill this worker when its parent dies (a parent killed by a signal
    runs no clean-up, and an orphaned solver would keep a core busy until its own time limit)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass  # best effort: without it the worker still exits when it next finds the pipe closed


def _worker_main(parent: int) -> None:
    """Worker loop: for each job, acknowledge it with its deadline, solve, send the outcome."""
    import importlib

    _die_with_parent()
    if os.getppid() != parent:  # the parent died before the request took effect
        return

    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # solver console output must not corrupt the result stream
    inp = sys.stdin.buffer
    while True:
        try:
            module, func, model, options, limit, report = _recv(inp)
        except EOFError:
            return  # the parent closed our stdin: it is done with us
        if report:  # the parent's callback stayed there: progress goes back as messages
            options = dataclasses.replace(options, progress=lambda payload: _send(out, ("progress", payload)))
        deadline = None if limit is None else time.monotonic() + limit
        try:
            _send(out, ("ack", deadline))
            try:
                outcome = ("ok", getattr(importlib.import_module(module), func)(model, options, deadline=deadline))
            except BaseException as exc:  # noqa: BLE001 - re-raised in the parent
                outcome = ("exc", exc)
            try:
                _send(out, outcome)
            except BrokenPipeError:
                raise
            except Exception:  # an unpicklable exception: send its text
                _send(out, ("exc", RuntimeError(f"{type(outcome[1]).__name__}: {outcome[1]}")))
        except BrokenPipeError:
            return  # the parent stopped listening (its guard gave up on this job): exit quietly


def _start_worker() -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", _WORKER_CODE, str(os.getpid())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        bufsize=0,  # unbuffered: select() on the pipe must see every byte not yet read
        start_new_session=True,  # own process group, see _kill
    )


def prestart() -> None:
    """Start an idle worker now, so that the next isolated solve does not wait for one."""
    with _lock:
        pool = _own_pool()
        if not any(p.poll() is None for p in pool):
            pool.append(_start_worker())


def _take_worker() -> subprocess.Popen[bytes]:
    with _lock:
        pool = _own_pool()
        while pool:
            proc = pool.pop()
            if proc.poll() is None:
                return proc
    return _start_worker()


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            stream.close()


@atexit.register
def _shutdown() -> None:
    with _lock:
        pool = _own_pool()
        while pool:
            _kill(pool.pop())


def _wait_readable(proc: subprocess.Popen[bytes], until: float | None) -> bool:
    timeout = None if until is None else max(0.0, until - time.monotonic())
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return bool(ready)


def solve_isolated(
    backend: str, module: str, func: str, model: LinearModel, options: SolveOptions, t0: float
) -> SolveResult:
    """Run ``module.func(model, options, deadline=...)`` in a worker process.

    Returns a well-formed result in every case: the worker's own result; ``no_solution`` when
    the guard killed it (the incumbent dies with it); ``error`` when it died. Exceptions raised
    in the worker are re-raised here.
    """
    limit = None if options.time_limit_s is None else float(options.time_limit_s)
    proc = _take_worker()
    assert proc.stdin is not None and proc.stdout is not None
    try:
        report = options.progress  # a callable stays here; the worker sends what it would be given
        _send(proc.stdin, (module, func, model, dataclasses.replace(options, progress=None), limit, report is not None))
        if not _wait_readable(proc, time.monotonic() + STARTUP_ALLOWANCE_S):
            _kill(proc)
            return _failed(model, options, backend, t0, SolveStatus.ERROR, "solver worker did not start")
        kind, deadline = _recv(proc.stdout)
        kill_at = None if deadline is None else deadline + grace_period(limit or 0.0)
        while True:
            if not _wait_readable(proc, kill_at):
                _kill(proc)
                late = time.monotonic() - deadline
                return _failed(
                    model,
                    options,
                    backend,
                    t0,
                    SolveStatus.NO_SOLUTION,
                    f"wall-clock guard killed the solver {late:.2f} s after its time limit",
                )
            kind, payload = _recv(proc.stdout)
            if kind != "progress":
                break
            report(payload)
    except (EOFError, BrokenPipeError):
        code = proc.wait()
        _kill(proc)
        return _failed(model, options, backend, t0, SolveStatus.ERROR, f"solver process died (exit code {code})")
    except BaseException:  # KeyboardInterrupt included: never leave a solver running behind us
        _kill(proc)
        raise
    with _lock:
        _own_pool().append(proc)
    if kind == "exc":
        raise payload
    return payload


def _failed(
    model: LinearModel, options: SolveOptions, backend: str, t0: float, status: SolveStatus, msg: str
) -> SolveResult:
    return finish(model, options, status=status, backend=backend, wall_time_s=time.monotonic() - t0, message=msg)
