"""Array-level flow routines of the evaluator: ECMP loads, explicit-path loads, maximum concurrent flow.

These are the *independent check* of every solution the toolkit produces, so they share no code with
the optimisation models: the ECMP loads come from a Brandes-style dependency accumulation over the
BFS levels of :mod:`topoopt_ilp.core.graph`, and the maximum concurrent flow is a self-contained LP
solved by HiGHS through :func:`scipy.optimize.linprog`.

Conventions
-----------
Topology ``X`` (``n x n`` int, ``X[i, j]`` parallel links ``i -> j``), demand ``D`` (``n x n`` float,
bytes ``i -> j`` per iteration). The arc ``(i, j)`` exists iff ``X[i, j] > 0``; its capacity is
``cap * X[i, j]``. The diagonal of ``D`` is ignored (a server's traffic to itself never enters the
network).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from topoopt_ilp.core.graph import adjacency_csr, bfs_levels, expand_rows, validate_topology
from topoopt_ilp.core.routes import PathSet

__all__ = ["shortest_path_loads", "path_loads", "max_concurrent_flow", "MCFResult", "validate_demand"]

# Expanded (source, arc) entries processed per numpy batch: bounds memory to a few hundred MB.
_CHUNK = 1 << 22


def validate_demand(D: np.ndarray, n: int) -> np.ndarray:
    """Check a demand matrix and return a float64 copy with zero diagonal.

    Raises
    ------
    ValueError
        If ``D`` is not ``(n, n)``, or has negative or non-finite entries.
    """
    M = np.array(D, dtype=np.float64, copy=True)
    if M.shape != (n, n):
        raise ValueError(f"demand must have shape ({n}, {n}), got {M.shape}")
    if not np.all(np.isfinite(M)):
        raise ValueError("demand has non-finite entries")
    if np.any(M < 0):
        raise ValueError("demand has negative entries")
    np.fill_diagonal(M, 0.0)
    return M


def _check_reachable(dist: np.ndarray, D: np.ndarray) -> None:
    bad = np.argwhere((D > 0) & (dist < 0))
    if bad.size:
        s, t = bad[0]
        raise ValueError(f"pair ({s}, {t}) has demand but {t} is unreachable from {s} ({len(bad)} such pairs)")


# ----------------------------------------------------------------------------------------------
# ECMP over shortest node paths
# ----------------------------------------------------------------------------------------------


def shortest_path_loads(X: np.ndarray, D: np.ndarray) -> tuple[np.ndarray, int]:
    """Arc loads when every pair splits its demand equally over all its shortest node paths.

    Parameters
    ----------
    X : numpy.ndarray
        ``(n, n)`` topology. Parallel links do not create extra paths (the split is over node
        sequences of the simple graph ``X > 0``); they only add capacity, which this function ignores.
    D : numpy.ndarray
        ``(n, n)`` demand in bytes.

    Returns
    -------
    load : numpy.ndarray
        ``(n, n)`` float64, ``load[i, j]`` = bytes crossing arc ``(i, j)`` (0 where there is no arc).
    max_hops : int
        Longest hop distance among pairs with positive demand (0 if there is none).

    Raises
    ------
    ValueError
        If a pair with positive demand is disconnected.

    Notes
    -----
    Brandes-style accumulation, vectorized over all sources. With ``T[s, w] = (D[s, w] +
    delta[s, w]) / sigma[s, w]`` (``delta`` = demand from ``s`` that transits ``w``), the flow of
    source ``s`` on an arc ``(v, w)`` with ``dist[s, w] = dist[s, v] + 1`` is ``sigma[s, v] * T[s, w]``
    and ``T[s, v] = D[s, v] / sigma[s, v] + sum over such successors w of T[s, w]``. Levels are
    processed deepest first by expanding every ``(s, v)`` entry of a level through the CSR adjacency,
    so the work is ``O(n * m)`` (``m`` arcs), e.g. ~1 s for ``n = 1024``, degree 8.
    """
    A = adjacency_csr(X)
    n = A.shape[0]
    Dm = validate_demand(D, n)
    dist, sigma = bfs_levels(A)
    _check_reachable(dist, Dm)
    pos_demand = Dm > 0
    max_hops = int(dist[pos_demand].max()) if pos_demand.any() else 0

    indptr = A.indptr.astype(np.int64)
    indices = A.indices.astype(np.int64)
    m = indices.size
    deg = np.diff(indptr)
    arc_tail = np.repeat(np.arange(n, dtype=np.int64), deg)
    arc_load = np.zeros(m)

    # Only sources with outgoing demand carry flow; entries (s, v) beyond every demanded
    # destination of s carry none either, but filtering them costs as much as processing them.
    src_active = pos_demand.any(axis=1)
    dflat = dist.ravel()
    sflat = sigma.ravel()
    Dflat = Dm.ravel()
    T = np.zeros(n * n)
    active = src_active[np.arange(n * n) // n] & (dflat > 0)
    cand = np.flatnonzero(active)
    order = cand[np.argsort(dflat[cand], kind="stable")]
    lv = dflat[order]
    bounds = np.searchsorted(lv, np.arange(max_hops + 2))  # entries of level k: bounds[k]:bounds[k+1]

    for k in range(max_hops, 0, -1):  # levels beyond max_hops have T = 0
        flat_k = order[bounds[k] : bounds[k + 1]]
        if flat_k.size == 0:
            continue
        Tk = Dflat[flat_k] / sflat[flat_k]
        if k < max_hops:
            s_k, v_k = np.divmod(flat_k, n)
            # batch so that the expansion (entries x degree) stays bounded in memory
            csum = np.cumsum(deg[v_k])
            cuts = np.searchsorted(csum, np.arange(_CHUNK, int(csum[-1]), _CHUNK))
            edges = np.unique(np.concatenate([[0], cuts, [flat_k.size]]))
            for lo, hi in zip(edges[:-1], edges[1:]):
                owner, pos = expand_rows(indptr, v_k[lo:hi])
                succ = s_k[lo:hi][owner] * n + indices[pos]
                down = dflat[succ] == k + 1  # arcs of the shortest-path DAG of source s
                owner, pos, succ = owner[down], pos[down], succ[down]
                t_succ = T[succ]
                Tk[lo:hi] += np.bincount(owner, weights=t_succ, minlength=hi - lo)
                arc_load += np.bincount(pos, weights=sflat[flat_k[lo:hi][owner]] * t_succ, minlength=m)
        T[flat_k] = Tk
    # The first hop out of each source: arcs (s, w) with dist[s, w] = 1 carry sigma[s, s] * T[s, w].
    first = order[bounds[1] : bounds[2]] if max_hops >= 1 else np.zeros(0, dtype=np.int64)
    s1, w1 = np.divmod(first, n)
    load = np.zeros((n, n))
    load[arc_tail, indices] = arc_load
    np.add.at(load, (s1, w1), T[first])
    return load, max_hops


# ----------------------------------------------------------------------------------------------
# explicit paths
# ----------------------------------------------------------------------------------------------


def path_loads(n: int, paths: PathSet, pair_demand: np.ndarray) -> np.ndarray:
    """Arc loads of explicit paths: path ``p`` carries ``fraction[p] * D[src, dst]`` on each hop.

    Parameters
    ----------
    n : int
        Number of nodes.
    paths : PathSet
        Node paths (``-1`` padded at the end).
    pair_demand : numpy.ndarray
        ``(n, n)`` demand ``D``.

    Returns
    -------
    numpy.ndarray
        ``(n, n)`` float64 loads. Arcs are not checked against a topology: a hop over a missing
        arc shows up as load where ``X == 0``, which the caller can detect.
    """
    D = validate_demand(pair_demand, n)
    load = np.zeros(n * n)
    if len(paths) == 0 or paths.nodes.shape[1] < 2:
        return load.reshape(n, n)
    nodes = paths.nodes
    valid = nodes >= 0
    if np.any(nodes >= n):
        raise ValueError("path node out of range")
    # padding must be a suffix: a -1 followed by a node would silently drop hops
    if np.any(~valid[:, :-1] & valid[:, 1:]):
        raise ValueError("path has -1 padding before its last node")
    if np.any(~valid[:, 0]):
        raise ValueError("empty path")
    amount = paths.fraction * D[paths.src, paths.dst]
    u, v = nodes[:, :-1], nodes[:, 1:]
    hop = valid[:, 1:]  # hop h exists iff node h+1 exists
    if np.any(u[hop] == v[hop]):
        raise ValueError("path repeats a node on consecutive positions")
    w = np.broadcast_to(amount[:, None], u.shape)[hop]
    load += np.bincount(u[hop] * n + v[hop], weights=w, minlength=n * n)
    return load.reshape(n, n)


# ----------------------------------------------------------------------------------------------
# maximum concurrent flow
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class MCFResult:
    """Result of :func:`max_concurrent_flow`.

    Attributes
    ----------
    lam : float
        Maximum concurrent flow: the largest ``lam`` such that ``lam * D`` is routable. With ``D`` in
        bytes and ``cap`` in bytes/s, ``1 / lam`` is the time to deliver ``D`` under the best
        fractional multipath routing. ``inf`` if ``D`` is all zero.
    paths : PathSet
        Flow decomposition of an optimal flow; ``fraction`` is the share of the pair's demand
        (fractions of one pair sum to 1). Empty if ``return_flows=False`` or ``D`` is zero.
    max_hops : int
        Longest path in ``paths`` (``-1`` if paths were not computed, 0 if ``D`` is zero).
    load : numpy.ndarray
        ``(n, n)`` arc loads (bytes/s) of the optimal flow routing ``lam * D``; equals
        ``lam * path_loads(n, paths, D)`` up to solver tolerance and is ``<= cap * X``. All zero if
        ``D`` is zero.
    """

    lam: float
    paths: PathSet
    max_hops: int
    load: np.ndarray


def max_concurrent_flow(
    X: np.ndarray,
    D: np.ndarray,
    cap: float = 1.0,
    *,
    return_flows: bool = True,
    min_total_flow: bool = True,
) -> MCFResult:
    """Maximum concurrent flow of demand ``D`` on topology ``X``, solved exactly as an LP.

    Parameters
    ----------
    X : numpy.ndarray
        ``(n, n)`` topology; arc ``(i, j)`` has capacity ``cap * X[i, j]``.
    D : numpy.ndarray
        ``(n, n)`` demand.
    cap : float
        Capacity of one link in one direction (> 0).
    return_flows : bool
        If True, decompose the optimal flow into paths (``MCFResult.paths``, ``max_hops``).
    min_total_flow : bool
        If True (default), a second LP fixes ``lam`` at its optimum and minimises the total arc flow,
        so the returned routing has no cycles and no needless detours (``max_hops`` is then that of
        a shortest-possible max-throughput routing, not of an arbitrary optimal vertex). Only used
        when ``return_flows`` is True.

    Returns
    -------
    MCFResult

    Raises
    ------
    ValueError
        On invalid input, or if a pair with demand is disconnected.
    RuntimeError
        If HiGHS fails.

    Notes
    -----
    Source-aggregated multicommodity LP with ``|S| * m + 1`` variables (``S`` = sources with demand,
    ``m`` arcs) and ``|S| * (n - 1)`` equalities plus ``m`` capacity rows. Its time grows fast with
    the size: the practical limit is about 10^5 variables (n ~ 100 at degree 8;
    docs/notes/routing-lps.md); beyond that use :func:`shortest_path_loads` or a column-generation
    solver.
    """
    A = validate_topology(X)
    n = A.shape[0]
    if not (np.isfinite(cap) and cap > 0):
        raise ValueError("cap must be a positive finite number")
    Dm = validate_demand(D, n)
    empty = MCFResult(np.inf, PathSet.empty(), 0, np.zeros((n, n)))
    if not np.any(Dm > 0):
        # Nothing to route: every lam works, so the supremum is +inf.
        return empty
    M = adjacency_csr(A)
    dist, _ = bfs_levels(M)
    _check_reachable(dist, Dm)

    # Normalise so that the LP coefficients are O(1): demand by its maximum, capacity to link counts.
    dscale = float(Dm.max())
    Dn = Dm / dscale

    tail = np.repeat(np.arange(n, dtype=np.int64), np.diff(M.indptr))
    head = M.indices.astype(np.int64)
    capn = A[tail, head].astype(np.float64)
    m = tail.size
    S = np.flatnonzero(Dn.sum(axis=1) > 0)
    K = S.size
    nvar = K * m + 1
    ilam = K * m

    # ------------------------------------------------------------------------------------------
    # LP (normalised units: demand Dn = D / max D, arc capacity = X[e] links)
    #
    # Data:       arcs e = (tail_e, head_e), e = 0..m-1, capacity c_e = X[tail_e, head_e];
    #             sources S = {s : sum_t Dn[s, t] > 0}, indexed k = 0..K-1.
    # Variables:  f[k, e] >= 0  flow of source S[k] on arc e (column k*m + e);
    #             lam >= 0      concurrent-flow multiplier (column K*m).
    #             f[k, e] is fixed to 0 when head_e = S[k]: flow back into its own source is
    #             never needed (it only forms cycles), which removes cycles through sources.
    # Constraints:
    #   conservation, for every k and node v != S[k]:
    #       sum_{e: head_e = v} f[k, e] - sum_{e: tail_e = v} f[k, e] - lam * Dn[S[k], v] = 0
    #   (the row for v = S[k] is the negated sum of the others, hence omitted);
    #   capacity, for every arc e:   sum_k f[k, e] <= c_e.
    # Objective:  maximise lam.
    # Second stage (min_total_flow): fix lam to its optimum, minimise sum_{k,e} f[k, e].
    # ------------------------------------------------------------------------------------------
    k_of = np.repeat(np.arange(K, dtype=np.int64), m)
    e_of = np.tile(np.arange(m, dtype=np.int64), K)
    col_f = np.arange(K * m, dtype=np.int64)
    # raw conservation row id = k * n + v; rows v == S[k] are dropped and the rest renumbered
    keep_row = np.ones(K * n, dtype=bool)
    keep_row[np.arange(K) * n + S] = False
    row_new = np.cumsum(keep_row) - 1
    r_in = k_of * n + head[e_of]
    r_out = k_of * n + tail[e_of]
    lam_rows = np.flatnonzero(keep_row)  # every kept row (k, v) has coefficient -Dn[S[k], v]
    lam_coef = -Dn[S[lam_rows // n], lam_rows % n]
    nz = lam_coef != 0
    rows = np.concatenate([r_in, r_out, lam_rows[nz]])
    cols = np.concatenate([col_f, col_f, np.full(int(nz.sum()), ilam)])
    vals = np.concatenate([np.ones(K * m), -np.ones(K * m), lam_coef[nz]])
    ok = keep_row[rows]
    A_eq = sp.csr_matrix((vals[ok], (row_new[rows[ok]], cols[ok])), shape=(int(keep_row.sum()), nvar))
    b_eq = np.zeros(A_eq.shape[0])
    A_ub = sp.csr_matrix((np.ones(K * m), (e_of, col_f)), shape=(m, nvar))
    b_ub = capn
    ub = np.full(nvar, np.inf)
    ub[:ilam][head[e_of] == S[k_of]] = 0.0
    bounds = np.column_stack([np.zeros(nvar), ub])

    # Dual simplex is quickest on small instances; beyond ~3k variables HiGHS's interior point
    # (with crossover, so the answer is still a vertex to ~1e-10) is 10x faster on these LPs.
    method = "highs-ds" if nvar < 3_000 else "highs-ipm"
    c = np.zeros(nvar)
    c[ilam] = -1.0
    from scipy.optimize import linprog  # start-up time: scipy.optimize costs 0.2 s to import

    res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=b_eq, bounds=bounds, method=method)
    if res.status != 0:
        raise RuntimeError(f"max-concurrent-flow LP failed: {res.message}")
    lam_n = float(res.x[ilam])
    x = res.x
    if return_flows and min_total_flow:
        c2 = np.ones(nvar)
        c2[ilam] = 0.0
        for shrink in (1.0, 1.0 - 1e-9, 1.0 - 1e-7):
            bounds2 = bounds.copy()
            bounds2[ilam] = lam_n * shrink
            res2 = linprog(c2, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=b_eq, bounds=bounds2, method=method)
            if res2.status == 0:
                x = res2.x
                break
    lam_used = float(x[ilam])
    f = np.clip(x[:ilam], 0.0, None).reshape(K, m)

    lam = lam_n * cap / dscale
    load = np.zeros((n, n))
    load[tail, head] = f.sum(axis=0) * cap
    if not return_flows:
        return MCFResult(lam, PathSet.empty(), -1, load)

    # The flow routes lam_used * Dn; its paths are reported as shares of each pair's demand.
    plist: list[tuple[list[int], float]] = []
    for k in range(K):
        plist.extend(_decompose_source(int(S[k]), f[k], tail, head, n, lam_used * Dn[S[k]]))
    paths = PathSet.from_lists(plist) if plist else PathSet.empty()
    max_hops = int(paths.hops.max()) if len(paths) else 0
    return MCFResult(lam, paths, max_hops, load)


def _find_cycle(f: np.ndarray, tail: np.ndarray, head: np.ndarray, n: int) -> list[int] | None:
    """Arc ids of one directed cycle in the support ``f > 0``, or None (iterative DFS)."""
    sup = np.flatnonzero(f > 0)
    if sup.size == 0:
        return None
    order = np.argsort(tail[sup], kind="stable")
    arcs = sup[order]
    ptr = np.searchsorted(tail[arcs], np.arange(n + 1))
    color = np.zeros(n, dtype=np.int8)  # 0 new, 1 on stack, 2 done
    for root in range(n):
        if color[root]:
            continue
        stack_nodes = [root]
        stack_arc: list[int] = []  # arc used to enter stack_nodes[i+1]
        it = [int(ptr[root])]
        color[root] = 1
        while stack_nodes:
            u = stack_nodes[-1]
            if it[-1] < ptr[u + 1]:
                a = int(arcs[it[-1]])
                it[-1] += 1
                w = int(head[a])
                if color[w] == 1:  # back arc closes a cycle w -> ... -> u -> w
                    i = stack_nodes.index(w)
                    return stack_arc[i:] + [a]
                if color[w] == 0:
                    color[w] = 1
                    stack_nodes.append(w)
                    stack_arc.append(a)
                    it.append(int(ptr[w]))
            else:
                color[u] = 2
                stack_nodes.pop()
                it.pop()
                if stack_arc:
                    stack_arc.pop()
    return None


def _decompose_source(
    s: int, f: np.ndarray, tail: np.ndarray, head: np.ndarray, n: int, demand: np.ndarray
) -> list[tuple[list[int], float]]:
    """Standard flow decomposition of one source's flow into paths ``s -> t``.

    ``f`` (per arc) routes ``demand[t]`` from ``s`` to every ``t``. Cycles are cancelled first
    (subtracting the bottleneck around each cycle changes no node balance); then, for every
    destination, paths are traced backwards from ``t`` along the largest remaining inflow and the
    bottleneck amount is removed, until the destination's demand is covered. Each trace zeroes an
    arc or finishes a destination, so there are at most ``m + n`` paths.
    Returns ``(node path, share of the pair's demand)``; shares of a pair are normalised to 1.
    """
    f = f.copy()
    scale = max(float(f.max(initial=0.0)), float(demand.max()))
    tol = 1e-9 * scale
    f[f <= tol] = 0.0
    while (cyc := _find_cycle(f, tail, head, n)) is not None:
        delta = f[cyc].min()
        f[cyc] -= delta
        f[f <= tol] = 0.0
    order = np.argsort(head, kind="stable")
    in_ptr = np.searchsorted(head[order], np.arange(n + 1))
    out: list[tuple[list[int], float]] = []
    for t in np.flatnonzero(demand > 0):
        need = float(demand[t])
        got: list[tuple[list[int], float]] = []
        while need > tol:
            path_arcs: list[int] = []
            u = int(t)
            while u != s and len(path_arcs) <= n:
                cand = order[in_ptr[u] : in_ptr[u + 1]]
                a = int(cand[np.argmax(f[cand])]) if cand.size else -1
                if a < 0 or f[a] <= 0:
                    break
                path_arcs.append(a)
                u = int(tail[a])
            if u != s:
                break  # no inflow left: numerical slack, judged below
            amt = min(need, float(f[path_arcs].min()))
            f[path_arcs] -= amt
            f[f <= tol] = 0.0
            need -= amt
            nodes = [s] + [int(head[a]) for a in reversed(path_arcs)]
            got.append((nodes, amt))
        total = sum(a for _, a in got)
        if total < (1 - 1e-6) * demand[t]:
            raise RuntimeError(f"flow decomposition covered only {total} of {demand[t]} for pair ({s}, {t})")
        out.extend((p, a / total) for p, a in got)
    return out
