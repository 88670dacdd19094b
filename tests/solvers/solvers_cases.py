"""Small models with known optima, shared by the solver-layer tests (not a test module).

Every optimum is computed independently of our solver layer (enumeration, or scipy's linprog
per fixed integer part), so the conformance suite compares each backend with an answer, not
with another backend.
"""

from __future__ import annotations

import itertools
import os
import signal
import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog

from topoopt_ilp.solvers import LinearModel, ModelBuilder, SolveStatus

INF = np.inf


@dataclass(frozen=True)
class Case:
    name: str
    model: LinearModel
    status: SolveStatus
    objective: float | None = None


def knapsack() -> Case:
    values = np.array([10, 13, 18, 31, 7, 15, 22, 9])
    weights = np.array([11, 15, 20, 35, 10, 33, 24, 12])
    cap = 60
    b = ModelBuilder("knapsack")
    x = b.add_variables(len(values), kind="binary", name="take")
    b.add_constraints(np.zeros(len(values)), x.index, weights, ub=cap, name="cap")
    b.set_objective(x.index, values, sense="maximize")
    best = max(
        int(values @ np.array(s)) for s in itertools.product((0, 1), repeat=len(values)) if weights @ np.array(s) <= cap
    )
    return Case("knapsack", b.build(), SolveStatus.OPTIMAL, float(best))


def assignment() -> Case:
    cost = np.array([[9, 2, 7, 8, 6], [6, 4, 3, 7, 5], [5, 8, 1, 8, 4], [7, 6, 9, 4, 3], [3, 7, 5, 2, 9]], float)
    n = cost.shape[0]
    b = ModelBuilder("assignment")
    x = b.add_variables((n, n), kind="binary", name="assign")
    i, j = np.divmod(np.arange(n * n), n)
    b.add_constraints(i, x.index.ravel(), 1.0, lb=1, ub=1, count=n, name="row")
    b.add_constraints(j, x.index.ravel(), 1.0, lb=1, ub=1, count=n, name="col")
    b.set_objective(x.index.ravel(), cost.ravel(), constant=10.0)
    best = min(sum(cost[r, p[r]] for r in range(n)) for p in itertools.permutations(range(n))) + 10.0
    return Case("assignment", b.build(), SolveStatus.OPTIMAL, float(best))


# Fixed-charge network: (tail, head, capacity, unit cost, fixed cost); 12 units from node 0 to 3.
ARCS = [(0, 1, 10, 1, 8), (0, 2, 10, 2, 3), (1, 3, 10, 1, 8), (2, 3, 10, 2, 3), (0, 3, 5, 5, 1), (1, 2, 6, 0.5, 1)]
SUPPLY = np.array([12, 0, 0, -12])


def fixed_charge_flow() -> Case:
    m = len(ARCS)
    tail, head, cap, unit, fixed = (np.array(c, float) for c in zip(*ARCS))
    b = ModelBuilder("fixed_charge")
    f = b.add_variables(m, name="flow")
    y = b.add_variables(m, kind="binary", name="open")
    k = np.arange(m)
    # conservation: out - in = supply
    b.add_constraints(
        np.r_[tail, head].astype(int),
        np.r_[f.index, f.index],
        np.r_[np.ones(m), -np.ones(m)],
        lb=SUPPLY,
        ub=SUPPLY,
        name="balance",
    )
    b.add_constraints(np.r_[k, k], np.r_[f.index, y.index], np.r_[np.ones(m), -cap], ub=0.0, name="link")
    b.set_objective(np.r_[f.index, y.index], np.r_[unit, fixed])
    best = INF
    a_eq = np.zeros((4, m))
    a_eq[tail.astype(int), k] += 1
    a_eq[head.astype(int), k] -= 1
    for open_ in itertools.product((0, 1), repeat=m):
        o = np.array(open_, float)
        res = linprog(unit, A_eq=a_eq, b_eq=SUPPLY, bounds=list(zip(np.zeros(m), cap * o)), method="highs")
        if res.status == 0:
            best = min(best, res.fun + fixed @ o)
    return Case("fixed_charge_flow", b.build(), SolveStatus.OPTIMAL, float(best))


def weak_lp_bound() -> Case:
    """max x + y, 2x + 2y <= 3, x, y integer: integer optimum 1, LP relaxation 1.5."""
    b = ModelBuilder("weak_lp")
    x = b.add_variables(2, ub=5, kind="integer", name="x")
    b.add_constraints([0, 0], x.index, [2, 2], ub=3, name="c")
    b.set_objective(x.index, [1, 1], sense="maximize")
    return Case("weak_lp_bound", b.build(), SolveStatus.OPTIMAL, 1.0)


def general_integer() -> Case:
    """min 3a + 5b + 4c, 2a + 3b + c >= 11 (ranged <= 20), a + b + 2c >= 6, integers in [0, 10]."""
    b = ModelBuilder("general_integer")
    v = b.add_variables(3, ub=10, kind="integer", name="v")
    b.add_constraints([0, 0, 0, 1, 1, 1], np.r_[v.index, v.index], [2, 3, 1, 1, 1, 2], lb=[11, 6], ub=[20, INF])
    b.set_objective(v.index, [3, 5, 4])
    best = min(
        3 * a + 5 * bb + 4 * c
        for a, bb, c in itertools.product(range(11), repeat=3)
        if 11 <= 2 * a + 3 * bb + c <= 20 and a + bb + 2 * c >= 6
    )
    return Case("general_integer", b.build(), SolveStatus.OPTIMAL, float(best))


def pure_lp() -> Case:
    """max 3x + 2y, x + y <= 4, x + 3y <= 6, 1 <= x - y <= 2 (ranged), x <= 3: optimum 11 at (3, 1)."""
    b = ModelBuilder("lp")
    x = b.add_variables(2, ub=[3, INF], name="x")
    b.add_constraints(
        [0, 0, 1, 1, 2, 2],
        np.r_[x.index, x.index, x.index],
        [1, 1, 1, 3, 1, -1],
        lb=[-INF, -INF, 1],
        ub=[4, 6, 2],
        name="c",
    )
    b.set_objective(x.index, [3, 2], sense="maximize", constant=0.5)
    res = linprog([-3, -2], A_ub=[[1, 1], [1, 3], [1, -1], [-1, 1]], b_ub=[4, 6, 2, -1], bounds=[(0, 3), (0, None)])
    return Case("pure_lp", b.build(), SolveStatus.OPTIMAL, float(-res.fun + 0.5))


def infeasible_mip() -> Case:
    """x + y >= 3 with binaries (the LP relaxation is infeasible too) plus 2a + 2b = 3 (LP-feasible)."""
    b = ModelBuilder("infeasible")
    x = b.add_variables(2, kind="binary", name="x")
    z = b.add_variables(2, ub=5, kind="integer", name="z")
    b.add_constraints([0, 0], z.index, [2, 2], lb=3, ub=3, name="odd")
    b.add_constraints([0, 0], x.index, [1, 1], lb=1, name="one")
    b.set_objective(np.r_[x.index, z.index], [1, 1, 1, 1])
    return Case("infeasible_mip", b.build(), SolveStatus.INFEASIBLE)


def infeasible_lp() -> Case:
    b = ModelBuilder("infeasible_lp")
    x = b.add_variables(2, ub=1, name="x")
    b.add_constraints([0, 0], x.index, [1, 1], lb=3, name="c")
    b.set_objective(x.index, [1, 1])
    return Case("infeasible_lp", b.build(), SolveStatus.INFEASIBLE)


def unbounded_mip() -> Case:
    """max x + y, x - y <= 1, x, y >= 0 integer."""
    b = ModelBuilder("unbounded")
    x = b.add_variables(2, kind="integer", name="x")
    b.add_constraints([0, 0], x.index, [1, -1], ub=1, name="c")
    b.set_objective(x.index, [1, 1], sense="maximize")
    return Case("unbounded_mip", b.build(), SolveStatus.UNBOUNDED)


def unbounded_lp() -> Case:
    """min -x - y over x - y <= 1, x, y >= 0 continuous."""
    b = ModelBuilder("unbounded_lp")
    x = b.add_variables(2, name="x")
    b.add_constraints([0, 0], x.index, [1, -1], ub=1, name="c")
    b.set_objective(x.index, [-1, -1])
    return Case("unbounded_lp", b.build(), SolveStatus.UNBOUNDED)


ALL_CASES = [
    knapsack,
    assignment,
    fixed_charge_flow,
    weak_lp_bound,
    general_integer,
    pure_lp,
    infeasible_mip,
    infeasible_lp,
    unbounded_mip,
    unbounded_lp,
]


def market_split(m: int, n: int, seed: int) -> tuple[LinearModel, np.ndarray]:
    """A market-split style feasibility-hard model with a planted solution.

    Rows ``sum_j a_ij x_j = d_i`` with random a in [0, 99] and d = A @ x* for a random 0/1 x*;
    objective: minimise a random cost. Heuristics rarely find a point, so a solver stopped at
    the root (or after a short time) has an incumbent only if it used the warm start.
    Returns the model and x*.
    """
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 100, size=(m, n)).astype(float)
    x_star = (rng.random(n) < 0.5).astype(float)
    d = a @ x_star
    b = ModelBuilder(f"market_split_{m}x{n}")
    x = b.add_variables(n, kind="binary", name="x")
    i, j = np.divmod(np.arange(m * n), n)
    b.add_constraints(i, x.index[j], a.ravel(), lb=d, ub=d, name="split")
    b.set_objective(x.index, rng.integers(1, 20, size=n).astype(float))
    return b.build(), x_star


def hard_knapsack(n: int = 500, m: int = 30, seed: int = 1) -> LinearModel:
    """A multi-dimensional 0/1 knapsack that no backend proves optimal within a second.

    The size matters: at 120 x 15 an idle machine's CBC proved the optimum in 0.8 s (the test then
    passed only on a loaded machine); 500 x 30 (the size of OR-Library's hardest mknap class) keeps
    every backend's gap at 0.2-0.6 % after one second."""
    rng = np.random.default_rng(seed)
    a = rng.integers(10, 100, size=(m, n)).astype(float)
    c = rng.integers(10, 100, size=n).astype(float)
    b = ModelBuilder("hard_knapsack")
    x = b.add_variables(n, kind="binary", name="x")
    i, j = np.divmod(np.arange(m * n), n)
    b.add_constraints(i, x.index[j], a.ravel(), ub=a.sum(axis=1) / 2, name="cap")
    b.set_objective(x.index, c, sense="maximize")
    return b.build()


# -- adapters for the wall-clock guard tests (run inside a worker process) ------------------------
def sleepy(model, options, deadline=None):  # noqa: ANN001, ANN201 - adapter signature
    """An adapter that ignores its time limit."""
    time.sleep(60)


def crashing(model, options, deadline=None):  # noqa: ANN001, ANN201
    """An adapter that dies the way a segfaulting solver does."""
    os.kill(os.getpid(), signal.SIGSEGV)
