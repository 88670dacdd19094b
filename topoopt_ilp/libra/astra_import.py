"""Read LIBRA's own input files (the ``inputs/`` of astra-sim/libra) as a ``topoopt-libra`` problem.

LIBRA keeps one problem in four files, which :func:`import_libra` turns into the JSON data of
:mod:`topoopt_ilp.libra.problem` (then checked by its parser, so every rule of the format applies):

* **network** (YAML): ``Topology: [Ring, FullyConnected, Ring, Switch]``, ``NpusCount: [4, 8, 4, 32]``
  and ``CostDimension: [InterChiplet, ...]`` (the names the cost model is keyed by; they also name
  the dimensions here).
* **workload** (text, ASTRA-sim 1.0's layer format, as LIBRA's parser reads it): one layer per line,
  12 tokens - name, a reserved token, then for the forward, input-grad and weight-grad phases in
  turn: compute time in cycles, collective (``NONE``, ``ALLREDUCE``, ``REDUCESCATTER``,
  ``ALLGATHER``, ``ALLTOALL``; any case) and its size in bytes; a last reserved token. Cycles become
  microseconds at ``clock_ghz`` (default 1 GHz: one cycle = 1 ns).
* **communicator** (YAML): ``Forward``, ``InputGrad`` and ``WeightGrad``, one entry per dimension
  (``-1``: unused), the same for every layer (LIBRA has one communicator per phase).
* **cost model** (YAML, optional): ``{cost dimension: {Link: $, Switch: $, Nic: $}}`` per GB/s. As in
  LIBRA's cost model, Ring and FullyConnected dimensions pay for links only, so their Switch and Nic
  prices are not used.

LIBRA's budget, fixed values and other constraints are Python code (``inputs/constraints/*.py``),
not data: give the budget here (``total_bandwidth_gbps`` or ``cost_usd``) and add constraints to
the written file.
"""

from __future__ import annotations

import math
import os
import re
from typing import Any

from topoopt_ilp.core.checks import as_number, brief
from topoopt_ilp.errors import InstanceError
from topoopt_ilp.libra.problem import HierarchyProblem, parse_hierarchy

__all__ = ["import_libra", "read_libra_workload"]

_KINDS = {"ring": "ring", "fullyconnected": "fully_connected", "switch": "switch"}
_COLLECTIVES = {
    "allreduce": "all_reduce",
    "reducescatter": "reduce_scatter",
    "allgather": "all_gather",
    "alltoall": "all_to_all",
}
_PHASES = (("forward", "Forward"), ("input_grad", "InputGrad"), ("weight_grad", "WeightGrad"))
_PRICES = {"Link": "link", "Switch": "switch", "Nic": "nic"}


#: Floats in exponent form without a dot (1e30, -2E-3), which YAML 1.1 (PyYAML) reads as strings.
_YAML_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")


def _yaml(path: str | os.PathLike) -> Any:
    try:
        import yaml
    except ImportError:  # pragma: no cover - pyyaml comes with the libra extra
        raise InstanceError(
            "reading LIBRA's YAML files needs PyYAML: pip install 'topoopt-ilp[libra]'", source=os.fspath(path)
        ) from None

    class StrictLoader(yaml.SafeLoader):
        """PyYAML's safe loader, but a key given twice is an error (PyYAML keeps the last silently,
        and JSON input refuses it), and 1e30 is a number (YAML 1.1 wants a dot: 1.0e+30)."""

        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"key {brief(key)} is given twice (line {key_node.start_mark.line + 1})",
                        key_node.start_mark,
                    )
                seen.add(key)
            return super().construct_mapping(node, deep)

    StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", _YAML_EXPONENT_FLOAT, list("-+0123456789."))
    try:
        with open(path, encoding="utf-8") as fh:
            return yaml.load(fh, Loader=StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except OSError as exc:
        raise InstanceError(f"cannot read file: {exc.strerror or exc}", source=os.fspath(path)) from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise InstanceError(
            f"not a YAML file LIBRA writes: {str(exc).splitlines()[0]}", source=os.fspath(path)
        ) from None
    except RecursionError:  # PyYAML builds nested values recursively; LIBRA's files are two levels deep
        raise InstanceError("nested deeper than a YAML file LIBRA writes", source=os.fspath(path)) from None


def _key(data: Any, key: str, path: str | os.PathLike) -> Any:
    if not isinstance(data, dict) or key not in data:
        raise InstanceError(f"missing key {brief(key)}", source=os.fspath(path))
    return data[key]


def read_libra_workload(
    path: str | os.PathLike, clock_ghz: float = 1.0
) -> list[tuple[str, list[tuple[float, str | None, float]]]]:
    """The layers of an ASTRA-sim 1.0 workload file: ``(name, [(compute_us, collective or None,
    bytes) for the forward, input-grad and weight-grad phases])``."""
    return [(name, phases) for _, name, phases in _workload_lines(path, clock_ghz)]


def _workload_lines(
    path: str | os.PathLike, clock_ghz: float
) -> list[tuple[int, str, list[tuple[float, str | None, float]]]]:
    """:func:`read_libra_workload` with each layer's line number first (for messages)."""
    source = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InstanceError(f"cannot read file: {getattr(exc, 'strerror', None) or exc}", source=source) from None
    layers = []
    for number, line in enumerate(lines, 1):
        tokens = line.split()
        if not tokens:
            continue
        if len(tokens) != 12:
            raise InstanceError(
                f"line {number}: {len(tokens)} tokens, ASTRA-sim 1.0's layer format has 12 "
                "(name, reserved, then compute / collective / bytes for 3 phases, reserved; "
                "no header lines, as LIBRA's parser reads it)",
                source=source,
            )
        phases = []
        for p in range(3):
            cycles, kind, size = tokens[2 + 3 * p : 5 + 3 * p]
            try:
                cycles_f, size_f = float(cycles), float(size)
            except ValueError:
                raise InstanceError(
                    f"line {number}: compute cycles and bytes must be numbers, got {brief(cycles)} and {brief(size)}",
                    source=source,
                ) from None
            for what, value in (("compute cycles", cycles_f), ("collective bytes", size_f)):  # whatever the collective
                if not (math.isfinite(value) and value >= 0):
                    raise InstanceError(
                        f"must be a finite number >= 0, got {value:g}",
                        source=source,
                        field=f"line {number}, {_PHASES[p][0].replace('_', ' ')} {what}",
                    )
            kind_l = kind.lower()
            if kind_l != "none" and kind_l not in _COLLECTIVES:
                raise InstanceError(
                    f"line {number}: unknown collective {brief(kind)} (NONE, ALLREDUCE, REDUCESCATTER, ALLGATHER, ALLTOALL)",
                    source=source,
                )
            collective = None if kind_l == "none" or size_f == 0 else _COLLECTIVES[kind_l]
            phases.append((cycles_f / (clock_ghz * 1e3), collective, size_f))
        layers.append((number, tokens[0], phases))
    if not layers:
        raise InstanceError("no layers", source=source)
    return layers


def import_libra(
    network: str | os.PathLike,
    workload: str | os.PathLike,
    communicator: str | os.PathLike,
    cost_model: str | os.PathLike | None = None,
    *,
    total_bandwidth_gbps: float | None = None,
    cost_usd: float | None = None,
    spend_all: bool = False,
    objective: str = "iteration_time",
    clock_ghz: float = 1.0,
    name: str = "",
) -> HierarchyProblem:
    """LIBRA's four input files (module docstring) and a budget (exactly one of
    ``total_bandwidth_gbps`` and ``cost_usd``) as a :class:`~topoopt_ilp.libra.problem.HierarchyProblem`."""
    if (total_bandwidth_gbps is None) == (cost_usd is None):
        raise InstanceError("give exactly one budget: a total bandwidth (GB/s per NPU) or a network cost ($)")
    if not (isinstance(clock_ghz, (int, float)) and clock_ghz > 0):
        raise InstanceError(f"the clock must be > 0 GHz, got {brief(clock_ghz)}")
    net = _yaml(network)
    kinds, sizes, cost_dims = (_key(net, k, network) for k in ("Topology", "NpusCount", "CostDimension"))
    if not (isinstance(kinds, list) and isinstance(sizes, list) and isinstance(cost_dims, list)) or not (
        len(kinds) == len(sizes) == len(cost_dims)
    ):
        raise InstanceError(
            "Topology, NpusCount and CostDimension must be lists of one length", source=os.fspath(network)
        )
    prices_by_dim = {}
    if cost_model is not None:
        prices_by_dim = _yaml(cost_model)
        if not isinstance(prices_by_dim, dict):
            raise InstanceError(
                "expected {cost dimension: {Link: .., Switch: .., Nic: ..}}", source=os.fspath(cost_model)
            )
    ours = [_KINDS.get(str(kind).replace("_", "").lower()) for kind in kinds]
    if None in ours:
        d = ours.index(None)
        raise InstanceError(
            f"Topology[{d}]: unknown building block {brief(kinds[d])} (Ring, FullyConnected, Switch)",
            source=os.fspath(network),
        )
    for d, cost_dim in enumerate(cost_dims):  # a name: YAML's null, lists and maps are not
        if not isinstance(cost_dim, (str, int)) or isinstance(cost_dim, bool) or not str(cost_dim).strip():
            raise InstanceError(
                f"expected a name (such as InterChiplet), got {brief(cost_dim)}",
                source=os.fspath(network),
                field=f"CostDimension[{d}]",
            )
    dims = []
    repeated = {c for c in map(str, cost_dims) if list(map(str, cost_dims)).count(c) > 1}
    for d, (k, size, cost_dim) in enumerate(zip(ours, sizes, cost_dims)):
        # CostDimension is a price class that dimensions may share; the dimension names must be unique
        dim_name = f"{cost_dim}-{d + 1}" if str(cost_dim) in repeated else str(cost_dim)
        dim: dict[str, Any] = {"name": dim_name, "kind": k, "size": size}
        if cost_model is not None:
            elements = prices_by_dim.get(cost_dim)
            if not isinstance(elements, dict):
                raise InstanceError(f"no prices for cost dimension {brief(cost_dim)}", source=os.fspath(cost_model))
            unknown = [e for e in elements if e not in _PRICES]
            if unknown:
                raise InstanceError(
                    f"{cost_dim}: unknown element {brief(unknown[0])} (Link, Switch, Nic)", source=os.fspath(cost_model)
                )
            used = ("Link", "Switch", "Nic") if k == "switch" else ("Link",)
            for e in sorted(set(elements) - set(used)):  # not paid for by this kind, but a price all the same
                try:
                    as_number(elements[e], f"{cost_dim}.{e}", nonnegative=True)
                except InstanceError as exc:
                    raise InstanceError(exc.reason, source=os.fspath(cost_model), field=exc.field) from None
            missing = [e for e in used if e not in elements]
            if missing:
                raise InstanceError(
                    f"{cost_dim}: missing {', '.join(missing)} (a {k} dimension pays for {', '.join(used)})",
                    source=os.fspath(cost_model),
                )
            dim["prices_usd_per_gbps"] = {_PRICES[e]: elements[e] for e in used}
        dims.append(dim)
    comm = _yaml(communicator)
    comms = {phase: _key(comm, key, communicator) for phase, key in _PHASES}
    layers, line_of = [], []
    for number, layer_name, phases in _workload_lines(workload, clock_ghz):
        line_of.append(number)
        item: dict[str, Any] = {"name": layer_name}
        for (phase, _), (compute_us, collective, size) in zip(_PHASES, phases):
            entry: dict[str, Any] = {"compute_us": compute_us}
            if collective is not None:
                entry["collective"] = {"type": collective, "bytes": size, "communicator": phase}
            item[phase] = entry
        layers.append(item)
    budget: dict[str, Any] = (
        {"total_bandwidth_gbps": total_bandwidth_gbps} if total_bandwidth_gbps is not None else {"cost_usd": cost_usd}
    )
    if spend_all:
        budget["spend_all"] = True
    files = ", ".join(
        os.path.basename(os.fspath(p)) for p in (network, workload, communicator, cost_model) if p is not None
    )
    data = {
        "format": "topoopt-libra",
        "version": 1,
        "name": name,
        "description": f"Imported from LIBRA's input files ({files}); compute cycles at {clock_ghz:g} GHz.",
        "dimensions": dims,
        "workload": {"communicators": comms, "layers": layers},
        "budget": budget,
        "objective": objective,
    }
    try:
        return parse_hierarchy(data)
    except InstanceError as exc:
        files = {"network": network, "workload": workload, "communicator": communicator, "cost model": cost_model}
        raise _in_libra_terms(exc, files, [str(c) for c in cost_dims], line_of) from None


#: The fields of the converted file and where the user wrote them (see :func:`_in_libra_terms`).
_NETWORK_KEYS = {"size": "NpusCount", "name": "CostDimension", "kind": "Topology"}
_PHASE_KEYS = dict(_PHASES)


def _in_libra_terms(
    exc: InstanceError, files: dict[str, Any], cost_dims: list[str], line_of: list[int]
) -> InstanceError:
    """``exc``, raised by the topoopt-libra parser on the converted data, restated with the LIBRA
    file and key (or workload line) the offending value came from, so the user can find it."""
    field, reason = exc.field or "", exc.reason
    m = re.fullmatch(r"dimensions\[(\d+)\]\.(size|name|kind)", field)
    if m:
        return InstanceError(reason, source=os.fspath(files["network"]), field=f"{_NETWORK_KEYS[m[2]]}[{m[1]}]")
    m = re.fullmatch(r"dimensions\[(\d+)\]\.prices_usd_per_gbps(?:\.(\w+))?", field)
    if m and files["cost model"] is not None:
        element = {v: k for k, v in _PRICES.items()}.get(m[2] or "", "")
        return InstanceError(
            reason,
            source=os.fspath(files["cost model"]),
            field=f"{cost_dims[int(m[1])]}" + (f".{element}" if element else ""),
        )
    if re.fullmatch(r"dimensions\[(\d+)\]", field) and "needs the cost of every dimension" in reason:
        return InstanceError(reason.split(" (")[0] + ": give --cost-model")
    m = re.fullmatch(r"workload\.communicators\.(\w+)(\[\d+\])?", field)
    if m:
        return InstanceError(
            reason, source=os.fspath(files["communicator"]), field=_PHASE_KEYS.get(m[1], m[1]) + (m[2] or "")
        )
    m = re.fullmatch(r"workload\.layers\[(\d+)\]\.(\w+)\.collective\.communicator(\[\d+\])?", field)
    if m:
        return InstanceError(
            reason, source=os.fspath(files["communicator"]), field=_PHASE_KEYS.get(m[2], m[2]) + (m[3] or "")
        )
    m = re.fullmatch(r"workload\.layers\[(\d+)\](?:\.(\w+))?(?:\.(.*))?", field)
    if m:
        where = f"line {line_of[int(m[1])]}" + (f", {m[2].replace('_', ' ')}" if m[2] else "")
        what = {
            "compute_us": "compute (cycles, here converted to microseconds)",
            "collective.bytes": "collective bytes",
            "collective.type": "collective",
        }.get(m[3] or "", m[3] or "")
        return InstanceError(reason, source=os.fspath(files["workload"]), field=where + (f" {what}" if what else ""))
    if field == "dimensions":  # the network's lists (empty, or too many dimensions)
        return InstanceError(reason, source=os.fspath(files["network"]), field="NpusCount")
    if field.startswith("budget"):
        return InstanceError(f"budget (--total-bandwidth / --cost): {reason}")
    return exc
