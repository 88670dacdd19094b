"""The joint problem by strategy enumeration: its bounds are valid, its isomorphism classes are sound,
and its optimum is brute force's and the joint MILP's."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from test_joint import CASES, OPTS, B, L, check, make, solve_exact, solve_joint, solve_joint_enumeration, topologies

from topoopt_ilp.core.solution import Solution, Topology
from topoopt_ilp.core.strategy import Strategy, server_memory, strategy_to_dict
from topoopt_ilp.core.workload import Block
from topoopt_ilp.evaluation.evaluate import evaluate
from topoopt_ilp.models.joint.enumeration import distinct_traffic, search_strategies, strategy_floor


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
SMALL = {
    **CASES,
    "tables": make(
        4,
        2,
        [L("a", 2e-3, 2e7, 2e7, [1, 2]), L("b", 2e-3, 1e6, 4e6, [1, 2])],
        [Block(name=f"t{j}", bytes=1e6, lookup_bytes=6e6, consumer=1) for j in range(2)],
    ),
}


@pytest.mark.parametrize("name", list(SMALL))
def test_every_bound_is_below_its_strategys_optimum(name):
    inst = SMALL[name]
    leaves, stats = search_strategies(inst, np.inf)
    assert stats["pending_bound"] == np.inf  # visited everything
    w = inst.workload
    feasible = [st for st in _all_strategies(inst) if (server_memory(w, inst.n, st) <= w.server_memory_bytes).all()]
    assert len(leaves) <= len(feasible)  # one per class of relabellings (test_symmetry_keeps_...)
    for lb, compute, st in leaves:
        assert compute == pytest.approx(server_compute(inst, st))
        assert lb <= strategy_value(inst, st) * (1 + 1e-9), st


@pytest.mark.parametrize("name", list(SMALL))
def test_strategy_floor_is_below_the_strategys_optimum(name):
    # the bound the alternating method uses to skip hopeless starts, against brute force over every
    # topology with optimal routing (every third strategy, to keep the test short)
    inst = SMALL[name]
    for st in itertools.islice(_all_strategies(inst), 0, None, 3):
        assert strategy_floor(inst, st) <= strategy_value(inst, st) * (1 + 1e-9), st


def _relabelling_classes(inst, strategies) -> set:
    """The canonical form of each strategy under every server permutation: its traffic (AllReduce
    groups as member sets with bytes, model-parallel matrix), compute and memory, relabelled, least."""
    from topoopt_ilp.core.strategy import strategy_demand

    w, n = inst.workload, inst.n
    out = set()
    for st in strategies:
        groups, mp, compute = strategy_demand(w, n, st)
        memory = server_memory(w, n, st)
        forms = []
        for pi in itertools.permutations(range(n)):
            pi = np.array(pi)
            inv = np.argsort(pi)
            forms.append(
                (
                    tuple(np.round(mp[np.ix_(inv, inv)], 3).ravel()),
                    tuple(compute[inv]),
                    tuple(memory[inv]),
                    tuple(sorted((tuple(sorted(pi[list(g.members)])), g.bytes) for g in groups)),
                )
            )
        out.add(min(forms))
    return out


@pytest.mark.parametrize("name", list(SMALL))
def test_symmetry_keeps_one_strategy_of_every_relabelling_class(name):
    # brute force: the search's leaves meet every class of server relabellings of the feasible
    # strategies (equal traffic, compute and memory up to renaming servers), and only those
    inst = SMALL[name]
    w = inst.workload
    leaves, _ = search_strategies(inst, np.inf)
    feasible = [st for st in _all_strategies(inst) if (server_memory(w, inst.n, st) <= w.server_memory_bytes).all()]
    assert _relabelling_classes(inst, [st for *_, st in leaves]) == _relabelling_classes(inst, feasible)


def _dlrm_like(n: int, configs, blocks: int = 3) -> object:
    layers = [L("bot", 4e-3, 4e6, 8e6, configs), L("mix", 2e-3, 0.0, 2e7, configs), L("top", 8e-3, 3e7, 8e6, configs)]
    return make(n, 2, layers, [Block(name=f"t{j}", bytes=1e6, lookup_bytes=1.6e7, consumer=1) for j in range(blocks)])


@pytest.mark.parametrize("n,configs", [(8, [1, 2, 4, 8]), (8, [1, 2, 4]), (6, [1, 2, 3, 6]), (4, [1, 2, 4])])
def test_every_symmetry_maps_a_strategy_to_its_relabelled_traffic(n, configs):
    # (1) of models.strategy_symmetry, checked on the definitions: the image strategy's AllReduce
    # groups (with their member order when it defines the rings), model-parallel bytes, compute
    # and memory are the relabelled ones of the strategy
    from topoopt_ilp.core.strategy import strategy_demand
    from topoopt_ilp.models.joint.milp import ALL_RINGS_UP_TO
    from topoopt_ilp.models.joint.symmetry import strategy_symmetries
    from topoopt_ilp.models.placement.data import layer_options

    inst = _dlrm_like(n, configs)
    w = inst.workload
    opt_layer, opt_k, opt_s = layer_options(w, n)
    param = np.array([w.layers[i].param_bytes for i in opt_layer])
    sym = strategy_symmetries(n, opt_layer, opt_k, opt_s, (opt_k > ALL_RINGS_UP_TO) & (param > 0))
    assert len(sym) >= 1  # the reversal v -> n-1-v at least
    rng = np.random.default_rng(n + len(configs))
    for _ in range(40):
        opts = [int(rng.choice(np.flatnonzero(opt_layer == i))) for i in range(len(w.layers))]
        servers = tuple(int(v) for v in rng.integers(0, n, len(w.blocks)))
        st = Strategy(tuple(int(opt_k[o]) for o in opts), tuple(int(opt_s[o]) for o in opts), servers)
        groups, mp, compute = strategy_demand(w, n, st)
        for row in sym:
            image, pi = row[: len(opt_layer)], row[len(opt_layer) :]
            mapped = Strategy(
                tuple(int(opt_k[image[o]]) for o in opts),
                tuple(int(opt_s[image[o]]) for o in opts),
                tuple(int(pi[v]) for v in servers),
            )
            g2, mp2, compute2 = strategy_demand(w, n, mapped)
            assert np.allclose(mp2[np.ix_(pi, pi)], mp)
            assert np.allclose(compute2[pi], compute)
            assert np.allclose(server_memory(w, n, mapped)[pi], server_memory(w, n, st))
            assert {(frozenset(pi[list(g.members)].tolist()), g.bytes) for g in groups} == {
                (frozenset(g.members), g.bytes) for g in g2
            }
            for g in groups:
                if len(g.members) > ALL_RINGS_UP_TO:  # TotientPerms rings: the family must map onto itself
                    k = len(g.members)
                    rings = lambda m: {frozenset(zip(m, m[p:] + m[:p])) for p in range(1, k) if np.gcd(p, k) == 1}
                    target = next(h for h in g2 if set(h.members) == set(pi[list(g.members)].tolist()))
                    assert {frozenset((int(pi[a]), int(pi[b])) for a, b in r) for r in rings(list(g.members))} == rings(
                        list(target.members)
                    )


def test_symmetry_cuts_the_search():
    inst = _dlrm_like(4, [1, 2, 4], blocks=2)
    from topoopt_ilp.models.joint import enumeration as joint_enumeration

    with_sym, _ = search_strategies(inst, np.inf, max_nodes=10**7)
    original = joint_enumeration.strategy_symmetries
    try:
        joint_enumeration.strategy_symmetries = lambda n, ol, *a: np.zeros((0, len(ol) + n), dtype=np.int64)
        without, _ = search_strategies(inst, np.inf, max_nodes=10**7)
    finally:
        joint_enumeration.strategy_symmetries = original
    assert 3 * len(with_sym) < len(without)  # 4 relabellings (v -> v xor c) on 4 servers
    # the same classes of traffic survive (compared through the isomorphism grouping)
    assert len(distinct_traffic(inst, with_sym)) == len(distinct_traffic(inst, without))


def server_compute(inst, st) -> float:
    from topoopt_ilp.core.strategy import strategy_demand

    return float(strategy_demand(inst.workload, inst.n, st)[2].max())


def _all_strategies(inst):
    """Every strategy, identical blocks (same fields) on non-decreasing servers."""
    w, n = inst.workload, inst.n
    per_layer = [[(k, s) for k in layer.configs for s in range(n // k)] for layer in w.layers]
    for opts in itertools.product(*per_layer):
        for servers in itertools.product(range(n), repeat=len(w.blocks)):
            same = [
                j
                for j in range(1, len(w.blocks))
                if w.blocks[j].bytes == w.blocks[j - 1].bytes
                and w.blocks[j].lookup_bytes == w.blocks[j - 1].lookup_bytes
            ]
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
        min(reps[st] + c for _, c, st, _ in classes), rel=1e-9
    )


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
    # 3 tables of 0.6 C and 3 of 0.45 C on 4 servers: the checks before solving pass, no packing does
    tight = make(
        4,
        2,
        [L("l", 1e-3, 1e6, 1e6, [1, 2, 4])],
        [Block(name=f"t{j}", bytes=b, lookup_bytes=1e6) for j, b in enumerate([6e8] * 3 + [4.5e8] * 3)],
        memory=1e9,
    )
    sol = solve_joint_enumeration(tight, OPTS)
    assert sol.status == "infeasible" and "memory" in sol.details["infeasible"]


def test_identical_blocks_take_non_decreasing_servers():
    leaves, _ = search_strategies(SMALL["tables"], np.inf)
    assert all(st.block_server[0] <= st.block_server[1] for *_, st in leaves)
    assert len({st for *_, st in leaves}) == len(leaves)


def test_formulation_auto_picks_enumeration_or_falls_back_to_the_milp(monkeypatch):
    from topoopt_ilp.models.common import ExactOptions
    from topoopt_ilp.models.joint import enumeration as joint_enumeration

    inst = SMALL["mlp-undirected"]
    auto = solve_exact(inst, ExactOptions(time_limit_s=120, gap=1e-9))
    assert auto.details["algorithm"] == "enumeration" and auto.status == "optimal"
    monkeypatch.setattr(joint_enumeration, "AUTO_PROBE_NODES", 1)  # the probe cannot finish: the MILP instead
    milp = solve_exact(inst, ExactOptions(time_limit_s=120, gap=1e-9))
    assert milp.details["algorithm"] == "milp" and milp.status == "optimal"
    assert "enumeration_probe" in milp.details
    assert milp.objective == pytest.approx(auto.objective, rel=1e-6)


def test_formulation_is_checked_and_reaches_the_cli(tmp_path, capsys):
    import json

    from topoopt_ilp import files
    from topoopt_ilp.cli import main
    from topoopt_ilp.errors import InputError
    from topoopt_ilp.models.common import ExactOptions

    inst = SMALL["mlp-directed"]
    with pytest.raises(InputError, match="unknown formulation 'naive'.*auto, milp, enumeration"):
        solve_exact(inst, ExactOptions(formulation="naive"))
    path, out = tmp_path / "w.json", tmp_path / "sol.json"
    path.write_text(json.dumps(files.instance_to_dict(inst)))
    assert (
        main(["solve", str(path), "--method", "exact", "--formulation", "enumeration", "--out", str(out), "--quiet"])
        == 0
    )
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


# -- the degree-2 cut bound (models.cycle_cuts) ---------------------------------------------------
def _link_matrix(n: int, cycles) -> np.ndarray:
    """The link-count matrix of a union of cycles (a 2-cycle is a double link)."""
    X = np.zeros((n, n), dtype=np.int64)
    for c in cycles:
        for a, b in zip(c, c[1:] + c[:1]):
            X[a, b] = X[b, a] = 2 if len(c) == 2 else 1
    return X


def test_two_regular_multigraphs_are_all_of_them():
    from topoopt_ilp.models.joint.cycle_cuts import two_regular_multigraphs

    # OEIS A002137 (loopless 2-regular multigraphs) and A001205 (simple ones), labelled
    assert [len(two_regular_multigraphs(n)) for n in range(2, 9)] == [1, 1, 6, 22, 130, 822, 6202]
    assert [len(two_regular_multigraphs(n, multi_links=False)) for n in range(3, 9)] == [1, 3, 12, 70, 465, 3507]
    for n, multi in ((4, True), (5, True), (5, False), (6, False)):  # the same set as test_joint's enumeration
        found = [_link_matrix(n, cycles).tobytes() for cycles in two_regular_multigraphs(n, multi)]
        assert len(set(found)) == len(found)
        assert set(found) == {X.tobytes() for X in topologies(n, 2, False, multi)}


@pytest.mark.parametrize(
    "n,multi,seed", [(4, True, 0), (4, False, 1), (5, True, 2), (5, True, 3), (6, True, 4), (6, False, 5)]
)
def test_cycle_cut_bound_is_below_the_best_topology(n, multi, seed):
    # brute force: the least bandwidth term over every 2-regular topology (optimal routing, rings in
    # member order: one of the orders the bound allows) is at least the bound
    from topoopt_ilp.core.instance import AllReduceGroup, Cluster, Demand, Instance
    from topoopt_ilp.models.joint.cycle_cuts import CycleCutBound

    rng = np.random.default_rng(seed)
    mp = np.where(rng.random((n, n)) < 0.35, rng.uniform(1e6, 3e7, (n, n)), 0.0)
    np.fill_diagonal(mp, 0.0)
    members = tuple(sorted(rng.choice(n, size=2 if seed % 2 else 3, replace=False).tolist()))
    group = AllReduceGroup(members=members, bytes=float(rng.uniform(1e6, 4e7)))
    pairs = tuple((int(i), int(j), float(mp[i, j])) for i, j in zip(*np.nonzero(mp)))
    cluster = Cluster(servers=n, degree=2, link_bandwidth_gbps=100.0, hop_latency_us=0.0, multi_links=multi)
    inst = Instance(cluster=cluster, demand=Demand(allreduce=(group,), mp=pairs), objective="comm_time")
    cuts = CycleCutBound(cluster)
    bound = cuts.bandwidth_floor(mp, group.bytes_per_member() * cuts.group_split(members))
    from topoopt_ilp.models.joint.cycle_cuts import two_regular_multigraphs

    every = [
        _link_matrix(n, cycles) for cycles in two_regular_multigraphs(n, multi)
    ]  # checked above against brute force
    best = min(evaluate(inst, X, routing="optimal").bandwidth_time_s for X in every)
    assert 0 < bound <= best * (1 + 1e-9)
    if len(members) == 2:  # a 2-member group has one ring: on these tiny cycles the cut bound is often exact
        assert bound >= 0.5 * best


def test_cycle_cut_bound_grows_with_traffic_and_sees_components():
    from topoopt_ilp.core.instance import Cluster
    from topoopt_ilp.models.joint.cycle_cuts import CycleCutBound, applies

    cluster = Cluster(servers=6, degree=2, link_bandwidth_gbps=100.0)
    assert applies(cluster) and not applies(Cluster(servers=6, degree=3, link_bandwidth_gbps=100.0))
    cuts = CycleCutBound(cluster)
    rng = np.random.default_rng(7)
    mp = np.zeros((6, 6))
    last = 0.0
    for _ in range(12):  # adding bytes never lowers the bound (it is used at partial strategies)
        i, j = rng.choice(6, size=2, replace=False)
        mp[i, j] += rng.uniform(1e6, 1e7)
        value = cuts.bandwidth_floor(mp, np.zeros(64))
        assert value >= last
        last = value
    # one pair only: a double link carries it over 2 links (the topology with a 2-cycle {0, 1})
    one = np.zeros((6, 6))
    one[0, 1] = 1e7
    assert cuts.bandwidth_floor(one, np.zeros(64)) == pytest.approx(1e7 / (2 * B))
    simple = CycleCutBound(Cluster(servers=6, degree=2, link_bandwidth_gbps=100.0, multi_links=False))
    assert simple.bandwidth_floor(one, np.zeros(64)) == pytest.approx(1e7 / (2 * B))  # both ways round a cycle


def test_a_short_limit_keeps_the_start_instead_of_no_solution():
    # Found by a user: dlrm-mini-6 with --time-limit 6 gave no_solution although its alternating
    # start was feasible: the enumeration's probe used the whole limit, and the joint MILP, handed
    # no time, dropped the start. The probe now gets half of what is left, and a MILP with no time
    # returns its start.
    from topoopt_ilp.files import load_instance
    from topoopt_ilp.models.common import ExactOptions

    inst = load_instance("instances/dlrm-mini-6.json")
    sol = solve_joint_enumeration(inst, ExactOptions(time_limit_s=4.0), fallback_to_milp=True)
    assert sol.status in ("feasible", "optimal") and sol.placement is not None
    assert sol.objective == pytest.approx(evaluate(inst, sol).iteration_time_s, rel=1e-9)
    start = solve_joint_enumeration(inst, ExactOptions(time_limit_s=4.0), fallback_to_milp=False)
    none_left = solve_joint(inst, ExactOptions(time_limit_s=0.0), start=start)
    assert none_left.status in ("feasible", "optimal") and none_left.objective == pytest.approx(
        start.objective, rel=1e-9
    )
    assert "no time was left" in none_left.details["note"]


def test_export_writes_the_joint_milp_when_the_enumeration_settles_it(tmp_path):
    # Found by a user: --export-model wrote nothing when the enumeration (not the MILP) solved it.
    from dataclasses import replace

    path = tmp_path / "joint.lp"
    sol = solve_joint_enumeration(CASES["mlp-undirected"], replace(OPTS, export_model=str(path)))
    assert sol.details["algorithm"] == "enumeration" and path.stat().st_size > 0
    assert "obj: +1 C +1 Tbw" in path.read_text()[:2000]  # the joint model: compute + bandwidth term
