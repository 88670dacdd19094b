"""The edge-swap search (models/topology/edge_swap.py), checked with networkx, which shares no code
with it: degrees and simplicity kept, connectivity, its scores, the Moore bounds' closed forms, known
optima (Petersen, Moore-bound-meeting sizes), determinism for a seed, and its use by --method exact."""

import math

import networkx as nx
import numpy as np
import pytest

from conftest import minimal
from topoopt_ilp import files
from topoopt_ilp.evaluation.verify import verify
from topoopt_ilp.methods import solve
from topoopt_ilp.models.topology import edge_swap as es


def nx_scores(X: np.ndarray) -> tuple[float, float]:
    """(diameter, distance total over ordered pairs) by networkx; (inf, inf) when disconnected."""
    g = nx.from_numpy_array((np.asarray(X) > 0).astype(int))
    if not nx.is_connected(g):
        return math.inf, math.inf
    lengths = dict(nx.all_pairs_shortest_path_length(g))
    return float(nx.diameter(g)), float(sum(sum(row.values()) for row in lengths.values()))


def random_graph(n: int, d: int, seed: int) -> np.ndarray:
    return nx.to_numpy_array(nx.random_regular_graph(d, n, seed=seed), nodelist=range(n), dtype=np.int64)


@pytest.mark.parametrize("n,d,seed", [(12, 3, 0), (20, 4, 1), (33, 4, 2), (70, 3, 3), (130, 5, 4)])
def test_hop_score_matches_networkx(n, d, seed):
    X = random_graph(n, d, seed)
    assert es.hop_totals(X) == nx_scores(X)


def test_hop_score_of_a_disconnected_graph_is_infinite():
    X = np.zeros((8, 8), dtype=np.int64)
    for a, b in [(0, 1), (1, 2), (2, 3), (3, 0), (4, 5), (5, 6), (6, 7), (7, 4)]:
        X[a, b] = X[b, a] = 1
    assert es.hop_totals(X) == (math.inf, math.inf)


@pytest.mark.parametrize(
    "n,d,diameter,aspl",
    [
        (10, 3, 2, 5 / 3),  # Petersen: 3 neighbours, 6 at two hops
        (50, 7, 2, (7 + 2 * 42) / 49),  # Hoffman-Singleton
        (5, 4, 1, 1.0),  # K5
        (22, 3, 3, (3 + 2 * 6 + 3 * 12) / 21),  # the layers 3, 6, 12 exactly
        (16, 4, 2, (4 + 2 * 11) / 15),
    ],
)
def test_moore_bounds_closed_forms(n, d, diameter, aspl):
    lb_diameter, lb_aspl = es.hop_bounds(n, d)
    assert lb_diameter == diameter
    assert lb_aspl == pytest.approx(aspl, rel=1e-12)


@pytest.mark.parametrize("objective", ["diameter", "aspl"])
@pytest.mark.parametrize("n,d,seed", [(16, 3, 0), (24, 4, 1), (31, 4, 2), (40, 5, 3)])
def test_search_keeps_degrees_simple_connected_and_never_worsens_its_start(n, d, seed, objective):
    start = random_graph(n, d, seed + 100)
    res = es.edge_swap_search(
        n, d, [("given", start)], objective=objective, time_limit_s=None, seed=seed, max_swaps=400
    )
    X = res.matrix
    g = nx.from_numpy_array(X)
    assert set(np.unique(X)) <= {0, 1} and not np.diag(X).any() and (X == X.T).all()
    assert sorted(dict(g.degree()).values()) == [d] * n  # every degree kept
    assert nx.is_connected(g)
    diameter, total = nx_scores(X)
    assert (res.diameter, res.distance_total) == (diameter, total)
    # the best start (the given one or the seed's random regular graph), scored independently
    starts = [nx_scores(start), nx_scores(random_graph(n, d, seed))]
    key = (lambda s: s) if objective == "diameter" else (lambda s: (s[1], s[0]))
    assert key((diameter, total)) <= min(key(s) for s in starts)
    assert (res.start_diameter, res.start_distance_total) in starts


def test_search_keeps_a_server_with_a_free_port_and_links_stay_simple():
    # n d odd: one server keeps a free port; the search must neither fill it nor break another degree
    n, d = 11, 3
    ring = np.zeros((n, n), dtype=np.int64)
    ring[np.arange(n), (np.arange(n) + 1) % n] = 1
    start = es.simple_start(ring + ring.T, d)
    degrees = start.sum(axis=1)
    res = es.edge_swap_search(n, d, [("ring", start)], time_limit_s=None, seed=3, max_swaps=300)
    assert (res.matrix.sum(axis=1) == degrees).all()
    assert degrees.sum() == n * d - 1
    assert nx.is_connected(nx.from_numpy_array(res.matrix))


def test_search_is_deterministic_for_a_seed():
    n, d = 30, 4
    starts = es.circulant_starts(n, d)
    a = es.edge_swap_search(n, d, starts, time_limit_s=None, seed=7, max_swaps=600)
    b = es.edge_swap_search(n, d, starts, time_limit_s=None, seed=7, max_swaps=600)
    c = es.edge_swap_search(n, d, starts, time_limit_s=None, seed=8, max_swaps=600)
    assert (a.matrix == b.matrix).all() and a.swaps_accepted == b.swaps_accepted
    assert c.swaps_accepted != a.swaps_accepted or not (c.matrix == a.matrix).all()


@pytest.mark.parametrize("n,d", [(10, 3), (20, 3), (30, 4)])  # Petersen, then optima on the Moore ASPL floor
def test_search_reaches_the_moore_bound_quickly(n, d):
    lb_diameter, lb_aspl = es.hop_bounds(n, d)
    target = (lb_diameter, round(lb_aspl * n * (n - 1)))
    res = es.edge_swap_search(n, d, es.circulant_starts(n, d), time_limit_s=20, seed=0, target=target)
    diameter, total = nx_scores(res.matrix)
    assert diameter == lb_diameter
    assert total / (n * (n - 1)) == pytest.approx(lb_aspl, rel=1e-12)
    assert res.wall_time_s < 20  # stopped at the target


@pytest.mark.parametrize("n,d", [(20, 5), (25, 6)])  # the exact method alone: diameter 3 in 30 s (issue 38)
def test_search_reaches_diameter_two(n, d):
    res = es.edge_swap_search(n, d, es.circulant_starts(n, d), time_limit_s=20, seed=0, target=(2, math.inf))
    assert nx_scores(res.matrix)[0] == 2 == es.hop_bounds(n, d)[0]


def test_petersen_found_is_the_petersen_graph():
    res = es.edge_swap_search(10, 3, es.circulant_starts(10, 3), time_limit_s=10, seed=1, target=(2, 150))
    assert nx.is_isomorphic(nx.from_numpy_array(res.matrix), nx.petersen_graph())


def test_circulant_starts_are_circulants_of_the_degree():
    for n, d in [(16, 4), (20, 3), (64, 4), (300, 6)]:
        for name, X in es.circulant_starts(n, d):
            assert (X.sum(axis=1) == d).all() and (X == X.T).all()
            assert (np.roll(np.roll(X, 1, axis=0), 1, axis=1) == X).all()  # invariant under rotation
            assert name.startswith("circulant")
    assert es.circulant_starts(21, 3) == []  # odd degree needs the jump n/2


def instance(n, d, objective, regular=True):
    cluster = {"servers": n, "degree": d, "link_bandwidth_gbps": 100, "multi_links": False, "regular": regular}
    return files.parse_instance(minimal(cluster=cluster, objective=objective))


def test_exact_above_the_milp_limit_is_the_search_with_the_moore_bound_and_gap():
    inst = instance(40, 3, "diameter")
    sol = solve(inst, method="exact", time_limit_s=3)
    assert sol.details["algorithm"] == "edge_swap"
    assert sol.status in ("feasible", "optimal")
    assert sol.bound == 4.0  # Moore: 1 + 3 + 6 + 12 = 22 < 40 <= 46
    assert sol.objective >= sol.bound
    assert sol.gap == pytest.approx((sol.objective - sol.bound) / sol.objective)
    assert verify(inst, sol).valid
    X = sol.topology.matrix
    assert (X.sum(axis=1) == 3).all() and nx_scores(X)[0] == sol.objective


def test_exact_above_the_milp_limit_aspl_and_limit_zero():
    inst = instance(36, 4, "aspl")
    sol = solve(inst, method="exact", time_limit_s=2)
    n = 36
    assert sol.bound == pytest.approx(es.hop_bounds(36, 4)[1])
    assert sol.objective == pytest.approx(nx_scores(sol.topology.matrix)[1] / (n * (n - 1)), rel=1e-12)
    assert verify(inst, sol).valid
    assert solve(inst, method="exact", time_limit_s=0).status == "no_solution"


def test_exact_below_the_limit_starts_from_the_search():
    inst = instance(20, 3, "diameter")  # the MILP alone returned diameter 5 in 30 s (issue 38)
    sol = solve(inst, method="exact", time_limit_s=20)
    assert sol.status == "optimal" and sol.objective == 3.0
    assert sol.details["edge_swap_start"]["diameter"] == 3
    assert verify(inst, sol).valid


def test_search_does_not_serve_other_objectives_or_directed_links():
    assert es.edge_swap_applies(instance(40, 3, "throughput")) is None
    assert es.edge_swap_applies(instance(40, 3, "aspl")) is None
    directed = {"servers": 40, "degree": 3, "link_bandwidth_gbps": 100, "links": "directed"}
    assert es.edge_swap_applies(files.parse_instance(minimal(cluster=directed, objective="throughput"))) is not None
    assert es.edge_swap_applies(instance(41, 3, "aspl", regular=False)) is None  # one server keeps a free port


def test_evaluator_score_search_never_worsens_the_evaluators_throughput_and_keeps_degrees():
    from topoopt_ilp.evaluation.evaluate import evaluate

    n, d = 16, 3
    inst = files.parse_instance(
        minimal(cluster={"servers": n, "degree": d, "link_bandwidth_gbps": 100}, objective="throughput")
    )
    starts = es.circulant_starts(n, d)
    res = es.edge_swap_search(n, d, starts, time_limit_s=None, seed=0, max_swaps=300, score=es.evaluator_score(inst))
    before = max(evaluate(inst, X).throughput for _, X in starts + [("random", random_graph(n, d, 0))])
    after = evaluate(inst, res.matrix).throughput
    assert after >= before * (1 - 1e-12)
    assert -res.score == pytest.approx(after, rel=1e-12)
    assert (res.matrix.sum(axis=1) == d).all() and nx.is_connected(nx.from_numpy_array(res.matrix))


def test_exact_aspl_below_the_limit_proves_the_searchs_start_optimal():
    # (16, 3): the search meets the Moore ASPL floor 2.2; the start proof's LPs then close the solve
    inst = instance(16, 3, "aspl")
    sol = solve(inst, method="exact", time_limit_s=20)
    assert sol.status == "optimal" and sol.objective == pytest.approx(2.2, rel=1e-12)
    assert sol.details["edge_swap_start"]["distance_total"] == round(2.2 * 16 * 15)
    assert nx_scores(sol.topology.matrix)[1] == round(2.2 * 16 * 15)
    assert verify(inst, sol).valid


# ------------------------------------------------------------------------------------------------
# The evaluator's objectives (throughput, comm_time, iteration_time)
# ------------------------------------------------------------------------------------------------
def demand_instance(n, d, objective, seed=0, latency_us=1.0):
    """A random model-parallel demand (a fifth of the pairs, 1-8 MB) and an AllReduce over the even
    servers: not uniform, so no catalogue answers it."""
    rng = np.random.default_rng(seed)
    pairs = [[int(s), int(t), float(rng.integers(1, 9)) * 1e6] for s in range(n) for t in range(n) if s != t]
    mp = [p for p in pairs if rng.random() < 0.2]
    demand = {"allreduce": [{"members": list(range(0, n, 2)), "bytes": 2e7}], "mp": {"pairs": mp}}
    cluster = {"servers": n, "degree": d, "link_bandwidth_gbps": 100, "hop_latency_us": latency_us}
    return files.parse_instance(minimal(cluster=cluster, objective=objective, demand=demand))


def evaluator_objective(inst, X):
    from topoopt_ilp.evaluation.evaluate import evaluate, objective_value

    return objective_value(inst, evaluate(inst, X))


def test_moore_traffic_bound_is_met_by_the_petersen_graph():
    # Uniform all-to-all on Petersen (arc-transitive, every source's 3 + 6 servers on the Moore layers):
    # shortest paths load every arc alike, so the throughput is the bound B n d / (bytes x 10 x 15).
    inst = instance(10, 3, "throughput")
    bound = es.moore_traffic_bound(inst)
    assert bound == pytest.approx(inst.cluster.link_bytes_per_s * 30 / (1e6 * 10 * 15), rel=1e-12)
    petersen = nx.to_numpy_array(nx.petersen_graph(), dtype=np.int64)
    assert evaluator_objective(inst, petersen) == pytest.approx(bound, rel=1e-12)


@pytest.mark.parametrize("objective", ["throughput", "comm_time", "iteration_time"])
def test_score_floor_and_bound_never_pass_the_evaluator(objective):
    inst = demand_instance(24, 3, objective, seed=1)
    floor = es.score_floor(inst)
    score = es.evaluator_score(inst)
    bound = es.moore_traffic_bound(inst)
    for seed in range(6):
        X = random_graph(24, 3, seed)
        value = evaluator_objective(inst, X)
        assert floor(X, es._neighbour_array(X, 3)) <= score(X) + 1e-12 * abs(score(X))
        assert value <= bound * (1 + 1e-12) if objective == "throughput" else value >= bound * (1 - 1e-12)


@pytest.mark.parametrize("objective", ["throughput", "comm_time", "iteration_time"])
def test_exact_above_the_milp_limit_scores_by_the_evaluator_and_beats_the_heuristic(objective):
    import time

    inst = demand_instance(36, 4, objective, seed=2)
    limit = 3.0
    started = time.perf_counter()
    sol = solve(inst, method="exact", time_limit_s=limit)
    assert time.perf_counter() - started <= limit + 1.0  # the heuristic start, the search, one verification
    assert sol.details["algorithm"] == "edge_swap" and sol.status == "feasible"
    X = sol.topology.matrix
    assert sol.objective == pytest.approx(evaluator_objective(inst, X), rel=1e-12)  # the evaluator's score
    heuristic = solve(inst, method="heuristic")
    better = (lambda a, b: a >= b * (1 - 1e-12)) if objective == "throughput" else (lambda a, b: a <= b * (1 + 1e-12))
    assert better(sol.objective, heuristic.objective)
    assert better(sol.bound, sol.objective)  # the Moore traffic bound is on the other side
    assert sol.bound == pytest.approx(es.moore_traffic_bound(inst), rel=1e-12)
    assert sol.gap == pytest.approx(abs(sol.objective - sol.bound) / sol.objective, rel=1e-9)
    assert verify(inst, sol).valid
    assert (X.sum(axis=1) == 4).all() and nx.is_connected(nx.from_numpy_array(X))
    assert sol.details["edge_swap"]["search_s"] <= limit


def test_exact_throughput_below_the_milp_limit_starts_from_the_search():
    inst = demand_instance(16, 3, "throughput", seed=3)
    sol = solve(inst, method="exact", time_limit_s=8)
    start = sol.details["edge_swap_start"]
    assert start["search_s"] <= 2.0 + 0.5  # a quarter of the limit
    heuristic = solve(inst, method="heuristic")
    assert sol.objective >= heuristic.objective * (1 - 1e-12)
    assert -start["score"] >= heuristic.objective * (1 - 1e-12)
    assert verify(inst, sol).valid


def test_evaluator_search_keeps_a_better_start_with_parallel_links():
    # A ring with every link doubled carries a ring AllReduce at twice a simple graph's rate: the
    # swaps cannot keep parallel links, so the start itself is returned
    n, d = 8, 4
    cluster = {"servers": n, "degree": d, "link_bandwidth_gbps": 100, "multi_links": True}
    demand = {"allreduce": [{"members": "all", "bytes": 1e8}]}
    inst = files.parse_instance(minimal(cluster=cluster, objective="throughput", demand=demand))
    ring = np.zeros((n, n), dtype=np.int64)
    v = np.arange(n)
    ring[v, (v + 1) % n] = ring[(v + 1) % n, v] = 2
    res = es._search(inst, ring, 1.0, 0)
    assert (res.matrix == ring).all()
    assert -res.score == pytest.approx(evaluator_objective(inst, ring), rel=1e-12)


def test_floor_refusals_change_no_decision():
    inst = demand_instance(20, 3, "comm_time", seed=4)
    starts = es.circulant_starts(20, 3)
    kwargs = dict(time_limit_s=None, seed=5, max_swaps=150, score=es.evaluator_score(inst))
    plain = es.edge_swap_search(20, 3, starts, **kwargs)
    floored = es.edge_swap_search(20, 3, starts, score_floor=es.score_floor(inst), **kwargs)
    assert (plain.matrix == floored.matrix).all() and plain.score == floored.score
    assert floored.scored + floored.refused_by_floor == plain.scored


def test_simple_start_of_a_design_with_parallel_links_is_regular():
    # the link (0, 1) doubled: merged, servers 0 and 1 keep a free port each but are linked already;
    # a link gives way so that every degree is 3 again
    n, d = 6, 3
    X = np.zeros((n, n), dtype=np.int64)
    for a, b, k in [(0, 1, 2), (0, 2, 1), (1, 3, 1), (2, 4, 1), (2, 5, 1), (3, 4, 1), (3, 5, 1), (4, 5, 1)]:
        X[a, b] = X[b, a] = k
    assert (X.sum(axis=1) == d).all()
    A = es.simple_start(X, d)
    assert (A.sum(axis=1) == d).all() and set(np.unique(A)) <= {0, 1} and (A == A.T).all() and not np.diag(A).any()
    assert nx.is_connected(nx.from_numpy_array(A))


# ------------------------------------------------------------------------------------------------
# Many seeds
# ------------------------------------------------------------------------------------------------
def check_seeds(inst, sol, seeds, limit):
    """The design is the best of the seeds' searches, each in its share of the limit, and verifies."""
    report = sol.details["edge_swap"]
    assert [s["seed"] for s in report["seeds"]] == seeds
    best = min(report["seeds"], key=lambda s: (s["key"], s["seed"]))
    assert report["seed"] == best["seed"]
    assert all(s["search_s"] <= report["seed_time_s"] + 0.5 for s in report["seeds"])
    assert report["seed_time_s"] <= limit / math.ceil(len(seeds) / report["seed_workers"])
    assert verify(inst, sol).valid


def test_seeds_run_here_one_after_another_and_share_the_limit():
    from topoopt_ilp.models.common import ExactOptions

    inst = instance(36, 4, "aspl")
    res, seeds = es.best_of_seeds(inst, None, 1.5, ExactOptions(seed=3, swap_seeds=3))
    assert [s["seed"] for s in seeds["seeds"]] == [3, 4, 5] and seeds["seed_workers"] == 1
    assert seeds["seed_time_s"] == pytest.approx(0.5)
    assert list(es._result_key(inst, res)) == min(s["key"] for s in seeds["seeds"])
    assert res.seed in (3, 4, 5) and nx_scores(res.matrix)[1] == res.distance_total
    one, none = es.best_of_seeds(inst, None, 0.3, ExactOptions(seed=3))
    assert none == {} and one.seed == 3
    from topoopt_ilp.errors import InputError

    for bad in ({"swap_seeds": 0}, {"swap_workers": True}, {"swap_executor": "local"}):
        with pytest.raises(InputError):
            ExactOptions(**bad)


def test_seeds_on_a_process_pool():
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    inst = demand_instance(36, 4, "throughput", seed=6)
    with ProcessPoolExecutor(2, mp_context=get_context("spawn")) as pool:
        sol = solve(inst, method="exact", time_limit_s=6, seed=1, swap_seeds=2, swap_executor=pool, swap_workers=2)
    check_seeds(inst, sol, [1, 2], 6)
    assert sol.objective == pytest.approx(evaluator_objective(inst, sol.topology.matrix), rel=1e-12)


def test_seeds_on_a_local_dask_cluster():
    distributed = pytest.importorskip("distributed")
    inst = instance(40, 3, "diameter")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        with distributed.Client(cluster) as client:
            sol = solve(
                inst, method="exact", time_limit_s=3, swap_seeds=3, swap_executor=client.get_executor(), swap_workers=2
            )
    check_seeds(inst, sol, [0, 1, 2], 3)


def test_seeds_from_the_command_line(tmp_path, capsys):
    import importlib.util
    import json

    from topoopt_ilp.cli import main

    path = tmp_path / "i.json"
    cluster = {"servers": 36, "degree": 4, "link_bandwidth_gbps": 100}
    path.write_text(json.dumps(minimal(cluster=cluster, objective="aspl")))
    code = main(["solve", str(path), "--method", "exact", "--time-limit", "2", "--seeds", "2", "--seed", "5", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [s["seed"] for s in out["details"]["edge_swap"]["seeds"]] == [5, 6]
    assert main(["solve", str(path), "--method", "heuristic", "--seeds", "2"]) == 2
    assert "--seeds applies to --method exact" in capsys.readouterr().err
    if importlib.util.find_spec("distributed") is not None:  # a local Dask cluster of two workers
        args = ["--time-limit", "3", "--seeds", "2", "--jobs", "2", "--dask", "local", "--json"]
        assert main(["solve", str(path), "--method", "exact", *args]) == 0
        report = json.loads(capsys.readouterr().out)["details"]["edge_swap"]
        assert [s["seed"] for s in report["seeds"]] == [0, 1] and report["seed_workers"] == 2
        assert report["seed_time_s"] <= 3
    with pytest.raises(SystemExit) as exc:
        main(["solve", str(path), "--method", "exact", "--seeds", "0"])
    assert exc.value.code == 2


def test_exact_on_a_job_instance_is_never_worse_than_topoopts_design_with_its_rings():
    # The heuristic's design comes with its own rings and routes, which the bare topologies of the
    # search do not have: where they score better, the design itself is returned, under the bound
    # (the job's fixed terms plus the Moore traffic bound of its communication)
    from conftest import ROOT
    from topoopt_ilp import load_instance

    inst = load_instance(ROOT / "instances" / "llm" / "llama3-70b-128-d4-400g.json")
    assert inst.objective == "iteration_time" and inst.compiled_job is not None
    heuristic = solve(inst, method="heuristic")
    sol = solve(inst, method="exact", time_limit_s=2)
    assert sol.details["algorithm"] == "edge_swap"
    assert sol.objective <= heuristic.objective * (1 + 1e-12)
    assert sol.bound <= sol.objective * (1 + 1e-12)
    assert sol.bound >= inst.compiled_job.fixed_time_s
    # its rings put every byte on a direct link, all links alike: the heuristic meets the bound
    assert heuristic.objective == pytest.approx(sol.bound, rel=1e-9)
    assert sol.status == "optimal" and sol.objective == pytest.approx(sol.bound, rel=1e-9)
    assert verify(inst, sol).valid


@pytest.mark.parametrize("objective", ["throughput", "comm_time"])
def test_moore_traffic_bound_holds_over_the_milps_proven_optimum(objective):
    # the MILP optimises links, rings and routes: its proven optimum is a design the bound must cover
    inst = demand_instance(8, 3, objective, seed=7)
    sol = solve(inst, method="exact", time_limit_s=30)
    assert sol.status == "optimal"
    bound = es.moore_traffic_bound(inst)
    if objective == "throughput":
        assert sol.objective <= bound * (1 + 1e-9)
    else:
        assert sol.objective >= bound * (1 - 1e-9)


def test_no_search_start_for_small_demand_milps_or_without_warm_start():
    from topoopt_ilp.models.common import ExactOptions

    small = demand_instance(12, 3, "throughput", seed=8)
    assert es.swap_start(small, ExactOptions(time_limit_s=4), None) == (None, None)
    no_start = demand_instance(16, 3, "throughput", seed=8)
    assert es.swap_start(no_start, ExactOptions(time_limit_s=4, warm_start="none"), None) == (None, None)
    X, report = es.swap_start(no_start, ExactOptions(time_limit_s=0.4), None)
    assert report is not None and (X.sum(axis=1) == 3).all()
