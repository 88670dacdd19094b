"""Re-routing: the best routing of a fixed design's traffic on a fixed topology, by column generation.

The placement model and TopoOpt's heuristic route every pair over its shortest paths (split equally,
or by CoinChangeMod); the problem itself (docs/guide/evaluator.md) leaves the split over paths free. For a fixed
topology and a fixed traffic matrix (MP bytes plus every ring transfer), the routing that minimises
the busiest link's time is a linear program. Its arc-flow form (one commodity per source, the
evaluator's ``--routing optimal``) has sources x arcs variables: 131k at 128 servers of degree 8,
where HiGHS needs minutes. Its path form needs only the paths that carry flow at the optimum, and
finds them by pricing: one batch of Dijkstra runs per round.

# Data
#   arcs e = (tail_e, head_e) of X with capacity c_e = B X[e] bytes/s;
#   commodities q = (s_q, t_q) with d_q > 0 bytes (the design's traffic matrix; a pair's MP bytes and
#   its ring transfers are one commodity: a route is a pair's, whatever the bytes are);
#   P_q: the paths of q generated so far (first one shortest by hops).
# Variables
#   f_p >= 0   share of q's bytes on path p in P_q;   U >= 0   the busiest arc's busy time (s).
# Constraints
#   share     sum_{p in P_q} f_p = 1                              for every q   (dual pi_q)
#   capacity  sum_q d_q sum_{p in P_q, p through e} f_p <= c_e U   for every e   (dual -y_e, y_e >= 0)
# Objective
#   minimise U (times are in seconds scaled by 1 / U_0, U_0 the busiest arc of the starting routing,
#   so the LP's numbers are O(1)).
# Pricing and bound
#   A path p of q has reduced cost d_q len_y(p) - pi_q, so the shortest path of q under arc weights y
#   is the column to add when its length is below pi_q / d_q. Every y >= 0 with sum_e c_e y_e > 0
#   gives, by weak duality, U* >= sum_q d_q dist_y(s_q, t_q) / sum_e c_e y_e (route every byte on its
#   y-shortest path: no routing does better). The LP's duals are such a y, so each round gives an
#   upper bound (the LP's U, a routing) and a lower bound; the loop stops when they meet within
#   ``rel_gap``, when no path prices out (then the LP optimum is the optimum), or at the time limit.
# Detours
#   At the optimum many commodities have slack: a second LP over the generated paths fixes U at its
#   optimum and minimises the bytes x hops carried, so paths are no longer than the optimum needs
#   (fewer hops: a smaller latency term and a smaller volume).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra, shortest_path

from topoopt_ilp.solvers.highs import new_highs

__all__ = ["RoutingResult", "min_max_routing"]

#: The column-generation loop stops when (upper - lower) / upper is at most this (the two bounds of
#: the comment block); below ~1e-7 the LP's own tolerances decide.
DEFAULT_REL_GAP = 1e-6
#: Reduced costs above -this (relative to pi_q) are not negative: HiGHS's dual values are exact to
#: about its optimality tolerance (1e-7).
_PRICE_TOL = 1e-7
#: HiGHS's interior point without crossover for every master LP: its duals are central rather than a
#: vertex's, which steadies the prices: on dlrm-128-d8 it needed about a third of primal simplex's
#: rounds (docs/notes/routing-lps.md).
_LP_OPTIONS = {"solver": "ipm", "run_crossover": "off"}


@dataclass(frozen=True)
class RoutingResult:
    """A routing of ``demand`` on ``X``: per path its nodes and share of its pair's bytes; ``busy_s`` its
    busiest arc's time (s), ``bound_s`` a lower bound on that of every routing, ``proven`` when they
    meet within the requested gap."""

    paths: list[tuple[list[int], float]]
    busy_s: float
    bound_s: float
    proven: bool
    rounds: int
    columns: int
    wall_time_s: float


class _Arcs:
    """The arcs of ``X`` in CSR order, with a dense (tail, head) -> arc index."""

    def __init__(self, X: np.ndarray, link_bytes_per_s: float) -> None:
        n = X.shape[0]
        self.n = n
        self.tail, self.head = (a.astype(np.int64) for a in np.nonzero(X > 0))
        self.cap = X[self.tail, self.head].astype(np.float64) * link_bytes_per_s
        self.index = np.full((n, n), -1, dtype=np.int64)
        self.index[self.tail, self.head] = np.arange(self.tail.size)

    def graph(self, weight: np.ndarray) -> sp.csr_matrix:
        return sp.csr_matrix((weight, (self.tail, self.head)), shape=(self.n, self.n))


def _walk_back(pred: np.ndarray, row: np.ndarray, src: np.ndarray, dst: np.ndarray) -> list[list[int]]:
    """Paths src -> dst from a predecessor matrix (``pred[row[i]]`` is the tree of ``src[i]``), all
    commodities at once, one hop per step."""
    nodes = [dst.copy()]
    cur = dst.copy()
    live = cur != src
    while live.any():
        cur = np.where(live, pred[row, cur], cur)
        nodes.append(cur.copy())
        live = cur != src
    stack = np.stack(nodes[::-1], axis=1)  # each row: padding copies of src first, then src ... dst
    out = []
    for i in range(stack.shape[0]):
        r = stack[i]
        first = int(np.flatnonzero(r == src[i])[-1])
        out.append(r[first:].tolist())
    return out


def min_max_routing(
    X: np.ndarray,
    demand: np.ndarray,
    link_bytes_per_s: float,
    *,
    time_limit_s: float | None = None,
    rel_gap: float = DEFAULT_REL_GAP,
) -> RoutingResult:
    """The routing of ``demand`` (bytes, n x n) on topology ``X`` (link counts) whose busiest arc is
    least busy, by column generation (math in the module docstring). Raises ValueError when a pair
    with demand has no path."""
    started = time.perf_counter()
    deadline = math.inf if time_limit_s is None else started + time_limit_s
    arcs = _Arcs(np.asarray(X), link_bytes_per_s)
    D = np.asarray(demand, dtype=np.float64)
    src, dst = (a.astype(np.int64) for a in np.nonzero(D > 0))
    if src.size == 0:
        return RoutingResult([], 0.0, 0.0, True, 0, 0, time.perf_counter() - started)
    sources, row_of = np.unique(src, return_inverse=True)
    Q, m = src.size, arcs.tail.size

    hops, pred = shortest_path(arcs.graph(np.ones(m)), unweighted=True, indices=sources, return_predecessors=True)
    if not np.isfinite(hops[row_of, dst]).all():
        q = int(np.flatnonzero(~np.isfinite(hops[row_of, dst]))[0])
        raise ValueError(f"no path from {src[q]} to {dst[q]} in the topology, but {D[src[q], dst[q]]:g} bytes go there")
    paths = _walk_back(pred, row_of, src, dst)
    d = D[src, dst]
    # Scale: U in units of the starting routing's busiest arc, bytes in units of its capacity x U_0.
    u0 = _busiest(arcs, list(enumerate(paths)), d, np.ones(Q))
    dn = d / u0  # bytes per (U_0 seconds)

    h = new_highs()
    for k, v in _LP_OPTIONS.items():
        h.setOptionValue(k, v)
    inf = highspy.kHighsInf
    # rows: Q share rows (= 1), then m capacity rows (<= 0); column 0 is U.
    h.addRows(Q, np.ones(Q), np.ones(Q), 0, np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0))
    h.addRows(m, np.full(m, -inf), np.zeros(m), 0, np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0))
    cap_n = arcs.cap / arcs.cap.max()  # capacities in units of the largest arc's
    h.addCol(1.0, 0.0, inf, m, (Q + np.arange(m)).astype(np.int32), -cap_n)
    columns: list[tuple[int, list[int]]] = []  # (commodity, path) per column 1..

    def add(new: list[tuple[int, list[int]]]) -> None:
        starts, idx, val = [], [], []
        for q, p in new:
            e = arcs.index[p[:-1], p[1:]]
            starts.append(len(idx))
            idx += [q, *(Q + e).tolist()]
            val += [1.0, *([dn[q] / arcs.cap.max()] * e.size)]
        h.addCols(
            len(new),
            np.zeros(len(new)),
            np.zeros(len(new)),
            np.full(len(new), inf),
            len(idx),
            np.asarray(starts, np.int32),
            np.asarray(idx, np.int32),
            np.asarray(val, np.float64),
        )
        columns.extend(new)

    add(list(enumerate(paths)))
    upper, f = 1.0, np.ones(Q)  # the starting routing (one shortest path per pair): U_0, in units of U_0
    lower, rounds = 0.0, 0
    while time.perf_counter() < deadline:
        rounds += 1
        if math.isfinite(deadline):
            h.setOptionValue("time_limit", max(deadline - time.perf_counter(), 1e-3))
        h.run()
        status = h.getModelStatus()
        if status == highspy.HighsModelStatus.kTimeLimit:
            break
        if status != highspy.HighsModelStatus.kOptimal:
            raise RuntimeError(f"routing LP: HiGHS ended with {h.modelStatusToString(status)}")
        upper = h.getInfo().objective_function_value
        sol = h.getSolution()
        f = np.asarray(sol.col_value)[1:].copy()
        duals = np.asarray(sol.row_dual)
        pi, y = duals[:Q], np.maximum(-duals[Q:], 0.0)
        ysum = float(y @ cap_n)
        if ysum <= 0:
            break
        # y-shortest paths; a tiny per-hop weight keeps zero-weight arcs edges and prefers fewer hops,
        # and is subtracted back (at most n - 1 hops) so the bound stays valid.
        eps = 1e-12 * float(y.max())
        dist, pred = dijkstra(arcs.graph(y + eps), indices=sources, return_predecessors=True)
        dq = dist[row_of, dst]
        lower = max(lower, float((dn * np.maximum(dq - eps * (arcs.n - 1), 0.0)).sum() / arcs.cap.max() / ysum))
        if upper - lower <= rel_gap * upper:
            break
        price = dn / arcs.cap.max() * dq - pi
        new_q = np.flatnonzero(price < -_PRICE_TOL * np.maximum(np.abs(pi), 1e-12))
        if new_q.size == 0:  # the duals are not exact enough to price further: stop with the bound as it is
            break
        add(list(zip(new_q.tolist(), _walk_back(pred, row_of[new_q], src[new_q], dst[new_q]))))
    f = np.concatenate([np.maximum(f, 0.0), np.zeros(len(columns) - f.size)])
    if time.perf_counter() < deadline and rounds:  # second stage: U held, least bytes x hops
        f2 = _fewest_hops(h, columns, dn, upper, deadline)
        if f2 is not None and _busiest(arcs, columns, d, f2) <= _busiest(arcs, columns, d, f) * (1 + 1e-7):
            f = f2
    commodity = np.array([q for q, _ in columns])
    share = np.bincount(commodity, weights=f, minlength=Q)
    keep = f > 1e-6 * share[commodity]  # an interior point's dust: dropped, the rest rescaled (loads recomputed below)
    share = np.bincount(commodity[keep], weights=f[keep], minlength=Q)
    out = [(columns[c][1], float(f[c] / share[commodity[c]])) for c in np.flatnonzero(keep)]
    busy = _busiest(arcs, [columns[c] for c in np.flatnonzero(keep)], d, np.array([fr for _, fr in out]))
    bound = min(lower * u0, busy)
    return RoutingResult(
        out, busy, bound, busy - bound <= rel_gap * busy, rounds, len(columns), time.perf_counter() - started
    )


def _busiest(arcs: _Arcs, columns: list[tuple[int, list[int]]], d: np.ndarray, f: np.ndarray) -> float:
    """The busiest arc's time (s) when column c carries f[c] of its commodity's d bytes."""
    load = np.zeros(arcs.tail.size)
    for (q, p), share in zip(columns, f):
        if share > 0:
            load[arcs.index[p[:-1], p[1:]]] += d[q] * share
    return float((load / arcs.cap).max())


def _fewest_hops(
    h: highspy.Highs, columns: list[tuple[int, list[int]]], dn: np.ndarray, upper: float, deadline: float
) -> np.ndarray | None:
    """Path shares of least bytes x hops with U at most ``upper`` (the first stage's optimum, a hair
    above); None when that LP does not solve in time."""
    ncol = len(columns)
    cost = np.array([dn[q] * (len(p) - 1) for q, p in columns])
    h.changeColsCost(ncol, np.arange(1, ncol + 1, dtype=np.int32), cost / max(cost.max(), 1e-300))
    h.changeColCost(0, 0.0)
    h.changeColBounds(0, 0.0, upper * (1 + 1e-9))
    h.setOptionValue("run_crossover", "on")  # a vertex: an interior point spreads bytes over every path
    if math.isfinite(deadline):
        h.setOptionValue("time_limit", max(deadline - time.perf_counter(), 1e-3))
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    return np.maximum(np.asarray(h.getSolution().col_value)[1:], 0.0)
