"""The alternating method: never worse than its start, every phase logged, the result verified."""

from __future__ import annotations

import math

import pytest

from conftest import INSTANCES
from topoopt_ilp import files
from topoopt_ilp.cli import main
from topoopt_ilp.core.instance import Cluster, Instance
from topoopt_ilp.core.workload import Layer, Workload
from topoopt_ilp.errors import InputError, UnsupportedError
from topoopt_ilp.evaluation.verify import verify
from topoopt_ilp.methods import solve


def small_workload() -> Instance:
    layers = (
        Layer(name="a", compute_s=2e-3, param_bytes=4e7, activation_bytes=2e6, configs=(1, 2, 3, 6)),
        Layer(name="b", compute_s=3e-3, param_bytes=6e7, activation_bytes=1e6, configs=(1, 2, 3, 6)),
        Layer(name="c", compute_s=1e-3, param_bytes=1e7, activation_bytes=4e6, configs=(1, 3, 6)),
    )
    w = Workload(layers=layers, batch_size=60, server_memory_bytes=1e12)
    return Instance(cluster=Cluster(servers=6, degree=2, link_bandwidth_gbps=100), workload=w)


def test_incumbent_never_worse_and_rounds_logged():
    inst = small_workload()
    seen = []
    sol = solve(inst, method="alternating", rounds=3, round_time_limit_s=20, progress=seen.append)
    log = sol.details["rounds"]
    starts = [e for e in log if e["round"] == 0]
    assert log == seen and log[0]["round"] == 0 and all(e["phase"].startswith("start: ") for e in starts)
    assert {e["phase"] for e in log if e["round"] > 0} <= {"placement", "topology"}
    best = log[0]["iteration_time_s"]
    for entry in log[1:]:
        if entry["status"] in ("error", "skipped"):  # e.g. a placement step on an exact topology that left
            # servers unlinked; a topology step whose traffic relabels one solved before
            assert entry["iteration_time_s"] is None and not entry["accepted"]
            continue
        # accepted exactly when strictly better than everything before it (objective: iteration time)
        assert entry["accepted"] == (entry["iteration_time_s"] < best)
        best = min(best, entry["iteration_time_s"])
    assert sol.objective == pytest.approx(best) == pytest.approx(sol.metrics["iteration_time_s"])
    heuristic = solve(inst, method="heuristic")
    assert sol.objective <= heuristic.objective
    assert sol.method == "alternating" and sol.status == "feasible"
    assert verify(inst, sol).valid, verify(inst, sol).violations


def test_alternating_on_a_testbed_workload_improves_on_the_data_parallel_start(tmp_path, capsys):
    path = INSTANCES / "paper" / "bert-testbed-12-d4.json"
    out = tmp_path / "alt.json"
    assert (
        main(
            [
                "solve",
                str(path),
                "--method",
                "alternating",
                "--rounds",
                "1",
                "--round-time-limit",
                "30",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "round  0" in err and "round  1 placement" in err  # the live progress lines
    inst = files.load_instance(path)
    sol = files.load_solution(out)
    assert sol.objective < solve(inst, method="heuristic").objective
    assert verify(inst, sol).valid
    png = tmp_path / "conv.png"
    assert main(["draw", str(out), "-o", str(png), "--what", "convergence"]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    heur = tmp_path / "heur.json"
    assert main(["solve", str(path), "--out", str(heur), "--quiet"]) == 0
    assert main(["draw", str(heur), "-o", str(png), "--what", "convergence"]) == 2  # no rounds to plot


def test_alternating_needs_a_workload():
    with pytest.raises(InputError, match="needs|optimises a workload"):
        solve(files.load_instance(INSTANCES / "testbed-12.json"), method="alternating")


def test_the_placement_step_takes_the_ring_policy(monkeypatch):
    from topoopt_ilp.models.placement import milp as placement

    seen = []
    real = placement.solve_placement
    monkeypatch.setattr(
        placement, "solve_placement", lambda inst, opts, *a, **k: seen.append(opts.rings) or real(inst, opts, *a, **k)
    )
    sol = solve(small_workload(), method="alternating", rounds=1, round_time_limit_s=20, rings="coset")
    assert seen and set(seen) == {"coset"} and sol.has_solution
    with pytest.raises(InputError, match="unknown ring policy 'longest'"):
        solve(small_workload(), method="alternating", rings="longest")


def test_exact_topology_step_is_verified_and_never_worse(tmp_path, capsys):
    inst = small_workload()
    exact = solve(inst, method="alternating", rounds=2, round_time_limit_s=10, topology_method="exact")
    assert verify(inst, exact).valid, verify(inst, exact).violations
    topo_steps = [e for e in exact.details["rounds"] if e["phase"] == "topology"]
    assert topo_steps and exact.objective <= exact.details["rounds"][0]["iteration_time_s"]
    # For one placement the exact step's bandwidth term is optimal, so it can lose to TopologyFinder
    # by hop latency at most (alpha per hop, paths of at most n-1 hops).
    from topoopt_ilp.core.strategy import stage_strategies, strategy_to_dict
    from topoopt_ilp.methods import exact_topology_for_placement, finalize, heuristic_for_placement

    for st in stage_strategies(inst.workload, inst.n):
        placement = strategy_to_dict(st)
        ex = finalize(inst, exact_topology_for_placement(inst, placement, time_limit_s=30))
        fi = finalize(inst, heuristic_for_placement(inst, placement))
        assert verify(inst, ex).valid
        assert ex.objective <= fi.objective + inst.cluster.hop_latency_s * (inst.n - 1) + 1e-12
    path = tmp_path / "w.json"
    files.save_instance(inst, path)
    assert (
        main(
            [
                "solve",
                str(path),
                "--method",
                "alternating",
                "--topology-method",
                "exact",
                "--rounds",
                "1",
                "--round-time-limit",
                "5",
                "--quiet",
            ]
        )
        == 0
    )
    assert main(["solve", str(path), "--topology-method", "exact"]) == 2
    assert "apply to --method alternating only" in capsys.readouterr().err
    with pytest.raises(InputError, match="unknown topology method"):
        solve(inst, method="alternating", topology_method="magic")


def test_auto_topology_method_is_exact_on_small_clusters_only():
    from topoopt_ilp.files.zoo import generate
    from topoopt_ilp.methods.alternating import AUTO_EXACT_SERVERS

    small = small_workload()
    assert small.n <= AUTO_EXACT_SERVERS
    assert solve(small, method="alternating", rounds=1, round_time_limit_s=5).details["topology_method"] == "exact"
    large = files.parse_instance(generate("resnet50", 16, 4, 100.0))
    sol = solve(large, method="alternating", rounds=1, round_time_limit_s=5)
    assert sol.details["topology_method"] == "finder" and verify(large, sol).valid


def test_a_phase_settled_before_is_reused_not_solved_again(monkeypatch):
    # Count the placement solves: a topology seen before (a trajectory that returns to it, or the
    # second trajectory reaching the first one's) takes the settled result from the first solve.
    import numpy as np

    import topoopt_ilp.models.topology.starts as rr
    from topoopt_ilp.models.placement import milp as placement

    # The trajectories below return to a settled phase with the MILP's pick among equally good
    # topologies; the relaxation's rounding picks another one there, and they do not.
    monkeypatch.setattr(
        rr, "relaxation_rounding", lambda m, values, degree, multi: np.zeros((m.n, m.n), dtype=np.int64)
    )
    calls = []
    real = placement.solve_placement
    monkeypatch.setattr(placement, "solve_placement", lambda *a, **k: calls.append(1) or real(*a, **k))
    inst = small_workload()
    sol = solve(inst, method="alternating", rounds=4, round_time_limit_s=20, topology_method="exact")
    log = sol.details["rounds"]
    solved = [e for e in log if e["phase"] == "placement" and not e.get("reused")]
    reused = [e for e in log if e.get("reused")]
    assert len(calls) == len(solved) and reused
    first = {}
    for e in log:  # a reused phase reports what the settled one did
        if e["phase"] in ("placement", "topology") and not e.get("reused") and e["status"] != "error":
            first.setdefault(e["phase"], set()).add(round(e["iteration_time_s"], 12))
    assert all(round(e["iteration_time_s"], 12) in first[e["phase"]] for e in reused)
    assert "settled" not in sol.details and verify(inst, sol).valid


def _relabelled(placement: dict, n: int, u: int, r: int) -> dict:
    """The placement with server i moved to u*i + r (mod n): each coset start to the image coset's."""
    starts = [(u * s + r) % (n // k) for k, s in zip(placement["layer_degree"], placement["layer_start"])]
    return {**placement, "layer_start": starts, "block_server": [(u * b + r) % n for b in placement["block_server"]]}


def test_relabelling_key_is_equal_exactly_for_relabelled_traffic():
    from topoopt_ilp.core.instance import Demand
    from topoopt_ilp.methods import placement_traffic
    from topoopt_ilp.methods.alternating import relabelling_key

    inst = small_workload()
    n = inst.n
    # the replicas' sample ranges are part of the traffic: a relabelling keeps the traffic's shape only
    # when every data-parallel layer's replicas shift alike (here: k = 1 layers around one k = 6 layer)
    base = {"layer_degree": [1, 6, 1], "layer_start": [2, 0, 4], "block_server": []}
    key = relabelling_key(placement_traffic(inst, base))
    images = [_relabelled(base, n, u, r) for u in (1, 5) for r in range(n)]
    assert all(relabelling_key(placement_traffic(inst, p)) == key for p in images)
    other = {"layer_degree": [1, 6, 1], "layer_start": [2, 0, 3], "block_server": []}  # 2 -> 3 is no such map
    assert relabelling_key(placement_traffic(inst, other)) != key
    # the map really is applied to the traffic: a demand and its image under i -> 5i + 1 agree, a
    # demand with one byte moved does not
    demand = Demand(mp=((0, 1, 3.0), (1, 3, 2.0), (4, 0, 1.0)))
    image = Demand(mp=tuple(((5 * a + 1) % n, (5 * b + 1) % n, v) for a, b, v in demand.mp))
    moved = Demand(mp=((0, 1, 3.0), (1, 3, 2.0), (4, 1, 1.0)))
    keys = [relabelling_key(Instance(cluster=inst.cluster, demand=d)) for d in (demand, image, moved)]
    assert keys[0] == keys[1] != keys[2]


def test_a_trajectory_ends_at_a_relabelled_repeat(monkeypatch):
    # The exact topology step is solved once per traffic up to relabelling: a topology step whose
    # traffic is the image of one solved to optimality ends its trajectory unsolved, and is logged.
    import sys

    solve_module = sys.modules["topoopt_ilp.methods"]
    seen = []
    real = solve_module.exact_topology_for_placement
    monkeypatch.setattr(
        solve_module,
        "exact_topology_for_placement",
        lambda inst, placement, **k: seen.append(placement) or real(inst, placement, **k),
    )
    from topoopt_ilp.methods import placement_traffic
    from topoopt_ilp.methods.alternating import relabelling_key

    inst = files.load_instance(INSTANCES / "dlrm-mini-6.json")  # its second trajectory reaches an image of the first's
    sol = solve(inst, method="alternating", topology_method="exact", round_time_limit_s=10)
    keys = [relabelling_key(placement_traffic(inst, p)) for p in seen]
    assert len(keys) == len(set(keys))  # no traffic solved twice, relabelled or not
    log = sol.details["rounds"]
    assert any(e.get("repeats_earlier") for e in log)
    for i, e in enumerate(log):
        if e.get("repeats_earlier"):
            assert e["phase"] == "topology" and e["status"] == "skipped" and not e["accepted"]
            later = log[i + 1 :]
            assert all(x.get("trajectory") != e["trajectory"] for x in later)  # that trajectory ended there
    assert verify(inst, sol).valid


@pytest.mark.parametrize("topology_method", ["finder", "exact"])
def test_circulant_family_gives_a_jump_set(topology_method):
    """An instance that asks for a circulant family gets one in every phase (a user found the
    placement phase dropping the jump set and TopologyFinder's general graphs failing verification)."""
    from dataclasses import replace

    inst = replace(small_workload(), topology_family="circulant")
    sol = solve(inst, method="alternating", rounds=2, round_time_limit_s=20, topology_method=topology_method)
    assert sol.topology.jumps is not None and verify(inst, sol).valid
    assert sol.details["topology_method"] == topology_method
    start = solve(inst, method="heuristic")
    assert sol.objective <= start.objective * (1 + 1e-9)


@pytest.mark.parametrize("method", ["heuristic", "alternating"])
def test_coprime_circulant_odd_degree_not_regular(method):
    """Odd degree, no coprime n/2 jump, regular false: the circulant family leaves one port free
    (the joint model's refusal suggests alternating, which used to refuse it too)."""
    from dataclasses import replace

    base = small_workload()
    inst = replace(base, cluster=replace(base.cluster, degree=3, regular=False), topology_family="coprime_circulant")
    assert inst.n % 2 == 0
    options = {"rounds": 2, "round_time_limit_s": 20} if method == "alternating" else {}
    sol = solve(inst, method=method, **options)
    assert sol.topology.jumps is not None and all(math.gcd(j, inst.n) == 1 for j in sol.topology.jumps)
    assert (sol.topology.matrix.sum(axis=1) == 2).all() and verify(inst, sol).valid
    with pytest.raises(UnsupportedError, match="use --method alternating"):
        solve(inst, method="exact")


def test_a_split_design_is_joined_for_the_placement_step_giving_up_idle_links():
    # An optimal topology step may split idle servers off (here 4-5); the placement step needs every
    # pair reachable: the components are joined by degree-preserving swaps of the least-loaded links.
    import numpy as np

    from topoopt_ilp.core.graph import is_connected
    from topoopt_ilp.core.instance import Demand
    from topoopt_ilp.core.solution import Solution, Topology
    from topoopt_ilp.methods.alternating import _joined_topology

    inst = Instance(cluster=Cluster(servers=6, degree=2, link_bandwidth_gbps=100), demand=Demand(mp=((0, 1, 1e6),)))
    x = np.zeros((6, 6), dtype=np.int64)
    for a, b in ((0, 1), (1, 2), (2, 3), (3, 0), (4, 5), (4, 5)):
        x[a, b] += 1
        x[b, a] += 1
    joined = _joined_topology(inst, Solution(status="feasible", method="exact", topology=Topology(x)))
    assert is_connected(joined) and (joined.sum(axis=1) == 2).all() and (joined == joined.T).all()
    assert joined[0, 1] == 1  # the one loaded link is kept
    assert joined[4, 5] == 1 and (joined[:4, :4].sum() == 6)  # one idle link given up on each side


def test_the_placement_step_gets_a_connected_topology():
    # small_workload's stage start puts each layer on one server: its exact topology step splits the
    # servers, and the placement steps used to fail on it ("the topology is disconnected")
    sol = solve(small_workload(), method="alternating", rounds=4, round_time_limit_s=20, topology_method="exact")
    placements = [e for e in sol.details["rounds"] if e["phase"] == "placement"]
    assert placements and all(e["status"] != "error" for e in placements)
