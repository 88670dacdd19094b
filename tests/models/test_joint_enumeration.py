"""The joint problem by strategy enumeration: its bounds are valid, its isomorphism classes are sound,
and its optimum is brute force's and the joint MILP's."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from test_joint import CASES, OPTS, B, L, check, make, topologies

from topoopt_ilp.evaluate import evaluate
from topoopt_ilp.models.joint import solve_joint
from topoopt_ilp.models.joint_enumeration import distinct_traffic, search_strategies, solve_joint_enumeration
from topoopt_ilp.solution import Solution, Topology
from topoopt_ilp.strategy import Strategy, server_memory, strategy_to_dict
from topoopt_ilp.workload import Block


def strategy_value(inst, st) -> float:
    """min over every regular topology of the evaluator's objective for ``st`` with optimal routing."""
    c = inst.cluster
    best = np.inf
    for X in topologies(inst.n, c.degree, c.directed, c.multi_links):
        sol = Solution(status="feasible", method="given", topology=Topology(X), placement=strategy_to_dict(st))
        best = min(best, evaluate(inst, sol, routing="optimal").iteration_time_s)
    return best


# the brute-force cases of the joint MILP (degrees <= 2: one ring per group, so brute force is exact),
# and one with two identical tables
SMALL = {**CASES,
         "tables": make(4, 2, [L("a", 2e-3, 2e7, 2e7, [1, 2]), L("b", 2e-3, 1e6, 4e6, [1, 2])],
                        [Block(name=f"t{j}", bytes=1e6, lookup_bytes=6e6, consumer=1) for j in range(2)])}


@pytest.mark.parametrize("name", list(SMALL))
def test_every_bound_is_below_its_strategys_optimum(name):
    inst = SMALL[name]
    leaves, stats = search_strategies(inst, np.inf)
    assert stats["pending_bound"] == np.inf  # visited everything
    w = inst.workload
    feasible = [st for st in _all_strategies(inst) if (server_memory(w, inst.n, st) <= w.server_memory_bytes).all()]
    assert len(leaves) == len(feasible)
    for lb, compute, st in leaves:
        assert compute == pytest.approx(server_compute(inst, st))
        assert lb <= strategy_value(inst, st) * (1 + 1e-9), st


def server_compute(inst, st) -> float:
    from topoopt_ilp.strategy import strategy_demand

    return float(strategy_demand(inst.workload, inst.n, st)[2].max())


def _all_strategies(inst):
    """Every strategy, identical blocks (same fields) on non-decreasing servers."""
    w, n = inst.workload, inst.n
    per_layer = [[(k, s) for k in layer.configs for s in range(n // k)] for layer in w.layers]
    for opts in itertools.product(*per_layer):
        for servers in itertools.product(range(n), repeat=len(w.blocks)):
            same = [j for j in range(1, len(w.blocks)) if w.blocks[j].bytes == w.blocks[j - 1].bytes
                    and w.blocks[j].lookup_bytes == w.blocks[j - 1].lookup_bytes]
            if any(servers[j] < servers[j - 1] for j in same):
                continue
            yield Strategy(tuple(k for k, _ in opts), tuple(s for _, s in opts), servers)


@pytest.mark.parametrize("name", list(SMALL))
def test_isomorphic_traffic_has_the_same_optimum(name):
    inst = SMALL[name]
    leaves, _ = search_strategies(inst, np.inf)
    classes = distinct_traffic(inst, leaves)
    assert sum(size for *_, size in classes) == len(leaves)
    values = {st: strategy_value(inst, st) - compute for _, compute, st in leaves}  # the comm part
    reps = {st: values[st] for _, _, st, _ in classes}
    # every strategy's comm optimum is that of some representative (and the smallest value agrees)
    for st, v in values.items():
        assert any(v == pytest.approx(r, rel=1e-6, abs=1e-12) for r in reps.values()), st
    assert min(values[st] + c for _, c, st in leaves) == pytest.approx(
        min(reps[st] + c for _, c, st, _ in classes), rel=1e-9)


@pytest.mark.parametrize("name", list(SMALL))
def test_enumeration_matches_brute_force_and_the_joint_milp(name):
    inst = SMALL[name]
    sol = solve_joint_enumeration(inst, OPTS)
    assert sol.status == "optimal"
    best = min(strategy_value(inst, st) for _, _, st in search_strategies(inst, np.inf)[0])
    assert sol.objective == pytest.approx(best, rel=1e-6)
    assert sol.objective == pytest.approx(solve_joint(inst, OPTS).objective, rel=1e-6)
    if "model_objective_s" in sol.details:  # the optimum came from a leaf model, not the start
        check(inst, sol)


def test_enumeration_splits_an_allreduce_over_both_ring_directions():
    P = 1e8
    inst = make(4, 2, [L("a", 1e-3, P, 0.0, [4])], latency=1.0)
    sol = solve_joint_enumeration(inst, OPTS)
    assert sol.status == "optimal"
    assert sol.objective == pytest.approx(1e-3 / 4 + 0.75 * P / B + 1e-6, rel=1e-9)


def test_time_limit_zero_and_memory_infeasibility():
    inst = SMALL["tables"]
    from topoopt_ilp.models.common import ExactOptions

    assert solve_joint_enumeration(inst, ExactOptions(time_limit_s=0)).status == "no_solution"
    # 5 tables of 0.6 C on 4 servers: the aggregate fits (3 C <= 4 C), no packing does
    tight = make(4, 2, [L("l", 1e-3, 1e6, 1e6, [1, 2, 4])],
                 [Block(name=f"t{j}", bytes=6e8, lookup_bytes=1e6) for j in range(5)], memory=1e9)
    sol = solve_joint_enumeration(tight, OPTS)
    assert sol.status == "infeasible" and "memory" in sol.details["infeasible"]


def test_identical_blocks_take_non_decreasing_servers():
    leaves, _ = search_strategies(SMALL["tables"], np.inf)
    assert all(st.block_server[0] <= st.block_server[1] for *_, st in leaves)
    assert len({st for *_, st in leaves}) == len(leaves)



def test_formulation_auto_picks_enumeration_or_falls_back_to_the_milp(monkeypatch):
    from topoopt_ilp.models import joint_enumeration, solve_exact
    from topoopt_ilp.models.common import ExactOptions

    inst = SMALL["mlp-undirected"]
    auto = solve_exact(inst, ExactOptions(time_limit_s=120, gap=1e-9))
    assert auto.details["algorithm"] == "enumeration" and auto.status == "optimal"
    monkeypatch.setattr(joint_enumeration, "AUTO_MAX_LEAVES", 0)  # too many strategies: the MILP instead
    milp = solve_exact(inst, ExactOptions(time_limit_s=120, gap=1e-9))
    assert milp.details["algorithm"] == "milp" and milp.status == "optimal"
    assert "enumeration_probe" in milp.details
    assert milp.objective == pytest.approx(auto.objective, rel=1e-6)


def test_formulation_is_checked_and_reaches_the_cli(tmp_path, capsys):
    import json

    from topoopt_ilp import io
    from topoopt_ilp.cli import main
    from topoopt_ilp.errors import InputError
    from topoopt_ilp.models import solve_exact
    from topoopt_ilp.models.common import ExactOptions

    inst = SMALL["mlp-directed"]
    with pytest.raises(InputError, match="unknown formulation 'naive'.*auto, milp, enumeration"):
        solve_exact(inst, ExactOptions(formulation="naive"))
    path, out = tmp_path / "w.json", tmp_path / "sol.json"
    path.write_text(json.dumps(io.instance_to_dict(inst)))
    assert main(["solve", str(path), "--method", "exact", "--formulation", "enumeration", "--out", str(out), "--quiet"]) == 0
    sol = json.loads(out.read_text())
    assert sol["status"] == "optimal" and sol["details"]["algorithm"] == "enumeration"
    assert main(["verify", str(path), str(out)]) == 0
    assert main(["solve", str(path), "--method", "heuristic", "--formulation", "milp"]) == 2  # exact only
    assert "applies to --method exact" in capsys.readouterr().err


def test_enumeration_without_a_start_still_finds_the_optimum():
    from topoopt_ilp.models.common import ExactOptions

    inst = SMALL["mlp-directed"]
    sol = solve_joint_enumeration(inst, ExactOptions(time_limit_s=60, warm_start="none", gap=1e-9))
    assert sol.status == "optimal" and sol.details["start_method"] is None
    assert sol.objective == pytest.approx(solve_joint(inst, OPTS).objective, rel=1e-6)
