"""SiP-ML-style baseline: d optical-circuit-switch planes, each a permutation, serving demand in one hop.

Every plane connects each server's TX port to one other server's RX port (a fixed-point-free
permutation). The link count ``B_ij`` is the number of planes mapping i to j; the baseline maximises
``t`` with ``B_ij >= t * T_ij / max T`` for every demand pair: the bandwidth each pair gets, relative
to its share of the demand. With direct (one-hop) routing, pair (i, j) needs ``T_ij / (cap * B_ij)``
seconds, so the single-hop throughput is ``cap * min B_ij / T_ij = cap * t / max T``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from topoopt_ilp.core.instance import Instance
from topoopt_ilp.core.routes import PathSet, Routing
from topoopt_ilp.core.solution import Solution, Topology
from topoopt_ilp.core.traffic import traffic_matrix
from topoopt_ilp.errors import InputError, UnsupportedError
from topoopt_ilp.models.common import ExactOptions, check_backend, run_model, solution_status
from topoopt_ilp.solvers import LinearModel, ModelBuilder, VarBlock

__all__ = ["OCSModel", "OCSResult", "build_ocs_model", "ocs_permutations", "solve_ocs_permutations"]


@dataclass(frozen=True, eq=False)
class OCSModel:
    model: LinearModel
    n: int
    d: int
    x: VarBlock  # (d, n, n); diagonal columns fixed to 0
    t: VarBlock


@dataclass(frozen=True)
class OCSResult:
    """``links[i, j]`` = planes mapping i -> j (row and column sums d); ``planes[s]`` the permutation of plane s."""

    status: str
    t: float | None
    bound: float | None
    gap: float | None
    links: np.ndarray | None
    planes: np.ndarray | None
    backend: str
    wall_time_s: float


# Data:      n servers, d planes, T_hat = T / max T (pairs with T_ij > 0 are the demand pairs).
# Variables: x[s, i, j] in {0, 1} (plane s maps i -> j; x[s, i, i] = 0); t >= 0.
# Constraints:
#   rows:      sum_j x[s, i, j] = 1      (each TX port of plane s used once)
#   columns:   sum_i x[s, i, j] = 1      (each RX port once)
#   demand:    t * T_hat_ij - sum_s x[s, i, j] <= 0       for every demand pair
#   single:    sum_s x[s, i, j] <= 1     only without multi-links
#   symmetry:  planes are interchangeable: order them by the successor of server 0,
#              sum_j j x[s, 0, j] <= sum_j j x[s+1, 0, j]
# Objective: maximise t (t <= d * min T_hat over demand pairs <= d).
def build_ocs_model(T: np.ndarray, d: int, *, multi_links: bool = True) -> OCSModel:
    """Build the OCS-permutation MILP for demand ``T`` (bytes i -> j) and ``d`` planes."""
    T = np.asarray(T, dtype=float)
    n = T.shape[0]
    if T.ndim != 2 or T.shape != (n, n) or n < 2:
        raise InputError("the demand must be a square matrix with at least 2 servers")
    if not np.isfinite(T).all() or (T < 0).any():
        raise InputError("the demand must be finite and non-negative")
    Td = T.copy()
    np.fill_diagonal(Td, 0.0)
    if Td.max() <= 0:
        raise InputError("the demand is empty")
    if int(d) != d or d < 1:
        raise InputError(f"d must be a positive integer, got {d}")
    d = int(d)
    That = Td / Td.max()
    b = ModelBuilder(name=f"ocs_permutations_n{n}_d{d}")
    ub = np.ones((d, n, n))
    ub[:, np.arange(n), np.arange(n)] = 0.0
    x = b.add_variables((d, n, n), ub=ub, kind="binary", name="x")
    t = b.add_variables(1, lb=0.0, ub=float(d), name="t")
    xi = x.index
    s_, i_, j_ = np.meshgrid(np.arange(d), np.arange(n), np.arange(n), indexing="ij")
    b.add_constraints((s_ * n + i_).ravel(), xi.ravel(), 1.0, lb=np.ones(d * n), ub=np.ones(d * n), name="rows")
    b.add_constraints((s_ * n + j_).ravel(), xi.ravel(), 1.0, lb=np.ones(d * n), ub=np.ones(d * n), name="columns")
    pi, pj = np.nonzero(That > 0)
    P = pi.size
    rows = np.concatenate([np.arange(P), np.repeat(np.arange(P), d)])
    cols = np.concatenate([np.full(P, t[0]), xi[:, pi, pj].T.ravel()])
    vals = np.concatenate([That[pi, pj], -np.ones(P * d)])
    b.add_constraints(rows, cols, vals, ub=np.zeros(P), name="demand")
    if not multi_links:
        ii, jj = np.nonzero(~np.eye(n, dtype=bool))
        Q = ii.size
        b.add_constraints(np.repeat(np.arange(Q), d), xi[:, ii, jj].T.ravel(), 1.0, ub=np.ones(Q), name="single")
    if d > 1:
        m = d - 1
        r = np.repeat(np.arange(m), n)
        jw = np.tile(np.arange(n, dtype=float), m)
        b.add_constraints(
            np.concatenate([r, r]),
            np.concatenate([xi[:-1, 0, :].ravel(), xi[1:, 0, :].ravel()]),
            np.concatenate([jw, -jw]),
            ub=np.zeros(m),
            name="plane_order",
        )
    b.set_objective([t[0]], [1.0], sense="maximize")
    return OCSModel(b.build(), n, d, x, t)


def ocs_permutations(
    T: np.ndarray, d: int, options: ExactOptions | None = None, *, multi_links: bool = True
) -> OCSResult:
    """Solve the baseline: d permutation planes maximising ``t`` (see :func:`build_ocs_model`)."""
    options = options or ExactOptions(warm_start="none")
    started = time.perf_counter()
    check_backend(options, continuous=True)
    om = build_ocs_model(T, d, multi_links=multi_links)
    res = run_model(om.model, options)
    status = solution_status(res)
    links = planes = None
    tval = None
    if res.values is not None:
        xv = np.round(res.values[om.x.index]).astype(np.int64)
        links = xv.sum(axis=0)
        planes = xv.argmax(axis=2)
        tval = float(res.values[om.t[0]])
    return OCSResult(status, tval, res.bound, res.gap, links, planes, res.backend, time.perf_counter() - started)


def solve_ocs_permutations(instance: Instance, options: ExactOptions | None = None) -> Solution:
    """The baseline on an instance with directed links: topology = the planes' link counts, routing =
    one hop per demand pair. ``objective`` is the evaluator's value of that solution (throughput =
    ``B * t / max T``; for ``comm_time``/``iteration_time`` ``max T / (B t) + alpha``); ``details['t']``
    is the MILP's t."""
    options = options or ExactOptions(warm_start="none")
    if not instance.cluster.directed:
        raise InputError("the OCS-permutation baseline needs directed links (cluster.links: directed)")
    if instance.topology_family != "any":
        raise InputError(
            f"the OCS baseline builds general permutation planes, not topology_family {instance.topology_family}"
        )
    if instance.objective not in ("throughput", "comm_time", "iteration_time"):
        raise UnsupportedError(
            f"the OCS baseline maximises throughput; objective {instance.objective!r} is not supported"
        )
    T = traffic_matrix(instance)
    np.fill_diagonal(T, 0.0)
    fan = (T > 0).sum(axis=1).max()
    fan_in = (T > 0).sum(axis=0).max()
    if max(fan, fan_in) > instance.d:
        raise UnsupportedError(
            f"a server sends to (or receives from) {max(fan, fan_in)} servers but has only {instance.d} "
            "planes: the single-hop OCS baseline cannot serve this demand (t = 0)"
        )
    r = ocs_permutations(T, instance.d, dataclasses_replace_warm(options), multi_links=instance.cluster.multi_links)
    details = {
        "t": r.t,
        "t_bound": r.bound,
        "baseline": "ocs_permutations (SiP-ML style)",
        "routing": "one hop per demand pair",
    }
    if r.links is None or r.status not in ("optimal", "feasible"):
        return Solution(
            status=r.status if r.status != "optimal" else "no_solution",
            method="baseline",
            topology=None,
            backend=r.backend,
            wall_time_s=r.wall_time_s,
            details=details,
        )
    if not r.t or r.t <= 0:
        raise UnsupportedError("no set of permutation planes gives every demand pair a link (t = 0)")
    pi, pj = np.nonzero(T > 0)
    paths = PathSet.from_lists(([int(a), int(b)], 1.0) for a, b in zip(pi, pj))
    cap, Tmax = instance.cluster.link_bytes_per_s, float(T.max())
    # what the evaluator computes for these direct paths: min over pairs of cap * B_ij / T_ij
    thr = float((cap * r.links[pi, pj] / T[pi, pj]).min())
    thr_bound = None if r.bound is None else cap * r.bound / Tmax
    if instance.objective == "throughput":
        value, bound = thr, thr_bound
    else:
        alpha = instance.cluster.hop_latency_s
        value = 1.0 / thr + alpha
        bound = None if not thr_bound else 1.0 / thr_bound + alpha
    gap = None if bound is None else abs(value - bound) / abs(value)
    return Solution(
        status=r.status,
        method="baseline",
        topology=Topology(r.links),
        routing=Routing(paths=paths),
        objective=value,
        bound=bound,
        gap=gap,
        backend=r.backend,
        wall_time_s=r.wall_time_s,
        details=details,
    )


def dataclasses_replace_warm(options: ExactOptions) -> ExactOptions:
    """The OCS model has no heuristic warm start: drop a ``heuristic`` request instead of failing."""
    import dataclasses

    return dataclasses.replace(options, warm_start="none") if options.warm_start == "heuristic" else options
