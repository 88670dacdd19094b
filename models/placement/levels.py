"""Exact placement on a fixed topology by compute levels (used by :mod:`.placement`).

For workloads whose layer times are commensurate - every allowed per-replica time an integer
multiple of one unit u, as for identical layers (a transformer's blocks: t/k for every k | n is a
multiple of t/n) - the busiest server's compute is m u for an integer level m. A depth-first
branch and bound per level then carries an exact compute value from its first node, which the
chain bound (:mod:`.bounds`) cannot: on bert-128-d8 (TopoOpt's topology) it proves the
local search's 19.23 ms within 1 % where that bound stops at 17.53 ms.

It does not reach DLRM: exact arc loads prune a node only when its partial strategy is already too
slow, and on DLRM's 24 layers that happens only deep in the tree (docs/notes/dlrm-128-gap.md).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from topoopt_ilp.core.strategy import Strategy
from topoopt_ilp.models.placement.scoring import StrategyScorer

__all__ = ["MAX_LEVELS", "MAX_TABLE_ENTRIES", "LevelResult", "level_search", "level_unit", "not_levelled"]

#: Levels (distinct busiest-server computes) the search may visit; more: not applicable.
MAX_LEVELS = 4096
#: Resharding table entries (usable types^2 x arcs) above which the search is not applicable.
MAX_TABLE_ENTRIES = 20_000_000
_UNIT_DIVISORS = 64
#: The clock is read every this many nodes.
_CLOCK_NODES = 256
#: At most this many floats (160 MB) of per-(layer, previous type) addition tables are kept.
_CACHE_FLOATS = 20_000_000
_UNIT_RTOL = 1e-9
#: Sums in another order differ in the last bits: a value must be below the threshold by this much
#: (relative) to count, and the bound is lowered by it.
_FLOAT_RTOL = 1e-9


@dataclass(frozen=True)
class LevelResult:
    """``status``: ``complete`` (every strategy scores at least ``bound``; ``strategy`` is the best one
    found below the incumbent, or None when none was), ``gave_up`` (the deadline passed: ``strategy``
    and ``bound`` as far as it got, the bound from the levels it finished) or ``not_applicable``
    (``reason`` says why)."""

    status: str
    strategy: Strategy | None = None
    value: float | None = None
    bound: float | None = None
    nodes: int = 0
    reason: str = ""


def level_unit(times: np.ndarray) -> float | None:
    """The largest u (the least positive time divided by 1..64) of which every time is an integer
    multiple (to 1e-9 relative), or None."""
    times = np.asarray(times, dtype=float)
    pos = times[times > 0]
    if not pos.size:
        return None
    for q in range(1, _UNIT_DIVISORS + 1):
        u = float(pos.min()) / q
        ratio = times / u
        if np.all(np.abs(ratio - np.rint(ratio)) <= _UNIT_RTOL * np.maximum(ratio, 1.0)):
            return u
    return None


# ------------------------------------------------------------------------------------------------
# The search
#
# Data (from StrategyScorer, per type t = (k, s)): cov_t its servers, lt[i, t] = units[i, t] u layer i's
#   time there (inf: not allowed), rep_mem[i, t]; AR_t the arc busy time of one parameter byte's
#   rings and RS(t, t') of one activation byte resharded between t and t' (the evaluator's
#   patterns, as the local search scores them), and their longest paths.
# For a level m (busiest server at exactly m units, compute C = m u) and a threshold theta:
#   a depth-first search over layers 0..L-1, each on a type with units[i, t] <= m whose replica
#   memory fits; a node carries per-server units and memory, per-arc busy time l (non-negative
#   additions: AR of each layer, RS at each change of type) and the longest path h. It is pruned when
#   combine(C, max l + alpha h [if any traffic]) >= theta, which every completion keeps (loads only
#   grow); a leaf counts only if some server is at exactly m units (the others belong to lower
#   levels). A leaf below theta becomes the best and theta = value (1 - gap).
# Levels run from the least possible (total units / n, rounded up) upwards while combine(C, 0) is
#   below theta. Every strategy sits at exactly one level and is either visited or pruned at a
#   bound >= the theta of that moment >= the final theta, so when the search completes every
#   strategy scores at least the final theta: the bound. Blocks, critical_path and comm_time are not
#   applicable (no level structure, or no compute to level).
# ------------------------------------------------------------------------------------------------
class _GaveUp(Exception):
    pass


def not_levelled(ls: StrategyScorer) -> str | None:
    """Why the search cannot apply to ``ls``'s problem whatever the incumbent, or None (it may: the
    number of levels and usable types below the incumbent are checked by :func:`level_search`)."""
    if ls.w.blocks:
        return "the workload has blocks"
    if ls.path_c is not None or ls.instance.objective != "iteration_time":
        return "only the busiest_server compute model and iteration_time are levelled"
    finite = np.isfinite(ls.lt) & (ls.rep_mem <= ls.cap)
    if level_unit(ls.lt[finite]) is None:
        return "the layer times have no common unit"
    if not finite.any(axis=1).all():
        return "a layer has no option that fits"
    return None


def level_search(ls: StrategyScorer, upper: float, gap: float, deadline: float | None) -> LevelResult:
    """The search of the comment block above from the incumbent value ``upper`` (seconds)."""
    n = ls.n
    if (reason := not_levelled(ls)) is not None:
        return LevelResult("not_applicable", reason=reason)
    finite = np.isfinite(ls.lt) & (ls.rep_mem <= ls.cap)
    u = level_unit(ls.lt[finite])
    units = np.where(finite, np.rint(np.where(finite, ls.lt, 0.0) / u), -1).astype(np.int64)
    L = len(units)
    least_total = sum(int((units[i, ok] * ls.type_k[ok]).min()) for i, ok in enumerate(units >= 0))
    m_lo = -(-least_total // n)
    m_hi = int(sum(units[i][units[i] >= 0].max() for i in range(L)))  # every layer at its slowest on one server
    if math.isfinite(upper):
        m_hi = min(m_hi, int(math.ceil(upper / u)))
    if m_hi - m_lo > MAX_LEVELS:
        return LevelResult("not_applicable", reason=f"more than {MAX_LEVELS} compute levels below the incumbent")
    A = len(ls.arc_inv)
    # the types any layer may use below the incumbent, and their patterns as arc busy times
    used = np.flatnonzero(
        (units >= 0).any(axis=0) & (units.min(axis=0, where=units >= 0, initial=np.iinfo(np.int64).max) * u < upper)
    )
    if len(used) ** 2 * A > MAX_TABLE_ENTRIES:
        return LevelResult("not_applicable", reason=f"{len(used)} usable types: the resharding tables would not fit")
    ar_busy = ls.ar[used] * ls.arc_inv  # per parameter byte
    ar_hop = np.asarray(ls.ar_hop)[used].astype(np.int64)
    rs_busy = np.zeros((len(used), len(used), A))
    rs_hop = np.zeros((len(used), len(used)), dtype=np.int64)
    if (ls.act[:-1] > 0).any():
        for a, t in enumerate(used):
            loads, hops = ls.reshard(int(t))
            rs_busy[a] = loads[used] * ls.arc_inv
            rs_hop[a] = np.asarray(hops)[used]
    cov_u, units_u, k_u = ls.coverage()[used], units[:, used], ls.type_k[used]
    mem_u = ls.rep_mem[:, used]
    # memory is only tracked when some choice of options could overfill a server
    memory_binds = float(np.where(units_u >= 0, mem_u, 0.0).max(axis=1).sum()) > ls.cap
    # Per layer, what each type adds (a node's children are rows of these: one gather each instead of
    # a product per node; measured on bert-128-d8, a node has about 8 children after the compute
    # checks, so the search's time is numpy's per-call overhead): units per server, their total,
    # AllReduce busy time and its longest path; resharding scaled once when every layer's activation
    # bytes are equal (a transformer's). Sums in another order than per node: equal to float rounding,
    # which the bound's _FLOAT_RTOL margin covers (the tests find the same nodes with the cache off).
    grp = k_u >= 2
    add_units = [units_u[i][:, None] * cov_u for i in range(L)]
    add_total = [units_u[i] * cov_u.sum(axis=1) for i in range(L)]
    add_ar = [ls.param[i] * ar_busy * grp[:, None] if ls.param[i] > 0 else None for i in range(L)]
    ar_hop_grp = np.where(grp, ar_hop, 0)
    acts = {float(v) for v in ls.act[:-1] if v > 0}
    rs_one = rs_busy * acts.pop() if len(acts) == 1 else None

    state = {"theta": upper * (1 - gap), "value": upper, "best": None, "nodes": 0}
    cache: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}  # cleared per level (allowed changes)
    cached = 0  # floats held; past _CACHE_FLOATS the cache starts afresh

    def adds(i: int, prev: int, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """What layer i on each type of ``a`` adds to the arcs' busy times and the longest path after
        layer i - 1 on ``prev`` (-1: none): its AllReduce and the resharding from prev (rs_busy[prev,
        prev] is 0 and so is its hop count: no self-pairs). One table per (i, prev) and level."""
        nonlocal cached
        hit = cache.get((i, prev))
        if hit is None:
            add_l = add_ar[i][a] if add_ar[i] is not None else np.zeros((a.size, A))
            add_h = ar_hop_grp[a] if add_ar[i] is not None else np.zeros(a.size, dtype=np.int64)
            if prev >= 0 and ls.act[i - 1] > 0:
                add_l = add_l + (rs_one[prev, a] if rs_one is not None else ls.act[i - 1] * rs_busy[prev, a])
                add_h = np.maximum(add_h, rs_hop[prev, a])
            if cached + add_l.size > _CACHE_FLOATS:
                cache.clear()
                cached = 0
            hit = cache[(i, prev)] = (add_l, add_h)
            cached += add_l.size
        return hit

    def dfs(
        i: int,
        prev: int,
        m: int,
        comp: float,
        u_srv: np.ndarray,
        u_total: int,
        mem: np.ndarray,
        load: np.ndarray,
        hops: int,
        seq: list[int],
        allowed: list[np.ndarray],
        rest_min: np.ndarray,
        rest_max: np.ndarray,
    ) -> None:
        """Children of a node scored at once (rows: the types layer i may take), then visited best first."""
        state["nodes"] += 1
        if deadline is not None and state["nodes"] % _CLOCK_NODES == 0 and time.perf_counter() > deadline:
            raise _GaveUp
        a = allowed[i]
        nu = u_srv + add_units[i][a]
        ok = nu.max(axis=1) <= m
        slack = n * m - (u_total + add_total[i][a] + rest_min[i + 1])
        ok &= (slack >= 0) & (np.maximum(m - rest_max[i + 1] - nu, 0).sum(axis=1) <= slack)
        if memory_binds:
            nm = mem[None, :] + mem_u[i, a][:, None] * cov_u[a]
            ok &= nm.max(axis=1) <= ls.cap
        if i == L - 1:  # leaves: some server exactly at the level
            ok &= nu.max(axis=1) == m
        a = a[ok]
        if not a.size:
            return
        nu = nu[ok]
        add_l, add_h = adds(i, prev, allowed[i])
        nl = load + add_l[ok]
        nh = np.maximum(add_h[ok], hops)
        busy = nl.max(axis=1) if A else np.zeros(a.size)
        value = ls.combine(comp, busy, np.where(busy > 0, nh, 0))  # no latency without traffic
        for c in np.argsort(value, kind="stable"):
            if value[c] >= state["theta"] * (1 - _FLOAT_RTOL):
                break
            if i == L - 1:
                state.update(value=float(value[c]), best=seq + [int(a[c])], theta=float(value[c]) * (1 - gap))
                break
            nm = mem + mem_u[i, a[c]] * cov_u[a[c]] if memory_binds else mem
            dfs(
                i + 1,
                int(a[c]),
                m,
                comp,
                nu[c],
                int(u_total + add_total[i][a[c]]),
                nm,
                nl[c],
                int(nh[c]),
                seq + [int(a[c])],
                allowed,
                rest_min,
                rest_max,
            )

    def found() -> Strategy | None:
        if state["best"] is None:
            return None
        tt = state["best"]
        return Strategy(tuple(int(ls.type_k[used[t]]) for t in tt), tuple(int(ls.type_s[used[t]]) for t in tt), ())

    m = m_lo
    try:
        while m <= m_hi and m * u < state["theta"] * (1 - _FLOAT_RTOL):  # compute alone: C + 0 or max(C, 0)
            allowed = [np.flatnonzero((units_u[i] >= 0) & (units_u[i] <= m)) for i in range(L)]
            cache.clear()
            cached = 0
            if all(x.size for x in allowed):
                least = np.array([int((units_u[i, x] * k_u[x]).min()) for i, x in enumerate(allowed)] + [0])
                most = np.array([int(units_u[i, x].max()) for i, x in enumerate(allowed)] + [0])
                rest_min = np.cumsum(least[::-1])[::-1]  # rest_min[i]: units layers i.. add at least, in all
                rest_max = np.cumsum(most[::-1])[::-1]  # rest_max[i]: at most, on one server
                dfs(
                    0,
                    -1,
                    m,
                    m * u,
                    np.zeros(n, dtype=np.int64),
                    0,
                    np.zeros(n),
                    np.zeros(A),
                    0,
                    [],
                    allowed,
                    rest_min,
                    rest_max,
                )
            m += 1
    except _GaveUp:
        # Levels below m are settled against theta; every strategy at level m or above computes at
        # least m u (and pays at least no communication).
        partial = min(state["theta"], float(ls.combine(m * u, 0.0, 0)))
        return LevelResult("gave_up", found(), state["value"], partial * (1 - _FLOAT_RTOL), state["nodes"])
    return LevelResult("complete", found(), state["value"], state["theta"] * (1 - _FLOAT_RTOL), state["nodes"])
