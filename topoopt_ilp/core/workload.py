"""Workload mode (docs/guide/workloads.md): a training job whose parallelisation strategy induces the demand.

A :class:`Workload` describes one training iteration of a DNN on ``n`` servers:

* **layers** (operators, in execution order). Each layer has a compute cost for the *whole* global
  batch on *one* server (``compute_s`` directly, or ``flops`` divided by the server's throughput
  ``device_flops``), its parameter bytes (what its data-parallel replicas AllReduce), its output
  activation bytes for the whole batch (what moves when the next layer is placed differently), its
  memory per replica, and the data-parallel degrees ``configs`` it may use. A layer at degree ``k``
  runs on the coset ``{s, s + n/k, s + 2n/k, ...}`` with start ``s`` in ``[0, n/k)`` and ``k | n``:
  TopoOpt's placement rule (``--net-opt 1``), which makes every group a coset of the cyclic subgroup
  of Z_n of order k, so TotientPerms rings apply to it. ``measured`` maps a degree ``k`` to the
  measured per-server seconds at that degree; it overrides the derived ``compute_s / k``.
* **blocks**: model-parallel pieces that live whole on one server, like a DLRM embedding table:
  memory ``bytes``, ``lookup_bytes`` (the looked-up rows for the whole batch, sent from the block's
  server to the replicas of its ``consumer`` layer, and the same amount back as gradients) and
  ``compute_s`` on its server.
* ``batch_size`` (global, samples per iteration), ``server_memory_bytes`` (capacity of every
  server), ``device_flops`` (FLOP/s of one server; default :data:`DEFAULT_DEVICE_FLOPS`) and
  ``overlap`` (``none``: T_iter = T_compute + T_comm; ``full``: max of the two) and
  ``compute_model``, what T_compute is (below).

**Compute model** (``compute_model``):

* ``busiest_server`` (default): T_compute = the busiest server's total compute (the sum of its
  layers' per-replica times and its blocks' ``compute_s``). Layers on different servers count as
  perfectly pipelined: a pipeline of stages on disjoint cosets pays no bubble.
* ``critical_path``: T_compute = max(busiest server's total compute, P), where P is a chain of
  compute that one iteration with one micro-batch must run in turn, communication taken as free:
  the layers run forward 0..L-1 then backward L-1..0, one after the other, and a block computes
  (its gradient update included) before its consumer layer's forward, in parallel with the layers
  before it::

      P = max( sum_i tau_i,  max_b ( c_b + sum_{i >= consumer(b)} tau_i ) )

  with tau_i = :meth:`Workload.layer_time` of layer i at its chosen degree (forward + backward)
  and c_b block b's ``compute_s``. A block's chain also goes on through the backward passes of the
  layers before its consumer; P leaves those out, because a layer's time is given for its forward
  and backward together, so P is at most the longest chain (equal to it when no block's chain is
  the longest; ``topoopt schedule`` splits the two with its ``--forward-fraction``). Both terms are
  lower bounds on the makespan of any schedule of the iteration (the first a resource bound, the
  second a precedence bound), so the maximum is too. It models no micro-batching (a pipeline pays its full bubble) and no overlap of
  communication inside the chain: communication stays the separate T_comm term.

JSON format (the ``workload`` section of an instance; sizes in bytes, times in seconds)::

    "workload": {
      "batch_size": 1024,
      "server_memory_bytes": 160e9,
      "device_flops": 4.992e14,
      "overlap": "none",
      "compute_model": "busiest_server",
      "layers": [
        {"name": "bottom0", "flops": 2.6e10, "param_bytes": 16.8e6, "activation_bytes": 8.4e6,
         "memory_bytes": 67.1e6, "configs": [1, 2, 4, 8]},
        {"name": "top0", "compute_s": 0.004, "param_bytes": 4.2e6, "activation_bytes": 2.1e6,
         "configs": [2, 4, 8], "measured": {"8": 0.0006}}
      ],
      "blocks": [
        {"name": "table0", "bytes": 5.12e9, "lookup_bytes": 524288, "compute_s": 1e-5, "consumer": 1}
      ]
    }

Keys, with defaults:

* workload: ``layers`` (required, >= 1), ``batch_size`` (required), ``server_memory_bytes``
  (required), ``blocks`` ([]), ``device_flops`` (:data:`DEFAULT_DEVICE_FLOPS`), ``overlap``
  (``"none"``), ``compute_model`` (``"busiest_server"``; or ``"critical_path"``).
* layer: ``name`` (unique), exactly one of ``compute_s`` and ``flops`` (both may be left out only
  when ``measured`` covers every config), ``param_bytes``, ``activation_bytes``, ``configs``
  (distinct degrees k, each dividing n and at most ``batch_size``), ``memory_bytes`` (default
  ``4 * param_bytes``: weights, gradients and two Adam moments at the parameters' precision),
  ``measured`` (object ``{"k": seconds}``, keys among ``configs``).
* block: ``name`` (unique among layers and blocks), ``bytes``, ``lookup_bytes``, ``compute_s`` (0),
  ``consumer`` (index of the layer that reads the looked-up rows; 0).

**Memory** (used here and by :func:`topoopt_ilp.core.strategy.validate_strategy`): a layer at degree k
puts ``memory_bytes + activation_bytes / k`` on each of its k servers (its parameters and optimizer
state in full, plus the activations of its batch/k samples, kept for the backward pass); a block
puts ``bytes`` on its server. A server's total must not exceed ``server_memory_bytes``.

**Feasibility checked before solving** (necessary conditions; whether a placement exists in
general is a bin-packing question that the placement model decides). Let ``C`` be the capacity and
``F`` the per-server memory of the layers whose only config is ``k = n`` (they are on every server):

1. ``F <= C``;
2. every block has ``bytes <= C`` (else it fits on no server) and ``bytes <= C - F``;
3. every other layer has a config with ``memory_bytes + activation_bytes / k <= C - F``;
4. aggregate: ``sum over layers of min over those configs of (k * memory_bytes + activation_bytes)
   + sum of block bytes <= n * C`` (the least memory each layer can occupy cluster-wide);
5. pigeonhole: a server holds at most ``q`` blocks of more than ``(C - F) / (q + 1)`` bytes each,
   so for q = 1, 2, ... at most ``q * n`` blocks are that large.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from topoopt_ilp.core.checks import MAX_BYTES, MAX_INDEX, as_int, as_number, brief, type_name
from topoopt_ilp.errors import InstanceError

__all__ = [
    "Layer",
    "Block",
    "Workload",
    "check_workload",
    "coset",
    "DEFAULT_DEVICE_FLOPS",
    "A100_BF16_DENSE_FLOPS",
    "GPUS_PER_SERVER",
    "UTILISATION",
    "OVERLAPS",
    "COMPUTE_MODELS",
    "MAX_ITEMS",
]

#: Peak dense bf16 tensor-core throughput of one NVIDIA A100 (datasheet: 312 TFLOPS).
A100_BF16_DENSE_FLOPS = 312e12
#: GPUs per server in TopoOpt's simulations (``--big-gpu 4``).
GPUS_PER_SERVER = 4
#: Sustained fraction of peak during training. 40% is an assumption in the range that large
#: training runs report as model-FLOPs utilisation; change ``device_flops`` to use another.
UTILISATION = 0.4
#: Default ``device_flops``: one server = 4 x A100 x 312 TFLOPS x 0.4 = 4.992e14 FLOP/s.
DEFAULT_DEVICE_FLOPS = GPUS_PER_SERVER * A100_BF16_DENSE_FLOPS * UTILISATION

OVERLAPS = ("none", "full")
#: ``compute_model`` values (module docstring, **Compute model**); the first is the default.
COMPUTE_MODELS = ("busiest_server", "critical_path")
#: Most layers (and, separately, blocks) a workload may have: bounds parsing time on hostile files.
MAX_ITEMS = 100_000
#: Relative slack on memory comparisons so that sizes summed in another order still fit.
MEMORY_RTOL = 1e-9


# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Layer:
    """One layer (operator) of the model; see the module docstring for every field's meaning.

    Parameters
    ----------
    name : str
        Unique name.
    compute_s, flops : float or None
        Forward + backward cost of the whole global batch on one server: seconds, or FLOPs that
        :meth:`Workload.layer_compute_s` turns into seconds with ``device_flops``. Exactly one,
        unless ``measured`` covers every config.
    param_bytes : float
        Bytes of parameters (= gradient bytes AllReduced by its data-parallel replicas).
    activation_bytes : float
        Output activations for the whole global batch (the gradient w.r.t. them is as large).
    memory_bytes : float or None
        Memory one replica needs besides activations; ``None`` means ``4 * param_bytes``.
    configs : tuple of int
        Allowed data-parallel degrees k (each divides n).
    measured : Mapping[int, float] or None
        Degree k -> measured per-server seconds at that degree; overrides the derived time.
    """

    name: str
    param_bytes: float
    activation_bytes: float
    configs: tuple[int, ...]
    compute_s: float | None = None
    flops: float | None = None
    memory_bytes: float | None = None
    measured: Mapping[int, float] | None = None

    def __post_init__(self) -> None:
        # Normalise what code may pass as lists/dicts, so that instances are immutable and
        # compare equal however they were built. Type errors are left to check_workload.
        if isinstance(self.configs, list):
            object.__setattr__(self, "configs", tuple(self.configs))
        if isinstance(self.measured, Mapping) and not isinstance(self.measured, MappingProxyType):
            object.__setattr__(self, "measured", MappingProxyType(dict(self.measured)))
        if self.memory_bytes is None and _is_num(self.param_bytes):
            object.__setattr__(self, "memory_bytes", 4.0 * float(self.param_bytes))

    def replica_memory(self, k: int) -> float:
        """Bytes on each of the k servers of this layer at degree k."""
        return float(self.memory_bytes) + float(self.activation_bytes) / k


@dataclass(frozen=True, kw_only=True)
class Block:
    """A model-parallel block placed whole on one server (e.g. an embedding table).

    Parameters
    ----------
    name : str
        Unique name (among layers and blocks).
    bytes : float
        Memory it occupies on its server.
    lookup_bytes : float
        Bytes of looked-up rows per iteration for the whole batch, sent from the block's server to
        the replicas of layer ``consumer`` (split by their share of the batch); the same amount
        returns as gradients.
    compute_s : float
        Seconds of work per iteration on its server.
    consumer : int
        Index of the layer that reads the lookups.
    """

    name: str
    bytes: float
    lookup_bytes: float
    compute_s: float = 0.0
    consumer: int = 0


@dataclass(frozen=True, kw_only=True)
class Workload:
    """A training job: layers in execution order, model-parallel blocks and the server budget."""

    layers: tuple[Layer, ...]
    blocks: tuple[Block, ...] = ()
    batch_size: int
    server_memory_bytes: float
    device_flops: float = DEFAULT_DEVICE_FLOPS
    overlap: Literal["none", "full"] = "none"
    compute_model: Literal["busiest_server", "critical_path"] = "busiest_server"

    def __post_init__(self) -> None:
        for name in ("layers", "blocks"):
            if isinstance(getattr(self, name), list):
                object.__setattr__(self, name, tuple(getattr(self, name)))

    def layer_compute_s(self, i: int) -> float | None:
        """Seconds of layer i for the whole batch on one server (``None``: measured times only)."""
        layer = self.layers[i]
        if layer.compute_s is not None:
            return float(layer.compute_s)
        if layer.flops is not None:
            return float(layer.flops) / self.device_flops
        return None

    def layer_time(self, i: int, k: int) -> float:
        """Per-server seconds of layer i at degree k: the measured time, else ``compute_s / k``."""
        layer = self.layers[i]
        if layer.measured is not None and k in layer.measured:
            return float(layer.measured[k])
        total = self.layer_compute_s(i)
        if total is None:
            raise ValueError(
                f"layer {brief(layer.name)} has no time for degree {k} (no measurement, no compute_s/flops)"
            )
        return total / k


def coset(n: int, k: int, s: int) -> tuple[int, ...]:
    """Servers of a degree-k group starting at s: ``(s, s + n/k, ..., s + (k-1) n/k)``.

    Replica r (0-based, in this order) holds samples ``[r B/k, (r+1) B/k)`` of the batch.
    """
    g = n // k
    return tuple(s + r * g for r in range(k))


# ----------------------------------------------------------------------------------------------
# Parsing and checking
# ----------------------------------------------------------------------------------------------
def _is_num(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _name(value: Any, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise InstanceError(
            f"expected a non-empty string, got {type_name(value) if not isinstance(value, str) else 'an empty string'}",
            field=path,
        )
    return value


def check_workload(w: Workload, n: int, path: str = "workload") -> None:
    """Check a workload built in code or parsed, for n servers; raise :class:`InstanceError`.

    Everything :func:`parse_workload` rejects except the JSON-only rules (unknown keys).
    """
    if not isinstance(w, Workload):
        raise InstanceError(f"expected a Workload, got {type_name(w)}", field=path)
    n = as_int(n, "cluster.servers", low=1)
    batch = as_int(w.batch_size, f"{path}.batch_size", low=1, high=MAX_INDEX)
    cap = as_number(w.server_memory_bytes, f"{path}.server_memory_bytes", positive=True, high=MAX_BYTES)
    as_number(w.device_flops, f"{path}.device_flops", positive=True)
    if not isinstance(w.overlap, str) or w.overlap not in OVERLAPS:
        raise InstanceError(f"must be one of {', '.join(OVERLAPS)}; got {brief(w.overlap)}", field=f"{path}.overlap")
    if not isinstance(w.compute_model, str) or w.compute_model not in COMPUTE_MODELS:
        raise InstanceError(
            f"must be one of {', '.join(COMPUTE_MODELS)}; got {brief(w.compute_model)}", field=f"{path}.compute_model"
        )
    if not isinstance(w.layers, tuple) or not isinstance(w.blocks, tuple):
        raise InstanceError("layers and blocks must be tuples", field=path)
    if not w.layers:
        raise InstanceError("a workload needs at least one layer", field=f"{path}.layers")
    if len(w.layers) > MAX_ITEMS or len(w.blocks) > MAX_ITEMS:
        raise InstanceError(f"more than {MAX_ITEMS} layers or blocks", field=path)
    names: dict[str, str] = {}

    def unique(name: Any, p: str) -> None:
        name = _name(name, p)
        if name in names:
            raise InstanceError(f"name {brief(name)} is already used by {names[name]}", field=p)
        names[name] = p

    for i, layer in enumerate(w.layers):
        p = f"{path}.layers[{i}]"
        if not isinstance(layer, Layer):
            raise InstanceError(f"expected a Layer, got {type_name(layer)}", field=p)
        unique(layer.name, f"{p}.name")
        for key in ("param_bytes", "activation_bytes", "memory_bytes"):
            as_number(getattr(layer, key), f"{p}.{key}", nonnegative=True, high=MAX_BYTES)
        for key in ("compute_s", "flops"):
            if getattr(layer, key) is not None:
                as_number(getattr(layer, key), f"{p}.{key}", nonnegative=True)
        if not isinstance(layer.configs, tuple) or not layer.configs:
            raise InstanceError("give at least one data-parallel degree", field=f"{p}.configs")
        seen: set[int] = set()
        for c, k in enumerate(layer.configs):
            cp = f"{p}.configs[{c}]"
            k = as_int(k, cp, low=1, high=n)  # above n no degree can divide the servers
            if n % k:
                raise InstanceError(
                    f"degree {k} does not divide the {n} servers (TopoOpt places a degree-k layer on a coset of n/k)",
                    field=cp,
                )
            if k > batch:
                raise InstanceError(
                    f"degree {k} exceeds the batch size {batch}: a replica would get no samples", field=cp
                )
            if k in seen:
                raise InstanceError(f"degree {k} is listed twice", field=cp)
            seen.add(k)
        if layer.measured is not None:
            if not isinstance(layer.measured, Mapping):
                raise InstanceError(
                    f"expected a mapping degree -> seconds, got {type_name(layer.measured)}", field=f"{p}.measured"
                )
            for k, secs in layer.measured.items():
                mp = f"{p}.measured.{k}"
                k = as_int(k, mp, low=1)
                if k not in seen:
                    raise InstanceError(f"degree {k} is not among the layer's configs {list(layer.configs)}", field=mp)
                as_number(secs, mp, nonnegative=True)
        has = [key for key in ("compute_s", "flops") if getattr(layer, key) is not None]
        if len(has) == 2:
            raise InstanceError("give either compute_s or flops, not both", field=p)
        if not has and not (layer.measured is not None and seen <= set(layer.measured)):
            raise InstanceError("give compute_s or flops (or measured times for every config)", field=p)

    for b, block in enumerate(w.blocks):
        p = f"{path}.blocks[{b}]"
        if not isinstance(block, Block):
            raise InstanceError(f"expected a Block, got {type_name(block)}", field=p)
        unique(block.name, f"{p}.name")
        as_number(block.bytes, f"{p}.bytes", nonnegative=True, high=MAX_BYTES)
        as_number(block.lookup_bytes, f"{p}.lookup_bytes", nonnegative=True, high=MAX_BYTES)
        as_number(block.compute_s, f"{p}.compute_s", nonnegative=True)
        as_int(block.consumer, f"{p}.consumer", low=0, high=len(w.layers) - 1)

    _check_memory(w, n, cap, path)


def _check_memory(w: Workload, n: int, cap: float, path: str) -> None:
    """The necessary feasibility conditions 1-5 of the module docstring."""
    slack = cap * (1 + MEMORY_RTOL)
    forced = [i for i, layer in enumerate(w.layers) if tuple(layer.configs) == (n,)]
    fixed = sum(w.layers[i].replica_memory(n) for i in forced)
    if fixed > slack:
        raise InstanceError(
            f"the layers that must run on every server (only config {n}) need {fixed:.4g} bytes per server, "
            f"more than server_memory_bytes {cap:.4g}",
            field=f"{path}.layers[{forced[0]}]",
        )
    room = cap - fixed
    total = 0.0
    for b, block in enumerate(w.blocks):
        size = float(block.bytes)
        if size > slack:
            raise InstanceError(
                f"block of {size:.4g} bytes is larger than any server's memory ({cap:.4g} bytes)",
                field=f"{path}.blocks[{b}].bytes",
            )
        if size > room * (1 + MEMORY_RTOL):
            raise InstanceError(
                f"block of {size:.4g} bytes does not fit next to the {fixed:.4g} bytes per server of the layers "
                f"that run on every server (server_memory_bytes {cap:.4g})",
                field=f"{path}.blocks[{b}].bytes",
            )
        total += size
    for i, layer in enumerate(w.layers):
        if i in forced:
            total += n * layer.replica_memory(n)
            continue
        fits = [k for k in layer.configs if layer.replica_memory(k) <= room * (1 + MEMORY_RTOL)]
        if not fits:
            best = max(layer.configs)
            raise InstanceError(
                f"no config fits in memory: at degree {best} a replica needs {layer.replica_memory(best):.4g} bytes "
                f"(memory_bytes + activation_bytes/k), {room:.4g} available per server",
                field=f"{path}.layers[{i}]",
            )
        total += min(k * float(layer.memory_bytes) + float(layer.activation_bytes) for k in fits)
    if total > n * cap * (1 + MEMORY_RTOL):
        raise InstanceError(
            f"no feasible placement: the layers at their most memory-frugal configs plus the blocks need "
            f"{total:.4g} bytes in all, more than {n} servers x {cap:.4g} bytes",
            field=path,
        )
    sizes = sorted((float(block.bytes) for block in w.blocks), reverse=True)
    for q in range(1, (len(sizes) - 1) // n + 1):  # the (q n + 1)-th largest block decides level q
        if sizes[q * n] > room / (q + 1) * (1 + MEMORY_RTOL):
            beside = f" beside the {fixed:.4g} of the layers on every server" if fixed else ""
            raise InstanceError(
                f"no feasible placement: {q * n + 1} blocks of more than {room / (q + 1):.4g} bytes each, but a server "
                f"holds at most {q} of them ({room:.4g} bytes free per server{beside})",
                field=f"{path}.blocks",
            )
