"""The AllReduce rings of a design as an MSCCL algorithm (XML) (docs/guide/export.md).

MSCCL (microsoft/msccl-tools writes the format, ``msccl/language/ir.py``; the executor
Azure/msccl-executor-nccl reads it, ``src/misc/msccl/msccl_parser.cc``) runs one algorithm per
collective call on one communicator, so a file holds the rings of **one** AllReduce group: rank
``i`` of the algorithm is the ``i``-th smallest server of the group.

Chunks. Ring ``r`` of the group carries the share ``f_r`` of its bytes. It gets ``m_r`` chunks per
ring position, ``M = sum_r m_r``, so a loop of the algorithm is ``nchunksperloop = k * M`` chunks
(k ranks) and ring ``r`` owns the chunks ``[k * o_r, k * (o_r + m_r))`` with ``o_r = sum_{q<r} m_q``;
its segment ``s`` (``0..k-1``) is the ``m_r`` chunks from ``k * o_r + s * m_r``. The counts are the
largest-remainder rounding of ``f_r * M`` for the smallest ``M`` (from the number of rings up to
``MAX_COUNT``) that represents every share within ``SHARE_TOLERANCE``; when no ``M`` does, the one
whose largest error is least (below ``1 / MAX_COUNT`` for every share of at least ``1 / MAX_COUNT``).
A ring whose share is 0 is left out.

Steps. Ring ``r`` is channel ``r``; at ring position ``p`` (rank ``v_p``) it is one thread block
that receives from ``v_{p-1}`` and sends to ``v_{p+1}``, and runs the ring AllReduce
(reduce-scatter, then all-gather; msccl-tools' ``examples/mscclang/allreduce_a100_ring.py``) on
whole segments, ``2k - 1`` steps::

    step 0           s     send segment p of the input
    step t, 1..k-2   rrs   receive segment p-t, add the input's, send the sum
    step k-1         rrcs  receive segment p+1, add the input's, write it to the output, send it
    step k-1+t, t=1..k-2   rcs   receive segment p+1-t, write it to the output, send it
    step 2k-2        r     receive segment p+2, write it to the output

Every step of a thread block reads an input segment before its block writes that segment of the
output, and no two blocks touch the same chunk, so the program is right in place (input and
output one buffer) and out of place: ``inplace="1" outofplace="1"``. No step depends on another
thread block, and a hop between ring neighbours must be a link of the design: a ring over a
forwarded hop is refused.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.solution import Solution
from topoopt_ilp.core.traffic import effective_demand
from topoopt_ilp.errors import InputError
from topoopt_ilp.export.common import require_design, write_text
from topoopt_ilp.files import check_writable

__all__ = [
    "MAX_COUNT",
    "MAX_STEPS",
    "MAX_CHANNELS",
    "MAX_XML_NODES",
    "SHARE_TOLERANCE",
    "MscclRing",
    "chunk_counts",
    "msccl_rings",
    "msccl_xml",
    "write_msccl",
]

#: The most chunks one step may move (the executor's ``MSCCL_MAX_COUNT`` is 72, exclusive).
MAX_COUNT = 71
#: The most steps of one thread block (``MSCCL_MAX_NUM_STEPS`` of msccl-executor-nccl).
MAX_STEPS = 64
#: The most channels (NCCL's ``MAXCHANNELS``).
MAX_CHANNELS = 32
#: The most XML elements the executor's parser keeps for one rank: ``algo``, every ``gpu``, and the
#: rank's own ``tb`` and ``step`` elements ("XML parser is limited to 1024 nodes").
MAX_XML_NODES = 1024
#: How far a ring's share of the group's bytes may be from its chunk count over ``M`` when some
#: ``M <= MAX_COUNT`` gets there.
SHARE_TOLERANCE = 0.005
#: Protocol written to ``proto`` (NCCL's Simple protocol: every message size).
PROTOCOL = "Simple"


@dataclass(frozen=True)
class MscclRing:
    """One ring as the file runs it: its index in the solution, its ranks in ring order, its chunks
    per segment (``count``) and the first chunk it owns."""

    ring: int
    ranks: tuple[int, ...]
    count: int
    first_chunk: int


def chunk_counts(shares: Sequence[float]) -> tuple[list[int], int]:
    """``(m, M)``: chunks per segment of each ring and their sum, by the rule of the module's docstring."""
    best: tuple[float, list[int], int] | None = None
    for total in range(len(shares), MAX_COUNT + 1):
        scaled = [f * total for f in shares]
        counts = [math.floor(v) for v in scaled]
        by_remainder = sorted(range(len(shares)), key=lambda r: (-(scaled[r] - counts[r]), r))
        for r in by_remainder[: total - sum(counts)]:
            counts[r] += 1
        if min(counts) < 1:
            continue
        error = max(abs(m / total - f) for m, f in zip(counts, shares))
        if error <= SHARE_TOLERANCE:
            return counts, total
        if best is None or error < best[0]:
            best = (error, counts, total)
    if best is None:
        smallest = min(shares)
        raise InputError(
            f"a ring carries {smallest:.6g} of its group's bytes, less than one chunk in {MAX_COUNT} "
            f"(MSCCL moves at most {MAX_COUNT} chunks per step)"
        )
    return best[1], best[2]


def _group(instance: Instance, solution: Solution, group: Any) -> tuple[int, tuple[int, ...]]:
    """The chosen AllReduce group and its members (sorted: rank i is the i-th)."""
    demand, _ = effective_demand(instance, solution.placement)
    groups = demand.allreduce
    ringed = sorted(set(solution.routing.rings.group.tolist()))
    if not ringed:
        raise InputError("the solution records no AllReduce rings: nothing to write as an MSCCL algorithm")
    if group is None:
        if len(ringed) > 1:
            raise InputError(
                f"the solution rings {len(ringed)} AllReduce groups ({', '.join(map(str, ringed))}) and an MSCCL "
                "algorithm runs one: choose it with --group G"
            )
        group = ringed[0]
    if isinstance(group, bool) or not isinstance(group, int) or not 0 <= group < len(groups):
        raise InputError(f"--group must be an AllReduce group 0..{len(groups) - 1}, got {group!r}")
    if group not in ringed:
        raise InputError(f"the solution records no rings for AllReduce group {group}")
    return group, tuple(sorted(int(m) for m in groups[group].members))


def msccl_rings(
    instance: Instance, solution: Solution, group: int | None = None
) -> tuple[int, tuple[int, ...], list[MscclRing]]:
    """``(group, members, rings)``: the rings of one AllReduce group as the file runs them. Refuses (exit 2) a
    solution without rings, several ringed groups without ``group``, a hop that is not a link, and a
    group beyond MSCCL's limits."""
    group, members = _group(instance, solution, group)
    rank_of = {server: rank for rank, server in enumerate(members)}
    x = solution.topology.matrix
    chosen: list[tuple[int, list[int], float]] = []
    for r, (g, order, share) in enumerate(solution.routing.rings.to_lists()):
        if g != group or share <= 0:
            continue
        for a, b in zip(order, order[1:] + order[:1]):
            if x[a, b] <= 0:
                raise InputError(
                    f"ring {r} of AllReduce group {group} hops from server {a} to server {b}, which share no link "
                    "(a forwarded hop): the msccl format writes rings over direct links only"
                )
        chosen.append((r, order, share))
    k, rings = len(members), len(chosen)
    _within_limits(group, k, rings)
    total_share = sum(share for _, _, share in chosen)
    counts, _ = chunk_counts([share / total_share for _, _, share in chosen])
    out, first = [], 0
    for (r, order, _), m in zip(chosen, counts):
        out.append(MscclRing(r, tuple(rank_of[s] for s in order), m, first))
        first += k * m
    return group, members, out


def _within_limits(group: int, k: int, rings: int) -> None:
    steps, nodes = 2 * k - 1, 1 + k + rings * 2 * k
    why = None
    if steps > MAX_STEPS:
        why = f"its ring of {k} ranks takes {steps} steps per thread block, MSCCL runs at most {MAX_STEPS}"
    elif rings > MAX_CHANNELS:
        why = f"its {rings} rings need one channel each, MSCCL has {MAX_CHANNELS}"
    elif nodes > MAX_XML_NODES:
        why = f"each rank's part of the file has {nodes} XML elements, MSCCL's parser keeps {MAX_XML_NODES}"
    if why:
        raise InputError(f"AllReduce group {group} does not fit in an MSCCL algorithm: {why}")


def _step(s: int, kind: str, src: tuple[str, int], dst: tuple[str, int], count: int) -> str:
    return (
        f'<step s="{s}" type="{kind}" srcbuf="{src[0]}" srcoff="{src[1]}" dstbuf="{dst[0]}" dstoff="{dst[1]}" '
        f'cnt="{count}" depid="-1" deps="-1" hasdep="0"/>'
    )


def _ring_steps(ring: MscclRing, position: int) -> list[str]:
    """The ``2k - 1`` steps of ``ring`` at ``position`` (see the module's docstring)."""
    k, m = len(ring.ranks), ring.count

    def seg(s: int) -> int:
        return ring.first_chunk + (s % k) * m

    unused_src, unused_dst = ("i", -1), ("o", -1)
    p = position
    steps = [_step(0, "s", ("i", seg(p)), unused_dst, m)]
    steps += [_step(t, "rrs", ("i", seg(p - t)), unused_dst, m) for t in range(1, k - 1)]
    steps.append(_step(k - 1, "rrcs", ("i", seg(p + 1)), ("o", seg(p + 1)), m))
    steps += [_step(k - 1 + t, "rcs", unused_src, ("o", seg(p + 1 - t)), m) for t in range(1, k - 1)]
    steps.append(_step(2 * k - 2, "r", unused_src, ("o", seg(p + 2)), m))
    return steps


def msccl_xml(instance: Instance, solution: Solution, group: int | None = None) -> str:
    """The file's text: one comment line naming the group and its ranks' servers, then the ``algo``."""
    group, members, rings = msccl_rings(instance, solution, group)
    k = len(members)
    chunks = sum(ring.count for ring in rings) * k
    ranks = " ".join(f"{rank}:{server}" for rank, server in enumerate(members))
    lines = [
        f"<!-- topoopt-ilp: the rings of AllReduce group {group}; rank:server {ranks} -->",
        f'<algo name="topoopt_allreduce_group{group}_{len(rings)}rings" proto="{PROTOCOL}" '
        f'nchannels="{len(rings)}" nchunksperloop="{chunks}" ngpus="{k}" coll="allreduce" inplace="1" '
        f'outofplace="1" minBytes="0" maxBytes="0">',
    ]
    for rank in range(k):
        lines.append(f'  <gpu id="{rank}" i_chunks="{chunks}" o_chunks="{chunks}" s_chunks="0">')
        for channel, ring in enumerate(rings):
            p = ring.ranks.index(rank)
            nxt, prev = ring.ranks[(p + 1) % k], ring.ranks[(p - 1) % k]
            lines.append(f'    <tb id="{channel}" send="{nxt}" recv="{prev}" chan="{channel}">')
            lines += [f"      {step}" for step in _ring_steps(ring, p)]
            lines.append("    </tb>")
        lines.append("  </gpu>")
    lines.append("</algo>")
    return "\n".join(lines) + "\n"


def write_msccl(instance: Instance, solution: Solution, path: str | os.PathLike, **options: Any) -> None:
    """MSCCL algorithm (XML): the rings of one AllReduce group as a ring AllReduce; option ``group``."""
    _only_group_option(options)
    check_writable(path, "-o")
    require_design(instance, solution)
    write_text(path, msccl_xml(instance, solution, options.get("group")))


def _only_group_option(options: Mapping[str, Any]) -> None:
    unknown = sorted(set(options) - {"group"})
    if unknown:
        raise InputError(f"the msccl format takes no option {', '.join(unknown)}")
