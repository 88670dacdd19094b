"""Routing and AllReduce ring representations, stored as padded numpy arrays.

Three containers describe how a solution moves its traffic; all are immutable and array-backed
so that routings for thousands of servers stay compact and loads can be computed vectorized:

* :class:`RingSet`   - the ring orders chosen for each AllReduce group (AllReduce is *mutable*: the
  order of its members on the ring, and the split of its bytes over several rings, are decisions).
* :class:`PathSet`   - explicit node paths, each carrying a fraction of the traffic of its
  (first node, last node) pair.
* :class:`OffsetRoutes` - translation-invariant routes on a circulant: traffic from ``s`` to
  ``(s + offset) mod n`` follows the jump sequence ``s -> s+j1 -> s+j1+j2 -> ...`` (CoinChangeMod).

A :class:`Routing` bundles the three. Explicit paths take precedence over offset routes for a pair.
Padding value is ``-1`` for node and member arrays and ``0`` for jump arrays (a jump is never 0).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["PathSet", "OffsetRoutes", "RingSet", "Routing", "pad_rows"]


def pad_rows(rows: Sequence[Sequence[int]], fill: int) -> np.ndarray:
    """Stack integer sequences of different lengths into one 2-D array padded with ``fill``."""
    width = max((len(r) for r in rows), default=0)
    out = np.full((len(rows), width), fill, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


def _frozen(a: np.ndarray, dtype) -> np.ndarray:
    a = np.ascontiguousarray(a, dtype=dtype)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class PathSet:
    """Explicit paths. Row ``p`` of ``nodes`` is a node sequence padded with -1; ``fraction[p]`` is
    the share of the pair ``(nodes[p,0], last node)``'s traffic it carries."""

    nodes: np.ndarray  # (P, L) int64, -1 padded
    fraction: np.ndarray  # (P,) float64

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "nodes", _frozen(np.atleast_2d(self.nodes) if len(self.nodes) else np.zeros((0, 0)), np.int64)
        )
        object.__setattr__(self, "fraction", _frozen(self.fraction, np.float64))
        if self.nodes.shape[0] != self.fraction.shape[0]:
            raise ValueError("PathSet: nodes and fraction differ in length")

    @classmethod
    def from_lists(cls, paths: Iterable[tuple[Sequence[int], float]]) -> PathSet:
        paths = list(paths)
        return cls(pad_rows([p for p, _ in paths], -1), np.array([f for _, f in paths], dtype=float))

    @classmethod
    def empty(cls) -> PathSet:
        return cls(np.zeros((0, 0), dtype=np.int64), np.zeros(0))

    def __len__(self) -> int:
        return int(self.fraction.shape[0])

    @property
    def hops(self) -> np.ndarray:
        """Number of links of each path."""
        return (self.nodes >= 0).sum(axis=1) - 1

    @property
    def src(self) -> np.ndarray:
        return self.nodes[:, 0] if len(self) else np.zeros(0, dtype=np.int64)

    @property
    def dst(self) -> np.ndarray:
        if not len(self):
            return np.zeros(0, dtype=np.int64)
        return self.nodes[np.arange(len(self)), self.hops]

    def to_lists(self) -> list[tuple[list[int], float]]:
        return [([v for v in row if v >= 0], f) for row, f in zip(self.nodes.tolist(), self.fraction.tolist())]


@dataclass(frozen=True, eq=False)
class OffsetRoutes:
    """Translation-invariant circulant routes: pair (s, (s+offset[r]) % n) sends ``fraction[r]`` of its
    traffic along the jump sequence ``jumps[r]`` (0-padded). Jumps are residues mod n (n-j means -j)."""

    offset: np.ndarray  # (R,) int64
    jumps: np.ndarray  # (R, H) int64, 0 padded
    fraction: np.ndarray  # (R,) float64

    def __post_init__(self) -> None:
        object.__setattr__(self, "offset", _frozen(self.offset, np.int64))
        object.__setattr__(
            self, "jumps", _frozen(np.atleast_2d(self.jumps) if len(self.offset) else np.zeros((0, 0)), np.int64)
        )
        object.__setattr__(self, "fraction", _frozen(self.fraction, np.float64))
        if not (len(self.offset) == self.jumps.shape[0] == len(self.fraction)):
            raise ValueError("OffsetRoutes: offset, jumps and fraction differ in length")

    @classmethod
    def from_lists(cls, routes: Iterable[tuple[int, Sequence[int], float]]) -> OffsetRoutes:
        routes = list(routes)
        return cls(
            np.array([o for o, _, _ in routes], dtype=np.int64),
            pad_rows([j for _, j, _ in routes], 0),
            np.array([f for _, _, f in routes], dtype=float),
        )

    @classmethod
    def empty(cls) -> OffsetRoutes:
        return cls(np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.int64), np.zeros(0))

    def __len__(self) -> int:
        return int(self.offset.shape[0])

    @property
    def hops(self) -> np.ndarray:
        return (self.jumps != 0).sum(axis=1)

    def to_lists(self) -> list[tuple[int, list[int], float]]:
        return [
            (o, [j for j in row if j != 0], f)
            for o, row, f in zip(self.offset.tolist(), self.jumps.tolist(), self.fraction.tolist())
        ]


@dataclass(frozen=True, eq=False)
class RingSet:
    """AllReduce ring choices: ring ``r`` serves group ``group[r]`` (index into the instance's
    ``demand.allreduce``), visits ``order[r]`` (-1 padded, each member once) and carries
    ``fraction[r]`` of that group's bytes. Fractions of one group sum to 1."""

    group: np.ndarray  # (K,) int64
    order: np.ndarray  # (K, kmax) int64, -1 padded
    fraction: np.ndarray  # (K,) float64

    def __post_init__(self) -> None:
        object.__setattr__(self, "group", _frozen(self.group, np.int64))
        object.__setattr__(
            self, "order", _frozen(np.atleast_2d(self.order) if len(self.group) else np.zeros((0, 0)), np.int64)
        )
        object.__setattr__(self, "fraction", _frozen(self.fraction, np.float64))
        if not (len(self.group) == self.order.shape[0] == len(self.fraction)):
            raise ValueError("RingSet: group, order and fraction differ in length")

    @classmethod
    def from_lists(cls, rings: Iterable[tuple[int, Sequence[int], float]]) -> RingSet:
        rings = list(rings)
        return cls(
            np.array([g for g, _, _ in rings], dtype=np.int64),
            pad_rows([o for _, o, _ in rings], -1),
            np.array([f for _, _, f in rings], dtype=float),
        )

    @classmethod
    def empty(cls) -> RingSet:
        return cls(np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.int64), np.zeros(0))

    def __len__(self) -> int:
        return int(self.group.shape[0])

    def to_lists(self) -> list[tuple[int, list[int], float]]:
        return [
            (g, [v for v in row if v >= 0], f)
            for g, row, f in zip(self.group.tolist(), self.order.tolist(), self.fraction.tolist())
        ]


@dataclass(frozen=True, eq=False)
class Routing:
    """How a solution routes its traffic. Any part may be empty; pairs with traffic that neither
    ``paths`` nor ``offset_routes`` covers are an error for ``given`` routing in the evaluator."""

    rings: RingSet = field(default_factory=RingSet.empty)
    paths: PathSet = field(default_factory=PathSet.empty)
    offset_routes: OffsetRoutes = field(default_factory=OffsetRoutes.empty)
