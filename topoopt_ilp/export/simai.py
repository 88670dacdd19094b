"""The design as the topology file of SimAI's ns-3 back end (docs/guide/export.md).

SimAI (github.com/aliyun/SimAI) reads the link lines of ASTRA-sim's ns-3 file under a longer header
(``SetupNetwork`` in ``astra-sim-alibabacloud/astra-sim/network_frontend/ns3/common.h``)::

    <nodes> <gpus per server> <nvswitches> <switches> <links> <gpu type>
    <nvswitch id> ... <switch id> ...
    <src> <dst> <rate> <latency> <error rate>      (one line per link)

Its main (``network_frontend/ns3/AstraSimNetwork.cc``) takes the GPUs to be nodes ``0 .. g-1``, the
NVSwitches the next ids and GPU ``i``'s NVSwitch to be ``g + i / gpus_per_server``; it routes over
shortest paths that forward at switches and NVSwitches, never at a GPU. A server of the design is one
accelerator, so server ``i`` is written as GPU ``i`` behind its own NVSwitch ``n + i`` (``gpus_per_server``
1, the NVLink at the rate and latency SimAI's topology generator uses by default,
``inputs/topo/gen_Topo_Template.py``) and with its forwarding switch ``2n + i``, joined as in the ns3
format: at the server's whole bandwidth and no latency, and the design's links between the switches.
With one GPU per NVSwitch no traffic crosses an NVSwitch, so the NVLink's figures do not enter a result.
"""

from __future__ import annotations

import os
from typing import Any

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.solution import Solution
from topoopt_ilp.errors import InputError
from topoopt_ilp.export.common import require_design, write_text
from topoopt_ilp.export.ns3 import forwarding_link_lines
from topoopt_ilp.files import check_writable

__all__ = ["GPU_TYPES", "NVLINK_LATENCY", "NVLINK_RATE", "simai_lines", "write_simai"]

#: The GPU types ``SetupNetwork`` recognises (any other word is read as ``NONE``); the first is the default,
#: the default of SimAI's topology generator.
GPU_TYPES = ("H100", "H800", "A100", "A800")
#: A GPU's link to its NVSwitch: the defaults of SimAI's topology generator (``nvlink_bw``, ``nv_latency``).
NVLINK_RATE = "2880Gbps"
NVLINK_LATENCY = "0.000025ms"


def simai_lines(instance: Instance, solution: Solution, gpu_type: str = GPU_TYPES[0]) -> list[str]:
    """The file's lines (see the module's docstring)."""
    if gpu_type not in GPU_TYPES:
        raise InputError(f"unknown gpu type {gpu_type!r}; choose one of {', '.join(GPU_TYPES)}")
    n = instance.n
    nvlinks = [f"{i} {n + i} {NVLINK_RATE} {NVLINK_LATENCY} 0" for i in range(n)]
    links = nvlinks + forwarding_link_lines(instance, solution, 2 * n, "simai")
    return [f"{3 * n} 1 {n} {n} {len(links)} {gpu_type}", " ".join(str(v) for v in range(n, 3 * n)), *links]


def write_simai(instance: Instance, solution: Solution, path: str | os.PathLike, **options: Any) -> None:
    """SimAI ns-3 topology (text): each server a GPU behind its NVSwitch and its forwarding switch; option gpu_type."""
    unknown = sorted(set(options) - {"gpu_type"})
    if unknown:
        raise InputError(f"the simai format takes no option {', '.join(unknown)}")
    check_writable(path, "-o")
    require_design(instance, solution)
    lines = simai_lines(instance, solution, options.get("gpu_type") or GPU_TYPES[0])
    write_text(path, "\n".join(lines) + "\n")
