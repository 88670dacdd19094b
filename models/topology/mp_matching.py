"""Exact model-parallel (MP) links: a maximum-weight b-matching with diminishing returns.

TopoOpt spends ``d_MP`` ports per server on direct links for the MP traffic by running ``d_MP``
rounds of maximum-weight matching, discounting a pair's demand to ``T / (c + 1)`` once it has ``c``
links (:func:`topoopt_ilp.heuristic.repeated_matching`). This module solves the problem those rounds
approximate, exactly, and reports the heuristic's gap against it.

Definition of "directly carried bytes" (the objective of both, so the two are comparable):
the weight of the unordered pair {i, j} is ``w_ij = T_ij + T_ji`` (a full-duplex link serves both
directions), and ``c`` parallel links between i and j are worth ``w_ij * (1 + 1/2 + ... + 1/c)``:
the k-th link adds ``w_ij / k``, exactly the discounted weight the k-th matching round sees
(``T / (c + 1)`` with ``c = k - 1`` links already present). The value is concave in ``c``, so the MILP
can use one binary per (pair, k) with weight ``w_ij / k``: an optimum always takes a pair's unit
binaries in order of k (the ordering rows below only remove symmetric copies).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from topoopt_ilp.errors import InputError
from topoopt_ilp.heuristic import repeated_matching
from topoopt_ilp.models.common import ExactOptions, check_backend, run_model, solution_status
from topoopt_ilp.solvers import LinearModel, ModelBuilder, VarBlock

__all__ = [
    "MPMatchingModel",
    "MPMatchingResult",
    "build_mp_matching_model",
    "solve_mp_matching",
    "matching_value",
    "mp_matching_gap",
]


@dataclass(frozen=True, eq=False)
class MPMatchingModel:
    """The built model: pairs ``(i[p], j[p])`` with weight ``w[p]``; ``x[p, k]`` is the (k+1)-th link of pair p."""

    model: LinearModel
    n: int
    b: int
    i: np.ndarray
    j: np.ndarray
    w: np.ndarray
    x: VarBlock


@dataclass(frozen=True)
class MPMatchingResult:
    """Exact MP links: ``links`` (symmetric n x n counts, row sums <= b) and their carried-bytes value."""

    status: str
    value: float | None
    bound: float | None
    gap: float | None
    links: np.ndarray | None
    backend: str
    wall_time_s: float


def _pairs(T: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    A = np.asarray(T, dtype=float)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise InputError("the MP traffic matrix must be square")
    if not np.isfinite(A).all() or (A < 0).any():
        raise InputError("the MP traffic matrix must be finite and non-negative")
    S = A + A.T
    i, j = np.nonzero(np.triu(S, k=1) > 0)
    return i.astype(np.int64), j.astype(np.int64), S[i, j]


def matching_value(T: np.ndarray, links: np.ndarray) -> float:
    """Directly carried bytes of a link matrix: ``sum_{i<j} (T_ij + T_ji) * H(links_ij)`` with
    ``H(c) = 1 + 1/2 + ... + 1/c`` (module docstring)."""
    i, j, w = _pairs(T)
    c = np.asarray(links, dtype=np.int64)[i, j]
    cmax = int(c.max(initial=0))
    harmonic = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, cmax + 1))]) if cmax else np.zeros(1)
    return float(w @ harmonic[c])


# Data:      n servers, b MP ports per server, pairs p = {i, j} with weight w_p = T_ij + T_ji > 0;
#            K = b parallel links allowed per pair (1 without multi-links).
# Variables: x[p, k] in {0, 1}: the pair has at least k+1 links (k = 0..K-1).
# Constraints:
#   degree:   sum_{p ∋ v} sum_k x[p, k] <= b            for every server v
#   order:    x[p, k] <= x[p, k-1]                       (symmetry only: weights decrease in k)
# Objective: maximise sum_{p,k} w_p / (k + 1) * x[p, k]   (carried bytes, harmonic discount).
def build_mp_matching_model(T: np.ndarray, b: int, *, multi_links: bool = True) -> MPMatchingModel:
    """Build the exact b-matching MILP of MP traffic ``T`` (bytes i -> j) with ``b`` ports per server."""
    n = int(np.asarray(T).shape[0])
    if int(b) != b or b < 0:
        raise InputError(f"b must be a non-negative integer, got {b}")
    b = int(b)
    i, j, w = _pairs(T)
    P = i.size
    K = max(1, b if multi_links else 1)
    builder = ModelBuilder(name=f"mp_matching_n{n}_b{b}")
    x = builder.add_variables((P, K), ub=1, kind="binary", name="x")
    xi = x.index  # (P, K)
    rows = np.concatenate([np.repeat(i, K), np.repeat(j, K)])
    cols = np.concatenate([xi.ravel(), xi.ravel()])
    builder.add_constraints(rows, cols, 1.0, ub=np.full(n, float(b)), name="degree")
    if K > 1:
        m = P * (K - 1)
        r = np.arange(m)
        builder.add_constraints(
            np.concatenate([r, r]),
            np.concatenate([xi[:, 1:].ravel(), xi[:, :-1].ravel()]),
            np.concatenate([np.ones(m), -np.ones(m)]),
            ub=np.zeros(m),
            name="order",
        )
    coef = (w[:, None] / np.arange(1, K + 1)[None, :]).ravel()
    builder.set_objective(xi.ravel(), coef, sense="maximize")
    return MPMatchingModel(builder.build(), n, b, i, j, w, x)


def solve_mp_matching(
    T: np.ndarray, b: int, options: ExactOptions | None = None, *, multi_links: bool = True
) -> MPMatchingResult:
    """Solve the exact MP b-matching (see :func:`build_mp_matching_model`)."""
    options = options or ExactOptions(warm_start="none")
    started = time.perf_counter()
    check_backend(options, continuous=False)
    mm = build_mp_matching_model(T, b, multi_links=multi_links)
    res = run_model(mm.model, options)
    status = solution_status(res)
    links = None
    if res.values is not None:
        cnt = np.round(res.values[mm.x.index]).sum(axis=1).astype(np.int64)
        links = np.zeros((mm.n, mm.n), dtype=np.int64)
        links[mm.i, mm.j] = cnt
        links[mm.j, mm.i] = cnt
    value = matching_value(T, links) if links is not None else None
    return MPMatchingResult(status, value, res.bound, res.gap, links, res.backend, time.perf_counter() - started)


def mp_matching_gap(
    T: np.ndarray, b: int, *, seed: int = 0, method: str = "blossom", options: ExactOptions | None = None
) -> tuple[float, float, float]:
    """``(exact_value, heuristic_value, gap)`` for ``b`` MP ports per server.

    ``heuristic_value`` is :func:`matching_value` of ``repeated_matching(T, b)`` (TopoOpt's rounds,
    random completion links included: they count when they land on a demand pair), ``gap`` is
    ``(exact - heuristic) / exact`` (0 when exact is 0). Undirected links; ``n`` must be even (the
    heuristic completes every round to a perfect matching).
    """
    if np.shape(T)[0] % 2:  # the heuristic's rounds would leave a node out: not the same problem
        raise ValueError("the matching gap needs an even number of servers (perfect matching rounds)")
    res = solve_mp_matching(T, b, options)
    if res.status != "optimal" or res.value is None:
        raise RuntimeError(f"the exact b-matching did not solve to optimality ({res.status})")
    M = repeated_matching(np.asarray(T, dtype=float), b, seed=seed, method=method)
    heur = matching_value(T, M)
    exact = float(res.value)
    gap = (exact - heur) / exact if exact > 0 else 0.0
    return exact, heur, gap
