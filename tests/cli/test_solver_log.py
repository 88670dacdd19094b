"""``--log FILE`` keeps every solve's own back-end log; ``--verbose`` shows it live on stderr; stdout
stays the result, and the options are refused where they mean nothing."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT
from topoopt_ilp import load_instance, solve
from topoopt_ilp.cli import main

MINI = str(ROOT / "instances" / "dlrm-mini-6.json")
TESTBED = str(ROOT / "instances" / "testbed-12.json")


def test_log_keeps_each_solve_with_a_header(tmp_path, capsys):
    log = tmp_path / "run.log"
    assert main(["solve", MINI, "--method", "exact", "--time-limit", "30", "--log", str(log)]) == 0
    text = log.read_text()
    heads = [line for line in text.splitlines() if line.startswith("==== ")]
    assert heads and all("highs" in h and " in " in h for h in heads)
    assert "Coefficient ranges" in text  # HiGHS' own log, as it prints it
    out = capsys.readouterr().out
    assert "Coefficient ranges" not in out and "verified           yes" in out


def test_a_new_run_starts_a_new_log(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("an old run\n")
    assert main(["solve", TESTBED, "--method", "exact", "--log", str(log), "--quiet"]) == 0
    assert "an old run" not in log.read_text()


def test_bad_input_found_inside_the_solve_keeps_an_earlier_log(tmp_path, capsys):
    log = tmp_path / "run.log"
    log.write_text("an earlier run\n")
    args = ["solve", TESTBED, "--method", "exact", "--log", str(log), "--formulation", "no-such-formulation"]
    assert main(args) == 2
    assert "no-such-formulation" in capsys.readouterr().err
    assert log.read_text() == "an earlier run\n" and list(tmp_path.iterdir()) == [log]


def test_the_api_takes_the_log_file(tmp_path):
    log = tmp_path / "api.log"
    sol = solve(load_instance(TESTBED), method="exact", log_file=str(log))
    assert sol.status == "optimal" and log.read_text().startswith("==== ")


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--log", "{tmp}/x.log"], "--log applies to --method exact, not heuristic"),
        (["--verbose"], "--verbose applies to --method exact, not heuristic"),
        (["--method", "exact", "--verbose", "--quiet"], "--verbose and --quiet ask for opposite things"),
        (["--method", "exact", "--log", "{tmp}/same.json", "-o", "{tmp}/same.json"], "is the --out file too"),
        (["--method", "exact", "--log", "{tmp}/no/such/dir/x.log"], "does not exist"),
    ],
)
def test_refused_before_solving(tmp_path, capsys, extra, message):
    args = [a.format(tmp=tmp_path) for a in extra]
    assert main(["solve", TESTBED, *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.rglob("*.log")) and not list(tmp_path.rglob("*.json"))  # nothing written


def test_verbose_prints_the_log_on_stderr_only():
    r = subprocess.run(
        [sys.executable, "-m", "topoopt_ilp", "solve", TESTBED, "--method", "exact", "--time-limit", "20", "--verbose"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 0
    assert "Coefficient ranges" in r.stderr and "Coefficient ranges" not in r.stdout
    assert "verified           yes" in r.stdout


@pytest.mark.parametrize(
    "seconds, shown", [(0.4, "0 s"), (42.4, "42 s"), (185, "3 min 05 s"), (7620, "2 h 07 min"), (-1, "0 s")]
)
def test_durations_in_progress_lines(seconds, shown):
    from topoopt_ilp.cli.output import fmt_duration

    assert fmt_duration(seconds) == shown


def test_live_line_rewrites_one_line_and_clears_it():
    import io

    from topoopt_ilp.cli.output import LiveLine

    stream = io.StringIO()
    line = LiveLine("exact [highs]", stream)
    line({"incumbent": None, "bound": None, "gap": None})
    line({"incumbent": 2.5, "bound": 2.0, "gap": 0.2})
    line.close()
    text = stream.getvalue()
    assert "exact [highs]: 0 s, MILP incumbent 2.5, bound 2, gap 20.00%" in text
    assert "\n" not in text and text.endswith("\r\x1b[2K")  # nothing left behind on the terminal


def test_the_live_line_shows_on_a_terminal_only(monkeypatch, capsys):
    instance = str(ROOT / "instances" / "mix-8.json")
    assert main(["solve", instance, "--method", "exact", "--time-limit", "20"]) == 0
    assert "exact [highs]:" not in capsys.readouterr().err  # not a terminal: no live line
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(["solve", instance, "--method", "exact", "--time-limit", "20"]) == 0
    captured = capsys.readouterr()
    assert "exact [highs]:" in captured.err and captured.err.endswith("\r\x1b[2K")
    assert "\r" not in captured.out and "verified           yes" in captured.out
    assert main(["solve", instance, "--method", "exact", "--time-limit", "20", "--quiet"]) == 0
    assert capsys.readouterr().err == ""  # --quiet: silent, terminal or not


def test_the_live_line_keeps_its_clock_moving_between_reports():
    import io
    import time

    from topoopt_ilp.cli.output import LiveLine

    stream = io.StringIO()
    line = LiveLine("exact [scip]", stream, tick_s=0.02)  # a back-end that never reports
    time.sleep(0.2)
    line.close()
    text = stream.getvalue()
    assert text.count("exact [scip]: 0 s") >= 2 and text.endswith("\r\x1b[2K")
    after = len(text)
    time.sleep(0.1)
    assert len(stream.getvalue()) == after  # closed: the thread has stopped drawing


def test_a_progress_bar_shows_steps_an_estimate_and_lines_above_it():
    import io

    from topoopt_ilp.cli.output import ProgressBar

    stream = io.StringIO()
    bar = ProgressBar("sweep", total=0, stream=stream, tick_s=None, width=8)
    assert bar.text().startswith("sweep [........] 0/?, 0 s, ETA -")  # total unknown until the first step
    bar.step(0, "heuristic", total=4)
    assert bar.text() == "sweep [........] 0/4, 0 s, ETA - | heuristic"
    bar.started -= 30  # 30 s for the first step
    bar.step(1, "exact [highs]")
    assert bar.text() == "sweep [##......] 1/4, 30 s, ETA 1 min 30 s | exact [highs]"
    bar({"incumbent": 3.0, "bound": 2.0, "gap": 1 / 3})
    assert bar.text().endswith("| exact [highs], MILP incumbent 3, bound 2, gap 33.33%")
    bar.step(2, eta_s=5)  # a caller's own estimate wins; the report belonged to the last step
    assert bar.text() == "sweep [####....] 2/4, 30 s, ETA 5 s"
    bar.write_line("[2/4] done")
    bar.close()
    text = stream.getvalue()
    assert "\r\x1b[2K[2/4] done\n" in text and text.endswith("\r\x1b[2K")


def _on_a_terminal(monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)


def test_compare_shows_a_bar_on_a_terminal_only(monkeypatch, capsys):
    instance = str(ROOT / "instances" / "mix-8.json")
    args = ["compare", instance, "--time-limit", "20"]
    assert main(args) == 0
    plain = capsys.readouterr()
    assert plain.err == ""  # not a terminal: nothing on stderr
    _on_a_terminal(monkeypatch)
    assert main(args) == 0
    shown = capsys.readouterr()
    assert "compare [" in shown.err and "2/2" in shown.err and "| exact [highs]" in shown.err
    assert shown.err.endswith("\r\x1b[2K") and "\r" not in shown.out
    assert [ln.split()[:3] for ln in shown.out.splitlines()] == [ln.split()[:3] for ln in plain.out.splitlines()]
    assert main([*args, "--format", "json"]) == 0
    assert capsys.readouterr().err == ""  # JSON is for scripts: silent on a terminal too


def test_sweep_lines_scroll_above_a_bar_on_a_terminal(monkeypatch, capsys):
    instance = str(ROOT / "instances" / "mix-8.json")
    _on_a_terminal(monkeypatch)
    assert main(["sweep", instance, "--methods", "heuristic,baseline"]) == 0
    err = capsys.readouterr().err
    assert "\r\x1b[2K[1/2, " in err and "\r\x1b[2K[2/2, " in err and "sweep [" in err
    assert err.endswith("\r\x1b[2K")
    assert main(["sweep", instance, "--methods", "heuristic", "--quiet"]) == 0
    assert capsys.readouterr().err == ""
