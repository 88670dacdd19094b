"""The exact topology for several demand scenarios: one integer topology and one ring choice, one
multi-commodity flow per scenario under that topology's capacities, and the worst case or the mean
of the scenarios' iteration times as the objective (docs/guide/llm-jobs.md, **Expert load**).

The scenarios are instances of one cluster whose AllReduce groups agree and whose MP traffic
differs: a MoE job compiled for each of its expert-load scenarios. Scenario k's iteration time is
the evaluator's: ``I_k = F_k + T_k`` (overlap ``none``) or ``max(F_k, T_k)`` (``full``), with
``F_k`` the job's time off the designed network (compute, bubble, scale-up;
:func:`~topoopt_ilp.evaluation.evaluate.job_term`) and ``T_k`` the busiest link's load over its
bandwidth when scenario k is routed at best (the evaluator's ``optimal`` routing: its
max-concurrent-flow LP). The model optimises the bandwidth term; a hop latency adds
``alpha * H`` in the evaluator, which the model does not see, so with a hop latency a solve is
``feasible`` (its bound stays valid), never ``optimal``.

Two exact formulations, both on the topology MILP's rows (:mod:`.milp`: conservation with the
strong formulation's one commodity per source, no flow back into a source, the Moore cut per
source, degree and ring-share rows):

* the worst case: a sequence of homogeneous models (one concurrent-flow multiple for every
  scenario, each scenario's bytes scaled by the time it may take), Dinkelbach's method, each
  model as tight as the one-demand MILP (:func:`build_worst_case_model`);
* the mean: the time form (:func:`build_scenario_model`), ``lam`` fixed at 1 so that each
  scenario's flows carry its whole demand, the link capacity ``T_k x[e]`` instead of ``x[e]``,
  written exactly through unary links.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.routes import RingSet, Routing
from topoopt_ilp.core.solution import Solution, Topology
from topoopt_ilp.errors import InputError, UnsupportedError
from topoopt_ilp.evaluation.evaluate import evaluate, job_term
from topoopt_ilp.models.common import (
    ExactOptions,
    check_backend,
    run_model,
    solution_status,
    time_left,
)
from topoopt_ilp.models.topology.milp import (
    MAX_SERVERS,
    STRONG_TUNING,
    RingCandidate,
    add_demand_flows,
    arc_index,
    decoded_rings,
    degree_rows,
    demand_scale,
    edge_index,
    moore_rows,
    ring_candidates,
    ring_share_rows,
)
from topoopt_ilp.solvers import DEFAULT_REL_GAP, LinearModel, ModelBuilder, SolveStatus, relative_gap

__all__ = [
    "SCENARIO_OBJECTIVES",
    "ScenarioData",
    "ScenarioModel",
    "WorstCaseModel",
    "build_scenario_model",
    "build_worst_case_model",
    "check_scenarios",
    "relaxation_bandwidth_times",
    "scenario_times",
    "solve_scenarios",
    "time_bounds",
]

SCENARIO_OBJECTIVES = ("worst", "mean")
#: An upper bound on T_k (the big-M of the capacity rows) is a feasible design's value; it is widened
#: by this share so that the solver's tolerances never cut off a design that reaches it exactly.
BOUND_MARGIN = 1e-6


# ------------------------------------------------------------------------------------------------
# The time form (the mean objective; with K = 1 and no fixed term, its LP relaxation bounds T_k)
#
# Data
#   n servers, degree d, arcs a = (i, j), edges e(a) as in the topology MILP (.milp); U = d with
#   multi-links, else 1. Scenarios k = 1..K: MP matrix M_k (bytes / D0, D0 the largest entry of
#   every scenario and ring), the same AllReduce groups g and candidate rings c (R_c: ring c's bytes
#   per member / D0); F_k the fixed time of scenario k in units D0 / B (B one link's bytes/s);
#   Tmax_k an upper bound on T_k at some optimum (from a feasible design, below); Tmin_k a lower
#   bound on T_k under any design (a scenario's own optimum's bound, or its LP relaxation's).
# Variables
#   x[e]      in {0..U}          links on edge e
#   u[e,j]    in {0, 1}, j=1..U  x[e] = sum_j u[e,j], u[e,j] >= u[e,j+1] (unary: the j-th link of e)
#   one       = 1                the topology MILP's lam, fixed: every flow carries its whole demand
#   z[c]      >= 0               share of ring c in its group, sum_{c of g} z[c] = 1
#   T_k       in [Tmin_k, Tmax_k] scenario k's bandwidth time
#   p[k,e,j]  in [0, Tmax_k]     T_k u[e,j]: p <= T_k - Tmin_k (1 - u[e,j]), p <= Tmax_k u[e,j]
#                                (the product's upper envelope over T_k in [Tmin_k, Tmax_k]: exact at
#                                binary u, and the closer Tmin_k, the tighter at a fractional u)
#   f_k[s,a]  >= 0               flow of source s of scenario k on arc a
#   I_k       >= 0               scenario k's iteration time (minus what the model does not see)
# Constraints
#   per scenario, the topology MILP's conservation (with lam = one), no-return and Moore rows;
#   capacity      sum_s f_k[s,a] <= sum_j p[k,e(a),j]       (= T_k x[e]: k's bytes fit in time T_k)
#   degree        as the topology MILP;  ring shares  sum_{c of g} z[c] = one
#   link order    u[e,j] - u[e,j+1] >= 0;  x[e] - sum_j u[e,j] = 0
#   busy degree   sum_{e at v, j} p[k,e,j] <= d T_k          (at integer u, p = T_k u and v has <= d
#                 links: valid, and it gives the relaxation the per-server capacity bound)
#   iteration     I_k >= F_k + T_k (overlap none);  I_k >= F_k, I_k >= T_k (overlap full)
#   worst case    W >= I_k
# Objective
#   worst: minimize W;  mean: minimize (1/K) sum_k I_k.
#
# The product T_k x[e] is exact through the unary links: with u binary, p[k,e,j] can reach T_k
# exactly where u[e,j] = 1 and is 0 where u[e,j] = 0, provided T_k <= Tmax_k at the optimum. A
# feasible design (topology X0 with every group's listed ring, which is a candidate) scored on every
# scenario, I0_k, gives it: for the worst case W* <= max_k I0_k =: W0, so T_k <= W0 - F_k (none) or
# W0 (full); for the mean sum_k I*_k <= sum_k I0_k =: S0 and I*_j >= F_j, so I*_k <= S0 - sum_{j != k} F_j.
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScenarioModel:
    """A built multi-scenario model and what decoding it needs."""

    model: LinearModel
    n: int
    directed: bool
    objective: str
    unit_s: float  # seconds per model time unit: D0 / B
    edges: np.ndarray
    x_cols: np.ndarray
    z_cols: np.ndarray
    t_cols: np.ndarray  # T_k
    rings: tuple[RingCandidate, ...]
    fixed: np.ndarray  # F_k, model units


@dataclass(frozen=True)
class ScenarioData:
    """What both models read off the scenarios: the arcs and edges, the candidate rings and their
    bytes per member, each scenario's MP matrix (bytes), D0 (:func:`.milp.demand_scale`) and
    ``unit_s`` = D0 / B, the seconds of one model time unit."""

    cluster: object
    n: int
    tail: np.ndarray
    head: np.ndarray
    edges: np.ndarray
    arc_edge: np.ndarray
    rings: list[RingCandidate]
    groups: tuple
    ring_amount: np.ndarray
    mp_bytes: list[np.ndarray]
    scale: float
    unit_s: float

    @classmethod
    def of(cls, scenarios: list[Instance]) -> ScenarioData:
        c = scenarios[0].cluster
        n = c.servers
        tail, head = arc_index(n)
        edges, arc_edge = edge_index(n, c.directed, tail, head)
        rings = ring_candidates(scenarios[0])
        groups = scenarios[0].demand.allreduce
        ring_amount = np.array([groups[r.group].bytes_per_member() for r in rings])
        mp_bytes = [s.demand.mp_matrix(n) for s in scenarios]
        scale = demand_scale(mp_bytes, ring_amount)
        return cls(
            c, n, tail, head, edges, arc_edge, rings, groups, ring_amount, mp_bytes, scale, scale / c.link_bytes_per_s
        )

    def add_flows(
        self, b: ModelBuilder, k: int, capacity: list, lam_col: int, z_cols: np.ndarray, weight: float = 1.0
    ) -> None:
        """Scenario k's flows, its bytes (scaled by D0) times ``weight`` moving with ``lam_col`` and
        the rings' with ``z_cols``: the topology MILP's conservation, capacity and Moore rows."""
        c = self.cluster
        mp, amount = self.mp_bytes[k] / self.scale * weight, self.ring_amount / self.scale * weight
        args = (c.servers, c.degree, c.directed, self.tail, self.head, capacity, mp, self.rings, amount)
        flows = add_demand_flows(b, *args, lam_col, z_cols, "strong")
        moore_rows(b, flows, mp, self.rings, amount, lam_col, z_cols, c.degree, c.directed)

    def add_topology(self, b: ModelBuilder, z_cols: np.ndarray, lam_col: int):
        """The link-count columns x, their degree rows and the ring-share rows; returns x."""
        c = self.cluster
        x = b.add_variables(len(self.edges), lb=0, ub=c.degree if c.multi_links else 1, kind="integer", name="x")
        degree_rows(b, x, self.edges, self.n, c.degree, c.directed, c.regular)
        ring_share_rows(b, self.rings, len(self.groups), z_cols, lam_col)
        return x


def _fixed_terms(scenarios: list[Instance]) -> tuple[np.ndarray, str]:
    """F_k (seconds) and the overlap rule, one rule for every scenario."""
    terms = [job_term(s, 0.0, "none") for s in scenarios]
    overlaps = {o for _, o in terms}
    if len(overlaps) > 1:
        raise InputError("the scenarios have different overlap rules", field="job.overlap")
    return np.array([f for f, _ in terms]), overlaps.pop()


def check_scenarios(scenarios: list[Instance]) -> None:
    """The scenarios must share one cluster and one set of AllReduce groups (only their MP traffic
    may differ), and be a general-topology design problem the exact model can hold."""
    if not scenarios:
        raise InputError("no scenarios to design for", field="job.expert_load")
    first = scenarios[0]
    if first.workload is not None:
        raise UnsupportedError("the scenario model takes demand or job instances, not a workload")
    if first.topology_family != "any" or first.fixed_topology is not None:
        raise UnsupportedError("the scenario model designs a general topology (topology_family any, none fixed)")
    if first.n > MAX_SERVERS:
        raise UnsupportedError(
            f"{first.n} servers is too large for the exact scenario model (at most {MAX_SERVERS}); "
            "use --method heuristic"
        )
    groups = [(g.members, g.bytes) for g in first.demand.allreduce]
    for k, s in enumerate(scenarios[1:], start=1):
        if s.cluster != first.cluster:
            raise InputError(f"scenario {k} has another cluster than scenario 0")
        if [(g.members, g.bytes) for g in s.demand.allreduce] != groups:
            raise InputError(f"scenario {k} has other AllReduce groups than scenario 0")


def time_bounds(fixed: np.ndarray, start_times: np.ndarray, objective: str, overlap: str) -> np.ndarray:
    """Tmax_k of the model comment (model units) from a feasible design's iteration times I0_k."""
    if objective == "worst":
        top = np.full_like(fixed, start_times.max())
    else:
        top = start_times.sum() - (fixed.sum() - fixed)
    cap = top - fixed if overlap == "none" else top
    return np.maximum(cap, 0.0) * (1 + BOUND_MARGIN) + 1e-12


def build_scenario_model(
    scenarios: list[Instance],
    objective: str,
    fixed_s: np.ndarray,
    overlap: str,
    start_iteration_s: np.ndarray,
    least_bandwidth_s: np.ndarray | None = None,
) -> ScenarioModel:
    """The model of the comment above for ``scenarios`` (fixed terms ``fixed_s`` and a feasible
    design's iteration times ``start_iteration_s``, both in seconds, per scenario)."""
    if objective not in SCENARIO_OBJECTIVES:
        raise InputError(f"unknown objective {objective!r}; choose one of {', '.join(SCENARIO_OBJECTIVES)}")
    data = ScenarioData.of(scenarios)
    c, unit_s = data.cluster, data.unit_s
    E, K = len(data.edges), len(scenarios)
    U = c.degree if c.multi_links else 1
    fixed = np.asarray(fixed_s, dtype=float) / unit_s
    t_max = time_bounds(fixed, np.asarray(start_iteration_s, dtype=float) / unit_s, objective, overlap)
    t_min = np.zeros(K) if least_bandwidth_s is None else np.minimum(np.asarray(least_bandwidth_s) / unit_s, t_max)

    b = ModelBuilder(name=f"topology_scenarios_{objective}")
    one = b.add_variables(1, lb=1.0, ub=1.0, name="one")
    one_col = int(one.index[0])
    z = b.add_variables(len(data.rings), name="z")
    x = data.add_topology(b, z.index, one_col)
    u = b.add_variables((E, U), kind="binary", name="u")
    ucols = u.index.reshape(E, U)
    t = b.add_variables(K, lb=t_min, ub=t_max, name="T")
    p = b.add_variables((K, E, U), lb=0.0, ub=np.repeat(t_max, E * U), name="p")
    pcols = p.index.reshape(K, E, U)
    it = b.add_variables(K, lb=0.0, name="I")
    arcs = np.arange(len(data.tail))
    for k in range(K):
        data.add_flows(b, k, [(arcs, pcols[k, data.arc_edge, j]) for j in range(U)], one_col, z.index)
    _link_rows(b, x.index, ucols)
    _product_rows(b, t.index, pcols, ucols, t_min, t_max)
    _busy_degree_rows(b, t.index, pcols, data.edges, data.n, c.degree, c.directed)
    _iteration_rows(b, it.index, t.index, fixed, overlap)
    if objective == "worst":
        w = b.add_variables(1, lb=0.0, name="W")
        b.add_constraints(
            np.concatenate([np.arange(K), np.arange(K)]),
            np.concatenate([np.full(K, w.index[0]), it.index]),
            np.concatenate([np.ones(K), -np.ones(K)]),
            lb=0.0,
            count=K,
            name="worst_case",
        )
        b.set_objective(w.index, 1.0, sense="minimize")
    else:
        b.set_objective(it.index, 1.0 / K, sense="minimize")
    return ScenarioModel(
        b.build(),
        data.n,
        c.directed,
        objective,
        unit_s,
        data.edges,
        x.index,
        z.index,
        t.index,
        tuple(data.rings),
        fixed,
    )


def _link_rows(b: ModelBuilder, x_cols: np.ndarray, ucols: np.ndarray) -> None:
    """x[e] = sum_j u[e,j] and u[e,j] >= u[e,j+1]."""
    E, U = ucols.shape
    b.add_constraints(
        np.concatenate([np.arange(E), np.repeat(np.arange(E), U)]),
        np.concatenate([x_cols, ucols.ravel()]),
        np.concatenate([np.ones(E), -np.ones(E * U)]),
        lb=0.0,
        ub=0.0,
        count=E,
        name="unary_links",
    )
    if U > 1:
        m = E * (U - 1)
        b.add_constraints(
            np.concatenate([np.arange(m), np.arange(m)]),
            np.concatenate([ucols[:, :-1].ravel(), ucols[:, 1:].ravel()]),
            np.concatenate([np.ones(m), -np.ones(m)]),
            lb=0.0,
            count=m,
            name="link_order",
        )


def _product_rows(
    b: ModelBuilder, t_cols: np.ndarray, pcols: np.ndarray, ucols: np.ndarray, t_min: np.ndarray, t_max: np.ndarray
) -> None:
    """p[k,e,j] <= T_k - Tmin_k (1 - u[e,j]) and p[k,e,j] <= Tmax_k u[e,j]."""
    K, E, U = pcols.shape
    m = K * E * U
    rows = np.arange(m)
    k_of = np.repeat(np.arange(K), E * U)
    b.add_constraints(
        np.concatenate([rows, rows, rows]),
        np.concatenate([pcols.ravel(), t_cols[k_of], np.tile(ucols.ravel(), K)]),
        np.concatenate([np.ones(m), -np.ones(m), -t_min[k_of]]),
        ub=-t_min[k_of],
        count=m,
        name="p_le_T",
    )
    b.add_constraints(
        np.concatenate([rows, rows]),
        np.concatenate([pcols.ravel(), np.tile(ucols.ravel(), K)]),
        np.concatenate([np.ones(m), -t_max[k_of]]),
        ub=0.0,
        count=m,
        name="p_le_u",
    )


def _busy_degree_rows(
    b: ModelBuilder, t_cols: np.ndarray, pcols: np.ndarray, edges: np.ndarray, n: int, d: int, directed: bool
) -> None:
    """sum_{e at v, j} p[k,e,j] - d T_k <= 0 per scenario and server (out- and in-links when directed)."""
    K, E, U = pcols.shape
    ends = [edges[:, 0], edges[:, 1]]
    views = [[ends[0]], [ends[1]]] if directed else [ends]
    for view in views:
        rows, cols = [], []
        for k in range(K):
            for end in view:
                rows.append(np.repeat(k * n + end, U))
                cols.append(pcols[k].ravel())
        rows.append(np.arange(K * n))
        cols.append(np.repeat(t_cols, n))
        vals = np.concatenate([np.ones(sum(len(r) for r in rows[:-1])), np.full(K * n, -float(d))])
        b.add_constraints(np.concatenate(rows), np.concatenate(cols), vals, ub=0.0, count=K * n, name="busy_degree")


def _iteration_rows(b: ModelBuilder, it_cols: np.ndarray, t_cols: np.ndarray, fixed: np.ndarray, overlap: str) -> None:
    """I_k - T_k >= F_k (none), or I_k >= F_k and I_k - T_k >= 0 (full)."""
    K = len(t_cols)
    rows = np.concatenate([np.arange(K), np.arange(K)])
    cols = np.concatenate([it_cols, t_cols])
    vals = np.concatenate([np.ones(K), -np.ones(K)])
    if overlap == "none":
        b.add_constraints(rows, cols, vals, lb=fixed, count=K, name="iteration")
    else:
        b.add_constraints(rows, cols, vals, lb=0.0, count=K, name="iteration")
        b.add_constraints(np.arange(K), it_cols, 1.0, lb=fixed, count=K, name="iteration_fixed")


# ------------------------------------------------------------------------------------------------
def scenario_times(scenarios: list[Instance], design: Solution) -> tuple[float, ...]:
    """The evaluator's iteration time of ``design`` (its topology and rings) on every scenario, each
    routed at best (``optimal`` routing)."""
    return tuple(evaluate(s, design, routing="optimal").iteration_time_s for s in scenarios)


def _combine(times: tuple[float, ...], objective: str) -> float:
    return max(times) if objective == "worst" else sum(times) / len(times)


def relaxation_bandwidth_times(
    scenarios: list[Instance], options: ExactOptions, start_bandwidth_s: np.ndarray
) -> np.ndarray:
    """Per scenario, a lower bound on its bandwidth term under any design: the LP relaxation of the
    model for that scenario alone, without fixed terms (``start_bandwidth_s``: a feasible design's
    bandwidth terms, the model's Tmax)."""
    out = np.zeros(len(scenarios))
    for k, s in enumerate(scenarios):
        m = build_scenario_model([s], "worst", np.zeros(1), "none", start_bandwidth_s[k : k + 1])
        lp = replace(m.model, col_kind=np.zeros_like(m.model.col_kind), name="topology_scenarios_relaxation")
        result = run_model(lp, replace(options, time_limit_s=None, gap=None))
        if result.status == SolveStatus.OPTIMAL and result.objective is not None:
            out[k] = max(0.0, result.objective * m.unit_s * (1 - BOUND_MARGIN))
    return out


# ------------------------------------------------------------------------------------------------
# The worst case, by a sequence of homogeneous models (Dinkelbach's method for a min-max of ratios)
#
# The worst case needs no product T_k x[e]. Given a value W, scenario k may take s_k = W - F_k
# (overlap none) or s_k = W (full) of bandwidth time. The model is the topology MILP's (.milp)
# with one flow per scenario and one lam: scenario k's bytes scaled by 1/s_k,
#   conservation_k   inflow - outflow = lam M_k[s, .] / s_k + sum_c z[c] R_c[s, .] / s_k
#   capacity         sum_s f_k[s,a] <= x[e(a)]   for every scenario k
#   rings            sum_{c of g} z[c] = lam  (one ring choice for every scenario)
# and the Moore cut per source and scenario; maximize lam =: G(W). A design X whose scenarios take
# T_k(X) carries lam = min_k s_k / T_k(X), so G(W) > 1 iff some design is better than W in every
# scenario. Starting from W_0 = a feasible design's worst case, the maximiser of G(W_i) has worst
# case W_{i+1} < W_i while G(W_i) > 1; when the solver's bound G_ub on G(W_i) is reached, no design
# does better than LB = min_k iteration(F_k, s_k / G_ub) (every design has a scenario with T_k >=
# s_k / G_ub), which is the bound reported. With equal fixed terms one model settles it.
# ------------------------------------------------------------------------------------------------
#: At most this many models of the worst-case sequence (each strictly improves the design).
MAX_WORST_CASE_ROUNDS = 20


@dataclass(frozen=True)
class WorstCaseModel:
    """A built model of the worst-case sequence; ``g_per_lam`` turns its lam into G(W)."""

    model: LinearModel
    n: int
    directed: bool
    edges: np.ndarray
    x_cols: np.ndarray
    lam_col: int
    z_cols: np.ndarray
    rings: tuple[RingCandidate, ...]
    g_per_lam: float


def build_worst_case_model(scenarios: list[Instance], slack_s: np.ndarray) -> WorstCaseModel:
    """The homogeneous model of the comment above for the time ``slack_s[k]`` (seconds) each
    scenario may take."""
    data = ScenarioData.of(scenarios)
    # Scenario k's bytes over its slack relative to the least slack (weights <= 1) keep the
    # coefficients of order 1; then G(W) = lam min_k s_k / (D0 / B).
    weight = slack_s.min() / slack_s
    b = ModelBuilder(name="topology_scenarios_worst")
    lam = b.add_variables(1, name="lam")
    lam_col = int(lam.index[0])
    z = b.add_variables(len(data.rings), name="z")
    x = data.add_topology(b, z.index, lam_col)
    capacity = [(np.arange(len(data.tail)), x.index[data.arc_edge])]
    for k in range(len(scenarios)):
        data.add_flows(b, k, capacity, lam_col, z.index, weight[k])
    b.set_objective([lam_col], [1.0], sense="maximize")
    g_per_lam = float(slack_s.min()) / data.unit_s
    return WorstCaseModel(
        b.build(), data.n, data.cluster.directed, data.edges, x.index, lam_col, z.index, tuple(data.rings), g_per_lam
    )


def _iteration(fixed: np.ndarray, bandwidth: np.ndarray, overlap: str) -> np.ndarray:
    return fixed + bandwidth if overlap == "none" else np.maximum(fixed, bandwidth)


def _design(m, values: np.ndarray) -> Solution:
    """The topology and rings of a solved model (either kind), as a Solution without paths."""
    xv = np.rint(values[m.x_cols]).astype(np.int64)
    X = np.zeros((m.n, m.n), dtype=np.int64)
    X[m.edges[:, 0], m.edges[:, 1]] = xv
    if not m.directed:
        X[m.edges[:, 1], m.edges[:, 0]] = xv
    ring_list = decoded_rings(m.rings, values[m.z_cols])
    routing = Routing(rings=RingSet.from_lists(ring_list) if ring_list else RingSet.empty())
    return Solution(status="feasible", method="exact", topology=Topology(X), routing=routing)


@dataclass(frozen=True)
class _Scored:
    """A design and its model-side times per scenario (bandwidth term + fixed term, seconds)."""

    design: Solution
    bandwidth: np.ndarray
    iteration: np.ndarray


def _score(scenarios: list[Instance], design: Solution, fixed: np.ndarray, overlap: str) -> _Scored:
    bandwidth = np.array([evaluate(s, design, routing="optimal").bandwidth_time_s for s in scenarios])
    return _Scored(design, bandwidth, _iteration(fixed, bandwidth, overlap))


def _solve_worst(
    scenarios: list[Instance], options: ExactOptions, start: _Scored, fixed: np.ndarray, overlap: str, started: float
) -> tuple[_Scored, float | None, str, dict]:
    """The sequence of the comment above: the best design, the lower bound (seconds), the status
    of the last model and what the rounds did."""
    best, lower, status = start, float(fixed.max()), "no_solution"  # no design beats a fixed term
    rounds = []
    for _ in range(MAX_WORST_CASE_ROUNDS):
        w = float(best.iteration.max())
        slack = w - fixed if overlap == "none" else np.full(len(fixed), w)
        if w - lower <= DEFAULT_REL_GAP * w or (slack <= 0).any():  # a fixed term is the worst case
            status = "optimal"
            lower = min(lower, w)
            break
        m = build_worst_case_model(scenarios, slack)
        result = run_model(m.model, replace(options, time_limit_s=time_left(options, started)), tuning=STRONG_TUNING)
        status = solution_status(result)
        g = None if result.objective is None else result.objective * m.g_per_lam
        g_ub = None if result.bound is None else result.bound * m.g_per_lam
        rounds.append({"worst_case_s": w, "model_status": status, "G": g, "G_bound": g_ub})
        if g_ub is not None and g_ub > 0:
            lower = max(lower, float(_iteration(fixed, slack / max(g_ub, 1.0), overlap).min()))
        if result.values is None or status not in ("optimal", "feasible"):
            break
        found = _score(scenarios, _design(m, result.values), fixed, overlap)
        improved = found.iteration.max() < w * (1 - 1e-12)
        if improved:
            best = found
        if (
            not improved
            or status != "optimal"
            or best.iteration.max() - lower <= DEFAULT_REL_GAP * best.iteration.max()
        ):
            break
    return best, lower, status, {"rounds": rounds}


def _solve_mean(
    scenarios: list[Instance],
    options: ExactOptions,
    start: _Scored,
    fixed: np.ndarray,
    overlap: str,
    least_bandwidth_s: np.ndarray | None,
    started: float,
) -> tuple[_Scored, float | None, str, dict]:
    """The time-form model of the first comment block with the mean objective."""
    if least_bandwidth_s is None:
        least_bandwidth_s = relaxation_bandwidth_times(scenarios, options, start.bandwidth)
    m = build_scenario_model(scenarios, "mean", fixed, overlap, start.iteration, least_bandwidth_s)
    result = run_model(m.model, replace(options, time_limit_s=time_left(options, started)))
    status = solution_status(result)
    lower = result.bound * m.unit_s if result.bound is not None else None
    best = start
    if result.values is not None and status in ("optimal", "feasible"):
        found = _score(scenarios, _design(m, result.values), fixed, overlap)
        if found.iteration.mean() <= start.iteration.mean():
            best = found
    return best, lower, status, {"model_objective_s": result.objective * m.unit_s if result.objective else None}


def solve_scenarios(
    scenarios: list[Instance],
    objective: str,
    options: ExactOptions,
    start: Solution,
    least_iteration_s: np.ndarray | None = None,
) -> tuple[Solution, tuple[float, ...]]:
    """The design of least worst-case (``objective="worst"``, the sequence of homogeneous models) or
    mean (``"mean"``, the time-form model) iteration time over ``scenarios``, and the evaluator's
    iteration times of it on each (``optimal`` routing). ``start`` is a feasible design (its topology
    and rings; the worst-case sequence starts from it, its times bound the time-form model's T_k,
    and the result is never worse than it). The Solution
    holds the topology and the rings (no paths: each scenario is routed at best); its ``objective``
    and ``bound`` are the worst case or the mean over the scenarios, in seconds (the evaluator's,
    and the models' bound). ``least_iteration_s``: lower bounds on each scenario's iteration time
    (without hop latency) under any design, e.g. its own optimum's bound: they give the time-form
    model's Tmin (default: each scenario's LP relaxation)."""
    if objective not in SCENARIO_OBJECTIVES:
        raise InputError(f"unknown objective {objective!r}; choose one of {', '.join(SCENARIO_OBJECTIVES)}")
    check_scenarios(scenarios)
    check_backend(options)
    started = time.perf_counter()
    fixed, overlap = _fixed_terms(scenarios)
    first = _score(scenarios, start, fixed, overlap)
    if not np.isfinite(first.iteration).all():
        raise UnsupportedError("the start topology does not connect every scenario's traffic: no bound for the model")
    if objective == "worst":
        best, lower, status, info = _solve_worst(scenarios, options, first, fixed, overlap, started)
    else:
        least = None
        if least_iteration_s is not None:  # I_k >= L_k gives T_k >= L_k - F_k (none), T_k >= L_k when L_k > F_k (full)
            least_iteration_s = np.asarray(least_iteration_s, dtype=float)
            beyond = np.where(least_iteration_s > fixed, least_iteration_s, 0.0)
            least = np.maximum(least_iteration_s - fixed, 0.0) if overlap == "none" else beyond
        best, lower, status, info = _solve_mean(scenarios, options, first, fixed, overlap, least, started)
    details = {"model": "topology_scenarios", "scenario_objective": objective, "scenarios": len(scenarios), **info}
    wall = time.perf_counter() - started
    if best is first:
        details["returned"] = f"the start design: the model found none better ({status})"
    times = scenario_times(scenarios, best.design)
    value = _combine(times, objective)
    model_value = float(best.iteration.max() if objective == "worst" else best.iteration.mean())
    bound = None if lower is None else min(lower, model_value)  # solver noise past its own bound: at most the design
    gap = relative_gap(model_value, bound) if bound is not None else None
    proven = status == "optimal" and gap is not None and gap <= DEFAULT_REL_GAP * (1 + 1e-9)
    if proven and scenarios[0].cluster.hop_latency_s > 0:
        proven = False
        details["status_note"] = (
            "the bandwidth term is proven; the hop latency is not optimised, so the iteration time is not proven"
        )
    return (
        Solution(
            status="optimal" if proven else "feasible",
            method="exact",
            topology=best.design.topology,
            routing=best.design.routing,
            objective=value,
            bound=bound,
            gap=relative_gap(value, bound) if bound is not None else None,
            backend=options.backend,
            wall_time_s=wall,
            details=details,
        ),
        times,
    )
