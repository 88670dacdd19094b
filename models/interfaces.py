"""Interface assignment as an exact search: a proper edge colouring of an undirected multigraph with
``d`` colours, colour k being interface index k (one optical circuit switch per index).

With one OCS per interface index, the links on index k must join distinct servers in pairs: a
matching (a perfect matching when the cluster is regular). Some d-regular designs have such a
1-factorisation and some (every odd n, the Petersen graph) have none; when the constructive routes of
``topoopt_ilp.export.assignment`` find none, this model decides. Colours are interchangeable, so
the links of server 0 take the colours 0, 1, ... in order.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from topoopt_ilp.errors import InputError
from topoopt_ilp.models.common import ExactOptions, check_backend, run_model, solution_status
from topoopt_ilp.solvers import LinearModel, ModelBuilder, VarBlock

__all__ = ["ColouringModel", "ColouringResult", "build_colouring_model", "edge_colouring"]


@dataclass(frozen=True, eq=False)
class ColouringModel:
    model: LinearModel
    y: VarBlock  # (links, d)


@dataclass(frozen=True)
class ColouringResult:
    """``colours[e]``: the interface index of link e (None unless ``status`` is optimal or feasible)."""

    status: str
    colours: np.ndarray | None
    backend: str
    wall_time_s: float


def _checked_links(u: np.ndarray, v: np.ndarray, n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    u, v = np.asarray(u, dtype=np.int64).ravel(), np.asarray(v, dtype=np.int64).ravel()
    if u.shape != v.shape:
        raise InputError("link endpoint arrays differ in length")
    if int(d) != d or d < 1:
        raise InputError(f"d must be a positive integer, got {d}")
    if u.size and (min(u.min(), v.min()) < 0 or max(u.max(), v.max()) >= n):
        raise InputError(f"a link endpoint is outside 0..{n - 1}")
    if (u == v).any():
        raise InputError("a link joins a server to itself")
    return u, v


def _one_colour(b: ModelBuilder, y: VarBlock, links: int, d: int) -> None:
    """every link takes exactly one colour: sum_k y[e, k] = 1"""
    b.add_constraints(np.repeat(np.arange(links), d), y.index.ravel(), 1.0, lb=1.0, ub=1.0, count=links, name="one")


def _matching(b: ModelBuilder, y: VarBlock, u: np.ndarray, v: np.ndarray, n: int, d: int) -> None:
    """each server uses colour k at most once: sum_{e at s} y[e, k] <= 1"""
    e = np.arange(u.size)
    rows, cols = [], []
    for end in (u, v):
        rows.append((end[:, None] * d + np.arange(d)[None, :]).ravel())
        cols.append(y.index[e].ravel())
    b.add_constraints(np.concatenate(rows), np.concatenate(cols), 1.0, ub=1.0, count=n * d, name="matching")


def _server_zero_order(u: np.ndarray, v: np.ndarray, d: int) -> np.ndarray:
    """upper bounds that break the colours' symmetry: the t-th link of server 0 takes colour t"""
    ub = np.ones((u.size, d))
    for t, e in enumerate(np.flatnonzero((u == 0) | (v == 0))[:d]):
        ub[e, :] = 0.0
        ub[e, t] = 1.0
    return ub


# Data:      n servers, d colours (interface indices), links e = {u_e, v_e} (a parallel link is its own e).
# Variables: y[e, k] in {0, 1}: link e uses interface k at both ends.
# Constraints:
#   one:       sum_k y[e, k] = 1                       for every link e
#   matching:  sum_{e : s in e} y[e, k] <= 1           for every server s and colour k
#   symmetry:  the t-th link of server 0 has colour t (colours are interchangeable)
# Objective: none (a feasibility problem); infeasible means the design has no d-edge-colouring.
def build_colouring_model(u, v, n: int, d: int) -> ColouringModel:
    """Build the d-edge-colouring model of the links ``(u[e], v[e])`` on ``n`` servers."""
    u, v = _checked_links(u, v, n, d)
    b = ModelBuilder(name=f"interface_colouring_n{n}_d{d}")
    y = b.add_variables((u.size, d), ub=_server_zero_order(u, v, d).ravel(), kind="binary", name="y")
    _one_colour(b, y, u.size, d)
    _matching(b, y, u, v, n, d)
    b.set_objective([], [])
    return ColouringModel(b.build(), y)


def edge_colouring(u, v, n: int, d: int, options: ExactOptions | None = None) -> ColouringResult:
    """Solve :func:`build_colouring_model` (CP-SAT by default): ``infeasible`` when the links have no
    proper d-edge-colouring, ``no_solution`` when the time limit decided nothing."""
    options = options or ExactOptions(backend="cpsat", warm_start="none")
    started = time.perf_counter()
    check_backend(options, continuous=False)
    cm = build_colouring_model(u, v, n, d)
    res = run_model(cm.model, options)
    status = solution_status(res)
    colours = None
    if status in ("optimal", "feasible") and res.values is not None:
        colours = np.round(res.values[cm.y.index]).astype(np.int64).argmax(axis=1)
    return ColouringResult(status, colours, res.backend, time.perf_counter() - started)
