"""Instance files: strict JSON onto the validated data types of :mod:`topoopt_ilp.core`.

Parsing is strict: unknown keys, wrong types, NaN/Infinity literals, oversized files and
out-of-range sizes are each one :class:`~topoopt_ilp.errors.InputError` naming the file, the field
path and the reason. The semantic checks live with the data types (``core/instance.py``,
``core/workload.py``); this module only maps JSON onto them, so instances built in code are
checked exactly like instances read from files.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from topoopt_ilp.core.checks import MAX_BYTES, as_int, as_int_list, as_number, brief, type_name
from topoopt_ilp.core.instance import (
    MAX_SERVERS,
    AllReduceGroup,
    Cluster,
    CostModel,
    Demand,
    FixedTopology,
    Instance,
    JobSpec,
    SolverDefaults,
)
from topoopt_ilp.core.job_section import GivenLoad, ZipfLoad, model_fields, model_from_fields
from topoopt_ilp.core.workload import (
    COMPUTE_MODELS,
    DEFAULT_DEVICE_FLOPS,
    MAX_ITEMS,
    Block,
    Layer,
    Workload,
    check_workload,
)
from topoopt_ilp.errors import InputError, InstanceError, NoFeasibleParallelisationError
from topoopt_ilp.files.graph_file import fixed_links, read_graph
from topoopt_ilp.files.jsonio import check_format, json_list, json_object, read_json, with_source, write_json_atomic
from topoopt_ilp.jobs.job import Parallelism

__all__ = [
    "INSTANCE_FORMAT",
    "VERSION",
    "load_instance",
    "parse_instance",
    "instance_to_dict",
    "save_instance",
    "parse_workload",
    "workload_to_dict",
    "parse_job",
    "job_to_dict",
]

INSTANCE_FORMAT = "topoopt-instance"
#: The file version this release reads and writes (instance and solution files alike).
VERSION = 1

_WORKLOAD_KEYS = {"layers", "blocks", "batch_size", "server_memory_bytes", "device_flops", "overlap", "compute_model"}
_LAYER_KEYS = {"name", "compute_s", "flops", "param_bytes", "activation_bytes", "memory_bytes", "configs", "measured"}
_BLOCK_KEYS = {"name", "bytes", "lookup_bytes", "compute_s", "consumer"}


_TOP_KEYS = {
    "format",
    "version",
    "name",
    "description",
    "cluster",
    "demand",
    "workload",
    "job",
    "objective",
    "topology_family",
    "fixed_topology",
    "solver",
    "cost",
}
_COST_TABLES = ("transceiver_usd", "nic_port_usd", "switch_port_usd")
_COST_KEYS = set(_COST_TABLES) | {"patch_panel_port_usd", "ocs_port_usd", "fabric"}
_CLUSTER_KEYS = {
    "servers",
    "degree",
    "link_bandwidth_gbps",
    "hop_latency_us",
    "links",
    "regular",
    "multi_links",
    "accelerators_per_server",
    "scale_up_gbps_per_accelerator",
}
_JOB_KEYS = {
    "model",
    "global_batch",
    "parallelism",
    "precision_bytes",
    "grad_bytes",
    "optimizer_bytes",
    "zero_stage",
    "recompute",
    "flash_attention",
    "device_tflops",
    "efficiency",
    "memory_gb",
    "overlap",
    "expert_load",
    "expert_scenario",
    "server_map",
}
_PARALLELISM_KEYS = {"tp", "pp", "dp", "ep", "micro_batch"}


def load_instance(path: str | os.PathLike) -> Instance:
    """Read and validate an instance file. Raises :class:`InstanceError` with file and field."""
    data = read_json(path, InstanceError)
    base = os.path.dirname(os.fspath(path))
    try:
        return with_source(lambda: parse_instance(data, base_dir=base), str(path), InstanceError)
    except NoFeasibleParallelisationError as exc:  # exit 3, but still about this file: name it
        raise NoFeasibleParallelisationError(f"{path}: {exc}") from None


def parse_instance(data: Any, *, base_dir: str | os.PathLike | None = None) -> Instance:
    """Build an :class:`Instance` from already-decoded JSON data (a dict). ``base_dir``: where a
    ``fixed_topology.file`` given as a relative path is found (default: the working directory)."""
    check_format(data, INSTANCE_FORMAT, InstanceError)
    top = json_object(data, "", _TOP_KEYS, {"format", "version", "cluster"})
    if top["format"] != INSTANCE_FORMAT:
        raise InstanceError(f"expected {INSTANCE_FORMAT!r}, got {brief(top['format'])}", field="format")
    if top["version"] != VERSION or isinstance(top["version"], bool):
        got = f"the string {brief(top['version'])}" if isinstance(top["version"], str) else brief(top["version"])
        raise InstanceError(f"unsupported version {got} (this release reads the number {VERSION})", field="version")
    c = json_object(top["cluster"], "cluster", _CLUSTER_KEYS, {"servers", "degree", "link_bandwidth_gbps"})
    cluster = Cluster(**c)  # validates sizes first, so nothing below can allocate by a hostile n
    n = cluster.servers
    sections = [k for k in ("demand", "workload", "job") if k in top]
    if len(sections) != 1:
        raise InstanceError(
            "an instance needs exactly one of 'demand', 'workload' and 'job'"
            + (f" (it has {' and '.join(sections)})" if sections else " (it has none)")
        )
    demand = _parse_demand(top["demand"], n) if "demand" in top else None
    workload = None
    if "workload" in top:
        workload = parse_workload(top["workload"], n)
    job = parse_job(top["job"]) if "job" in top else None
    graph_file = None
    if "fixed_topology" in top:
        section, family = top["fixed_topology"], top.get("topology_family", "any")
        if isinstance(section, dict) and "file" in section and family != "any":  # before reading the file
            raise InstanceError(
                f"topology_family {brief(family)} needs 'jumps', not a graph file", field="fixed_topology"
            )
        fixed, graph_file = _parse_fixed(section, cluster, base_dir)
    else:
        fixed = None
    solver = SolverDefaults(
        **json_object(top.get("solver", {}), "solver", {"backend", "time_limit_s", "gap", "threads"})
    )
    cost = _parse_cost(top["cost"]) if "cost" in top else None
    for key in ("name", "description"):
        if key in top and not isinstance(top[key], str):
            raise InstanceError(f"expected a string, got {type(top[key]).__name__}", field=key)
    try:
        return _instance(top, cluster, demand, workload, fixed, solver, cost, job)
    except InstanceError as exc:
        if graph_file is None or not (exc.field or "").startswith("fixed_topology"):
            raise
        # the degree and parallel-link checks of the links read from the graph file: named by the file
        raise InstanceError(f"{_shown(graph_file)}: {exc.reason}", field="fixed_topology.file") from None


def _instance(top: dict, cluster, demand, workload, fixed, solver, cost, job) -> Instance:
    return Instance(
        job=job,
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
    d = json_object(value, "demand", {"allreduce", "mp", "all_to_all"})
    groups = []
    for g, item in enumerate(json_list(d.get("allreduce", []), "demand.allreduce", max_len=100_000)):
        path = f"demand.allreduce[{g}]"
        gi = json_object(item, path, {"members", "bytes"}, {"members", "bytes"})
        members = gi["members"]
        if members == "all":
            members = tuple(range(n))
        else:
            members = tuple(
                json_list(members, f"{path}.members", max_len=n + 1)
                if not isinstance(members, str)
                else _bad_members(members, path)
            )
        groups.append(AllReduceGroup(members=members, bytes=gi["bytes"]))
    pairs: list[tuple] = []
    if "mp" in d:
        mp = json_object(d["mp"], "demand.mp", {"pairs", "matrix"})
        if "pairs" in mp and "matrix" in mp:
            raise InstanceError("give either 'pairs' or 'matrix', not both", field="demand.mp")
        if "pairs" in mp:
            for p, pair in enumerate(json_list(mp["pairs"], "demand.mp.pairs", max_len=n * (n - 1) * 4)):
                pairs.append(tuple(json_list(pair, f"demand.mp.pairs[{p}]")))
        elif "matrix" in mp:
            pairs = _matrix_pairs(mp["matrix"], n)
    return Demand(allreduce=tuple(groups), mp=tuple(pairs), all_to_all=d.get("all_to_all", 0.0))


def _bad_members(value: str, path: str):
    raise InstanceError(f'expected a list of server ids or "all", got {brief(value)}', field=f"{path}.members")


def _matrix_pairs(matrix: Any, n: int) -> list[tuple[int, int, float]]:
    rows = json_list(matrix, "demand.mp.matrix")
    if len(rows) != n:
        raise InstanceError(f"has {len(rows)} rows, expected {n} (one per server)", field="demand.mp.matrix")
    for i, row in enumerate(rows):
        r = json_list(row, f"demand.mp.matrix[{i}]")
        if len(r) != n:
            raise InstanceError(f"has {len(r)} entries, expected {n}", field=f"demand.mp.matrix[{i}]")
    # Plain JSON numbers go to numpy at C speed; anything else (a string "1" that float() would take,
    # a boolean, a 400-digit integer) is checked entry by entry, to name the entry that is wrong.
    plain = all(type(v) is float or (type(v) is int and abs(v) <= MAX_BYTES) for row in rows for v in row)
    if not plain:
        for i, row in enumerate(rows):
            for j, v in enumerate(row):
                as_number(v, f"demand.mp.matrix[{i}][{j}]", nonnegative=True, high=MAX_BYTES)
    m = np.array(rows, dtype=float)
    bad = np.argwhere(~np.isfinite(m) | (m < 0) | (m > MAX_BYTES))
    if bad.size:
        i, j = map(int, bad[0])
        as_number(rows[i][j], f"demand.mp.matrix[{i}][{j}]", nonnegative=True, high=MAX_BYTES)
    diag = np.flatnonzero(np.diag(m))
    if diag.size:
        i = int(diag[0])
        raise InstanceError(
            "a server sends no traffic to itself: the diagonal must be 0", field=f"demand.mp.matrix[{i}][{i}]"
        )
    i, j = np.nonzero(m)
    return [(int(a), int(b), float(v)) for a, b, v in zip(i, j, m[i, j])]


def _parse_cost(value: Any) -> CostModel:
    """The optional ``cost`` section: price tables ``{"<rate_gbps>": usd, ...}`` and per-port prices.
    Values are checked by :class:`CostModel`; only the rate keys (strings in JSON) are read here."""
    c = json_object(value, "cost", _COST_KEYS)
    tables: dict[str, Any] = {}
    for name in _COST_TABLES:
        if name not in c:
            continue
        table = c[name]
        if not isinstance(table, dict):
            raise InstanceError(
                f'expected an object {{"<rate_gbps>": usd}}, got {type_name(table)}', field=f"cost.{name}"
            )
        if not table:
            raise InstanceError('expected at least one {"<rate_gbps>": usd} entry', field=f"cost.{name}")
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
    return CostModel(
        **tables,
        patch_panel_port_usd=c.get("patch_panel_port_usd"),
        ocs_port_usd=c.get("ocs_port_usd"),
        fabric=c.get("fabric"),
    )


def _parse_fixed(value: Any, cluster: Cluster, base_dir: str | os.PathLike | None) -> tuple[FixedTopology, str | None]:
    """The fixed topology, and the name of the graph file it was read from (None when inline)."""
    f = json_object(value, "fixed_topology", {"links", "jumps", "file"})
    if "file" in f or not f:
        if len(f) != 1:
            raise InstanceError("give exactly one of 'links', 'jumps' and 'file'", field="fixed_topology")
        name = f["file"]
        if not isinstance(name, str) or not name.strip():
            raise InstanceError(f"expected a file name, got {brief(name)}", field="fixed_topology.file")
        return FixedTopology(links=_graph_file_links(name, cluster, base_dir)), name
    links, rates = None, None
    if "links" in f:
        entries = [
            tuple(json_list(link, f"fixed_topology.links[{k}]"))
            for k, link in enumerate(json_list(f["links"], "fixed_topology.links", max_len=MAX_SERVERS * 1024))
        ]
        for k, entry in enumerate(entries):
            if len(entry) not in (3, 4, 5):
                raise InstanceError(
                    "expected [i, j, count] or [i, j, count, gbps, latency_us]", field=f"fixed_topology.links[{k}]"
                )
        links = tuple(entry[:3] for entry in entries)
        if any(len(entry) > 3 for entry in entries):  # the link's own rate; null or absent: the cluster's
            rates = tuple((tuple(entry[3:]) + (None, None))[:2] for entry in entries)
    jumps = tuple(json_list(f["jumps"], "fixed_topology.jumps", max_len=MAX_SERVERS)) if "jumps" in f else None
    return FixedTopology(links=links, jumps=jumps, rates=rates), None


def _graph_file_links(name: str, cluster: Cluster, base_dir: str | os.PathLike | None) -> tuple:
    """The links of the graph file ``name`` (relative to ``base_dir``), checked as inline links are;
    every problem is one error naming the file, with field ``fixed_topology.file``."""
    path = os.path.join(base_dir, name) if base_dir else name
    try:
        graph = read_graph(
            path,
            directed=cluster.directed,
            max_nodes=cluster.servers,
            max_edges=cluster.servers * cluster.degree,
        )
        return fixed_links(graph, cluster)
    except InputError as exc:
        reason = ": ".join(p for p in (exc.field if exc.field != "graph" else None, exc.reason) if p)
        raise InstanceError(f"{_shown(name)}: {reason}", field="fixed_topology.file") from None


def _shown(name: str) -> str:
    """A graph file's name as an error shows it: on one line, whatever the name holds."""
    return name if len(name) <= 80 and name.isprintable() else brief(name)


def instance_to_dict(inst: Instance) -> dict[str, Any]:
    """The JSON form of an instance (compact: ``"all"`` for full groups, pairs for MP traffic)."""
    c = inst.cluster
    out: dict[str, Any] = {"format": INSTANCE_FORMAT, "version": VERSION}
    if inst.name:
        out["name"] = inst.name
    if inst.description:
        out["description"] = inst.description
    out["cluster"] = {
        "servers": c.servers,
        "degree": c.degree,
        "link_bandwidth_gbps": c.link_bandwidth_gbps,
        "hop_latency_us": c.hop_latency_us,
        "links": c.links,
        "regular": c.regular,
        "multi_links": c.multi_links,
    }
    if c.accelerators_per_server != 1:  # the defaults stay implicit: files written before are unchanged
        out["cluster"]["accelerators_per_server"] = c.accelerators_per_server
    if c.scale_up_gbps_per_accelerator is not None:
        out["cluster"]["scale_up_gbps_per_accelerator"] = c.scale_up_gbps_per_accelerator
    if inst.job is not None:
        out["job"] = job_to_dict(inst.job)
    elif inst.demand is not None:
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
        out["workload"] = workload_to_dict(inst.workload)
    out["objective"] = inst.objective
    out["topology_family"] = inst.topology_family
    if inst.fixed_topology is not None:
        ft = inst.fixed_topology
        out["fixed_topology"] = (
            {"jumps": list(ft.jumps)}
            if ft.jumps is not None
            else {"links": [list(x) + list(r) for x, r in zip(ft.links, ft.rates or [()] * len(ft.links))]}
        )
    s = inst.solver
    solver = {
        k: v
        for k, v in (("backend", s.backend), ("time_limit_s", s.time_limit_s), ("gap", s.gap), ("threads", s.threads))
        if v is not None
    }
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
# The workload section
# ----------------------------------------------------------------------------------------------
def parse_workload(data: Any, n: int) -> Workload:
    """Build and check a :class:`Workload` from the decoded ``workload`` JSON section.

    Parameters
    ----------
    data : Any
        The ``workload`` value of an instance (a dict, as ``json.loads`` returns it).
    n : int
        Number of servers of the cluster (already validated).

    Returns
    -------
    Workload

    Raises
    ------
    InstanceError
        With the field path (``workload.layers[3].configs[1]``) and the reason: unknown or missing
        keys, wrong types, non-finite or negative numbers, a degree not dividing n, a block larger
        than a server's memory, or a workload failing the feasibility conditions of the module
        docstring.
    """
    w = json_object(data, "workload", _WORKLOAD_KEYS, {"layers", "batch_size", "server_memory_bytes"})
    layers = []
    for i, item in enumerate(json_list(w["layers"], "workload.layers", max_len=MAX_ITEMS)):
        path = f"workload.layers[{i}]"
        li = json_object(item, path, _LAYER_KEYS, {"name", "param_bytes", "activation_bytes", "configs"})
        configs = json_list(li["configs"], f"{path}.configs", max_len=MAX_ITEMS)
        measured = None
        if "measured" in li:
            m = li["measured"]
            if not isinstance(m, dict):
                raise InstanceError(
                    f'expected an object {{"k": seconds}}, got {type_name(m)}', field=f"{path}.measured"
                )
            measured = {}
            for key, secs in m.items():
                if not (isinstance(key, str) and key.isascii() and key.isdigit() and len(key) < 10):
                    raise InstanceError(
                        f"key {brief(key)} is not a degree (a positive integer)", field=f"{path}.measured"
                    )
                measured[int(key)] = secs
        layers.append(
            Layer(
                name=li["name"],
                compute_s=li.get("compute_s"),
                flops=li.get("flops"),
                param_bytes=li["param_bytes"],
                activation_bytes=li["activation_bytes"],
                memory_bytes=li.get("memory_bytes"),
                configs=tuple(configs),
                measured=measured,
            )
        )
    blocks = []
    for b, item in enumerate(json_list(w.get("blocks", []), "workload.blocks", max_len=MAX_ITEMS)):
        path = f"workload.blocks[{b}]"
        bi = json_object(item, path, _BLOCK_KEYS, {"name", "bytes", "lookup_bytes"})
        blocks.append(Block(**bi))
    wl = Workload(
        layers=tuple(layers),
        blocks=tuple(blocks),
        batch_size=w["batch_size"],
        server_memory_bytes=w["server_memory_bytes"],
        device_flops=w.get("device_flops", DEFAULT_DEVICE_FLOPS),
        overlap=w.get("overlap", "none"),
        compute_model=w.get("compute_model", COMPUTE_MODELS[0]),
    )
    check_workload(wl, n)
    return wl


def workload_to_dict(w: Workload) -> dict:
    """The JSON form of a workload; ``parse_workload(workload_to_dict(w), n) == w``."""
    layers = []
    for layer in w.layers:
        d: dict[str, Any] = {"name": layer.name}
        if layer.compute_s is not None:
            d["compute_s"] = layer.compute_s
        if layer.flops is not None:
            d["flops"] = layer.flops
        d["param_bytes"] = layer.param_bytes
        d["activation_bytes"] = layer.activation_bytes
        d["memory_bytes"] = layer.memory_bytes
        d["configs"] = [int(k) for k in layer.configs]
        if layer.measured is not None:
            d["measured"] = {str(int(k)): v for k, v in sorted(layer.measured.items())}
        layers.append(d)
    out: dict[str, Any] = {
        "batch_size": w.batch_size,
        "server_memory_bytes": w.server_memory_bytes,
        "device_flops": w.device_flops,
        "overlap": w.overlap,
    }
    if w.compute_model != COMPUTE_MODELS[0]:  # the default stays implicit: files written before are unchanged
        out["compute_model"] = w.compute_model
    out["layers"] = layers
    if w.blocks:
        out["blocks"] = [
            {
                "name": b.name,
                "bytes": b.bytes,
                "lookup_bytes": b.lookup_bytes,
                "compute_s": b.compute_s,
                "consumer": b.consumer,
            }
            for b in w.blocks
        ]
    return out


# ----------------------------------------------------------------------------------------------
# The job section
# ----------------------------------------------------------------------------------------------
def parse_job(data: Any) -> JobSpec:
    """Build a :class:`JobSpec` from the decoded ``job`` section (docs/guide/instance-format.md);
    the numbers are checked by :class:`JobSpec` (and, inline, by the model's reader), each error
    naming its field (``job.parallelism.tp``, ``job.model.layers``)."""
    j = json_object(data, "job", _JOB_KEYS, {"model", "global_batch"})
    model = j["model"]
    if isinstance(model, dict):
        keys = model_fields()
        fields = json_object(model, "job.model", set(keys["model"]), set(keys["model"][:7]))
        for part in ("moe", "mla"):
            if part in fields:
                fields[part] = json_object(fields[part], f"job.model.{part}", set(keys[part]), _required(part))
        model = model_from_fields(fields)
    elif not isinstance(model, str):
        raise InstanceError(f"expected a zoo model name or an object, got {type_name(model)}", field="job.model")
    parallelism = j.get("parallelism", "search")
    if not isinstance(parallelism, str):
        p = json_object(parallelism, "job.parallelism", _PARALLELISM_KEYS, {"tp", "pp", "dp"})
        for name, value in p.items():
            as_int(value, f"job.parallelism.{name}", low=1, high=MAX_SERVERS * 1024)
        parallelism = Parallelism(**p)
    if "expert_load" in j:
        j["expert_load"] = _parse_expert_load(j["expert_load"])
    if "server_map" in j:
        j["server_map"] = as_int_list(
            j["server_map"], "job.server_map", low=0, high=MAX_SERVERS - 1, max_len=MAX_SERVERS
        )
    return JobSpec(**{**j, "model": model, "parallelism": parallelism})


def _parse_expert_load(data: Any) -> tuple:
    """The scenarios of ``job.expert_load``: ``{"matrix": ...}``, ``{"layers": ...}`` or ``{"zipf":
    s, "scenarios": K, "seed": N}``; their numbers are checked by :class:`JobSpec`."""
    if not isinstance(data, list):
        raise InstanceError(f"expected a list of scenarios, got {type_name(data)}", field="job.expert_load")
    out = []
    for k, entry in enumerate(data):
        path = f"job.expert_load[{k}]"
        if isinstance(entry, dict) and "zipf" in entry:
            e = json_object(entry, path, {"zipf", "scenarios", "seed"}, {"zipf", "scenarios"})
            out.append(ZipfLoad(**e))
        else:
            out.append(GivenLoad(**json_object(entry, path, {"matrix", "layers"}, set())))
    return tuple(out)


def _required(part: str) -> set[str]:
    return (
        {"experts", "top_k", "expert_ffn"}
        if part == "moe"
        else {"kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "q_lora_rank"}
    )


def job_to_dict(spec: JobSpec) -> dict[str, Any]:
    """The JSON form of a job section: only what differs from the defaults, the model by its zoo
    name when it is a zoo model; ``parse_job(job_to_dict(s)) == s``."""
    defaults = JobSpec(model=spec.model, global_batch=spec.global_batch)
    out: dict[str, Any] = {"model": spec.model if isinstance(spec.model, str) else _model_to_dict(spec.model)}
    out["global_batch"] = spec.global_batch
    par = spec.parallelism
    out["parallelism"] = (
        par
        if isinstance(par, str)
        else {k: getattr(par, k) for k in sorted(_PARALLELISM_KEYS, key=("tp", "pp", "dp", "ep", "micro_batch").index)}
    )
    for name in sorted(_JOB_KEYS - {"model", "global_batch", "parallelism", "expert_load", "server_map"}):
        if getattr(spec, name) != getattr(defaults, name):
            out[name] = getattr(spec, name)
    if spec.server_map is not None:
        out["server_map"] = list(spec.server_map)
    if spec.expert_load:
        out["expert_load"] = [_load_to_dict(e) for e in spec.expert_load]
    return out


def _load_to_dict(entry: GivenLoad | ZipfLoad) -> dict[str, Any]:
    if isinstance(entry, ZipfLoad):
        return {"zipf": entry.zipf, "scenarios": entry.scenarios, "seed": entry.seed}
    if entry.matrix is not None:
        return {"matrix": [list(row) for row in entry.matrix]}
    return {"layers": [[list(row) for row in m] for m in entry.layers]}


def _model_to_dict(model) -> dict[str, Any]:
    keys = model_fields()
    out: dict[str, Any] = {}
    for name in keys["model"]:
        value = getattr(model, name)
        if name in ("moe", "mla"):
            if value is not None:
                out[name] = {k: getattr(value, k) for k in keys[name]}
        else:
            out[name] = value
    return out
