"""The exact placement MILP against brute force over every strategy, the evaluator and every backend."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import numpy as np
import pytest

from conftest import INSTANCES, placed_solution
from topoopt_ilp import files
from topoopt_ilp.core.instance import Cluster, FixedTopology, Instance
from topoopt_ilp.core.solution import Solution
from topoopt_ilp.core.strategy import Strategy, server_memory
from topoopt_ilp.core.workload import Block, Layer, Workload
from topoopt_ilp.errors import InputError, UnsupportedError
from topoopt_ilp.evaluation.evaluate import evaluate
from topoopt_ilp.evaluation.verify import verify
from topoopt_ilp.methods import finalize, solve
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.placement import milp as pl
from topoopt_ilp.models.placement.milp import (
    RING_POLICIES,
    build_placement,
    shortest_path_fractions,
    solve_placement,
    strategy_times,
)
from topoopt_ilp.models.placement.scoring import SearchBudget

GBPS = 100.0  # 12.5e9 bytes/s per link


def ring(n: int, mult: tuple[int, ...] | None = None) -> np.ndarray:
    """Ring i - i+1 with link counts ``mult[i]`` (default 1)."""
    X = np.zeros((n, n), dtype=np.int64)
    for i in range(n):
        c = 1 if mult is None else mult[i]
        X[i, (i + 1) % n] += c
        X[(i + 1) % n, i] += c
    return X


def make(
    n: int, d: int, layers, blocks=(), *, memory=1e12, overlap="none", X=None, latency=1.0, objective="iteration_time"
) -> tuple[Instance, np.ndarray]:
    w = Workload(layers=tuple(layers), blocks=tuple(blocks), batch_size=64, server_memory_bytes=memory, overlap=overlap)
    inst = Instance(
        cluster=Cluster(servers=n, degree=d, link_bandwidth_gbps=GBPS, hop_latency_us=latency),
        workload=w,
        objective=objective,
    )
    return inst, (ring(n) if X is None else X)


def all_strategies(inst: Instance):
    w, n = inst.workload, inst.n
    per_layer = [[(k, s) for k in layer.configs for s in range(n // k)] for layer in w.layers]
    for opts in itertools.product(*per_layer):
        for servers in itertools.product(range(n), repeat=len(w.blocks)):
            yield Strategy(tuple(k for k, _ in opts), tuple(s for _, s in opts), tuple(servers))


def brute_force(inst: Instance, X: np.ndarray, rings: str = "shortest") -> float:
    """The evaluator's best iteration time over every memory-feasible strategy, each with the rings
    of that policy (computed independently: :func:`conftest.placed_solution`)."""
    best = np.inf
    cap = inst.workload.server_memory_bytes
    for st in all_strategies(inst):
        if (server_memory(inst.workload, inst.n, st) > cap * (1 + 1e-9)).any():
            continue
        m = evaluate(inst, placed_solution(inst, X, st, rings), routing="shortest_path")
        best = min(best, m.iteration_time_s if inst.objective == "iteration_time" else m.comm_time_s)
    return best


def check_solution(inst: Instance, sol: Solution) -> None:
    """Objective == evaluator (shortest-path routing) and the finalized solution verifies."""
    assert sol.status in ("optimal", "feasible")
    m = evaluate(inst, sol, routing="shortest_path")
    want = m.iteration_time_s if inst.objective == "iteration_time" else m.comm_time_s
    assert sol.objective == pytest.approx(want, rel=1e-6)
    assert len(sol.routing.paths) == 0  # the evaluator's shortest-path fallback, as the model routes
    st = Strategy(
        tuple(sol.placement["layer_degree"]), tuple(sol.placement["layer_start"]), tuple(sol.placement["block_server"])
    )
    assert (
        sol.routing.rings.to_lists()
        == placed_solution(inst, sol.topology.matrix, st, sol.details["rings"]).routing.rings.to_lists()
    )
    fin = finalize(inst, sol)
    assert verify(inst, fin).valid, verify(inst, fin).violations


OPTS = ExactOptions(time_limit_s=60, gap=1e-9)  # formulation auto: the enumeration first
MILP = ExactOptions(time_limit_s=60, gap=1e-9, formulation="milp")
ENUM = ExactOptions(time_limit_s=60, gap=1e-9, formulation="enumeration")
BOTH = pytest.mark.parametrize("opts", [MILP, ENUM], ids=["milp", "enumeration"])


def L(name, compute, param, act, configs, memory=None):
    return Layer(
        name=name,
        compute_s=compute,
        param_bytes=param,
        activation_bytes=act,
        configs=tuple(configs),
        memory_bytes=memory,
    )


# Trade-offs of the same order: 1e-3 s of compute, 1.25e7 bytes = 1e-3 s on one link.
CASES = {
    "mlp-ring4": (
        4,
        2,
        [L("l0", 2e-3, 1e7, 2e7, [1, 2, 4]), L("l1", 4e-3, 3e7, 1e7, [1, 2, 4]), L("l2", 1e-3, 2e6, 4e7, [1, 2, 4])],
        [],
        None,
    ),
    "dlrm-ring4": (
        4,
        2,
        [L("bot", 1e-3, 5e6, 2e7, [1, 2, 4]), L("top", 3e-3, 2e7, 1e7, [2, 4])],
        [
            Block(name="t0", bytes=1e9, lookup_bytes=3e7, compute_s=5e-4, consumer=1),
            Block(name="t1", bytes=1e9, lookup_bytes=3e7, compute_s=5e-4, consumer=1),
        ],
        None,
    ),
    "mixed-ring6-multilinks": (
        6,
        3,
        [L("a", 3e-3, 2e7, 3e7, [1, 2, 3, 6]), L("b", 2e-3, 1e7, 2e7, [2, 3, 6])],
        [Block(name="e", bytes=1e9, lookup_bytes=2e7, compute_s=1e-3, consumer=0)],
        ring(6, (2, 1, 2, 1, 2, 1)),
    ),
}


@BOTH
@pytest.mark.parametrize("rings", RING_POLICIES)
@pytest.mark.parametrize("name", list(CASES))
def test_optimum_equals_brute_force(name, rings, opts):
    n, d, layers, blocks, X = CASES[name]
    inst, X = make(n, d, layers, blocks, X=X)
    sol = solve_placement(inst, replace(opts, rings=rings), X)
    assert sol.status == "optimal" and sol.details["algorithm"] == opts.formulation
    check_solution(inst, sol)
    assert sol.objective == pytest.approx(brute_force(inst, X, rings), rel=1e-6)
    assert sol.bound == pytest.approx(sol.objective, rel=1e-6)


@BOTH
def test_full_overlap_and_memory_limit_against_brute_force(opts):
    # memory 1.2e8 per server: layer "big" (1e8 + act/k) cannot run on one server at k = 1.
    layers = [L("big", 4e-3, 2.5e7, 4e7, [1, 2, 4], memory=1e8), L("small", 1e-3, 5e6, 1e7, [1, 2, 4], memory=1e7)]
    inst, X = make(
        4,
        2,
        layers,
        [Block(name="t", bytes=5e6, lookup_bytes=1e7, compute_s=2e-4, consumer=1)],
        memory=1.2e8,
        overlap="full",
    )
    sol = solve_placement(inst, opts, X)
    assert sol.status == "optimal"
    check_solution(inst, sol)
    assert sol.placement["layer_degree"][0] != 1
    assert sol.objective == pytest.approx(brute_force(inst, X), rel=1e-6)


@BOTH
def test_comm_time_objective_against_brute_force(opts):
    layers = [L("a", 1e-3, 1e7, 2e7, [1, 2, 4]), L("b", 1e-3, 1e7, 1e7, [2, 4])]
    inst, X = make(4, 2, layers, objective="comm_time")
    sol = solve_placement(inst, opts, X)
    check_solution(inst, sol)
    assert sol.objective == pytest.approx(brute_force(inst, X), rel=1e-6)


@BOTH
def test_memory_infeasible_is_reported(opts):
    # 3 tables of 0.6 C and 3 of 0.45 C on 4 servers: the aggregate and pigeonhole checks before
    # solving pass (3.15 C <= 4 C; 3 above C/2, 6 above C/3), no packing does.
    layers = [L("l", 1e-3, 1e6, 1e6, [1, 2, 4], memory=1e6)]
    blocks = [Block(name=f"t{j}", bytes=b, lookup_bytes=1e6) for j, b in enumerate([6e8] * 3 + [4.5e8] * 3)]
    inst, X = make(4, 2, layers, blocks, memory=1e9)
    sol = solve_placement(inst, opts, X)
    assert sol.status == "infeasible" and sol.details["algorithm"] == opts.formulation
    assert sol.topology is None and "memory" in sol.details["infeasible"]


@pytest.mark.parametrize("backend", ["highs", "scip", "cbc"])
def test_backends_agree(backend):
    n, d, layers, blocks, X = CASES["dlrm-ring4"]
    inst, X = make(n, d, layers, blocks, X=X)
    sol = solve_placement(
        inst, ExactOptions(backend=backend, time_limit_s=60, gap=1e-9, warm_start="none", formulation="milp"), X
    )
    assert sol.status == "optimal" and sol.backend == backend
    check_solution(inst, sol)
    ref = solve_placement(inst, MILP, X)
    assert sol.objective == pytest.approx(ref.objective, rel=1e-6)


def test_warm_start_point_is_feasible_and_scored_like_the_evaluator():
    n, d, layers, blocks, X = CASES["dlrm-ring4"]
    inst, X = make(n, d, layers, blocks, X=X)
    pm = build_placement(inst, X, prune=False)
    rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s)
    alpha = inst.cluster.hop_latency_s / pl.TIME_UNIT_S
    for st in itertools.islice(all_strategies(inst), 0, None, 7):
        x = pl._point(pm, inst.workload, st, alpha, "none", "iteration_time")
        assert pm.model.max_violation(x) < 1e-6
        want = evaluate(inst, placed_solution(inst, X, st), routing="shortest_path").iteration_time_s
        assert pm.model.objective_value(x) * pl.TIME_UNIT_S == pytest.approx(want, rel=1e-9)
        assert strategy_times(inst, rf, st)["iteration_time_s"] == pytest.approx(want, rel=1e-9)


def test_pruning_keeps_the_optimum():
    n, d, layers, blocks, X = CASES["mlp-ring4"]
    inst, X = make(n, d, layers, blocks, X=X)
    pruned = build_placement(inst, X)
    full = build_placement(inst, X, prune=False)
    assert pruned.model.num_vars < full.model.num_vars
    assert solve_placement(inst, MILP, X).objective == pytest.approx(brute_force(inst, X), rel=1e-6)


@BOTH
@pytest.mark.parametrize("name", ["bert-testbed-12-d4", "resnet50-testbed-12-d4"])
def test_testbed_instance_with_heuristic_topology(name, opts):
    inst = files.load_instance(INSTANCES / "paper" / f"{name}.json")
    sol = solve_placement(inst, opts)
    assert sol.status == "optimal"
    check_solution(inst, sol)
    assert sol.objective <= sol.details["start_iteration_time_s"] * (1 + 1e-9)


def test_fixed_topology_is_the_default():
    _, _, layers, _, _ = CASES["mlp-ring4"]
    w = Workload(layers=tuple(layers), batch_size=64, server_memory_bytes=1e12)
    inst = Instance(
        cluster=Cluster(servers=4, degree=2, link_bandwidth_gbps=GBPS, hop_latency_us=1.0),
        workload=w,
        fixed_topology=FixedTopology(jumps=(1,)),
    )
    sol = solve_placement(inst, OPTS)
    assert np.array_equal(sol.topology.matrix, ring(4))
    check_solution(inst, sol)


def test_restricted_starts_report_only_the_unrestricted_bound():
    n, d, layers, blocks, X = CASES["mlp-ring4"]
    inst, X = make(n, d, layers, blocks, X=X)
    best = brute_force(inst, X)
    # Without local search the restricted model holds start 0 only; its own bound is not reported.
    sol = solve_placement(inst, MILP, X, max_starts=1, local_search_s=0)
    assert sol.details["restricted"] and set(sol.placement["layer_start"]) == {0}
    assert sol.bound == pytest.approx(sol.details["relaxation_bound_s"]) and sol.bound <= best * (1 + 1e-9)
    assert sol.status == ("optimal" if sol.gap <= 1e-9 else "feasible")
    check_solution(inst, sol)
    # With local search the incumbent's (k, s) are added to the restricted options: never worse.
    sol2 = solve_placement(inst, MILP, X, max_starts=1)
    assert sol2.objective <= min(sol.objective, sol2.details["local_search_iteration_time_s"]) * (1 + 1e-9)
    assert sol2.bound <= best * (1 + 1e-9)
    check_solution(inst, sol2)


def test_errors_are_clear(monkeypatch):
    demand = files.parse_instance(json.loads((INSTANCES / "mix-8.json").read_text()))
    with pytest.raises(InputError, match="workload"):
        solve_placement(demand, OPTS)
    n, d, layers, blocks, X = CASES["mlp-ring4"]
    inst, X = make(n, d, layers, blocks, X=X)
    with pytest.raises(InputError, match="unknown formulation 'naive'"):
        solve_placement(inst, ExactOptions(formulation="naive"), X)
    with pytest.raises(InputError, match="max_starts"):
        solve_placement(inst, ENUM, X, max_starts=1)
    monkeypatch.setattr(pl, "MAX_PLACEMENT_NONZEROS", 10)
    with pytest.raises(UnsupportedError, match="max_starts"):
        solve_placement(inst, MILP, X)


# ------------------------------------------------------------------------------------------------
# Local search (incumbent) and the relaxation bound
# ------------------------------------------------------------------------------------------------
def _random_checks(inst: Instance, X: np.ndarray, rng: np.random.Generator, count: int = 4) -> int:
    """Every move score the local search computes equals strategy_times of the moved strategy."""
    rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s)
    ls = pl.StrategyScorer(inst, rf)
    w, n = inst.workload, inst.n
    ls.load_state(
        min(
            (c for c in pl._candidates(w, n, rf) if pl._memory_feasible(w, n, c)),
            key=lambda c: strategy_times(inst, rf, c)["iteration_time_s"],
        )
    )
    assert ls.score()[0] == pytest.approx(strategy_times(inst, rf, ls.strategy())["iteration_time_s"], rel=1e-9)
    checked = 0
    L = len(w.layers)
    for i, j in {(0, 0), (0, L - 1), (L - 1, L - 1), (L // 2, L - 1)}:
        it, _ = ls.segment_move(i, j)
        for t in rng.choice(np.flatnonzero(np.isfinite(it)), min(count, int(np.isfinite(it).sum())), replace=False):
            tt = ls.t.copy()
            tt[i : j + 1] = t
            st = Strategy(
                tuple(int(k) for k in ls.type_k[tt]), tuple(int(s) for s in ls.type_s[tt]), tuple(int(v) for v in ls.bs)
            )
            assert not pl.validate_strategy(w, n, st)
            assert it[t] == pytest.approx(strategy_times(inst, rf, st)["iteration_time_s"], rel=1e-9)
            checked += 1
    before = ls.score()
    for i in sorted({1, L - 1} & set(range(1, L))):
        it, _, types = ls.shift_move(i)
        assert ls.score() == before  # the state is restored
        for r in np.flatnonzero(np.isfinite(it))[:count]:
            st = Strategy(
                tuple(int(k) for k in ls.type_k[types[r]]),
                tuple(int(s) for s in ls.type_s[types[r]]),
                tuple(int(v) for v in ls.bs),
            )
            assert not pl.validate_strategy(w, n, st)
            assert it[r] == pytest.approx(strategy_times(inst, rf, st)["iteration_time_s"], rel=1e-9)
            checked += 1
    for b in range(len(w.blocks)):
        it, _ = ls.block_move(b)
        for v in np.flatnonzero(np.isfinite(it)):
            bs = ls.bs.copy()
            bs[b] = v
            st = Strategy(
                tuple(int(k) for k in ls.type_k[ls.t]),
                tuple(int(s) for s in ls.type_s[ls.t]),
                tuple(int(x) for x in bs),
            )
            assert it[v] == pytest.approx(strategy_times(inst, rf, st)["iteration_time_s"], rel=1e-9)
            checked += 1
    return checked


@pytest.mark.parametrize("name", list(CASES))
def test_local_search_move_scores_equal_the_evaluator(name):
    n, d, layers, blocks, X = CASES[name]
    inst, X = make(n, d, layers, blocks, X=X)
    assert _random_checks(inst, X, np.random.default_rng(0)) > 0


def test_local_search_move_scores_on_a_zoo_dlrm():
    from topoopt_ilp.files.zoo import generate

    inst = files.parse_instance(generate("dlrm", 8, 3, 100.0))
    assert len(inst.workload.blocks) > 0
    X = solve_placement(inst, ExactOptions(time_limit_s=1, gap=1.0), local_search_s=0).topology.matrix
    assert _random_checks(inst, X, np.random.default_rng(1), count=3) > 10


def test_local_search_is_never_worse_than_its_starts():
    inst = files.load_instance(INSTANCES / "paper" / "bert-testbed-12-d4.json")
    X = solve_placement(inst, ExactOptions(time_limit_s=1, gap=1.0), local_search_s=0).topology.matrix
    rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s)
    starts = [c for c in pl._candidates(inst.workload, inst.n, rf) if pl._memory_feasible(inst.workload, inst.n, c)]
    best = pl.improve_strategy(inst, rf, starts, 2.0)
    assert not pl.validate_strategy(inst.workload, inst.n, best)
    got = strategy_times(inst, rf, best)["iteration_time_s"]
    assert got <= min(strategy_times(inst, rf, s)["iteration_time_s"] for s in starts) * (1 + 1e-12)
    # and never better than the exact optimum
    assert got >= solve_placement(inst, OPTS, X).objective * (1 - 1e-9)


def test_the_local_search_counts_its_set_up_in_its_time_and_can_reuse_a_scorer(monkeypatch):
    # A scorer that takes 0.6 s to build (patched) and a 0.3 s budget: the descent starts past the
    # deadline, so the best start comes back at once (before, the budget began after the build,
    # 0.7 s at dlrm-128-d8 past any limit). A scorer passed in is used as it is, not rebuilt.
    import time as clock

    from topoopt_ilp.models.placement import scoring as ps

    inst = files.load_instance(INSTANCES / "paper" / "bert-testbed-12-d4.json")
    X = solve_placement(inst, ExactOptions(time_limit_s=1, gap=1.0), local_search_s=0).topology.matrix
    rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s)
    starts = [c for c in pl._candidates(inst.workload, inst.n, rf) if pl._memory_feasible(inst.workload, inst.n, c)]
    scorer = ps.StrategyScorer(inst, rf)
    real_init = ps.StrategyScorer.__init__

    def slow_init(self, *a, **k):
        clock.sleep(0.6)
        real_init(self, *a, **k)

    monkeypatch.setattr(ps.StrategyScorer, "__init__", slow_init)
    t0 = clock.perf_counter()
    best = pl.improve_strategy(inst, rf, starts, 0.3)
    assert clock.perf_counter() - t0 < 0.6 + 0.25  # the build, then a descent step or so (0.9 s and more before)
    assert not pl.validate_strategy(inst.workload, inst.n, best)
    t0 = clock.perf_counter()
    reused = pl.improve_strategy(inst, rf, starts, 0.3, ls=scorer)
    assert clock.perf_counter() - t0 < 0.3 + 0.25  # no 0.6 s build inside
    scores = [strategy_times(inst, rf, s)["iteration_time_s"] for s in starts]
    assert strategy_times(inst, rf, reused)["iteration_time_s"] <= min(scores) * (1 + 1e-12)


def test_balanced_cuts_minimise_the_largest_stage():
    # Against every cut of 7 layers into S contiguous non-empty stages.
    from topoopt_ilp.models.placement.local_search import _balanced_cuts

    rng = np.random.default_rng(3)
    for _ in range(20):
        tau = rng.integers(1, 20, size=7).astype(float)
        for S, cuts in zip(range(2, 6), _balanced_cuts(tau, 5)):
            assert len(cuts) == S and cuts[0][0] == 0 and cuts[-1][1] == 7
            assert all(a < b for a, b in cuts) and all(b == a2 for (_, b), (a2, _) in zip(cuts, cuts[1:]))
            best = min(
                max(tau[a:b].sum() for a, b in zip((0,) + c, c + (7,)))
                for c in itertools.combinations(range(1, 7), S - 1)
            )
            assert max(tau[a:b].sum() for a, b in cuts) == best


def test_pipeline_strides_follow_the_topology():
    from topoopt_ilp.core.graph import circulant
    from topoopt_ilp.models.placement.local_search import _adjacent_strides

    # 8 servers linked by jumps +-3 only: the single-server "cosets" j and j + 3 (or j + 5 = j - 3)
    # are neighbours, j and j + 1 three hops apart.
    dist = shortest_path_fractions(circulant(8, [3]), 12.5e9).dist
    assert _adjacent_strides(8, 8, dist)[:2] == [3, 5]
    # a plain ring: strides 1 and 7 (= -1); for 4 cosets of 2 servers, 1 and 3
    ring = shortest_path_fractions(circulant(8, [1]), 12.5e9).dist
    assert _adjacent_strides(8, 8, ring)[:2] == [1, 7]
    assert _adjacent_strides(8, 4, ring) == [1, 3]


def test_pipeline_starts_are_balanced_pipelines_on_distinct_cosets():
    from topoopt_ilp.models.placement.local_search import pipeline_starts

    inst = files.load_instance(INSTANCES / "paper" / "dlrm-128-d8.json")
    w, n = inst.workload, inst.n
    X = solve(inst, method="heuristic").topology.matrix
    rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s)
    starts = pipeline_starts(w, n, rf.dist)
    assert len(starts) == len(set(starts)) > 100
    for st in starts:
        assert not pl.validate_strategy(w, n, st)
        runs = [list(g) for _, g in itertools.groupby(zip(st.layer_degree, st.layer_start))]
        assert len(runs) >= 2 and len({r[0] for r in runs}) == len(runs)  # contiguous stages, each its own coset
    # On TopoOpt's topology they start the 128-server DLRM far better than the other candidates
    # (measured 20.50 ms against 25.71 ms).
    others = [st for st in pl._candidates(w, n, rf) if st not in set(starts)]
    assert min(strategy_times(inst, rf, st)["iteration_time_s"] for st in starts) < 0.85 * min(
        strategy_times(inst, rf, st)["iteration_time_s"] for st in others
    )


def test_a_short_time_limit_scores_only_the_first_candidates():
    # 387 start candidates take about 0.7 s to score at 128 servers: with 0.3 s, scoring stops at a
    # tenth of it and the local search starts from what was scored; the local search and the bounds
    # (their precomputation alone takes longer) use up the rest, so no MILP is built. With 1 s they
    # leave less than MILP_MIN_SHARE of it, and no MILP is built either (measured: 0.92 s in all;
    # 2.9 s when the models of the restriction ladder were built after the time was up, 2.1 s when
    # they were built with 0.08 s left).
    inst = files.load_instance(INSTANCES / "paper" / "dlrm-128-d8.json")
    X = solve(inst, method="heuristic").topology.matrix
    for limit in (0.3, 1.0):
        sol = solve_placement(inst, ExactOptions(time_limit_s=limit), X)
        assert sol.status == "feasible" and sol.details["candidates_unscored"] > 0
        assert sol.details["milp"].startswith("not run") and "nonzeros" not in sol.details
        assert sol.objective <= sol.details["start_iteration_time_s"] * (1 + 1e-12)
        check_solution(inst, sol)


def test_the_milp_needs_a_share_of_the_limit_unless_asked_for(monkeypatch):
    # With the enumeration out of the way and a hundredth of the limit left: auto keeps its incumbent
    # without building a model (the build is not interrupted by the limit); --formulation milp still
    # runs it.
    inst = files.load_instance(INSTANCES / "dlrm-mini-8-fixed.json")
    monkeypatch.setattr(pl, "enumeration_fits", lambda ls: False)
    monkeypatch.setattr(pl, "time_left", lambda options, started: 0.01 * options.time_limit_s)
    auto = solve_placement(inst, ExactOptions(time_limit_s=10, gap=1e-9))
    assert auto.status == "feasible" and auto.details["milp"].startswith("not run") and "nonzeros" not in auto.details
    check_solution(inst, auto)
    milp = solve_placement(inst, ExactOptions(time_limit_s=10, gap=1e-9, formulation="milp"))
    assert milp.details["algorithm"] == "milp" and milp.details["nonzeros"] > 0
    check_solution(inst, milp)


@pytest.mark.parametrize("model,share", [("bert", pl.LEVELLED_LOCAL_SEARCH_SHARE), ("dlrm", pl.LOCAL_SEARCH_SHARE)])
def test_the_local_search_takes_a_tenth_of_the_limit_before_a_level_search(monkeypatch, model, share):
    # A 32-server BERT (identical layers, no blocks: the compute-level search may apply) gives the
    # local search a tenth of the limit; a DLRM (embedding tables: it cannot) a quarter.
    from topoopt_ilp.files.zoo import generate

    class Stop(Exception):
        pass

    def record(*a, **k):
        calls.append(a[3])
        raise Stop

    calls = []
    inst = files.parse_instance(generate(model, 32, 4, 100.0))
    monkeypatch.setattr(pl, "improve_strategy", record)
    with pytest.raises(Stop):
        solve_placement(inst, ExactOptions(time_limit_s=20, gap=1e-9))
    assert calls == [pytest.approx(share * 20)]
    assert (
        pl.not_levelled(
            pl.StrategyScorer(
                inst,
                shortest_path_fractions(
                    solve_placement(inst, ExactOptions(time_limit_s=0.5, gap=1.0), local_search_s=0).topology.matrix,
                    inst.cluster.link_bytes_per_s,
                ),
            )
        )
        is None
    ) == (model == "bert")


def test_the_time_a_skipped_milp_leaves_goes_to_local_search(monkeypatch):
    # 1.5 s of a 10 s limit left (time_left patched): below the MILP's share, so no MILP; the local
    # search (on, as asked) gets those 1.5 s from the incumbent, and the details say so.
    inst = files.load_instance(INSTANCES / "dlrm-mini-8-fixed.json")
    monkeypatch.setattr(pl, "enumeration_fits", lambda ls: False)
    monkeypatch.setattr(pl, "time_left", lambda options, started: 1.5)
    calls = []
    real = pl.improve_strategy
    monkeypatch.setattr(pl, "improve_strategy", lambda *a, **k: calls.append(a[3]) or real(*a, **k))
    sol = solve_placement(inst, ExactOptions(time_limit_s=10, gap=1e-9), local_search_s=0.1)
    assert calls == [0.1, 1.5]  # the first local search, then the time left
    assert sol.details["milp"].startswith("not run") and sol.details["milp"].endswith(
        "the time left went to local search"
    )
    assert sol.objective == pytest.approx(sol.details["local_search_iteration_time_s"], rel=1e-12)
    check_solution(inst, sol)


def test_a_restriction_that_cannot_be_built_in_the_time_left_is_not_started(monkeypatch):
    # The first rung of the restriction ladder is refused after 0.3 s with 0.2 s left (time_left
    # patched; above the MILP's share of the 0.5 s limit): the next rung is not started and the
    # incumbent stands. With the time left above the refused rung's build time, the next rung is built.
    import time as clock

    from topoopt_ilp.errors import UnsupportedError

    inst = files.load_instance(INSTANCES / "dlrm-mini-8-fixed.json")
    monkeypatch.setattr(pl, "enumeration_fits", lambda ls: False)
    real, rungs = pl.build_placement, []

    def slow_first_rung(*a, max_starts=None, **kw):
        rungs.append(max_starts)
        if max_starts is None:
            clock.sleep(0.3)
            raise UnsupportedError("pretend the full model is too large")
        return real(*a, max_starts=max_starts, **kw)

    monkeypatch.setattr(pl, "build_placement", slow_first_rung)
    for left, built in ((0.2, [None]), (0.4, [None, 4])):
        rungs.clear()
        monkeypatch.setattr(pl, "time_left", lambda options, started, left=left: left)
        sol = solve_placement(inst, ExactOptions(time_limit_s=0.5, gap=1e-9))
        assert rungs == built
        assert sol.details.get("milp", "").startswith("not run: building the next restriction") == (left == 0.2)
        check_solution(inst, sol)


def test_relaxation_bound_is_tight_when_only_volume_and_compute_matter():
    # One layer, degree 4 only, on a ring with every link equal. The shortest rings (strides 1 and 3,
    # the two directions, half the bytes each) load all 8 arcs equally, so the bound, compute +
    # (volume / all capacity) + alpha, is the optimum. One ring in coset order loads only the 4
    # forward arcs: twice the bandwidth term, and the same volume bound.
    inst, X = make(4, 2, [L("a", 4e-3, 2.5e7, 0.0, [4])])
    ar_bytes = 2 * 3 / 4 * 2.5e7  # per member to its successor, one hop
    want = 1e-3 + ar_bytes / 12.5e9 / 2 + 1e-6
    for rings in RING_POLICIES:
        rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s, rings)
        assert pl.relaxation_bound(inst, rf) == pytest.approx(want, rel=1e-9)
    assert brute_force(inst, X) == pytest.approx(want, rel=1e-9)
    assert solve_placement(inst, OPTS, X).objective == pytest.approx(want, rel=1e-9)
    coset = solve_placement(inst, replace(OPTS, rings="coset"), X)
    assert coset.objective == pytest.approx(1e-3 + ar_bytes / 12.5e9 + 1e-6, rel=1e-9)
    check_solution(inst, coset)


def test_bound_that_proves_the_gap_skips_the_milp():
    # Only k = 1 is offered and there is no traffic: the optimum is the compute of the slowest
    # layer on its own server, which the relaxation bound matches exactly.
    # (The local search, off by default on a problem this small, finds that incumbent.)
    inst, X = make(4, 2, [L("a", 3e-3, 1e7, 0.0, [1]), L("b", 1e-3, 1e7, 0.0, [1])])
    sol = solve_placement(inst, OPTS, X, local_search_s=1.0)
    assert sol.status == "optimal" and "skipped" in sol.details["milp"] and sol.details["algorithm"] == "bounds"
    assert sol.objective == pytest.approx(brute_force(inst, X), rel=1e-9) == pytest.approx(3e-3)
    assert sol.bound == pytest.approx(sol.objective, rel=1e-9)
    check_solution(inst, sol)


def test_reported_bound_is_valid_on_testbed_instances():
    inst = files.load_instance(INSTANCES / "paper" / "bert-testbed-12-d4.json")
    sol = solve_placement(inst, OPTS)
    assert sol.status == "optimal"
    check_solution(inst, sol)
    assert 0 < sol.details["relaxation_bound_s"] <= sol.objective * (1 + 1e-9)


def test_exchange_moves_keep_the_cosets_and_score_by_the_evaluator():
    # Every exchange candidate re-uses the types of the layers it touches (two layers or two runs
    # trade types), and the score the move returns is the evaluator's of the moved strategy.
    inst, X = make(8, 2, [L(f"l{i}", 2e-3, 1e7, 2e7, [1, 2, 4, 8]) for i in range(4)])
    rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s)
    ls = pl.StrategyScorer(inst, rf)
    ls.load_state(Strategy((2, 2, 4, 1), (0, 0, 1, 5), ()))
    assert ls.runs() == [(0, 1), (2, 2), (3, 3)]
    cands = ls.exchange_candidates()
    assert len(cands) == 5 + 2  # five layer pairs with different types, two run pairs with a run of 2
    for layers, types in cands:
        assert set(ls.t[layers].tolist()) == set(types.tolist())
    # from a deliberately bad order the first improving exchange is applied and scored exactly
    ls.load_state(Strategy((8, 1, 8, 1), (0, 3, 0, 6), ()))
    cur = ls.score()
    better = lambda a, b: a[0] < b[0] * (1 - 1e-9) or (a[0] <= b[0] * (1 + 1e-12) and a[1] < b[1] * (1 - 1e-9))
    got = ls.exchange_move(cur, better, SearchBudget(np.inf))
    if got is not None:
        assert got[0] == pytest.approx(strategy_times(inst, rf, ls.strategy())["iteration_time_s"], rel=1e-9)
        assert better(got, cur)
    else:
        assert ls.score() == cur  # state restored


@pytest.mark.parametrize("left_s", [None, 0.2])
def test_large_model_hands_its_time_to_the_local_search(monkeypatch, left_s):
    # With the threshold at 0 every model counts as too large: no solver runs, the time left goes
    # to local search, and the answer stays exact in its objective and valid in its bound. With
    # 0.2 s left once the model is built (time_left patched) the solver is not handed it either:
    # loading a 4.3 M non-zero model for 0.2 s overshot dlrm-128-d8's 10 s limit by 1.2 s.
    n, d, layers, blocks, X = CASES["dlrm-ring4"]
    inst, X = make(n, d, layers, blocks, X=X)
    monkeypatch.setattr(pl, "MILP_SEARCH_NONZEROS", 0)
    if left_s is not None:
        monkeypatch.setattr(pl, "time_left", lambda options, started: left_s)
        monkeypatch.setattr(pl, "run_model", lambda *a, **k: pytest.fail("the solver was handed the model"))
    sol = solve_placement(
        inst, ExactOptions(time_limit_s=3, gap=1e-9, formulation="milp"), X, chain_bound_s=0.2, local_search_s=0.5
    )
    best = brute_force(inst, X)
    if "skipped_model_nonzeros" in sol.details:
        assert sol.details["milp"].startswith("skipped") and "variables" not in sol.details
        # the local search takes the time left when more than half a second is
        assert ("the time left went to local search" in sol.details["milp"]) == (left_s is None)
    else:
        assert "skipped" in sol.details.get("milp", "")  # the bound proved the incumbent first
    check_solution(inst, sol)
    assert sol.objective >= best * (1 - 1e-9)
    assert sol.bound <= best * (1 + 1e-9)


def test_export_writes_the_placement_milp_whichever_stage_settles_it(tmp_path):
    # Found by a user: --export-model wrote nothing when the enumeration settled the placement.
    from topoopt_ilp.files import load_instance

    inst = load_instance("instances/dlrm-mini-8-fixed.json")
    path = tmp_path / "placement.mps"
    sol = solve_placement(inst, ExactOptions(time_limit_s=30, export_model=str(path)))
    assert sol.details["algorithm"] == "enumeration" and sol.details["exported_model"] == "the placement MILP"
    assert path.stat().st_size > 0 and "ROWS" in path.read_text()


def test_a_time_limit_of_0_runs_nothing(tmp_path):
    # as every exact method: no_solution, though a cheap start candidate would be at hand; the
    # model is still exported when asked
    n, d, layers, blocks, X = CASES["dlrm-ring4"]
    inst, X = make(n, d, layers, blocks, X=X)
    path = tmp_path / "p.lp"
    sol = solve_placement(inst, ExactOptions(time_limit_s=0, export_model=str(path)), X)
    assert sol.status == "no_solution" and sol.placement is None and path.stat().st_size > 0


def test_ring_strides_follow_the_topology():
    # TopoOpt's 128-server circulant (jumps +-1, +-3, +-9, +-23): a degree-16 coset (members 8 apart)
    # reaches its ring successor in 2 hops by strides 1 and 15 (+-8 = +-9 -+ 1) and 3 and 13
    # (+-24 = +-23 +- 1), in more by every other stride; a degree-8 coset (16 apart) in 4 hops by all 4.
    from topoopt_ilp.models.placement.data import ring_pairs, ring_strides

    n = 128
    X = np.zeros((n, n), dtype=np.int64)
    for j in (1, 3, 9, 23):
        X[np.arange(n), (np.arange(n) + j) % n] = X[(np.arange(n) + j) % n, np.arange(n)] = 1
    rf = shortest_path_fractions(X, GBPS * 1.25e8)
    assert ring_strides(rf, range(5, n, 8)) == (1, 3, 13, 15)
    assert ring_strides(rf, range(0, n, 16)) == (1, 3, 5, 7)
    src, dst, share = ring_pairs(rf, range(5, n, 8))
    assert src.size == 64 and share.sum() == pytest.approx(16) and set((dst - src) % n) == {8, 24, 104, 120}
    assert ring_strides(shortest_path_fractions(X, 1.0, "coset"), range(5, n, 8)) == (1,)
    # a directed ring: only the forward stride is short; two members: one ring
    D = np.roll(np.eye(6, dtype=np.int64), 1, axis=1)
    assert ring_strides(shortest_path_fractions(D, 1.0), (0, 2, 4)) == (1,)
    assert ring_strides(shortest_path_fractions(ring(6), 1.0), (0, 2, 4)) == (1, 2)
    assert ring_strides(shortest_path_fractions(ring(6), 1.0), (1, 4)) == (1,)
    with pytest.raises(InputError, match="unknown ring policy"):
        shortest_path_fractions(ring(6), 1.0, "fastest")
