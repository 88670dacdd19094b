"""The check of a SimAI ns-3 topology file (``topoopt export --to simai``) against a solution
(docs/guide/export.md).

It reads the file as SimAI does and shares no code with the exporter. ``SetupNetwork``
(``astra-sim-alibabacloud/astra-sim/network_frontend/ns3/common.h``) reads whitespace-separated words,
not lines: ``node_num gpus_per_server nvswitch_num switch_num link_num gpu_type``, the NVSwitch ids, the
switch ids, then ``src dst rate latency error_rate`` ``link_num`` times; every node listed in neither
list is a GPU, and SimAI's main (``AstraSimNetwork.cc``) takes the GPUs to be ``0 .. g-1`` with GPU
``i``'s NVSwitch ``g + i / gpus_per_server``. The file passes when it is the documented layout of the
solution's design and nothing else: ``3n`` nodes, one GPU per server, NVSwitches ``n .. 2n-1`` and
switches ``2n .. 3n-1``, a gpu type SimAI recognises; GPU ``i`` joined once to its NVSwitch (at any
positive rate: no traffic crosses it) and once to switch ``2n + i`` at the server's bandwidth with no
latency; switches ``2n + a`` and ``2n + b`` joined once exactly when the design links servers ``a`` and
``b``, at the rate of all their links and the hop latency; error rates 0; no word after the last link.
"""

from __future__ import annotations

import os
import re
from collections import Counter

from topoopt_ilp.core.checks import brief
from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.solution import Solution
from topoopt_ilp.errors import InputError
from topoopt_ilp.evaluation.ns3 import RATE_GBPS, TIME_US, close, quantity, unjoined_design_pairs
from topoopt_ilp.evaluation.verify import VerifyReport, ViolationList
from topoopt_ilp.files.jsonio import read_text

__all__ = ["check_simai", "simai_violations"]

#: The gpu types ``SetupNetwork`` tells apart; any other word becomes ``GPUType::NONE``.
_KNOWN_GPU_TYPES = frozenset({"A100", "A800", "H100", "H800"})
_INTEGER = re.compile(r"[0-9]{1,9}")
_DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]*)?")
_SHOWN = 10
_GPU, _SWITCH, _NVSWITCH = 0, 1, 2  # SimAI's node types


def simai_violations(instance: Instance, solution: Solution, text: str) -> VerifyReport:
    """Violations of a SimAI topology file (its text) against ``solution``."""
    if solution.topology is None or not solution.has_solution:
        raise InputError(f"the solution holds no design (status {solution.status}): nothing to check a file against")
    n, d = instance.n, instance.d
    words = text.split()
    header = words[:6]
    if len(header) != 6 or not all(_INTEGER.fullmatch(v) for v in header[:5]):
        return VerifyReport(
            ("header: the first words must be node_num gpus_per_server nvswitch_num switch_num link_num gpu_type",)
        )
    nodes, per_server, nvswitches, switches, links = (int(v) for v in header[:5])
    report = ViolationList(_SHOWN)
    add = report.add
    if header[5] not in _KNOWN_GPU_TYPES:
        add("header", f"gpu type {brief(header[5])} is read as NONE; SimAI knows {', '.join(sorted(_KNOWN_GPU_TYPES))}")
    if (nodes, per_server, nvswitches, switches) != (3 * n, 1, n, n):  # the layout's ids cannot be read then
        add(
            "header",
            f"{nodes} nodes, {per_server} gpus per server, {nvswitches} nvswitches, {switches} switches; expected "
            f"{3 * n}, 1, {n}, {n} (a GPU, an NVSwitch and a switch per server)",
        )
        return report.report()
    listed = words[6 : 6 + nvswitches + switches]
    if len(listed) < nvswitches + switches or not all(_INTEGER.fullmatch(v) and int(v) < nodes for v in listed):
        return VerifyReport(
            (*report.report().violations, f"ids: expected {nvswitches + switches} node ids below {nodes}")
        )
    node_type = [_GPU] * nodes
    for v in listed[:nvswitches]:
        node_type[int(v)] = _NVSWITCH
    for v in listed[nvswitches:]:
        node_type[int(v)] = _SWITCH
    gpus = nodes - nvswitches - switches  # as SimAI's main counts them, assuming they come first
    want_types = [_GPU] * n + [_NVSWITCH] * n + [_SWITCH] * n
    if node_type != want_types:
        add(
            "ids", f"the GPUs must be 0..{n - 1}, the NVSwitches {n}..{2 * n - 1} and the switches {2 * n}..{3 * n - 1}"
        )
    body = words[6 + nvswitches + switches :]
    if len(body) != 5 * links:
        add("header", f"the header says {links} links ({5 * links} words), {len(body)} words follow the ids")
    seen: Counter[tuple[int, int]] = Counter()
    rate_gbps, hop_us = instance.cluster.link_bandwidth_gbps, instance.cluster.hop_latency_us
    x = solution.topology.matrix
    for k in range(min(links, len(body) // 5)):
        src, dst, rate_text, delay_text, error = body[5 * k : 5 * k + 5]
        where = f"link {k + 1} ({src} {dst})"
        if not (_INTEGER.fullmatch(src) and _INTEGER.fullmatch(dst)) or max(int(src), int(dst)) >= nodes:
            add("link", f"{where}: the ends must be node ids below {nodes}")
            continue
        rate, latency = quantity(rate_text, RATE_GBPS), quantity(delay_text, TIME_US)
        if rate is None or latency is None:
            add("link", f"{where}: rate {brief(rate_text)} or latency {brief(delay_text)} is not an ns-3 quantity")
            continue
        if not (_DECIMAL.fullmatch(error) and float(error) == 0.0):  # SimAI reads a double
            add("error rate", f"{where}: error rate {brief(error)}, expected 0")
        a, b = sorted((int(src), int(dst)))
        seen[(a, b)] += 1
        kinds = (node_type[a], node_type[b])
        if kinds == (_GPU, _NVSWITCH):
            if rate <= 0.0:  # SimAI's route search divides by every rate it crosses
                add("nvlink", f"{where}: rate {rate_text}, an NVLink needs a positive rate")
            if b != gpus + a // per_server:
                add(
                    "nvlink",
                    f"{where}: GPU {a} is joined to NVSwitch {b}, SimAI puts it behind {gpus + a // per_server}",
                )
        elif kinds == (_GPU, _SWITCH):
            if b != 2 * n + a:
                add("link", f"{where}: GPU {a} is joined to switch {b}, not to its server's switch {2 * n + a}")
            elif not (close(rate, d * rate_gbps) and close(latency, 0.0)):
                add("gpu link", f"{where}: {rate_text} {delay_text}, expected the server's {d} links, 0us")
        elif kinds == (_SWITCH, _SWITCH):
            count = int(x[a - 2 * n, b - 2 * n]) if max(a, b) < 3 * n and min(a, b) >= 2 * n else 0
            if count == 0:
                add("extra link", f"{where}: servers {a - 2 * n} and {b - 2 * n} have no link in the design")
                continue
            if not close(rate, count * rate_gbps):
                add("rate", f"{where}: {rate_text}, the design's {count} link(s) give {count * rate_gbps:g}Gbps")
            if not close(latency, hop_us):
                add("latency", f"{where}: {delay_text}, the cluster's hop latency is {hop_us:g}us")
        else:
            add("link", f"{where}: joins two nodes the layout never joins (GPU, NVSwitch or switch pairs)")
    for (a, b), times in sorted(seen.items()):
        if times > 1:
            add("duplicate", f"nodes {a} and {b} are joined {times} times (SimAI keeps one interface per pair)")
    for i in range(n):
        if not seen[(i, n + i)]:
            add("nvlink", f"GPU {i} is not joined to its NVSwitch {n + i}")
        if not seen[(i, 2 * n + i)]:
            add("gpu link", f"GPU {i} is not joined to its switch {2 * n + i}")
    for a, b in unjoined_design_pairs(x, seen, 2 * n):
        add("missing link", f"servers {a} and {b} are linked in the design, not in the file")
    return report.report()


def check_simai(instance: Instance, solution: Solution, path: str | os.PathLike) -> VerifyReport:
    """Violations of the SimAI topology file in ``path`` against ``solution`` (see the module's docstring)."""
    return simai_violations(instance, solution, read_text(path, InputError))
