"""What the ``topoopt`` commands print, and the exit code of a solution's status.

Human-readable output goes to stdout (progress to stderr); ``--json`` prints the same data as JSON.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import threading
import time
from typing import Any

from topoopt_ilp.errors import EXIT_ERROR, EXIT_INFEASIBLE, EXIT_NO_SOLUTION, EXIT_OK
from topoopt_ilp.files import dumps, json_safe

__all__ = [
    "report_check",
    "STATUS_EXIT",
    "fmt_time",
    "fmt_duration",
    "LiveLine",
    "ProgressBar",
    "report_text",
    "metrics_lines",
    "print_json",
    "print_round",
    "print_solution",
    "reroute_line",
    "print_text",
    "with_newline",
    "keeps_earlier_out",
]

#: The exit code of each solution status.
STATUS_EXIT = {
    "optimal": EXIT_OK,
    "feasible": EXIT_OK,
    "infeasible": EXIT_INFEASIBLE,
    "unbounded": EXIT_ERROR,
    "no_solution": EXIT_NO_SOLUTION,
    "error": EXIT_ERROR,
}


def keeps_earlier_out(path: str | None, status: str) -> bool:
    """The rule of every ``--out``: a run that ends without a result (``no_solution``, exit 4: a limit
    was reached first) never replaces a file that already exists, and says so on stderr. True when
    ``path`` is to be kept; a run with a result, or a proof of infeasibility, writes its record."""
    kept = path is not None and status == "no_solution" and os.path.exists(path)
    if kept:
        print(f"{path}: not replaced, no solution was found; it keeps what it held", file=sys.stderr)
    return kept


def fmt_time(v: float | None, digits: int = 4) -> str:
    """Seconds in the largest unit (s, ms, us, ns) that keeps the value >= 1, to ``digits`` digits."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "inf" if v is not None else "-"
    if v == 0:
        return "0 s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(v) >= scale:
            return f"{v / scale:.{digits}g} {unit}"
    return f"{v:.3g} s"


def fmt_duration(seconds: float) -> str:
    """A wall-clock duration for progress lines: ``42 s``, ``3 min 05 s``, ``2 h 07 min``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class LiveLine:
    """One line on a terminal that long work rewrites in place: the time so far and, where the
    back-end reports them, the MILP's incumbent, bound and gap (its own objective, in the model's
    units). Called with each progress report; a background thread redraws it every ``tick_s`` so
    the clock moves through phases that report nothing (bounds, local search, a back-end without
    callbacks). :meth:`close` stops the thread and clears the line before the result prints."""

    def __init__(self, label: str, stream=None, tick_s: float | None = 1.0) -> None:
        self.label, self.stream = label, stream if stream is not None else sys.stderr
        self.started, self.shown = time.monotonic(), False
        self._report: dict[str, float | None] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._ticker = None
        if tick_s is not None:
            self._ticker = threading.Thread(target=self._tick, args=(tick_s,), daemon=True)
            self._ticker.start()

    def __call__(self, report: dict[str, float | None]) -> None:
        with self._lock:
            self._report = dict(report)
            self._draw()

    def text(self) -> str:
        """What the line shows now."""
        return f"{self.label}: {fmt_duration(self.elapsed())}" + report_text(self._report)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def write_line(self, line: str) -> None:
        """Print ``line`` above the live line, which is drawn again below it."""
        with self._lock:
            self.stream.write("\r\x1b[2K" + line + "\n")
            self._draw()

    def close(self) -> None:
        self._stopped.set()
        if self._ticker is not None:
            self._ticker.join()
        with self._lock:
            if self.shown:
                self.stream.write("\r\x1b[2K")
                self.stream.flush()
                self.shown = False

    def _draw(self) -> None:
        if self._stopped.is_set():
            return
        width = shutil.get_terminal_size((80, 24)).columns - 1  # a wrapped line could not be rewritten
        self.stream.write("\r\x1b[2K" + self.text()[:width])
        self.stream.flush()
        self.shown = True

    def _tick(self, tick_s: float) -> None:
        while not self._stopped.wait(tick_s):
            with self._lock:
                self._draw()


class ProgressBar(LiveLine):
    """A :class:`LiveLine` for work in ``total`` steps (the solves of a comparison or a sweep, the
    instances of ``evaluate-paper``): a bar, the steps done, the time so far and an estimate of the
    time left, what runs now, and the running solve's own report where its back-end sends one.
    ``total`` may be 0 (shown as ``?``) until the first :meth:`step` tells it."""

    def __init__(self, label: str, total: int, stream=None, tick_s: float | None = 1.0, width: int = 20) -> None:
        self.total, self.done, self.current, self.eta_s, self.width = total, 0, "", None, width
        super().__init__(label, stream, tick_s)

    def step(self, done: int, current: str = "", eta_s: float | None = None, total: int | None = None) -> None:
        """``done`` steps are finished and ``current`` runs now (``total``: the number of steps, where
        it is known only now). The estimate of the time left is ``eta_s`` when given, else the mean
        time of the steps done so far times the steps left."""
        with self._lock:
            if total is not None:
                self.total = total
            self.done, self.current, self._report = done, current, {}
            if eta_s is None and done > 0:
                eta_s = self.elapsed() / done * (self.total - done)
            self.eta_s = eta_s
            self._draw()

    def text(self) -> str:
        filled = round(self.width * self.done / self.total) if self.total else 0
        eta = "-" if self.eta_s is None else fmt_duration(self.eta_s)
        line = (
            f"{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total or '?'}, "
            f"{fmt_duration(self.elapsed())}, ETA {eta}"
        )
        return line + (f" | {self.current}" if self.current else "") + report_text(self._report)


def report_text(report: dict[str, float | None]) -> str:
    """A back-end's progress report as the live line shows it (empty when it has none)."""
    parts = []
    if report.get("incumbent") is not None:
        parts.append(f"MILP incumbent {report['incumbent']:.6g}")
    if report.get("bound") is not None:
        parts.append(f"bound {report['bound']:.6g}")
    if report.get("gap") is not None:
        parts.append(f"gap {report['gap']:.2%}")
    return "".join(", " + p for p in parts)


def metrics_lines(m: dict[str, Any]) -> list[str]:
    def num(v):
        if v is None:
            return "-"
        return f"{v:.6g}" if isinstance(v, float) else str(v)

    groups = m.get("group_times_s") or []
    lines = [
        f"  iteration time     {fmt_time(m['iteration_time_s'])}"
        + (f"  (compute {fmt_time(m['compute_time_s'])})" if m.get("compute_time_s") else ""),
        f"  comm time          {fmt_time(m['comm_time_s'])}  (bandwidth {fmt_time(m['bandwidth_time_s'])} + latency {fmt_time(m['latency_time_s'])})",
        f"  throughput         {num(m['throughput'])} iterations/s of this traffic",
        f"  diameter / ASPL    {num(m['diameter'])} / {num(m['aspl'])} hops"
        + ("" if m.get("connected", True) else "  (DISCONNECTED)"),
        f"  longest used path  {m['max_hops']} hops",
        f"  link utilization   max {num(m['max_link_utilization'])}, mean {num(m['mean_link_utilization'])}",
        f"  routing            {m['routing']}",
    ]
    if groups:
        shown = ", ".join(fmt_time(t) for t in groups[:6]) + (
            f", ... ({len(groups)} groups)" if len(groups) > 6 else ""
        )
        lines.append(f"  AllReduce alone    {shown}")
    return lines


def print_json(data: Any) -> None:
    """``data`` as JSON on standard output, laid out as the tool's files are (non-finite numbers as
    null): the C encoder line by line, where ``json.dumps(indent=...)`` encodes in Python."""
    sys.stdout.write(dumps(json_safe(data)))


def report_check(args: Any, what: str, facts: dict[str, Any], line: str, problems: list[str]) -> int:
    """The result of ``--check FILE`` on a schedule (``what`` names the kind of file): as JSON with
    ``--json`` (the files, ``valid``, the file's ``facts``, the violations' count and the first),
    else a verdict line, the file's ``line`` of facts and the first violation. Exit 0 valid, 1 not."""
    if args.json:
        head = {"schedule": args.check, "instance": args.instance, "solution": args.solution, "valid": not problems}
        tail = {"violations": len(problems), "first_violation": problems[0] if problems else None}
        print(json.dumps({**head, **facts, **tail}, indent=1))
    else:
        verdict = "valid" if not problems else f"invalid, {len(problems)} violation(s)"
        print(f"{what} {args.check} of {args.solution} on {args.instance}: {verdict}")
        print(f"  {line}")
        if problems:
            print(f"  first violation    {problems[0]}")
    return EXIT_OK if not problems else EXIT_ERROR


def reroute_line(details: dict[str, Any]) -> str:
    """One line on what re-routing did (from ``details["reroute"]``)."""
    r = details["reroute"]
    if r["proven"]:
        bound = f"bound {fmt_time(r['bandwidth_bound_s'])}, proven"
    elif r["bandwidth_bound_s"] < 0.01 * r["bandwidth_s"]:  # the first rounds' duals bound next to nothing
        bound = "no useful bound yet: time limit"
    else:
        bound = f"bound {fmt_time(r['bandwidth_bound_s'])}, time limit"
    if not r["applied"] and r.get("objective_ignores_routing"):
        return f"kept the given routing: {r['note'].split(':')[0]}"
    if not r["applied"]:
        return (
            f"kept the given routing: bandwidth {fmt_time(r['bandwidth_s_before'])}; the routing LP reached "
            f"{fmt_time(r['bandwidth_s'])} ({bound}), {r['wall_time_s']:.3g} s"
        )
    return (
        f"bandwidth {fmt_time(r['bandwidth_s_before'])} -> {fmt_time(r['bandwidth_s'])} ({bound}), "
        f"{r['paths']} paths, {r['wall_time_s']:.3g} s"
    )


def print_round(entry: dict[str, Any]) -> None:
    """Live progress of --method alternating, on stderr so that stdout stays the result."""
    mark = "*" if entry["accepted"] else " "
    phase = entry["phase"] + (f" (from {entry['trajectory']} start)" if entry.get("trajectory") else "")
    if entry.get("repeats_earlier"):
        print(
            f"  round {entry['round']:>2} {phase:<40} skipped: its traffic relabels traffic solved before; "
            f"this trajectory ends [{entry['wall_time_s']:.1f} s]",
            file=sys.stderr,
            flush=True,
        )
        return
    print(
        f"  round {entry['round']:>2} {phase:<40} iteration {fmt_time(entry['iteration_time_s']):>10} "
        f"(compute {fmt_time(entry['compute_time_s'])}, comm {fmt_time(entry['comm_time_s'])}) {mark} "
        f"[{entry['wall_time_s']:.1f} s]",
        file=sys.stderr,
        flush=True,
    )


def print_solution(args, inst, sol, report, written: bool) -> None:
    c = inst.cluster
    name = inst.name or os.path.basename(args.instance)
    head = f"{name}: {c.servers} servers x {c.degree} x {c.link_bandwidth_gbps:g} Gbps ({c.links})"
    print(head)
    detail = f"method {sol.method}" + (f" [{sol.backend}]" if sol.backend else "")
    among = (
        " (status and bound among its candidate rings: rings_restricted below)"
        if sol.details.get("rings_restricted")
        else ""
    )
    print(f"  status             {sol.status}{among} ({detail}, {sol.wall_time_s:.3f} s)")
    if sol.objective is not None:
        extra = ""
        if sol.bound is not None:
            extra = f", bound {sol.bound:.6g}" + (f", gap {sol.gap:.2%}" if sol.gap is not None else "")
        print(f"  objective          {inst.objective} = {sol.objective:.6g}{extra}")
    if sol.job is not None:  # the split the method chose (recorded in the solution with its mapping)
        p = sol.job["parallelism"]
        print(
            f"  job split          tp{p['tp']} pp{p['pp']} dp{p['dp']} ep{p.get('ep', 1)} mb{p.get('micro_batch', 1)}"
        )
    if sol.topology is not None:
        links = sol.topology.links(c.directed)
        multi = sum(1 for *_, k in links if k > 1)
        jumps = f", jumps {list(sol.topology.jumps)}" if sol.topology.jumps is not None else ""
        print(
            f"  topology           {sum(k for *_, k in links)} links{jumps}"
            + (f" ({multi} pairs with parallel links)" if multi else "")
        )
    for key, value in (sol.details or {}).items():
        short_list = isinstance(value, (list, tuple)) and 0 < len(value) <= 8 and key not in ("mp_links", "rounds")
        if isinstance(value, (str, int, float)) or short_list:
            print(f"  {key:<18} {value}")
    if "reroute" in (sol.details or {}):
        print(f"  rerouted           {reroute_line(sol.details)}")
    if sol.metrics:
        print("\n".join(metrics_lines(sol.metrics)))
    if report is not None:
        print(f"  verified           {'yes' if report.valid else 'NO: ' + report.violations[0]}")
    if written:
        print(f"  written            {args.out}")


def with_newline(text: str) -> str:
    """A table, CSV or JSON text with exactly one final newline (CSV already ends with one)."""
    return text if text.endswith("\n") else text + "\n"


def print_text(text: str) -> None:
    print(with_newline(text), end="")
