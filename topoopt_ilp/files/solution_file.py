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

from topoopt_ilp.core.instance import MAX_SERVERS
from topoopt_ilp.core.routes import OffsetRoutes, PathSet, RingSet, Routing
from topoopt_ilp.core.solution import STATUSES, Solution, Topology
from topoopt_ilp.errors import SolutionFileError
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
    r = sol.routing
    out["routing"] = {
        "rings": [[g, f, order] for g, order, f in r.rings.to_lists()],
        "paths": [[f, p] for p, f in r.paths.to_lists()],
        "offset_routes": [[o, f, j] for o, j, f in r.offset_routes.to_lists()],
    }
    out["placement"] = sol.placement
    out["metrics"] = dict(sol.metrics)
    if sol.details:
        out["details"] = sol.details
    # Everywhere, nested lists and details included (a disconnected group's time is inf): null.
    return json_safe(out)


def save_solution(sol: Solution, path: str | os.PathLike, *, directed: bool, instance_name: str | None = None) -> None:
    write_json_atomic(path, solution_to_dict(sol, directed=directed, instance_name=instance_name))


def load_solution(path: str | os.PathLike, *, directed: bool | None = None) -> Solution:
    """Read a solution file. ``directed`` (from the instance) wins over the file's own flag when the
    links are read; the file's own flag stays available as ``topology.stated_directed``."""
    data = read_json(path, SolutionFileError, MAX_SOLUTION_BYTES)
    return with_source(lambda: parse_solution(data, directed=directed), str(path), SolutionFileError)


def parse_solution(data: Any, *, directed: bool | None = None) -> Solution:
    """Read a solution's JSON form. Structure is checked here; feasibility is the verifier's job."""
    E = SolutionFileError
    check_format(data, SOLUTION_FORMAT, E)
    top = json_object(data, "", _SOL_KEYS, {"format", "version", "status", "method", "topology"}, err=E)
    if top["format"] != SOLUTION_FORMAT:
        raise E(f"expected {SOLUTION_FORMAT!r}, got {top['format']!r}", field="format")
    if top["version"] != VERSION:
        raise E(f"unsupported version {top['version']!r}", field="version")
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
        n = t["servers"]
        if isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= MAX_SERVERS:
            raise E(f"must be an integer in 2..{MAX_SERVERS}", field="topology.servers")
        links = []
        for k, link in enumerate(json_list(t["links"], "topology.links", err=E, max_len=MAX_SERVERS * 1024)):
            if (
                not isinstance(link, list)
                or len(link) != 3
                or any(isinstance(v, bool) or not isinstance(v, int) for v in link)
            ):
                raise E("expected [i, j, count] with integers", field=f"topology.links[{k}]")
            i, j, c = link
            if not (0 <= i < n and 0 <= j < n) or c < 1:
                raise E(f"servers must be in 0..{n - 1} and count >= 1, got {link}", field=f"topology.links[{k}]")
            links.append((i, j, c))
        jumps = t.get("jumps")
        if jumps is not None and (
            not isinstance(jumps, list) or any(isinstance(v, bool) or not isinstance(v, int) for v in jumps)
        ):
            raise E("expected a list of integers", field="topology.jumps")
        topology = Topology.from_links(n, links, directed, jumps)
        if stated is not None:
            topology = replace(topology, stated_directed=stated)
    routing = _parse_routing(top.get("routing") or {})
    nums = {}
    for key in ("objective", "bound", "gap", "wall_time_s"):
        v = top.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise E("expected a number or null", field=key)
        nums[key] = v
    metrics = top.get("metrics") or {}
    if not isinstance(metrics, dict):
        raise E("expected an object", field="metrics")
    return Solution(
        status=top["status"],
        method=str(top["method"]),
        topology=topology,
        routing=routing,
        placement=top.get("placement"),
        objective=nums["objective"],
        bound=nums["bound"],
        gap=nums["gap"],
        wall_time_s=float(nums["wall_time_s"] or 0.0),
        backend=top.get("backend"),
        metrics=metrics,
        details=top.get("details") or {},
    )


def _int_list(v: Any, path: str) -> list[int]:
    if not isinstance(v, list) or any(isinstance(x, bool) or not isinstance(x, int) for x in v):
        raise SolutionFileError("expected a list of integers", field=path)
    return v


def _fraction(v: Any, path: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
        raise SolutionFileError("expected a fraction in [0, 1]", field=path)
    return float(v)


def _parse_routing(value: Any) -> Routing:
    E = SolutionFileError
    r = json_object(value, "routing", {"rings", "paths", "offset_routes"}, err=E)
    rings, paths, offsets = [], [], []
    for k, item in enumerate(json_list(r.get("rings", []), "routing.rings", err=E)):
        p = f"routing.rings[{k}]"
        if not isinstance(item, list) or len(item) != 3 or isinstance(item[0], bool) or not isinstance(item[0], int):
            raise E("expected [group, fraction, [members...]]", field=p)
        rings.append((item[0], _int_list(item[2], p + "[2]"), _fraction(item[1], p + "[1]")))
    for k, item in enumerate(json_list(r.get("paths", []), "routing.paths", err=E)):
        p = f"routing.paths[{k}]"
        if not isinstance(item, list) or len(item) != 2:
            raise E("expected [fraction, [nodes...]]", field=p)
        nodes = _int_list(item[1], p + "[1]")
        if len(nodes) < 2:
            raise E("a path needs at least 2 nodes", field=p + "[1]")
        paths.append((nodes, _fraction(item[0], p + "[0]")))
    for k, item in enumerate(json_list(r.get("offset_routes", []), "routing.offset_routes", err=E)):
        p = f"routing.offset_routes[{k}]"
        if not isinstance(item, list) or len(item) != 3 or isinstance(item[0], bool) or not isinstance(item[0], int):
            raise E("expected [offset, fraction, [jumps...]]", field=p)
        offsets.append((item[0], _int_list(item[2], p + "[2]"), _fraction(item[1], p + "[1]")))
    return Routing(
        rings=RingSet.from_lists(rings) if rings else RingSet.empty(),
        paths=PathSet.from_lists(paths) if paths else PathSet.empty(),
        offset_routes=OffsetRoutes.from_lists(offsets) if offsets else OffsetRoutes.empty(),
    )
