"""The chain bound's run pairs and packing levels (models/placement/bounds.py) against brute force:
each new term checked on every strategy of small instances, the bound below the optimum, and
instances where each term raises the bound."""

from __future__ import annotations

import numpy as np
import pytest
from test_placement import L, all_strategies, make
from test_placement_bounds import circulant, fast_brute_force

from topoopt_ilp.models.placement import bounds as pb
from topoopt_ilp.models.placement.milp import shortest_path_fractions, strategy_times
from topoopt_ilp.models.placement.scoring import StrategyScorer


def _instance(seed: int):
    """Small instances with 3-4 layers (often identical ones, as BERT's) on a circulant topology."""
    rng = np.random.default_rng(seed)
    n = int(rng.choice([4, 6, 8]))
    degs = [k for k in (1, 2, 4, 8) if n % k == 0] + ([3, 6] if n % 3 == 0 else [])
    nl = int(rng.integers(3, 5)) if n <= 6 else 3
    same = rng.random() < 0.6
    comp, par, act = float(rng.uniform(1e-3, 5e-3)), float(rng.uniform(1e6, 3e7)), float(rng.uniform(1e6, 6e7))
    layers = []
    for i in range(nl):
        if not same:
            comp, par, act = float(rng.uniform(1e-3, 5e-3)), float(rng.uniform(1e6, 3e7)), float(rng.uniform(1e6, 6e7))
        layers.append(L(f"l{i}", comp, par, act, [k for k in degs if k > 1 or rng.random() < 0.5] or [n]))
    jumps = {4: [(1,), (1, 2)], 6: [(1,), (1, 2), (1, 3)], 8: [(1,), (1, 3), (1, 2)]}[n]
    X = circulant(n, jumps[int(rng.integers(len(jumps)))])
    return make(n, 4, layers, [], X=X, overlap="full" if rng.random() < 0.25 else "none", memory=1e12)


LEVELS = pb.PACKING_LEVELS


def _bound(inst, rf, run_pair_layers: int, packing: bool, monkeypatch) -> float:
    monkeypatch.setattr(pb, "PACKING_LEVELS", LEVELS if packing else 0)
    lb, info = pb.chain_bound(inst, rf, run_pair_layers=run_pair_layers)
    assert info["chain_bound_converged"]
    return lb


@pytest.mark.parametrize("seed", [1, 9, 26, 4, 12])
def test_run_pair_and_packing_terms_hold_for_every_strategy(seed):
    """(b1)/(c2): at every change of type, the busiest arc and the busiest server are at least the
    tables' values for the run's last min(m, R) layers; (p): with X = the strategy's own compute,
    the packing weights it picks sum to at most q n at every level."""
    inst, X = _instance(seed)
    rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s)
    ls = StrategyScorer(inst, rf)
    R = 3
    data = pb._ChainData(inst, rf, ls, pb.arc_classes(rf), run_pair_layers=R)
    levels = np.arange(1, 5)
    lt_fin = np.where(np.isfinite(ls.lt), ls.lt, 0.0)
    Lh, n = len(inst.workload.layers), inst.n
    checked = 0
    for st in all_strategies(inst):
        times = strategy_times(inst, rf, st)
        t = [ls.type_of[(k, s)] for k, s in zip(st.layer_degree, st.layer_start)]
        start = 0
        for i in range(Lh - 1):
            if t[i + 1] == t[i]:
                continue
            m = min(i - start + 1, R)
            assert times["bandwidth_s"] >= data.pair_bw[i][m - 1][t[i], t[i + 1]] * (1 - 1e-9)
            assert times["compute_s"] >= data.pair_comp[i][m - 1][t[i], t[i + 1]] * (1 - 1e-12)
            start, checked = i + 1, checked + 1
        W = pb.packing_weights(lt_fin, ls.type_k, times["compute_s"], levels)[:, np.arange(Lh), t].sum(axis=1)
        assert (W <= levels * n).all()
    assert checked > 0


@pytest.mark.parametrize("rings", ["shortest", "coset"])
@pytest.mark.parametrize("seed", range(16))
def test_new_bound_is_below_the_brute_force_optimum(seed, rings, monkeypatch):
    inst, X = _instance(seed)
    rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s, rings)
    best = fast_brute_force(inst, X, rings)
    for R in (1, 2, 3):
        for packing in (False, True):
            assert _bound(inst, rf, R, packing, monkeypatch) <= best * (1 + 1e-9)


@pytest.mark.parametrize(
    "seed,run_pairs,packing", [(26, True, False), (9, False, True), (18, False, True), (1, True, True)]
)
def test_each_term_raises_the_bound(seed, run_pairs, packing, monkeypatch):
    """Instances (found by search, with one ring per group in coset order) where the term raises the
    previous bound (R = 1, no packing) strictly, and every variant stays below the brute-force optimum."""
    inst, X = _instance(seed)
    rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s, "coset")
    best = fast_brute_force(inst, X, "coset")
    before = _bound(inst, rf, 1, False, monkeypatch)
    after = _bound(inst, rf, 3 if run_pairs else 1, packing, monkeypatch)
    assert before * (1 + 1e-6) < after <= best * (1 + 1e-9)
