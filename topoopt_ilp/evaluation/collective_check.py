"""The independent check of a chunk-level collective schedule (docs/guide/collectives.md). It shares no
code with the model or the heuristics that write schedules: it reads the conventions of
:mod:`topoopt_ilp.core.collective` (chunk ids, bytes, step length) and computes them again here.

The replay keeps, for every server and chunk, the set of contributions the server has summed into
its copy (a bit per participating server). For AllGather, broadcast and all-to-all a chunk has one
contribution, its origin's; for ReduceScatter and AllReduce every participant contributes to every
chunk. Each step, all sends read the state at the start of the step, then all arrive:

* a link ``u -> v`` carries at most ``matrix[u, v]`` chunks per step (0: there is no link);
* a complete copy (``partial`` false) leaves only a server whose copy holds every contribution, and
  makes the receiver's copy complete;
* a partial sum (reductions only) leaves only a server that has summed something, and the receiver
  adds it: a contribution that would be added twice is a violation (the sum would be wrong);
* at the end every server holds, complete, every chunk the collective gives it: AllGather,
  AllReduce and broadcast every chunk at every participant; ReduceScatter chunk c at its owner;
  all-to-all chunk c at its destination.

The replayed finish step is the first step after which every server has what it needs; the schedule
must claim exactly that step, send nothing after it, and have the step length alpha + chunk bytes /
bandwidth.

Heterogeneous links (``LinkModel.arcs``): the step length is the least alpha + chunk bytes /
bandwidth over the topology's arcs, tau; a send on an arc whose chunk takes t seconds starts in its
step, keeps one of the arc's links busy for ceil(t / tau - 1e-9) steps and arrives at the end of the
last (what it carries is the sender's copy at the start of its first step).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from topoopt_ilp.core.collective import Collective, CollectiveSchedule, LinkModel
from topoopt_ilp.core.solution import Topology

__all__ = ["ScheduleCheck", "check_schedule"]

#: How many violations a report lists before it stops counting.
MAX_VIOLATIONS = 50
#: Relative difference allowed between the claimed and the recomputed step length.
STEP_TOLERANCE = 1e-9


@dataclass(frozen=True)
class ScheduleCheck:
    """``violations``: what is wrong, in replay order (empty: valid); ``finish_step``: the replayed
    finish step (None when some server never gets what it needs); ``finish_s``: that times the
    recomputed step length."""

    violations: list[str] = field(default_factory=list)
    finish_step: int | None = None
    finish_s: float | None = None

    @property
    def valid(self) -> bool:
        return not self.violations


def _contributions(collective: Collective) -> tuple[int, list[int], list[int], list[list[int]]]:
    """(chunks, full[c], start holder bits, needers[c]) computed from the documented conventions."""
    servers, k = list(collective.servers), collective.chunks
    p = len(servers)
    kind = collective.kind
    if kind == "broadcast":
        total = k
        source = [servers.index(collective.root)] * total
    elif kind == "alltoall":
        total = p * p * k
        source = [(c // k) // p for c in range(total)]
    else:
        total = p * k
        source = [c // k for c in range(total)]
    everyone = (1 << p) - 1
    if kind in ("reducescatter", "allreduce"):
        full = [everyone] * total
    else:
        full = [1 << source[c] for c in range(total)]
    if kind == "reducescatter":
        needers = [[servers[c // k]] for c in range(total)]
    elif kind == "alltoall":
        needers = [[servers[(c // k) % p]] for c in range(total)]
    else:
        needers = [list(servers) for _ in range(total)]
    return total, full, source, needers


def _start_state(collective: Collective, total: int, source: list[int]) -> dict[tuple[int, int], int]:
    servers = collective.servers
    state: dict[tuple[int, int], int] = {}
    if collective.kind in ("reducescatter", "allreduce"):
        for i, s in enumerate(servers):
            for c in range(total):
                state[(s, c)] = 1 << i
    else:
        for c in range(total):
            state[(servers[source[c]], c)] = 1 << source[c]
    return state


def _all_met(state: dict[tuple[int, int], int], full: list[int], needers: list[list[int]]) -> bool:
    return all(state.get((v, c), 0) == full[c] for c in range(len(full)) for v in needers[c])


def _arc_steps(matrix: np.ndarray, collective: Collective, link: LinkModel) -> tuple[float, dict[tuple[int, int], int]]:
    """(step length, steps per arc) recomputed from the link model's rates (module docstring)."""
    pieces = collective.chunks if collective.kind == "broadcast" else len(collective.servers) * collective.chunks
    chunk = collective.bytes / pieces
    own = {(u, v): alpha + chunk / bandwidth for u, v, alpha, bandwidth in link.arcs}
    default = link.alpha_s + chunk / link.bandwidth_Bps
    n = matrix.shape[0]
    seconds = {(u, v): own.get((u, v), default) for u in range(n) for v in range(n) if matrix[u, v] > 0}
    if not link.arcs:
        return default, dict.fromkeys(seconds, 1)
    step = min(seconds.values(), default=default)
    return step, {arc: max(1, math.ceil(t / step - 1e-9)) for arc, t in seconds.items()}


def check_schedule(
    topology: Topology | np.ndarray, collective: Collective, link: LinkModel, schedule: CollectiveSchedule
) -> ScheduleCheck:
    """Replay ``schedule`` (module docstring) and list its violations."""
    matrix = np.asarray(topology.matrix if isinstance(topology, Topology) else topology)
    n = matrix.shape[0]
    out: list[str] = []

    def fail(text: str) -> None:
        if len(out) < MAX_VIOLATIONS:
            out.append(text)

    total, full, source, needers = _contributions(collective)
    reduction = collective.kind in ("reducescatter", "allreduce")
    step_s, span = _arc_steps(matrix, collective, link)
    if not math.isclose(schedule.step_s, step_s, rel_tol=STEP_TOLERANCE, abs_tol=0.0):
        fail(f"step length {schedule.step_s:.6g} s, but alpha + chunk bytes / bandwidth is {step_s:.6g} s")
    if any(s >= n for s in collective.servers):
        fail(f"a server of the collective is outside the topology's 0..{n - 1}")
        return ScheduleCheck(out)

    by_step: dict[int, list] = defaultdict(list)
    for s in schedule.sends:
        where = f"step {s.step}: chunk {s.chunk} {s.src} -> {s.dst}"
        if not (isinstance(s.step, int) and s.step >= 1):
            fail(f"{where}: steps count from 1")
        elif not (0 <= s.chunk < total):
            fail(f"{where}: no such chunk (the collective has {total})")
        elif not (0 <= s.src < n and 0 <= s.dst < n) or s.src == s.dst:
            fail(f"{where}: not a pair of distinct servers of the topology")
        elif s.partial and not reduction:
            fail(f"{where}: a partial sum in a {collective.kind}, which sums nothing")
        else:
            by_step[s.step].append(s)

    state = _start_state(collective, total, source)
    finish = 0 if _all_met(state, full, needers) else None

    # a send on an arc without a link takes one step (it is a violation anyway, reported below)
    def end_of(s) -> int:
        return s.step + span.get((s.src, s.dst), 1) - 1

    last = max((end_of(s) for sends in by_step.values() for s in sends), default=0)
    busy: dict[int, Counter[tuple[int, int]]] = defaultdict(Counter)  # step -> sends on each arc in it
    for s in (s for sends in by_step.values() for s in sends):
        for t in range(s.step, end_of(s) + 1):
            busy[t][(s.src, s.dst)] += 1
    landing: dict[int, list[tuple[object, int]]] = defaultdict(list)  # end step -> (send, what it carries)
    for step in range(1, last + 1):
        sends = by_step.get(step, [])
        for (u, v), count in sorted(busy.pop(step, Counter()).items()):
            if count > matrix[u, v]:
                fail(f"step {step}: {count} chunks on {u} -> {v}, which has {int(matrix[u, v])} link(s)")
        for s in sends:
            have = state.get((s.src, s.chunk), 0)
            where = f"step {step}: chunk {s.chunk} {s.src} -> {s.dst}"
            if s.partial and have == 0:
                fail(f"{where}: the sender has no part of the chunk to send")
            elif not s.partial and have != full[s.chunk]:
                fail(f"{where}: the sender does not hold the complete chunk at the start of the step")
            landing[end_of(s)].append((s, have))
        complete: set[tuple[int, int]] = set()
        partials: dict[tuple[int, int], list[int]] = defaultdict(list)
        for s, have in landing.pop(step, []):
            if s.partial:
                partials[(s.dst, s.chunk)].append(have)
            else:
                complete.add((s.dst, s.chunk))
        for key in complete:
            state[key] = full[key[1]]
        for key, parts in partials.items():
            if key in complete:
                continue
            acc = state.get(key, 0)
            for part in parts:
                if acc & part:
                    fail(f"step {step}: server {key[0]} adds a contribution to chunk {key[1]} twice")
                acc |= part
            state[key] = acc
        if finish is None and _all_met(state, full, needers):
            finish = step
    if finish is None:
        for c in range(total):
            for v in needers[c]:
                if state.get((v, c), 0) != full[c]:
                    fail(f"at the end server {v} lacks the complete chunk {c}")
    else:
        if last > finish:
            fail(f"sends in step {last}, after the collective is done in step {finish}")
        if schedule.steps != finish:
            fail(f"the schedule claims {schedule.steps} steps, the replay finishes in {finish}")
    return ScheduleCheck(out, finish, None if finish is None else finish * step_s)
