"""The check of an MSCCL algorithm file (``topoopt export --to msccl``) against a solution
(docs/guide/export.md).

It reads the XML with the standard library and shares no code with the exporter
(``topoopt_ilp.export.msccl``). The file must be an ``allreduce`` algorithm over the ranks of one
AllReduce group (rank ``i`` is the group's ``i``-th smallest server) with every attribute MSCCL's
parser requires (Azure/msccl-executor-nccl, ``src/misc/msccl/msccl_parser.cc``). It then runs the
program symbolically: every chunk ``c`` of rank ``q``'s input starts as the contribution ``(q, c)``;
a thread block runs its steps in the order of ``s``, a step waits for the step named by its
``depid``/``deps`` and, when it receives, for a message on its connection; a connection (sending
rank, receiving rank, channel) delivers messages in the order they were sent, and a send never
waits (buffered). The run passes when it ends (no thread block waits forever: no deadlock), every
message sent is received with the count it was sent with, no two thread blocks of a rank touch a
chunk (one of them writing) in no fixed order (a race: neither follows the other through the steps of
a block, a dependency or a message), and at every rank every output chunk
``c`` is the sum of chunk ``c`` over all ranks, each rank's contribution exactly once. It runs out
of place (input and output apart) when the file says ``outofplace="1"`` and in place (one buffer)
when it says ``inplace="1"``. Beside the run: no thread block sends or receives over a pair of
servers the design does not link, a channel has one thread block per peer and direction, a step
depends only on an existing step of another thread block that signals (``hasdep="1"``), and the
bytes the file sends over each link match the solution's rings for the group (within the
exporter's rounding: ``2 (k-1) / k / 71`` of the group's bytes per ring on the link).

:func:`msccl_schedule_violations` checks the algorithm of a computed schedule
(``topoopt_ilp.export.msccl_schedule``) the same way, but against the postcondition of its collective
(``allgather``, ``allreduce``, ``reducescatter``, ``broadcast`` or ``alltoall``, with the buffers of
microsoft/msccl-tools' ``msccl/language/collectives.py``): e.g. for an AllGather every rank's output
ends as the concatenation of all ranks' inputs, each chunk its owner's contribution alone; for a
ReduceScatter rank ``r``'s output is the sum of its part over all ranks, each contribution once.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from topoopt_ilp.core.checks import brief
from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.solution import Solution
from topoopt_ilp.core.traffic import effective_demand
from topoopt_ilp.errors import InputError
from topoopt_ilp.evaluation.verify import VerifyReport, ViolationList
from topoopt_ilp.files.jsonio import read_text

__all__ = [
    "SCHEDULE_COLLECTIVES",
    "STEP_TYPES",
    "check_msccl",
    "check_msccl_schedule",
    "msccl_schedule_violations",
    "msccl_violations",
]

#: Step type -> (receives, sends, reads src, writes dst, adds): what MSCCL's parser and kernel do with it.
STEP_TYPES: dict[str, tuple[bool, bool, bool, bool, bool]] = {
    "s": (False, True, True, False, False),
    "r": (True, False, False, True, False),
    "rcs": (True, True, False, True, False),
    "rrs": (True, True, True, False, True),
    "rrc": (True, False, True, True, True),
    "rrcs": (True, True, True, True, True),
    "cpy": (False, False, True, True, False),
    "re": (False, False, True, True, True),
    "nop": (False, False, False, False, False),
}
_REQUIRED = {
    "algo": ("nchunksperloop", "nchannels", "ngpus", "proto", "coll", "minBytes", "maxBytes", "inplace", "outofplace"),
    "gpu": ("id", "i_chunks", "o_chunks", "s_chunks"),
    "tb": ("id", "send", "recv", "chan"),
    "step": ("s", "type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps", "hasdep"),
}
_TEXT = ("proto", "coll", "type", "srcbuf", "dstbuf")
_PROTOCOLS = ("Simple", "LL", "LL128")
_INTEGER = re.compile(r"-?[0-9]{1,18}")
_DECLARATION = re.compile(r"<!\s*(DOCTYPE|ENTITY)", re.I)
#: The most chunks a buffer may hold: the executor keeps offsets as 16-bit integers (``mscclTransmission``).
_MOST_CHUNKS = 2**15 - 1
#: The most chunks one step may move (``MSCCL_MAX_COUNT`` is 72, exclusive).
_MOST_COUNT = 71
#: The exporter's rounding: a ring's share of the group's bytes is within 1/71 of the solution's.
_SHARE_ERROR = 1 / 71
_SHOWN = 10
#: The comment ``topoopt collective --to msccl`` writes: which server each rank is.
_RANKS = re.compile(r"<!--[^>]*?rank:server((?: [0-9]{1,9}:[0-9]{1,9})+) -->")


@dataclass(frozen=True)
class _Step:
    s: int
    kind: str
    src: tuple[str, int]
    dst: tuple[str, int]
    count: int
    dep: tuple[int, int] | None
    signals: bool


@dataclass(frozen=True)
class _Block:
    rank: int
    tb: int
    send: int
    recv: int
    chan: int
    steps: tuple[_Step, ...]

    def where(self, step: int | None = None) -> str:
        at = "" if step is None else f" step {step}"
        return f"rank {self.rank} thread block {self.tb}{at}"


# ---------------------------------------------------------------------------------------------------
# reading


def _attrs(element: ET.Element, report: ViolationList, where: str) -> dict[str, Any] | None:
    """The required attributes of ``element``, integers parsed; None (and a violation) when one is wrong."""
    out: dict[str, Any] = {}
    for name in _REQUIRED[element.tag]:
        value = element.get(name)
        if value is None:
            report.add("file", f"{where}: attribute {name} is missing (MSCCL's parser requires it)")
            return None
        if name in _TEXT:
            out[name] = value
        elif _INTEGER.fullmatch(value.strip()):
            out[name] = int(value)
        else:
            report.add("file", f"{where}: attribute {name}={brief(value)} is not an integer")
            return None
    return out


def _read_step(element: ET.Element, report: ViolationList, where: str) -> _Step | None:
    a = _attrs(element, report, where)
    if a is None:
        return None
    if a["type"] not in STEP_TYPES:
        report.add("file", f"{where}: unknown step type {brief(a['type'])}")
        return None
    for side in ("srcbuf", "dstbuf"):
        if a[side] not in ("i", "o", "s"):
            report.add("file", f"{where}: {side} {brief(a[side])} is not i, o or s")
            return None
    if a["hasdep"] not in (0, 1):
        report.add("file", f"{where}: hasdep must be 0 or 1, got {a['hasdep']}")
        return None
    dep = (a["depid"], a["deps"]) if a["depid"] >= 0 else None
    return _Step(
        a["s"], a["type"], (a["srcbuf"], a["srcoff"]), (a["dstbuf"], a["dstoff"]), a["cnt"], dep, a["hasdep"] == 1
    )


def _read_gpu(gpu: ET.Element, report: ViolationList) -> tuple[int, dict[str, int], list[_Block]] | None:
    a = _attrs(gpu, report, "gpu")
    if a is None:
        return None
    rank = a["id"]
    sizes = {"i": a["i_chunks"], "o": a["o_chunks"], "s": a["s_chunks"]}
    blocks = []
    for tb in gpu.findall("tb"):
        where = f"rank {rank} thread block {tb.get('id')}"
        b = _attrs(tb, report, where)
        if b is None:
            return None
        steps = []
        for element in tb.findall("step"):
            step = _read_step(element, report, f"{where} step {element.get('s')}")
            if step is None:
                return None
            steps.append(step)
        blocks.append(_Block(rank, b["id"], b["send"], b["recv"], b["chan"], tuple(steps)))
    return rank, sizes, blocks


def _parse(text: str, report: ViolationList) -> tuple[dict[str, Any], dict[int, dict[str, int]], list[_Block]] | None:
    if _DECLARATION.search(text):
        report.add("file", "a document type declaration (MSCCL's parser reads none; entities are refused)")
        return None
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        report.add("file", f"not well-formed XML: {exc}")
        return None
    if root.tag != "algo":
        report.add("file", f"the root element is <{root.tag}>, expected <algo>")
        return None
    algo = _attrs(root, report, "algo")
    if algo is None:
        return None
    sizes: dict[int, dict[str, int]] = {}
    blocks: list[_Block] = []
    for gpu in root.findall("gpu"):
        read = _read_gpu(gpu, report)
        if read is None:
            return None
        rank, gpu_sizes, gpu_blocks = read
        if rank in sizes:
            report.add("file", f"rank {rank} has two <gpu> elements")
            return None
        sizes[rank] = gpu_sizes
        blocks += gpu_blocks
    return algo, sizes, blocks


# ---------------------------------------------------------------------------------------------------
# what the file must say, before running it


def _header(
    algo: dict[str, Any], sizes: dict[int, dict[str, int]], k: int, report: ViolationList, coll: str = "allreduce"
) -> bool:
    """Collective, ranks and sizes; False when the program cannot be run."""
    ok = True
    if algo["coll"] != coll:
        report.add("header", f"coll is {brief(algo['coll'])}, expected {coll!r}")
    if algo["proto"] not in _PROTOCOLS:
        report.add("header", f"proto {brief(algo['proto'])} is not one of {', '.join(_PROTOCOLS)}")
    if algo["ngpus"] != k or sorted(sizes) != list(range(k)):
        report.add(
            "header", f"ngpus {algo['ngpus']} and gpu ids {sorted(sizes)[:8]}: expected the {k} ranks 0..{k - 1}"
        )
        ok = False
    if not 1 <= algo["nchunksperloop"] <= _MOST_CHUNKS:
        report.add("header", f"nchunksperloop must be 1..{_MOST_CHUNKS}, got {algo['nchunksperloop']}")
        ok = False
    if algo["inplace"] not in (0, 1) or algo["outofplace"] not in (0, 1) or not (algo["inplace"] or algo["outofplace"]):
        report.add("header", "inplace and outofplace must be 0 or 1, and one of them 1")
        ok = False
    if algo["minBytes"] < 0 or algo["maxBytes"] < 0:
        report.add("header", "minBytes and maxBytes must be >= 0")
    for rank, size in sorted(sizes.items()):
        if not all(0 <= n <= _MOST_CHUNKS for n in size.values()):
            report.add("header", f"rank {rank}: chunk counts {size} must be 0..{_MOST_CHUNKS}")
            ok = False
    return ok


def _static(blocks: list[_Block], sizes: dict[int, dict[str, int]], nchannels: int, report: ViolationList) -> bool:
    """Thread blocks, peers, channels, step order, offsets and dependencies; False when the program
    cannot be run."""
    ok = True
    ids: dict[int, list[int]] = {}
    for b in blocks:
        ids.setdefault(b.rank, []).append(b.tb)
    for rank, tbs in sorted(ids.items()):
        if sorted(tbs) != list(range(len(tbs))):
            report.add("thread block", f"rank {rank}: thread block ids {sorted(tbs)[:8]} are not 0..{len(tbs) - 1}")
            ok = False
    by_id = {(b.rank, b.tb): b for b in blocks}
    peers: Counter[tuple[int, int, str, int]] = Counter()
    for b in blocks:
        if not 0 <= b.chan < max(nchannels, 1):
            report.add("channel", f"{b.where()}: channel {b.chan} outside 0..{nchannels - 1}")
        for peer, way in ((b.send, "send"), (b.recv, "recv")):
            if peer == b.rank or not -1 <= peer < len(sizes):
                report.add("peer", f"{b.where()}: {way} peer {peer} is not another rank")
                ok = False
            elif peer >= 0:
                peers[(b.rank, b.chan, way, peer)] += 1
        for i, step in enumerate(b.steps):
            ok &= _static_step(b, i, step, sizes[b.rank], by_id, report)
    for (rank, chan, way, peer), n in sorted(peers.items()):
        if n > 1:
            report.add(
                "channel", f"rank {rank}: {n} thread blocks {way} to rank {peer} on channel {chan} (one allowed)"
            )
            ok = False
    return ok


def _static_step(b: _Block, i: int, step: _Step, size: dict[str, int], by_id: dict, report: ViolationList) -> bool:
    receives, sends, reads, writes, _ = STEP_TYPES[step.kind]
    where = b.where(step.s)
    ok = True
    if step.s != i:
        report.add("step order", f"{b.where()}: its step {i} says s={step.s}")
    if step.kind != "nop" and not 1 <= step.count <= _MOST_COUNT:
        report.add("count", f"{where}: cnt {step.count} must be 1..{_MOST_COUNT}")
        ok = False
    if sends and b.send < 0:
        report.add("peer", f"{where}: a {step.kind} step in a thread block without a send peer")
        ok = False
    if receives and b.recv < 0:
        report.add("peer", f"{where}: a {step.kind} step in a thread block without a recv peer")
        ok = False
    for used, (buf, off), side in ((reads, step.src, "src"), (writes, step.dst, "dst")):
        if used and not (0 <= off and off + step.count <= size[buf]):
            report.add("offset", f"{where}: {side} {buf}[{off}:{off + step.count}] is outside the {size[buf]} chunks")
            ok = False
    if step.dep is not None:
        target = by_id.get((b.rank, step.dep[0]))
        if step.dep[0] == b.tb:
            report.add("dependency", f"{where} depends on its own thread block")
        elif target is None or not 0 <= step.dep[1] < len(target.steps):
            report.add(
                "dependency", f"{where} depends on thread block {step.dep[0]} step {step.dep[1]}, which does not exist"
            )
        elif not target.steps[step.dep[1]].signals:
            report.add(
                "dependency",
                f"{where} depends on thread block {step.dep[0]} step {step.dep[1]}, which has hasdep=0 (never signals)",
            )
    return ok


def _links(blocks: list[_Block], servers: tuple[int, ...], x: np.ndarray, report: ViolationList) -> None:
    for b in blocks:
        for a, c, verb in ((b.rank, b.send, "sends to"), (b.recv, b.rank, "receives from")):
            if a >= 0 and c >= 0 and x[servers[a], servers[c]] <= 0:
                other = b.send if verb == "sends to" else b.recv
                report.add(
                    "missing link",
                    f"{b.where()} {verb} rank {other}: the design has no link from server {servers[a]} to server {servers[c]}",
                )


# ---------------------------------------------------------------------------------------------------
# running it


class _Run:
    """One symbolic execution. A chunk value is ``(chunk label, contributions per rank)`` or None (unwritten).

    ``inputs[q]``: rank q's input buffer at the start; ``expected[q]``: its output buffer at the end
    (:func:`_postcondition`)."""

    def __init__(
        self,
        blocks: list[_Block],
        sizes: dict,
        k: int,
        inputs: list[list],
        expected: list[list],
        in_place: bool,
        report: ViolationList,
    ):
        self.blocks, self.k, self.report, self.expected = blocks, k, report, expected
        self.mode = "in place" if in_place else "out of place"
        self.buffers: dict[int, dict[str, list]] = {}
        for rank in range(k):
            size = {buf: max(n, len(expected[rank])) for buf, n in sizes[rank].items()}
            start = list(inputs[rank]) + [None] * (size["i"] - len(inputs[rank]))
            if in_place:
                start += [None] * (size["o"] - len(start))
            outputs = start if in_place else [None] * size["o"]
            self.buffers[rank] = {"i": start, "o": outputs, "s": [None] * size["s"]}
        self.in_place = in_place
        self.wires: dict[tuple[int, int, int], deque] = {}
        self.done: set[tuple[int, int, int]] = set()
        self.broken = False
        # Happens-before, by vector clocks over the thread blocks: a step is after the previous step of
        # its block, the step it depends on and the send of the message it receives. Two accesses of one
        # chunk by different blocks, one of them a write, must be ordered so; otherwise it is a race.
        self.index = {(b.rank, b.tb): i for i, b in enumerate(blocks)}
        self.clock = np.zeros((len(blocks), len(blocks)), dtype=np.int64)
        self.targets = {(b.rank, s.dep[0], s.dep[1]) for b in blocks for s in b.steps if s.dep is not None}
        self.stamps: dict[tuple[int, int, int], np.ndarray] = {}
        self.accesses: dict[tuple[int, str, int], tuple[tuple | None, list]] = {}

    def add(self, kind: str, text: str) -> None:
        self.report.add(kind, f"{self.mode}: {text}")

    def ready(self, b: _Block, step: _Step) -> bool:
        if step.dep is not None and (b.rank, step.dep[0], step.dep[1]) not in self.done:
            return False
        return not STEP_TYPES[step.kind][0] or bool(self.wires.get((b.recv, b.rank, b.chan)))

    def read(self, b: _Block, step: _Step, place: tuple[str, int]) -> list:
        buf, off = place
        values = self.buffers[b.rank][buf][off : off + step.count]
        for j, v in enumerate(values):
            if v is None:
                self.add(
                    "unwritten chunk", f"{b.where(step.s)} reads {buf}[{off + j}] before anything was written there"
                )
                self.broken = True
        return values

    def combine(self, b: _Block, step: _Step, ours: list, theirs: list) -> list:
        out = []
        for v, w in zip(ours, theirs):
            if v is None or w is None:
                out.append(None)
                continue
            if v[0] != w[0]:
                self.add("mixed chunks", f"{b.where(step.s)} adds chunk {w[0]} to chunk {v[0]}")
                self.broken = True
            out.append((v[0], tuple(p + q for p, q in zip(v[1], w[1]))))
        return out

    def touch(self, b: _Block, step: _Step, place: tuple[str, int], write: bool, clock: np.ndarray) -> None:
        """Record an access of ``count`` chunks from ``place``; report one unordered with an earlier one."""
        me = self.index[(b.rank, b.tb)]
        buf = "io" if self.in_place and place[0] in "io" else place[0]
        for idx in range(place[1], place[1] + step.count):
            key = (b.rank, buf, idx)
            last, readers = self.accesses.get(key, (None, []))
            earlier = ([last] if last else []) + (readers if write else [])
            for other, seq, s in earlier:
                if other != me and clock[other] < seq:
                    self.add(
                        "race",
                        f"rank {b.rank}: thread block {b.tb} step {step.s} and thread block {self.blocks[other].tb} "
                        f"step {s} touch {place[0]}[{idx}] in no fixed order",
                    )
            access = (me, int(clock[me]), step.s)
            self.accesses[key] = (access, []) if write else (last, readers + [access])

    def execute(self, b: _Block, step: _Step) -> None:
        receives, sends, reads, writes, adds = STEP_TYPES[step.kind]
        me = self.index[(b.rank, b.tb)]
        clock = self.clock[me].copy()
        if step.dep is not None:
            clock = np.maximum(clock, self.stamps[(b.rank, step.dep[0], step.dep[1])])
        if receives:
            clock = np.maximum(clock, self.wires[(b.recv, b.rank, b.chan)][0][1])
        clock[me] += 1
        self.clock[me] = clock
        if (b.rank, b.tb, step.s) in self.targets:
            self.stamps[(b.rank, b.tb, step.s)] = clock
        if reads:
            self.touch(b, step, step.src, False, clock)
        if writes:
            self.touch(b, step, step.dst, True, clock)
        values = None
        if receives:
            message = self.wires[(b.recv, b.rank, b.chan)].popleft()[0]
            if len(message) != step.count:
                self.add(
                    "count mismatch",
                    f"{b.where(step.s)} receives {step.count} chunk(s) from rank {b.recv} on channel {b.chan}, "
                    f"which sent {len(message)}",
                )
                self.broken = True
                message = (message + [None] * step.count)[: step.count]
            values = message
        if reads:
            src = self.read(b, step, step.src)
            values = src if values is None else self.combine(b, step, src, values) if adds else values
        if step.kind == "re":  # dst += src
            values = self.combine(b, step, self.read(b, step, step.dst), values)
        if writes and values is not None:
            buf, off = step.dst
            self.buffers[b.rank][buf][off : off + step.count] = values
        if sends:
            self.wires.setdefault((b.rank, b.send, b.chan), deque()).append((list(values), clock))
        self.done.add((b.rank, b.tb, step.s))

    def run(self) -> None:
        cursor = [0] * len(self.blocks)
        progress = True
        while progress and not self.broken:
            progress = False
            for i, b in enumerate(self.blocks):
                while cursor[i] < len(b.steps) and self.ready(b, b.steps[cursor[i]]) and not self.broken:
                    self.execute(b, b.steps[cursor[i]])
                    cursor[i] += 1
                    progress = True
        if self.broken:
            return
        stuck = [(b, b.steps[cursor[i]]) for i, b in enumerate(self.blocks) if cursor[i] < len(b.steps)]
        for b, step in stuck:
            waits = (
                f"thread block {step.dep[0]} step {step.dep[1]}"
                if step.dep is not None and (b.rank, step.dep[0], step.dep[1]) not in self.done
                else f"a message from rank {b.recv} on channel {b.chan}"
            )
            self.add("deadlock", f"{b.where(step.s)} ({step.kind}) waits forever for {waits}")
        if stuck:
            return
        for (a, c, chan), queue in sorted(self.wires.items()):
            if queue:
                self.add(
                    "unmatched send",
                    f"rank {a} sends {len(queue)} message(s) to rank {c} on channel {chan} that are never received",
                )
        self.final()

    def final(self) -> None:
        for rank in range(self.k):
            out = self.buffers[rank]["o"]
            for c, want in enumerate(self.expected[rank]):
                v = out[c]
                if v is None:
                    self.add("missing output", f"rank {rank} ends without output chunk {c}")
                elif v[0] != want[0]:
                    self.add("wrong chunk", f"rank {rank}'s output chunk {c} holds chunk {v[0]}")
                elif sum(want[1]) == 1 and v[1] != want[1]:  # one rank's chunk, unreduced
                    owner = want[1].index(1)
                    self.add(
                        "wrong output",
                        f"rank {rank}'s output chunk {c} holds contributions {v[1]}, not rank {owner}'s alone",
                    )
                elif v[1] != want[1]:
                    for q, times in enumerate(v[1]):
                        if times == 0:
                            self.add("missing contribution", f"rank {rank}'s output chunk {c} lacks rank {q}'s")
                        elif times > 1:
                            self.add(
                                "double reduction",
                                f"rank {rank}'s output chunk {c} adds rank {q}'s contribution {times} times",
                            )


def _postcondition(coll: str, k: int, loop: int, root: int = 0) -> tuple[list[list], list[list]]:
    """Every rank's input at the start and output at the end, for ``coll`` over ``k`` ranks with
    ``loop`` = ``nchunksperloop``, as msccl-tools' ``msccl/language/collectives.py`` states them. A
    value is (chunk label, contributions per rank); ``None`` an input the collective does not read.

    - allreduce: input c of rank q is (c, q's); every output c the sum over all ranks;
    - allgather: rank q's input j is chunk q * C + j (C = loop / k); every output c is chunk c, its
      owner's alone;
    - reducescatter: input c of rank q is (c, q's); rank r's output j the sum of chunk r * C + j;
    - broadcast: the root's input j; every rank's output j the root's input j;
    - alltoall: rank q's input x is labelled q * loop + x; rank r's output i * C + j is rank i's
      input r * C + j."""
    per = loop // k

    def alone(q: int) -> tuple[int, ...]:
        return tuple(int(p == q) for p in range(k))

    everyone = (1,) * k
    if coll == "allreduce":
        return [[(c, alone(q)) for c in range(loop)] for q in range(k)], [
            [(c, everyone) for c in range(loop)] for _ in range(k)
        ]
    if coll == "allgather":
        return [[(q * per + j, alone(q)) for j in range(per)] for q in range(k)], [
            [(c, alone(c // per)) for c in range(loop)] for _ in range(k)
        ]
    if coll == "reducescatter":
        return [[(c, alone(q)) for c in range(loop)] for q in range(k)], [
            [(r * per + j, everyone) for j in range(per)] for r in range(k)
        ]
    if coll == "broadcast":
        message = [(j, alone(root)) for j in range(loop)]
        return [message if q == root else [] for q in range(k)], [message for _ in range(k)]
    return [[(q * loop + x, alone(q)) for x in range(loop)] for q in range(k)], [
        [(i * loop + r * per + j, alone(i)) for i in range(k) for j in range(per)] for r in range(k)
    ]


# ---------------------------------------------------------------------------------------------------
# the solution's side


def _group(instance: Instance, solution: Solution, group: int | None) -> tuple[int, tuple[int, ...], list]:
    """The group the file is for, its sorted members and the rings the solution scores it with
    (its own, else one ring in member order, as the evaluator does)."""
    groups = effective_demand(instance, solution.placement)[0].allreduce
    rings = solution.routing.rings.to_lists()
    if group is None:
        ringed = sorted({g for g, _, _ in rings})
        candidates = ringed or list(range(len(groups)))
        if len(candidates) != 1:
            raise InputError(f"the solution has {len(candidates)} AllReduce groups: name the file's with --group G")
        group = candidates[0]
    if isinstance(group, bool) or not isinstance(group, int) or not 0 <= group < len(groups):
        raise InputError(f"--group must be an AllReduce group 0..{len(groups) - 1}, got {brief(group)}")
    members = tuple(sorted(int(m) for m in groups[group].members))
    own = [(order, share) for g, order, share in rings if g == group]
    return group, members, own or [(list(groups[group].members), 1.0)]


def _traffic(blocks: list[_Block], members: tuple[int, ...], rings: list, chunks: int, report: ViolationList) -> None:
    """Chunks over each link, as shares of the group's bytes, against the solution's rings."""
    k = len(members)
    sent: Counter[tuple[int, int]] = Counter()
    for b in blocks:
        if b.send >= 0:
            sent[(members[b.rank], members[b.send])] += sum(s.count for s in b.steps if STEP_TYPES[s.kind][1])
    want: Counter[tuple[int, int]] = Counter()
    rings_on: Counter[tuple[int, int]] = Counter()
    per_ring = 2 * (k - 1) / k
    for order, share in rings:
        for a, c in zip(order, order[1:] + order[:1]):
            want[(a, c)] += share * per_ring
            rings_on[(a, c)] += 1
    for pair in sorted(set(sent) | set(want)):
        got, expected = sent[pair] / chunks, want[pair]
        if abs(got - expected) > rings_on[pair] * per_ring * _SHARE_ERROR + 1e-9 or (got > 0 and not rings_on[pair]):
            report.add(
                "traffic",
                f"the file sends {got:.4g} of the group's bytes from server {pair[0]} to server {pair[1]}, "
                f"the solution's rings {expected:.4g}",
            )


def msccl_violations(instance: Instance, solution: Solution, text: str, group: int | None = None) -> VerifyReport:
    """Violations of an MSCCL algorithm (the file's text) for the solution's AllReduce group ``group``
    (default: the only group the solution rings)."""
    if solution.topology is None or not solution.has_solution:
        raise InputError(f"the solution holds no design (status {solution.status}): nothing to check a file against")
    group, members, rings = _group(instance, solution, group)
    report = ViolationList(_SHOWN)
    parsed = _parse(text, report)
    if parsed is None:
        return report.report()
    algo, sizes, blocks = parsed
    if not _header(algo, sizes, len(members), report):
        return report.report()
    runnable = _static(blocks, sizes, algo["nchannels"], report)
    _links(blocks, members, solution.topology.matrix, report)
    _traffic(blocks, members, rings, algo["nchunksperloop"], report)
    if runnable:
        for in_place, wanted in ((False, algo["outofplace"]), (True, algo["inplace"])):
            if wanted:
                inputs, expected = _postcondition("allreduce", len(members), algo["nchunksperloop"])
                _Run(blocks, sizes, len(members), inputs, expected, in_place, report).run()
    return report.report()


#: The collectives :func:`msccl_schedule_violations` judges, as the executor's parser names them.
SCHEDULE_COLLECTIVES = ("allgather", "allreduce", "reducescatter", "broadcast", "alltoall")


def msccl_schedule_violations(
    matrix: np.ndarray, servers: tuple[int, ...], text: str, coll: str = "allgather", root: int = 0
) -> VerifyReport:
    """Violations of an MSCCL algorithm for one collective (the file's text; ``topoopt collective
    --to msccl``) whose rank ``i`` is server ``servers[i]`` of the topology ``matrix`` (link
    counts): the file, the links, and the symbolic run against the collective's postcondition
    (:func:`_postcondition`; ``root``: a broadcast's root rank), out of place, and in place for an
    AllReduce that says so (the other collectives are checked out of place only: their in-place
    buffers overlap differently, and the file must say ``inplace="0"``)."""
    if coll not in SCHEDULE_COLLECTIVES:
        raise InputError(f"the check runs {', '.join(SCHEDULE_COLLECTIVES)} algorithms, not {brief(coll)}")
    k = len(servers)
    if coll == "broadcast" and not 0 <= root < k:
        raise InputError(f"the broadcast's root rank must be 0..{k - 1}, got {root}")
    report = ViolationList(_SHOWN)
    parsed = _parse(text, report)
    if parsed is None:
        return report.report()
    algo, sizes, blocks = parsed
    if not _header(algo, sizes, k, report, coll=coll):
        return report.report()
    loop = algo["nchunksperloop"]
    if coll in ("allgather", "reducescatter", "alltoall") and loop % k:
        report.add("header", f"nchunksperloop {loop} is not a multiple of the {k} ranks")
        return report.report()
    if coll != "allreduce" and algo["inplace"]:
        report.add("header", f"inplace=1: the check runs {coll} out of place only")
    runnable = _static(blocks, sizes, algo["nchannels"], report)
    _links(blocks, servers, np.asarray(matrix), report)
    if runnable:
        inputs, expected = _postcondition(coll, k, loop, root)
        for in_place, wanted in ((False, algo["outofplace"]), (True, algo["inplace"] and coll == "allreduce")):
            if wanted:
                _Run(blocks, sizes, k, inputs, expected, in_place, report).run()
    return report.report()


def check_msccl_schedule(
    solution: Solution,
    path: str | os.PathLike,
    coll: str,
    servers: tuple[int, ...] | None = None,
    root: int | None = None,
) -> VerifyReport:
    """Violations of the MSCCL algorithm file in ``path`` (``topoopt collective --to msccl``) as the
    algorithm of ``coll`` over ``servers`` (default every server of the design; rank ``i`` is
    ``servers[i]``) of ``solution``'s design, a broadcast from the server ``root`` (default the
    first): :func:`msccl_schedule_violations`. InputError for servers or a root the design or the
    collective does not have."""
    if solution.topology is None or not solution.has_solution:
        raise InputError(f"the solution holds no design (status {solution.status}): nothing to check a file against")
    n = solution.topology.n
    servers = tuple(range(n)) if servers is None else tuple(servers)
    if len(servers) < 2 or len(set(servers)) != len(servers) or not all(0 <= s < n for s in servers):
        raise InputError(f"--servers must name at least 2 distinct servers of 0..{n - 1}")
    if root is not None and coll != "broadcast":
        raise InputError(f"--root goes with --collective broadcast, not {coll}")
    root = servers[0] if root is None else root
    if root not in servers:
        raise InputError(f"--root {root} is not one of the collective's servers")
    text = read_text(path, InputError)
    report = msccl_schedule_violations(solution.topology.matrix, servers, text, coll, servers.index(root))
    named = _RANKS.search(text)
    if named is None:
        return report
    pairs = [tuple(int(v) for v in pair.split(":")) for pair in named.group(1).split()]
    if pairs != list(enumerate(servers)):
        claimed = " ".join(f"{r}:{s}" for r, s in pairs[:8])
        more = [*report.violations, f"ranks: the file's comment maps rank:server {claimed}, not the servers checked"]
        return VerifyReport(tuple(more))
    return report


def check_msccl(
    instance: Instance, solution: Solution, path: str | os.PathLike, group: int | None = None
) -> VerifyReport:
    """Violations of the MSCCL algorithm file in ``path`` against ``solution`` (see the module's docstring)."""
    text = read_text(path, InputError)
    return msccl_violations(instance, solution, text, group)
