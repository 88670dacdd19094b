"""The joint placement + topology + routing MILP against brute force, a closed form, the evaluator
and every backend."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from conftest import INSTANCES
from topoopt_ilp import files, models
from topoopt_ilp.cli import main
from topoopt_ilp.core.instance import Cluster, Instance
from topoopt_ilp.core.solution import Solution, Topology
from topoopt_ilp.core.strategy import Strategy, server_memory, strategy_to_dict
from topoopt_ilp.core.workload import Block, Layer, Workload
from topoopt_ilp.errors import UnsupportedError
from topoopt_ilp.evaluation.evaluate import evaluate
from topoopt_ilp.evaluation.verify import verify
from topoopt_ilp.methods import METHODS, finalize, solve
from topoopt_ilp.methods.alternating import alternating_incumbent
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.joint.milp import MAX_JOINT_SERVERS

GBPS = 100.0
B = GBPS * 1e9 / 8  # bytes/s per link
OPTS = ExactOptions(time_limit_s=120, gap=1e-9)


# The models as the exact method runs them: with the starts the method layer hands them (the
# alternating decomposition as the joint models' incumbent, TopoOpt's heuristic as the warm start).
def solve_exact(instance, options=None, **kwargs):
    return models.solve_exact(
        instance, options, heuristic=METHODS["heuristic"], incumbent=alternating_incumbent, **kwargs
    )


def solve_joint(instance, options, start=None):
    from topoopt_ilp.models.joint.milp import solve_joint as model

    return model(instance, options, start, incumbent=alternating_incumbent)


def solve_joint_enumeration(instance, options, **kwargs):
    from topoopt_ilp.models.joint.enumeration import solve_joint_enumeration as model

    return model(instance, options, incumbent=alternating_incumbent, **kwargs)


def make(
    n: int,
    d: int,
    layers,
    blocks=(),
    *,
    directed=False,
    multi=False,
    latency=0.0,
    memory=1e12,
    objective="iteration_time",
) -> Instance:
    w = Workload(layers=tuple(layers), blocks=tuple(blocks), batch_size=64, server_memory_bytes=memory)
    c = Cluster(
        servers=n,
        degree=d,
        link_bandwidth_gbps=GBPS,
        hop_latency_us=latency,
        links="directed" if directed else "undirected",
        multi_links=multi,
    )
    return Instance(cluster=c, workload=w, objective=objective)


def L(name, compute, params, act, configs):
    return Layer(name=name, compute_s=compute, param_bytes=params, activation_bytes=act, configs=tuple(configs))


def topologies(n: int, d: int, directed: bool, multi: bool):
    """Every d-regular link-count matrix on n servers (tiny n only)."""
    pairs = [(i, j) for i in range(n) for j in range(n) if i != j and (directed or i < j)]
    top = d if multi else 1
    for counts in itertools.product(range(top + 1), repeat=len(pairs)):
        X = np.zeros((n, n), dtype=np.int64)
        for (i, j), c in zip(pairs, counts):
            X[i, j] += c
            if not directed:
                X[j, i] += c
        if (X.sum(axis=1) == d).all() and (X.sum(axis=0) == d).all():
            yield X


def brute_force(inst: Instance) -> float:
    """min over strategies and topologies of the evaluator's iteration time with optimal routing
    (exact for latency 0 and rings that are unique, i.e. degrees <= 2)."""
    w, n, c = inst.workload, inst.n, inst.cluster
    per_layer = [[(k, s) for k in layer.configs for s in range(n // k)] for layer in w.layers]
    tops = list(topologies(n, c.degree, c.directed, c.multi_links))
    best = np.inf
    for opts in itertools.product(*per_layer):
        for servers in itertools.product(range(n), repeat=len(w.blocks)):
            st = Strategy(tuple(k for k, _ in opts), tuple(s for _, s in opts), servers)
            if (server_memory(w, n, st) > w.server_memory_bytes).any():
                continue
            for X in tops:
                sol = Solution(status="feasible", method="given", topology=Topology(X), placement=strategy_to_dict(st))
                best = min(best, evaluate(inst, sol, routing="optimal").iteration_time_s)
    return best


def check(inst: Instance, sol: Solution) -> None:
    """Optimal, verified, and the model's own objective is the evaluator's score of its solution."""
    assert sol.status == "optimal", sol.details
    sol = finalize(inst, sol)
    assert verify(inst, sol).valid, verify(inst, sol).violations
    assert sol.details["model_objective_s"] == pytest.approx(evaluate(inst, sol).iteration_time_s, rel=1e-6)


CASES = {
    # pipeline vs data parallel: a heavy AllReduce makes splitting the layers across servers pay
    "mlp-undirected": make(
        4,
        2,
        [L("a", 4e-3, 4e7, 2e7, [1, 2]), L("b", 4e-3, 4e7, 1e6, [1, 2])],
        [Block(name="t", bytes=1e6, lookup_bytes=8e6, consumer=1)],
    ),
    "mlp-directed": make(4, 1, [L("a", 2e-3, 2e7, 4e7, [1, 2]), L("b", 2e-3, 1e6, 1e6, [1, 2])], directed=True),
    "multi-links": make(4, 2, [L("a", 1e-3, 3e7, 1e7, [1, 2]), L("b", 1e-3, 3e7, 1e6, [2])], multi=True),
}


@pytest.mark.parametrize("name", list(CASES))
def test_joint_matches_brute_force(name):
    inst = CASES[name]
    sol = solve_joint(inst, OPTS)
    check(inst, sol)
    assert sol.objective == pytest.approx(brute_force(inst), rel=1e-6)


def test_allreduce_splits_over_both_ring_directions():
    # One layer AllReduced over 4 servers of degree 2: a single ring loads one direction of the
    # 4-cycle with 1.5 P (3/4 of it even when detouring); half the bytes on the reverse ring halve it.
    P = 1e8
    inst = make(4, 2, [L("a", 1e-3, P, 0.0, [4])], latency=1.0)
    sol = solve_joint(inst, OPTS)
    check(inst, sol)
    assert sol.objective == pytest.approx(1e-3 / 4 + 0.75 * P / B + 1e-6, rel=1e-9)
    fractions = sorted(f for _, _, f in sol.routing.rings.to_lists())
    assert fractions == pytest.approx([0.5, 0.5])


def test_hop_latency_counts_the_longest_used_path():
    inst = make(4, 2, [L("a", 4e-3, 4e7, 2e7, [1, 2]), L("b", 4e-3, 4e7, 1e6, [1, 2])], latency=5.0)
    sol = finalize(inst, solve_joint(inst, OPTS))
    check(inst, sol)
    m = sol.metrics
    assert m["latency_time_s"] == pytest.approx(5e-6 * m["max_hops"])
    assert sol.objective <= brute_force(make(4, 2, inst.workload.layers, latency=0.0)) + 5e-6 * (inst.n - 1)


@pytest.mark.parametrize("backend", ["highs", "scip", "cbc"])
def test_backends_agree(backend):
    inst = CASES["mlp-directed"]
    sol = solve_joint(inst, ExactOptions(backend=backend, time_limit_s=120, gap=1e-9, warm_start="none"))
    assert sol.backend == backend
    check(inst, sol)
    assert sol.objective == pytest.approx(solve_joint(inst, OPTS).objective, rel=1e-6)


def test_never_worse_than_its_start():
    inst = files.load_instance(INSTANCES / "paper" / "resnet50-testbed-12-d4.json")
    # 12 servers: not proven in a few seconds, but the incumbent is the alternating method's
    sol = solve_joint(inst, ExactOptions(time_limit_s=8))
    assert sol.status in ("optimal", "feasible") and sol.details["start_method"] == "alternating"
    assert sol.objective <= sol.details["start_objective_s"] * (1 + 1e-9)
    assert sol.bound is None or sol.bound <= sol.objective * (1 + 1e-9)  # no bound before the root LP ends
    assert verify(inst, finalize(inst, sol)).valid


def test_refusals_and_limits(tmp_path, capsys):
    big = make(MAX_JOINT_SERVERS + 4, 2, [L("a", 1e-3, 1e6, 1e6, [1, 2])])
    with pytest.raises(UnsupportedError, match="alternating"):
        solve_exact(big, ExactOptions())
    inst = CASES["mlp-directed"]
    assert solve_joint(inst, ExactOptions(time_limit_s=0)).status == "no_solution"
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(files.instance_to_dict(inst)))
    out = tmp_path / "sol.json"
    assert main(["solve", str(path), "--method", "exact", "--time-limit", "0", "--out", str(out)]) == 4
    assert json.loads(out.read_text())["status"] == "no_solution"  # a complete file saying so
    assert main(["solve", str(path), "--method", "exact", "--out", str(out), "--quiet"]) == 0
    assert main(["verify", str(path), str(out)]) == 0
    capsys.readouterr()


def test_memory_infeasible_exits_3(tmp_path, capsys):
    # 3 tables of 0.6 C and 3 of 0.45 C on 4 servers: the aggregate fits (3.15 C <= 4 C), at most 4 are
    # above C/2 and 8 above C/3 (the checks before solving), but no packing does: the 0.6 ones take a
    # server each with 0.4 C left, and the fourth takes two of the 0.45 ones.
    tables = [Block(name=f"t{j}", bytes=b, lookup_bytes=1e6) for j, b in enumerate([6e8] * 3 + [4.5e8] * 3)]
    inst = make(4, 2, [L("l", 1e-3, 1e6, 1e6, [1, 2, 4])], tables, memory=1e9)
    sol = solve_joint(inst, OPTS)
    assert sol.status == "infeasible" and "memory" in sol.details["infeasible"]
    path = tmp_path / "inf.json"
    path.write_text(json.dumps(files.instance_to_dict(inst)))
    assert main(["solve", str(path), "--method", "exact"]) == 3
    capsys.readouterr()


def test_exact_on_a_fixed_topology_is_the_placement_model():
    inst = files.load_instance(INSTANCES / "paper" / "bert-testbed-12-d4.json")
    data = files.instance_to_dict(inst)
    ring = [[i, (i + 1) % 12, 2] for i in range(12)]
    data["fixed_topology"] = {"links": ring}
    fixed = files.parse_instance(data)
    sol = solve(fixed, method="exact", time_limit_s=30)
    assert sol.details["model"] == "placement"


def test_small_groups_may_use_any_ring_order():
    # Memory puts layers B and C on different 2-cosets, fixing the traffic: a 4-member AllReduce and
    # resharding 0<->1, 2<->3. On the cycle 0-1-3-2 the ring (0, 1, 3, 2) and its reverse carry every
    # byte one hop (bandwidth 0.14 s at 10 Gbps); TotientPerms' rings (0, 1, 2, 3) and (0, 3, 2, 1)
    # cannot go below 0.17 s on any topology (found by a review; the model now has every order of
    # groups of up to 6 members).
    G = 1e8
    layers = [
        Layer(name="A", compute_s=1e-3, param_bytes=G, activation_bytes=0.0, memory_bytes=0.0, configs=(4,)),
        Layer(name="B", compute_s=1e-3, param_bytes=G, activation_bytes=2 * G, memory_bytes=0.6e9, configs=(2,)),
        Layer(name="C", compute_s=1e-3, param_bytes=G, activation_bytes=0.0, memory_bytes=0.6e9, configs=(2,)),
    ]
    w = Workload(layers=tuple(layers), batch_size=64, server_memory_bytes=1.25e9)
    inst = Instance(cluster=Cluster(servers=4, degree=2, link_bandwidth_gbps=10.0, hop_latency_us=1.0), workload=w)
    sol = solve_joint(inst, OPTS)
    check(inst, sol)
    m = evaluate(inst, sol)
    assert m.bandwidth_time_s == pytest.approx(0.14, rel=1e-6) and m.iteration_time_s < 0.17


def test_decoded_walks_lose_their_loops():
    """The hop-indexed flows may revisit a server at a later hop; the routing written down must be
    simple paths (the verifier rejected "path 53 visits a server twice: [10, 11, 1, 7, 1]" on
    vgg16-testbed-12). Cutting a loop keeps the ends and uses only arcs of the walk."""
    from topoopt_ilp.models.flow_decomposition import without_loops as _without_loops

    assert _without_loops([10, 11, 1, 7, 1]) == [10, 11, 1]
    assert _without_loops([0, 1, 2, 1, 3, 0, 4]) == [0, 4]
    assert _without_loops([3, 4]) == [3, 4]
    walk = [5, 2, 6, 2, 7, 6, 1]
    out = _without_loops(walk)
    assert out[0] == walk[0] and out[-1] == walk[-1] and len(set(out)) == len(out)
    arcs = set(zip(walk, walk[1:]))
    assert all(a in arcs for a in zip(out, out[1:]))
