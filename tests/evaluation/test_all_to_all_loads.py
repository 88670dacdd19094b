"""Uniform all-to-all on offset routes, scored without its n^2 pairs, against the dense computation.

The evaluator scores all-to-all traffic ``A`` on offset routes (and no explicit paths) from ``A`` and
the pairs that the rings and MP pairs add to (``core.traffic.all_to_all_pairs``): every offset's
level is ``A`` unless those pairs say otherwise. The former computation reads the dense demand
matrix (``link_loads`` on ``traffic_matrix``); both must give the same loads to the last bit, the
same longest route and the same refusal. The total bytes are summed in another order (``fsum`` of
the listed pairs plus ``A`` times the others, not numpy's pairwise sum over the matrix): equal
within 1e-12 relative."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import minimal
from topoopt_ilp import files
from topoopt_ilp.core.routes import OffsetRoutes, PathSet, Routing
from topoopt_ilp.core.solution import Solution, Topology
from topoopt_ilp.core.traffic import all_to_all_pairs, default_rings, traffic_matrix
from topoopt_ilp.evaluation.evaluate import RoutingError, arc_loads, evaluate, link_loads
from topoopt_ilp.heuristic import coin_change_mod


def random_instance(rng, n):
    """All-to-all bytes, sometimes with AllReduce groups and MP pairs on top."""
    demand = {"all_to_all": float(rng.choice([1e6, 0.1 + rng.random(), 3.7e9]))}
    if rng.random() < 0.5:
        groups = []
        for _ in range(int(rng.integers(1, 4))):
            members = rng.choice(n, int(rng.integers(2, n + 1)), replace=False)
            groups.append({"members": [int(m) for m in members], "bytes": float(rng.random() * 1e9)})
        demand["allreduce"] = groups
    if rng.random() < 0.5:
        m = int(rng.integers(1, 2 * n))
        pairs = [[int(s), int(t), float(rng.random() * 1e8)] for s, t in rng.integers(0, n, (m, 2)) if s != t]
        if pairs:
            demand["mp"] = {"pairs": pairs}
    cluster = {"servers": n, "degree": 2, "link_bandwidth_gbps": 100, "hop_latency_us": 0.0}
    return files.parse_instance(minimal(cluster=cluster, demand=demand))


def random_routes(rng, n):
    """CoinChangeMod over random jumps (the heuristic's routes), or random jump lists splitting each
    offset in one or two routes."""
    if rng.random() < 0.5:
        jumps = [int(j) for j in rng.integers(1, n, int(rng.integers(1, 4)))] + [1]
        return coin_change_mod(n, jumps, max_routes=int(rng.integers(1, 9)))[1]
    routes = []
    for o in range(1, n):
        parts = [1.0] if rng.random() < 0.5 else [0.25, 0.75]
        for f in parts:
            steps = [int(j) for j in rng.integers(1, n, int(rng.integers(0, 4)))]
            last = (o - sum(steps)) % n
            routes.append((o, [*steps, last] if last else [o], f))
    return OffsetRoutes.from_lists(routes)


def outcome(fn):
    try:
        return fn()
    except (RoutingError, ValueError) as exc:
        return type(exc), str(exc)


@pytest.mark.parametrize("seed", range(200))
def test_all_to_all_loads_equal_the_dense_computation(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 65))
    inst = random_instance(rng, n)
    routes = random_routes(rng, n)
    if seed % 5 == 4:  # drop a route: some offset is no longer carried in full
        kept = [r for k, r in enumerate(routes.to_lists()) if k != int(rng.integers(len(routes)))]
        routes = OffsetRoutes.from_lists(kept)
    x = np.ones((n, n), dtype=np.int64) - np.eye(n, dtype=np.int64)
    sol = Solution("feasible", "x", Topology(x), routing=Routing(offset_routes=routes))
    dense = traffic_matrix(inst, default_rings(inst))
    old = outcome(lambda: link_loads(inst, x, dense, sol.routing, "given"))
    new = outcome(lambda: arc_loads(inst, sol))
    if isinstance(old[0], type):
        assert new == old
        assert outcome(lambda: evaluate(inst, sol)) == old
        return
    np.testing.assert_array_equal(new, old[0])
    m = evaluate(inst, sol)
    assert m.max_hops == old[1]
    assert m.bandwidth_time_s == float((old[0][old[0] > 0] / inst.cluster.link_bytes_per_s).max())
    assert m.total_bytes == pytest.approx(float(dense.sum()), rel=1e-12, abs=0)


@pytest.mark.parametrize("seed", range(50))
def test_all_to_all_pairs_are_the_matrix_entries(seed):
    """Every entry of the dense matrix: the listed pairs' bytes to the last bit, ``A`` elsewhere off
    the diagonal, 0 on it."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 40))
    inst = random_instance(rng, n)
    base, pair, amount = all_to_all_pairs(inst, default_rings(inst))
    expected = np.full(n * n, base)
    expected[pair] = amount
    expected[:: n + 1] = 0.0
    np.testing.assert_array_equal(expected.reshape(n, n), traffic_matrix(inst, default_rings(inst)))
    assert (pair // n != pair % n).all() and (np.diff(pair) > 0).all()


def test_the_random_cases_reach_every_branch():
    """Rings and MP pairs on top, refusals, and both kinds of routes occur among the cases above."""
    extra = refused = coin = 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(3, 65))
        inst = random_instance(rng, n)
        extra += bool(inst.demand.allreduce or inst.demand.mp)
        coin += rng.random() < 0.5
        refused += seed % 5 == 4
    assert min(extra, refused, coin) >= 20


def test_explicit_paths_keep_the_dense_computation():
    """All-to-all with explicit paths (the matching design's routes) is scored as before."""
    n = 6
    inst = random_instance(np.random.default_rng(1), n)
    x = np.ones((n, n), dtype=np.int64) - np.eye(n, dtype=np.int64)
    paths = PathSet.from_lists([([s, t], 1.0) for s in range(n) for t in range(n) if s != t])
    sol = Solution("feasible", "x", Topology(x), routing=Routing(paths=paths))
    dense = traffic_matrix(inst, default_rings(inst))
    np.testing.assert_array_equal(arc_loads(inst, sol), link_loads(inst, x, dense, sol.routing, "given")[0])
    assert evaluate(inst, sol).total_bytes == float(dense.sum())


@pytest.mark.parametrize(
    "routes,reason",
    [
        ([[o, 1.0, [1] * o] for o in range(1, 8) if o != 4], "no complete route for pair 0->4: its routes carry 0"),
        (
            [[o, 1.0, [1] * o] if o != 3 else [3, 1.0, [1, 1]] for o in range(1, 8)],
            "offset route 2: jumps [1, 1] do not add up",
        ),
    ],
)
def test_a_routing_that_misses_all_to_all_traffic_is_refused_in_one_line(tmp_path, capsys, routes, reason):
    """Bad input: the file named, the reason, exit 2 (evaluate) and 1 (verify), as with the matrix."""
    import json

    from topoopt_ilp.cli import main

    inst, sol = tmp_path / "i.json", tmp_path / "s.json"
    inst.write_text(json.dumps(minimal()))
    links = [[i, (i + 1) % 8, 1] for i in range(8)]
    topology = {"servers": 8, "directed": False, "links": links, "jumps": [1]}
    doc = {"format": "topoopt-solution", "version": 1, "status": "feasible", "method": "given"}
    sol.write_text(json.dumps({**doc, "topology": topology, "routing": {"offset_routes": routes}}))
    assert main(["evaluate", str(inst), str(sol)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {sol}: cannot be scored: ") and reason in err and err.count("\n") == 1
    assert main(["verify", str(inst), str(sol)]) == 1
    assert f"routing does not carry the demand: {reason}" in capsys.readouterr().out
