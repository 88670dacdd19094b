"""Collective communication as data: which collective, over which servers, how many bytes in how many
chunks (:class:`Collective`), the alpha-beta link model (:class:`LinkModel`), and a chunk-level
schedule (:class:`CollectiveSchedule`). Docs: docs/guide/collectives.md.

Conventions (every producer and every checker follows them; each computes them for itself):

* ``bytes`` is the buffer size M of one server as NCCL counts it: the AllGather output, the
  ReduceScatter input, the AllReduce vector, the broadcast message, the all-to-all send buffer.
* With P participating servers (``servers``, in the order given) and ``chunks`` chunks per server,
  chunk ids are:

  - allgather, reducescatter, allreduce: ``c = i * chunks + j`` (``i`` the position of a server in
    ``servers``, ``0 <= j < chunks``), M / (P chunks) bytes each; chunk c is server ``servers[i]``'s
    shard (its input for AllGather, the part it owns at the end of ReduceScatter);
  - broadcast: ``c = j``, the root's message in ``chunks`` pieces of M / chunks bytes;
  - alltoall: ``c = (i * P + i2) * chunks + j``, from ``servers[i]`` to ``servers[i2]``, M / (P chunks)
    bytes each (the pieces a server sends itself never move).

* A step lasts ``alpha_s + chunk_bytes / bandwidth_Bps``; in one step a link carries one chunk per
  parallel link (the topology's link count), in its direction.
* Heterogeneous links (:attr:`LinkModel.arcs` gives some directions their own alpha and bandwidth):
  a chunk takes ``t_a = alpha_a + chunk_bytes / bandwidth_a`` on arc a; the step lasts
  ``tau = min t_a`` over the topology's arcs, and a send on arc a started in step s occupies one of
  its parallel links in steps s .. s + k_a - 1 and arrives at the end of step s + k_a - 1, with
  ``k_a = ceil(t_a / tau - 1e-9)`` (the 1e-9 absorbs rounding: equal times give one step). With one
  rate on every arc, k_a = 1 and tau is the single step length above.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from topoopt_ilp.core.checks import MAX_BYTES, as_choice, as_int, as_number
from topoopt_ilp.errors import InputError

__all__ = ["COLLECTIVE_KINDS", "REDUCTIONS", "Collective", "LinkModel", "Send", "CollectiveSchedule"]

#: Slack in ``k_a = ceil(t_a / tau - STEPS_SLACK)``: a ratio that is a whole number up to rounding counts as one.
STEPS_SLACK = 1e-9

COLLECTIVE_KINDS = ("allgather", "reducescatter", "allreduce", "alltoall", "broadcast")
#: The collectives whose result is a sum: their sends may carry partial sums.
REDUCTIONS = ("reducescatter", "allreduce")
#: Most chunks a collective may have: the exact model has chunks x links x steps columns.
MAX_CHUNKS = 1_000_000


@dataclass(frozen=True)
class Collective:
    """One collective operation (conventions in the module docstring). ``root``: the broadcast's
    source (default the first server); None for the other kinds."""

    kind: str
    servers: tuple[int, ...]
    bytes: float
    chunks: int = 1
    root: int | None = None

    def __post_init__(self) -> None:
        as_choice(self.kind, "collective.kind", COLLECTIVE_KINDS)
        if isinstance(self.servers, (str, bytes)) or not hasattr(self.servers, "__iter__"):
            raise InputError("expected a sequence of server ids", field="collective.servers")
        servers = tuple(as_int(s, f"collective.servers[{k}]", low=0) for k, s in enumerate(self.servers))
        if len(servers) < 2:
            raise InputError(f"a collective needs at least 2 servers, got {len(servers)}", field="collective.servers")
        if len(set(servers)) != len(servers):
            raise InputError("a server is listed twice", field="collective.servers")
        object.__setattr__(self, "servers", servers)
        object.__setattr__(self, "bytes", as_number(self.bytes, "collective.bytes", positive=True, high=MAX_BYTES))
        chunks = as_int(self.chunks, "collective.chunks", low=1, high=MAX_CHUNKS)
        object.__setattr__(self, "chunks", chunks)
        if self.kind == "broadcast":
            root = servers[0] if self.root is None else as_int(self.root, "collective.root", low=0)
            if root not in servers:
                raise InputError(f"the root {root} is not one of the servers", field="collective.root")
            object.__setattr__(self, "root", root)
        elif self.root is not None:
            raise InputError(f"only a broadcast has a root, not {self.kind}", field="collective.root")
        if self.chunk_count > MAX_CHUNKS:
            raise InputError(
                f"{self.chunk_count} chunks, at most {MAX_CHUNKS} are supported", field="collective.chunks"
            )

    @property
    def chunk_count(self) -> int:
        """Number of chunk ids."""
        p = len(self.servers)
        return {"broadcast": self.chunks, "alltoall": p * p * self.chunks}.get(self.kind, p * self.chunks)

    @property
    def chunk_bytes(self) -> float:
        """Bytes of one chunk."""
        pieces = self.chunks if self.kind == "broadcast" else len(self.servers) * self.chunks
        return self.bytes / pieces


@dataclass(frozen=True)
class LinkModel:
    """The alpha-beta model of the links: ``alpha_s`` seconds per hop, ``bandwidth_Bps`` bytes per second
    per link in each direction (a pair with c parallel links has c times that). ``arcs``: directions
    with their own rate, ``(u, v, alpha_s, bandwidth_Bps)`` for u -> v (every parallel link of the
    pair); the other directions take the two defaults (conventions in the module docstring)."""

    alpha_s: float
    bandwidth_Bps: float
    arcs: tuple[tuple[int, int, float, float], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "alpha_s", as_number(self.alpha_s, "link.alpha_s", nonnegative=True))
        object.__setattr__(self, "bandwidth_Bps", as_number(self.bandwidth_Bps, "link.bandwidth_Bps", positive=True))
        if isinstance(self.arcs, (str, bytes)) or not hasattr(self.arcs, "__iter__"):
            raise InputError("expected a sequence of (u, v, alpha_s, bandwidth_Bps)", field="link.arcs")
        arcs, seen = [], set()
        for k, arc in enumerate(self.arcs):
            path = f"link.arcs[{k}]"
            if isinstance(arc, (str, bytes)) or not hasattr(arc, "__len__") or len(arc) != 4:
                raise InputError("expected (u, v, alpha_s, bandwidth_Bps)", field=path)
            u, v = as_int(arc[0], f"{path}[0]", low=0), as_int(arc[1], f"{path}[1]", low=0)
            if u == v or (u, v) in seen:
                raise InputError(f"{u} -> {v} is a self-loop or listed twice", field=path)
            seen.add((u, v))
            alpha = as_number(arc[2], f"{path}[2]", nonnegative=True)
            arcs.append((u, v, alpha, as_number(arc[3], f"{path}[3]", positive=True)))
        object.__setattr__(self, "arcs", tuple(sorted(arcs)))

    def step_s(self, chunk_bytes: float) -> float:
        """Length of one step that moves a chunk of ``chunk_bytes`` over one hop (the default rate)."""
        return self.alpha_s + chunk_bytes / self.bandwidth_Bps

    def arc_rates(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``(alpha[u, v], bandwidth[u, v])`` on ``n`` servers: the defaults, overridden by ``arcs``
        (an arc outside the n servers is ignored)."""
        alpha = np.full((n, n), self.alpha_s)
        bandwidth = np.full((n, n), self.bandwidth_Bps)
        for u, v, a, b in self.arcs:
            if u < n and v < n:
                alpha[u, v], bandwidth[u, v] = a, b
        return alpha, bandwidth

    def timing(self, matrix: np.ndarray, chunk_bytes: float) -> tuple[float, np.ndarray]:
        """``(tau, steps[u, v])`` on the topology ``matrix`` (module docstring): the step length and the
        steps a chunk takes on each arc (0 where there is no link). Every arc at the default rate:
        tau = :meth:`step_s`, one step each."""
        m = np.asarray(matrix)
        arcs = m > 0
        if not self.arcs:
            return self.step_s(chunk_bytes), arcs.astype(np.int64)
        alpha, bandwidth = self.arc_rates(m.shape[0])
        times = alpha + chunk_bytes / bandwidth
        if not np.isfinite(times[arcs]).all():
            raise InputError(f"a chunk of {chunk_bytes:.4g} bytes takes no finite time on some link", field="link.arcs")
        tau = float(times[arcs].min()) if arcs.any() else self.step_s(chunk_bytes)
        steps = np.where(arcs, np.maximum(1, np.ceil(times / tau - STEPS_SLACK)), 0).astype(np.int64)
        return tau, steps


@dataclass(frozen=True, order=True)
class Send:
    """Chunk ``chunk`` crosses the link ``src -> dst`` in step ``step`` (1-based); ``partial``: it carries
    the sender's partial sum of the chunk (reductions only), not a complete copy."""

    step: int
    chunk: int
    src: int
    dst: int
    partial: bool = False


@dataclass(frozen=True)
class CollectiveSchedule:
    """A chunk-level schedule: its sends, sorted by step, and the length of one step. ``steps``: the
    finish step claimed by its producer (0 when nothing needs to move)."""

    sends: tuple[Send, ...]
    step_s: float
    steps: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "sends", tuple(sorted(self.sends)))
        if not math.isfinite(self.step_s) or self.step_s < 0:
            raise InputError(f"step length must be a finite number >= 0, got {self.step_s}", field="schedule.step_s")
        as_int(self.steps, "schedule.steps", low=0)

    @property
    def finish_s(self) -> float:
        """The finish time it claims: steps x step length."""
        return self.steps * self.step_s
