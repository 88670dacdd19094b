"""SiP-ML-style OCS permutation baseline: closed form, brute force, evaluator, backends."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from topoopt_ilp.core.instance import Cluster, Demand, Instance
from topoopt_ilp.errors import InputError, UnsupportedError
from topoopt_ilp.evaluation.evaluate import evaluate
from topoopt_ilp.evaluation.verify import verify
from topoopt_ilp.methods import finalize
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.topology.ocs import ocs_permutations, solve_ocs_permutations


def derangements(n):
    return [p for p in itertools.permutations(range(n)) if all(p[i] != i for i in range(n))]


def brute_force(T, d, multi=True):
    n = T.shape[0]
    That = T / T.max()
    pairs = np.argwhere(That > 0)
    best = 0.0
    for planes in itertools.combinations_with_replacement(derangements(n), d):
        B = np.zeros((n, n))
        for p in planes:
            B[np.arange(n), p] += 1
        if not multi and (B > 1).any():
            continue
        best = max(best, min(B[i, j] / That[i, j] for i, j in pairs))
    return best


@pytest.mark.parametrize("n,d", [(4, 1), (4, 3), (5, 2), (6, 4)])
def test_permutation_demand_gives_t_equal_d(n, d):
    perm = np.roll(np.arange(n), 1)
    T = np.zeros((n, n))
    T[np.arange(n), perm] = 5.0
    r = ocs_permutations(T, d)
    assert r.status == "optimal" and abs(r.t - d) < 1e-9
    assert (r.links.sum(axis=0) == d).all() and (r.links.sum(axis=1) == d).all() and not np.diag(r.links).any()


@pytest.mark.parametrize("n,d,multi", [(3, 1, True), (3, 2, True), (4, 2, True), (4, 3, True), (4, 2, False)])
def test_brute_force(n, d, multi):
    rng = np.random.default_rng(n * 7 + d)
    for _ in range(3):
        T = rng.integers(0, 5, (n, n)).astype(float)
        np.fill_diagonal(T, 0)
        if T.max() == 0:
            continue
        r = ocs_permutations(T, d, multi_links=multi)
        assert r.status == "optimal"
        assert abs(r.t - brute_force(T, d, multi)) < 1e-9
        # the planes are permutations without fixed points
        for p in r.planes:
            assert sorted(p) == list(range(n)) and all(p[i] != i for i in range(n))


def ocs_instance(n, d, mp, objective="throughput"):
    return Instance(Cluster(n, d, 8.0, hop_latency_us=1.0, links="directed"), Demand(mp=tuple(mp)), objective=objective)


@pytest.mark.parametrize("objective", ["throughput", "comm_time"])
def test_solution_matches_evaluator_and_verifies(objective):
    mp = [(0, 1, 4e6), (1, 2, 1e6), (2, 0, 2e6), (3, 4, 3e6), (4, 3, 1e6), (5, 0, 1e6), (0, 5, 2e6)]
    instance = ocs_instance(6, 3, mp, objective)
    sol = solve_ocs_permutations(instance, ExactOptions())
    assert sol.status == "optimal"
    m = evaluate(instance, sol, routing="given")
    key = "throughput" if objective == "throughput" else "comm_time_s"
    assert abs(sol.objective - getattr(m, key)) <= 1e-6 * sol.objective
    assert verify(instance, finalize(instance, sol)).valid


@pytest.mark.parametrize("backend", ["highs", "scip", "cbc"])
def test_backends_agree(backend):
    T = np.random.default_rng(5).integers(0, 6, (5, 5)).astype(float)
    np.fill_diagonal(T, 0)
    ref = ocs_permutations(T, 2)
    r = ocs_permutations(T, 2, ExactOptions(backend=backend, warm_start="none"))
    assert r.status == "optimal" and abs(r.t - ref.t) < 1e-6


def test_cpsat_refuses_continuous_t_and_bad_inputs():
    with pytest.raises(UnsupportedError):
        ocs_permutations(np.ones((3, 3)), 1, ExactOptions(backend="cpsat", warm_start="none"))
    undirected = Instance(Cluster(4, 2, 8.0), Demand(all_to_all=1.0), objective="throughput")
    with pytest.raises(InputError, match="directed"):
        solve_ocs_permutations(undirected)
    with pytest.raises(UnsupportedError, match="planes"):
        solve_ocs_permutations(ocs_instance(4, 1, [(0, 1, 1.0), (0, 2, 1.0)]))
