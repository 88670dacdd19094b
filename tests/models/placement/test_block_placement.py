"""The exact block placement for fixed layers (models/placement/blocks.py) against brute force and the evaluator."""

from __future__ import annotations

import dataclasses
import itertools
import time

import numpy as np
import pytest
from test_placement_bounds import circulant

from conftest import placed_solution
from topoopt_ilp.core.instance import Cluster, Instance
from topoopt_ilp.core.strategy import Strategy, validate_strategy
from topoopt_ilp.core.workload import Block, Layer, Workload
from topoopt_ilp.evaluation.evaluate import evaluate
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.placement.blocks import place_blocks_exactly, polish_blocks
from topoopt_ilp.models.placement.local_search import improve_strategy
from topoopt_ilp.models.placement.milp import shortest_path_fractions, strategy_times
from topoopt_ilp.models.placement.scoring import StrategyScorer

N = 8
X = circulant(N, (1, 3))


def instance(
    overlap: str = "none",
    compute_model: str = "busiest_server",
    objective: str = "iteration_time",
    hop_latency_us: float = 1.0,
    memory: float = 1e12,
) -> Instance:
    layers = (
        Layer(name="bot", compute_s=2e-3, param_bytes=2e7, activation_bytes=4e7, configs=(1, 2, 4, 8)),
        Layer(name="top", compute_s=6e-3, param_bytes=5e7, activation_bytes=2e7, configs=(1, 2, 4, 8)),
    )
    blocks = tuple(Block(name=f"a{j}", bytes=1e9, lookup_bytes=3e7, compute_s=4e-4, consumer=1) for j in range(3)) + (
        Block(name="b", bytes=2e9, lookup_bytes=8e7, compute_s=1e-3, consumer=0),
        Block(name="c", bytes=1e9, lookup_bytes=0.0, compute_s=2e-3, consumer=0),
    )
    w = Workload(
        layers=layers,
        blocks=blocks,
        batch_size=64,
        server_memory_bytes=memory,
        overlap=overlap,
        compute_model=compute_model,
    )
    return Instance(
        cluster=Cluster(servers=N, degree=4, link_bandwidth_gbps=100.0, hop_latency_us=hop_latency_us),
        workload=w,
        objective=objective,
    )


LAYERS = [((4, 8), (1, 0)), ((2, 2), (1, 0)), ((1, 1), (3, 2)), ((8, 8), (0, 0))]  # (degrees, starts)


def brute_force(inst: Instance, rf, degrees, starts) -> float:
    """The least strategy_times over every block placement (the identical "a" blocks as multisets)."""
    best = np.inf
    for a in itertools.combinations_with_replacement(range(N), 3):
        for b_, c_ in itertools.product(range(N), repeat=2):
            st = Strategy(degrees, starts, a + (b_, c_))
            if not validate_strategy(inst.workload, N, st):
                best = min(best, strategy_times(inst, rf, st)["iteration_time_s"])
    return best


@pytest.mark.parametrize(
    "variant",
    [
        {},
        {"overlap": "full"},
        {"objective": "comm_time"},
        {"compute_model": "critical_path"},
        {"hop_latency_us": 3000.0},
        {"memory": 2.5e9},
    ],
)
@pytest.mark.parametrize("layers", LAYERS[:2])
def test_the_block_milp_is_the_best_block_placement_and_scores_as_the_evaluator(variant, layers):
    inst = instance(**variant)
    rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s)
    degrees, starts = layers
    start = Strategy(degrees, starts, (0, 0, 0, 0, 0) if "memory" not in variant else (0, 1, 2, 3, 4))
    res = place_blocks_exactly(StrategyScorer(inst, rf), start, ExactOptions(gap=0.0))
    assert res.status == "optimal" and res.strategy is not None
    st = res.strategy
    assert (st.layer_degree, st.layer_start) == (degrees, starts)  # the layers are left alone
    assert not validate_strategy(inst.workload, N, st)
    assert res.objective_s == pytest.approx(brute_force(inst, rf, degrees, starts), rel=1e-6)
    ev = evaluate(inst, placed_solution(inst, X, st), routing="shortest_path")
    assert (ev.comm_time_s if inst.objective == "comm_time" else ev.iteration_time_s) == pytest.approx(
        res.objective_s, rel=1e-6
    )


def test_no_room_for_the_blocks_next_to_the_layers_is_infeasible():
    # 1.5 GB of "top" on every server at degree 8 leaves no server room for the 2 GB block (it fits
    # where "top" is not, so the instance itself is valid)
    inst = instance(memory=2.6e9)
    w = inst.workload
    w = dataclasses.replace(w, layers=(w.layers[0], dataclasses.replace(w.layers[1], memory_bytes=1.5e9)))
    inst = dataclasses.replace(inst, workload=w)
    rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s)
    res = place_blocks_exactly(StrategyScorer(inst, rf), Strategy((8, 8), (0, 0), (0, 1, 2, 3, 4)), ExactOptions())
    assert res.status == "infeasible" and res.strategy is None
    res = place_blocks_exactly(StrategyScorer(inst, rf), Strategy((8, 4), (0, 1), (0, 1, 2, 3, 4)), ExactOptions())
    assert res.status == "optimal" and inst.workload.blocks[3].bytes + 1.5e9 > 2.6e9
    assert res.strategy.block_server[3] % 2 == 0  # on a server "top" (degree 4, start 1) leaves free


def test_the_polish_moves_the_search_only_when_it_gains():
    inst = instance()
    rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s)
    ls = StrategyScorer(inst, rf)
    crowded = Strategy((4, 8), (1, 0), (5, 5, 5, 5, 5))
    ls.load_state(crowded)
    before = ls.score()[0]
    gained = polish_blocks(ls, before, time.perf_counter() + 30)
    assert gained is not None and gained < before * (1 - 1e-3)
    assert gained == pytest.approx(strategy_times(inst, rf, ls.strategy())["iteration_time_s"], rel=1e-9)
    moved = ls.strategy()
    assert polish_blocks(ls, gained, time.perf_counter() + 30) is None  # already optimal for its layers
    assert ls.strategy() == moved
    assert polish_blocks(ls, gained, time.perf_counter() + 0.1) is None  # too little time: not started
    assert ls.strategy() == moved


def test_the_local_search_ends_with_blocks_optimal_for_its_layers():
    inst = instance()
    rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s)
    ls = StrategyScorer(inst, rf)
    st = improve_strategy(inst, rf, Strategy((1, 1), (0, 0), (0, 0, 0, 0, 0)), 20.0, ls=ls)
    it = strategy_times(inst, rf, st)["iteration_time_s"]
    assert it == pytest.approx(brute_force(inst, rf, st.layer_degree, st.layer_start), rel=1e-3)
