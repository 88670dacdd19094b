"""Ctrl-C and SIGTERM stop a running HiGHS solve at once: before, the command went on until the
solve ended (17 s after the signal here; minutes for an exact solve without a time limit)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

INSTANCES = Path(__file__).resolve().parents[2] / "instances"
# Python's own SIGINT handler, which a shell takes away from a command it starts in the background.
RUN_CLI = (
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from topoopt_ilp.cli import main; sys.exit(main())"
)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_stops_an_exact_solve_without_a_time_limit(tmp_path, sig):
    out = tmp_path / "schedule.json"
    topology = INSTANCES / "teccl" / "amd-allgather.json"
    args = ["collective", "--topology", str(topology), "--method", "exact", "-o", str(out)]
    proc = subprocess.Popen([sys.executable, "-c", RUN_CLI, *args], stderr=subprocess.PIPE, start_new_session=True)
    time.sleep(4)  # HiGHS is searching (the solve takes about 20 s)
    assert proc.poll() is None
    proc.send_signal(sig)
    sent = time.monotonic()
    try:
        code = proc.wait(timeout=30)
    finally:
        proc.kill()
    assert time.monotonic() - sent < 8
    assert code == 130 and "interrupted" in proc.stderr.read().decode()
    assert not out.exists()


def test_a_solve_off_the_main_thread_leaves_the_signal_handlers_alone():
    from threading import Thread

    from topoopt_ilp import files
    from topoopt_ilp.methods import solve

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    inst = files.load_instance(INSTANCES / "testbed-12.json")
    result = []
    worker = Thread(target=lambda: result.append(solve(inst, method="exact", time_limit_s=30)))
    worker.start()
    worker.join()
    assert result[0].status == "optimal"
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_a_solve_on_the_main_thread_gives_the_handlers_and_the_wakeup_descriptor_back():
    from topoopt_ilp import files
    from topoopt_ilp.methods import solve

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    wakeup = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(wakeup)
    sol = solve(files.load_instance(INSTANCES / "testbed-12.json"), method="exact", time_limit_s=30)
    assert sol.status == "optimal"
    assert {sig: signal.getsignal(sig) for sig in before} == before
    assert signal.set_wakeup_fd(wakeup) == wakeup
