"""The placement MILP over the strategies a rotation leaves unchanged (a measurement tool beside :mod:`.placement`).

On a circulant topology (X[i, j] = X[0, j - i], TopoOpt's) rotating every server by ``period`` maps
shortest paths to shortest paths. A strategy is *period-invariant* when the rotation by ``period``
maps it to itself: every layer on a coset (k, s) with n/k dividing ``period`` (such a coset is a
union of residue classes mod ``period``, and its replica order only shifts with the units), and
every block class placed as the same number of blocks on every server of each residue class.
Such a strategy's arc loads repeat with the period (arc (u, u + j) carries what (u + period,
u + period + j) does), its compute and memory are one value per residue class. The whole placement
problem restricted to these strategies is therefore a small MILP: ``period`` x (arc jumps) load rows
instead of one per arc, ``period`` compute and memory rows instead of n.

Its optimum is not a bound on the placement problem (the unrestricted optimum may break the
symmetry), but it is the best of a large, structured family - pipelines of data-parallel stages on
cosets of every degree k >= n / ``period``, mixed as the arcs' loads balance best - and its bound
holds for that whole family. ``benchmarks/placement_symmetric.py`` sets it beside
:func:`~.placement.solve_placement`. It is not a stage of ``solve_placement``: as one it gained
nothing on the 128-server DLRM and NCF jobs in 60 s, because HiGHS' LP spreads every layer evenly
over the cosets with no resharding and the tree moves its bound slowly
(docs/notes/placement-search.md).

Math (every symbol per residue class or arc orbit; TIME_UNIT_S units):

    types  T = {(k, s): n/k divides period, k a config of the layer, its replica fits in memory}
    x[i, t] in {0, 1}       sum_t x[i, t] = 1                        (layer i on type t)
    y[i, t, t'] >= 0        sum_t' y[i, t, t'] = x[i, t],  sum_t y[i, t, t'] = x[i + 1, t']
                            (the transportation rows: y = x_i x_{i+1}^T at integer x; only for
                            layers with activation bytes)
    m[c, r] in Z>=0         sum_r m[c, r] = N_c period / n           (blocks of class c per server of
                                                                      residue r; N_c blocks)
    z[c, r, t] >= 0         sum_t z[c, r, t] = m[c, r],  z[c, r, t] <= M_c x[cons_c, t]
                            (M_c = N_c period / n: z = m on the consumer's type; only with lookups)
    u[c, r] in {0, 1}       m[c, r] <= M_c u[c, r]                    (residue r hosts class c)
    compute_r = sum_{i, t: r in t} lt[i, t] x[i, t] + sum_c comp_c m[c, r]            C >= compute_r
    memory_r  = sum_{i, t: r in t} mem[i, t] x[i, t] + sum_c bytes_c m[c, r]          <= capacity
    load_e    = sum_i p_i sum_t AR[t, e] x[i, t] + sum_i a_i sum_{t != t'} RS[t, t', e] y[i, t, t']
                + sum_c lookup_c sum_{r, t} LK[r, t, e] z[c, r, t]                    T >= load_e / cap_e
                for the representative arcs e (tail < period); LK[r, t] = the loads of one byte
                between each server of residue r and t's replicas, summed over those servers
    H >= hops(AR, t) x[i, t] (p_i > 0),  H >= hops(RS, t, t') y[i, t, t'] (a_i > 0),
    H >= hops(LK, r, t) (u[c, r] + x[cons_c, t] - 1)
    C >= e_c + sum_{i >= c} lt[i, t] x[i, t]     (compute_model critical_path: the path rows)
    minimise objective_of(C, T + alpha H)   (sum, or max under full overlap, or T + alpha H alone)

At every integer point these are the evaluator's loads, compute and hops of the decoded strategy
(blocks of class c on the servers of residue r in index order, m[c, r] on each), so the objective
equals :func:`~topoopt_ilp.models.placement.data.strategy_times` of it (tested).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.strategy import Strategy
from topoopt_ilp.models.common import ExactOptions, run_model, solution_status
from topoopt_ilp.models.placement.bounds import is_circulant
from topoopt_ilp.models.placement.data import TIME_UNIT_S, RoutingFractions, path_rows, set_objective_of
from topoopt_ilp.models.placement.scoring import StrategyScorer, block_classes
from topoopt_ilp.solvers import ModelBuilder

__all__ = ["SymmetricResult", "symmetric_periods", "symmetric_placement"]


@dataclass(frozen=True)
class SymmetricResult:
    """What :func:`symmetric_placement` found: the strategy (None without one), the model's
    objective and bound in seconds (both for the period-invariant strategies only), the solver
    status and the model's size."""

    strategy: Strategy | None
    objective_s: float | None
    bound_s: float | None
    status: str
    period: int
    nonzeros: int


def symmetric_periods(instance: Instance, rf: RoutingFractions) -> list[int]:
    """The periods p (divisors of n, p < n) for which the restriction exists: a circulant topology,
    every block class's count divisible by n / p, and every layer with a config k >= n / p."""
    w, n = instance.workload, instance.n
    if not is_circulant(rf):
        return []
    counts = [len(c) for c in block_classes(w)]
    out = []
    for p in range(1, n):
        if n % p or any(N % (n // p) for N in counts):
            continue
        if all(any(n // int(k) <= p and p % (n // int(k)) == 0 for k in layer.configs) for layer in w.layers):
            out.append(p)
    return out


def symmetric_placement(
    instance: Instance, rf: RoutingFractions, period: int, options: ExactOptions, ls: StrategyScorer | None = None
) -> SymmetricResult:
    """Solve the placement problem over the period-invariant strategies (module docstring).
    ``period`` must be one of :func:`symmetric_periods`; ``options`` gives the backend, time limit
    and gap."""
    ls = ls or StrategyScorer(instance, rf)
    w, n = instance.workload, instance.n
    p = int(period)
    unit = TIME_UNIT_S
    L, A = len(w.layers), len(rf.cap)
    g = n // ls.type_k
    types = np.flatnonzero(p % g == 0)
    allowed = np.isfinite(ls.lt[:, types])  # (L, T)
    T = len(types)
    if not allowed.any(axis=1).all():  # some layer has no option here (memory): nothing to solve
        return SymmetricResult(None, None, None, "infeasible", p, 0)
    # residue r in type t's coset: r ≡ s mod g
    member = (np.arange(p)[None, :] - ls.type_s[types][:, None]) % g[types][:, None] == 0  # (T, p)
    reps = np.flatnonzero(rf.tail < p)  # representative arcs: one per orbit
    inv_cap = 1.0 / rf.cap[reps]
    classes = block_classes(w)
    b = ModelBuilder(name="placement_symmetric")
    xi, xt = np.nonzero(allowed)
    x = b.add_variables(len(xi), kind="binary", name="x")
    xcol = np.full((L, T), -1)
    xcol[xi, xt] = x.index
    C = b.add_variables(1, name="C").index[0]
    Tb = b.add_variables(1, name="T").index[0]
    H = b.add_variables(1, name="H").index[0]
    load_r, load_c, load_v = [], [], []  # (representative arc, column, bytes / cap)
    hop_rows = []  # (columns, second column or None, hops): H >= hops x column [+ hops x (second - 1)]
    b.add_constraints(xi, x.index, 1.0, lb=np.ones(L), ub=np.ones(L), name="assign")

    def add_load(cols: np.ndarray, pattern: np.ndarray, scale: float) -> None:
        """Columns ``cols`` each carrying ``scale`` x ``pattern[j]`` (bytes on the representative arcs)."""
        pr = pattern[:, reps] * inv_cap[None, :] * (scale / unit)
        j, e = np.nonzero(pr)
        load_r.append(e), load_c.append(cols[j]), load_v.append(pr[j, e])

    # AllReduce
    for i in range(L):
        if ls.param[i] > 0:
            ti = types[xt[xi == i]]
            cols = xcol[i, xt[xi == i]]
            add_load(cols, ls.ar[ti], ls.param[i])
            hop_rows.append((cols, None, ls.ar_hop[ti]))
    # Resharding: the transportation rows (y = x_i x_{i+1}^T at integer x)
    for i in range(L - 1):
        if ls.act[i] <= 0:
            continue
        a, c = np.flatnonzero(allowed[i]), np.flatnonzero(allowed[i + 1])
        ya, yc = np.repeat(a, len(c)), np.tile(c, len(a))
        y = b.add_variables(len(ya), name=f"y{i}").index
        ra, rc = np.searchsorted(a, ya), np.searchsorted(c, yc)
        b.add_constraints(
            np.r_[ra, np.arange(len(a))],
            np.r_[y, xcol[i, a]],
            np.r_[np.ones(len(y)), -np.ones(len(a))],
            lb=0.0,
            ub=0.0,
            count=len(a),
            name=f"from{i}",
        )
        b.add_constraints(
            np.r_[rc, np.arange(len(c))],
            np.r_[y, xcol[i + 1, c]],
            np.r_[np.ones(len(y)), -np.ones(len(c))],
            lb=0.0,
            ub=0.0,
            count=len(c),
            name=f"to{i}",
        )
        moves = ya != yc
        for t in np.unique(ya[moves]):
            sel = np.flatnonzero(moves & (ya == t))
            loads, hops = ls.reshard(int(types[t]))
            add_load(y[sel], loads[types[yc[sel]]], ls.act[i])
            hop_rows.append((y[sel], None, hops[types[yc[sel]]]))
    # Blocks: m per (class, residue), z on the consumer's type, u = the residue hosts the class
    m_cols = []
    for cls in classes:
        blk = w.blocks[cls[0]]
        M = len(cls) * p // n
        m = b.add_variables(p, ub=M, kind="integer", name="m").index
        m_cols.append(m)
        b.add_constraints(np.zeros(p), m, 1.0, lb=M, ub=M, count=1, name="count")
        if float(blk.lookup_bytes) <= 0 or M == 0:
            continue
        cons = int(blk.consumer)
        ct = np.flatnonzero(allowed[cons])
        z = b.add_variables((p, len(ct)), name="z").index
        u = b.add_variables(p, kind="binary", name="u").index
        b.add_constraints(
            np.r_[np.repeat(np.arange(p), len(ct)), np.arange(p)],
            np.r_[z.ravel(), m],
            np.r_[np.ones(z.size), -np.ones(p)],
            lb=0.0,
            ub=0.0,
            count=p,
            name="z_sum",
        )
        zr = np.arange(z.size)
        b.add_constraints(
            np.r_[zr, zr],
            np.r_[z.ravel(), np.tile(xcol[cons, ct], p)],
            np.r_[np.ones(z.size), -float(M) * np.ones(z.size)],
            ub=0.0,
            count=z.size,
            name="z_on",
        )
        b.add_constraints(
            np.r_[np.arange(p), np.arange(p)],
            np.r_[m, u],
            np.r_[np.ones(p), -float(M) * np.ones(p)],
            ub=0.0,
            count=p,
            name="u_on",
        )
        for q, t in enumerate(ct):
            loads, hops = ls.lookup_per_server(int(types[t]))
            LK = loads.reshape(n // p, p, A).sum(axis=0)  # residue r: its servers summed
            add_load(z[:, q], LK, float(blk.lookup_bytes))
            hk = hops.reshape(n // p, p).max(axis=0)
            hop_rows.append((u, xcol[cons, t], hk))
    # Compute and memory per residue
    rr, rcol = np.nonzero(member[xt].T)  # (residue, option) pairs: the option's coset holds residue r
    opt_lt = ls.lt[xi, types[xt]]
    opt_mem = ls.rep_mem[xi, types[xt]]
    comp_r, comp_c, comp_v = [rr], [x.index[rcol]], [opt_lt[rcol] / unit]
    mem_c, mem_v = [x.index[rcol]], [opt_mem[rcol]]
    mem_r = [rr]
    for cls, m in zip(classes, m_cols):
        blk = w.blocks[cls[0]]
        comp_r.append(np.arange(p)), comp_c.append(m), comp_v.append(np.full(p, float(blk.compute_s) / unit))
        mem_r.append(np.arange(p)), mem_c.append(m), mem_v.append(np.full(p, float(blk.bytes)))
    b.add_constraints(
        np.r_[np.concatenate(comp_r), np.arange(p)],
        np.r_[np.concatenate(comp_c), np.full(p, C)],
        np.r_[np.concatenate(comp_v), -np.ones(p)],
        ub=0.0,
        count=p,
        name="compute",
    )
    # in units of the server memory (bytes would put 1e11 in the rows: HiGHS warns of bad scaling)
    b.add_constraints(
        np.concatenate(mem_r), np.concatenate(mem_c), np.concatenate(mem_v) / ls.cap, ub=1.0, count=p, name="memory"
    )
    if ls.path_c is not None:
        pr, pc, pv, pub = path_rows(w, xi, opt_lt / unit, x.index, C)
        b.add_constraints(pr, pc, pv, ub=pub / unit, name="path")
    # Loads: T >= load_e / cap_e on every representative arc
    er, ec, ev = np.concatenate(load_r), np.concatenate(load_c), np.concatenate(load_v)
    b.add_constraints(
        np.r_[er, np.arange(len(reps))],
        np.r_[ec, np.full(len(reps), Tb)],
        np.r_[ev, -np.ones(len(reps))],
        ub=0.0,
        count=len(reps),
        name="load",
    )
    # Hops: h col - H <= 0, or h col + h col2 - H <= h (H >= h when both are on), one row per h > 0
    hr, hc, hv, hub = [], [], [], []
    row = 0
    for cols, cols2, hops in hop_rows:
        keep = np.flatnonzero(hops > 0)
        h, rows = hops[keep].astype(float), row + np.arange(keep.size)
        hr += [rows, rows]
        hc += [np.asarray(cols)[keep], np.full(keep.size, H)]
        hv += [h, -np.ones(keep.size)]
        if cols2 is not None:
            hr.append(rows), hc.append(np.full(keep.size, cols2)), hv.append(h)
        hub.append(h if cols2 is not None else np.zeros(keep.size))
        row += keep.size
    if row:
        b.add_constraints(
            np.concatenate(hr), np.concatenate(hc), np.concatenate(hv), ub=np.concatenate(hub), count=row, name="hops"
        )
    alpha = instance.cluster.hop_latency_s / unit
    set_objective_of(b, instance, C, Tb, H, alpha)
    model = b.build()
    result = run_model(model, options)
    status = solution_status(result)
    if result.values is None:
        return SymmetricResult(
            None, None, None if result.bound is None else result.bound * unit, status, p, model.num_nonzeros
        )
    v = np.asarray(result.values)
    ty = types[xt[v[x.index] > 0.5]]  # np.nonzero listed the options layer by layer
    block_server = [0] * len(w.blocks)
    for cls, m in zip(classes, m_cols):
        counts = np.rint(v[m]).astype(int)
        servers = [r + q * p for r in range(p) for q in range(n // p) for _ in range(counts[r])]
        for j, srv in zip(cls, servers):
            block_server[j] = srv
    st = Strategy(tuple(int(k) for k in ls.type_k[ty]), tuple(int(s) for s in ls.type_s[ty]), tuple(block_server))
    return SymmetricResult(
        st,
        float(result.objective) * unit,
        None if result.bound is None else float(result.bound) * unit,
        status,
        p,
        model.num_nonzeros,
    )
