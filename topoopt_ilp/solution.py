"""The result of any method (design §6): a frozen :class:`Solution` with its topology and routing."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .routing import Routing

__all__ = ["Topology", "Solution", "STATUSES", "METHODS"]

STATUSES = ("optimal", "feasible", "infeasible", "unbounded", "no_solution", "error")
METHODS = ("heuristic", "exact", "alternating", "baseline", "given")


@dataclass(frozen=True, eq=False)
class Topology:
    """A link-count matrix ``matrix[i, j]`` (links i -> j; symmetric when undirected), plus the
    circulant jump set that generated it, when there is one. ``stated_directed``: what the solution
    file it was read from said about its links (``topology.directed``; None when not read from a
    file or not stated). The instance decides how links are read; the verifier compares the two."""

    matrix: np.ndarray
    jumps: tuple[int, ...] | None = None
    stated_directed: bool | None = None

    def __post_init__(self) -> None:
        m = np.array(self.matrix, dtype=np.int64)
        if m.ndim != 2 or m.shape[0] != m.shape[1]:
            raise ValueError("a topology matrix must be square")
        m.setflags(write=False)
        object.__setattr__(self, "matrix", m)
        if self.jumps is not None:
            object.__setattr__(self, "jumps", tuple(int(j) for j in self.jumps))

    @property
    def n(self) -> int:
        return int(self.matrix.shape[0])

    def links(self, directed: bool) -> list[tuple[int, int, int]]:
        """``[(i, j, count)]``; undirected topologies list each pair once, with i < j."""
        m = self.matrix if directed else np.triu(self.matrix, 1)
        i, j = np.nonzero(m)
        return [(int(a), int(b), int(c)) for a, b, c in zip(i, j, m[i, j])]

    @classmethod
    def from_links(cls, n: int, links, directed: bool, jumps=None) -> "Topology":
        m = np.zeros((n, n), dtype=np.int64)
        for i, j, c in links:
            m[i, j] += c
            if not directed:
                m[j, i] += c
        return cls(m, jumps)


@dataclass(frozen=True, eq=False)
class Solution:
    """What a method produced. ``metrics`` are the evaluator's, never the method's own claims."""

    status: str
    method: str
    topology: Topology | None
    routing: Routing = field(default_factory=Routing)
    placement: dict[str, Any] | None = None
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    wall_time_s: float = 0.0
    backend: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")
        for name in ("objective", "bound", "gap"):
            v = getattr(self, name)
            if v is not None and not isinstance(v, (int, float)):
                raise ValueError(f"{name} must be a number or None")
            if isinstance(v, float) and math.isnan(v):
                object.__setattr__(self, name, None)

    @property
    def has_solution(self) -> bool:
        return self.status in ("optimal", "feasible") and self.topology is not None

    def with_metrics(self, metrics: dict[str, Any]) -> "Solution":
        return replace(self, metrics=dict(metrics))
