"""TE-CCL input files: the topology and collective of a TE-CCL run (https://github.com/microsoft/TE-CCL,
"Rethinking Machine Learning Collective Communication as a Multi-Commodity Flow Problem", SIGCOMM 2024)
as a :class:`~topoopt_ilp.files.link_list.LinkedTopology` (docs/guide/collectives.md, "TE-CCL inputs").

TE-CCL reads a JSON object with three sections (``teccl/cli/solve.py``, fields in
``teccl/input_data.py``): ``TopologyParams`` (``name``, ``chassis``, ``chunk_size`` in GB,
``alpha`` = [link alpha, switch alpha] in seconds, ``side_length``), ``GurobiParams`` (solver
settings) and ``InstanceParams`` (``collective``: 1 AllGather, 2 AlltoAll; ``num_chunks``: chunks
per server, per destination for AlltoAll; the epoch and objective settings). A field left out takes
TE-CCL's default. What is read here:

* the topology by name, rebuilt from TE-CCL's classes (``teccl/topologies/``): ``DGX1`` (``dgx1.py``:
  8 GPUs, NVLinks of 25 GB/s, doubled on some pairs), ``Mesh`` (``mesh.py``: side_length^2 nodes,
  node i linked to i - 1, i + 1, i - side_length and i + side_length, 100 GB/s, as TE-CCL builds it),
  ``AMD`` with one chassis (``amd.py``: 16 GPUs, 50 GB/s per link, 1 to 4 links per pair); every link
  has the link alpha. TE-CCL's capacity is in chunks per second (GB/s over the chunk size), so a
  link's bandwidth is its GB/s x 10^9 bytes. ``DGX2``, ``NDv2`` and ``AMD`` with several chassis
  route through switch nodes, which the schedule model does not have: they are refused.
* the collective: AllGather over every node, ``num_chunks`` chunks of ``chunk_size`` per node
  (bytes = nodes x num_chunks x chunk_size x 10^9, NCCL's AllGather output); AlltoAll with
  ``num_chunks`` chunks per destination (bytes = the send buffer, likewise).
* ``GurobiParams`` and the epoch, objective and solution settings are TE-CCL's solver settings: they
  are accepted and not used (the step length is chosen as ``topoopt_ilp.core.collective`` says).

Every problem is one :class:`~topoopt_ilp.errors.InputError` naming the file and the field: a
missing section, an unknown key, an unknown topology or collective, a chunk size or alpha that is not
a positive (non-negative) number.
"""

from __future__ import annotations

import math
import os
from typing import Any

from topoopt_ilp.core.checks import brief, type_name
from topoopt_ilp.core.collective import Collective
from topoopt_ilp.errors import InputError
from topoopt_ilp.files.jsonio import json_object, read_json
from topoopt_ilp.files.link_list import LinkedTopology, linked_topology

__all__ = ["TECCL_TOPOLOGIES", "read_teccl", "teccl_capacity"]

#: The sections of a TE-CCL input, all required (TE-CCL's reader indexes each).
SECTIONS = {"TopologyParams", "GurobiParams", "InstanceParams"}
#: TopologyParams' fields (teccl/input_data.py), and "option", which TE-CCL's sample inputs carry.
TOPOLOGY_KEYS = {"name", "chassis", "chunk_size", "alpha", "side_length", "option"}
GUROBI_KEYS = {
    "time_limit",
    "feasibility_tol",
    "intfeas_tol",
    "optimality_tol",
    "output_flag",
    "log_file",
    "log_to_console",
    "mip_gap",
    "mip_focus",
    "crossover",
    "method",
    "heuristics",
    "presolve",
    "solution_limit",
}
INSTANCE_KEYS = {
    "collective",
    "num_chunks",
    "epoch_type",
    "epoch_duration",
    "epoch_multiplier",
    "num_epochs",
    "epsilon",
    "alpha_threshold",
    "alpha_epoch_duration_ratio_max",
    "switch_copy",
    "switch_to_gpu_link_on",
    "debug",
    "debug_output_file",
    "objective_type",
    "solution_method",
    "schedule_output_file",
    "lower",
    "lower_xml",
    "warmstart",
    "symmetry",
}
#: TE-CCL's Collective enum (teccl/input_data.py) -> ours.
COLLECTIVES = {1: "allgather", 2: "alltoall"}
#: The topologies rebuilt here; the others TE-CCL knows, with why they are refused.
TECCL_TOPOLOGIES = ("DGX1", "Mesh", "AMD")
_SWITCHED = ("DGX2", "NDv2")
#: Largest Mesh side read (256 nodes: far beyond what the exact model solves).
MAX_SIDE = 16
#: Bytes in TE-CCL's GB (its NDv2 comment: 1 MB = 10^-3 GB).
GB = 1e9

# teccl/topologies/dgx1.py: NVLinks per GPU pair (x 25 GB/s), row i the links of GPU i to GPUs 0..7
_DGX1 = "02112000 20120100 11020020 12200001 20000211 01002012 00201102 00011220".split()
# teccl/topologies/amd.py, one chassis: links per GPU pair (x 50 GB/s), row i for GPU i (its adjacency_list)
_AMD = (
    "0400200010000000 4000010001100000 0004001001100000 0040000200010000 2000041000000000 0100401100000000 0010110400000000 0002014000000000 "
    "1000000004002000 0110000040000100 0110000000040010 0001000000400002 0000000020000410 0000000001004011 0000000000101104 0000000000020140"
).split()


def teccl_capacity(name: str, chassis: int = 1, side_length: int = 4) -> list[list[float]]:
    """TE-CCL's link capacities in GB/s, ``capacity[i][j]`` for i -> j (0: no link), as its topology
    class builds them (module docstring); InputError for a topology not rebuilt here."""
    if name == "DGX1":
        return [[25.0 * int(w) for w in row] for row in _DGX1]
    if name == "Mesh":
        n = side_length**2
        near = lambda i, j: j in (i - 1, i + 1, i - side_length, i + side_length)  # noqa: E731 (TE-CCL's rule)
        return [[100.0 if near(i, j) else 0.0 for j in range(n)] for i in range(n)]
    if name == "AMD":
        if chassis != 1:
            raise InputError(
                f"AMD with {chassis} chassis links its GPUs through switch nodes, which the schedule model "
                "does not have (one chassis is supported)",
                field="TopologyParams.chassis",
            )
        return [[50.0 * int(w) for w in row] for row in _AMD]
    if name in _SWITCHED:
        raise InputError(
            f"TE-CCL's {name} links its GPUs through switch nodes, which the schedule model does not have "
            f"(supported: {', '.join(TECCL_TOPOLOGIES)})",
            field="TopologyParams.name",
        )
    raise InputError(
        f"unknown TE-CCL topology {brief(name)} (supported: {', '.join(TECCL_TOPOLOGIES)})",
        field="TopologyParams.name",
    )


def _positive(value: Any, field: str, *, zero: bool = False, integer: bool = False, high: float = 1e12) -> Any:
    ok = not isinstance(value, bool) and isinstance(value, int if integer else (int, float))
    # compared before isfinite: a huge JSON integer does not convert to a float
    if not ok or value < 0 or value > high or not math.isfinite(value) or (value == 0 and not zero):
        what = "an integer" if integer else "a number"
        raise InputError(f"expected {what} {'>= 0' if zero else '> 0'}, got {brief(value)}", field=field)
    return value


def _section(value: Any, name: str, allowed: set[str]) -> dict:
    """One section: an object of TE-CCL's fields (the error names the key, not the long list allowed)."""
    if not isinstance(value, dict):
        raise InputError(f"expected an object, got {type_name(value)}", field=name)
    unknown = sorted(set(value) - allowed, key=str)
    if unknown:
        raise InputError(f"unknown key {brief(unknown[0])}, not a field TE-CCL reads here", field=name)
    return value


def _read(data: Any) -> tuple[dict, dict]:
    top = json_object(data, "", SECTIONS, SECTIONS, err=InputError)
    topo = _section(top["TopologyParams"], "TopologyParams", TOPOLOGY_KEYS)
    _section(top["GurobiParams"], "GurobiParams", GUROBI_KEYS)
    return topo, _section(top["InstanceParams"], "InstanceParams", INSTANCE_KEYS)


def read_teccl(path: str | os.PathLike) -> LinkedTopology:
    """The TE-CCL input at ``path`` as a topology, link rates and collective (module docstring)."""
    source = str(path)
    data = read_json(path, InputError)
    try:
        topo, inst = _read(data)
        name = topo.get("name", "DGX1")
        if not isinstance(name, str):
            raise InputError(f"expected a topology name, got {type_name(name)}", field="TopologyParams.name")
        chassis = _positive(topo.get("chassis", 1), "TopologyParams.chassis", integer=True, high=1024)
        side = _positive(topo.get("side_length", 4), "TopologyParams.side_length", integer=True, high=MAX_SIDE)
        chunk_gb = _positive(topo.get("chunk_size", 1), "TopologyParams.chunk_size", high=1e6)
        alpha = topo.get("alpha", [0, 0])
        if not isinstance(alpha, list) or len(alpha) != 2:
            raise InputError(f"expected [link alpha, switch alpha], got {brief(alpha)}", field="TopologyParams.alpha")
        link_alpha = _positive(alpha[0], "TopologyParams.alpha[0]", zero=True, high=1e3)
        kind = inst.get("collective", 1)
        if isinstance(kind, bool) or not isinstance(kind, int) or kind not in COLLECTIVES:
            raise InputError(
                f"unknown TE-CCL collective {brief(kind)} (1: AllGather, 2: AlltoAll)",
                field="InstanceParams.collective",
            )
        chunks = _positive(inst.get("num_chunks", 1), "InstanceParams.num_chunks", integer=True, high=1_000_000)
        capacity = teccl_capacity(name, chassis, side)
        n = len(capacity)
        rates = {
            (i, j): (1, float(link_alpha), capacity[i][j] * GB)
            for i in range(n)
            for j in range(n)
            if capacity[i][j] > 0
        }
        collective = Collective(COLLECTIVES[kind], tuple(range(n)), n * chunks * chunk_gb * GB, chunks)
    except InputError as exc:
        raise InputError(exc.reason, source=source, field=exc.field) from None
    notes = (f"TE-CCL {name}: {n} nodes, {len(rates)} link directions, chunk {chunk_gb:g} GB",)
    return linked_topology(source, "TE-CCL input", rates, n, collective, notes)
