"""The circulant jump-set MILPs against brute force, closed forms, the evaluator and every backend."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

from topoopt_ilp.core.instance import AllReduceGroup, Cluster, Demand, Instance
from topoopt_ilp.core.solution import Topology
from topoopt_ilp.core.traffic import traffic_matrix
from topoopt_ilp.errors import InputError, UnsupportedError
from topoopt_ilp.evaluation.evaluate import evaluate
from topoopt_ilp.evaluation.verify import verify
from topoopt_ilp.heuristic import circulant_matrix, circulant_stats
from topoopt_ilp.methods import finalize
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.topology.circulant import (
    build_circulant_model,
    counting_bound,
    jump_classes,
    rotation_offsets,
    solve_circulant,
)

GBPS = 8.0  # 1e9 bytes/s per link
REL = 1e-6


def inst(n, d, *, objective="throughput", family="circulant", demand=None, directed=False, regular=True, latency=0.0):
    return Instance(
        Cluster(n, d, GBPS, hop_latency_us=latency, links="directed" if directed else "undirected", regular=regular),
        demand or Demand(all_to_all=1e6),
        objective=objective,
        topology_family=family,
    )


def close(a, b, rel=REL):
    return abs(a - b) <= rel * max(abs(a), abs(b))


def jump_sets(n, d, directed, family):
    """Every jump set (distinct classes) of the family with exactly d ports."""
    cls, ports = jump_classes(n, directed, family)
    for r in range(1, cls.size + 1):
        for combo in itertools.combinations(range(cls.size), r):
            if ports[list(combo)].sum() == d:
                yield tuple(int(cls[c]) for c in combo)


def checked(instance, options=None):
    """Solve, then check the solution with the verifier and the evaluator's `given` routing."""
    sol = solve_circulant(instance, options or ExactOptions(warm_start="none"))
    assert sol.status == "optimal", sol.details
    fin = finalize(instance, sol, routing="given")
    report = verify(instance, fin)
    assert report.valid, report.violations
    m = evaluate(instance, sol, routing="given")
    key = {"iteration_time": "comm_time_s", "comm_time": "comm_time_s"}.get(instance.objective, instance.objective)
    assert close(sol.objective, getattr(m, key))
    return sol, m


# ---------------------------------------------------------------------------------------------
# throughput: brute force over every jump set with the evaluator's max-concurrent-flow LP
CASES = [
    (10, 4, False, "circulant"),
    (12, 4, False, "circulant"),
    (12, 3, False, "circulant"),
    (11, 4, False, "circulant"),
    (12, 4, False, "coprime_circulant"),
    (7, 2, True, "circulant"),
]


@pytest.mark.parametrize("n,d,directed,family", CASES)
def test_throughput_equals_best_enumerated(n, d, directed, family):
    instance = inst(n, d, directed=directed, family=family)
    best = max(
        evaluate(instance, Topology(circulant_matrix(n, J, directed), J), routing="optimal").throughput
        for J in jump_sets(n, d, directed, family)
    )
    sol, m = checked(instance)
    assert close(sol.objective, best)
    assert close(m.throughput, sol.details["milp_throughput"])  # the routes reproduce the MILP's lambda


def test_throughput_non_rotation_invariant_demand_uses_full_mcf():
    rng = np.random.default_rng(3)
    n, d = 8, 4
    mp = tuple((int(s), int(t), float(rng.integers(1, 9)) * 1e6) for s, t in rng.integers(0, n, (14, 2)) if s != t)
    instance = inst(n, d, demand=Demand(mp=mp))
    assert rotation_offsets(traffic_matrix(instance)) is None
    best = max(
        evaluate(instance, Topology(circulant_matrix(n, J), J), routing="optimal").throughput
        for J in jump_sets(n, d, False, "circulant")
    )
    sol, _ = checked(instance)
    assert sol.details["model"] == "mcf"
    assert close(sol.objective, best)


def test_ring_allreduce_demand_is_rotation_invariant_and_optimal():
    n, d = 10, 4
    instance = inst(n, d, demand=Demand(allreduce=(AllReduceGroup(tuple(range(n)), 4e6),)), family="coprime_circulant")
    assert rotation_offsets(traffic_matrix(instance)) is not None
    cm = build_circulant_model(instance)
    assert not cm.fixed_jump_one  # a ring demand is not invariant under unit multipliers
    best = max(
        evaluate(instance, Topology(circulant_matrix(n, J), J), routing="optimal").throughput
        for J in jump_sets(n, d, False, "coprime_circulant")
    )
    sol, _ = checked(instance)
    assert close(sol.objective, best)


@pytest.mark.parametrize("n", [7, 8, 9])
def test_ring_closed_form(n):
    instance = inst(n, 2)
    sol, _ = checked(instance)
    bps = GBPS * 1e9 / 8
    assert close(sol.objective, 2 / (n * n // 4) * bps / 1e6)


def test_comm_time_objective_adds_latency_honestly():
    instance = inst(12, 4, objective="comm_time", latency=2.0)
    sol = solve_circulant(instance, ExactOptions(warm_start="none"))
    assert "latency" in sol.details["objective_note"]
    m = evaluate(instance, sol, routing="given")
    assert close(sol.objective, m.comm_time_s)
    assert sol.bound <= sol.objective * (1 + 1e-9)
    assert verify(instance, finalize(instance, sol)).valid


# ---------------------------------------------------------------------------------------------
# ASPL and diameter: brute force by BFS; closed form A344517
@pytest.mark.parametrize(
    "n,d,family",
    [
        (12, 4, "circulant"),
        (13, 4, "circulant"),
        (16, 6, "coprime_circulant"),
        (12, 5, "circulant"),
        (20, 4, "coprime_circulant"),
    ],
)
def test_aspl_and_diameter_equal_bfs_minimum(n, d, family):
    stats = [circulant_stats(n, J) for J in jump_sets(n, d, False, family) if np.gcd.reduce(list(J) + [n]) == 1]
    for objective, idx in (("aspl", 1), ("diameter", 0)):
        instance = inst(n, d, objective=objective, family=family)
        sol, m = checked(instance, ExactOptions())
        assert close(sol.objective, min(s[idx] for s in stats))


@pytest.mark.parametrize("n", [10, 17, 25, 26, 33, 40])
def test_four_regular_min_diameter_A344517(n):
    sol, _ = checked(inst(n, 4, objective="diameter"), ExactOptions())
    assert sol.objective == math.ceil((math.sqrt(2 * n - 1) - 1) / 2)


@pytest.mark.parametrize("formulation", ["strong", "basic"])
def test_formulations_agree(formulation):
    for objective in ("throughput", "aspl", "diameter"):
        instance = inst(14, 4, objective=objective, family="circulant")
        sol = solve_circulant(instance, ExactOptions(formulation=formulation))
        ref = solve_circulant(instance, ExactOptions(formulation="strong", warm_start="none"))
        assert sol.status == ref.status == "optimal"
        assert close(sol.objective, ref.objective)


def test_counting_bound_closed_form():
    # d = 4: 2k^2 + 2k + 1 residues within k hops (Boesch & Wang)
    c = counting_bound(10**6, 4, False, kmax=6)
    assert list(c) == [2 * k * k + 2 * k + 1 for k in range(7)]


# ---------------------------------------------------------------------------------------------
# backends
@pytest.mark.parametrize("backend", ["highs", "scip", "cbc"])
@pytest.mark.parametrize("objective", ["throughput", "aspl", "diameter"])
def test_backends_agree(backend, objective):
    instance = inst(10, 4, family="circulant", objective=objective)
    ref = solve_circulant(instance, ExactOptions(warm_start="none"))
    sol, _ = checked(instance, ExactOptions(backend=backend, warm_start="none"))
    assert close(sol.objective, ref.objective)


def test_cpsat_refuses_flow_model_and_solves_integer_ones():
    with pytest.raises(UnsupportedError):
        solve_circulant(inst(10, 4), ExactOptions(backend="cpsat", warm_start="none"))
    for objective in ("aspl", "diameter"):
        instance = inst(11, 4, objective=objective)
        ref = solve_circulant(instance, ExactOptions(warm_start="none"))
        sol, _ = checked(instance, ExactOptions(backend="cpsat", warm_start="none"))
        assert close(sol.objective, ref.objective)


@pytest.mark.parametrize("objective", ["throughput", "aspl", "diameter"])
def test_heuristic_warm_start_gives_the_same_optimum(objective):
    instance = inst(16, 4, objective=objective, family="coprime_circulant")
    a = solve_circulant(instance, ExactOptions(warm_start="heuristic"))
    b = solve_circulant(instance, ExactOptions(warm_start="none"))
    assert a.details["warm_start_jumps"] is not None
    assert a.status == b.status == "optimal" and close(a.objective, b.objective)


# ---------------------------------------------------------------------------------------------
# errors
def test_unrealisable_degrees_are_clear_errors():
    with pytest.raises(InputError, match="odd"):
        inst(9, 3)  # odd degree, odd n, regular: refused when the instance is built
    sol, _ = checked(inst(9, 3, regular=False))  # "at most 3 ports": one +-j pair (2 ports) is the best
    assert sol.topology.matrix.sum(axis=1).max() == 2
    # A family without a jump set of the degree: refused when the instance is built, too.
    with pytest.raises(InputError, match="coprime"):
        inst(10, 3, family="coprime_circulant")
    with pytest.raises(InputError, match="jump class"):
        inst(8, 6, family="coprime_circulant")  # classes 1, 3 only: 4 ports


def test_too_large_and_wrong_family():
    with pytest.raises(UnsupportedError, match="4096"):
        solve_circulant(inst(4098, 4, family="coprime_circulant"))
    big = dataclasses.replace(inst(8, 4), topology_family="any")
    with pytest.raises(InputError):
        solve_circulant(big)


def test_model_is_built_from_arrays_and_exports(tmp_path):
    instance = inst(12, 4, family="coprime_circulant")
    out = tmp_path / "m.lp"
    sol = solve_circulant(instance, ExactOptions(export_model=str(out)))
    assert out.exists() and sol.status == "optimal"
    cm = build_circulant_model(instance)
    assert cm.f.shape == (cm.arcs.size, 12)


@pytest.mark.parametrize("family", ["circulant", "coprime_circulant"])
def test_directed_aspl_and_diameter_equal_bfs_minimum(family):
    n, d = 10, 2
    stats = []
    for J in jump_sets(n, d, True, family):
        try:
            stats.append(circulant_stats(n, J, directed=True))
        except ValueError:  # disconnected
            pass
    for objective, idx in (("aspl", 1), ("diameter", 0)):
        sol, _ = checked(inst(n, d, objective=objective, family=family, directed=True), ExactOptions())
        assert close(sol.objective, min(s[idx] for s in stats))


def test_orbit_representative_is_isomorphic_and_kept_by_the_model():
    from topoopt_ilp.models.topology.circulant import orbit_representative

    n = 64
    for J in [(3, 7, 21, 29), (1, 3, 7, 15), (5, 9, 13, 31)]:
        R = orbit_representative(n, J)
        assert R[0] == 1
        assert circulant_stats(n, R) == circulant_stats(n, J)
    # the warm start built from a non-representative heuristic set stays feasible in the strong model
    instance = inst(n, 8, family="coprime_circulant")
    cm = build_circulant_model(instance)
    from topoopt_ilp.models.topology.circulant import _fixed_y_lp

    for J in [(3, 7, 21, 29), (5, 9, 13, 31)]:
        vals = _fixed_y_lp(cm, cm.y_vector(orbit_representative(n, J)), "max_lambda")
        assert vals is not None and cm.model.max_violation(vals) < 1e-6
