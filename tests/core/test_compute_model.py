"""The ``compute_model`` key: ``critical_path`` charges the chain of one micro-batch (the pipeline
bubble) on top of the busiest server, in the evaluator and in every method that scores or optimises
workloads; ``busiest_server`` (the default) is unchanged."""

from __future__ import annotations

import itertools
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

for _helpers in ("joint", "placement"):  # the brute-force helpers of the model tests
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models" / _helpers))

from test_joint import OPTS as JOINT_OPTS  # noqa: E402
from test_joint import L as jlayer  # noqa: E402
from test_joint import brute_force as joint_brute_force  # noqa: E402
from test_joint import make as joint_make  # noqa: E402
from test_joint_enumeration import strategy_value  # noqa: E402
from test_placement import brute_force, check_solution, make, ring  # noqa: E402

from conftest import placed_solution  # noqa: E402
from topoopt_ilp.core.strategy import Strategy, server_memory, strategy_to_dict  # noqa: E402
from topoopt_ilp.core.workload import Block, Layer  # noqa: E402
from topoopt_ilp.errors import InstanceError  # noqa: E402
from topoopt_ilp.evaluation.evaluate import evaluate, objective_value  # noqa: E402
from topoopt_ilp.files import load_instance  # noqa: E402
from topoopt_ilp.files.instance_file import parse_workload, workload_to_dict
from topoopt_ilp.models.common import ExactOptions  # noqa: E402
from topoopt_ilp.models.joint.enumeration import search_strategies, solve_joint_enumeration, strategy_floor  # noqa: E402
from topoopt_ilp.models.joint.milp import solve_joint  # noqa: E402
from topoopt_ilp.models.placement.bounds import chain_bound  # noqa: E402
from topoopt_ilp.models.placement.local_search import improve_strategy, relaxation_bound  # noqa: E402
from topoopt_ilp.models.placement.milp import shortest_path_fractions, solve_placement, strategy_times  # noqa: E402
from topoopt_ilp.models.placement.scoring import StrategyScorer

EXACT = ExactOptions(gap=1e-9)


def layer(name, compute, params, act, configs):
    return Layer(name=name, compute_s=compute, param_bytes=params, activation_bytes=act, configs=tuple(configs))


def critical(inst):
    return replace(inst, workload=replace(inst.workload, compute_model="critical_path"))


def score(inst, X, st: Strategy):
    return evaluate(inst, placed_solution(inst, X, st), routing="shortest_path")


def strategies(inst):
    w, n = inst.workload, inst.n
    per_layer = [[(k, s) for k in lay.configs for s in range(n // k)] for lay in w.layers]
    for opts in itertools.product(*per_layer):
        for servers in itertools.product(range(n), repeat=len(w.blocks)):
            st = Strategy(tuple(k for k, _ in opts), tuple(s for _, s in opts), tuple(servers))
            if not (server_memory(w, n, st) > w.server_memory_bytes * (1 + 1e-9)).any():
                yield st


# ------------------------------------------------------------------------------------------------
# The key
# ------------------------------------------------------------------------------------------------
def _section(**extra):
    return {
        "batch_size": 64,
        "server_memory_bytes": 1e12,
        **extra,
        "layers": [{"name": "a", "compute_s": 1e-3, "param_bytes": 1e6, "activation_bytes": 1e6, "configs": [1, 4]}],
    }


def test_the_key_parses_defaults_and_round_trips():
    assert parse_workload(_section(), 4).compute_model == "busiest_server"
    assert "compute_model" not in workload_to_dict(parse_workload(_section(), 4))  # files written before: unchanged
    w = parse_workload(_section(compute_model="critical_path"), 4)
    assert w.compute_model == "critical_path"
    assert workload_to_dict(w)["compute_model"] == "critical_path"
    assert parse_workload(json.loads(json.dumps(workload_to_dict(w))), 4) == w


@pytest.mark.parametrize("value", ["critical", "", 1, None])
def test_an_unknown_compute_model_names_the_field(value):
    with pytest.raises(InstanceError, match="busiest_server, critical_path") as err:
        parse_workload(_section(compute_model=value), 4)
    assert err.value.field == "workload.compute_model"


# ------------------------------------------------------------------------------------------------
# The evaluator, by hand
# ------------------------------------------------------------------------------------------------
def test_hand_computed_critical_path_pipeline_vs_data_parallel():
    # tau = 4, 4, 2 ms at degree 1 (1, 1, 0.5 ms at degree 4); the table (5 ms) feeds layer 1.
    layers = [
        layer("a", 4e-3, 1e6, 1e6, [1, 4]),
        layer("b", 4e-3, 1e6, 1e6, [1, 4]),
        layer("c", 2e-3, 1e6, 1e6, [1, 4]),
    ]
    blocks = [Block(name="t", bytes=1e6, lookup_bytes=1e6, compute_s=5e-3, consumer=1)]
    inst, X = make(4, 2, layers, blocks)
    pipe = Strategy((1, 1, 1), (0, 1, 2), (3,))
    dp = Strategy((4, 4, 4), (0, 0, 0), (0,))
    # pipeline: busiest server 5 ms (the table's); P = max(4 + 4 + 2, 5 + (4 + 2)) = 11 ms
    # data parallel: busiest server 1 + 1 + 0.5 + 5 = 7.5 ms; P = max(2.5, 5 + 1.5) = 6.5 ms
    for st, busiest, path in ((pipe, 5e-3, 11e-3), (dp, 7.5e-3, 6.5e-3)):
        a, b = score(inst, X, st), score(critical(inst), X, st)
        assert a.compute_time_s == pytest.approx(busiest, rel=1e-12)
        assert b.compute_time_s == pytest.approx(max(busiest, path), rel=1e-12)
        assert b.comm_time_s == a.comm_time_s
        assert b.iteration_time_s == pytest.approx(b.compute_time_s + b.comm_time_s, rel=1e-12)
    # with overlap full the larger of compute and communication
    full = critical(replace(inst, workload=replace(inst.workload, overlap="full")))
    m = score(full, X, pipe)
    assert m.iteration_time_s == pytest.approx(max(11e-3, m.comm_time_s), rel=1e-12)


def test_a_block_without_compute_never_lengthens_the_path():
    layers = [layer("a", 4e-3, 0.0, 0.0, [1]), layer("b", 2e-3, 0.0, 0.0, [1])]
    inst, X = make(4, 2, layers, [Block(name="t", bytes=1.0, lookup_bytes=0.0, consumer=1)])
    assert score(critical(inst), X, Strategy((1, 1), (0, 1), (2,))).compute_time_s == pytest.approx(6e-3)


# ------------------------------------------------------------------------------------------------
# Every method against brute force (fixed topology: the placement problem)
# ------------------------------------------------------------------------------------------------
PLACEMENT_CASES = {
    # the busiest_server optimum of each is a pipeline of degree-1 layers on different servers
    "pipeline-4": lambda ov: make(
        4,
        2,
        [
            layer("a", 4e-3, 1e8, 1e6, [1, 2, 4]),
            layer("b", 4e-3, 1e8, 1e6, [1, 2, 4]),
            layer("c", 1e-3, 1e6, 1e5, [1, 2]),
        ],
        [Block(name="t", bytes=1e6, lookup_bytes=1e6, compute_s=3e-3, consumer=1)],
        overlap=ov,
    ),
    "tables-4": lambda ov: make(
        4,
        2,
        [layer("a", 2e-3, 2e7, 2e7, [1, 2]), layer("b", 2e-3, 1e6, 4e6, [1, 2])],
        [Block(name=f"t{j}", bytes=1e6, lookup_bytes=6e6, compute_s=1.5e-3, consumer=1) for j in range(2)],
        overlap=ov,
    ),
    "mlp-6": lambda ov: make(
        6,
        2,
        [layer("a", 6e-3, 5e7, 2e6, [1, 2, 3, 6]), layer("b", 6e-3, 5e7, 1e6, [1, 2, 3, 6])],
        [Block(name="t", bytes=1e6, lookup_bytes=2e6, compute_s=2e-3, consumer=0)],
        overlap=ov,
    ),
}
CASE_IDS = [(name, ov) for name in PLACEMENT_CASES for ov in ("none", "full")]


@pytest.mark.parametrize("name,overlap", CASE_IDS)
def test_placement_methods_reach_the_brute_force_optimum(name, overlap):
    inst, X = PLACEMENT_CASES[name](overlap)
    inst = critical(inst)
    best = brute_force(inst, X)
    rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s)
    values = {}
    for formulation in ("milp", "enumeration", "auto"):
        sol = solve_placement(
            inst,
            replace(EXACT, formulation=formulation),
            X,
            local_search_s=0.0 if formulation == "milp" else None,
            chain_bound_s=0.0,
        )
        assert sol.status == "optimal", (formulation, sol.details)
        check_solution(inst, sol)  # objective == the evaluator's score of the solution
        values[formulation] = sol.objective
        if formulation == "milp":  # or a cheap start the volume bound proves optimal: no MILP to run
            assert sol.details["algorithm"] in ("milp", "bounds")
            if sol.details["algorithm"] == "milp":
                assert sol.details["model_objective_s"] == pytest.approx(sol.objective, rel=1e-6)
    assert values["milp"] == pytest.approx(best, rel=1e-9)
    assert values["enumeration"] == pytest.approx(best, rel=1e-9)
    assert values["auto"] == pytest.approx(best, rel=1e-9)
    # the bounds stay below the optimum; the local search never does worse than its start
    assert relaxation_bound(inst, rf) <= best * (1 + 1e-9)
    assert chain_bound(inst, rf, time_limit_s=5.0)[0] <= best * (1 + 1e-9)
    start = Strategy(
        tuple(max(lay.configs) for lay in inst.workload.layers),
        (0,) * len(inst.workload.layers),
        (0,) * len(inst.workload.blocks),
    )
    found = improve_strategy(inst, rf, start, 1.0)
    assert (
        best * (1 - 1e-9)
        <= strategy_times(inst, rf, found)["iteration_time_s"]
        <= strategy_times(inst, rf, start)["iteration_time_s"] * (1 + 1e-12)
    )


@pytest.mark.parametrize("name", list(PLACEMENT_CASES))
def test_the_models_scores_are_the_evaluators_for_every_strategy(name):
    """strategy_times (the models' scoring) and the local search's incremental scores and segment
    moves equal the evaluator's iteration time, strategy by strategy."""
    inst, X = PLACEMENT_CASES[name]("none")
    inst = critical(inst)
    rf = shortest_path_fractions(X, inst.cluster.link_bytes_per_s)
    ls = StrategyScorer(inst, rf)
    sts = list(strategies(inst))
    rng = np.random.default_rng(0)
    for q in rng.choice(len(sts), size=min(60, len(sts)), replace=False):
        st = sts[q]
        m = score(inst, X, st)
        assert strategy_times(inst, rf, st)["compute_s"] == pytest.approx(m.compute_time_s, rel=1e-12)
        assert strategy_times(inst, rf, st)["iteration_time_s"] == pytest.approx(m.iteration_time_s, rel=1e-12)
        ls.load_state(st)
        assert ls.score()[0] == pytest.approx(m.iteration_time_s, rel=1e-9)
        # a segment move's score of each type is the evaluator's score of the moved strategy
        L = len(inst.workload.layers)
        i = int(rng.integers(L))
        j = int(rng.integers(i, L))
        it, _ = ls.segment_move(i, j)
        for t in np.flatnonzero(np.isfinite(it)):
            k, s = int(ls.type_k[t]), int(ls.type_s[t])
            moved = Strategy(
                tuple(k if i <= x <= j else st.layer_degree[x] for x in range(L)),
                tuple(s if i <= x <= j else st.layer_start[x] for x in range(L)),
                st.block_server,
            )
            assert it[t] == pytest.approx(score(inst, X, moved).iteration_time_s, rel=1e-9)


@pytest.mark.parametrize("name,overlap", CASE_IDS)
def test_the_milp_point_of_every_strategy_scores_the_evaluators_time(name, overlap):
    """At the integer point of a strategy (continuous maxima at their least values) the placement
    MILP is feasible and its objective is the evaluator's iteration time: the path rows make C the
    larger of the busiest server and P."""
    from topoopt_ilp.models.placement.milp import TIME_UNIT_S, _point, build_placement

    inst, X = PLACEMENT_CASES[name](overlap)
    inst = critical(inst)
    pm = build_placement(inst, X, prune=False)
    assert "path" in [b.name for b in pm.model.row_blocks]
    alpha = inst.cluster.hop_latency_s / TIME_UNIT_S
    for st in list(strategies(inst))[::23]:
        x = _point(pm, inst.workload, st, alpha, overlap, inst.objective)
        act = pm.model.matrix @ x
        assert (act >= pm.model.row_lower - 1e-9).all() and (act <= pm.model.row_upper + 1e-9).all()
        value = (pm.model.objective @ x + pm.model.objective_offset) * TIME_UNIT_S
        assert value == pytest.approx(score(inst, X, st).iteration_time_s, rel=1e-9)
    # the default model has no path rows: busiest_server's MILP is the one it always was
    default, _ = PLACEMENT_CASES[name](overlap)
    assert "path" not in [b.name for b in build_placement(default, X, prune=False).model.row_blocks]


def test_critical_path_moves_the_optimum_off_the_pipeline():
    inst, X = PLACEMENT_CASES["pipeline-4"]("none")
    fast = solve_placement(inst, EXACT, X)
    slow = solve_placement(critical(inst), EXACT, X)
    assert fast.status == slow.status == "optimal"
    # busiest_server: every layer at degree 1 on its own server, a three-stage pipeline
    assert fast.placement["layer_degree"] == [1, 1, 1] and len(set(fast.placement["layer_start"])) == 3
    # critical_path: the pipeline would cost its whole chain; the optimum shares servers instead
    st = slow.placement
    assert list(st["layer_degree"]) != [1, 1, 1] or len(set(st["layer_start"])) < 3
    assert slow.objective > fast.objective * 1.5
    # and the pipeline, charged its bubble, is worse than that optimum
    pipe = Strategy(
        tuple(fast.placement["layer_degree"]),
        tuple(fast.placement["layer_start"]),
        tuple(fast.placement["block_server"]),
    )
    assert score(critical(inst), X, pipe).iteration_time_s > slow.objective


# ------------------------------------------------------------------------------------------------
# The joint problem (topology free): the joint MILP and the strategy enumeration
# ------------------------------------------------------------------------------------------------
JOINT_CASES = {
    "pipeline": lambda ov: joint_make(
        4,
        2,
        [jlayer("a", 4e-3, 1e8, 1e6, [1, 2, 4]), jlayer("b", 4e-3, 1e8, 1e6, [1, 2])],
        [Block(name="t", bytes=1e6, lookup_bytes=1e6, compute_s=3e-3, consumer=1)],
    ),
    "mlp": lambda ov: joint_make(
        4,
        2,
        [jlayer("a", 4e-3, 4e7, 2e7, [1, 2]), jlayer("b", 4e-3, 4e7, 1e6, [1, 2])],
        [Block(name="t", bytes=1e6, lookup_bytes=8e6, compute_s=2e-3, consumer=1)],
    ),
}


def _with_overlap(inst, overlap):
    return critical(replace(inst, workload=replace(inst.workload, overlap=overlap)))


@pytest.mark.parametrize("name,overlap", [("pipeline", "none"), ("pipeline", "full"), ("mlp", "none")])
def test_joint_methods_reach_the_brute_force_optimum(name, overlap):
    inst = _with_overlap(JOINT_CASES[name](overlap), overlap)
    best = joint_brute_force(inst)
    milp = solve_joint(inst, JOINT_OPTS)
    enum = solve_joint_enumeration(inst, JOINT_OPTS)
    # without a start the enumeration's bounds and leaves (not the alternating start) find the optimum
    alone = solve_joint_enumeration(inst, replace(JOINT_OPTS, warm_start="none"))
    assert alone.details["surviving_leaves"] > 0
    assert milp.status == enum.status == alone.status == "optimal"
    for sol in (milp, enum, alone):
        assert sol.objective == pytest.approx(best, rel=1e-6)
        assert sol.objective == pytest.approx(objective_value(inst, evaluate(inst, sol)), rel=1e-9)
    if "model_objective_s" in milp.details:  # the MILP's own point: its objective is the evaluator's
        assert milp.details["model_objective_s"] == pytest.approx(milp.objective, rel=1e-6)


def test_joint_enumeration_leaves_and_floors_use_the_critical_path():
    inst = _with_overlap(JOINT_CASES["pipeline"]("none"), "none")
    leaves, _ = search_strategies(inst, np.inf)
    X = ring(4)
    for bound, compute, st in leaves:
        m = score(inst, X, st)
        assert compute == pytest.approx(m.compute_time_s, rel=1e-12)  # C(S) = max(busiest, P)
        value = strategy_value(inst, st)  # the strategy's optimum over every topology
        assert bound <= value * (1 + 1e-9)
        assert m.compute_time_s <= strategy_floor(inst, st) <= value * (1 + 1e-9)  # overlap none: C + comm floor


# ------------------------------------------------------------------------------------------------
# The rest goes through the evaluator
# ------------------------------------------------------------------------------------------------
def test_solve_and_alternating_score_with_the_critical_path():
    from topoopt_ilp.methods import solve

    inst = _with_overlap(JOINT_CASES["pipeline"]("none"), "none")
    for method in ("heuristic", "alternating"):
        sol = solve(inst, method=method)
        m = evaluate(inst, sol)
        assert sol.metrics["compute_time_s"] == pytest.approx(m.compute_time_s)
        st = Strategy(
            tuple(sol.placement["layer_degree"]),
            tuple(sol.placement["layer_start"]),
            tuple(sol.placement["block_server"]),
        )
        busiest = score(
            replace(inst, workload=replace(inst.workload, compute_model="busiest_server")), sol.topology.matrix, st
        ).compute_time_s
        tau = [inst.workload.layer_time(i, k) for i, k in enumerate(st.layer_degree)]
        assert m.compute_time_s == pytest.approx(max(busiest, sum(tau), 3e-3 + tau[1]), rel=1e-12)


def test_the_shipped_variant_instance_parses():
    path = Path(__file__).resolve().parents[2] / "instances" / "dlrm-mini-8-fixed-critical-path.json"
    inst = load_instance(path)
    assert inst.workload.compute_model == "critical_path"


def test_switched_baselines_charge_the_critical_path_too():
    """architectures.evaluate_architecture (the big-switch and fat-tree baselines of `evaluate
    --architecture` and `evaluate-paper`) scores compute as the evaluator does."""
    from topoopt_ilp.evaluation.architectures import evaluate_architecture

    inst, X = PLACEMENT_CASES["pipeline-4"]("none")
    pipe = strategy_to_dict(Strategy((1, 1, 1), (0, 1, 2), (3,)))
    for model in ("busiest_server", "critical_path"):
        case = replace(inst, workload=replace(inst.workload, compute_model=model))
        want = score(case, X, Strategy((1, 1, 1), (0, 1, 2), (3,))).compute_time_s
        for arch in ("big_switch", "fat_tree"):
            m = evaluate_architecture(case, arch, placement=pipe, **({"rack_size": 2} if arch == "fat_tree" else {}))
            assert m.compute_time_s == pytest.approx(want, rel=1e-12)
            assert m.iteration_time_s == pytest.approx(m.compute_time_s + m.comm_time_s, rel=1e-12)
    assert want == pytest.approx(4e-3 + 4e-3 + 1e-3, rel=1e-12)  # the chain, not the busiest server's 4 ms


def test_p_is_the_schedule_graphs_critical_path_with_free_communication_and_free_backward():
    """An independent cross-check: the iteration graph of topoopt schedule (another module, built
    task by task) has, with communication free and every layer's time in its forward task
    (forward_fraction 1, so the backward passes the formula leaves out cost nothing), a longest
    precedence chain equal to the evaluator's P, for a pipeline, data-parallel and mixed strategies."""
    from topoopt_ilp.evaluation.evaluate import critical_path_s
    from topoopt_ilp.schedule.iteration_graph import build_iteration_graph, lower_bounds

    layers = [
        layer("a", 4e-3, 1e6, 1e6, [1, 4]),
        layer("b", 4e-3, 1e6, 1e6, [1, 4]),
        layer("c", 2e-3, 1e6, 1e6, [1, 4]),
    ]
    blocks = [
        Block(name="t", bytes=1e6, lookup_bytes=1e6, compute_s=5e-3, consumer=1),
        Block(name="u", bytes=1e6, lookup_bytes=1e6, compute_s=1e-3, consumer=2),
    ]
    inst, X = make(4, 2, layers, blocks)
    fast = critical(replace(inst, cluster=replace(inst.cluster, link_bandwidth_gbps=1e6, hop_latency_us=0.0)))
    checked = 0
    for st in itertools.islice(strategies(fast), 0, None, 7):
        g = build_iteration_graph(fast, st, X, forward_fraction=1.0)
        p = critical_path_s(fast, strategy_to_dict(st))
        assert lower_bounds(g)["critical_path_s"] == pytest.approx(p, rel=1e-4), st
        checked += 1
    assert checked > 20
