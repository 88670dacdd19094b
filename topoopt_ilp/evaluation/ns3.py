"""The check of an ns-3 topology file (``topoopt export --to ns3``) against a solution
(docs/guide/export.md).

It reads the file as ASTRA-sim's ns-3 back end does (astra-sim/astra-network-ns3,
``scratch/common.h``: a header ``nodes switches links``, the switch ids, then ``src dst rate latency
error_rate`` per link) and shares no code with the exporter. The file passes when it describes the
solution's design in the documented layout and nothing else: ``2n`` nodes of which the switches are
exactly ``n .. 2n-1``; host ``i`` joined once, to switch ``n + i`` only, at ``degree x`` the link rate
with no latency; switches ``n + a`` and ``n + b`` joined once exactly when the design links servers
``a`` and ``b``, at the rate of all their links and the cluster's hop latency; error rates 0; as many
link lines as the header says.
"""

from __future__ import annotations

import os
import re
from collections import Counter

import numpy as np

from topoopt_ilp.core.checks import brief
from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.solution import Solution
from topoopt_ilp.errors import InputError
from topoopt_ilp.evaluation.verify import VerifyReport, ViolationList
from topoopt_ilp.files.jsonio import read_text

__all__ = ["RATE_GBPS", "TIME_US", "check_ns3", "close", "ns3_violations", "quantity", "unjoined_design_pairs"]

#: ns-3's rate units (``DataRate``) we read, in Gbit/s, and its time units (``Time``), in microseconds.
RATE_GBPS = {"bps": 1e-9, "Kbps": 1e-6, "Mbps": 1e-3, "Gbps": 1.0, "Tbps": 1e3}
TIME_US = {"s": 1e6, "ms": 1e3, "us": 1.0, "ns": 1e-3, "ps": 1e-6}
_QUANTITY = re.compile(r"([0-9]+(?:\.[0-9]*)?)([A-Za-z]+)")
_INTEGER = re.compile(r"[0-9]{1,9}")
_REL_TOL = 1e-9
_SHOWN = 10


def quantity(text: str, units: dict[str, float]) -> float | None:
    """An ns-3 quantity such as ``100Gbps`` or ``1us`` in the unit of ``units`` (None when it is not one)."""
    match = _QUANTITY.fullmatch(text)
    if match is None or match.group(2) not in units:
        return None
    return float(match.group(1)) * units[match.group(2)]


def close(a: float, b: float) -> bool:
    """Equal up to a relative 1e-9 (rates and times written in decimal)."""
    return abs(a - b) <= _REL_TOL * max(abs(a), abs(b), 1.0)


def unjoined_design_pairs(x: np.ndarray, joined: Counter[tuple[int, int]], first_switch: int) -> list[tuple[int, int]]:
    """The pairs of servers ``a < b`` the design ``x`` links whose switches ``first_switch + a`` and
    ``first_switch + b`` are not ``joined`` (pairs of node ids, smaller first)."""
    upper = np.triu(np.maximum(x, x.T), 1)
    s = first_switch
    return [(int(a), int(b)) for a, b in zip(*upper.nonzero()) if not joined[(s + int(a), s + int(b))]]


def ns3_violations(instance: Instance, solution: Solution, text: str) -> VerifyReport:
    """Violations of an ns-3 topology file (its text) against ``solution``."""
    if solution.topology is None or not solution.has_solution:
        raise InputError(f"the solution holds no design (status {solution.status}): nothing to check a file against")
    n, d = instance.n, instance.d
    x = solution.topology.matrix
    lines = [line.split() for line in text.splitlines()]
    report = ViolationList(_SHOWN)
    add = report.add
    header = lines[0] if lines else []
    if len(header) != 3 or not all(_INTEGER.fullmatch(v) for v in header):
        return VerifyReport(("header: the first line must be three integers: nodes switches links",))
    nodes, switches, links = (int(v) for v in header)
    if nodes != 2 * n or switches != n:
        add(
            "header",
            f"{nodes} nodes and {switches} switches, expected {2 * n} and {n} (a host and a switch per server)",
        )
    ids = lines[1] if len(lines) > 1 else []
    if sorted(ids, key=lambda v: (len(v), v)) != [str(s) for s in range(n, 2 * n)]:
        add("switches", f"the switch ids must be {n}..{2 * n - 1}, one each (line 2)")
    body = [(i + 3, line) for i, line in enumerate(lines[2:]) if line]
    if len(body) != links:
        add("header", f"the header says {links} links, the file has {len(body)} link lines")
    seen: Counter[tuple[int, int]] = Counter()
    for number, fields in body:
        where = f"line {number}"
        if len(fields) != 5 or not (_INTEGER.fullmatch(fields[0]) and _INTEGER.fullmatch(fields[1])):
            add("line", f"{where}: expected 'src dst rate latency error_rate'")
            continue
        a, b = sorted((int(fields[0]), int(fields[1])))
        rate, latency = quantity(fields[2], RATE_GBPS), quantity(fields[3], TIME_US)
        if rate is None or latency is None:
            add("line", f"{where}: rate {brief(fields[2])} or latency {brief(fields[3])} is not an ns-3 quantity")
            continue
        if fields[4] not in ("0", "0.0"):
            add("error rate", f"{where}: error rate {fields[4]}, expected 0")
        seen[(a, b)] += 1
        if b >= 2 * n or a == b:
            add("link", f"{where}: nodes {a} and {b} are not two of the {2 * n} nodes")
        elif a < n:  # a host: only to its own switch
            if b != n + a:
                add("link", f"{where}: host {a} is joined to node {b}, not to its switch {n + a}")
            elif not (close(rate, d * instance.cluster.link_bandwidth_gbps) and close(latency, 0.0)):
                add(
                    "host link",
                    f"{where}: host {a}'s link is {fields[2]} {fields[3]}, expected the server's {d} links, 0us",
                )
        else:
            count = int(x[a - n, b - n])
            want = count * instance.cluster.link_bandwidth_gbps
            if count == 0:
                add("extra link", f"{where}: servers {a - n} and {b - n} have no link in the design")
            elif not close(rate, want):
                add(
                    "rate",
                    f"{where}: servers {a - n}-{b - n} at {fields[2]}, the design's {count} link(s) give {want:g}Gbps",
                )
            if count and not close(latency, instance.cluster.hop_latency_us):
                add(
                    "latency",
                    f"{where}: {fields[3]}, the cluster's hop latency is {instance.cluster.hop_latency_us:g}us",
                )
    for (a, b), times in sorted(seen.items()):
        if times > 1:
            add("duplicate", f"nodes {a} and {b} are joined on {times} lines (the back end keeps one)")
    for i in range(n):
        if not seen[(i, n + i)]:
            add("host link", f"host {i} is not joined to its switch {n + i}")
    for a, b in unjoined_design_pairs(x, seen, n):
        add("missing link", f"servers {a} and {b} are linked in the design, not in the file")
    return report.report()


def check_ns3(instance: Instance, solution: Solution, path: str | os.PathLike) -> VerifyReport:
    """Violations of the ns-3 topology file in ``path`` against ``solution`` (see the module's docstring)."""
    text = read_text(path, InputError)
    return ns3_violations(instance, solution, text)
