"""The check of a cabling plan or OCS configuration against a solution (docs/guide/export.md).

It reads the files itself and shares no code with the exporter (``topoopt_ilp.export``), so that a
bug in one is caught by the other. A plan or configuration passes when it realises exactly the
solution's topology (every link once, nothing else), uses every interface at most once (exactly once
in a regular cluster) and only interfaces 0..d-1, numbers its ports ``server * d + interface``, and,
on an OCS fabric, puts each link on one switch (the same interface index at both ends), so that each
switch's cross-connects are a matching (undirected links) or a permutation (directed links).
"""

from __future__ import annotations

import csv
import os
import re
from collections import Counter
from typing import Any

import numpy as np

from topoopt_ilp.core.checks import brief
from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.solution import Solution
from topoopt_ilp.errors import InputError
from topoopt_ilp.evaluation.verify import VerifyReport, ViolationList
from topoopt_ilp.files.jsonio import read_json

__all__ = ["PLAN_COLUMNS", "PLAN_ROLES", "check_cabling", "check_ocs_config", "plan_violations", "ocs_violations"]

PLAN_COLUMNS = ["link", "server_a", "interface_a", "port_a", "server_b", "interface_b", "port_b", "role"]
PLAN_ROLES = ("mp", "allreduce", "link")
#: The most violations listed of each kind (the count of the rest is said).
_SHOWN = 10


def _topology_counts(solution: Solution, directed: bool) -> Counter[tuple[int, int]]:
    x = solution.topology.matrix
    m = x if directed else np.triu(x, 1)
    rows, cols = np.nonzero(m)
    return Counter({(int(a), int(b)): int(m[a, b]) for a, b in zip(rows, cols)})


def _compare_links(report: ViolationList, found: Counter, solution: Solution, directed: bool) -> None:
    want = _topology_counts(solution, directed)
    arrow = "->" if directed else "-"
    for pair in sorted(set(want) | set(found)):
        w, f = want.get(pair, 0), found.get(pair, 0)
        if f < w:
            report.add("missing link", f"{w - f} of the {w} link(s) {pair[0]}{arrow}{pair[1]} of the solution")
        elif f > w:
            report.add("extra link", f"{f - w} link(s) {pair[0]}{arrow}{pair[1]} beyond the solution's {w}")


def _unused_interfaces(report: ViolationList, used: set, n: int, d: int, sides: tuple[str, ...]) -> None:
    for side in sides:
        for s in range(n):
            for k in range(d):
                if (side, s, k) not in used:
                    report.add("unused interface", f"{side}interface {k} of server {s} (the cluster is regular)")


def _csv_int(text: str) -> int | None:
    """A CSV field as an integer, or None: digits only (with an optional sign), at most 18 of them,
    so that every value a report echoes is short."""
    text = text.strip()
    return int(text) if re.fullmatch(r"[-+]?\d{1,18}", text) else None


def plan_violations(instance: Instance, solution: Solution, rows: list[list[str]], fabric: str) -> VerifyReport:
    """Violations of a cabling plan given as CSV rows (the header first)."""
    n, d, directed = instance.n, instance.d, instance.cluster.directed
    report = ViolationList(_SHOWN)
    if not rows or [c.strip() for c in rows[0]] != PLAN_COLUMNS:
        return VerifyReport((f"header: expected the columns {','.join(PLAN_COLUMNS)}",))
    found: Counter[tuple[int, int]] = Counter()
    used: set[tuple[str, int, int]] = set()
    sides = ("TX ", "RX ") if directed else ("", "")
    for r, row in enumerate(rows[1:], start=2):
        where = f"line {r}"
        if len(row) != len(PLAN_COLUMNS):
            report.add("row", f"{where} has {len(row)} fields, expected {len(PLAN_COLUMNS)}")
            continue
        numbers = [_csv_int(v) for v in row[:7]]
        if None in numbers:
            report.add("row", f"{where}: the first seven fields must be integers of at most 18 digits")
            continue
        link, sa, ia, pa, sb, ib, pb = numbers
        if link != r - 2:
            report.add("row", f"{where}: link number {link}, expected {r - 2}")
        if row[7].strip() not in PLAN_ROLES:
            report.add("row", f"{where}: role {brief(row[7])} is not one of {', '.join(PLAN_ROLES)}")
        ok = True
        for s, i, p, side in ((sa, ia, pa, sides[0]), (sb, ib, pb, sides[1])):
            if not 0 <= s < n:
                report.add("server", f"{where}: server {s} is outside 0..{n - 1}")
                ok = False
                continue
            if not 0 <= i < d:
                report.add("interface", f"{where}: interface {i} of server {s} is outside 0..{d - 1}")
                ok = False
                continue
            if p != s * d + i:
                report.add("port", f"{where}: port {p} for interface {i} of server {s}, expected {s * d + i}")
            key = (side, s, i)
            if key in used:
                report.add("interface", f"{where}: {side}interface {i} of server {s} is used twice")
            used.add(key)
        if not ok:
            continue
        if sa == sb:
            report.add("row", f"{where}: server {sa} is linked to itself")
            continue
        if fabric == "ocs" and ia != ib:
            report.add("switch", f"{where}: interfaces {ia} and {ib} sit on different OCSes (ocs fabric)")
        if not directed and sa > sb:
            sa, sb = sb, sa
        found[(sa, sb)] += 1
    _compare_links(report, found, solution, directed)
    if instance.cluster.regular:
        _unused_interfaces(report, used, n, d, ("TX ", "RX ") if directed else ("",))
    return report.report()


def check_cabling(
    instance: Instance, solution: Solution, path: str | os.PathLike, fabric: str | None = None
) -> VerifyReport:
    """Violations of the cabling plan in ``path`` (CSV, docs/guide/export.md) against ``solution``.
    ``fabric``: ``patch_panel`` or ``ocs`` (default: the instance's ``cost.fabric``, else patch_panel)."""
    fabric = fabric or (instance.cost.fabric if instance.cost is not None and instance.cost.fabric else "patch_panel")
    if fabric not in ("patch_panel", "ocs"):
        raise InputError(f"unknown fabric {fabric!r}; choose patch_panel or ocs")
    _need_topology(solution)
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(
            f"cannot read the cabling plan: {getattr(exc, 'strerror', None) or exc}", source=str(path)
        ) from None
    return plan_violations(instance, solution, rows, fabric)


def _need_topology(solution: Solution) -> None:
    if solution.topology is None or not solution.has_solution:
        raise InputError(f"the solution holds no design (status {solution.status}): nothing to check a plan against")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def ocs_violations(instance: Instance, solution: Solution, data: Any) -> VerifyReport:
    """Violations of an OCS configuration (the parsed JSON of a ``topoopt-ocs-config`` file)."""
    n, d, directed = instance.n, instance.d, instance.cluster.directed
    report = ViolationList(_SHOWN)
    if not isinstance(data, dict):
        return VerifyReport(("file: expected a JSON object",))
    expected = {
        "format": "topoopt-ocs-config",
        "version": 1,
        "servers": n,
        "degree": d,
        "links": instance.cluster.links,
    }
    for key, want in expected.items():
        if data.get(key) != want:
            report.add("header", f"{key} is {data.get(key)!r}, expected {want!r}")
    extra = sorted(set(data) - set(expected) - {"switches"})
    if extra:
        report.add("header", f"unknown key(s) {', '.join(map(str, extra))}")
    switches = data.get("switches")
    if not isinstance(switches, list) or len(switches) != d:
        report.add("switches", f"expected a list of {d} switches (one per interface index)")
        return report.report()
    found: Counter[tuple[int, int]] = Counter()
    for k, sw in enumerate(switches):
        if not isinstance(sw, dict) or set(sw) != {"switch", "connections"} or sw.get("switch") != k:
            report.add("switches", f"entry {k} must be {{'switch': {k}, 'connections': [...]}}")
            continue
        conns = sw["connections"]
        if not isinstance(conns, list):
            report.add("switches", f"switch {k}: connections must be a list")
            continue
        ins: set[int] = set()
        outs: set[int] = set()
        for c in conns:
            a, b = (_int(v) for v in c) if isinstance(c, list) and len(c) == 2 else (None, None)
            if a is None or b is None or not (0 <= a < n and 0 <= b < n):
                report.add("connection", f"switch {k}: {c!r} is not a pair of ports in 0..{n - 1}")
                continue
            if a == b:
                report.add("connection", f"switch {k}: port {a} is connected to itself")
                continue
            if directed:
                for port, seen, what in ((a, ins, "input"), (b, outs, "output")):
                    if port in seen:
                        report.add("switch", f"switch {k}: {what} port {port} is used twice (not a permutation)")
                    seen.add(port)
                found[(a, b)] += 1
            else:
                for port in (a, b):
                    if port in ins:
                        report.add("switch", f"switch {k}: port {port} is used twice (not a matching)")
                    ins.add(port)
                found[(min(a, b), max(a, b))] += 1
        if instance.cluster.regular:
            for seen, what in ((ins, "input port"), (outs, "output port")) if directed else ((ins, "port"),):
                missing = sorted(set(range(n)) - seen)
                if missing:
                    shape = "permutation" if directed else "perfect matching"
                    report.add(
                        "switch", f"switch {k}: {what}(s) {missing[:5]} unused: not a {shape} (the cluster is regular)"
                    )
    _compare_links(report, found, solution, directed)
    return report.report()


def check_ocs_config(instance: Instance, solution: Solution, path: str | os.PathLike) -> VerifyReport:
    """Violations of the OCS configuration in ``path`` (docs/guide/export.md) against ``solution``."""
    _need_topology(solution)
    return ocs_violations(instance, solution, read_json(path, InputError))
