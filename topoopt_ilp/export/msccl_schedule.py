"""A computed AllGather or AllReduce schedule (``topoopt collective ... --to msccl``) as an MSCCL
algorithm (XML) (docs/guide/collectives.md).

The format is the one of :mod:`topoopt_ilp.export.msccl` (microsoft/msccl-tools writes it,
``msccl/language/ir.py``; Azure/msccl-executor-nccl reads it, ``src/misc/msccl/msccl_parser.cc``),
with ``coll`` the collective. Rank ``i`` is the collective's ``i``-th server; every send of the
schedule must be between participants (MSCCL has no relay outside the communicator).

Buffers. AllGather: a rank's input holds its ``C`` chunks; the output holds the ``P * C`` chunks
of all ranks, chunk id ``i * C + j`` (the ``j``-th piece of rank ``i``, the schedule's chunk id)
at output offset ``i * C + j``. Out of place only (``inplace="0"``): in place, MSCCL's AllGather
input sits inside the output at the rank's own offset. AllReduce: input and output hold the
``P * C`` chunks of the vector, chunk id ``c`` at offset ``c``; in place and out of place.

Thread blocks, on channel 0, per rank:

- AllGather only: block 0 copies the rank's own chunks from its input to its output (``cpy``);
- one send block per out-neighbour the schedule uses (``send`` = the neighbour, ``recv`` = -1);
- one receive block per in-neighbour the schedule uses (``recv`` = the neighbour, ``send`` = -1).

A block's steps follow the schedule's order (step, then chunk id, then sender), so the sender's and
the receiver's block of one link agree on the message order. A complete copy received is written
to the output (``r``). A partial sum received (an AllReduce's ReduceScatter) is added to the
rank's own (``rrc``): to its input chunk the first time, then to its running sum in the output,
each such step waiting for the one before on that chunk. A send reads the rank's input when it has
received nothing of that chunk, else the output, and then waits for (``depid``/``deps``) the last
receive step that wrote it, which signals (``hasdep="1"``). Every wait points to a step earlier in
the order (schedule step, chunk id, sender), so the program cannot deadlock. A complete copy sent
to a server that already holds the chunk is dropped: it carries nothing, and two receives of one
chunk would write one output chunk in no fixed order.
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
    """A receive step of a rank: the receive block's peer and the step index within that block."""

    peer: int
    index: int


def useful_sends(collective: Collective, schedule: CollectiveSchedule) -> list[Send]:
    """The schedule's sends in (step, chunk, src, dst) order, less the complete copies sent to a
    server that already holds the chunk (the owner holds its own, and the first receipt of a chunk
    wins). Partial sums (an AllReduce's ReduceScatter) are all kept."""
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
        if not send.partial:
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


class _Program:
    """The thread blocks of every rank (module docstring), built from the useful sends."""

    def __init__(self, collective: Collective, sends: list[Send]):
        self.per, self.k = collective.chunks, len(collective.servers)
        self.gather = collective.kind == "allgather"
        rank = {s: i for i, s in enumerate(collective.servers)}
        self.sends = [Send(s.step, s.chunk, rank[s.src], rank[s.dst], s.partial) for s in sends]
        k = self.k
        self.out_peers = [sorted({s.dst for s in self.sends if s.src == r}) for r in range(k)]
        self.in_peers = [sorted({s.src for s in self.sends if s.dst == r}) for r in range(k)]
        first = 1 if self.gather else 0  # an AllGather's block 0 copies the rank's own chunks
        self.tb_id = [{("send", p): first + i for i, p in enumerate(self.out_peers[r])} for r in range(k)]
        for r in range(k):
            base = first + len(self.out_peers[r])
            self.tb_id[r].update({("recv", p): base + i for i, p in enumerate(self.in_peers[r])})
        # the last receive step that wrote chunk c at rank r: what a later read of o[c] waits for
        self.last: dict[tuple[int, int], tuple[int, int]] = {}
        self.signals: set[tuple[int, int, int]] = set()
        self.recv: list[dict[int, list]] = [{p: [] for p in self.in_peers[r]} for r in range(k)]
        self.send: list[dict[int, list]] = [{p: [] for p in self.out_peers[r]} for r in range(k)]
        for s in self.sends:  # in schedule order: a send's receipt is placed before the send
            self._add_send(s)
            self._add_receipt(s)

    def _read(self, r: int, c: int) -> tuple[tuple[str, int], tuple[int, int] | None]:
        """Where rank r reads chunk c, and the receive step it must wait for."""
        got = self.last.get((r, c))
        if got is None:
            return ("i", c % self.per if self.gather else c), None
        self.signals.add((r, *got))
        return ("o", c), got

    def _add_send(self, s: Send) -> None:
        steps = self.send[s.src][s.dst]
        src, dep = self._read(s.src, s.chunk)
        steps.append((len(steps), "s", src, ("o", -1), dep))

    def _add_receipt(self, s: Send) -> None:
        r, c = s.dst, s.chunk
        steps = self.recv[r][s.src]
        tb = self.tb_id[r][("recv", s.src)]
        if s.partial:  # add the partial sum to this rank's: its input at first, then its running sum
            src, dep = self._read(r, c)
            steps.append((len(steps), "rrc", src, ("o", c), dep))
        else:
            steps.append((len(steps), "r", ("i", -1), ("o", c), None))
        self.last[(r, c)] = (tb, len(steps) - 1)

    def blocks(self, r: int) -> list[tuple[str, str, list[str]]]:
        """Rank r's thread blocks: (send peer, recv peer, step elements), in id order."""
        out = []
        if self.gather:
            copies = [_step(j, "cpy", ("i", j), ("o", r * self.per + j), None, False) for j in range(self.per)]
            out.append(("-1", "-1", copies))
        for p in self.out_peers[r]:
            out.append((str(p), "-1", [_step(*step, False) for step in self.send[r][p]]))
        for p in self.in_peers[r]:
            tb = self.tb_id[r][("recv", p)]
            steps = [_step(*step, (r, tb, step[0]) in self.signals) for step in self.recv[r][p]]
            out.append(("-1", str(p), steps))
        return out


def msccl_schedule_xml(collective: Collective, schedule: CollectiveSchedule) -> str:
    """The file's text: a comment naming the ranks' servers, then the ``algo`` (module docstring)."""
    if collective.kind not in ("allgather", "allreduce"):
        raise InputError(f"--to msccl writes AllGather and AllReduce schedules, not {collective.kind}")
    program = _Program(collective, useful_sends(collective, schedule))
    per, k = collective.chunks, len(collective.servers)
    total = k * per
    gather = collective.kind == "allgather"
    ranks = " ".join(f"{i}:{s}" for i, s in enumerate(collective.servers))
    lines = [
        f"<!-- topoopt-ilp: an {collective.kind} schedule of {per} chunk(s) per rank; rank:server {ranks} -->",
        f'<algo name="topoopt_{collective.kind}_{k}ranks_{per}chunks" proto="{PROTOCOL}" nchannels="1" '
        f'nchunksperloop="{total}" ngpus="{k}" coll="{collective.kind}" inplace="{int(not gather)}" outofplace="1" '
        'minBytes="0" maxBytes="0">',
    ]
    for r in range(k):
        blocks = program.blocks(r)
        _within_limits(r, blocks)
        lines.append(f'  <gpu id="{r}" i_chunks="{per if gather else total}" o_chunks="{total}" s_chunks="0">')
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
