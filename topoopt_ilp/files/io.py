"""Instance and solution files (design §6): strict JSON in, atomic JSON out.

Parsing is strict: unknown keys, wrong types, NaN/Infinity literals, oversized files and
out-of-range sizes are each one :class:`InputError` naming the file, the field path and the
reason. The semantic checks live with the dataclasses (``instance.py``); this module only maps
JSON onto them, so instances built in code are checked exactly like instances read from files.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import stat
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from topoopt_ilp.errors import InputError, InstanceError, SolutionFileError
from topoopt_ilp.core.instance import MAX_SERVERS, _type_name, AllReduceGroup, Cluster, CostModel, Demand, FixedTopology, Instance, SolverDefaults
from topoopt_ilp.core.routes import OffsetRoutes, PathSet, RingSet, Routing
from topoopt_ilp.core.solution import STATUSES, Solution, Topology

__all__ = [
    "load_instance",
    "parse_instance",
    "instance_to_dict",
    "save_instance",
    "load_solution",
    "parse_solution",
    "solution_to_dict",
    "save_solution",
    "write_json_atomic",
    "check_writable",
    "MAX_FILE_BYTES",
    "MAX_SOLUTION_BYTES",
]

INSTANCE_FORMAT = "topoopt-instance"
SOLUTION_FORMAT = "topoopt-solution"
VERSION = 1
# A dense 8192 x 8192 demand matrix alone would be ~1 GB of JSON; files this large are refused
# before parsing so that a hostile file costs a second, not the machine.
MAX_FILE_BYTES = 64 * 1024 * 1024
#: Solution files carry their routing, which grows as n^2 x path length: the heuristic's solution of
#: a 1024-server all-to-all job (degree 8) is 77 MiB (measured), so what the tool writes it must read.
MAX_SOLUTION_BYTES = 1024 * 1024 * 1024


# ----------------------------------------------------------------------------------------------
# Reading JSON safely
# ----------------------------------------------------------------------------------------------
def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _read_json(path: str | os.PathLike, error: type[InputError], limit: int | None = None) -> Any:
    """The JSON value in ``path``; ``limit``: largest file accepted (default :data:`MAX_FILE_BYTES`)."""
    source = str(path)
    limit = MAX_FILE_BYTES if limit is None else limit
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise error(f"cannot read file: {exc.strerror or exc}", source=source) from None
    if size > limit:
        raise error(f"file is {size / 2**20:.0f} MiB, larger than the {limit // 2**20} MiB limit", source=source)
    try:
        with open(path, "rb") as fh:
            text = fh.read().decode("utf-8")
    except UnicodeDecodeError:
        raise error("file is not UTF-8 text", source=source) from None
    except OSError as exc:
        raise error(f"cannot read file: {exc.strerror or exc}", source=source) from None
    try:
        return json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise error(f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", source=source) from None
    except (ValueError, RecursionError) as exc:
        raise error(f"malformed JSON: {exc}", source=source) from None


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict:
    """A JSON object as a dict, refusing a key given twice (json would keep the last one silently)."""
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {key!r} appears twice in one object")
        out[key] = value
    return out


def _obj(value: Any, path: str, allowed: set[str], required: set[str] = frozenset(), err=InstanceError) -> dict:
    if not isinstance(value, dict):
        raise err(f"expected an object, got {_type_name(value)}", field=path or None)
    unknown = sorted(set(value) - allowed, key=str)
    if unknown:
        raise err(f"unknown key {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})", field=path or None)
    missing = sorted(required - set(value))
    if missing:
        raise err(f"missing required key {missing[0]!r}", field=path or None)
    return value


def _list(value: Any, path: str, err=InstanceError, max_len: int | None = None) -> list:
    if not isinstance(value, list):
        raise err(f"expected a list, got {_type_name(value)}", field=path)
    if max_len is not None and len(value) > max_len:
        raise err(f"has {len(value)} entries, more than the {max_len} allowed", field=path)
    return value


def _check_format(data: Any, expected: str, err: type[InputError]) -> None:
    """Name a file of the wrong kind before complaining about its keys."""
    if isinstance(data, dict) and "format" in data and data["format"] != expected:
        kinds = {INSTANCE_FORMAT: "an instance file", SOLUTION_FORMAT: "a solution file"}
        other = kinds.get(data["format"]) if isinstance(data["format"], str) else None
        raise err(f"expected {expected!r}, got {data['format']!r}" + (f" (this is {other})" if other else ""), field="format")


def _with_source(fn: Callable[[], Any], source: str | None, error: type[InputError]) -> Any:
    try:
        return fn()
    except InputError as exc:
        if source and not exc.source:
            raise error(exc.reason, source=source, field=exc.field) from None
        raise


# ----------------------------------------------------------------------------------------------
# Instances
# ----------------------------------------------------------------------------------------------
_TOP_KEYS = {"format", "version", "name", "description", "cluster", "demand", "workload", "objective",
             "topology_family", "fixed_topology", "solver", "cost"}
_COST_TABLES = ("transceiver_usd", "nic_port_usd", "switch_port_usd")
_COST_KEYS = set(_COST_TABLES) | {"patch_panel_port_usd", "ocs_port_usd", "fabric"}
_CLUSTER_KEYS = {"servers", "degree", "link_bandwidth_gbps", "hop_latency_us", "links", "regular", "multi_links"}


def load_instance(path: str | os.PathLike) -> Instance:
    """Read and validate an instance file. Raises :class:`InstanceError` with file and field."""
    data = _read_json(path, InstanceError)
    return _with_source(lambda: parse_instance(data), str(path), InstanceError)


def parse_instance(data: Any) -> Instance:
    """Build an :class:`Instance` from already-decoded JSON data (a dict)."""
    _check_format(data, INSTANCE_FORMAT, InstanceError)
    top = _obj(data, "", _TOP_KEYS, {"format", "version", "cluster"})
    if top["format"] != INSTANCE_FORMAT:
        raise InstanceError(f"expected {INSTANCE_FORMAT!r}, got {top['format']!r}", field="format")
    if top["version"] != VERSION or isinstance(top["version"], bool):
        got = f"the string {top['version']!r}" if isinstance(top["version"], str) else repr(top["version"])
        raise InstanceError(f"unsupported version {got} (this release reads the number {VERSION})", field="version")
    c = _obj(top["cluster"], "cluster", _CLUSTER_KEYS, {"servers", "degree", "link_bandwidth_gbps"})
    cluster = Cluster(**c)  # validates sizes first, so nothing below can allocate by a hostile n
    n = cluster.servers
    if ("demand" in top) == ("workload" in top):
        raise InstanceError("an instance needs exactly one of 'demand' and 'workload'"
                            + (" (it has both)" if "demand" in top else " (it has neither)"))
    demand = _parse_demand(top["demand"], n) if "demand" in top else None
    workload = None
    if "workload" in top:
        from topoopt_ilp.core.workload import parse_workload

        workload = parse_workload(top["workload"], n)
    fixed = _parse_fixed(top["fixed_topology"]) if "fixed_topology" in top else None
    solver = SolverDefaults(**_obj(top.get("solver", {}), "solver", {"backend", "time_limit_s", "gap", "threads"}))
    cost = _parse_cost(top["cost"]) if "cost" in top else None
    for key in ("name", "description"):
        if key in top and not isinstance(top[key], str):
            raise InstanceError(f"expected a string, got {type(top[key]).__name__}", field=key)
    return Instance(
        cluster=cluster,
        demand=demand,
        workload=workload,
        objective=top.get("objective", "iteration_time"),
        topology_family=top.get("topology_family", "any"),
        fixed_topology=fixed,
        solver=solver,
        name=top.get("name", ""),
        description=top.get("description", ""),
        cost=cost,
    )


def _parse_demand(value: Any, n: int) -> Demand:
    d = _obj(value, "demand", {"allreduce", "mp", "all_to_all"})
    groups = []
    for g, item in enumerate(_list(d.get("allreduce", []), "demand.allreduce", max_len=100_000)):
        path = f"demand.allreduce[{g}]"
        gi = _obj(item, path, {"members", "bytes"}, {"members", "bytes"})
        members = gi["members"]
        if members == "all":
            members = tuple(range(n))
        else:
            members = tuple(_list(members, f"{path}.members", max_len=n + 1) if not isinstance(members, str)
                            else _bad_members(members, path))
        groups.append(AllReduceGroup(members=members, bytes=gi["bytes"]))
    pairs: list[tuple] = []
    if "mp" in d:
        mp = _obj(d["mp"], "demand.mp", {"pairs", "matrix"})
        if "pairs" in mp and "matrix" in mp:
            raise InstanceError("give either 'pairs' or 'matrix', not both", field="demand.mp")
        if "pairs" in mp:
            for p, pair in enumerate(_list(mp["pairs"], "demand.mp.pairs", max_len=n * (n - 1) * 4)):
                pairs.append(tuple(_list(pair, f"demand.mp.pairs[{p}]")))
        elif "matrix" in mp:
            pairs = _matrix_pairs(mp["matrix"], n)
    return Demand(allreduce=tuple(groups), mp=tuple(pairs), all_to_all=d.get("all_to_all", 0.0))


def _bad_members(value: str, path: str):
    raise InstanceError(f"expected a list of server ids or \"all\", got {value!r}", field=f"{path}.members")


def _matrix_pairs(matrix: Any, n: int) -> list[tuple[int, int, float]]:
    rows = _list(matrix, "demand.mp.matrix")
    if len(rows) != n:
        raise InstanceError(f"has {len(rows)} rows, expected {n} (one per server)", field="demand.mp.matrix")
    for i, row in enumerate(rows):
        r = _list(row, f"demand.mp.matrix[{i}]")
        if len(r) != n:
            raise InstanceError(f"has {len(r)} entries, expected {n}", field=f"demand.mp.matrix[{i}]")
    try:
        m = np.array(rows, dtype=float)
        ok = all(not isinstance(v, bool) for row in rows for v in row)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        for i, row in enumerate(rows):
            for j, v in enumerate(row):
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise InstanceError(f"expected a number, got {type(v).__name__}", field=f"demand.mp.matrix[{i}][{j}]")
    bad = np.argwhere(~np.isfinite(m) | (m < 0))
    if bad.size:
        i, j = map(int, bad[0])
        raise InstanceError(f"must be a finite number >= 0, got {m[i, j]}", field=f"demand.mp.matrix[{i}][{j}]")
    diag = np.flatnonzero(np.diag(m))
    if diag.size:
        i = int(diag[0])
        raise InstanceError("a server sends no traffic to itself: the diagonal must be 0", field=f"demand.mp.matrix[{i}][{i}]")
    i, j = np.nonzero(m)
    return [(int(a), int(b), float(v)) for a, b, v in zip(i, j, m[i, j])]


def _parse_cost(value: Any) -> CostModel:
    """The optional ``cost`` section: price tables ``{"<rate_gbps>": usd, ...}`` and per-port prices.
    Values are checked by :class:`CostModel`; only the rate keys (strings in JSON) are read here."""
    c = _obj(value, "cost", _COST_KEYS)
    tables: dict[str, Any] = {}
    for name in _COST_TABLES:
        if name not in c:
            continue
        table = c[name]
        if not isinstance(table, dict):
            raise InstanceError(f"expected an object {{\"<rate_gbps>\": usd}}, got {_type_name(table)}", field=f"cost.{name}")
        if not table:
            raise InstanceError("expected at least one {\"<rate_gbps>\": usd} entry", field=f"cost.{name}")
        entries = []
        for key, usd in table.items():
            try:
                rate = float(key)
            except ValueError:
                rate = math.nan
            if not math.isfinite(rate) or rate <= 0:
                raise InstanceError("a rate must be a number of Gbps > 0", field=f'cost.{name}["{key}"]')
            entries.append((rate, usd))
        tables[name] = tuple(sorted(entries, key=lambda e: e[0]))  # a JSON object has no order; rates do
    return CostModel(**tables, patch_panel_port_usd=c.get("patch_panel_port_usd"), ocs_port_usd=c.get("ocs_port_usd"),
                     fabric=c.get("fabric"))


def _parse_fixed(value: Any) -> FixedTopology:
    f = _obj(value, "fixed_topology", {"links", "jumps"})
    links = None
    if "links" in f:
        links = tuple(tuple(_list(link, f"fixed_topology.links[{k}]"))
                      for k, link in enumerate(_list(f["links"], "fixed_topology.links", max_len=MAX_SERVERS * 1024)))
    jumps = tuple(_list(f["jumps"], "fixed_topology.jumps", max_len=MAX_SERVERS)) if "jumps" in f else None
    return FixedTopology(links=links, jumps=jumps)


def instance_to_dict(inst: Instance) -> dict[str, Any]:
    """The JSON form of an instance (compact: ``"all"`` for full groups, pairs for MP traffic)."""
    c = inst.cluster
    out: dict[str, Any] = {"format": INSTANCE_FORMAT, "version": VERSION}
    if inst.name:
        out["name"] = inst.name
    if inst.description:
        out["description"] = inst.description
    out["cluster"] = {
        "servers": c.servers, "degree": c.degree, "link_bandwidth_gbps": c.link_bandwidth_gbps,
        "hop_latency_us": c.hop_latency_us, "links": c.links, "regular": c.regular, "multi_links": c.multi_links,
    }
    if inst.demand is not None:
        dm = inst.demand
        demand: dict[str, Any] = {}
        if dm.allreduce:
            demand["allreduce"] = [
                {"members": "all" if g.members == tuple(range(c.servers)) else list(g.members), "bytes": g.bytes}
                for g in dm.allreduce
            ]
        if dm.mp:
            demand["mp"] = {"pairs": [list(p) for p in dm.mp]}
        if dm.all_to_all:
            demand["all_to_all"] = dm.all_to_all
        out["demand"] = demand
    if inst.workload is not None:
        from topoopt_ilp.core.workload import workload_to_dict

        out["workload"] = workload_to_dict(inst.workload)
    out["objective"] = inst.objective
    out["topology_family"] = inst.topology_family
    if inst.fixed_topology is not None:
        ft = inst.fixed_topology
        out["fixed_topology"] = {"jumps": list(ft.jumps)} if ft.jumps is not None else {"links": [list(x) for x in ft.links]}
    s = inst.solver
    solver = {k: v for k, v in (("backend", s.backend), ("time_limit_s", s.time_limit_s), ("gap", s.gap), ("threads", s.threads)) if v is not None}
    if solver:
        out["solver"] = solver
    if inst.cost is not None:
        cm = inst.cost
        cost: dict[str, Any] = {}
        for name in _COST_TABLES:
            if getattr(cm, name) is not None:
                cost[name] = {f"{rate:.15g}": usd for rate, usd in getattr(cm, name)}
        for name in ("patch_panel_port_usd", "ocs_port_usd", "fabric"):
            if getattr(cm, name) is not None:
                cost[name] = getattr(cm, name)
        out["cost"] = cost
    return out


def save_instance(inst: Instance, path: str | os.PathLike) -> None:
    write_json_atomic(path, instance_to_dict(inst))


# ----------------------------------------------------------------------------------------------
# Solutions
# ----------------------------------------------------------------------------------------------
_SOL_KEYS = {"format", "version", "status", "objective", "bound", "gap", "wall_time_s", "method", "backend",
             "topology", "routing", "placement", "metrics", "details", "instance"}


def _num_or_none(v: float | None) -> float | None:
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def solution_to_dict(sol: Solution, *, directed: bool, instance_name: str | None = None) -> dict[str, Any]:
    """The JSON form of a solution (design §6). Non-finite numbers become null (JSON has none)."""
    out: dict[str, Any] = {"format": SOLUTION_FORMAT, "version": VERSION}
    if instance_name:
        out["instance"] = instance_name
    out.update({
        "status": sol.status,
        "objective": _num_or_none(sol.objective),
        "bound": _num_or_none(sol.bound),
        "gap": _num_or_none(sol.gap),
        "wall_time_s": round(float(sol.wall_time_s), 6),
        "method": sol.method,
        "backend": sol.backend,
    })
    if sol.topology is not None:
        topo: dict[str, Any] = {"servers": sol.topology.n, "directed": directed,
                                "links": [list(x) for x in sol.topology.links(directed)]}
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
    data = _read_json(path, SolutionFileError, MAX_SOLUTION_BYTES)
    return _with_source(lambda: parse_solution(data, directed=directed), str(path), SolutionFileError)


def parse_solution(data: Any, *, directed: bool | None = None) -> Solution:
    """Read a solution's JSON form. Structure is checked here; feasibility is the verifier's job."""
    E = SolutionFileError
    _check_format(data, SOLUTION_FORMAT, E)
    top = _obj(data, "", _SOL_KEYS, {"format", "version", "status", "method", "topology"}, err=E)
    if top["format"] != SOLUTION_FORMAT:
        raise E(f"expected {SOLUTION_FORMAT!r}, got {top['format']!r}", field="format")
    if top["version"] != VERSION:
        raise E(f"unsupported version {top['version']!r}", field="version")
    if top["status"] not in STATUSES:
        raise E(f"must be one of {', '.join(STATUSES)}", field="status")
    topology = None
    if top["topology"] is not None:
        t = _obj(top["topology"], "topology", {"servers", "directed", "links", "jumps"}, {"servers", "links"}, err=E)
        stated = t.get("directed")
        if stated is not None and not isinstance(stated, bool):
            raise E("expected true or false", field="topology.directed")
        if directed is None:
            directed = bool(stated)
        n = t["servers"]
        if isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= MAX_SERVERS:
            raise E(f"must be an integer in 2..{MAX_SERVERS}", field="topology.servers")
        links = []
        for k, link in enumerate(_list(t["links"], "topology.links", err=E, max_len=MAX_SERVERS * 1024)):
            if (not isinstance(link, list) or len(link) != 3
                    or any(isinstance(v, bool) or not isinstance(v, int) for v in link)):
                raise E("expected [i, j, count] with integers", field=f"topology.links[{k}]")
            i, j, c = link
            if not (0 <= i < n and 0 <= j < n) or c < 1:
                raise E(f"servers must be in 0..{n - 1} and count >= 1, got {link}", field=f"topology.links[{k}]")
            links.append((i, j, c))
        jumps = t.get("jumps")
        if jumps is not None and (not isinstance(jumps, list) or any(isinstance(v, bool) or not isinstance(v, int) for v in jumps)):
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
        status=top["status"], method=str(top["method"]), topology=topology, routing=routing,
        placement=top.get("placement"), objective=nums["objective"], bound=nums["bound"], gap=nums["gap"],
        wall_time_s=float(nums["wall_time_s"] or 0.0), backend=top.get("backend"), metrics=metrics,
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
    r = _obj(value, "routing", {"rings", "paths", "offset_routes"}, err=E)
    rings, paths, offsets = [], [], []
    for k, item in enumerate(_list(r.get("rings", []), "routing.rings", err=E)):
        p = f"routing.rings[{k}]"
        if not isinstance(item, list) or len(item) != 3 or isinstance(item[0], bool) or not isinstance(item[0], int):
            raise E("expected [group, fraction, [members...]]", field=p)
        rings.append((item[0], _int_list(item[2], p + "[2]"), _fraction(item[1], p + "[1]")))
    for k, item in enumerate(_list(r.get("paths", []), "routing.paths", err=E)):
        p = f"routing.paths[{k}]"
        if not isinstance(item, list) or len(item) != 2:
            raise E("expected [fraction, [nodes...]]", field=p)
        nodes = _int_list(item[1], p + "[1]")
        if len(nodes) < 2:
            raise E("a path needs at least 2 nodes", field=p + "[1]")
        paths.append((nodes, _fraction(item[0], p + "[0]")))
    for k, item in enumerate(_list(r.get("offset_routes", []), "routing.offset_routes", err=E)):
        p = f"routing.offset_routes[{k}]"
        if not isinstance(item, list) or len(item) != 3 or isinstance(item[0], bool) or not isinstance(item[0], int):
            raise E("expected [offset, fraction, [jumps...]]", field=p)
        offsets.append((item[0], _int_list(item[2], p + "[2]"), _fraction(item[1], p + "[1]")))
    return Routing(
        rings=RingSet.from_lists(rings) if rings else RingSet.empty(),
        paths=PathSet.from_lists(paths) if paths else PathSet.empty(),
        offset_routes=OffsetRoutes.from_lists(offsets) if offsets else OffsetRoutes.empty(),
    )


# ----------------------------------------------------------------------------------------------
def json_safe(v: Any) -> Any:
    """JSON has no infinity or NaN: a non-finite number (a disconnected topology's time) becomes null."""
    if isinstance(v, (np.generic, np.ndarray)):
        v = v.tolist()  # numpy scalars and arrays as plain Python numbers and lists
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, Mapping):  # dicts, and a Solution's read-only mappings
        return {k: json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_safe(x) for x in v]
    return v


def _output_problem(path: str | os.PathLike) -> str | None:
    """Why ``path`` cannot be an output file (its directory missing, it being a directory), or None."""
    text = os.fspath(path)
    if not str(text).strip():
        return "the file name is empty"
    target = Path(text)
    if target.is_dir():
        return "is a directory"
    if text.endswith(tuple(sep for sep in (os.sep, os.altsep) if sep)):
        # Path() drops a trailing separator: "out.json/" would write (or replace) "out.json"
        return (f"the name ends in {text[-1]}, so it names a directory, and {target} is a file" if target.exists()
                else f"directory {target} does not exist")
    directory = target.parent
    if not directory.exists():
        return f"directory {directory} does not exist"
    if not directory.is_dir():
        return f"{directory} is not a directory"
    return None


def check_writable(path: str | os.PathLike, option: str = "--out",
                   inputs: Mapping[str, str | os.PathLike | Sequence[str | os.PathLike] | None] | None = None,
                   what: str = "the output") -> None:
    """Raise :class:`InputError` (exit 2) when ``path`` cannot be written, or is one of the
    command's ``inputs`` (role -> path or paths, e.g. ``{"instance": ...}``; ``what`` would overwrite it):
    called before a long computation, so that a typo in an output path costs nothing. Probes the
    directory with a temporary file (permission bits alone do not tell, e.g. for root or on /proc)."""
    text = os.fspath(path)
    if not str(text).strip():
        raise InputError(f"{option} needs a file name, got {text!r}")
    for role, given in (inputs or {}).items():
        for one in ([] if given is None else [given] if isinstance(given, (str, os.PathLike)) else given):
            if os.path.exists(text) and os.path.exists(one) and os.path.samefile(text, one):
                name = text if os.fspath(one) == text else f"{text} ({one})"
                raise InputError(f"{option} {name} is the {role} file itself: {what} would overwrite it")
    problem = _output_problem(path)
    if problem:
        raise InputError(f"cannot write {text}: {problem}")
    target = Path(text)
    if _is_special(text):  # written into, not replaced (write_atomic): its own permission decides
        if not os.access(text, os.W_OK):
            raise InputError(f"cannot write {text}: permission denied")
        return
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".probe", dir=target.parent)
    except OSError as exc:
        raise InputError(f"cannot write {text}: directory {target.parent} is not writable ({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(probe)


def _is_special(path: str | os.PathLike) -> bool:
    """Does ``path`` (through links) exist as something other than a regular file or a directory: a
    device such as /dev/null, a FIFO, a socket?"""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def write_atomic(path: str | os.PathLike, render: Callable[[str], None]) -> None:
    """Let ``render`` write a temporary file beside ``path`` (same extension, so matplotlib picks the
    format) and rename it into place: a failed or interrupted run never leaves a partial file. A
    symbolic link is written through (its target replaced, the link kept); a device or FIFO (e.g.
    /dev/null) is written into once the whole output is rendered, never replaced by a file."""
    problem = _output_problem(path)
    if problem:
        raise InputError(f"cannot write {os.fspath(path)}: {problem}")
    if _is_special(path):
        with tempfile.TemporaryDirectory() as scratch:
            tmp = os.path.join(scratch, "output" + Path(path).suffix)
            render(tmp)
            with open(tmp, "rb") as src, open(path, "wb") as dst:
                shutil.copyfileobj(src, dst)
        return
    target = Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    try:
        # the suffix as given (a link's target may have another): matplotlib picks the format by it
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=Path(path).suffix or target.suffix or ".tmp",
                                   dir=directory)
    except OSError as exc:
        raise InputError(f"cannot write {os.fspath(path)}: directory {directory} is not writable ({exc.strerror or exc})") from None
    os.close(fd)
    try:
        render(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; the result is an ordinary file
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_json_atomic(path: str | os.PathLike, data: Any) -> None:
    """Write JSON atomically (see :func:`write_atomic`)."""

    def dump(tmp: str) -> None:
        with open(tmp, "w") as fh:
            json.dump(data, fh, indent=1, allow_nan=False)
            fh.write("\n")

    write_atomic(path, dump)
