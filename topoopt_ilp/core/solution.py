"""The result of any method (docs/guide/python-api.md): a frozen :class:`Solution` with its topology and routing."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import numpy as np

from topoopt_ilp.core.checks import brief
from topoopt_ilp.core.nxgraph import graph_links, topology_graph
from topoopt_ilp.core.routes import Routing
from topoopt_ilp.errors import InputError

__all__ = ["Topology", "Solution", "matrix_links", "STATUSES", "METHODS", "METHODS_WITHOUT_BOUNDS"]

STATUSES = ("optimal", "feasible", "infeasible", "unbounded", "no_solution", "error")
METHODS = ("heuristic", "exact", "alternating", "baseline", "given")
#: The methods that search or score but prove nothing: a solution of theirs states no bound, so it is
#: never ``optimal``. The exact method proves its bounds; a baseline may solve its own architecture's
#: model exactly (the OCS permutations) and states that model's bound; another tool's solver speaks for itself.
METHODS_WITHOUT_BOUNDS = ("heuristic", "alternating", "given")

#: How far a link count may be from an integer (a float matrix from a solver) before it is refused.
INTEGER_TOLERANCE = 1e-9


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
        object.__setattr__(self, "matrix", _link_counts(self.matrix))
        if self.jumps is not None:
            jumps = self.jumps.tolist() if isinstance(self.jumps, np.ndarray) else self.jumps
            if (
                isinstance(jumps, (str, bytes))
                or not isinstance(jumps, (list, tuple, range))
                or any(isinstance(j, bool) or not isinstance(j, (int, np.integer)) for j in jumps)
            ):
                raise InputError("expected a sequence of integers or None", field="topology.jumps")
            object.__setattr__(self, "jumps", tuple(int(j) for j in jumps))

    @property
    def n(self) -> int:
        return int(self.matrix.shape[0])

    def links(self, directed: bool) -> list[tuple[int, int, int]]:
        """``[(i, j, count)]``; undirected topologies list each pair once, with i < j."""
        return matrix_links(self.matrix, directed)

    @classmethod
    def from_links(cls, n: int, links, directed: bool, jumps=None) -> Topology:
        """The topology of ``[(i, j, count)]`` links (undirected: each pair once, either way round;
        repeated pairs add up)."""
        arr = np.asarray(list(links), dtype=np.int64).reshape(-1, 3)
        i, j, c = arr[:, 0], arr[:, 1], arr[:, 2]
        if ((i < 0) | (i >= n) | (j < 0) | (j >= n)).any():
            k = int(np.flatnonzero((i < 0) | (i >= n) | (j < 0) | (j >= n))[0])
            raise InputError(f"server ids must be 0..{n - 1}, got {arr[k].tolist()}", field="topology.links")
        m = np.zeros((n, n), dtype=np.int64)
        np.add.at(
            m.reshape(-1), i * n + j, c
        )  # flat: one pass over the links (a Python loop took 2 s at 16,384 servers)
        if not directed:
            np.add.at(m.reshape(-1), j * n + i, c)
        m.setflags(write=False)  # owned and frozen: the Topology keeps it without a copy
        return cls(m, jumps)

    def to_networkx(
        self, *, directed: bool, bandwidth_gbps: float | None = None, metrics: Mapping[str, Any] | None = None
    ):
        """The topology as a :class:`networkx.Graph` (``directed=False``) or :class:`networkx.DiGraph`,
        nodes ``0..n-1``, one edge per connected pair with attribute ``count`` (parallel links) and,
        given the per-link ``bandwidth_gbps``, ``bandwidth_gbps`` (count x bandwidth). ``metrics``: per-arc
        n x n arrays added as edge attributes of their name (an undirected edge takes the larger of its
        two directions); :func:`topoopt_ilp.evaluation.link_metrics.solution_graph` adds the evaluator's
        ``load`` and ``utilisation``. See docs/guide/networkx.md."""
        return topology_graph(self.matrix, directed=directed, bandwidth_gbps=bandwidth_gbps, metrics=metrics)

    @classmethod
    def from_networkx(cls, graph, n: int | None = None) -> Topology:
        """The topology of a networkx graph: directed links for a directed graph, undirected ones
        otherwise. Nodes must be the integers ``0..n-1`` (``n`` defaults to the number of nodes); a
        pair's links are its ``count`` attribute (default 1), summed over the parallel edges of a
        multigraph. Self-loops, counts that are not integers ``1..1024`` and unknown nodes raise
        :class:`InputError` naming the edge or node."""
        n, links = graph_links(graph, n)
        return cls.from_links(n, ((i, j, c) for (i, j), c in links.items()), graph.is_directed())


def matrix_links(matrix: np.ndarray, directed: bool) -> list[tuple[int, int, int]]:
    """The links of a link-count matrix as :meth:`Topology.links` lists them, without making a
    :class:`Topology` of it (which copies the matrix)."""
    i, j = np.nonzero(matrix)  # no n x n temporary (np.triu would copy the matrix)
    if not directed:
        i, j = i[i < j], j[i < j]
    return list(zip(i.tolist(), j.tolist(), matrix[i, j].tolist()))


def _link_counts(matrix: object) -> np.ndarray:
    """``matrix`` as a read-only square int64 array of link counts >= 0. A float matrix is accepted
    when every value is within :data:`INTEGER_TOLERANCE` of an integer (and rounded, not truncated)."""
    field_ = "topology.matrix"
    try:
        a = np.asarray(matrix)
    except (TypeError, ValueError) as exc:  # e.g. ragged rows
        raise InputError(f"expected a square matrix of link counts: {exc}", field=field_) from None
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise InputError(f"a topology matrix must be square, got shape {a.shape}", field=field_)
    if a.dtype == np.int64 and a.base is None and not a.flags.writeable:
        m = a  # frozen by the array's owner (the heuristic's result): nothing can change it, no copy
    elif a.dtype == bool or np.issubdtype(a.dtype, np.integer):
        m = a.astype(np.int64)
    elif np.issubdtype(a.dtype, np.floating):
        bad = np.argwhere(~np.isfinite(a) | (np.abs(a - np.round(a)) > INTEGER_TOLERANCE))
        if bad.size:
            i, j = map(int, bad[0])
            raise InputError(f"link counts must be integers, got {brief(float(a[i, j]))} at [{i}, {j}]", field=field_)
        m = np.round(a).astype(np.int64)
    else:
        raise InputError(f"expected a matrix of integer link counts, got dtype {a.dtype}", field=field_)
    if m.size and m.min() < 0:
        i, j = map(int, np.argwhere(m < 0)[0])
        raise InputError(f"link counts must be >= 0, got {m[i, j]} at [{i}, {j}]", field=field_)
    m.setflags(write=False)
    return m


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
    #: A job instance's split and rank-to-server mapping as the method chose them
    #: (``{"parallelism": {"tp", "pp", "dp", "ep", "micro_batch"}, "server_map": [...]}``); the
    #: evaluator and the verifier score the solution on the instance's job with this choice
    #: (:func:`topoopt_ilp.core.instance.with_job_choice`). None: the instance's own.
    job: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.status, str) or self.status not in STATUSES:
            raise InputError(
                f"unknown status {brief(self.status)}; choose one of {', '.join(STATUSES)}", field="status"
            )
        if not isinstance(self.method, str) or not self.method.strip():
            raise InputError(f"expected a method name (a non-empty string), got {brief(self.method)}", field="method")
        if self.topology is not None and not isinstance(self.topology, Topology):
            raise InputError(f"expected a Topology or None, got {type(self.topology).__name__}", field="topology")
        for name in ("objective", "bound", "gap"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise InputError(f"must be a number or None, got {type(v).__name__}", field=name)
            if isinstance(v, float) and math.isnan(v):
                object.__setattr__(self, name, None)
        for name in (
            "metrics",
            "details",
            "placement",
            "job",
        ):  # frozen like the dataclass (a copy: the caller's stays theirs)
            v = getattr(self, name)
            if v is not None:
                if not isinstance(v, Mapping):
                    raise InputError(f"expected a mapping, got {type(v).__name__}", field=name)
                object.__setattr__(self, name, MappingProxyType(dict(v)))

    @property
    def has_solution(self) -> bool:
        return self.status in ("optimal", "feasible") and self.topology is not None

    def with_metrics(self, metrics: dict[str, Any]) -> Solution:
        return replace(self, metrics=dict(metrics))
