"""Parallelisation strategies of a :class:`~topoopt_ilp.core.workload.Workload` and the demand they induce.

A :class:`Strategy` gives every layer a data-parallel degree ``k`` (one of its ``configs``) and a
coset start ``s`` in ``[0, n/k)``: the layer runs on servers ``s, s + n/k, ..., s + (k-1) n/k``
(:func:`~topoopt_ilp.core.workload.coset`), replica ``r`` on server ``s + r n/k`` processing the
contiguous sample range ``[r B/k, (r+1) B/k)`` of the global batch B. Every block gets a server.

Definitions used by :func:`strategy_demand` (per training iteration):

* **AllReduce.** A layer at degree k >= 2 with ``param_bytes > 0`` AllReduces its gradients
  (``param_bytes``) over its coset. Layers on the same coset share one group whose bytes are the sum
  (a framework would bucket them into one collective; the ring traffic is linear in the bytes, so
  the network load is the same). Groups come in order of the first layer on each coset; members in
  coset order ``(s, s + n/k, ...)``, which is the jump-``n/k`` ring TotientPerms starts from.
* **Resharding (layer i -> i+1).** Each sample's activations go from the replica of layer i that
  produced it to the replica of layer i+1 that consumes it; ``activation_bytes / B`` bytes per
  sample, so replica a of layer i sends ``activation_bytes * |I_a ∩ J_b| / B`` to replica b of
  layer i+1, where I_a, J_b are their sample ranges. The backward pass returns the same amount
  from b to a (gradients w.r.t. those activations). Bytes between a server and itself are dropped,
  so equal placements cost nothing. Since every k divides n, all ranges are unions of the n
  "units" ``[t B/n, (t+1) B/n)``, which is how it is computed (O(n) per layer pair, exact).
* **Embedding lookups.** Block b on server j sends ``lookup_bytes`` split by sample share over the
  replicas of its ``consumer`` layer (``lookup_bytes / k`` to each of the k replicas) and receives
  the same amount back as gradients; a replica on server j itself costs nothing.
* **Compute.** Each server adds, for every layer it hosts at degree k, ``Workload.layer_time(i, k)``
  (the measured time for k if given, else the whole-batch ``compute_s`` (or ``flops /
  device_flops``) divided by k), plus the ``compute_s`` of every block it hosts.
* **Memory** (:func:`server_memory`, checked by :func:`validate_strategy`): a layer at degree k
  puts ``memory_bytes + activation_bytes / k`` on each of its k servers, a block its ``bytes`` on
  its server; each server's sum must be at most ``server_memory_bytes``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from topoopt_ilp.core.checks import brief, type_name
from topoopt_ilp.core.instance import AllReduceGroup, Demand
from topoopt_ilp.core.workload import MEMORY_RTOL, Workload, coset
from topoopt_ilp.errors import InstanceError

__all__ = [
    "Strategy",
    "data_parallel",
    "degrees_at_most",
    "place_blocks",
    "stage_strategies",
    "validate_strategy",
    "strategy_demand",
    "strategy_traffic",
    "strategy_to_demand",
    "mp_pair_tuples",
    "server_memory",
    "strategy_to_dict",
    "parse_strategy",
]


@dataclass(frozen=True)
class Strategy:
    """A placement: per layer a degree and a coset start, per block a server.

    Parameters
    ----------
    layer_degree : tuple of int
        Data-parallel degree k of each layer (one of its configs, k | n).
    layer_start : tuple of int
        Coset start s of each layer, ``0 <= s < n/k``.
    block_server : tuple of int
        Server of each block.
    """

    layer_degree: tuple[int, ...]
    layer_start: tuple[int, ...]
    block_server: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for name in ("layer_degree", "layer_start", "block_server"):
            value = getattr(self, name)
            if isinstance(value, (list, np.ndarray)):
                object.__setattr__(self, name, tuple(int(v) for v in value))

    def layer_servers(self, n: int, i: int) -> tuple[int, ...]:
        """Servers of layer i, replica order."""
        return coset(n, self.layer_degree[i], self.layer_start[i])


def data_parallel(workload: Workload, n: int) -> Strategy:
    """TopoOpt's initial strategy: every layer at its largest allowed degree, start 0; block b on
    server ``b mod n`` (round robin), or by :func:`place_blocks` when that breaks server memory."""
    layers = workload.layers
    degree, start = tuple(max(layer.configs) for layer in layers), (0,) * len(layers)
    return Strategy(degree, start, place_blocks(workload, n, degree, start))


def place_blocks(
    workload: Workload, n: int, layer_degree: tuple[int, ...], layer_start: tuple[int, ...]
) -> tuple[int, ...]:
    """Servers for the blocks next to the given layers: round robin (TopoOpt's rule) when every
    server stays within ``server_memory_bytes``; else the largest block first, each on the server
    with the most memory left (the round robin again when even that fails: the memory check then
    names the server)."""
    robin = tuple(b % n for b in range(len(workload.blocks)))
    cap = float(workload.server_memory_bytes) * (1 + MEMORY_RTOL)
    mem = server_memory(workload, n, Strategy(layer_degree, layer_start, robin))
    if not workload.blocks or (mem <= cap).all():
        return robin
    free = cap - _layer_memory(workload, n, layer_degree, layer_start)
    out = [0] * len(workload.blocks)
    for b in sorted(range(len(workload.blocks)), key=lambda b: -float(workload.blocks[b].bytes)):
        v = int(np.argmax(free))
        if free[v] < float(workload.blocks[b].bytes):
            return robin
        out[b] = v
        free[v] -= float(workload.blocks[b].bytes)
    return tuple(out)


def degrees_at_most(workload: Workload, k: int) -> tuple[int, ...]:
    """Per layer, its largest allowed degree at most ``k`` (its least when every one is larger): the
    degrees of a strategy built around one degree k."""
    return tuple(max((c for c in layer.configs if c <= k), default=min(layer.configs)) for layer in workload.layers)


def stage_strategies(workload: Workload, n: int) -> list[Strategy]:
    """Pipeline-of-data-parallel-groups starts, one per degree k: the layers cut into
    min(n/k, layers) contiguous stages of about equal count, stage j on the degree-k coset starting
    at j (each layer at its largest allowed degree at most k); blocks by :func:`place_blocks`.
    Hybrids that neither the data-parallel start nor a placement step on its topology reach easily."""
    layers = workload.layers
    L = len(layers)
    out = []
    for k in sorted({k for layer in layers for k in layer.configs}):
        stages = min(n // k, L)
        if stages < 2:
            continue
        deg = degrees_at_most(workload, k)
        start = tuple(((i * stages) // L) % (n // d) for i, d in enumerate(deg))
        out.append(Strategy(deg, start, place_blocks(workload, n, deg, start)))
    return out


# ----------------------------------------------------------------------------------------------
def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _structure_violations(workload: Workload, n: int, strategy: Strategy) -> list[str]:
    """Everything but memory: lengths, degrees, starts, servers."""
    out: list[str] = []
    if not isinstance(strategy, Strategy):
        return [f"expected a Strategy, got {type_name(strategy)}"]
    nl, nb = len(workload.layers), len(workload.blocks)
    for name, value, want in (
        ("layer_degree", strategy.layer_degree, nl),
        ("layer_start", strategy.layer_start, nl),
        ("block_server", strategy.block_server, nb),
    ):
        if not isinstance(value, tuple):
            out.append(f"{name} must be a tuple of integers, got {type_name(value)}")
        elif len(value) != want:
            out.append(
                f"{name} has {len(value)} entries, the workload has {want} {'blocks' if name == 'block_server' else 'layers'}"
            )
        elif not all(_is_int(v) for v in value):
            out.append(f"{name} must hold integers")
    if out:
        return out
    for i, layer in enumerate(workload.layers):
        k, s = int(strategy.layer_degree[i]), int(strategy.layer_start[i])
        if k not in layer.configs:
            out.append(f"layer {i} ({layer.name}): degree {k} is not among its configs {list(layer.configs)}")
            continue
        if not 0 <= s < n // k:
            out.append(
                f"layer {i} ({layer.name}): start {s} out of range 0..{n // k - 1} for degree {k} on {n} servers"
            )
    for b, block in enumerate(workload.blocks):
        j = int(strategy.block_server[b])
        if not 0 <= j < n:
            out.append(f"block {b} ({block.name}): server {j} out of range 0..{n - 1}")
    return out


def server_memory(workload: Workload, n: int, strategy: Strategy) -> np.ndarray:
    """Bytes each server holds under the strategy (module docstring, **Memory**), shape (n,)."""
    mem = _layer_memory(workload, n, strategy.layer_degree, strategy.layer_start)
    for b, block in enumerate(workload.blocks):
        mem[strategy.block_server[b]] += float(block.bytes)
    return mem


def _layer_memory(
    workload: Workload, n: int, layer_degree: tuple[int, ...], layer_start: tuple[int, ...]
) -> np.ndarray:
    """Bytes each server holds for the layers' replicas alone, shape (n,)."""
    mem = np.zeros(n)
    for i, layer in enumerate(workload.layers):
        k, s = layer_degree[i], layer_start[i]
        mem[s :: n // k] += layer.replica_memory(k)
    return mem


def validate_strategy(workload: Workload, n: int, strategy: Strategy) -> list[str]:
    """Every violation of the strategy against the workload on n servers; empty means valid.

    Checks: tuple lengths, each degree among the layer's configs, each start in ``[0, n/k)``, each
    block server in ``[0, n)``, and each server's memory (module docstring) at most
    ``server_memory_bytes``.
    """
    out = _structure_violations(workload, n, strategy)
    if out:
        return out
    cap = float(workload.server_memory_bytes)
    mem = server_memory(workload, n, strategy)
    for j in np.flatnonzero(mem > cap * (1 + MEMORY_RTOL)):
        out.append(f"server {int(j)}: memory {mem[j]:.6g} bytes exceeds server_memory_bytes {cap:.6g}")
    return out


# ----------------------------------------------------------------------------------------------
def unit_servers(n: int, k: int, s: int) -> np.ndarray:
    """Server holding each of the n batch units ``[t B/n, (t+1) B/n)`` for a layer at (k, s)."""
    g = n // k
    t = np.arange(n)
    return s + (t // g) * g


def strategy_demand(
    workload: Workload, n: int, strategy: Strategy
) -> tuple[tuple[AllReduceGroup, ...], np.ndarray, np.ndarray]:
    """The demand and compute a strategy induces (definitions in the module docstring).

    Parameters
    ----------
    workload : Workload
    n : int
        Number of servers.
    strategy : Strategy
        Must pass :func:`validate_strategy` apart from memory (memory does not change traffic).

    Returns
    -------
    allreduce : tuple of AllReduceGroup
        One group per distinct coset with >= 2 members and > 0 bytes (bytes summed over its layers).
    mp : numpy.ndarray, shape (n, n)
        ``mp[i, j]`` = model-parallel bytes from server i to server j per iteration; zero diagonal.
    compute_s : numpy.ndarray, shape (n,)
        Compute seconds per server per iteration.

    Raises
    ------
    ValueError
        If the strategy does not fit the workload (wrong lengths, degree, start or server).
    """
    allreduce, (src, dst, size), compute = strategy_traffic(workload, n, strategy)
    mp = np.zeros((n, n))
    mp[src, dst] = size
    return allreduce, mp, compute


def strategy_traffic(
    workload: Workload, n: int, strategy: Strategy
) -> tuple[tuple[AllReduceGroup, ...], tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """:func:`strategy_demand` with the model-parallel bytes as pairs ``(src, dst, bytes)`` sorted by
    ``src * n + dst`` (no diagonal, no zero), not an n x n matrix: at n = 16,384 the matrix is 2 GiB
    for a few thousand pairs. Each pair's sum adds the same terms in the same order as the matrix
    would (``np.bincount`` adds in order of occurrence, like ``np.add.at``)."""
    bad = _structure_violations(workload, n, strategy)
    if bad:
        raise ValueError(
            "invalid strategy: " + "; ".join(bad[:5]) + (f" (and {len(bad) - 5} more)" if len(bad) > 5 else "")
        )
    layers = workload.layers
    degree = [int(k) for k in strategy.layer_degree]
    start = [int(s) for s in strategy.layer_start]

    # AllReduce: one group per distinct coset; dict keeps first-appearance order.
    groups: dict[tuple[int, ...], float] = {}
    for i, layer in enumerate(layers):
        if degree[i] >= 2 and float(layer.param_bytes) > 0:
            members = coset(n, degree[i], start[i])
            groups[members] = groups.get(members, 0.0) + float(layer.param_bytes)
    allreduce = tuple(AllReduceGroup(members=m, bytes=b) for m, b in groups.items())

    sends: list[tuple[np.ndarray, np.ndarray, float]] = []  # (from, to, bytes each), in order
    units = [None] * len(layers)

    def layer_servers(i: int) -> np.ndarray:
        if units[i] is None:
            units[i] = unit_servers(n, degree[i], start[i])
        return units[i]

    # Resharding between consecutive layers: unit t moves from its producer's server to its
    # consumer's server, activation_bytes / n per unit; gradients travel back the same way.
    for i in range(len(layers) - 1):
        act = float(layers[i].activation_bytes)
        if act == 0 or (degree[i], start[i]) == (degree[i + 1], start[i + 1]):
            continue
        src, dst = layer_servers(i), layer_servers(i + 1)
        sends += [(src, dst, act / n), (dst, src, act / n)]
    # Embedding lookups: the block's server sends each consumer replica its share, and gets the
    # gradients of the same rows back.
    for b, block in enumerate(workload.blocks):
        size = float(block.lookup_bytes)
        if size == 0:
            continue
        j = np.full(n, int(strategy.block_server[b]))
        dst = layer_servers(block.consumer)
        sends += [(j, dst, size / n), (dst, j, size / n)]
    pairs = _summed_pairs(sends, n)

    compute = np.zeros(n)
    for i in range(len(layers)):
        compute[start[i] :: n // degree[i]] += workload.layer_time(i, degree[i])
    for b, block in enumerate(workload.blocks):
        compute[int(strategy.block_server[b])] += float(block.compute_s)
    return allreduce, pairs, compute


def _summed_pairs(sends: list[tuple[np.ndarray, np.ndarray, float]], n: int):
    """The bytes of ``sends`` summed per ``(from, to)`` pair in order of occurrence, self-sends dropped."""
    if not sends:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    key = np.concatenate([a.astype(np.int64) * n + b for a, b, _ in sends])
    size = np.concatenate([np.full(a.size, v) for a, _, v in sends])
    keys, inverse = np.unique(key, return_inverse=True)
    total = np.bincount(inverse.ravel(), weights=size, minlength=keys.size)
    keep = (keys // n != keys % n) & (total != 0)
    return keys[keep] // n, keys[keep] % n, total[keep]


def strategy_to_demand(workload: Workload, n: int, strategy: Strategy) -> Demand:
    """The strategy's traffic as a :class:`~topoopt_ilp.core.instance.Demand` (MP as sparse pairs), for
    the topology methods and the evaluator. The compute vector is not part of a Demand."""
    allreduce, pairs, _ = strategy_traffic(workload, n, strategy)
    return Demand(allreduce=allreduce, mp=mp_pair_tuples(pairs))


def mp_pair_tuples(pairs: tuple[np.ndarray, np.ndarray, np.ndarray]) -> tuple[tuple[int, int, float], ...]:
    """``(src, dst, bytes)`` arrays as a :class:`~topoopt_ilp.core.instance.Demand`'s ``mp`` tuples."""
    src, dst, size = pairs
    return tuple(zip(src.tolist(), dst.tolist(), size.tolist()))


# ----------------------------------------------------------------------------------------------
def strategy_to_dict(strategy: Strategy) -> dict:
    """JSON form (the ``placement`` of a solution): three integer lists."""
    return {
        "layer_degree": [int(v) for v in strategy.layer_degree],
        "layer_start": [int(v) for v in strategy.layer_start],
        "block_server": [int(v) for v in strategy.block_server],
    }


def parse_strategy(data: Any, workload: Workload, n: int, path: str = "placement") -> Strategy:
    """Read :func:`strategy_to_dict`'s form and check it (:class:`InstanceError` on any violation,
    memory included)."""
    if not isinstance(data, Mapping):  # a dict, or a Solution's read-only placement
        raise InstanceError(f"expected an object, got {type_name(data)}", field=path)
    allowed = {"layer_degree", "layer_start", "block_server"}
    unknown = sorted(set(data) - allowed, key=str)
    if unknown:
        raise InstanceError(f"unknown key {brief(unknown[0])} (allowed: {', '.join(sorted(allowed))})", field=path)
    for key in ("layer_degree", "layer_start"):
        if key not in data:
            raise InstanceError(f"missing required key {brief(key)}", field=path)
    values = {}
    for key in allowed:
        v = data.get(key, [])
        if not isinstance(v, list) or not all(_is_int(x) for x in v):
            raise InstanceError("expected a list of integers", field=f"{path}.{key}")
        values[key] = tuple(int(x) for x in v)
    strategy = Strategy(**values)
    bad = validate_strategy(workload, n, strategy)
    if bad:
        raise InstanceError(
            bad[0] + (f" (and {len(bad) - 1} more problem(s) of the placement)" if len(bad) > 1 else ""), field=path
        )
    return strategy
