"""The design as the topology file of ASTRA-sim's ns-3 back end (docs/guide/export.md).

The format is the one ``SetupNetwork`` in astra-sim/astra-network-ns3 (``scratch/common.h``) reads
(it comes from HPCC's ns-3 simulator)::

    <nodes> <switches> <links>
    <switch id> <switch id> ...
    <src> <dst> <rate> <latency> <error rate>      (one line per link, e.g. "12 13 100Gbps 1us 0")

That back end routes over shortest paths (all of them, ECMP) and forwards at switches only: a
host never relays. A direct-connect design forwards at its servers, so each server ``i`` is written
as two nodes: host ``i`` (the traffic's end point) and switch ``n + i`` (its forwarding), joined by a
link of the server's whole bandwidth (``degree x`` the link rate) and no latency. A link of the design
joins switches ``n + a`` and ``n + b`` at the link rate and the cluster's hop latency. The back end
keeps one interface per neighbour pair, so the parallel links of a pair are one line with their summed
rate. Its links are full duplex: a directed design is written when its links are symmetric (as many
``a -> b`` as ``b -> a``), and refused otherwise.
"""

from __future__ import annotations

import os
from typing import Any

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.solution import Solution
from topoopt_ilp.errors import InputError
from topoopt_ilp.export.common import checked_options, require_design, write_text
from topoopt_ilp.files import check_writable

__all__ = ["decimal", "forwarding_link_lines", "ns3_lines", "write_ns3"]


def decimal(value: float) -> str:
    """``value`` in fixed-point notation (ns-3 reads a rate or a time as digits and a point, no exponent)."""
    text = f"{value:.9f}".rstrip("0").rstrip(".")
    return text or "0"


def forwarding_link_lines(instance: Instance, solution: Solution, first_switch: int, format: str) -> list[str]:
    """The link lines of each server's host and forwarding switch: host ``i`` to switch ``first_switch + i``
    at the server's whole bandwidth and no latency, then one line per linked pair of servers between their
    switches at the rate of all the pair's links and the hop latency (shared by ``ns3`` and ``simai``)."""
    x = solution.topology.matrix
    n = instance.n
    if instance.cluster.directed and (x != x.T).any():
        a, b = (int(v) for v in next(zip(*(x != x.T).nonzero())))
        raise InputError(
            f"ns-3 point-to-point links are full duplex: the design has {x[a, b]} link(s) {a}->{b} but "
            f"{x[b, a]} {b}->{a}, which the {format} format cannot write"
        )
    rate = instance.cluster.link_bandwidth_gbps
    latency = f"{decimal(instance.cluster.hop_latency_us)}us"
    s = first_switch
    pairs = [(a, b, int(x[a, b])) for a in range(n) for b in range(a + 1, n) if x[a, b] > 0]
    lines = [f"{i} {s + i} {decimal(instance.d * rate)}Gbps 0us 0" for i in range(n)]
    lines += [f"{s + a} {s + b} {decimal(count * rate)}Gbps {latency} 0" for a, b, count in pairs]
    return lines


def ns3_lines(instance: Instance, solution: Solution) -> list[str]:
    """The file's lines (see the module's docstring)."""
    n = instance.n
    links = forwarding_link_lines(instance, solution, n, "ns3")
    return [f"{2 * n} {n} {len(links)}", " ".join(str(n + i) for i in range(n)), *links]


def write_ns3(instance: Instance, solution: Solution, path: str | os.PathLike, **options: Any) -> None:
    """ns-3 topology (text) for ASTRA-sim's ns-3 back end: each server a host and its forwarding switch."""
    checked_options(options, fabric=False)
    check_writable(path, "-o")
    require_design(instance, solution)
    write_text(path, "\n".join(ns3_lines(instance, solution)) + "\n")
