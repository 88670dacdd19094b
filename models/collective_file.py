"""Collective schedule files (``"format": "topoopt-collective-schedule"``, version 1) and the check of
what such a file claims (docs/guide/collectives.md, "The schedule file").

A file holds one :class:`~topoopt_ilp.models.collective.CollectiveResult` with what it was made from:
the collective, the link model, the step length, the sends as ``[step, chunk, src, dst, partial]``
rows, the claimed finish (steps and seconds), status, bound and gap, and the SHA-256 of the instance
and solution files. :func:`parse_collective_schedule` reads it strictly (every field checked, one
:class:`InputError` naming the field); :func:`collective_claim_violations` replays the sends with the
independent :func:`~topoopt_ilp.evaluation.collective_check.check_schedule` and checks each claim
against the replay and the independent :func:`~topoopt_ilp.evaluation.collective_bounds.collective_lower_bound`.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from topoopt_ilp.core.checks import MAX_BYTES, as_int, as_number, brief, type_name
from topoopt_ilp.core.collective import COLLECTIVE_KINDS, MAX_CHUNKS, Collective, CollectiveSchedule, LinkModel, Send
from topoopt_ilp.core.instance import MAX_SERVERS
from topoopt_ilp.core.solution import Topology
from topoopt_ilp.errors import InputError
from topoopt_ilp.evaluation.collective_bounds import collective_lower_bound
from topoopt_ilp.evaluation.collective_check import check_schedule
from topoopt_ilp.files import MAX_SOLUTION_BYTES, json_safe, write_json_atomic
from topoopt_ilp.files.jsonio import check_format, json_list, json_object, read_json, with_source
from topoopt_ilp.models.collective import COLLECTIVE_METHODS, CollectiveResult
from topoopt_ilp.models.schedule import sha256_field

__all__ = [
    "COLLECTIVE_SCHEDULE_FORMAT",
    "COLLECTIVE_SCHEDULE_VERSION",
    "CollectiveScheduleFile",
    "collective_schedule_to_dict",
    "parse_collective_schedule",
    "read_collective_schedule",
    "write_collective_schedule",
    "collective_claim_violations",
]

COLLECTIVE_SCHEDULE_FORMAT = "topoopt-collective-schedule"
COLLECTIVE_SCHEDULE_VERSION = 1
_FILE_KEYS = {
    "format",
    "version",
    "instance",
    "instance_sha256",
    "solution",
    "solution_sha256",
    "collective",
    "link",
    "method",
    "status",
    "backend",
    "step_s",
    "steps",
    "finish_s",
    "algbw_Bps",
    "bound_steps",
    "bound_s",
    "gap",
    "solve_s",
    "sends",
}
_COLLECTIVE_KEYS = {"kind", "servers", "bytes", "chunks", "root"}
_LINK_KEYS = {"alpha_s", "bandwidth_Bps"}
#: ``link.arcs``: the directions with their own rate, present only when some link has one.
_LINK_OPTIONAL = {"arcs"}
#: Most sends a file may hold, and the latest step it may name: far beyond what the exact model
#: solves, and they bound the replay (which walks every step up to the last send).
MAX_SENDS = 10_000_000
MAX_STEPS = 1_000_000
#: Most (server, chunk) pairs the replay keeps a state for (a reduction: every participant x every chunk).
MAX_REPLAY_STATES = 10_000_000
#: Relative tolerance of the claimed times against the recomputed ones.
TIME_TOLERANCE = 1e-9


@dataclass(frozen=True, eq=False)
class CollectiveScheduleFile:
    """A collective schedule file as :func:`read_collective_schedule` read it."""

    source: str | None
    collective: Collective
    link: LinkModel
    method: str
    status: str
    backend: str | None
    schedule: CollectiveSchedule
    finish_s: float
    algbw_Bps: float | None
    bound_steps: int
    bound_s: float
    gap: float
    solve_s: float
    instance: str | None
    instance_sha256: str | None
    solution: str | None
    solution_sha256: str | None


def collective_schedule_to_dict(
    collective: Collective,
    link: LinkModel,
    result: CollectiveResult,
    *,
    instance: str | None = None,
    instance_sha256: str | None = None,
    solution: str | None = None,
    solution_sha256: str | None = None,
) -> dict[str, Any]:
    """The JSON form of ``result`` (module docstring); refuses a result without a schedule."""
    if result.schedule is None:
        raise InputError("the result has no schedule to write")
    return {
        "format": COLLECTIVE_SCHEDULE_FORMAT,
        "version": COLLECTIVE_SCHEDULE_VERSION,
        "instance": instance,
        "instance_sha256": instance_sha256,
        "solution": solution,
        "solution_sha256": solution_sha256,
        "collective": {
            "kind": collective.kind,
            "servers": list(collective.servers),
            "bytes": collective.bytes,
            "chunks": collective.chunks,
            "root": collective.root,
        },
        "link": {"alpha_s": link.alpha_s, "bandwidth_Bps": link.bandwidth_Bps}
        | ({"arcs": [list(arc) for arc in link.arcs]} if link.arcs else {}),
        "method": result.method,
        "status": result.status,
        "backend": result.backend,
        "step_s": result.step_s,
        "steps": result.steps,
        "finish_s": result.finish_s,
        "algbw_Bps": result.algbw_Bps,
        "bound_steps": result.bound_steps,
        "bound_s": result.bound_steps * result.step_s,
        "gap": result.gap,
        "solve_s": result.solve_s,
        "sends": [[s.step, s.chunk, s.src, s.dst, s.partial] for s in result.schedule.sends],
    }


def write_collective_schedule(path: str | os.PathLike, collective: Collective, link: LinkModel, result, **provenance):
    """Write :func:`collective_schedule_to_dict` atomically (``provenance``: ``instance``,
    ``instance_sha256``, ``solution``, ``solution_sha256``)."""
    write_json_atomic(path, json_safe(collective_schedule_to_dict(collective, link, result, **provenance)))


def _number(v: Any, field: str, *, positive: bool = False, null: bool = False) -> float | None:
    if v is None and null:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InputError(f"expected a number{' or null' if null else ''}, got {type_name(v)}", field=field)
    return as_number(v, field, positive=positive, nonnegative=not positive)


def _text(v: Any, field: str) -> str | None:
    if v is not None and not isinstance(v, str):
        raise InputError(f"expected text or null, got {type_name(v)}", field=field)
    return v


def _integer(v: Any, field: str, *, low: int = 0, high: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise InputError(f"expected an integer, got {type_name(v)}", field=field)
    return as_int(v, field, low=low, high=high)


def _collective(value: Any) -> Collective:
    c = json_object(value, "collective", _COLLECTIVE_KEYS, _COLLECTIVE_KEYS, err=InputError)
    if c["kind"] not in COLLECTIVE_KINDS:
        raise InputError(
            f"must be one of {', '.join(COLLECTIVE_KINDS)}, got {brief(c['kind'])}", field="collective.kind"
        )
    servers = json_list(c["servers"], "collective.servers", err=InputError, max_len=MAX_SERVERS)
    for k, s in enumerate(servers):
        _integer(s, f"collective.servers[{k}]", high=MAX_SERVERS - 1)
    _number(c["bytes"], "collective.bytes", positive=True)
    if c["bytes"] > MAX_BYTES:
        raise InputError(f"must be at most {MAX_BYTES:g}", field="collective.bytes")
    _integer(c["chunks"], "collective.chunks", low=1, high=MAX_CHUNKS)
    if c["root"] is not None:
        _integer(c["root"], "collective.root", high=MAX_SERVERS - 1)
    collective = Collective(c["kind"], tuple(servers), c["bytes"], c["chunks"], c["root"])
    if len(servers) * collective.chunk_count > MAX_REPLAY_STATES:
        raise InputError(
            f"{len(servers)} servers x {collective.chunk_count} chunks, more than the {MAX_REPLAY_STATES} the check replays",
            field="collective.chunks",
        )
    return collective


def _sends(value: Any) -> list[Send]:
    rows = json_list(value, "sends", err=InputError, max_len=MAX_SENDS)
    out = []
    for k, row in enumerate(rows):
        f = f"sends[{k}]"
        if not isinstance(row, list) or len(row) != 5:
            raise InputError("expected [step, chunk, src, dst, partial]", field=f)
        step = _integer(row[0], f + "[0]", low=1, high=MAX_STEPS)
        chunk = _integer(row[1], f + "[1]", high=MAX_CHUNKS * MAX_SERVERS)
        src = _integer(row[2], f + "[2]", high=MAX_SERVERS - 1)
        dst = _integer(row[3], f + "[3]", high=MAX_SERVERS - 1)
        if not isinstance(row[4], bool):
            raise InputError(f"expected true or false (a partial sum), got {type_name(row[4])}", field=f + "[4]")
        out.append(Send(step, chunk, src, dst, row[4]))
    return out


def parse_collective_schedule(data: Any, source: str | None = None) -> CollectiveScheduleFile:
    """A collective schedule file's JSON, checked strictly: format and version, no unknown or missing
    key, each value's type and range. Every problem is one InputError naming the field."""
    E = InputError
    check_format(data, COLLECTIVE_SCHEDULE_FORMAT, E)
    top = json_object(data, "", _FILE_KEYS, _FILE_KEYS, err=E)
    if top["format"] != COLLECTIVE_SCHEDULE_FORMAT:
        raise E(f"expected {COLLECTIVE_SCHEDULE_FORMAT!r}, got {brief(top['format'])}", field="format")
    v = top["version"]
    if isinstance(v, bool) or not isinstance(v, int) or v != COLLECTIVE_SCHEDULE_VERSION:
        raise E(
            f"unsupported version {brief(v)}; collective schedule files are version {COLLECTIVE_SCHEDULE_VERSION}",
            field="version",
        )
    if top["method"] not in COLLECTIVE_METHODS:
        raise E(f"must be one of {', '.join(COLLECTIVE_METHODS)}, got {brief(top['method'])}", field="method")
    if top["status"] not in ("optimal", "feasible"):
        raise E(f"must be optimal or feasible (a file holds a schedule), got {brief(top['status'])}", field="status")
    collective = _collective(top["collective"])
    lk = json_object(top["link"], "link", _LINK_KEYS | _LINK_OPTIONAL, _LINK_KEYS, err=E)
    arcs = []
    for k, arc in enumerate(json_list(lk.get("arcs", []), "link.arcs", max_len=MAX_SENDS, err=E)):
        row = json_list(arc, f"link.arcs[{k}]", max_len=4, err=E)
        if len(row) != 4:
            raise E("expected [u, v, alpha_s, bandwidth_Bps]", field=f"link.arcs[{k}]")
        arcs.append(
            (
                _integer(row[0], f"link.arcs[{k}][0]"),
                _integer(row[1], f"link.arcs[{k}][1]"),
                _number(row[2], f"link.arcs[{k}][2]"),
                _number(row[3], f"link.arcs[{k}][3]", positive=True),
            )
        )
    try:
        link = LinkModel(
            _number(lk["alpha_s"], "link.alpha_s"),
            _number(lk["bandwidth_Bps"], "link.bandwidth_Bps", positive=True),
            tuple(arcs),
        )
    except InputError as exc:  # a self-loop or a direction listed twice
        raise E(exc.reason, field=exc.field) from None
    step_s = _number(top["step_s"], "step_s")
    steps = _integer(top["steps"], "steps", high=MAX_STEPS)
    schedule = CollectiveSchedule(tuple(_sends(top["sends"])), step_s, steps)
    return CollectiveScheduleFile(
        source=source,
        collective=collective,
        link=link,
        method=top["method"],
        status=top["status"],
        backend=_text(top["backend"], "backend"),
        schedule=schedule,
        finish_s=_number(top["finish_s"], "finish_s"),
        algbw_Bps=_number(top["algbw_Bps"], "algbw_Bps", positive=True, null=True),
        bound_steps=_integer(top["bound_steps"], "bound_steps", high=MAX_STEPS),
        bound_s=_number(top["bound_s"], "bound_s"),
        gap=_number(top["gap"], "gap"),
        solve_s=_number(top["solve_s"], "solve_s"),
        instance=_text(top["instance"], "instance"),
        instance_sha256=sha256_field(top["instance_sha256"], "instance_sha256"),
        solution=_text(top["solution"], "solution"),
        solution_sha256=sha256_field(top["solution_sha256"], "solution_sha256"),
    )


def read_collective_schedule(path: str | os.PathLike) -> CollectiveScheduleFile:
    """Read a collective schedule file (:func:`parse_collective_schedule`; malformed JSON, an oversized
    file, a NaN are refused as for solution files)."""
    data = read_json(path, InputError, MAX_SOLUTION_BYTES)
    return with_source(lambda: parse_collective_schedule(data, str(path)), str(path), InputError)


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=TIME_TOLERANCE, abs_tol=1e-15)


def collective_claim_violations(topology: Topology, link: LinkModel, sf: CollectiveScheduleFile) -> list[str]:
    """What is wrong with ``sf`` on ``topology`` under the instance's ``link`` model:

    * the link model is the instance's (alpha = hop latency, the link bandwidth);
    * the independent replay finds no violation and finishes in the claimed steps (it also checks
      the step length);
    * finish_s = steps x step_s, bound_s = bound_steps x step_s, algbw = bytes / finish_s;
    * the bound lies between the independent bound and the steps; the ring and greedy methods prove
      nothing, so their bound is exactly the independent one and their status feasible; ``optimal``
      only from the exact method and with the bound at the steps, but for AllReduce, whose
      ``optimal`` speaks for ReduceScatter + AllGather with each phase optimal (an exact bound above
      the independent one, and that phase claim, are taken as stated: only solving again could
      confirm them);
    * gap = (steps - bound) / steps (0 for 0 steps)."""
    out: list[str] = []
    for key, said, truth in (
        ("alpha_s", sf.link.alpha_s, link.alpha_s),
        ("bandwidth_Bps", sf.link.bandwidth_Bps, link.bandwidth_Bps),
    ):
        if not _close(said, truth):
            out.append(f"link.{key} {said:.9g}, the instance's is {truth:.9g}")
    mine = {(u, v): (a, b) for u, v, a, b in link.arcs}
    theirs = {(u, v): (a, b) for u, v, a, b in sf.link.arcs}
    if mine.keys() != theirs.keys() or any(
        not (_close(theirs[k][0], mine[k][0]) and _close(theirs[k][1], mine[k][1])) for k in mine
    ):
        out.append("link.arcs: the per-link rates differ from the instance's")
    if out:
        return out
    replay = check_schedule(topology, sf.collective, link, sf.schedule)
    out += replay.violations
    if replay.violations:
        return out
    steps, step_s = sf.schedule.steps, sf.schedule.step_s
    if not _close(sf.finish_s, replay.finish_s):
        out.append(f"finish {sf.finish_s:.9g} s, the replay finishes at {replay.finish_s:.9g} s")
    if not _close(sf.bound_s, sf.bound_steps * step_s):
        out.append(f"bound {sf.bound_s:.9g} s is not bound_steps x step_s = {sf.bound_steps * step_s:.9g} s")
    algbw = sf.collective.bytes / replay.finish_s if replay.finish_s > 0 else None
    if (algbw is None) != (sf.algbw_Bps is None) or (algbw is not None and not _close(sf.algbw_Bps, algbw)):
        out.append(f"algorithm bandwidth {sf.algbw_Bps}, bytes / finish is {algbw}")
    independent = collective_lower_bound(topology, sf.collective, link).steps
    if sf.bound_steps > steps:
        out.append(f"bound {sf.bound_steps} steps is above the schedule's {steps}")
    elif sf.method != "exact" and sf.bound_steps != independent:
        out.append(f"bound {sf.bound_steps} steps: the {sf.method} schedule's bound is the independent {independent}")
    elif sf.bound_steps < independent:
        out.append(f"bound {sf.bound_steps} steps is below the independent bound {independent}")
    composed = sf.collective.kind == "allreduce"  # optimal: each of its two phases (models/collective.py)
    if sf.status == "optimal" and (sf.method != "exact" or (sf.bound_steps != steps and not composed)):
        out.append(
            f"status optimal, but the bound {sf.bound_steps} is not the {steps} steps"
            + ("" if sf.method == "exact" else f" (the {sf.method} schedule never claims optimal)")
        )
    gap = (steps - sf.bound_steps) / steps if steps else 0.0
    if abs(sf.gap - gap) > 1e-9:
        out.append(f"gap {sf.gap:.9g} is not (steps - bound) / steps = {gap:.9g}")
    return out
