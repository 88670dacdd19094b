"""The chain bound (arc classes, pair thresholds) against brute force over every strategy."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from test_placement import (
    CASES,
    GBPS,
    MILP,
    L,
    all_strategies,
    brute_force,
    check_solution,
    make,
    ring,
)

from conftest import placed_solution
from topoopt_ilp.core.strategy import server_memory
from topoopt_ilp.core.workload import Block
from topoopt_ilp.evaluation.evaluate import evaluate
from topoopt_ilp.models.placement import milp as pl
from topoopt_ilp.models.placement.bounds import arc_classes, chain_bound
from topoopt_ilp.models.placement.local_search import relaxation_bound
from topoopt_ilp.models.placement.milp import shortest_path_fractions, solve_placement, strategy_times


def fast_brute_force(inst, X, rings: str = "shortest") -> float:
    """Best iteration (or comm) time over every memory-feasible strategy by ``strategy_times`` with
    that ring policy (equal to the evaluator: tested in test_placement, and spot-checked here)."""
    rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s, rings)
    cap = inst.workload.server_memory_bytes
    best, arg = np.inf, None
    for st in all_strategies(inst):
        if (server_memory(inst.workload, inst.n, st) > cap * (1 + 1e-9)).any():
            continue
        t = strategy_times(inst, rf, st)["iteration_time_s"]
        if t < best:
            best, arg = t, st
    m = evaluate(inst, placed_solution(inst, X, arg, rings), routing="shortest_path")
    assert best == pytest.approx(m.iteration_time_s if inst.objective == "iteration_time" else m.comm_time_s, rel=1e-9)
    return best


def circulant(n: int, jumps: tuple[int, ...]) -> np.ndarray:
    X = np.zeros((n, n), dtype=np.int64)
    for i in range(n):
        for j in jumps:
            X[i, (i + j) % n] += 1
            X[(i + j) % n, i] += 1
    return X


def test_arc_classes_are_the_jumps():
    rf = shortest_path_fractions(circulant(8, (1, 3)), 1.0)
    cls = arc_classes(rf)
    jump = (rf.head - rf.tail) % 8
    assert len(set(cls)) == 4  # jumps 1, 3, 5, 7
    for c in set(cls):
        assert len(set(jump[cls == c])) == 1


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize(
    "overlap,objective", [("none", "iteration_time"), ("full", "iteration_time"), ("none", "comm_time")]
)
def test_both_bounds_are_below_the_brute_force_optimum(name, overlap, objective):
    n, d, layers, blocks, X = CASES[name]
    inst, X = make(n, d, layers, blocks, X=X, overlap=overlap, objective=objective)
    rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s)
    best = brute_force(inst, X)
    lb, info = chain_bound(inst, rf)
    assert lb <= best * (1 + 1e-9)
    assert not info["chain_bound_timed_out"]
    volume = relaxation_bound(inst, rf)  # the volume relaxation the chain bound strengthens
    assert volume <= best * (1 + 1e-9)
    assert volume > 0 or objective == "comm_time"  # every layer at k = 1 on one server communicates nothing
    assert info["chain_bound_converged"]
    # never weaker than the volume relaxation (the cells' thresholds are exact values)
    assert lb >= pl.relaxation_bound(inst, rf) * (1 - 1e-8)
    # with the optimum as upper bound it proves it or stays below
    lb2, _ = chain_bound(inst, rf, upper=best)
    assert lb2 <= best * (1 + 1e-9)


def _random_instance(rng: np.random.Generator, n: int):
    degs = [k for k in (1, 2, 4, 8) if n % k == 0] + ([3, 6] if n % 3 == 0 else [])
    nl = int(rng.integers(2, 4)) if n <= 6 else 2
    layers = []
    for i in range(nl):
        configs = sorted(set(rng.choice(degs, size=int(rng.integers(1, len(degs) + 1)), replace=False).tolist()))
        layers.append(
            L(
                f"l{i}",
                float(rng.uniform(0.5e-3, 5e-3)),
                float(rng.choice([0.0, rng.uniform(1e6, 4e7)])),
                float(rng.choice([0.0, rng.uniform(1e6, 6e7)])),
                configs,
            )
        )
    nb = int(rng.integers(0, 2 if n == 8 else 3))
    blocks = [
        Block(
            name=f"t{j}",
            bytes=1e8,
            lookup_bytes=float(rng.uniform(1e6, 4e7)),
            compute_s=float(rng.uniform(0, 1e-3)),
            consumer=int(rng.integers(nl)),
        )
        for j in range(nb)
    ]
    jumps = {4: [(1,), (1, 2)], 6: [(1,), (1, 2), (1, 3)], 8: [(1,), (1, 3), (1, 2), (1, 4)]}[n]
    shape = rng.random()
    if shape < 0.6:
        X = circulant(n, jumps[int(rng.integers(len(jumps)))])
    elif shape < 0.85:  # not circulant: the bound's precomputation takes every pair
        X = ring(n, tuple(int(c) for c in rng.integers(1, 3, size=n)))
    else:
        X = None
    if X is not None and (X.sum(axis=1) > 4).any():
        X = None
    overlap = "full" if rng.random() < 0.25 else "none"
    objective = "comm_time" if rng.random() < 0.15 else "iteration_time"
    inst, X = make(n, 4, layers, blocks, X=X, overlap=overlap, objective=objective, memory=1e12)
    return inst, X


@pytest.mark.parametrize("seed", range(24))
def test_chain_bound_on_random_small_instances(seed):
    rng = np.random.default_rng(seed)
    n = (4, 6, 8)[seed % 3]
    inst, X = _random_instance(rng, n)
    rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s)
    best = fast_brute_force(inst, X)
    lb, _ = chain_bound(inst, rf)
    assert lb <= best * (1 + 1e-9)
    lb_rough, _ = chain_bound(inst, rf, kelley_iters=1)  # fewer cutting planes: weaker, still valid
    assert lb_rough <= best * (1 + 1e-9)
    lb_now, info = chain_bound(inst, rf, time_limit_s=0.0)  # stopped at once: the root cell's value
    assert lb_now <= best * (1 + 1e-9)
    assert info["chain_bound_timed_out"] or info["chain_bound_converged"] or lb_now == best


def test_chain_bound_sees_a_ring_on_one_arc_class():
    # One layer, degree 4 only, on a 4-ring, one ring in coset order: its AllReduce uses only the
    # forward arcs. The volume relaxation spreads it over all 8 arcs (half the true bandwidth term);
    # the class bound puts it on the 4 forward arcs and is exact.
    inst, X = make(4, 2, [L("a", 4e-3, 2.5e7, 0.0, [4])])
    rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s, "coset")
    best = fast_brute_force(inst, X, "coset")
    assert pl.relaxation_bound(inst, rf) < best * 0.9
    assert chain_bound(inst, rf)[0] == pytest.approx(best, rel=1e-6)


def test_chain_bound_sees_the_resharding_of_a_pair():
    # Two layers that must use different cosets (degree 2 at start 0 vs. degree 1 elsewhere is the
    # only way to keep compute low): the pair threshold sees the resharding's busiest arc.
    layers = [L("a", 8e-3, 0.0, 5e7, [2]), L("b", 8e-3, 0.0, 0.0, [2])]
    inst, X = make(4, 2, layers)
    rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s)
    best = brute_force(inst, X)
    lb, _ = chain_bound(inst, rf)
    assert lb <= best * (1 + 1e-9)
    assert lb >= pl.relaxation_bound(inst, rf) * (1 - 1e-9)


def test_solve_placement_reports_the_chain_bound():
    n, d, layers, blocks, X = CASES["dlrm-ring4"]
    inst, X = make(n, d, layers, blocks, X=X)
    sol = solve_placement(inst, MILP, X)
    check_solution(inst, sol)
    det = sol.details
    assert det["relaxation_bound_s"] >= det["volume_bound_s"] * (1 - 1e-12)
    if "chain_bound_s" in det:
        assert det["relaxation_bound_s"] == pytest.approx(max(det["volume_bound_s"], det["chain_bound_s"]))
    assert sol.bound <= brute_force(inst, X) * (1 + 1e-9)
    off = solve_placement(inst, MILP, X, chain_bound_s=0)
    assert "chain_bound_s" not in off.details and off.objective == pytest.approx(sol.objective, rel=1e-9)


def test_milp_objective_equals_the_evaluator_of_its_own_solution():
    for name in ("mlp-ring4", "dlrm-ring4"):
        n, d, layers, blocks, X = CASES[name]
        inst, X = make(n, d, layers, blocks, X=X)
        sol = solve_placement(inst, MILP, X, local_search_s=0, chain_bound_s=0)
        if "model_objective_s" not in sol.details:
            continue  # the relaxation bound proved the start optimal: no MILP ran
        assert sol.details["model_objective_s"] == pytest.approx(sol.objective, rel=1e-6)
        check_solution(inst, sol)


def test_ring_helper_is_circulant():
    rf = shortest_path_fractions(ring(6), GBPS)
    assert len(set(arc_classes(rf))) == 2
    assert list(itertools.islice(all_strategies(make(4, 2, [L("a", 1e-3, 1.0, 1.0, [1])])[0]), 1))
