"""The period-invariant placement MILP (models/placement/symmetric.py) against the evaluator."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from test_placement_bounds import circulant

from conftest import placed_solution
from topoopt_ilp.core.instance import Cluster, Instance
from topoopt_ilp.core.strategy import Strategy, server_memory
from topoopt_ilp.core.workload import Block, Layer, Workload
from topoopt_ilp.evaluation.evaluate import evaluate
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.placement.milp import shortest_path_fractions, solve_placement
from topoopt_ilp.models.placement.symmetric import symmetric_periods, symmetric_placement

N = 8


def workload(blocks: int, memory: float = 1e12) -> Workload:
    layers = (
        Layer(name="bot", compute_s=2e-3, param_bytes=2e7, activation_bytes=4e7, configs=(1, 2, 4, 8)),
        Layer(name="top", compute_s=6e-3, param_bytes=5e7, activation_bytes=2e7, configs=(2, 4, 8)),
    )
    tables = tuple(Block(name=f"t{j}", bytes=1e9, lookup_bytes=3e7, compute_s=4e-4, consumer=1) for j in range(blocks))
    return Workload(layers=layers, blocks=tables, batch_size=64, server_memory_bytes=memory)


def instance(blocks: int = 2, memory: float = 1e12) -> Instance:
    return Instance(
        cluster=Cluster(servers=N, degree=4, link_bandwidth_gbps=100.0, hop_latency_us=1.0),
        workload=workload(blocks, memory),
    )


def invariant_strategies(inst: Instance, p: int):
    """Every period-p-invariant strategy: layers on cosets with n/k | p, each block class (here one)
    as one block per server of some residues mod p."""
    w, n = inst.workload, inst.n
    per_layer = [[(k, s) for k in layer.configs if p % (n // k) == 0 for s in range(n // k)] for layer in w.layers]
    per_server = len(w.blocks) * p // n  # blocks per residue class
    for opts in itertools.product(*per_layer):
        for residues in itertools.combinations_with_replacement(range(p), per_server):
            servers = [r + q * p for r in residues for q in range(n // p)]
            yield Strategy(tuple(k for k, _ in opts), tuple(s for _, s in opts), tuple(servers))


def score(inst: Instance, X: np.ndarray, st: Strategy) -> float:
    return evaluate(inst, placed_solution(inst, X, st, "shortest"), routing="shortest_path").iteration_time_s


def test_periods_need_a_circulant_topology_and_whole_block_classes():
    X = circulant(N, (1, 3))
    rf = shortest_path_fractions(X, 12.5e9)
    assert symmetric_periods(instance(2), rf) == [4]  # 2 blocks: n / p must divide 2
    assert symmetric_periods(instance(4), rf) == [2, 4]
    assert symmetric_periods(instance(0), rf) == [1, 2, 4]  # p = 1: every layer on all 8 servers
    Y = X.copy()
    Y[0, 1] = Y[1, 0] = 2  # no longer invariant under rotation
    assert symmetric_periods(instance(2), shortest_path_fractions(Y, 12.5e9)) == []


@pytest.mark.parametrize("blocks,p", [(2, 4), (4, 2), (4, 4)])
def test_the_symmetric_milp_is_the_best_invariant_strategy_and_scores_as_the_evaluator(blocks, p):
    inst = instance(blocks)
    X = circulant(N, (1, 3))
    rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s)
    res = symmetric_placement(inst, rf, p, ExactOptions(time_limit_s=60, gap=1e-9))
    assert res.status == "optimal" and res.period == p and res.nonzeros > 0
    st = res.strategy
    # its objective is the evaluator's score of what it returns, and that strategy is invariant
    assert res.objective_s == pytest.approx(score(inst, X, st), rel=1e-6)
    assert all(p % (N // k) == 0 for k in st.layer_degree)
    assert sorted(st.block_server) == sorted((v + p) % N for v in st.block_server)
    # the best invariant strategy (every one scored by the evaluator)
    best = min(score(inst, X, s) for s in invariant_strategies(inst, p))
    assert res.objective_s == pytest.approx(best, rel=1e-6)
    # and never better than the unrestricted optimum
    assert res.objective_s >= solve_placement(inst, ExactOptions(time_limit_s=60, gap=1e-9), X).objective * (1 - 1e-9)


def test_memory_binds_per_residue_class():
    # 4 tables of 1 GB at p = 4: with room, two on each of servers r and r + 4 (one residue class
    # hosts them all); on servers of 1.5 GB, one per server on two residue classes.
    X = circulant(N, (1, 3))
    rf = shortest_path_fractions(X, 12.5e9)
    opts = ExactOptions(time_limit_s=60, gap=1e-9)
    roomy = symmetric_placement(instance(4), rf, 4, opts)
    assert max(np.bincount(roomy.strategy.block_server)) == 2
    tight = symmetric_placement(instance(4, memory=1.5e9), rf, 4, opts)
    assert tight.status == "optimal" and max(np.bincount(tight.strategy.block_server)) == 1
    assert (server_memory(instance(4, 1.5e9).workload, N, tight.strategy) <= 1.5e9 * (1 + 1e-9)).all()
    assert tight.objective_s > roomy.objective_s * (1 + 1e-6)
