"""A computed AllGather schedule (``topoopt collective ... --to msccl``) as an MSCCL algorithm (XML)
(docs/guide/collectives.md).

The format is the one of :mod:`topoopt_ilp.export.msccl` (microsoft/msccl-tools writes it,
``msccl/language/ir.py``; Azure/msccl-executor-nccl reads it, ``src/misc/msccl/msccl_parser.cc``),
with ``coll="allgather"``. Rank ``i`` is the collective's ``i``-th server; every send of the
schedule must be between participants (MSCCL has no relay outside the communicator).

Buffers. A rank's input holds its ``C`` chunks; the output holds the ``P * C`` chunks of all ranks,
chunk id ``i * C + j`` (the ``j``-th piece of rank ``i``, the schedule's chunk id) at output
offset ``i * C + j``. The program runs out of place only (``inplace="0"``): in place, MSCCL's
AllGather input sits inside the output at the rank's own offset.

Thread blocks, on channel 0, per rank:

- block 0 copies the rank's own chunks from its input to its output (``cpy``);
- one send block per out-neighbour the schedule uses (``send`` = the neighbour, ``recv`` = -1);
- one receive block per in-neighbour the schedule uses (``recv`` = the neighbour, ``send`` = -1).

A block's steps follow the schedule's order (step, then chunk id), so the sender's and the
receiver's block of one link agree on the message order. A receive writes the chunk to the output
(``r``). A send of the rank's own chunk reads the input; a send of a received chunk reads the
output and depends (``depid``/``deps``) on the receive step that wrote it, which signals
(``hasdep="1"``). The schedule's sends all go one step after the chunk arrived, so no dependency
points forward and the program cannot deadlock. A send to a server that already holds the chunk
(at the start of its step, or from another sender in the same step) is dropped: it carries
nothing, and two receives of one chunk would write one output chunk in no fixed order.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from topoopt_ilp.core.collective import Collective, CollectiveSchedule, Send
from topoopt_ilp.errors import InputError
from topoopt_ilp.export.common import write_text
from topoopt_ilp.export.msccl import MAX_STEPS, MAX_XML_NODES, PROTOCOL
from topoopt_ilp.files import check_writable

__all__ = ["useful_sends", "msccl_schedule_xml", "write_msccl_schedule"]


@dataclass(frozen=True)
class _Receipt:
    """Where a rank got a chunk: the receive block's peer and the step index within that block."""

    peer: int
    index: int


def useful_sends(collective: Collective, schedule: CollectiveSchedule) -> list[Send]:
    """The schedule's sends in (step, chunk, src, dst) order, less those to a server that already
    holds the chunk (it holds its own, and the first receipt of a chunk wins)."""
    per = collective.chunks
    rank = {s: i for i, s in enumerate(collective.servers)}
    holds = {(rank[s], rank[s] * per + j) for s in collective.servers for j in range(per)}
    out = []
    for send in sorted(schedule.sends, key=lambda s: (s.step, s.chunk, s.src, s.dst)):
        for server in (send.src, send.dst):
            if server not in rank:
                raise InputError(
                    f"the schedule relays chunk {send.chunk} through server {server}, which is not in the collective "
                    "(an MSCCL algorithm runs on the collective's ranks only)"
                )
        if (rank[send.dst], send.chunk) in holds:
            continue
        holds.add((rank[send.dst], send.chunk))
        out.append(send)
    return out


def _step(s: int, kind: str, src: tuple[str, int], dst: tuple[str, int], dep: tuple[int, int] | None, signals: bool):
    depid, deps = dep if dep is not None else (-1, -1)
    return (
        f'<step s="{s}" type="{kind}" srcbuf="{src[0]}" srcoff="{src[1]}" dstbuf="{dst[0]}" dstoff="{dst[1]}" '
        f'cnt="1" depid="{depid}" deps="{deps}" hasdep="{int(signals)}"/>'
    )


def msccl_schedule_xml(collective: Collective, schedule: CollectiveSchedule) -> str:
    """The file's text: a comment naming the ranks' servers, then the ``algo`` (module docstring)."""
    if collective.kind != "allgather":
        raise InputError(f"--to msccl writes AllGather schedules, not {collective.kind}")
    per, k = collective.chunks, len(collective.servers)
    rank = {s: i for i, s in enumerate(collective.servers)}
    sends = useful_sends(collective, schedule)
    out_peers = [sorted({rank[s.dst] for s in sends if rank[s.src] == r}) for r in range(k)]
    in_peers = [sorted({rank[s.src] for s in sends if rank[s.dst] == r}) for r in range(k)]
    # receive steps first: a send's dependency names the receive block's id and step index
    recv_steps: list[dict[int, list[str]]] = [{p: [] for p in in_peers[r]} for r in range(k)]
    receipt: dict[tuple[int, int], _Receipt] = {}
    relayed = {(rank[s.src], s.chunk) for s in sends if s.chunk // per != rank[s.src]}
    for s in sends:
        r, p = rank[s.dst], rank[s.src]
        steps = recv_steps[r][p]
        receipt[(r, s.chunk)] = _Receipt(p, len(steps))
        steps.append((s.chunk, (r, s.chunk) in relayed))
    tb_id = [{("send", p): 1 + i for i, p in enumerate(out_peers[r])} for r in range(k)]
    for r in range(k):
        tb_id[r].update({("recv", p): 1 + len(out_peers[r]) + i for i, p in enumerate(in_peers[r])})
    send_steps: list[dict[int, list[str]]] = [{p: [] for p in out_peers[r]} for r in range(k)]
    for s in sends:
        r, c = rank[s.src], s.chunk
        steps = send_steps[r][rank[s.dst]]
        if c // per == r:
            steps.append(_step(len(steps), "s", ("i", c % per), ("o", -1), None, False))
        else:
            got = receipt[(r, c)]
            dep = (tb_id[r][("recv", got.peer)], got.index)
            steps.append(_step(len(steps), "s", ("o", c), ("o", -1), dep, False))
    total = k * per
    ranks = " ".join(f"{i}:{s}" for i, s in enumerate(collective.servers))
    lines = [
        f"<!-- topoopt-ilp: an AllGather schedule of {per} chunk(s) per rank; rank:server {ranks} -->",
        f'<algo name="topoopt_allgather_{k}ranks_{per}chunks" proto="{PROTOCOL}" nchannels="1" '
        f'nchunksperloop="{total}" ngpus="{k}" coll="allgather" inplace="0" outofplace="1" minBytes="0" maxBytes="0">',
    ]
    for r in range(k):
        blocks = [("-1", "-1", [_step(j, "cpy", ("i", j), ("o", r * per + j), None, False) for j in range(per)])]
        blocks += [(str(p), "-1", send_steps[r][p]) for p in out_peers[r]]
        for p in in_peers[r]:
            blocks.append(
                (
                    "-1",
                    str(p),
                    [_step(i, "r", ("i", -1), ("o", c), None, sig) for i, (c, sig) in enumerate(recv_steps[r][p])],
                )
            )
        _within_limits(r, blocks)
        lines.append(f'  <gpu id="{r}" i_chunks="{per}" o_chunks="{total}" s_chunks="0">')
        for i, (send, recv, steps) in enumerate(blocks):
            lines.append(f'    <tb id="{i}" send="{send}" recv="{recv}" chan="0">')
            lines += [f"      {step}" for step in steps]
            lines.append("    </tb>")
        lines.append("  </gpu>")
    lines.append("</algo>")
    return "\n".join(lines) + "\n"


def _within_limits(r: int, blocks: list) -> None:
    longest = max(len(steps) for _, _, steps in blocks)
    nodes = 1 + len(blocks) + sum(len(steps) for _, _, steps in blocks)
    if longest > MAX_STEPS:
        raise InputError(
            f"rank {r} has a thread block of {longest} steps; MSCCL runs at most {MAX_STEPS} (fewer chunks or servers)"
        )
    if nodes > MAX_XML_NODES:
        raise InputError(f"rank {r}'s part of the file has {nodes} XML elements, MSCCL's parser keeps {MAX_XML_NODES}")


def write_msccl_schedule(path: str | os.PathLike, collective: Collective, schedule: CollectiveSchedule) -> None:
    """Write :func:`msccl_schedule_xml` to ``path`` atomically."""
    check_writable(path, "-o")
    write_text(path, msccl_schedule_xml(collective, schedule))
