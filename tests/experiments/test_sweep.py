"""``topoopt sweep``: compare's rows over many instance files, the same whichever executor runs them."""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

import pytest

from conftest import INSTANCES, minimal
from topoopt_ilp import files
from topoopt_ilp.cli import main
from topoopt_ilp.errors import InputError
from topoopt_ilp.experiments.compare import compare
from topoopt_ilp.experiments.sweep import expand_paths, format_sweep, read_journal, sweep

FILES = [str(INSTANCES / "mix-8.json"), str(INSTANCES / "coprime-circulant-32.json")]
STABLE = ("instance", "method", "backend", "status", "objective", "verified")  # not the times


def _stable(rows):
    return [{k: r.as_dict()[k] for k in STABLE} for r in rows]


def test_rows_are_compare_rows_in_input_order():
    rows = sweep(FILES, ["heuristic", "exact"], time_limit_s=30)
    assert [(r.instance, r.row.method) for r in rows] == [(f, m) for f in FILES for m in ("heuristic", "exact")]
    for f in FILES:
        mine = [r.row for r in rows if r.instance == f]
        alone = compare(files.load_instance(f), ["heuristic", "exact"], time_limit_s=30)
        assert [(a.method, a.status, a.objective) for a in alone] == [(m.method, m.status, m.objective) for m in mine]
        assert [m.distance for m in mine] == pytest.approx([a.distance for a in alone])
    assert rows[0].servers == 8 and rows[2].objective_name == "aspl"


def test_a_process_pool_gives_the_same_rows():
    order = []
    with ProcessPoolExecutor(2, mp_context=get_context("spawn")) as pool:
        rows = sweep(
            FILES, ["heuristic"], executor=pool, progress=lambda done, total, path, row: order.append((done, total))
        )
    assert _stable(rows) == _stable(sweep(FILES, ["heuristic"]))
    assert [d for d, _ in order] == [1, 2] and {t for _, t in order} == {2}


def test_a_dask_cluster_gives_the_same_rows():
    distributed = pytest.importorskip("distributed")  # installed with the test extra: CI runs this
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None) as client:
        rows = sweep(FILES, ["heuristic"], executor=client.get_executor())
    assert _stable(rows) == _stable(sweep(FILES, ["heuristic"]))


def test_a_bad_file_stops_the_sweep_before_any_solve(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(minimal(cluster={"servers": 7, "degree": 3, "link_bandwidth_gbps": 100})))
    seen = []
    with pytest.raises(InputError, match="bad.json"):
        sweep([FILES[0], str(bad)], ["heuristic"], progress=lambda *a: seen.append(a))
    assert seen == []


def test_paths_files_directories_and_patterns(tmp_path):
    for name in ("mix-8", "testbed-12"):
        shutil.copy(INSTANCES / f"{name}.json", tmp_path / f"{name}.json")
    (tmp_path / "notes.txt").write_text("not an instance")
    want = [str(tmp_path / "mix-8.json"), str(tmp_path / "testbed-12.json")]
    assert expand_paths([str(tmp_path)]) == want
    assert expand_paths([str(tmp_path / "*.json"), str(tmp_path / "mix-8.json")]) == want  # no duplicates
    again = str(tmp_path / "." / "mix-8.json")  # another spelling of the same file
    assert expand_paths([str(tmp_path / "mix-8.json"), again]) == want[:1]
    with pytest.raises(InputError, match="no instance files"):
        expand_paths([str(tmp_path / "*.yaml")])


def test_cli_writes_csv_and_reports_failures(tmp_path, capsys):
    out = tmp_path / "res.csv"
    assert main(["sweep", *FILES, "--methods", "heuristic", "--format", "csv", "--out", str(out), "--jobs", "2"]) == 0
    lines = out.read_text().splitlines()
    assert lines[0].startswith("instance,servers,degree,objective_name,method") and len(lines) == 3
    err = capsys.readouterr().err
    assert "[2/2, " in err and ", ETA 0 s] " in err  # the last line: nothing left
    assert main(["sweep", *FILES, "--methods", "heuristic", "--format", "csv", "--quiet"]) == 0
    assert capsys.readouterr().out.count("\n") == 3  # header + 2 rows, no blank line at the end
    # a method that cannot run is a row, not the end of the sweep; no method solving an instance: exit 1
    fixed = str(INSTANCES / "fixed-ring-8.json")
    assert main(["sweep", fixed, "--methods", "exact", "--quiet"]) == 1
    captured = capsys.readouterr()
    assert "fixes the topology" in captured.out and f"{fixed}: every method stopped with an error" in captured.err
    assert main(["sweep", str(tmp_path / "none-*.json")]) == 2
    dask = pytest.importorskip("dask")
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        assert main(["sweep", *FILES, "--methods", "heuristic", "--dask", "tcp://127.0.0.1:9", "--quiet"]) == 2
    assert "cannot connect to the scheduler" in capsys.readouterr().err


def test_table_has_one_block_per_instance():
    text = format_sweep(sweep(FILES, ["heuristic"]), "table")
    assert [line.split(":")[0] for line in text.splitlines() if line.startswith("/")] == FILES


def test_an_internal_error_is_one_row_not_the_end_of_the_sweep(monkeypatch):
    import topoopt_ilp.experiments.sweep as sweep_module

    real = sweep_module.run_one

    def flaky(instance, method, backend, options):
        if instance.n == 32:
            raise RuntimeError("boom")
        return real(instance, method, backend, options)

    monkeypatch.setattr(sweep_module, "run_one", flaky)
    rows = sweep(FILES, ["heuristic"])
    assert [r.row.status for r in rows] == ["feasible", "error"]
    assert rows[1].row.message == "internal error: RuntimeError: boom"


def test_sigterm_stops_a_parallel_sweep_and_its_workers():
    """SIGTERM killed the main process at once and left the pool's workers running their solves
    (a user's report); it now ends the sweep as Ctrl-C does: exit 130, workers stopped."""
    import os
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "topoopt_ilp",
            "sweep",
            str(INSTANCES / "testbed-12.json"),
            str(INSTANCES / "mix-16.json"),
            "--methods",
            "exact",
            "--time-limit",
            "30",
            "--jobs",
            "2",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    time.sleep(6)  # the workers have started their solves
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 130 and "interrupted" in proc.stderr.read().decode()
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            os.killpg(proc.pid, 0)  # anything left in the sweep's process group?
        except ProcessLookupError:
            break
        time.sleep(0.5)
    else:
        pytest.fail("the sweep's worker processes outlived it")


def test_a_journal_resumes_a_sweep_and_resolves_edited_files(tmp_path, monkeypatch):
    import topoopt_ilp.experiments.sweep as sweep_module

    files = []
    for f in FILES:
        files.append(str(tmp_path / f.rsplit("/", 1)[1]))
        shutil.copy(f, files[-1])
    journal = tmp_path / "sweep.jsonl"
    first = sweep(files, ["heuristic", "exact"], time_limit_s=30, journal=journal)
    assert len(journal.read_text().splitlines()) == 4
    solved = []
    real = sweep_module.run_one
    monkeypatch.setattr(sweep_module, "run_one", lambda inst, *run: solved.append(run[0]) or real(inst, *run))
    again = sweep(files, ["heuristic", "exact"], time_limit_s=30, journal=journal)
    assert solved == [] and [r.as_dict() for r in again] == [r.as_dict() for r in first]  # all reused, distances too
    sweep(files, ["heuristic", "exact"], time_limit_s=20, journal=journal)  # another time limit: exact again
    assert solved == ["exact", "exact"]
    data = json.loads(open(files[0]).read())
    data["name"] = "edited"
    with open(files[0], "w") as fh:
        json.dump(data, fh)
    solved.clear()
    sweep(files, ["heuristic", "exact"], time_limit_s=30, journal=journal)
    assert solved == ["heuristic", "exact"]  # only the edited file
    with open(journal, "a") as fh:
        fh.write('{"key": "cut sh')  # a sweep killed while writing its last line
    solved.clear()
    sweep(files, ["heuristic", "exact"], time_limit_s=30, journal=journal)
    assert solved == []


def test_a_journal_that_is_not_one_is_refused(tmp_path, capsys):
    bad = tmp_path / "j.jsonl"
    bad.write_text('{"format": "topoopt-instance"}\n{"key": 1}\n')
    with pytest.raises(InputError, match="line 1 is not a sweep journal entry"):
        sweep(FILES[:1], ["heuristic"], journal=bad)
    out = tmp_path / "same.json"
    assert main(["sweep", FILES[0], "--methods", "heuristic", "--out", str(out), "--journal", str(out)]) == 2
    assert "name the same file" in capsys.readouterr().err


@pytest.mark.parametrize("after_s", [2, 6])  # while the workers start, and while they solve
def test_an_interrupted_dask_sweep_says_interrupted_and_nothing_else(after_s):
    """Dask logged cancelled tasks, nanny tracebacks and, from its exit hook, a failed close (a
    user's report): an interrupted sweep on a local Dask cluster now prints one line."""
    pytest.importorskip("distributed")
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "topoopt_ilp",
            "sweep",
            str(INSTANCES / "mix-16.json"),
            str(INSTANCES / "all-to-all-16.json"),
            "--time-limit",
            "20",
            "--dask",
            "local",
            "--jobs",
            "2",
            "--quiet",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    time.sleep(after_s)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 130
    assert proc.stderr.read().decode().strip() == "interrupted"


def test_a_journal_cut_short_stays_usable_after_the_next_run(tmp_path):
    """A killed sweep's unterminated last line was ignored, but the next row was appended onto it,
    and the journal was refused from then on (a user's report): the broken tail is dropped first."""
    journal = tmp_path / "j.jsonl"
    sweep(FILES[:1], ["heuristic"], journal=journal)
    text = journal.read_text()
    journal.write_text(text[:-40])  # the row cut short, no newline
    sweep(FILES[:1], ["heuristic"], journal=journal)  # solves it again, appends
    sweep(FILES[1:], ["heuristic"], journal=journal)  # appends again
    rows = read_journal(journal)
    assert len(rows) == 2 and journal.read_text().endswith("\n")


def test_a_journal_row_of_the_wrong_types_is_refused(tmp_path):
    journal = tmp_path / "j.jsonl"
    sweep(FILES[:1], ["heuristic"], journal=journal)
    entry = json.loads(journal.read_text())
    entry["row"]["objective"] = "abc"
    journal.write_text(json.dumps(entry) + "\n" + journal.read_text())
    with pytest.raises(InputError, match="line 1 is not a sweep journal entry"):
        read_journal(journal)


def test_sweep_exits_4_when_every_method_reaches_its_limit(capsys):
    """An instance whose every row is no_solution (a limit, no solution) exits 4, as solve does; the
    worst instance still decides (1 before 4)."""
    mix = str(INSTANCES / "mix-8.json")
    assert main(["sweep", mix, "--methods", "exact", "--time-limit", "0", "--quiet"]) == 4
    assert f"{mix}: no method found a solution" in capsys.readouterr().err
    fixed = str(INSTANCES / "fixed-ring-8.json")  # exact refuses a fixed topology: an error row (1)
    assert main(["sweep", mix, fixed, "--methods", "exact", "--time-limit", "0", "--quiet"]) == 1
