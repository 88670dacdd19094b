"""The compute-level search (models/placement/levels.py) against brute force over every strategy."""

from __future__ import annotations

import numpy as np
import pytest
from test_placement import L, all_strategies, make, ring
from test_placement_bounds import circulant, fast_brute_force

from topoopt_ilp.core.strategy import server_memory
from topoopt_ilp.core.workload import Block
from topoopt_ilp.models.placement.levels import level_search, level_unit
from topoopt_ilp.models.placement.milp import shortest_path_fractions, strategy_times
from topoopt_ilp.models.placement.scoring import StrategyScorer


def _lattice_instance(rng: np.random.Generator, n: int):
    """2-4 layers whose single-server times are small multiples of 1 ms (so every t/k is a multiple
    of 1 ms / n), random bytes and configs, on a random small topology; memory binding or not."""
    degs = [k for k in (1, 2, 3, 4, 6, 8) if n % k == 0]
    layers = []
    for i in range(int(rng.integers(2, 5 if n <= 4 else 4))):
        configs = sorted(set(rng.choice(degs, size=int(rng.integers(1, len(degs) + 1)), replace=False).tolist()))
        layers.append(
            L(
                f"l{i}",
                1e-3 * int(rng.integers(1, 4)),
                float(rng.choice([0.0, rng.uniform(1e6, 4e7)])),
                float(rng.choice([0.0, rng.uniform(1e6, 6e7)])),
                configs,
                memory=1e9,
            )
        )
    jumps = {4: [(1,), (1, 2)], 6: [(1,), (1, 2), (1, 3)], 8: [(1,), (1, 3), (1, 2)]}[n]
    X = circulant(n, jumps[int(rng.integers(len(jumps)))]) if rng.random() < 0.7 else ring(n)
    memory = 2.5e9 if rng.random() < 0.3 else 1e12  # 2.5e9: at most two replicas a server
    overlap = "full" if rng.random() < 0.3 else "none"
    return make(n, 4, layers, X=X, memory=memory, overlap=overlap)


def _some_strategy_fits(inst) -> bool:
    cap = inst.workload.server_memory_bytes * (1 + 1e-9)
    return any((server_memory(inst.workload, inst.n, st) <= cap).all() for st in all_strategies(inst))


@pytest.mark.parametrize("seed", range(30))
def test_level_search_finds_the_brute_force_optimum(seed):
    rng = np.random.default_rng(seed)
    n = (4, 6, 8)[seed % 3]
    inst, X = _lattice_instance(rng, n)
    rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s)
    got = level_search(StrategyScorer(inst, rf), np.inf, 0.0, None)
    assert got.status == "complete"
    if not _some_strategy_fits(inst):
        assert got.strategy is None  # no strategy fits in memory: the search finds none either
        return
    best = fast_brute_force(inst, X)
    assert got.value == pytest.approx(best, rel=1e-9) and best * (1 - 1e-8) <= got.bound <= best
    assert strategy_times(inst, rf, got.strategy)["iteration_time_s"] == pytest.approx(best, rel=1e-9)
    # from the optimum as incumbent: nothing strictly better, the incumbent is proven
    again = level_search(StrategyScorer(inst, rf), best, 0.0, None)
    assert again.status == "complete" and again.strategy is None and best * (1 - 1e-8) <= again.bound <= best
    # a 10 % gap: the bound is within it of the optimum and never above it
    loose = level_search(StrategyScorer(inst, rf), best * 1.05, 0.1, None)
    assert loose.status == "complete" and best * 0.9 * (1 - 1e-9) <= loose.bound <= best * (1 + 1e-9)


@pytest.mark.parametrize("seed", range(0, 30, 5))
def test_the_addition_tables_kept_or_dropped_give_the_same_search(monkeypatch, seed):
    # The per-(layer, previous type) tables are a cache: with room for none (every table rebuilt at
    # once) the search visits the same nodes and ends at the same value and bound.
    from topoopt_ilp.models.placement import levels as plv

    rng = np.random.default_rng(seed)
    inst, X = _lattice_instance(rng, (4, 6, 8)[seed % 3])
    rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s)
    kept = level_search(StrategyScorer(inst, rf), np.inf, 0.0, None)
    monkeypatch.setattr(plv, "_CACHE_FLOATS", 0)
    dropped = level_search(StrategyScorer(inst, rf), np.inf, 0.0, None)
    assert (dropped.nodes, dropped.value, dropped.bound, dropped.strategy) == (
        kept.nodes,
        kept.value,
        kept.bound,
        kept.strategy,
    )


def test_a_search_stopped_early_keeps_what_it_settled(monkeypatch):
    """Stopped at node c + 1 (the clock read at every node, past the deadline from its reading c
    on): the strategy found so far scores its value, and the bound (levels finished, then the
    compute of the level it was in) is below the brute-force optimum."""
    from types import SimpleNamespace

    from topoopt_ilp.models.placement import levels as placement_levels

    stopped = found = 0
    for seed in range(30):
        rng = np.random.default_rng(seed)
        inst, X = _lattice_instance(rng, (4, 6, 8)[seed % 3])
        rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s)
        if not _some_strategy_fits(inst):
            continue  # nothing fits in memory
        total = level_search(StrategyScorer(inst, rf), np.inf, 0.0, None).nodes
        best = fast_brute_force(inst, X)
        for c in sorted({0, total // 3, total // 2, total - 2}):
            if not 0 <= c < total - 1:
                continue
            readings = iter(range(10**9))
            monkeypatch.setattr(placement_levels, "_CLOCK_NODES", 1)
            monkeypatch.setattr(
                placement_levels, "time", SimpleNamespace(perf_counter=lambda: float(next(readings) >= c))
            )
            got = level_search(StrategyScorer(inst, rf), np.inf, 0.0, 0.5)
            monkeypatch.undo()
            assert got.status == "gave_up" and got.nodes == c + 1
            assert got.bound <= best * (1 + 1e-9)
            if got.strategy is not None:
                assert strategy_times(inst, rf, got.strategy)["iteration_time_s"] == pytest.approx(got.value, rel=1e-9)
                found += 1
            stopped += 1
    assert stopped >= 60 and found >= 10


def test_level_unit():
    assert level_unit(np.array([4e-3, 2e-3, 1e-3, 6e-3])) == pytest.approx(1e-3)
    assert level_unit(np.array([3e-3, 2e-3])) == pytest.approx(1e-3)
    assert level_unit(np.array([1e-3, np.pi * 1e-3])) is None


def test_level_search_says_when_it_does_not_apply():
    inst, X = make(4, 2, [L("a", 1e-3, 1e7, 1e7, [1, 2]), L("b", np.pi * 1e-3, 1e7, 0.0, [1, 2])])
    ls = StrategyScorer(inst, shortest_path_fractions(X, inst.cluster.link_bytes_per_s))
    assert level_search(ls, np.inf, 0.0, None).status == "not_applicable"
    inst, X = make(
        4,
        2,
        [L("a", 1e-3, 1e7, 1e7, [1, 2])],
        [Block(name="t", bytes=1e8, lookup_bytes=1e6, compute_s=1e-4, consumer=0)],
    )
    ls = StrategyScorer(inst, shortest_path_fractions(X, inst.cluster.link_bytes_per_s))
    assert "blocks" in level_search(ls, np.inf, 0.0, None).reason
    inst, X = make(4, 2, [L("a", 1e-3, 1e7, 1e7, [1, 2])], objective="comm_time")
    ls = StrategyScorer(inst, shortest_path_fractions(X, inst.cluster.link_bytes_per_s))
    assert level_search(ls, np.inf, 0.0, None).status == "not_applicable"


def test_level_search_stops_at_its_deadline():
    rng = np.random.default_rng(0)
    inst, X = _lattice_instance(rng, 8)
    ls = StrategyScorer(inst, shortest_path_fractions(X, inst.cluster.link_bytes_per_s))
    assert level_search(ls, np.inf, 0.0, 0.0).status in ("gave_up", "complete")  # a few nodes may finish first
