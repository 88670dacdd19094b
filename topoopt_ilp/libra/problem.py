"""LIBRA's problem: per-dimension bandwidth of a multi-dimensional hierarchical network.

LIBRA (Won et al., ISPASS 2024; code astra-sim/libra) takes a fixed hierarchy of network
dimensions, e.g. ``Ring(4) x FullyConnected(8) x Ring(4) x Switch(32)`` (4096 NPUs), and a workload
whose collectives are split hierarchically over the dimensions, and chooses the bandwidth ``B_d``
(GB/s per NPU) of every dimension. This module holds the problem (frozen, validated dataclasses),
its JSON file format (``"format": "topoopt-libra", "version": 1``) and the **independent
evaluator** :func:`evaluate_bandwidths`, which scores any allocation with plain loops and shares no
code with the optimisation model (``topoopt_ilp.models.libra``).

Units: sizes in bytes, bandwidths in GB/s per NPU (1 GB = 1e9 bytes), compute times in
microseconds in files, times in seconds in results, costs in US dollars.

Message split (LIBRA's ``src/model/model.py``, re-derived). Dimensions ``d = 1..D`` in order; a
collective of size ``S`` bytes has a communicator ``c_d`` per dimension (``-1`` or ``1``: the
dimension is not used). Only used dimensions move data, and ``S_d`` is the size handed to
dimension ``d``:

* ``all_reduce``: ``S_first = S``; dimension ``d`` moves ``2 S_d (c_d - 1) / c_d`` per NPU, then
  ``S_next = S_d / c_d`` (the next used dimension reduces the shard this one left).
* ``reduce_scatter``: the same walk, moving ``S_d (c_d - 1) / c_d``.
* ``all_gather``: ``S`` is the shard **each NPU contributes** (the gathered result is
  ``S * prod c_d``, as in LIBRA's GPT-3 input where the all-gather size is 1/16 of the all-reduce
  size under TP-16). Dimensions are walked in reverse: ``S_last = S``; dimension ``d`` moves
  ``S_d (c_d - 1)``, then ``S_prev = S_d * c_d``. So ``all_gather(S / prod c)`` moves exactly what
  the second half of ``all_reduce(S)`` moves, dimension by dimension.
* ``all_to_all``: every used dimension moves ``S (c_d - 1) / c_d``; no shrink.

Time model: a dimension needs ``msg_d / B_d``; dimensions run concurrently, so a collective takes
``max_d msg_d / B_d`` (no latency term); a phase takes compute + collective (no overlap); the
iteration is the sum over layers (times their ``count``) and the three phases ``forward``,
``input_grad``, ``weight_grad``.

Cost model (LIBRA's ``src/cost_model/cost_model.py``, linear in ``B_d``). Prices are $ per GB/s of
an element. ``N`` = number of NPUs.

* Ring(k): ``N / k`` rings, ``2k`` links each (bidirectional), each link ``B / 2``: ``N * B * link``.
* FullyConnected(k): ``N / k`` blocks, ``k (k - 1)`` links each, each link ``B / (k - 1)``:
  ``N * B * link``.
* Switch at dimension d: one big switch over dimensions ``1..d``, ``prod_{j>d} k_j`` of them, each
  with ``prod_{j<=d} k_j`` links of bandwidth ``B`` that also pay a NIC and a switch port:
  ``N * B * (link + nic + switch)``.

So the network cost is ``N * sum_d u_d * B_d`` with ``u_d`` the dimension's $ per GB/s per NPU: the
element prices summed (``prices_usd_per_gbps``), or given directly (``unit_cost_usd_per_gbps``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from topoopt_ilp.core.checks import as_bool, as_choice, as_int, as_number, as_str, brief, brief_names, type_name
from topoopt_ilp.errors import InputError, InstanceError
from topoopt_ilp.files import write_json_atomic
from topoopt_ilp.files.jsonio import json_list, json_object, read_json, with_source

__all__ = [
    "KINDS",
    "COLLECTIVES",
    "PHASES",
    "OBJECTIVES",
    "LIBRA_FORMAT",
    "Dimension",
    "Collective",
    "Phase",
    "Layer",
    "Budget",
    "Constraints",
    "HierarchyProblem",
    "PhaseTime",
    "BandwidthBreakdown",
    "evaluate_bandwidths",
    "load_hierarchy",
    "parse_hierarchy",
    "hierarchy_to_dict",
    "save_hierarchy",
]

KINDS = ("ring", "fully_connected", "switch")
COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")
PHASES = ("forward", "input_grad", "weight_grad")
OBJECTIVES = ("iteration_time", "perf_per_cost")
LIBRA_FORMAT = "topoopt-libra"
VERSION = 1
#: Element prices a dimension may name (``nic`` and ``switch`` only on a switch dimension, as in LIBRA).
PRICE_ELEMENTS = ("link", "nic", "switch")
MAX_DIMENSIONS = 16
MAX_DIM_SIZE = 1 << 20
MAX_NPUS = 1 << 40
MAX_GBPS = 1e9
#: Smallest budget: below it the LP, scaled by the budget, has coefficients no solver accepts.
MIN_BUDGET = 1e-6
MAX_BYTES = 1e18
MAX_US = 1e15
MAX_USD = 1e18


def _at(path: str, fn: Callable[[], Any]) -> Any:
    """Run ``fn``; an :class:`InstanceError` it raises gets ``path`` in front of its field."""
    try:
        return fn()
    except InstanceError as exc:
        inner = exc.field
        full = path if not inner else (f"{path}{inner}" if inner.startswith("[") else f"{path}.{inner}")
        raise InstanceError(exc.reason, source=exc.source, field=full) from None


# ----------------------------------------------------------------------------------------------
# The problem
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Dimension:
    """One network dimension: ``kind`` (ring | fully_connected | switch) of ``size`` NPUs.

    Cost (optional; needed by a cost budget and by ``perf_per_cost``): either element prices
    ``prices_usd_per_gbps`` (``{"link": .., "nic": .., "switch": ..}``, $ per GB/s; ``nic`` and
    ``switch`` on a switch dimension only) or ``unit_cost_usd_per_gbps``, the network's $ per GB/s
    of this dimension's bandwidth **per NPU** (the module docstring derives one from the other).
    """

    name: str
    kind: str
    size: int
    prices_usd_per_gbps: Mapping[str, float] | None = None
    unit_cost_usd_per_gbps: float | None = None

    def __post_init__(self) -> None:
        as_str(self.name, "name")
        if not self.name.strip():
            raise InstanceError("must be a non-empty string", field="name")
        as_choice(self.kind, "kind", KINDS)
        object.__setattr__(self, "size", as_int(self.size, "size", low=2, high=MAX_DIM_SIZE))
        if self.prices_usd_per_gbps is not None and self.unit_cost_usd_per_gbps is not None:
            raise InstanceError(
                "give prices_usd_per_gbps or unit_cost_usd_per_gbps, not both", field="unit_cost_usd_per_gbps"
            )
        if self.prices_usd_per_gbps is not None:
            prices = self.prices_usd_per_gbps
            if not isinstance(prices, Mapping):
                raise InstanceError(f"expected an object, got {type_name(prices)}", field="prices_usd_per_gbps")
            allowed = PRICE_ELEMENTS if self.kind == "switch" else ("link",)
            clean = {}
            for key, value in prices.items():
                if key not in allowed:
                    raise InstanceError(
                        f"unknown or inapplicable element {brief(key)} for a {self.kind} dimension "
                        f"(allowed: {', '.join(allowed)})",
                        field="prices_usd_per_gbps",
                    )
                clean[key] = as_number(
                    value, f"prices_usd_per_gbps.{key}", positive=key == "link", nonnegative=True, high=MAX_USD
                )
            if "link" not in clean:
                raise InstanceError("missing required key 'link'", field="prices_usd_per_gbps")
            object.__setattr__(self, "prices_usd_per_gbps", tuple(sorted(clean.items())))
        if self.unit_cost_usd_per_gbps is not None:
            object.__setattr__(
                self,
                "unit_cost_usd_per_gbps",
                as_number(self.unit_cost_usd_per_gbps, "unit_cost_usd_per_gbps", positive=True, high=MAX_USD),
            )

    @property
    def prices(self) -> dict[str, float] | None:
        """The element prices as a dict (None when the dimension gives a unit cost or nothing)."""
        return None if self.prices_usd_per_gbps is None else dict(self.prices_usd_per_gbps)

    @property
    def has_cost(self) -> bool:
        """True when the dimension has a cost (prices or a unit cost)."""
        return self.prices_usd_per_gbps is not None or self.unit_cost_usd_per_gbps is not None

    @property
    def npu_unit_cost(self) -> float | None:
        """$ per GB/s of this dimension's bandwidth per NPU (the sum of its element prices)."""
        if self.unit_cost_usd_per_gbps is not None:
            return self.unit_cost_usd_per_gbps
        if self.prices_usd_per_gbps is None:
            return None
        return float(sum(v for _, v in self.prices_usd_per_gbps))


def _communicator_entries(comm: Any) -> tuple[int, ...]:
    """A communicator's entries checked one by one: -1 (dimension unused) or a size >= 1 (errors
    name the entry as ``[i]``). Whether they fit the dimensions is :func:`_check_communicator`'s."""
    if isinstance(comm, np.ndarray):
        comm = comm.tolist()
    if not isinstance(comm, (list, tuple)):
        raise InstanceError(f"expected a list, got {type_name(comm)}")
    out = []
    for i, c in enumerate(comm):
        c = as_int(c, f"[{i}]", low=-1, high=MAX_DIM_SIZE)
        if c == 0:
            raise InstanceError(f"must be -1 (dimension unused) or a size >= 1, got {c}", field=f"[{i}]")
        out.append(c)
    return tuple(out)


def _check_communicator(comm: tuple[int, ...], dims: tuple, path: str, by_name: bool = False) -> None:
    """One entry per dimension, none larger than its dimension (``path``: where the communicator is
    written; ``by_name``: written as ``{dimension name: size}``, so an entry is named by its dimension)."""
    if len(comm) != len(dims):
        raise InstanceError(f"has {len(comm)} entries, one per dimension expected ({len(dims)})", field=path)
    for di, c in enumerate(comm):
        if c > dims[di].size:
            raise InstanceError(
                f"communicator size {c} is larger than dimension {brief(dims[di].name)} (size {dims[di].size})",
                field=f"{path}.{dims[di].name}" if by_name else f"{path}[{di}]",
            )


@dataclass(frozen=True)
class Collective:
    """A collective of ``bytes`` (see the module docstring for what ``S`` means per ``type``) over
    ``communicator``: per dimension the number of NPUs taking part (``-1`` or ``1``: unused). Files
    may also write a communicator as ``{dimension name: size}`` (absent names: unused) or name one of
    ``workload.communicators``."""

    type: str
    bytes: float
    communicator: tuple[int, ...]

    def __post_init__(self) -> None:
        as_choice(self.type, "type", COLLECTIVES)
        object.__setattr__(self, "bytes", as_number(self.bytes, "bytes", nonnegative=True, high=MAX_BYTES))
        object.__setattr__(self, "communicator", _at("communicator", lambda: _communicator_entries(self.communicator)))

    def used(self) -> tuple[int, ...]:
        """Indices of the dimensions that move data (communicator size >= 2)."""
        return tuple(i for i, c in enumerate(self.communicator) if c >= 2)


@dataclass(frozen=True)
class Phase:
    """One phase of a layer: ``compute_us`` then (no overlap) its optional ``collective``."""

    compute_us: float = 0.0
    collective: Collective | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "compute_us", as_number(self.compute_us, "compute_us", nonnegative=True, high=MAX_US))
        if self.collective is not None and not isinstance(self.collective, Collective):
            raise InstanceError(f"expected a Collective, got {type_name(self.collective)}", field="collective")


@dataclass(frozen=True)
class Layer:
    """A layer: its three phases, repeated ``count`` times in the iteration."""

    name: str
    forward: Phase = field(default_factory=Phase)
    input_grad: Phase = field(default_factory=Phase)
    weight_grad: Phase = field(default_factory=Phase)
    count: int = 1

    def __post_init__(self) -> None:
        as_str(self.name, "name")
        object.__setattr__(self, "count", as_int(self.count, "count", low=1, high=1 << 30))
        for p in PHASES:
            if not isinstance(getattr(self, p), Phase):
                raise InstanceError(f"expected a Phase, got {type_name(getattr(self, p))}", field=p)

    def phase(self, name: str) -> Phase:
        """The phase called ``name`` (one of :data:`PHASES`)."""
        return getattr(self, name)


@dataclass(frozen=True)
class Budget:
    """The budget: ``total_bandwidth`` (``sum_d B_d <= value``, GB/s per NPU) or ``cost``
    (network cost ``<= value`` $). ``spend_all``: ``==`` instead of ``<=`` (LIBRA's own examples)."""

    kind: str
    value: float
    spend_all: bool = False

    def __post_init__(self) -> None:
        as_choice(self.kind, "kind", ("total_bandwidth", "cost"))
        high = MAX_GBPS if self.kind == "total_bandwidth" else MAX_USD
        label = "total_bandwidth_gbps" if self.kind == "total_bandwidth" else "cost_usd"
        object.__setattr__(self, "value", as_number(self.value, label, positive=True, high=high))
        if self.value < MIN_BUDGET:
            raise InstanceError(f"must be at least {MIN_BUDGET:g}, got {self.value:g}", field=label)
        as_bool(self.spend_all, "spend_all")


#: Largest |coefficient| of a linear constraint (keeps the LP's rows within the solvers' range).
_MAX_COEFFICIENT = 1e6


def _signed(value: Any, path: str, limit: float) -> float:
    """A finite number of magnitude at most ``limit``."""
    value = as_number(value, path)
    if abs(value) > limit:
        raise InstanceError(f"must be between {-limit:g} and {limit:g}, got {value:g}", field=path)
    return value


@dataclass(frozen=True)
class Constraints:
    """User constraints, by dimension name: ``min_gbps``, ``max_gbps``, ``fixed_gbps`` (mappings
    name -> GB/s), ``orderings`` (pairs ``(a, b)`` meaning ``B_a >= B_b``) and ``linear``: triples
    ``(terms, sense, rhs)`` meaning ``sum coefficient * B_name  sense  rhs`` (GB/s; terms a mapping
    name -> coefficient, sense ``<=``, ``>=`` or ``==``), as LIBRA's user constraints such as
    ``B3 + B4 == 200``."""

    min_gbps: Mapping[str, float] = field(default_factory=dict)
    max_gbps: Mapping[str, float] = field(default_factory=dict)
    fixed_gbps: Mapping[str, float] = field(default_factory=dict)
    orderings: tuple[tuple[str, str], ...] = ()
    linear: tuple[tuple[Mapping[str, float], str, float], ...] = ()

    def __post_init__(self) -> None:
        for label in ("min_gbps", "max_gbps", "fixed_gbps"):
            value = getattr(self, label)
            if isinstance(value, tuple):
                value = dict(value)
            if not isinstance(value, Mapping):
                raise InstanceError(f"expected an object, got {type_name(value)}", field=label)
            clean = tuple(
                (as_str(k, label), as_number(v, f"{label}.{k}", nonnegative=True, high=MAX_GBPS))
                for k, v in value.items()
            )
            object.__setattr__(self, label, clean)
        orderings = self.orderings
        if not isinstance(orderings, (list, tuple)):
            raise InstanceError(f"expected a list, got {type_name(orderings)}", field="orderings")
        pairs = []
        for i, pair in enumerate(orderings):
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                raise InstanceError("expected a pair [a, b] meaning B_a >= B_b", field=f"orderings[{i}]")
            pairs.append((as_str(pair[0], f"orderings[{i}][0]"), as_str(pair[1], f"orderings[{i}][1]")))
        object.__setattr__(self, "orderings", tuple(pairs))
        linear = self.linear
        if not isinstance(linear, (list, tuple)):
            raise InstanceError(f"expected a list, got {type_name(linear)}", field="linear")
        rows = []
        for i, row in enumerate(linear):
            path = f"linear[{i}]"
            if not isinstance(row, (list, tuple)) or len(row) != 3:
                raise InstanceError("expected (terms, sense, rhs)", field=path)
            terms, sense, rhs = row
            if isinstance(terms, tuple):
                terms = dict(terms)
            if not isinstance(terms, Mapping) or not terms:
                raise InstanceError(
                    "terms: expected a non-empty object {dimension: coefficient}", field=f"{path}.terms"
                )
            clean = tuple(
                (as_str(k, f"{path}.terms"), _signed(v, f"{path}.terms.{k}", _MAX_COEFFICIENT))
                for k, v in terms.items()
            )
            if all(v == 0 for _, v in clean):
                raise InstanceError("every coefficient is 0", field=f"{path}.terms")
            rows.append(
                (
                    clean,
                    as_choice(sense, f"{path}.sense", ("<=", ">=", "==")),
                    _signed(rhs, f"{path}.rhs", _MAX_COEFFICIENT * MAX_GBPS),
                )
            )
        object.__setattr__(self, "linear", tuple(rows))


@dataclass(frozen=True)
class HierarchyProblem:
    """LIBRA's bandwidth-allocation problem: dimensions, workload layers, budget, constraints."""

    dimensions: tuple[Dimension, ...]
    layers: tuple[Layer, ...]
    budget: Budget
    constraints: Constraints = field(default_factory=Constraints)
    objective: str = "iteration_time"
    name: str = ""
    description: str = ""

    def __post_init__(self) -> None:
        dims, layers = tuple(self.dimensions), tuple(self.layers)
        object.__setattr__(self, "dimensions", dims)
        object.__setattr__(self, "layers", layers)
        names = _check_dimension_list(dims)
        if math.prod(d.size for d in dims) > MAX_NPUS:
            raise InstanceError(f"the dimensions hold more than {MAX_NPUS} NPUs", field="dimensions")
        if not layers:
            raise InstanceError("needs at least one layer", field="workload.layers")
        for li, layer in enumerate(layers):
            if not isinstance(layer, Layer):
                raise InstanceError(f"expected a Layer, got {type_name(layer)}", field=f"workload.layers[{li}]")
            for p in PHASES:
                coll = layer.phase(p).collective
                if coll is None:
                    continue
                _check_communicator(coll.communicator, dims, f"workload.layers[{li}].{p}.collective.communicator")
        if not isinstance(self.budget, Budget):
            raise InstanceError(f"expected a Budget, got {type_name(self.budget)}", field="budget")
        if not isinstance(self.constraints, Constraints):
            raise InstanceError(f"expected a Constraints, got {type_name(self.constraints)}", field="constraints")
        for label in ("min_gbps", "max_gbps", "fixed_gbps"):
            for key, _ in getattr(self.constraints, label):
                if key not in names:
                    raise InstanceError(
                        f"unknown dimension {brief(key)} (dimensions: {brief_names(d.name for d in dims)})",
                        field=f"constraints.{label}",
                    )
        for i, (a, b) in enumerate(self.constraints.orderings):
            for k, key in enumerate((a, b)):
                if key not in names:
                    raise InstanceError(f"unknown dimension {brief(key)}", field=f"constraints.orderings[{i}][{k}]")
        for i, (terms, _, _) in enumerate(self.constraints.linear):
            for key, _ in terms:
                if key not in names:
                    raise InstanceError(
                        f"unknown dimension {brief(key)} (dimensions: {brief_names(d.name for d in dims)})",
                        field=f"constraints.linear[{i}].terms",
                    )
        as_choice(self.objective, "objective", OBJECTIVES)
        if self.budget.kind == "cost" or self.objective == "perf_per_cost":
            for i, d in enumerate(dims):
                if not d.has_cost:
                    why = "a cost budget" if self.budget.kind == "cost" else "the perf_per_cost objective"
                    raise InstanceError(
                        f"{why} needs the cost of every dimension (prices_usd_per_gbps or unit_cost_usd_per_gbps)",
                        field=f"dimensions[{i}]",
                    )
        as_str(self.name, "name")
        as_str(self.description, "description")

    # -- sizes and lookups ------------------------------------------------------------------------
    @property
    def num_dimensions(self) -> int:
        """D."""
        return len(self.dimensions)

    @property
    def num_npus(self) -> int:
        """N = product of the dimension sizes."""
        return math.prod(d.size for d in self.dimensions)

    @property
    def dimension_names(self) -> tuple[str, ...]:
        """The dimension names, in order."""
        return tuple(d.name for d in self.dimensions)

    def index(self, name: str) -> int:
        """Position of the dimension called ``name``."""
        return self.dimension_names.index(name)

    @property
    def has_cost(self) -> bool:
        """True when every dimension has a cost (the network cost is defined)."""
        return all(d.has_cost for d in self.dimensions)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """``(lower, upper)`` GB/s per dimension from min/max/fixed (a fixed value sets both; a fixed
        value outside [min, max] gives lower > upper, which the solver reports as infeasible)."""
        D = self.num_dimensions
        lo, hi = np.zeros(D), np.full(D, np.inf)
        for key, v in self.constraints.min_gbps:
            lo[self.index(key)] = max(lo[self.index(key)], v)
        for key, v in self.constraints.max_gbps:
            hi[self.index(key)] = min(hi[self.index(key)], v)
        for key, v in self.constraints.fixed_gbps:
            i = self.index(key)
            lo[i], hi[i] = max(lo[i], v), min(hi[i], v)
        return lo, hi

    def fixed(self) -> dict[int, float]:
        """``{dimension index: fixed GB/s}``."""
        return {self.index(k): v for k, v in self.constraints.fixed_gbps}

    def orderings_index(self) -> list[tuple[int, int]]:
        """The orderings as index pairs ``(i, j)``: ``B_i >= B_j``."""
        return [(self.index(a), self.index(b)) for a, b in self.constraints.orderings]

    def linear_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The linear constraints as arrays ``(G, sense, h)``: row k is ``G[k] @ B  sense[k]  h[k]``
        (sense ``<=``, ``>=`` or ``==``; a dimension named twice in a row has its coefficients summed)."""
        rows = self.constraints.linear
        G = np.zeros((len(rows), self.num_dimensions))
        for k, (terms, _, _) in enumerate(rows):
            for key, v in terms:
                G[k, self.index(key)] += v
        return G, np.array([r[1] for r in rows], dtype=object), np.array([r[2] for r in rows], dtype=float)

    def with_objective(self, objective: str) -> HierarchyProblem:
        """The same problem with another objective."""
        return replace(self, objective=objective)


# ----------------------------------------------------------------------------------------------
# The independent evaluator (plain loops; shares no code with models/libra.py)
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PhaseTime:
    """Time of one phase of one layer (one occurrence; ``count`` occurrences in the iteration)."""

    layer: str
    layer_index: int
    phase: str
    count: int
    compute_s: float
    comm_s: float
    dim_times_s: tuple[float, ...]
    bottleneck: str | None

    @property
    def time_s(self) -> float:
        """compute + collective (no overlap), one occurrence."""
        return self.compute_s + self.comm_s


@dataclass(frozen=True)
class BandwidthBreakdown:
    """What an allocation costs and how long an iteration takes under it."""

    bandwidths_gbps: tuple[float, ...]
    iteration_time_s: float
    compute_time_s: float
    comm_time_s: float
    phases: tuple[PhaseTime, ...]
    layer_times_s: tuple[tuple[str, float], ...]
    bottleneck_time_s: tuple[tuple[str, float], ...]
    total_bandwidth_gbps: float
    cost_usd: float | None
    violations: tuple[str, ...]

    @property
    def feasible(self) -> bool:
        """True when the allocation meets the budget and every user constraint."""
        return not self.violations

    @property
    def perf_per_cost(self) -> float | None:
        """iteration time (s) x network cost ($): LIBRA's perf-per-cost objective (lower is better)."""
        return None if self.cost_usd is None else self.iteration_time_s * self.cost_usd

    def objective(self, name: str) -> float | None:
        """The value of objective ``name`` (``iteration_time``: seconds; ``perf_per_cost``: s x $)."""
        return self.iteration_time_s if name == "iteration_time" else self.perf_per_cost

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (no per-phase list)."""
        return {
            "iteration_time_s": self.iteration_time_s,
            "compute_time_s": self.compute_time_s,
            "comm_time_s": self.comm_time_s,
            "total_bandwidth_gbps": self.total_bandwidth_gbps,
            "cost_usd": self.cost_usd,
            "perf_per_cost": self.perf_per_cost,
            "bottleneck_time_s": dict(self.bottleneck_time_s),
            "layer_times_s": [{"layer": n, "time_s": t} for n, t in self.layer_times_s],
            "feasible": self.feasible,
            "violations": list(self.violations),
        }


def phase_messages(collective: Collective | None, num_dimensions: int) -> list[float]:
    """Bytes each NPU moves on every dimension for one collective (module docstring), by loops."""
    msg = [0.0] * num_dimensions
    if collective is None:
        return msg
    comm, size = collective.communicator, float(collective.bytes)
    if collective.type == "all_gather":
        for d in reversed(range(num_dimensions)):
            c = comm[d]
            if c < 2:
                continue
            msg[d] = size * (c - 1)
            size *= c
        return msg
    for d in range(num_dimensions):
        c = comm[d]
        if c < 2:
            continue
        if collective.type == "all_reduce":
            msg[d] = 2.0 * size * (c - 1) / c
            size /= c
        elif collective.type == "reduce_scatter":
            msg[d] = size * (c - 1) / c
            size /= c
        else:  # all_to_all: the whole buffer is exchanged on every dimension
            msg[d] = size * (c - 1) / c
    return msg


def _network_cost(problem: HierarchyProblem, bw: Sequence[float]) -> float | None:
    """LIBRA's cost model by counting building blocks and links (module docstring)."""
    if not problem.has_cost:
        return None
    N, sizes, total = problem.num_npus, [d.size for d in problem.dimensions], 0.0
    for i, dim in enumerate(problem.dimensions):
        if dim.unit_cost_usd_per_gbps is not None:
            total += N * dim.unit_cost_usd_per_gbps * bw[i]
            continue
        prices, k = dim.prices, dim.size
        if dim.kind == "ring":
            blocks, links, link_bw = N // k, 2 * k, bw[i] / 2.0
        elif dim.kind == "fully_connected":
            blocks, links, link_bw = N // k, k * (k - 1), bw[i] / (k - 1)
        else:
            blocks, links, link_bw = math.prod(sizes[i + 1 :]), math.prod(sizes[: i + 1]), bw[i]
        total += blocks * links * link_bw * sum(prices.values())
    return total


def _violations(problem: HierarchyProblem, bw: Sequence[float], cost: float | None, rtol: float) -> list[str]:
    out, names = [], problem.dimension_names
    budget = problem.budget
    spent = sum(bw) if budget.kind == "total_bandwidth" else cost
    unit = "GB/s" if budget.kind == "total_bandwidth" else "$"
    if spent > budget.value * (1 + rtol):
        out.append(f"budget: {spent:.6g} {unit} spent, more than the {budget.value:.6g} {unit} allowed")
    if budget.spend_all and spent < budget.value * (1 - rtol):
        out.append(f"budget: {spent:.6g} {unit} spent, the budget of {budget.value:.6g} {unit} must be spent exactly")
    tol = lambda v: rtol * max(1.0, abs(v))  # noqa: E731
    for key, v in problem.constraints.min_gbps:
        if bw[names.index(key)] < v - tol(v):
            out.append(f"min_gbps: {key} has {bw[names.index(key)]:.6g} GB/s, below its minimum {v:.6g}")
    for key, v in problem.constraints.max_gbps:
        if bw[names.index(key)] > v + tol(v):
            out.append(f"max_gbps: {key} has {bw[names.index(key)]:.6g} GB/s, above its maximum {v:.6g}")
    for key, v in problem.constraints.fixed_gbps:
        if abs(bw[names.index(key)] - v) > tol(v):
            out.append(f"fixed_gbps: {key} has {bw[names.index(key)]:.6g} GB/s, not its fixed {v:.6g}")
    for a, b in problem.constraints.orderings:
        ba, bb = bw[names.index(a)], bw[names.index(b)]
        if ba < bb - tol(bb):
            out.append(f"orderings: {a} ({ba:.6g} GB/s) must have at least the bandwidth of {b} ({bb:.6g} GB/s)")
    for i, (terms, sense, rhs) in enumerate(problem.constraints.linear):
        value = sum(v * bw[names.index(key)] for key, v in terms)
        scale = rtol * max(1.0, abs(rhs), sum(abs(v * bw[names.index(key)]) for key, v in terms))
        broken = {"<=": value > rhs + scale, ">=": value < rhs - scale, "==": abs(value - rhs) > scale}[sense]
        if broken:
            text = " + ".join(f"{v:g} {key}" for key, v in terms)
            out.append(f"linear[{i}]: {text} = {value:.6g}, must be {sense} {rhs:.6g}")
    return out


def evaluate_bandwidths(
    problem: HierarchyProblem, bandwidths: Sequence[float], *, rtol: float = 1e-6
) -> BandwidthBreakdown:
    """Score an allocation ``bandwidths`` (GB/s per NPU, one per dimension) of ``problem``.

    Iteration time = sum over layers (x count) and phases of compute + max over dimensions of
    ``msg_d / B_d`` (a dimension with traffic and ``B_d = 0`` takes forever). ``violations`` lists
    the budget and user constraints the allocation breaks (relative tolerance ``rtol``); the times
    are computed either way.
    """
    D = problem.num_dimensions
    try:
        bw = [float(b) for b in bandwidths]
    except (TypeError, ValueError):
        raise InputError("bandwidths must be a list of numbers") from None
    if len(bw) != D:
        raise InputError(f"bandwidths has {len(bw)} entries, one per dimension expected ({D})", field="bandwidths")
    for i, b in enumerate(bw):
        if not math.isfinite(b) or b < 0:
            raise InputError(f"must be a finite number >= 0 GB/s, got {b}", field=f"bandwidths[{i}]")
    names = problem.dimension_names
    phases, layer_times, bottleneck = [], [], dict.fromkeys(names, 0.0)
    compute = comm = 0.0
    for li, layer in enumerate(problem.layers):
        layer_total = 0.0
        for p in PHASES:
            ph = layer.phase(p)
            msgs = phase_messages(ph.collective, D)
            dim_t = []
            for d in range(D):
                if msgs[d] == 0.0:
                    dim_t.append(0.0)
                elif bw[d] == 0.0:
                    dim_t.append(math.inf)
                else:
                    dim_t.append(msgs[d] / (bw[d] * 1e9))
            t_comm = max(dim_t)
            neck = names[dim_t.index(t_comm)] if t_comm > 0 else None
            c_s = ph.compute_us * 1e-6
            phases.append(PhaseTime(layer.name, li, p, layer.count, c_s, t_comm, tuple(dim_t), neck))
            compute += layer.count * c_s
            comm += layer.count * t_comm
            layer_total += layer.count * (c_s + t_comm)
            if neck is not None:
                bottleneck[neck] += layer.count * t_comm
        layer_times.append((layer.name, layer_total))
    cost = _network_cost(problem, bw)
    return BandwidthBreakdown(
        bandwidths_gbps=tuple(bw),
        iteration_time_s=compute + comm,
        compute_time_s=compute,
        comm_time_s=comm,
        phases=tuple(phases),
        layer_times_s=tuple(layer_times),
        bottleneck_time_s=tuple(bottleneck.items()),
        total_bandwidth_gbps=sum(bw),
        cost_usd=cost,
        violations=tuple(_violations(problem, bw, cost, rtol)),
    )


# ----------------------------------------------------------------------------------------------
# Files
# ----------------------------------------------------------------------------------------------
_TOP_KEYS = {"format", "version", "name", "description", "dimensions", "workload", "budget", "constraints", "objective"}
_DIM_KEYS = {"name", "kind", "size", "prices_usd_per_gbps", "unit_cost_usd_per_gbps"}
_LAYER_KEYS = {"name", "count", *PHASES}
_PHASE_KEYS = {"compute_us", "collective"}
_COLL_KEYS = {"type", "bytes", "communicator"}
_BUDGET_KEYS = {"total_bandwidth_gbps", "cost_usd", "spend_all"}
_CONSTRAINT_KEYS = {"min_gbps", "max_gbps", "fixed_gbps", "orderings", "linear"}
_LINEAR_KEYS = {"terms", "sense", "rhs"}
MAX_LAYERS = 100_000


def _mapping(value: Any, path: str) -> dict:
    """A JSON object with free keys (names)."""
    return json_object(value, path, set(value) if isinstance(value, dict) else set())


def _named_communicator(value: dict, path: str, names: list[str]) -> list[int]:
    """A communicator written as ``{dimension name: size}``: the list form, -1 where a name is absent."""
    for key in value:
        if key not in names:
            raise InstanceError(f"unknown dimension {brief(key)} (dimensions: {brief_names(names)})", field=path)
        if as_int(value[key], f"{path}.{key}", low=-1, high=MAX_DIM_SIZE) == 0:
            raise InstanceError("must be -1 (dimension unused) or a size >= 1, got 0", field=f"{path}.{key}")
    return [value.get(n, -1) for n in names]


def load_hierarchy(path: str | os.PathLike) -> HierarchyProblem:
    """Read and validate a ``topoopt-libra`` file; errors name the file and the field."""
    data = read_json(path, InstanceError)
    return with_source(lambda: parse_hierarchy(data), str(path), InstanceError)


def _check_dimension_list(dims: tuple) -> set[str]:
    """1 to MAX_DIMENSIONS dimensions with distinct names (checked by the problem, and by the parser
    before it resolves communicators by dimension name, so an empty list or a repeated name is said
    as such rather than as an unknown dimension)."""
    if not 1 <= len(dims) <= MAX_DIMENSIONS:
        raise InstanceError(f"needs 1 to {MAX_DIMENSIONS} dimensions, got {len(dims)}", field="dimensions")
    names = set()
    for i, d in enumerate(dims):
        if not isinstance(d, Dimension):
            raise InstanceError(f"expected a Dimension, got {type_name(d)}", field=f"dimensions[{i}]")
        if d.name in names:
            raise InstanceError(f"dimension name {brief(d.name)} is used twice", field=f"dimensions[{i}].name")
        names.add(d.name)
    return names


def parse_hierarchy(data: Any) -> HierarchyProblem:
    """Build a :class:`HierarchyProblem` from decoded JSON (a dict)."""
    if isinstance(data, dict) and "format" in data and data["format"] != LIBRA_FORMAT:
        raise InstanceError(f"expected {LIBRA_FORMAT!r}, got {brief(data['format'])}", field="format")
    top = json_object(data, "", _TOP_KEYS, {"format", "version", "dimensions", "workload", "budget"})
    if isinstance(top["version"], bool) or top["version"] != VERSION:
        raise InstanceError(
            f"unsupported version {brief(top['version'])} (this release reads {VERSION})", field="version"
        )
    dims = []
    for i, raw in enumerate(json_list(top["dimensions"], "dimensions", max_len=MAX_DIMENSIONS)):
        path = f"dimensions[{i}]"
        d = json_object(raw, path, _DIM_KEYS, {"kind", "size"})
        prices = d.get("prices_usd_per_gbps")
        if prices is not None:
            json_object(prices, f"{path}.prices_usd_per_gbps", set(PRICE_ELEMENTS))
        dims.append(
            _at(
                path,
                lambda d=d, i=i: Dimension(
                    d.get("name", f"dim{i + 1}"), d["kind"], d["size"], prices, d.get("unit_cost_usd_per_gbps")
                ),
            )
        )
    _check_dimension_list(tuple(dims))
    work = json_object(top["workload"], "workload", {"layers", "communicators"}, {"layers"})
    named = {}
    for key, value in _mapping(work.get("communicators", {}), "workload.communicators").items():
        path = f"workload.communicators.{key}"
        comm = (
            _named_communicator(value, path, [d.name for d in dims])
            if isinstance(value, dict)
            else json_list(value, path, max_len=MAX_DIMENSIONS)
        )
        # checked here whether or not a layer uses it (a typo in an unused one is still a typo)
        named[key] = _at(path, lambda comm=comm: _communicator_entries(comm))
        _check_communicator(named[key], tuple(dims), path, by_name=isinstance(value, dict))
    layers = []
    for li, raw in enumerate(json_list(work["layers"], "workload.layers", max_len=MAX_LAYERS)):
        path = f"workload.layers[{li}]"
        lay = json_object(raw, path, _LAYER_KEYS)
        phases = {}
        for p in PHASES:
            if p not in lay:
                continue
            ph = json_object(lay[p], f"{path}.{p}", _PHASE_KEYS)
            coll = None
            if ph.get("collective") is not None:
                cpath = f"{path}.{p}.collective"
                c = json_object(ph["collective"], cpath, _COLL_KEYS, _COLL_KEYS)
                comm = c["communicator"]
                if isinstance(comm, dict):  # {dimension name: size}; a dimension not named is unused
                    comm = _named_communicator(comm, f"{cpath}.communicator", [d.name for d in dims])
                elif isinstance(comm, str):
                    if comm not in named:
                        raise InstanceError(
                            f"unknown communicator {brief(comm)} (workload.communicators has: {brief_names(named) or 'none'})",
                            field=f"{cpath}.communicator",
                        )
                    comm = named[comm]
                else:
                    comm = json_list(comm, f"{cpath}.communicator", max_len=MAX_DIMENSIONS)
                coll = _at(cpath, lambda c=c, comm=comm: Collective(c["type"], c["bytes"], tuple(comm)))
            phases[p] = _at(f"{path}.{p}", lambda ph=ph, coll=coll: Phase(ph.get("compute_us", 0.0), coll))
        layers.append(
            _at(
                path,
                lambda lay=lay, li=li, phases=phases: Layer(
                    lay.get("name", f"layer{li + 1}"), count=lay.get("count", 1), **phases
                ),
            )
        )
    b = json_object(top["budget"], "budget", _BUDGET_KEYS)
    kinds = [k for k in ("total_bandwidth_gbps", "cost_usd") if k in b]
    if len(kinds) != 1:
        raise InstanceError("give exactly one of total_bandwidth_gbps or cost_usd", field="budget")
    kind = "total_bandwidth" if kinds[0] == "total_bandwidth_gbps" else "cost"
    budget = _at("budget", lambda: Budget(kind, b[kinds[0]], b.get("spend_all", False)))
    c = json_object(top.get("constraints", {}), "constraints", _CONSTRAINT_KEYS)
    maps = {k: _mapping(c.get(k, {}), f"constraints.{k}") for k in ("min_gbps", "max_gbps", "fixed_gbps")}
    orderings = []
    for i, raw in enumerate(json_list(c.get("orderings", []), "constraints.orderings")):
        item = json_list(raw, f"constraints.orderings[{i}]")
        if len(item) != 3 or item[1] not in (">=", "<="):
            raise InstanceError('expected ["a", ">=", "b"] or ["a", "<=", "b"]', field=f"constraints.orderings[{i}]")
        orderings.append((item[0], item[2]) if item[1] == ">=" else (item[2], item[0]))
    linear = []
    for i, raw in enumerate(json_list(c.get("linear", []), "constraints.linear")):
        row = json_object(raw, f"constraints.linear[{i}]", _LINEAR_KEYS, _LINEAR_KEYS)
        linear.append((_mapping(row["terms"], f"constraints.linear[{i}].terms"), row["sense"], row["rhs"]))
    cons = _at(
        "constraints",
        lambda: Constraints(maps["min_gbps"], maps["max_gbps"], maps["fixed_gbps"], tuple(orderings), tuple(linear)),
    )
    return HierarchyProblem(
        tuple(dims),
        tuple(layers),
        budget,
        cons,
        objective=top.get("objective", "iteration_time"),
        name=top.get("name", ""),
        description=top.get("description", ""),
    )


def hierarchy_to_dict(problem: HierarchyProblem) -> dict[str, Any]:
    """The problem as ``topoopt-libra`` JSON data (communicators written out as lists)."""
    dims = []
    for d in problem.dimensions:
        item: dict[str, Any] = {"name": d.name, "kind": d.kind, "size": d.size}
        if d.prices is not None:
            item["prices_usd_per_gbps"] = d.prices
        if d.unit_cost_usd_per_gbps is not None:
            item["unit_cost_usd_per_gbps"] = d.unit_cost_usd_per_gbps
        dims.append(item)
    layers = []
    for layer in problem.layers:
        item = {"name": layer.name}
        if layer.count != 1:
            item["count"] = layer.count
        for p in PHASES:
            ph = layer.phase(p)
            if ph.compute_us == 0 and ph.collective is None:
                continue
            entry: dict[str, Any] = {"compute_us": ph.compute_us}
            if ph.collective is not None:
                entry["collective"] = {
                    "type": ph.collective.type,
                    "bytes": ph.collective.bytes,
                    "communicator": list(ph.collective.communicator),
                }
            item[p] = entry
        layers.append(item)
    b = problem.budget
    budget: dict[str, Any] = {"total_bandwidth_gbps" if b.kind == "total_bandwidth" else "cost_usd": b.value}
    if b.spend_all:
        budget["spend_all"] = True
    cons: dict[str, Any] = {}
    for label in ("min_gbps", "max_gbps", "fixed_gbps"):
        if getattr(problem.constraints, label):
            cons[label] = dict(getattr(problem.constraints, label))
    if problem.constraints.orderings:
        cons["orderings"] = [[a, ">=", b] for a, b in problem.constraints.orderings]
    if problem.constraints.linear:
        cons["linear"] = [
            {"terms": dict(terms), "sense": sense, "rhs": rhs} for terms, sense, rhs in problem.constraints.linear
        ]
    out: dict[str, Any] = {"format": LIBRA_FORMAT, "version": VERSION}
    if problem.name:
        out["name"] = problem.name
    if problem.description:
        out["description"] = problem.description
    out.update(dimensions=dims, workload={"layers": layers}, budget=budget)
    if cons:
        out["constraints"] = cons
    out["objective"] = problem.objective
    return out


def save_hierarchy(problem: HierarchyProblem, path: str | os.PathLike) -> None:
    """Write the problem as JSON, atomically."""
    write_json_atomic(path, hierarchy_to_dict(problem))
