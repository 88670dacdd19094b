"""The placement enumeration against brute force, the MILP, and its budget."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from test_placement import ENUM, MILP, OPTS, L, check_solution, make
from test_placement_bounds import _random_instance, fast_brute_force

from topoopt_ilp.core.workload import Block
from topoopt_ilp.models.placement.enumeration import enumerate_placement
from topoopt_ilp.models.placement.levels import LevelResult
from topoopt_ilp.models.placement.local_search import relaxation_bound
from topoopt_ilp.models.placement.milp import shortest_path_fractions, solve_placement, strategy_times
from topoopt_ilp.models.placement.scoring import StrategyScorer


def _search(inst, X, upper=math.inf, **kw):
    rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s)
    ls = StrategyScorer(inst, rf)
    return rf, enumerate_placement(ls, relaxation_bound(inst, rf, ls), upper, **kw)


@pytest.mark.parametrize("seed", range(30))
def test_optimum_equals_brute_force_on_random_small_instances(seed):
    # n = 4, 6, 8; circulant and non-circulant topologies; blocks; overlap full; comm_time.
    rng = np.random.default_rng(1000 + seed)
    inst, X = _random_instance(rng, (4, 6, 8)[seed % 3])
    best = fast_brute_force(inst, X)
    rf, (outcome, found) = _search(inst, X)  # no incumbent: cutoffs rise from the bound
    assert outcome == "better"
    assert found.iteration_time_s == pytest.approx(best, rel=1e-9)
    assert strategy_times(inst, rf, found.strategy)["iteration_time_s"] == pytest.approx(best, rel=1e-9)
    # with the optimum as the incumbent's score nothing is strictly better
    assert _search(inst, X, upper=best * (1 + 1e-12))[1][0] in ("incumbent", "better")
    assert _search(inst, X, upper=best * (1 - 1e-6))[1][0] == "incumbent"


def test_identical_blocks_and_memory_against_brute_force():
    # Three identical tables and one other on 4 servers; memory fits at most two tables per server.
    layers = [L("bot", 1e-3, 5e6, 2e7, [1, 2, 4], memory=1e6), L("top", 3e-3, 2e7, 1e7, [1, 2, 4], memory=1e6)]
    blocks = [Block(name=f"t{j}", bytes=4e8, lookup_bytes=3e7, compute_s=5e-4, consumer=1) for j in range(3)]
    blocks.append(Block(name="u", bytes=4e8, lookup_bytes=1e7, compute_s=1e-3, consumer=0))
    inst, X = make(4, 2, layers, blocks, memory=9e8)
    sol = solve_placement(inst, ENUM, X)
    assert sol.status == "optimal" and sol.details["algorithm"] == "enumeration"
    check_solution(inst, sol)
    assert sol.objective == pytest.approx(fast_brute_force(inst, X), rel=1e-9)


def test_budget_gives_up_and_auto_falls_back_to_the_milp(monkeypatch):
    from functools import partial

    from topoopt_ilp.models.placement import milp as pl

    layers = [L(f"l{i}", 2e-3, 1e7, 2e7, [1, 2, 4]) for i in range(3)]
    inst, X = make(4, 2, layers)
    assert _search(inst, X, max_states=2)[1] == ("gave_up", None)
    assert _search(inst, X, max_work=100)[1] == ("gave_up", None)
    assert _search(inst, X, deadline=0.0)[1] == ("gave_up", None)
    monkeypatch.setattr(pl, "enumerate_placement", partial(enumerate_placement, max_states=2))
    # identical layers: the compute-level search would settle it before the MILP (placement_levels)
    monkeypatch.setattr(pl, "level_search", lambda *a, **k: LevelResult("not_applicable", reason="test"))
    auto = solve_placement(inst, OPTS, X)
    assert auto.details["enumeration"] == "gave_up" and auto.details["algorithm"] == "milp"
    alone = solve_placement(inst, ENUM, X)  # the enumeration alone: the incumbent with the bound
    assert alone.details["algorithm"] == "enumeration" and "not run" in alone.details["milp"]
    assert alone.objective >= auto.objective * (1 - 1e-9) and alone.bound <= auto.objective * (1 + 1e-9)
    check_solution(inst, alone)


def test_agrees_with_the_milp_on_a_small_workload():
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
    from small_workloads import small_instances

    from topoopt_ilp.methods import METHODS

    inst = small_instances()["skewed-mlp-6-d2"]
    X = METHODS["heuristic"](inst).topology.matrix
    enum = solve_placement(inst, OPTS, X)
    milp = solve_placement(inst, MILP, X)
    assert enum.details["algorithm"] == "enumeration" and milp.details["algorithm"] == "milp"
    assert enum.status == milp.status == "optimal"
    assert enum.objective == pytest.approx(milp.objective, rel=1e-6)
    check_solution(inst, enum)
