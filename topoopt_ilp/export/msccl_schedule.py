"""A computed collective schedule (``topoopt collective ... --to msccl``) as an MSCCL algorithm (XML)
(docs/guide/collectives.md).

The format is the one of :mod:`topoopt_ilp.export.msccl` (microsoft/msccl-tools writes it,
``msccl/language/ir.py``; Azure/msccl-executor-nccl reads it, ``src/misc/msccl/msccl_parser.cc``),
with ``coll`` the collective as the executor's parser names it (``allgather``, ``allreduce``,
``reducescatter``, ``broadcast``, ``alltoall``). Rank ``i`` is the collective's ``i``-th server;
every send of the schedule must be between participants (MSCCL has no relay outside the
communicator).

Buffers (``P`` ranks, ``C`` chunks per rank, ``nchunksperloop`` the chunks of the buffer the
executor sizes by: ``P * C``, a broadcast's ``C``), as msccl-tools' ``msccl/language/collectives.py``
lays them out:

- AllGather: input the rank's ``C`` chunks; output the ``P * C`` chunks, chunk id ``i * C + j`` at
  offset ``i * C + j``. Out of place only (in place, the input sits inside the output).
- AllReduce: input and output the ``P * C`` chunks of the vector at their chunk ids; in place and
  out of place.
- ReduceScatter: input the ``P * C`` chunks at their chunk ids; output the rank's own ``C``
  (chunk id ``r * C + j`` at offset ``j``); running sums of other ranks' chunks in the scratch
  buffer. Out of place only.
- Broadcast: input (read at the root only) and output the ``C`` chunks of the message. Out of place
  only. MSCCL chooses an algorithm by collective, ranks, size and in-place, not by root: the file
  is right for broadcasts from its root only (named in its comment and name).
- All-to-all: input the ``P * C`` chunks, ``i2 * C + j`` for rank ``i2``; output ``i * C + j`` the
  chunk from rank ``i``; a chunk relayed by a third rank waits in its scratch buffer. Out of place only.

Thread blocks, on channel 0, per rank:

- block 0, when the rank has chunks to copy from its input to its output (``cpy``): an AllGather's
  own chunks, the broadcast root's message, an all-to-all's chunks to itself;
- one send block per out-neighbour the schedule uses (``send`` = the neighbour, ``recv`` = -1);
- one receive block per in-neighbour the schedule uses (``recv`` = the neighbour, ``send`` = -1).

A block's steps follow the schedule's order (step, then chunk id, then sender), so the sender's and
the receiver's block of one link agree on the message order. A complete copy received is written
to the chunk's place at the rank (``r``): its output offset, or a scratch slot when the rank only
relays it. A partial sum received (reductions) is added to the rank's own (``rrc``): to its input
chunk the first time, then to its running sum (output or scratch), each such step waiting for the
one before on that chunk. A send reads the rank's input when it has received nothing of that chunk,
else the chunk's place, and then waits for (``depid``/``deps``) the last receive step that wrote
it, which signals (``hasdep="1"``). Every wait points to a step earlier in the order (schedule step,
chunk id, sender), so the program cannot deadlock. A complete copy sent to a server that already
holds the chunk is dropped: it carries nothing, and two receives of one chunk would write one place
in no fixed order.
"""

from __future__ import annotations

import os

from topoopt_ilp.core.collective import Collective, CollectiveSchedule, Send
from topoopt_ilp.errors import InputError
from topoopt_ilp.export.common import write_text
from topoopt_ilp.export.msccl import MAX_STEPS, MAX_XML_NODES, PROTOCOL
from topoopt_ilp.files import check_writable

__all__ = ["useful_sends", "msccl_schedule_xml", "write_msccl_schedule"]


class _Layout:
    """Where each chunk of one collective lives at each rank (module docstring): ``k`` ranks, ``per``
    chunks per rank (per root for a broadcast)."""

    def __init__(self, collective: Collective):
        self.kind, self.per, self.k = collective.kind, collective.chunks, len(collective.servers)
        self.root = collective.servers.index(collective.root) if collective.kind == "broadcast" else -1
        self.scratch: list[dict[int, int]] = [{} for _ in range(self.k)]

    @property
    def loop(self) -> int:
        """``nchunksperloop``: the chunks of the buffer the executor sizes the algorithm by."""
        return self.per if self.kind == "broadcast" else self.k * self.per

    def sizes(self, r: int) -> tuple[int, int, int]:
        """Rank r's input, output and scratch chunks."""
        inputs = {"allgather": self.per, "broadcast": self.per}.get(self.kind, self.loop)
        outputs = self.per if self.kind in ("reducescatter", "broadcast") else self.loop
        return inputs, outputs, len(self.scratch[r])

    def holders(self, c: int) -> tuple[int, ...]:
        """The ranks that hold chunk c complete at the start (none for a reduction: each holds a part)."""
        if self.kind in ("allreduce", "reducescatter"):
            return ()
        if self.kind == "broadcast":
            return (self.root,)
        if self.kind == "alltoall":
            return (c // (self.k * self.per),)
        return (c // self.per,)

    def input_offset(self, c: int) -> int:
        """Where a rank that starts with chunk c (or with its part of it) has it in its input."""
        if self.kind == "allgather":
            return c % self.per
        if self.kind == "alltoall":
            return c % (self.k * self.per)
        return c

    def place(self, r: int, c: int) -> tuple[str, int]:
        """Where rank r keeps chunk c (or its running sum) once it has received it."""
        if self.kind == "reducescatter":
            if c // self.per == r:
                return "o", c % self.per
        elif self.kind == "alltoall":
            source, dest = divmod(c // self.per, self.k)
            if dest == r:
                return "o", source * self.per + c % self.per
        else:
            return "o", c
        return "s", self.scratch[r].setdefault(c, len(self.scratch[r]))

    def copies(self, r: int) -> list[tuple[int, int]]:
        """Rank r's (input offset, output offset) copies before any message."""
        if self.kind == "allgather":
            return [(j, r * self.per + j) for j in range(self.per)]
        if self.kind == "broadcast" and r == self.root:
            return [(j, j) for j in range(self.per)]
        if self.kind == "alltoall":
            return [(r * self.per + j, r * self.per + j) for j in range(self.per)]
        return []


def useful_sends(collective: Collective, schedule: CollectiveSchedule) -> list[Send]:
    """The schedule's sends in (step, chunk, src, dst) order, less the complete copies sent to a
    server that already holds the chunk (its first holders hold it, and the first receipt of a chunk
    wins). Partial sums (reductions) are all kept."""
    layout = _Layout(collective)
    rank = {s: i for i, s in enumerate(collective.servers)}
    holds: set[tuple[int, int]] = set()
    out = []
    for send in sorted(schedule.sends, key=lambda s: (s.step, s.chunk, s.src, s.dst)):
        for server in (send.src, send.dst):
            if server not in rank:
                raise InputError(
                    f"the schedule relays chunk {send.chunk} through server {server}, which is not in the collective "
                    "(an MSCCL algorithm runs on the collective's ranks only)"
                )
        if not send.partial:
            if rank[send.dst] in layout.holders(send.chunk) or (rank[send.dst], send.chunk) in holds:
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
        self.layout = layout = _Layout(collective)
        k = layout.k
        rank = {s: i for i, s in enumerate(collective.servers)}
        self.sends = [Send(s.step, s.chunk, rank[s.src], rank[s.dst], s.partial) for s in sends]
        self.out_peers = [sorted({s.dst for s in self.sends if s.src == r}) for r in range(k)]
        self.in_peers = [sorted({s.src for s in self.sends if s.dst == r}) for r in range(k)]
        self.copying = [bool(layout.copies(r)) for r in range(k)]  # block 0 copies input to output
        self.tb_id = [
            {("send", p): int(self.copying[r]) + i for i, p in enumerate(self.out_peers[r])} for r in range(k)
        ]
        for r in range(k):
            base = int(self.copying[r]) + len(self.out_peers[r])
            self.tb_id[r].update({("recv", p): base + i for i, p in enumerate(self.in_peers[r])})
        # the last receive step that wrote chunk c at rank r: what a later read of it waits for
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
            return ("i", self.layout.input_offset(c)), None
        self.signals.add((r, *got))
        return self.layout.place(r, c), got

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
            steps.append((len(steps), "rrc", src, self.layout.place(r, c), dep))
        else:
            steps.append((len(steps), "r", ("i", -1), self.layout.place(r, c), None))
        self.last[(r, c)] = (tb, len(steps) - 1)

    def blocks(self, r: int) -> list[tuple[str, str, list[str]]]:
        """Rank r's thread blocks: (send peer, recv peer, step elements), in id order."""
        out = []
        if self.copying[r]:
            copies = [
                _step(j, "cpy", ("i", src), ("o", dst), None, False)
                for j, (src, dst) in enumerate(self.layout.copies(r))
            ]
            out.append(("-1", "-1", copies))
        for p in self.out_peers[r]:
            out.append((str(p), "-1", [_step(*step, False) for step in self.send[r][p]]))
        for p in self.in_peers[r]:
            tb = self.tb_id[r][("recv", p)]
            steps = [_step(*step, (r, tb, step[0]) in self.signals) for step in self.recv[r][p]]
            out.append(("-1", str(p), steps))
        return out


def msccl_schedule_xml(collective: Collective, schedule: CollectiveSchedule) -> str:
    """The file's text: a comment naming the ranks' servers (and a broadcast's root), then the
    ``algo`` (module docstring)."""
    program = _Program(collective, useful_sends(collective, schedule))
    layout = program.layout
    per, k, kind = collective.chunks, layout.k, collective.kind
    ranks = " ".join(f"{i}:{s}" for i, s in enumerate(collective.servers))
    rooted = f" from root rank {layout.root}" if kind == "broadcast" else ""
    name = f"topoopt_{kind}_{k}ranks_{per}chunks" + (f"_root{layout.root}" if kind == "broadcast" else "")
    blocks = [program.blocks(r) for r in range(k)]  # before the sizes: the receipts place the scratch chunks
    lines = [
        f"<!-- topoopt-ilp: an {kind} schedule{rooted} of {per} chunk(s) per rank; rank:server {ranks} -->",
        f'<algo name="{name}" proto="{PROTOCOL}" nchannels="1" '
        f'nchunksperloop="{layout.loop}" ngpus="{k}" coll="{kind}" inplace="{int(kind == "allreduce")}" '
        'outofplace="1" minBytes="0" maxBytes="0">',
    ]
    for r in range(k):
        _within_limits(r, blocks[r])
        i_chunks, o_chunks, s_chunks = layout.sizes(r)
        lines.append(f'  <gpu id="{r}" i_chunks="{i_chunks}" o_chunks="{o_chunks}" s_chunks="{s_chunks}">')
        for i, (send, recv, steps) in enumerate(blocks[r]):
            lines.append(f'    <tb id="{i}" send="{send}" recv="{recv}" chan="0">')
            lines += [f"      {step}" for step in steps]
            lines.append("    </tb>")
        lines.append("  </gpu>")
    lines.append("</algo>")
    return "\n".join(lines) + "\n"


def _within_limits(r: int, blocks: list) -> None:
    longest = max((len(steps) for _, _, steps in blocks), default=0)
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
