"""The exact block placement for fixed layers (a move of :mod:`.local_search`).

With every layer's (k, s) fixed, what is left of the placement problem is where the model-parallel
blocks (DLRM's embedding tables) go: a small MILP over how many blocks of each class of identical
blocks each server holds. The local search moves one block at a time; this re-places all of them at
once, optimally for the layers it is given (on dlrm-128-d8 one call took a local optimum of the local
search from 17.948 to 17.601 ms, where the single-block moves were stuck).

Math (TIME_UNIT_S units; the layers' contributions are constants):

    classes c of identical blocks (same bytes, lookups, compute, consumer), N_c blocks each; the
    consumer layer cons_c sits on the fixed type t_c; LK_c[v, e] = the arc loads of one lookup byte
    between server v and t_c's replicas (both directions), hops_c[v] the longest path of those
    m[c, v] in Z>=0         sum_v m[c, v] = N_c                        (blocks of class c on server v)
    u[c, v] in {0, 1}       m[c, v] <= N_c u[c, v]      (only where hops_c[v] > the layers' hops H0)
    C >= comp0_v + sum_c comp_c m[c, v]        for every server v;   C >= P0 (the critical path)
    mem0_v + sum_c bytes_c m[c, v] <= capacity                  for every server v
    T >= (load0_e + sum_c lookup_c sum_v LK_c[v, e] m[c, v]) / cap_e       for every arc e
    H >= H0,  H >= hops_c[v] u[c, v]
    minimise objective_of(C, T + alpha H)    (sum, max under full overlap, or T + alpha H alone)

where comp0, mem0, load0 and H0 are the layers' compute, memory, arc loads and hops. At every integer
point these are the evaluator's values of the strategy with blocks of class c on the servers m
names, in server order, so the objective equals :func:`~topoopt_ilp.models.placement.data.strategy_times` of it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from topoopt_ilp.core.strategy import Strategy
from topoopt_ilp.models.common import ExactOptions, run_model, solution_status
from topoopt_ilp.models.placement.data import TIME_UNIT_S, set_objective_of
from topoopt_ilp.models.placement.scoring import StrategyScorer, block_classes
from topoopt_ilp.solvers import ModelBuilder

__all__ = ["BLOCK_GAP", "MIN_POLISH_S", "BlockResult", "place_blocks_exactly", "polish_blocks"]

#: The relative gap the block MILP is solved to: on dlrm-128-d8, 1e-3 took 0.15 s and 1e-4 12 s for
#: the same strategy (HiGHS spends the rest proving the last 0.01 %).
BLOCK_GAP = 1e-3


@dataclass(frozen=True)
class BlockResult:
    """What :func:`place_blocks_exactly` found: the strategy with its blocks re-placed (None without
    a solution), its objective and the model's bound in seconds (both for these layers only), the
    solver status and the model's size."""

    strategy: Strategy | None
    objective_s: float | None
    bound_s: float | None
    status: str
    nonzeros: int


def place_blocks_exactly(ls: StrategyScorer, strategy: Strategy, options: ExactOptions) -> BlockResult:
    """Re-place ``strategy``'s blocks optimally for its layers (module docstring) on ``ls``'s
    topology; ``ls``'s state is left at ``strategy``. ``options`` gives the backend, time limit and
    gap (None: :data:`BLOCK_GAP`); the strategy's own blocks are the warm start."""
    w, n, unit = ls.w, ls.n, TIME_UNIT_S
    ls.load_state(strategy)
    classes = block_classes(w)
    if not classes:
        return BlockResult(None, None, None, "infeasible", 0)
    # the layers' part: the state without its blocks
    load0 = ls.ar_load.sum(axis=0) + ls.rs_load.sum(axis=0)
    comp0, mem0 = ls.comp.copy(), ls.mem.copy()
    np.subtract.at(comp0, ls.bs, ls.blk_comp)
    np.subtract.at(mem0, ls.bs, ls.blk_mem)
    H0 = int(max(ls.ar_h.max(initial=0), ls.rs_h.max(initial=0)))
    inv_cap = ls.arc_inv / unit
    A = len(inv_cap)

    b = ModelBuilder(name="block_placement")
    C = b.add_variables(1, name="C").index[0]
    T = b.add_variables(1, name="T").index[0]
    H = b.add_variables(1, lb=float(H0), name="H").index[0]
    srv_r, m_c, comp_v, mem_v = [], [], [], []  # the compute and memory rows share their (server, column) pairs
    load_r, load_c, load_v = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0)]
    hop_c, hop_v = [], []
    m_cols, warm = [], {}
    for cls in classes:
        blk = w.blocks[cls[0]]
        N = len(cls)
        m = b.add_variables(n, ub=N, kind="integer", name="m").index
        m_cols.append(m)
        held = np.bincount(ls.bs[cls], minlength=n)
        warm.update(zip(m, held))
        b.add_constraints(np.zeros(n), m, 1.0, lb=N, ub=N, count=1, name="count")
        srv_r.append(np.arange(n)), m_c.append(m)
        comp_v.append(np.full(n, float(blk.compute_s) / unit)), mem_v.append(np.full(n, float(blk.bytes) / ls.cap))
        if float(blk.lookup_bytes) <= 0:
            continue
        loads, hops = ls.lookup_per_server(int(ls.t[int(blk.consumer)]))
        v, e = np.nonzero(loads)
        load_r.append(e), load_c.append(m[v]), load_v.append(float(blk.lookup_bytes) * loads[v, e] * inv_cap[e])
        far = np.flatnonzero(hops > H0)
        if far.size:  # H >= hops u only where the lookup path is longer than the layers' longest
            u = b.add_variables(far.size, kind="binary", name="u").index
            b.add_constraints(
                np.r_[np.arange(far.size), np.arange(far.size)],
                np.r_[m[far], u],
                np.r_[np.ones(far.size), -float(N) * np.ones(far.size)],
                ub=0.0,
                count=far.size,
                name="u_on",
            )
            hop_c.append(u), hop_v.append(hops[far].astype(float))
            warm.update(zip(u, (held[far] > 0).astype(float)))
    b.add_constraints(
        np.r_[np.concatenate(srv_r), np.arange(n)],
        np.r_[np.concatenate(m_c), np.full(n, C)],
        np.r_[np.concatenate(comp_v), -np.ones(n)],
        ub=-comp0 / unit,
        count=n,
        name="compute",
    )
    # in units of the server memory (bytes would put 1e11 in the rows: HiGHS warns of bad scaling)
    b.add_constraints(
        np.concatenate(srv_r),
        np.concatenate(m_c),
        np.concatenate(mem_v),
        ub=1.0 - mem0 / ls.cap,
        count=n,
        name="memory",
    )
    b.add_constraints(
        np.r_[np.concatenate(load_r), np.arange(A)],
        np.r_[np.concatenate(load_c), np.full(A, T)],
        np.r_[np.concatenate(load_v), -np.ones(A)],
        ub=-load0 * inv_cap,
        count=A,
        name="load",
    )
    if hop_c:
        hc, hv = np.concatenate(hop_c), np.concatenate(hop_v)
        rows = np.arange(hc.size)
        b.add_constraints(
            np.r_[rows, rows],
            np.r_[hc, np.full(hc.size, H)],
            np.r_[hv, -np.ones(hc.size)],
            ub=0.0,
            count=hc.size,
            name="hops",
        )
    path = ls.path()
    if path > 0:
        b.add_constraints([0], [C], [1.0], lb=path / unit, count=1, name="path")
    alpha = ls.alpha / unit
    Z = set_objective_of(b, ls.instance, C, T, H, alpha)
    model = b.build()

    # the warm start: the strategy's own blocks, its compute, loads and hops
    x0 = np.zeros(model.num_vars)
    for col, val in warm.items():
        x0[col] = val
    it_bw = float((ls.total_load() * ls.arc_inv).max(initial=0.0))
    x0[C], x0[T], x0[H] = max(ls.comp.max(initial=0.0), path) / unit, it_bw / unit, max(ls.hops(), H0)
    if Z is not None:
        x0[Z] = max(x0[C], x0[T] + alpha * x0[H])
    if options.gap is None:
        options = replace(options, gap=BLOCK_GAP)
    result = run_model(model, options, warm_start=x0 if options.backend != "cpsat" else None)
    status = solution_status(result)
    bound = None if result.bound is None else float(result.bound) * unit
    if result.values is None:
        return BlockResult(None, None, bound, status, model.num_nonzeros)
    vals = np.asarray(result.values)
    block_server = list(strategy.block_server)
    for cls, m in zip(classes, m_cols):
        counts = np.rint(vals[m]).astype(int)
        for j, srv in zip(cls, np.repeat(np.arange(n), counts)):
            block_server[j] = int(srv)
    st = Strategy(strategy.layer_degree, strategy.layer_start, tuple(block_server))
    return BlockResult(st, float(result.objective) * unit, bound, status, model.num_nonzeros)


#: :func:`polish_blocks` is not started with less time than this left. The block MILP's root bound is
#: tight and finding the placement is the slow part, so whatever it has at the deadline is used
#: (docs/notes/placement-search.md).
MIN_POLISH_S = 0.5


def polish_blocks(ls: StrategyScorer, current_s: float, deadline: float, max_nodes: int | None = None) -> float | None:
    """The local search's exact block move: ``ls`` is at a strategy scoring ``current_s``; when the
    block MILP (HiGHS, until ``deadline``, a ``time.perf_counter()``, and at most ``max_nodes``
    branch-and-bound nodes when given: a limit that, unlike the time, is the same on every machine)
    places its blocks better, ``ls`` moves there and the new score is returned, else ``ls`` stays
    and None is returned."""
    left = deadline - time.perf_counter()
    if left < MIN_POLISH_S:
        return None
    native = None if max_nodes is None else {"highs": {"mip_max_nodes": int(max_nodes)}}
    result = place_blocks_exactly(
        ls, ls.strategy(), ExactOptions(time_limit_s=left, gap=BLOCK_GAP, native_options=native)
    )
    if result.strategy is None or result.objective_s >= current_s * (1 - 1e-9):
        return None
    ls.load_state(result.strategy)
    return ls.score()[0]
