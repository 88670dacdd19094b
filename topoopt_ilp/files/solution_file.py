"""Solution files: what a method found, with its routes, metrics and claims, as strict JSON.

A solution file is read back exactly as it was written (``parse_solution(solution_to_dict(s))``
equals ``s`` up to the instance name); anything else in it is one
:class:`~topoopt_ilp.errors.SolutionFileError` naming the file and the field.
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from typing import Any

import numpy as np

from topoopt_ilp.core.checks import MAX_INDEX, as_bool, as_int, as_int_list, as_number, as_str, brief, type_name
from topoopt_ilp.core.instance import MAX_DEGREE, MAX_SERVERS
from topoopt_ilp.core.routes import OffsetRoutes, PathSet, RingSet, Routing
from topoopt_ilp.core.solution import STATUSES, Solution, Topology
from topoopt_ilp.errors import InputError, SolutionFileError
from topoopt_ilp.files.instance_file import VERSION
from topoopt_ilp.files.jsonio import (
    check_format,
    json_list,
    json_object,
    json_safe,
    read_json,
    with_source,
    write_json_atomic,
)

__all__ = [
    "SOLUTION_FORMAT",
    "MAX_SOLUTION_BYTES",
    "load_solution",
    "parse_solution",
    "solution_to_dict",
    "save_solution",
]

SOLUTION_FORMAT = "topoopt-solution"
#: Solution files carry their routing, which grows as n^2 x path length: the heuristic's solution of
#: a 1024-server all-to-all job (degree 8) is 77 MiB, so what the tool writes it must read.
MAX_SOLUTION_BYTES = 1024 * 1024 * 1024


_SOL_KEYS = {
    "format",
    "version",
    "status",
    "objective",
    "bound",
    "gap",
    "wall_time_s",
    "method",
    "backend",
    "topology",
    "routing",
    "placement",
    "metrics",
    "details",
    "instance",
    "job",
}


def _num_or_none(v: float | None) -> float | None:
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def solution_to_dict(sol: Solution, *, directed: bool, instance_name: str | None = None) -> dict[str, Any]:
    """The JSON form of a solution (docs/guide/instance-format.md). Non-finite numbers become null (JSON has none)."""
    out: dict[str, Any] = {"format": SOLUTION_FORMAT, "version": VERSION}
    if instance_name:
        out["instance"] = instance_name
    out.update(
        {
            "status": sol.status,
            "objective": _num_or_none(sol.objective),
            "bound": _num_or_none(sol.bound),
            "gap": _num_or_none(sol.gap),
            "wall_time_s": round(float(sol.wall_time_s), 6),
            "method": sol.method,
            "backend": sol.backend,
        }
    )
    if sol.topology is not None:
        topo: dict[str, Any] = {
            "servers": sol.topology.n,
            "directed": directed,
            "links": [list(x) for x in sol.topology.links(directed)],
        }
        if sol.topology.jumps is not None:
            topo["jumps"] = list(sol.topology.jumps)
        out["topology"] = topo
    else:
        out["topology"] = None
    rest: dict[str, Any] = {"placement": sol.placement, "metrics": dict(sol.metrics)}
    if sol.job is not None:
        rest["job"] = {k: (list(v) if k == "server_map" else dict(v)) for k, v in sol.job.items()}
    if sol.details:
        rest["details"] = sol.details
    # Everywhere, nested lists and details included (a disconnected group's time is inf): null.
    return {**json_safe(out), "routing": _routing_lists(sol.routing), **json_safe(rest)}


def _routing_lists(r: Routing) -> dict[str, list]:
    """The routes as plain lists. Ids and jumps are integers and fractions finite (checked here once
    for the whole array), so the million entries of a large design skip the element-wise ``json_safe``."""
    routes = {
        "rings": [[g, f, order] for g, order, f in r.rings.to_lists()],
        "paths": [[f, p] for p, f in r.paths.to_lists()],
        "offset_routes": [[o, f, j] for o, j, f in r.offset_routes.to_lists()],
    }
    finite = all(np.isfinite(part.fraction).all() for part in (r.rings, r.paths, r.offset_routes))
    return routes if finite else json_safe(routes)


def save_solution(sol: Solution, path: str | os.PathLike, *, directed: bool, instance_name: str | None = None) -> None:
    write_json_atomic(path, solution_to_dict(sol, directed=directed, instance_name=instance_name))


def load_solution(path: str | os.PathLike, *, directed: bool | None = None) -> Solution:
    """Read a solution file. ``directed`` (from the instance) wins over the file's own flag when the
    links are read; the file's own flag stays available as ``topology.stated_directed``."""
    data = read_json(path, SolutionFileError, MAX_SOLUTION_BYTES)
    return with_source(lambda: parse_solution(data, directed=directed), str(path), SolutionFileError)


def parse_solution(data: Any, *, directed: bool | None = None) -> Solution:
    """Read a solution's JSON form. Structure is checked here; feasibility is the verifier's job.
    Every refusal is a :class:`~topoopt_ilp.errors.SolutionFileError` (the shared field checkers of
    ``core.checks`` raise instance errors)."""
    try:
        return _parse_solution(data, directed)
    except InputError as exc:
        if isinstance(exc, SolutionFileError):
            raise
        raise SolutionFileError(exc.reason, source=exc.source, field=exc.field) from None


def _parse_solution(data: Any, directed: bool | None) -> Solution:
    E = SolutionFileError
    check_format(data, SOLUTION_FORMAT, E)
    top = json_object(data, "", _SOL_KEYS, {"format", "version", "status", "method", "topology"}, err=E)
    if top["format"] != SOLUTION_FORMAT:
        raise E(f"expected {SOLUTION_FORMAT!r}, got {brief(top['format'])}", field="format")
    if top["version"] != VERSION or isinstance(top["version"], bool):
        raise E(f"unsupported version {brief(top['version'])}", field="version")
    if top["status"] not in STATUSES:
        raise E(f"must be one of {', '.join(STATUSES)}", field="status")
    topology = None
    if top["topology"] is not None:
        t = json_object(
            top["topology"], "topology", {"servers", "directed", "links", "jumps"}, {"servers", "links"}, err=E
        )
        stated = t.get("directed")
        if stated is not None and not isinstance(stated, bool):
            raise E("expected true or false", field="topology.directed")
        if directed is None:
            directed = bool(stated)
        n = as_int(t["servers"], "topology.servers", low=2, high=MAX_SERVERS)
        links = []
        for k, link in enumerate(json_list(t["links"], "topology.links", err=E, max_len=MAX_SERVERS * 1024)):
            p = f"topology.links[{k}]"
            if not isinstance(link, list) or len(link) != 3:
                raise E("expected [i, j, count] with integers", field=p)
            links.append(
                (
                    as_int(link[0], p + "[0]", low=0, high=n - 1),
                    as_int(link[1], p + "[1]", low=0, high=n - 1),
                    as_int(link[2], p + "[2]", low=1, high=MAX_DEGREE),
                )
            )
        jumps = t.get("jumps")
        if jumps is not None:
            jumps = as_int_list(jumps, "topology.jumps", low=-MAX_SERVERS, high=MAX_SERVERS, max_len=MAX_DEGREE)
        topology = Topology.from_links(n, links, directed, jumps)
        if stated is not None:
            topology = replace(topology, stated_directed=stated)
    routing = _parse_routing(top.get("routing") or {})
    nums = {key: _number_or_null(top.get(key), key) for key in ("objective", "bound", "gap", "wall_time_s")}
    metrics = _parse_metrics(top.get("metrics") or {})
    return Solution(
        status=top["status"],
        method=_name(top["method"], "method"),
        topology=topology,
        routing=routing,
        placement=_placement(top.get("placement")),
        objective=nums["objective"],
        bound=nums["bound"],
        gap=nums["gap"],
        wall_time_s=float(nums["wall_time_s"] or 0.0),
        backend=None if top.get("backend") is None else _name(top["backend"], "backend"),
        metrics=metrics,
        details=_details(top.get("details"), topology.n if topology is not None else MAX_SERVERS),
        job=_job_choice(top.get("job")),
    )


def _job_choice(value: Any) -> dict[str, Any] | None:
    """A job instance's split and mapping as the solution records them (``Solution.job``): the
    structure here, whether the split fits the job is the verifier's."""
    if value is None:
        return None
    j = json_object(value, "job", {"parallelism", "server_map"}, {"parallelism"}, err=SolutionFileError)
    p = json_object(
        j["parallelism"],
        "job.parallelism",
        {"tp", "pp", "dp", "ep", "micro_batch"},
        {"tp", "pp", "dp"},
        err=SolutionFileError,
    )
    out: dict[str, Any] = {
        "parallelism": {k: as_int(v, f"job.parallelism.{k}", low=1, high=MAX_SERVERS * 1024) for k, v in p.items()}
    }
    if "server_map" in j:
        out["server_map"] = as_int_list(
            j["server_map"], "job.server_map", low=0, high=MAX_SERVERS - 1, max_len=MAX_SERVERS
        )
    return out


#: A placement's lists and the range of their entries (whether they fit the workload is the verifier's
#: question: the file is read without it).
_PLACEMENT_LISTS = {
    "layer_degree": (1, MAX_SERVERS),
    "layer_start": (0, MAX_SERVERS - 1),
    "block_server": (0, MAX_SERVERS - 1),
}


def _placement(value: Any) -> dict[str, list[int]] | None:
    """A workload's placement as a solution states it: lists of integers in range, named entry by
    entry (``placement.block_server[3]``)."""
    if value is None:
        return None
    p = json_object(value, "placement", set(_PLACEMENT_LISTS), {"layer_degree", "layer_start"}, err=SolutionFileError)
    return {
        key: as_int_list(p[key], f"placement.{key}", low=low, high=high)
        for key, (low, high) in _PLACEMENT_LISTS.items()
        if key in p
    }


def _name(value: Any, path: str) -> str:
    """A method's or back-end's name: short text (it is printed back in reports)."""
    name = as_str(value, path)
    if not 0 < len(name) <= 100 or not name.isprintable():
        raise SolutionFileError(f"expected a name of 1 to 100 printable characters, got {brief(name)}", field=path)
    return name


def _details(value: Any, n: int) -> dict[str, Any]:
    """What the method reports (free-form), except the entries other commands read back, checked
    here like the rest of the file: ``mp_links`` (``draw``, ``export``: ``[i, j, count]`` links),
    ``jumps_by_group_size`` (``draw``: jumps per group size) and ``rounds`` (``draw --what
    convergence``: the alternating method's phases)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SolutionFileError(f"expected an object, got {type_name(value)}", field="details")
    if value.get("mp_links") is not None:
        for k, link in enumerate(json_list(value["mp_links"], "details.mp_links", err=SolutionFileError)):
            p = f"details.mp_links[{k}]"
            if not isinstance(link, list) or len(link) != 3:
                raise SolutionFileError("expected [i, j, count] with integers", field=p)
            as_int_list(link[:2], p, low=0, high=n - 1)
            as_int(link[2], p + "[2]", low=1, high=MAX_DEGREE)
    if value.get("jumps_by_group_size") is not None:
        table = value["jumps_by_group_size"]
        if not isinstance(table, dict):
            raise SolutionFileError(f"expected an object, got {type_name(table)}", field="details.jumps_by_group_size")
        for size, jumps in table.items():
            path = f"details.jumps_by_group_size.{brief(size) if len(size) > 40 else size}"
            as_int_list(jumps, path, low=-MAX_SERVERS, high=MAX_SERVERS, max_len=MAX_DEGREE)
    if value.get("rounds") is not None:
        for k, entry in enumerate(json_list(value["rounds"], "details.rounds", err=SolutionFileError)):
            p = f"details.rounds[{k}]"
            if not isinstance(entry, dict):
                raise SolutionFileError(f"expected an object, got {type_name(entry)}", field=p)
            for key in ("iteration_time_s", "compute_time_s", "comm_time_s"):
                _number_or_null(entry.get(key), f"{p}.{key}")
            for key in ("round", "phase"):
                if isinstance(entry.get(key), (dict, list)):
                    raise SolutionFileError(
                        f"expected a number or text, got {type_name(entry[key])}", field=f"{p}.{key}"
                    )
    return value


def _number_or_null(value: Any, path: str) -> float | None:
    """A finite number, or null (JSON's stand-in for a non-finite one)."""
    return None if value is None else as_number(value, path)


#: Metrics a solution states whose value is text or a flag; every other metric is a number or null.
_TEXT_METRICS = {"routing": as_str, "connected": as_bool}
#: Metrics whose value is a list of numbers (null for a non-finite one).
_LIST_METRICS = {"group_times_s"}


def _parse_metrics(value: Any) -> dict[str, Any]:
    """The stated metrics: each a finite number or null, a list of them, or (``routing``,
    ``connected``) text or a flag. Whether they are right is the verifier's question."""
    if not isinstance(value, dict):
        raise SolutionFileError(f"expected an object, got {type_name(value)}", field="metrics")
    out: dict[str, Any] = {}
    for key, v in value.items():
        path = f"metrics.{brief(key) if len(key) > 40 else key}"
        if key in _TEXT_METRICS:
            out[key] = _TEXT_METRICS[key](v, path)
        elif key in _LIST_METRICS:
            items = json_list(v, path, err=SolutionFileError, max_len=MAX_INDEX)
            out[key] = [_number_or_null(x, f"{path}[{k}]") for k, x in enumerate(items)]
        else:
            out[key] = _number_or_null(v, path)
    return out


def _server_ids(value: Any, path: str, *, min_len: int = 0) -> list[int]:
    """Server ids as a route names them: never negative (``-1`` pads the arrays they go into)."""
    return as_int_list(value, path, low=0, high=MAX_SERVERS - 1, min_len=min_len)


def _jumps(value: Any, path: str) -> list[int]:
    """An offset route's jumps: never 0 (a 0 jump is no link; 0 pads the arrays they go into)."""
    jumps = as_int_list(value, path, low=-MAX_SERVERS, high=MAX_SERVERS)
    if 0 in jumps:
        raise SolutionFileError("a jump is never 0 (it would name no link)", field=f"{path}[{jumps.index(0)}]")
    return jumps


def _fraction(v: Any, path: str) -> float:
    """A share of traffic: a number in [0, 1]."""
    return as_number(v, path, nonnegative=True, high=1.0)


def _triple(item: Any, path: str, shape: str) -> list[Any]:
    if not isinstance(item, list) or len(item) != 3:
        raise SolutionFileError(f"expected {shape}", field=path)
    return item


def _parse_routing(value: Any) -> Routing:
    E = SolutionFileError
    r = json_object(value, "routing", {"rings", "paths", "offset_routes"}, err=E)
    rings, paths, offsets = [], [], []
    for k, item in enumerate(json_list(r.get("rings", []), "routing.rings", err=E)):
        p = f"routing.rings[{k}]"
        group, fraction, members = _triple(item, p, "[group, fraction, [members...]]")
        rings.append(
            (
                as_int(group, p + "[0]", low=0, high=MAX_INDEX),
                _server_ids(members, p + "[2]"),
                _fraction(fraction, p + "[1]"),
            )
        )
    for k, item in enumerate(json_list(r.get("paths", []), "routing.paths", err=E)):
        p = f"routing.paths[{k}]"
        if not isinstance(item, list) or len(item) != 2:
            raise E("expected [fraction, [nodes...]]", field=p)
        paths.append((_server_ids(item[1], p + "[1]", min_len=2), _fraction(item[0], p + "[0]")))
    for k, item in enumerate(json_list(r.get("offset_routes", []), "routing.offset_routes", err=E)):
        p = f"routing.offset_routes[{k}]"
        offset, fraction, jumps = _triple(item, p, "[offset, fraction, [jumps...]]")
        offsets.append(
            (
                as_int(offset, p + "[0]", low=0, high=MAX_SERVERS - 1),
                _jumps(jumps, p + "[2]"),
                _fraction(fraction, p + "[1]"),
            )
        )
    return Routing(
        rings=RingSet.from_lists(rings) if rings else RingSet.empty(),
        paths=PathSet.from_lists(paths) if paths else PathSet.empty(),
        offset_routes=OffsetRoutes.from_lists(offsets) if offsets else OffsetRoutes.empty(),
    )
