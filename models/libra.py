"""LIBRA's per-dimension bandwidth allocation, solved exactly with open LP solvers.

LIBRA (Won et al., ISPASS 2024) chooses the bandwidth ``B_d`` (GB/s per NPU) of every dimension of
a fixed hierarchical network to minimise the iteration time, or time x network cost, of a workload
(the problem, its message split and cost model: :mod:`topoopt_ilp.libra.problem`). LIBRA's code adds
``I_d`` with the bilinear equality ``B_d * I_d = 1`` and needs Gurobi's non-convex solver. Both of
its objectives are convex programs in the right variables, so a cutting-plane method over LPs, each
solved through :mod:`topoopt_ilp.solvers` (HiGHS by default; SCIP, CBC too), proves the optimum to
a relative gap (default 1e-6) with open solvers. The mathematics is the comment block above
:func:`build_lp`.

Public entry point: :func:`solve_bandwidth` -> :class:`BandwidthSolution`.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from topoopt_ilp.errors import InputError
from topoopt_ilp.libra.problem import PHASES, BandwidthBreakdown, HierarchyProblem, evaluate_bandwidths
from topoopt_ilp.solvers import (
    DEFAULT_REL_GAP,
    BackendUnavailableError,
    Capability,
    LinearModel,
    ModelBuilder,
    UnknownBackendError,
    get_backend,
)
from topoopt_ilp.solvers import solve as solver_solve

__all__ = [
    "BandwidthSolution",
    "LibraData",
    "LibraLP",
    "libra_data",
    "message_matrix",
    "build_lp",
    "lp_point",
    "model_objective",
    "equal_split",
    "solve_bandwidth",
    "DEFAULT_GAP",
    "OPTIMAL_GAP",
    "SOLUTION_FORMAT",
]

DEFAULT_GAP = 1e-6
#: The largest gap (of the communication time, relative) still called ``optimal``: the tolerance
#: ``solve`` uses (solvers.options.DEFAULT_REL_GAP). With a looser ``gap`` the result is ``feasible``.
OPTIMAL_GAP = DEFAULT_REL_GAP
SOLUTION_FORMAT = "topoopt-libra-solution"
#: The least tangent point of the cuts i_d >= 1 / b_d, b_d = B_d / s (s: the largest B_d any
#: dimension may get): B_d below 1e-9 of that is not resolved (_add_tangents).
MIN_TANGENT = 1e-9
#: A dimension gets its own scale (the best allocation's bandwidth) only when that is below this
#: share of the common one.
RESCALE_BELOW = 1e-3
#: ... and never below this share: a tinier scale makes the collectives over that dimension dominate
#: the LP's objective normalisation, and the rest of it drown in the solvers' tolerances (SCIP's bound
#: came out 0.5 % above the optimum with a scale of 1e-9).
RESCALE_FLOOR = 1e-6
#: Hard cap on cutting-plane rounds (a safety net: the 1-D cuts close the gap in tens of rounds).
MAX_ROUNDS = 2000
_US_PER_S = 1e6


# ----------------------------------------------------------------------------------------------
# Data: the message matrix, by numpy (independent of hierarchy.evaluate_bandwidths' loops)
# ----------------------------------------------------------------------------------------------
_TYPE_CODE = {"all_reduce": 0, "reduce_scatter": 1, "all_gather": 2, "all_to_all": 3}


def message_matrix(problem: HierarchyProblem) -> tuple[np.ndarray, np.ndarray, float]:
    """``(W, M, compute_us)``: the distinct collectives' message rows ``M[p, d]`` (bytes per NPU on
    dimension d), how often each occurs in an iteration ``W[p]`` (layer counts summed), and the total
    compute time (microseconds). Rows without traffic are dropped."""
    D = problem.num_dimensions
    sizes, comms, kinds, weights, compute = [], [], [], [], 0.0
    for layer in problem.layers:
        for p in PHASES:
            ph = layer.phase(p)
            compute += layer.count * ph.compute_us
            if ph.collective is not None:
                sizes.append(ph.collective.bytes)
                comms.append(ph.collective.communicator)
                kinds.append(_TYPE_CODE[ph.collective.type])
                weights.append(layer.count)
    if not sizes:
        return np.zeros(0), np.zeros((0, D)), compute
    S = np.asarray(sizes, dtype=float)[:, None]
    c = np.asarray(comms, dtype=float).reshape(len(sizes), D)
    c = np.where(c >= 2, c, 1.0)  # -1 and 1: the dimension is unused (c - 1 = 0 moves nothing)
    k = np.asarray(kinds)[:, None]
    before = np.cumprod(c, axis=1) / c  # prod_{j<d} c_j: the shrink seen by dimension d
    after = np.cumprod(c[:, ::-1], axis=1)[:, ::-1] / c  # prod_{j>d} c_j: all-gather's growth
    M = np.select(
        [k == 0, k == 1, k == 2, k == 3],
        [2 * S / before * (c - 1) / c, S / before * (c - 1) / c, S * after * (c - 1), S * (c - 1) / c],
    )
    W = np.asarray(weights, dtype=float)
    keep = M.max(axis=1) > 0
    M, W = M[keep], W[keep]
    if not M.shape[0]:
        return np.zeros(0), np.zeros((0, D)), compute
    rows, inverse = np.unique(M, axis=0, return_inverse=True)
    return np.bincount(inverse.ravel(), weights=W, minlength=rows.shape[0]), rows, compute


@dataclass(frozen=True, eq=False)
class LibraData:
    """The problem as arrays. ``M`` in us x GB/s (bytes / 1e3), so ``M[p, d] / B_d`` is microseconds."""

    problem: HierarchyProblem
    W: np.ndarray  # (P,) occurrences of each distinct collective
    M: np.ndarray  # (P, D) message per dimension, us x GB/s
    compute_us: float
    used: np.ndarray  # (D,) bool: the dimension carries traffic
    lo: np.ndarray  # (D,) GB/s
    hi: np.ndarray  # (D,) GB/s (inf: none)
    order: np.ndarray  # (K, 2) int: B[order[k, 0]] >= B[order[k, 1]]
    G: np.ndarray  # (R, D) linear constraints: G[r] @ B  sense[r]  h[r]
    sense: np.ndarray  # (R,) "<=", ">=" or "=="
    h: np.ndarray  # (R,) GB/s
    budget_w: np.ndarray  # (D,) budget row: budget_w @ B <= budget (1 per GB/s, or $ per GB/s)
    budget: float
    spend_all: bool
    cost_w: np.ndarray | None  # (D,) $ per GB/s of B_d (N * u_d), None without a cost model


def libra_data(problem: HierarchyProblem) -> LibraData:
    """Arrays of ``problem`` (see :class:`LibraData`)."""
    W, M, compute = message_matrix(problem)
    lo, hi = problem.bounds()
    order = np.asarray(problem.orderings_index(), dtype=np.int64).reshape(-1, 2)
    cost_w = None
    if problem.has_cost:
        cost_w = problem.num_npus * np.array([d.npu_unit_cost for d in problem.dimensions], dtype=float)
    D = problem.num_dimensions
    budget_w = np.ones(D) if problem.budget.kind == "total_bandwidth" else cost_w
    G, sense, h = problem.linear_rows()
    return LibraData(
        problem,
        W,
        M / 1e3,
        compute,
        M.max(axis=0, initial=0.0) > 0 if M.size else np.zeros(D, bool),
        lo,
        hi,
        order,
        G,
        sense,
        h,
        budget_w,
        problem.budget.value,
        problem.budget.spend_all,
        cost_w,
    )


# ----------------------------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------------------------
# Data:      dimensions d = 1..D; distinct collectives p = 1..P, each occurring W_p times per
#            iteration with message M_pd (us x GB/s: bytes/1e3 per NPU on dimension d, the split of
#            hierarchy.py); compute time C (us, the sum of every phase's compute x layer count);
#            U = {d : some M_pd > 0} (dimensions with traffic); bounds lo_d <= B_d <= hi_d (min, max
#            and fixed values); orderings B_i >= B_j for (i, j) in O; the user's linear rows
#            G_r @ B (<=, >=, ==) h_r (LIBRA's own, e.g. B3 + B4 == 200); budget row a @ B <= beta
#            (a = 1: total bandwidth; a = cost weights u: network cost; "==" when spend_all);
#            cost weights u_d = N * (element prices of d), so network cost = u @ B.
#
# Problem (iteration_time):   minimise  C + sum_p W_p * max_{d in U} M_pd / B_d
#                             over B in P = {B >= 0 : lo <= B <= hi, B_i >= B_j (O), G B (<=,>=,==) h, a @ B <= beta}.
# Every function M_pd / B_d is convex on B_d > 0, a max and a positive sum of convex functions are
# convex, and P is a polytope: a convex program. LIBRA's inverse I_d = 1/B_d makes the time linear;
# we keep B (so the budget, bounds and orderings stay linear) and RELAX the equality to I_d >= 1/B_d:
#
# Variables: b_d = B_d / s_d >= 0 (scales s_d: the largest bandwidth P allows, for every d; then, for a
#            d whose best B_d so far is below RESCALE_BELOW of that, this B_d, so that a dimension with
#            1e-5 of another's bandwidth keeps its columns and cuts of order 1), mu > 0 (fixed to 1 here), i_d >= 0 for
#            d in U (i_d = s_d * I_d), t_p >= 0 (collective p's time, us; the LP holds t'_p = t_p / tau_p
#            with tau_p = max_d M_pd / s_d, so every row is of order 1).
# Constraints:
#   time:      t_p - (M_pd / s_d) * i_d >= 0            for every (p, d) with M_pd > 0
#   epigraph:  i_d >= 1 / b_d                           (convex; outer-approximated, see below)
#   bounds:    b_d - (lo_d / s_d) * mu >= 0,  b_d - (hi_d / s_d) * mu <= 0
#   order:     s_i b_i - s_j b_j >= 0                   for (i, j) in O
#   linear:    (G_r @ (s * b) - h_r * mu) / n_r  (<=, >=, ==)  0   (n_r = max(max|G_r s|, |h_r|): rows of order 1)
#   budget:    (1 / beta) * a @ (s * b) - mu <= 0       (== 0 with spend_all)
# Objective: minimise C * nu + sum_p W_p t_p            (nu = 1/mu = 1 here: the constant C;
#                                                         the LP's objective is this / T_ref, T_ref =
#                                                         C + sum_p W_p tau_p, for the same reason)
#
# Why the relaxation is exact: the objective is non-decreasing in every i_d, so for any feasible
# (b, i) the point (b, 1/b) is feasible and no worse; the optimum has i_d = 1/b_d on U (and b off U
# only has to be feasible). Outer approximation (Kelley): the convex constraint i_d >= 1/b_d is
# replaced by its tangents at points b0 > 0, i_d >= 2/b0 - b_d/b0^2 (1/b lies above every tangent, so
# each cut keeps every feasible point). Each round solves the LP with the cuts so far:
#   * its optimum is a LOWER bound (a relaxation of the convex program);
#   * its b is a point of P (the constraints on b are exact, not approximated), so the time of
#     B = s * b / mu, computed exactly, is an UPPER bound (a point with B_d = 0 where d carries
#     traffic is first moved a little towards an interior point of P: _repaired);
#   * a tangent is added at each b_d whose i_d lies below 1/b_d. The cuts are one-dimensional, so
#     the LP's i_d converges to 1/b_d and the bounds meet: stop at (UB - LB) / UB <= gap.
# "optimal" is reported only with the gap closed; a time limit gives "feasible" with its gap. The
# bounds hold up to the LP solver's tolerances (HiGHS: 1e-7; SCIP's 1e-6 can stall the proof near a
# gap of 2e-6, reported as "feasible" with that gap). P is bounded (the budget has positive weights),
# and the first scale is the largest B_d over P (one small LP per dimension with traffic; 0 there
# means no finite time: infeasible). Initial tangents at that B_d, its halvings down to 1/64, and the
# equal split; the tangent points are kept in GB/s, so a change of scale keeps every cut.
#
# Problem (perf_per_cost):    minimise  (C + sum_p W_p max_d M_pd / B_d) * (u @ B)   over B in P.
# A product of a convex and a linear function is not convex, but the perspective (Charnes-Cooper)
# change of variables makes it so: with c_ref > 0 fixed, let mu = c_ref / (u @ B) and B~ = mu * B
# (so u @ B~ = c_ref). Then, since M/B_d = mu * M/B~_d,
#     (C + sum_p W_p max_d M_pd / B_d) * (u @ B) = c_ref * (C / mu + sum_p W_p max_d M_pd / B~_d),
# which is convex in (B~, mu) (1/mu and M/B~_d are convex), and every linear constraint g @ B <= h
# of P becomes g @ B~ - h * mu <= 0 (homogenised), which is linear. So the same LP serves, with
# b = B~ / s, mu free in [c_ref / c_max, c_ref / c_min] = [1, c_max / c_min] (c_min, c_max: the least
# and largest cost over P, found by two LPs; c_ref = c_max), the extra row (s / c_ref) * u @ b = 1, and nu >= 1/mu
# outer-approximated by tangents nu >= 2/mu0 - mu/mu0^2. Each LP point maps back to B = s * b / mu in
# P: upper bounds again, and the lower bound is the LP. Exactness needs c_min > 0: when B = 0 is in P
# the product keeps falling as every bandwidth shrinks and no optimum exists (said, not solved).
#
# All constraint blocks are built from index arrays (COO triplets) in a few numpy calls.
@dataclass(frozen=True, eq=False)
class LibraLP:
    """A built LP: the model and where its columns are."""

    model: LinearModel
    scale: np.ndarray  # (D,) s_d: b_d = B~_d / s_d
    c_ref: float | None  # perf_per_cost: u @ B~ = c_ref
    b: np.ndarray  # (D,) column indices
    mu: int
    i: np.ndarray  # (D,) column index of i_d, -1 for d not in U
    nu: int  # -1 for iteration_time
    t: np.ndarray  # (P,)
    t_scale: np.ndarray  # (P,) tau_p: t_p = tau_p * t'_p (the LP holds t', of order 1/b)
    obj_scale: float  # T_ref: the LP objective is the time (us) divided by T_ref


def build_lp(
    data: LibraData,
    objective: str,
    scale: float | np.ndarray,
    *,
    c_ref: float | None = None,
    mu_bounds: tuple[float, float] = (1.0, 1.0),
    b_cuts: dict[int, list[float]] | None = None,
    mu_cuts: list[float] | None = None,
    b_objective: np.ndarray | None = None,
) -> LibraLP:
    """Build the LP of the comment block above (``b_cuts[d]``: tangent points b0 of i_d >= 1/b_d;
    ``mu_cuts``: tangent points mu0 of nu >= 1/mu). ``b_objective`` replaces the objective by
    ``b_objective @ b`` (used for the bounding LPs: least / largest cost, largest B_d). ``scale``: s,
    one for all dimensions or one per dimension (b_d = B~_d / s_d)."""
    ppc = objective == "perf_per_cost"
    bld = ModelBuilder(name=f"libra_{objective}")
    c = _columns(bld, data, scale, mu_bounds, with_time=b_objective is None, with_nu=ppc and b_objective is None)
    if b_objective is None and data.W.size:
        _time_rows(bld, c)
    _bound_rows(bld, c)
    _order_rows(bld, c)
    _linear_rows(bld, c)
    _budget_row(bld, c)
    if ppc:
        _norm_row(bld, c, c_ref)
    if b_objective is None:
        _epigraph_cuts(bld, c, b_cuts or {})
        if ppc and mu_cuts:
            _nu_cuts(bld, c, mu_cuts)
        _time_objective(bld, c, ppc)
    else:
        bld.set_objective(c.b, b_objective)
    return LibraLP(bld.build(), c.s, c_ref, c.b, int(c.mu), c.i, int(c.nu), c.t, c.tau, c.t_ref)


@dataclass(frozen=True, eq=False)
class _Columns:
    """The columns of an LP being built (indices as in :class:`LibraLP`) and the scales its rows use."""

    data: LibraData
    s: np.ndarray  # (D,) s_d
    used: np.ndarray  # dimensions with traffic (indices)
    b: np.ndarray
    mu: int
    i: np.ndarray  # -1 off U, and everywhere in a bounding LP
    nu: int  # -1 without the perf_per_cost epigraph
    t: np.ndarray  # empty in a bounding LP
    tau: np.ndarray  # (P,) tau_p = max_d M_pd / s_d
    t_ref: float  # T_ref = C + sum_p W_p tau_p (1 when that is 0)


def _columns(
    bld: ModelBuilder,
    data: LibraData,
    scale: float | np.ndarray,
    mu_bounds: tuple[float, float],
    with_time: bool,
    with_nu: bool,
) -> _Columns:
    """Variables b, mu, then (not in a bounding LP) i on U, nu (perf_per_cost) and t."""
    D, P = data.problem.num_dimensions, data.W.size
    s = np.broadcast_to(np.asarray(scale, dtype=float), (D,)).copy()
    b = bld.add_variables(D, name="b").index
    mu = bld.add_variables(1, lb=mu_bounds[0], ub=mu_bounds[1], name="mu").index[0]
    used = np.flatnonzero(data.used)
    i_cols = np.full(D, -1, dtype=np.int64)
    if used.size and with_time:
        i_cols[used] = bld.add_variables(used.size, name="i").index
    nu = bld.add_variables(1, name="nu").index[0] if with_nu else -1
    t = bld.add_variables(P, name="t").index if with_time else np.zeros(0, dtype=np.int64)
    # Row and objective scaling (CBC and SCIP keep ~1e-9 relative precision only): t_p = tau_p t'_p with
    # tau_p = max_d M_pd / s, and the objective divided by T_ref = C + sum_p W_p tau_p.
    tau = (data.M / s[None, :]).max(axis=1) if P else np.zeros(0)
    t_ref = float(data.compute_us + data.W @ tau) or 1.0
    return _Columns(data, s, used, b, mu, i_cols, nu, t, tau, t_ref)


def _pair_rows(bld: ModelBuilder, first, second, first_vals, second_vals, **bounds) -> None:
    """One row per entry: ``first_vals * x[first] + second_vals * x[second]`` (``bounds``: the ``lb``,
    ``ub`` and ``name`` of :meth:`ModelBuilder.add_constraints`)."""
    r = np.arange(len(first))
    bld.add_constraints(
        np.concatenate([r, r]),
        np.concatenate([first, second]),
        np.concatenate([first_vals, second_vals]),
        count=r.size,
        **bounds,
    )


def _time_rows(bld: ModelBuilder, c: _Columns) -> None:
    """time: t'_p - (M_pd / (s_d tau_p)) i_d >= 0 for every M_pd > 0."""
    M = c.data.M
    p_idx, d_idx = np.nonzero(M > 0)
    coef = -M[p_idx, d_idx] / (c.s[d_idx] * c.tau[p_idx])
    _pair_rows(bld, c.t[p_idx], c.i[d_idx], np.ones(p_idx.size), coef, lb=0.0, name="time")


def _bound_rows(bld: ModelBuilder, c: _Columns) -> None:
    """bounds: b_d - (lo_d / s_d) mu >= 0 and b_d - (hi_d / s_d) mu <= 0 (homogenised with mu)."""
    lo, hi = c.data.lo, c.data.hi
    has_lo = np.flatnonzero(lo > 0)
    if has_lo.size:
        mu = np.full(has_lo.size, c.mu)
        _pair_rows(bld, c.b[has_lo], mu, np.ones(has_lo.size), -lo[has_lo] / c.s[has_lo], lb=0.0, name="lower")
    has_hi = np.flatnonzero(np.isfinite(hi))
    if has_hi.size:
        mu = np.full(has_hi.size, c.mu)
        _pair_rows(bld, c.b[has_hi], mu, np.ones(has_hi.size), -hi[has_hi] / c.s[has_hi], ub=0.0, name="upper")


def _order_rows(bld: ModelBuilder, c: _Columns) -> None:
    """order: s_i b_i - s_j b_j >= 0 for (i, j) in O, divided by the larger s."""
    order = c.data.order
    if order.shape[0]:
        hi_s, lo_s = c.s[order[:, 0]], c.s[order[:, 1]]
        top = np.maximum(hi_s, lo_s)
        _pair_rows(bld, c.b[order[:, 0]], c.b[order[:, 1]], hi_s / top, -lo_s / top, lb=0.0, name="order")


def _linear_rows(bld: ModelBuilder, c: _Columns) -> None:
    """linear: (G_r @ (s * b) - h_r mu) / n_r  (<=, >=, ==)  0."""
    G, h, sense = c.data.G, c.data.h, c.data.sense
    if h.size:
        R, Dn = G.shape
        norm = np.maximum(np.maximum(np.abs(G * c.s[None, :]).max(axis=1), np.abs(h)), 1e-300)
        rows = np.repeat(np.arange(R), Dn + 1)
        cols = np.tile(np.append(c.b, c.mu), R)
        vals = np.hstack([G * c.s[None, :], -h[:, None]]).ravel() / np.repeat(norm, Dn + 1)
        keep = vals != 0
        lower = np.where(sense == "<=", -np.inf, 0.0).astype(float)
        upper = np.where(sense == ">=", np.inf, 0.0).astype(float)
        bld.add_constraints(rows[keep], cols[keep], vals[keep], lb=lower, ub=upper, count=R, name="linear")


def _budget_row(bld: ModelBuilder, c: _Columns) -> None:
    """budget: (s / beta) a @ b - mu <= 0 (== 0 with spend_all)."""
    data = c.data
    bld.add_constraints(
        np.zeros(c.b.size + 1, dtype=np.int64),
        np.append(c.b, c.mu),
        np.append(c.s * data.budget_w / data.budget, -1.0),
        lb=0.0 if data.spend_all else -np.inf,
        ub=0.0,
        count=1,
        name="budget",
    )


def _norm_row(bld: ModelBuilder, c: _Columns, c_ref: float) -> None:
    """perf_per_cost's normalisation: (s / c_ref) u @ b = 1."""
    rows = np.zeros(c.b.size, dtype=np.int64)
    bld.add_constraints(rows, c.b, c.s * c.data.cost_w / c_ref, lb=1.0, ub=1.0, count=1, name="norm")


def _epigraph_cuts(bld: ModelBuilder, c: _Columns, b_cuts: dict[int, list[float]]) -> None:
    """epigraph, outer-approximated: i_d + b_d / b0^2 >= 2 / b0 at each tangent point b0 of d in U."""
    pts = [(d, b0) for d in c.used for b0 in b_cuts.get(int(d), [])]
    if pts:
        d_arr, b0 = np.array([p[0] for p in pts]), np.array([p[1] for p in pts], dtype=float)
        _pair_rows(bld, c.i[d_arr], c.b[d_arr], np.ones(b0.size), 1.0 / b0**2, lb=2.0 / b0, name="cut_i")


def _nu_cuts(bld: ModelBuilder, c: _Columns, mu_cuts: list[float]) -> None:
    """perf_per_cost's nu >= 1/mu, outer-approximated: nu + mu / mu0^2 >= 2 / mu0."""
    m0 = np.asarray(mu_cuts, dtype=float)
    nu, mu = np.full(m0.size, c.nu), np.full(m0.size, c.mu)
    _pair_rows(bld, nu, mu, np.ones(m0.size), 1.0 / m0**2, lb=2.0 / m0, name="cut_nu")


def _time_objective(bld: ModelBuilder, c: _Columns, ppc: bool) -> None:
    """Objective: (C nu + sum_p W_p tau_p t'_p) / T_ref (nu = 1 for iteration_time: C a constant)."""
    data = c.data
    if ppc:
        bld.set_objective(np.append(c.t, c.nu), np.append(data.W * c.tau, data.compute_us) / c.t_ref)
    else:
        bld.set_objective(c.t, data.W * c.tau / c.t_ref, constant=data.compute_us / c.t_ref)


def _bandwidths(lp: LibraLP, x: np.ndarray) -> np.ndarray:
    """B = s * b / mu of an LP point."""
    return lp.scale * x[lp.b] / x[lp.mu]


def lp_point(lp: LibraLP, data: LibraData, B: np.ndarray) -> np.ndarray:
    """The LP's column vector of an allocation ``B`` (GB/s): b = mu B / s, i_d = 1/b_d, nu = 1/mu,
    t_p = max_d (M_pd / s) i_d (the point on the convex constraints, where the relaxation is exact)."""
    B = np.asarray(B, dtype=float)
    x = np.zeros(lp.model.num_vars)
    mu = 1.0 if lp.c_ref is None else lp.c_ref / float(data.cost_w @ B)
    x[lp.mu] = mu
    x[lp.b] = mu * B / lp.scale
    used = lp.i >= 0
    with np.errstate(divide="ignore"):
        x[lp.i[used]] = 1.0 / x[lp.b[used]]
    if lp.nu >= 0:
        x[lp.nu] = 1.0 / mu
    if lp.t.size:
        full_i = np.zeros(data.M.shape[1])
        full_i[used] = x[lp.i[used]]
        with np.errstate(invalid="ignore"):
            x[lp.t] = np.where(
                data.M > 0, data.M / (lp.scale[None, :] * lp.t_scale[:, None]) * full_i[None, :], 0.0
            ).max(axis=1)
    return x


def model_objective(lp: LibraLP, data: LibraData, B: np.ndarray) -> float:
    """The LP's objective at the point of allocation ``B``, in the problem's units (iteration time in
    seconds, or seconds x $ for perf_per_cost)."""
    value = lp.model.objective_value(lp_point(lp, data, B))
    return _to_units(lp, value)


def _to_units(lp: LibraLP, value: float) -> float:
    return value * lp.obj_scale / _US_PER_S * (1.0 if lp.c_ref is None else lp.c_ref)


def _exact_value(data: LibraData, objective: str, B: np.ndarray) -> float:
    """The objective at ``B`` from the arrays (the upper bound of a round), problem units."""
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.where(data.M > 0, data.M / B[None, :], 0.0)
    t = data.compute_us + float(data.W @ per.max(axis=1, initial=0.0)) if data.W.size else data.compute_us
    t /= _US_PER_S
    return t if objective == "iteration_time" else t * float(data.cost_w @ B)


def _repaired(data: LibraData, objective: str, B: np.ndarray, interior: np.ndarray) -> tuple[np.ndarray, float]:
    """An LP point may put a dimension that carries a little traffic at B_d = 0 (an infinite time):
    when its time hardly moves the objective, the LP solver may stop there within its tolerances,
    and SCIP did. The best of ``(1 - theta) B + theta interior`` over a few small theta: points of P
    (both ends are, and P is convex) with every used B_d > 0."""
    best = (B, math.inf)
    for theta in 10.0 ** -np.arange(1, 8):
        cand = (1 - theta) * B + theta * interior
        value = _exact_value(data, objective, cand)
        if value < best[1]:
            best = (cand, value)
    return best


# ----------------------------------------------------------------------------------------------
# Result
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class BandwidthSolution:
    """Outcome of :func:`solve_bandwidth`.

    ``objective``: the evaluator's value at ``bandwidths_gbps`` (``iteration_time``: seconds;
    ``perf_per_cost``: seconds x $). ``bound``: proven lower bound (same units). ``gap``:
    ``(objective - bound) / objective``. ``equal_split_*``: the baseline that gives every dimension
    the same bandwidth (fixed dimensions keep theirs) and spends the whole budget.
    """

    status: str
    objective_name: str
    bandwidths_gbps: tuple[float, ...] | None
    objective: float | None
    bound: float | None
    gap: float | None
    wall_time_s: float
    iterations: int
    backend: str
    iteration_time_s: float | None = None
    cost_usd: float | None = None
    equal_split_gbps: tuple[float, ...] | None = None
    equal_split_time_s: float | None = None
    equal_split_objective: float | None = None
    equal_split_feasible: bool | None = None
    message: str = ""
    dimension_names: tuple[str, ...] = field(default=())

    @property
    def has_solution(self) -> bool:
        """True when ``bandwidths_gbps`` holds a feasible allocation."""
        return self.bandwidths_gbps is not None

    @property
    def speedup_vs_equal(self) -> float | None:
        """equal-split iteration time / this iteration time."""
        if self.iteration_time_s is None or not self.equal_split_time_s or self.iteration_time_s <= 0:
            return None
        return self.equal_split_time_s / self.iteration_time_s

    def to_dict(self, instance_name: str | None = None) -> dict[str, Any]:
        """JSON data (``"format": "topoopt-libra-solution"``)."""
        names = self.dimension_names
        bw = None if self.bandwidths_gbps is None else dict(zip(names, self.bandwidths_gbps))
        eq = None if self.equal_split_gbps is None else dict(zip(names, self.equal_split_gbps))
        out: dict[str, Any] = {"format": SOLUTION_FORMAT, "version": 1}
        if instance_name:
            out["instance"] = instance_name
        out.update(
            status=self.status,
            objective_name=self.objective_name,
            objective=self.objective,
            bound=self.bound,
            gap=self.gap,
            wall_time_s=self.wall_time_s,
            iterations=self.iterations,
            backend=self.backend,
            bandwidths_gbps=bw,
            iteration_time_s=self.iteration_time_s,
            cost_usd=self.cost_usd,
            equal_split={
                "bandwidths_gbps": eq,
                "iteration_time_s": self.equal_split_time_s,
                "objective": self.equal_split_objective,
                "feasible": self.equal_split_feasible,
            },
            speedup_vs_equal=self.speedup_vs_equal,
            message=self.message,
        )
        return out


def equal_split(problem: HierarchyProblem) -> np.ndarray:
    """LIBRA's baseline: fixed dimensions keep their value, the others get one common bandwidth that
    spends the rest of the budget (it may break min/max/orderings; the evaluator says so)."""
    D = problem.num_dimensions
    fixed = problem.fixed()
    B = np.zeros(D)
    free = [d for d in range(D) if d not in fixed]
    for d, v in fixed.items():
        B[d] = v
    if problem.budget.kind == "total_bandwidth":
        w = np.ones(D)
    else:
        w = np.array([problem.num_npus * d.npu_unit_cost for d in problem.dimensions])
    rest = problem.budget.value - float(sum(w[d] * v for d, v in fixed.items()))
    if free and rest > 0 and w[free].sum() > 0:
        B[free] = rest / w[free].sum()
    return B


# ----------------------------------------------------------------------------------------------
# Solving
# ----------------------------------------------------------------------------------------------
def _direct_infeasibility(data: LibraData) -> str | None:
    """A reason the constraints cannot be met, when it shows without solving anything."""
    names = data.problem.dimension_names
    for d in range(len(names)):
        if data.lo[d] > data.hi[d]:
            return (
                f"dimension {names[d]!r} needs at least {data.lo[d]:g} GB/s but may have at most {data.hi[d]:g} "
                f"(min, max and fixed values disagree)"
            )
    unit = "GB/s" if data.problem.budget.kind == "total_bandwidth" else "$"
    least = float(data.budget_w @ data.lo)
    if least > data.budget * (1 + 1e-12):
        return (
            f"the minimum and fixed bandwidths alone need {least:.6g} {unit}, more than the budget of "
            f"{data.budget:.6g} {unit}"
        )
    if data.spend_all and np.isfinite(data.hi).all() and float(data.budget_w @ data.hi) < data.budget * (1 - 1e-12):
        return (
            f"spend_all: the maximum and fixed bandwidths allow only {float(data.budget_w @ data.hi):.6g} {unit}, "
            f"less than the budget of {data.budget:.6g} {unit}"
        )
    for i, j in data.order:
        if data.lo[j] > data.hi[i]:
            return (
                f"ordering {names[i]} >= {names[j]} cannot hold: {names[j]} needs at least {data.lo[j]:g} GB/s, "
                f"{names[i]} may have at most {data.hi[i]:g}"
            )
    for d in np.flatnonzero(data.used & (data.hi <= 0)):
        return f"dimension {names[d]!r} carries traffic but its bandwidth is capped at 0: no finite iteration time"
    return None


class _Clock:
    def __init__(self, limit: float | None) -> None:
        self.t0, self.limit = time.monotonic(), limit

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def remaining(self) -> float | None:
        return None if self.limit is None else self.limit - self.elapsed()

    def expired(self) -> bool:
        r = self.remaining()
        return r is not None and r <= 0


class _Stop(Exception):
    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def _run(lp: LibraLP, backend: str, clock: _Clock):
    remaining = clock.remaining()
    if remaining is not None and remaining <= 0:
        raise _Stop("limit", "time limit reached")
    kwargs: dict[str, Any] = {}
    if remaining is not None:
        kwargs.update(time_limit_s=remaining, isolate=False)
    res = solver_solve(lp.model, backend, **kwargs)
    status = res.status.value
    if status == "optimal":
        return res
    if status == "infeasible":
        raise _Stop(
            "infeasible",
            "the budget, bounds, orderings and linear constraints together admit no allocation (the LP is infeasible)",
        )
    if status in ("no_solution", "feasible"):
        raise _Stop("limit", f"time limit reached in an LP ({status})")
    raise _Stop("error", f"the {backend} LP solve failed: {status} {res.message}".strip())


def _least_idle(data: LibraData, B: np.ndarray, backend: str, clock: _Clock) -> np.ndarray:
    """``B`` with every dimension that carries no traffic lowered to the least the constraints allow
    (one LP with the other dimensions fixed): the LP left them at any feasible value, and budget
    they do not need is better left unspent. The objective does not change."""
    idle = ~data.used
    if not idle.any() or data.spend_all:  # spend_all: the budget is spent either way
        return B
    lo, hi = data.lo.copy(), data.hi.copy()
    lo[data.used] = hi[data.used] = B[data.used]
    fixed = dataclasses.replace(data, lo=lo, hi=hi)
    w = np.where(idle, data.budget_w, 0.0)
    scale = max(1.0, float(B.max()))
    try:
        lp = build_lp(fixed, "iteration_time", scale, b_objective=w / w.max())
        res = _run(lp, backend, clock)
    except _Stop:  # a tolerance or the clock: keep the allocation as it is (it is feasible)
        return B
    out = B.copy()
    out[idle] = np.clip(scale * res.values[lp.b][idle], data.lo[idle], data.hi[idle])
    return out


def _check_backend(backend: str) -> None:
    try:
        info = get_backend(backend)
    except UnknownBackendError as exc:
        raise InputError(str(exc)) from None
    if not info.is_available():
        raise InputError(
            str(
                BackendUnavailableError(
                    f"backend {backend!r} needs the Python package {info.package!r}: pip install {info.pip_name}"
                )
            )
        )
    if not info.supports(Capability.CONTINUOUS_VARIABLES):
        raise InputError(
            f"backend {backend!r} takes all-integer models only; the LIBRA model is a sequence of LPs "
            f"(use highs, scip or cbc)"
        )


def solve_bandwidth(
    problem: HierarchyProblem,
    objective: str | None = None,
    backend: str = "highs",
    time_limit_s: float | None = None,
    gap: float = DEFAULT_GAP,
) -> BandwidthSolution:
    """Optimal per-dimension bandwidths of ``problem`` (comment block above :func:`build_lp`).

    Parameters
    ----------
    problem : HierarchyProblem
    objective : ``"iteration_time"`` or ``"perf_per_cost"`` (default: the problem's own)
    backend : LP backend of :mod:`topoopt_ilp.solvers` (highs, scip, cbc)
    time_limit_s : wall-clock budget (None: none; 0: nothing is solved, ``no_solution``)
    gap : relative gap at which the result is proven ``optimal``

    Returns
    -------
    BandwidthSolution
        ``optimal`` (gap closed), ``feasible`` (time limit, with its gap), ``infeasible`` (with the
        reason in ``message``), ``no_solution`` (time limit before any allocation) or ``error``.

    Raises
    ------
    InputError
        Bad options, or a ``perf_per_cost`` problem whose optimum does not exist (B = 0 allowed).
    """
    run = _prepare(problem, objective, backend, time_limit_s, gap)
    reason = _direct_infeasibility(run.data)
    if reason:
        return run.result("infeasible", reason)
    if time_limit_s == 0:
        return run.result("no_solution", "time limit 0: nothing was solved")
    try:
        _largest_bandwidths(run)
        if not run.data.used.any():
            return _cheapest_allocation(run)
        _cost_range(run)
        _initial_cuts(run)
        return _cutting_planes(run)
    except _Stop as stop:
        return _stopped(run, stop)


@dataclass
class _BandwidthRun:
    """What the steps of :func:`solve_bandwidth` share: the request, the problem's arrays, the
    equal split, and the cutting planes' state (bounds, best allocation, tangents, scales)."""

    problem: HierarchyProblem
    objective: str
    backend: str
    gap: float
    clock: _Clock
    data: LibraData
    eq: np.ndarray  # the equal split
    eq_eval: BandwidthBreakdown
    common: dict  # the fields of every result: objective name, backend, equal split, names
    rounds: int = 0
    best_B: np.ndarray | None = None
    best_ub: float = math.inf  # the best allocation's exact objective (without the offset)
    lb: float = -math.inf  # the LPs' best bound (without the offset)
    offset: float = 0.0  # iteration_time: the compute time, a constant left out of the cuts
    probe_scale: float = 1.0  # the largest B_d the budget allows
    bmax: np.ndarray | None = None  # (D,) the largest B_d of each used dimension
    probes: list = field(default_factory=list)  # points of P, each with one used B_d at its largest
    scale: float = 1.0  # the common scale s: the largest bmax
    c_ref: float | None = None
    mu_bounds: tuple[float, float] = (1.0, 1.0)
    mu_cuts: list[float] | None = None
    interior: np.ndarray | None = None  # a point of P with every used B_d > 0 (for _repaired)
    tangents: dict[int, list[float]] = field(default_factory=dict)  # tangent points, GB/s, per used d
    scales: np.ndarray | None = None  # (D,) s_d of the next round's LP

    def result(self, status: str, message: str = "", B=None, bound=None, iterations=None) -> BandwidthSolution:
        """The solution with allocation ``B`` (None: none) evaluated exactly, and ``bound``."""
        iterations = self.rounds if iterations is None else iterations
        if B is None:
            return BandwidthSolution(
                status,
                bandwidths_gbps=None,
                objective=None,
                bound=bound,
                gap=None,
                wall_time_s=self.clock.elapsed(),
                iterations=iterations,
                message=message,
                **self.common,
            )
        ev = evaluate_bandwidths(self.problem, B)
        value = ev.objective(self.objective)
        g = None if bound is None else (max(0.0, (value - bound) / value) if value > 0 else 0.0)
        return BandwidthSolution(
            status,
            bandwidths_gbps=tuple(float(v) for v in B),
            objective=value,
            bound=bound,
            gap=g,
            wall_time_s=self.clock.elapsed(),
            iterations=iterations,
            iteration_time_s=ev.iteration_time_s,
            cost_usd=ev.cost_usd,
            message=message,
            **self.common,
        )

    def closed(self, status: str, note: str) -> BandwidthSolution:
        """The bounds met (to the requested gap, or to the LP solver's tolerance): the best
        allocation with its idle dimensions' bandwidth spent least, and the bound."""
        B = _least_idle(self.data, self.best_B, self.backend, self.clock)
        return self.result(status, note, B, self.offset + min(self.lb, self.best_ub))


def _prepare(
    problem: HierarchyProblem, objective: str | None, backend: str, time_limit_s: float | None, gap: float
) -> _BandwidthRun:
    """Check the request (InputError), start the clock, and evaluate the equal split."""
    objective = objective or problem.objective
    if objective not in ("iteration_time", "perf_per_cost"):
        raise InputError(f"unknown objective {objective!r}; choose iteration_time or perf_per_cost")
    if objective == "perf_per_cost" and not problem.has_cost:
        raise InputError(
            "perf_per_cost needs the cost of every dimension (prices_usd_per_gbps or unit_cost_usd_per_gbps)"
        )
    if time_limit_s is not None and (not math.isfinite(time_limit_s) or time_limit_s < 0):
        raise InputError(f"time limit must be a finite number >= 0, got {time_limit_s}")
    if not (isinstance(gap, (int, float)) and math.isfinite(gap) and gap >= 0):
        raise InputError(f"gap must be a finite number >= 0, got {gap}")
    _check_backend(backend)
    clock = _Clock(time_limit_s)
    data = libra_data(problem)
    eq = equal_split(problem)
    eq_eval = evaluate_bandwidths(problem, eq)
    common = dict(
        objective_name=objective,
        backend=backend,
        equal_split_gbps=tuple(float(v) for v in eq),
        equal_split_time_s=eq_eval.iteration_time_s,
        equal_split_objective=eq_eval.objective(objective),
        equal_split_feasible=eq_eval.feasible,
        dimension_names=problem.dimension_names,
    )
    return _BandwidthRun(problem, objective, backend, gap, clock, data, eq, eq_eval, common)


def _largest_bandwidths(run: _BandwidthRun) -> None:
    """Bounding LPs (B-space, mu = 1): the largest B_d each used dimension may get (the largest is the
    common scale), and the point of P where it does. One that is 0 leaves no finite time: infeasible."""
    data, D = run.data, run.problem.num_dimensions
    run.probe_scale = max(
        1.0,
        float(np.max(np.where(np.isfinite(data.hi), data.hi, 0.0), initial=0.0)),
        data.budget / float(np.min(data.budget_w)),
    )
    run.bmax = np.zeros(D)
    for d in np.flatnonzero(data.used):
        c = np.zeros(D)
        c[d] = -1.0
        lp = build_lp(data, "iteration_time", run.probe_scale, b_objective=c)
        res = _run(lp, run.backend, run.clock)
        run.bmax[d] = run.probe_scale * res.values[lp.b[d]]
        run.probes.append(np.clip(run.probe_scale * res.values[lp.b], data.lo, data.hi))
        if run.bmax[d] <= 1e-12 * run.probe_scale:
            raise _Stop(
                "infeasible",
                f"dimension {run.problem.dimension_names[d]!r} carries traffic but the constraints "
                f"force its bandwidth to 0: no finite iteration time",
            )
    run.scale = float(run.bmax.max())


def _cheapest_allocation(run: _BandwidthRun) -> BandwidthSolution:
    """No traffic: the time is the compute time whatever B is, so the cheapest B is optimal (and for
    perf_per_cost the only optimum)."""
    data = run.data
    w = data.cost_w if data.cost_w is not None else data.budget_w
    lp = build_lp(data, "iteration_time", run.probe_scale, b_objective=w / w.max())
    res = _run(lp, run.backend, run.clock)
    B = np.clip(run.probe_scale * res.values[lp.b], data.lo, data.hi)
    value = evaluate_bandwidths(run.problem, B).objective(run.objective)
    note = "no collective moves data: the time is the compute time; the cheapest allocation is returned"
    return run.result("optimal", note, B, value, iterations=1)


def _cost_range(run: _BandwidthRun) -> None:
    """perf_per_cost: the least and largest network cost over P (two bounding LPs) give c_ref and the
    range of mu, with its first tangent points. InputError when the cost may fall to 0 (no optimum)."""
    if run.objective != "perf_per_cost":
        return
    data, costs = run.data, []
    for sign in (1.0, -1.0):
        lp = build_lp(data, "iteration_time", run.scale, b_objective=sign * data.cost_w / data.cost_w.max())
        res = _run(lp, run.backend, run.clock)
        costs.append(float(data.cost_w @ (run.scale * res.values[lp.b])))
    c_min, c_max = costs
    if c_min <= 1e-12 * c_max:
        if data.compute_us == 0:
            raise InputError(
                "perf_per_cost is not solved for this problem: with no compute time, time x cost "
                "stays the same when every bandwidth is scaled alike, and the constraints let them "
                "shrink to 0, so nothing fixes the scale; add min_gbps or fixed_gbps, or a budget "
                "with spend_all"
            )
        raise InputError(
            "perf_per_cost has no optimum for this problem: the constraints let every bandwidth "
            "shrink to 0, and time x cost keeps falling as they do; add min_gbps or fixed_gbps, "
            "or a budget with spend_all"
        )
    run.c_ref, run.mu_bounds = c_max, (1.0, max(1.0, c_max / c_min))
    lo, hi = run.mu_bounds
    run.mu_cuts = list(np.geomspace(lo, hi, 5)) if hi > lo else [1.0]


def _initial_cuts(run: _BandwidthRun) -> None:
    """The compute time set aside, the interior point, the first tangents and the first scales."""
    data = run.data
    # iteration_time: the compute time is a constant of the objective. The cuts close the gap on
    # the communication time alone (with it in, a compute time far above the communication time
    # hid a poor allocation inside a tiny relative gap); it is added back to the bound at the end.
    if run.objective == "iteration_time":
        run.offset, run.data = data.compute_us / _US_PER_S, dataclasses.replace(data, compute_us=0.0)
    # Every used b_d > 0 in the probes' mean (P is convex): it repairs an LP point at b_d = 0 (_repaired).
    run.interior = np.mean(run.probes, axis=0)
    # Initial tangent points: B~_d at its largest value and a few halvings, and at the equal split.
    # They are kept in B~ units (GB/s): each round's LP has its own scales (_rescale).
    for d in np.flatnonzero(data.used):
        pts = list(run.bmax[d] * 0.5 ** np.arange(7))
        if run.eq[d] > 0:
            pts.append(min(run.eq[d], run.bmax[d]))
        run.tangents[int(d)] = pts
    run.scales = np.full(run.problem.num_dimensions, run.scale)


def _cutting_planes(run: _BandwidthRun) -> BandwidthSolution:
    """Kelley's rounds until the bounds meet (to the requested gap), the cuts stall, or MAX_ROUNDS."""
    while run.rounds < MAX_ROUNDS:
        lp, x, b_cuts = _lp_round(run)
        if math.isfinite(run.best_ub) and run.best_ub - run.lb <= run.gap * abs(run.best_ub):
            # "optimal" means within OPTIMAL_GAP, as for solve; a looser requested gap is feasible
            proven = run.best_ub - run.lb <= OPTIMAL_GAP * abs(run.best_ub)
            return run.closed(
                "optimal" if proven else "feasible",
                "" if proven else f"stopped at the requested gap {run.gap:g}; optimal means within {OPTIMAL_GAP:g}",
            )
        added = _add_tangents(run, lp, x, b_cuts)
        _rescale(run)
        if _add_mu_tangent(run, lp, x):
            added = True
        if not added:  # the LP point is on every curve: the bounds differ by solver tolerance only
            return _stalled(run)
    if run.best_B is None:
        return run.result("error", f"no finite allocation after {MAX_ROUNDS} rounds")
    return run.result("feasible", f"stopped after {MAX_ROUNDS} rounds", run.best_B, run.offset + run.lb)


def _lp_round(run: _BandwidthRun) -> tuple[LibraLP, np.ndarray, dict[int, list[float]]]:
    """Solve the LP with the cuts so far: its optimum raises the lower bound, and its point, mapped
    back to B (repaired when a used B_d is 0), may improve the best allocation (the upper bound)."""
    data = run.data
    b_cuts = {d: [p / run.scales[d] for p in pts] for d, pts in run.tangents.items()}
    lp = build_lp(
        data,
        run.objective,
        run.scales,
        c_ref=run.c_ref,
        mu_bounds=run.mu_bounds,
        b_cuts=b_cuts,
        mu_cuts=run.mu_cuts,
    )
    res = _run(lp, run.backend, run.clock)
    run.rounds += 1
    run.lb = max(run.lb, _to_units(lp, float(res.objective)))
    B = np.clip(_bandwidths(lp, res.values), data.lo, data.hi)
    ub = _exact_value(data, run.objective, B)
    if not math.isfinite(ub):
        B, ub = _repaired(data, run.objective, B, run.interior)
    if ub < run.best_ub:
        run.best_ub, run.best_B = ub, B
    return lp, res.values, b_cuts


def _add_tangents(run: _BandwidthRun, lp: LibraLP, x: np.ndarray, b_cuts: dict[int, list[float]]) -> bool:
    """A tangent of i_d >= 1/b_d at each b_d of the LP point whose i_d lies below the curve (and not
    at a point already cut). True when one was added."""
    added = False
    for d, pts in b_cuts.items():
        bd, id_ = float(x[lp.b[d]]), float(x[lp.i[d]])
        if bd <= MIN_TANGENT:  # b_d = 0 (or the LP's noise around it, 1e-14): the tangent at 1 / (2 i_d),
            # 4 i_d at b_d = 0, cuts the point off; the tangent at b_d, Kelley's, would have a coefficient
            # 1 / b_d^2 beyond every solver's precision and only double b_d per round
            bd = 1.0 / (2.0 * id_) if id_ > 0 else min(pts) / 4
        # no tangent below MIN_TANGENT of the largest B_d: its coefficients (1 / b0^2) would defeat
        # every solver's precision (SCIP refuses them above 1e20), and no allocation needs B_d that small
        bd = max(bd, MIN_TANGENT * run.scale / run.scales[d])
        if id_ < (1.0 / bd) * (1 - 1e-12) and all(abs(bd - p) > 1e-12 * p for p in pts):
            run.tangents[d].append(bd * run.scales[d])
            added = True
    return added


def _rescale(run: _BandwidthRun) -> None:
    """Per-dimension scales s_d from the best allocation so far: a dimension whose bandwidth is 1e-5
    of another's keeps its b_d, i_d and cut coefficients of order 1 (with one scale for all, SCIP's
    LPs stopped at points 2.6e-4 above their optimum, or gave up on numerical trouble). Only where
    the common scale is off by orders of magnitude (CBC's LPs with every column rescaled came out
    0.5 % above HiGHS's on the same LP once in 450 random problems)."""
    if run.best_B is None:
        return
    mu_best = 1.0 if run.c_ref is None else run.c_ref / float(run.data.cost_w @ run.best_B)  # B~ = mu B
    used_d = np.flatnonzero(run.data.used)
    tilde = mu_best * run.best_B[used_d]
    run.scales[used_d] = np.where(
        tilde < RESCALE_BELOW * run.scale, np.maximum(tilde, RESCALE_FLOOR * run.scale), run.scale
    )


def _add_mu_tangent(run: _BandwidthRun, lp: LibraLP, x: np.ndarray) -> bool:
    """perf_per_cost: a tangent of nu >= 1/mu at the LP's mu when its nu lies below the curve."""
    if run.mu_cuts is None:
        return False
    m, nu = float(x[lp.mu]), float(x[lp.nu])
    if nu < (1.0 / m) * (1 - 1e-12) and all(abs(m - p) > 1e-15 for p in run.mu_cuts):
        run.mu_cuts.append(m)
        return True
    return False


def _stalled(run: _BandwidthRun) -> BandwidthSolution:
    """No cut left to add: optimal when the bounds are within OPTIMAL_GAP, else feasible with its gap."""
    if run.best_B is None:
        return run.result("error", "the cutting planes stalled before finding a finite allocation")
    stalled = (run.best_ub - run.lb) / run.best_ub
    if stalled <= OPTIMAL_GAP:  # short of a tighter requested gap, but within what optimal means
        return run.closed(
            "optimal",
            f"the cuts stalled at a gap of {stalled:.3g} of the communication time "
            f"(the LP solver's tolerance), within {OPTIMAL_GAP:g}",
        )
    return run.result(
        "feasible",
        f"the cuts stalled at a gap of {stalled:.3g} of the communication time: the LP "
        f"solver's tolerance limits the bound (HiGHS is the most precise; or ask for a larger gap)",
        run.best_B,
        run.offset + run.lb,
    )


def _stopped(run: _BandwidthRun, stop: _Stop) -> BandwidthSolution:
    """A step stopped: at the time limit, the best allocation so far (else the equal split when it
    is feasible) with the bound so far; infeasible or error as the step said."""
    if stop.status != "limit":
        return run.result(stop.status, stop.message)
    bound = None if run.lb == -math.inf else run.offset + run.lb
    if run.best_B is not None:
        return run.result("feasible", stop.message, run.best_B, bound)
    if run.eq_eval.feasible:  # the equal split meets every constraint: an allocation, if not a good one
        return run.result("feasible", stop.message + "; the equal split is returned", run.eq, bound)
    return run.result("no_solution", stop.message, bound=bound)
