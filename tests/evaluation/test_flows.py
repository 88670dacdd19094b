"""Tests of topoopt_ilp.evaluation.flows: ECMP loads vs brute force, path loads, and the maximum concurrent
flow LP vs closed forms, bounds and an independently written per-pair LP."""

from __future__ import annotations

from collections import defaultdict

import networkx as nx
import numpy as np
import pytest
import scipy.optimize
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from topoopt_ilp.core.graph import circulant, hop_distances, links_to_matrix
from topoopt_ilp.core.routes import PathSet
from topoopt_ilp.evaluation import flows as flows_module
from topoopt_ilp.evaluation.flows import max_concurrent_flow, path_loads, shortest_path_loads


def _random_topology(rng: np.random.Generator, n: int, p: float, directed: bool) -> np.ndarray:
    X = (rng.random((n, n)) < p).astype(np.int64) * rng.integers(1, 3, size=(n, n))
    np.fill_diagonal(X, 0)
    if not directed:
        X = np.triu(X, 1)
        X = X + X.T
    return X


def _a2a(n: int) -> np.ndarray:
    return np.ones((n, n)) - np.eye(n)


def _nx_matrix(G: nx.Graph) -> np.ndarray:
    return nx.to_numpy_array(G, nodelist=sorted(G.nodes()), dtype=np.int64)


def _bruteforce_ecmp(X: np.ndarray, D: np.ndarray) -> tuple[np.ndarray, int]:
    """Enumerate every shortest node path of every pair with networkx."""
    G = nx.from_numpy_array((X > 0).astype(int), create_using=nx.DiGraph)
    n = X.shape[0]
    load = np.zeros((n, n))
    max_hops = 0
    for s in range(n):
        for t in range(n):
            if s != t and D[s, t] > 0:
                paths = list(nx.all_shortest_paths(G, s, t))
                for p in paths:
                    max_hops = max(max_hops, len(p) - 1)
                    for a, b in zip(p, p[1:]):
                        load[a, b] += D[s, t] / len(paths)
    return load, max_hops


def _pair_lp(X: np.ndarray, D: np.ndarray, cap: float = 1.0) -> float:
    """Maximum concurrent flow with one commodity per PAIR, written with plain loops: an
    independent formulation to cross-check the source-aggregated LP."""
    n = X.shape[0]
    arcs = [(a, b) for a in range(n) for b in range(n) if X[a, b] > 0]
    pairs = [(s, t) for s in range(n) for t in range(n) if s != t and D[s, t] > 0]
    m, P = len(arcs), len(pairs)
    nv = P * m + 1
    rows, cols, vals = [], [], []
    r = 0
    for p, (s, t) in enumerate(pairs):
        for v in range(n):
            for e, (a, b) in enumerate(arcs):
                if b == v:
                    rows.append(r), cols.append(p * m + e), vals.append(1.0)
                if a == v:
                    rows.append(r), cols.append(p * m + e), vals.append(-1.0)
            net = D[s, t] if v == t else (-D[s, t] if v == s else 0.0)  # inflow - outflow = lam * net
            if net:
                rows.append(r), cols.append(nv - 1), vals.append(-net)
            r += 1
    A_eq = sp.csr_matrix((vals, (rows, cols)), shape=(r, nv))
    A_ub = sp.csr_matrix((np.ones(P * m), (np.tile(np.arange(m), P), np.arange(P * m))), shape=(m, nv))
    c = np.zeros(nv)
    c[-1] = -1.0
    b_ub = np.array([cap * X[a, b] for a, b in arcs])
    res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=np.zeros(r), method="highs")
    assert res.status == 0
    return float(res.x[-1])


def _check_mcf_paths(X: np.ndarray, D: np.ndarray, cap: float, res) -> None:
    """Decomposed paths are valid, cover every demanded pair, and reproduce the LP loads."""
    n = X.shape[0]
    share = defaultdict(float)
    for nodes, frac in res.paths.to_lists():
        assert frac > 0
        assert len(set(nodes)) == len(nodes), "paths must be simple"
        assert all(X[a, b] > 0 for a, b in zip(nodes, nodes[1:])), "path uses a missing arc"
        share[(nodes[0], nodes[-1])] += frac
    demanded = {(int(s), int(t)) for s, t in np.argwhere(D > 0) if s != t}
    assert set(share) == demanded
    assert all(abs(v - 1.0) < 1e-9 for v in share.values())
    pl = path_loads(n, res.paths, D) * res.lam
    scale = cap * max(1, X.max())
    assert np.all(pl <= cap * X + 1e-7 * scale)
    assert np.allclose(pl, res.load, atol=1e-7 * scale, rtol=0)
    assert np.all(res.load <= cap * X + 1e-7 * scale)
    assert res.max_hops == int(res.paths.hops.max())


# ---------------------------------------------------------------------------------------------
# shortest_path_loads
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("directed", [False, True])
def test_shortest_path_loads_vs_bruteforce(directed: bool) -> None:
    rng = np.random.default_rng(21 + directed)
    for _ in range(30):
        n = int(rng.integers(2, 12))
        X = _random_topology(rng, n, float(rng.uniform(0.2, 0.6)), directed)
        D = rng.random((n, n)) * (rng.random((n, n)) < 0.7)
        dist, _ = hop_distances(X)
        D[dist < 0] = 0.0  # only connected pairs carry demand here
        load, max_hops = shortest_path_loads(X, D)
        ref, ref_hops = _bruteforce_ecmp(X, D)
        np.testing.assert_allclose(load, ref, rtol=1e-12, atol=1e-12)
        assert max_hops == ref_hops


def test_shortest_path_loads_batching(monkeypatch: pytest.MonkeyPatch) -> None:
    # tiny batches exercise the memory-bounding split of each level's expansion
    import topoopt_ilp.evaluation.flows as flows_mod

    rng = np.random.default_rng(99)
    X = _random_topology(rng, 14, 0.3, directed=False)
    D = rng.random((14, 14))
    dist, _ = hop_distances(X)
    D[dist < 0] = 0.0
    ref, ref_hops = _bruteforce_ecmp(X, D)
    monkeypatch.setattr(flows_mod, "_CHUNK", 7)
    load, hops = shortest_path_loads(X, D)
    np.testing.assert_allclose(load, ref, rtol=1e-12, atol=1e-12)
    assert hops == ref_hops


def test_shortest_path_loads_closed_forms() -> None:
    # even ring, all-to-all: the antipodal pair splits 1/2 each way
    n = 8
    load, hops = shortest_path_loads(circulant(n, [1]), _a2a(n))
    # per arc: sum_{k=1}^{3} k (pairs at distance k use it, k of the n such arcs) + 4 * 1/2
    assert hops == 4
    assert np.allclose(load[circulant(n, [1]) > 0], 1 + 2 + 3 + 4 * 0.5)
    assert load[0, 2] == 0
    # hypercube Q_m all-to-all: every arc carries 2^(m-1)
    m = 4
    Q = _nx_matrix(nx.hypercube_graph(m))
    load, hops = shortest_path_loads(Q, _a2a(2**m))
    assert hops == m and np.allclose(load[Q > 0], 2 ** (m - 1)) and np.all(load[Q == 0] == 0)


def test_shortest_path_loads_conservation_large(monkeypatch) -> None:
    """n = 1024, degree 8 (was also a timed test, ~1.3 s): the work is counted instead. One
    all-sources search, and the accumulation expands each (source, node) entry of levels 1 ..
    max_hops - 1 once through its arcs, in a handful of vectorised batches: at most n * m arcs."""
    n, jumps = 1024, [1, 7, 33, 181]
    X = circulant(n, jumps)
    rng = np.random.default_rng(0)
    D = rng.random((n, n))
    searches, batches, expanded = [], [], []
    real_bfs, real_expand = flows_module.bfs_levels, flows_module.expand_rows

    def counting_bfs(A):
        searches.append(A.shape)
        return real_bfs(A)

    def counting_expand(indptr, rows):
        owner, pos = real_expand(indptr, rows)
        batches.append(rows.size)
        expanded.append(owner.size)
        return owner, pos

    monkeypatch.setattr(flows_module, "bfs_levels", counting_bfs)
    monkeypatch.setattr(flows_module, "expand_rows", counting_expand)
    load, hops = shortest_path_loads(X, D)
    dist, _ = hop_distances(X)
    np.fill_diagonal(D, 0.0)
    # every byte crosses exactly dist(s, t) arcs
    assert load.sum() == pytest.approx((D * dist).sum(), rel=1e-10)
    assert hops == 8 and np.all(load[X == 0] == 0)
    m = int((X > 0).sum())
    inner = int(((dist >= 1) & (dist < hops)).sum())  # entries whose successors are looked at
    assert searches == [(n, n)]
    assert sum(batches) == inner and sum(expanded) == inner * (m // n) <= n * m
    assert len(batches) <= hops - 1 + sum(expanded) // flows_module._CHUNK  # one per level, more only past _CHUNK


def test_shortest_path_loads_errors_and_edge_cases() -> None:
    X = links_to_matrix(4, [(0, 1, 1), (2, 3, 1)])
    D = np.zeros((4, 4))
    D[0, 1] = 5.0
    load, hops = shortest_path_loads(X, D)
    assert load[0, 1] == 5.0 and load.sum() == 5.0 and hops == 1
    D[0, 2] = 1.0
    with pytest.raises(ValueError, match="unreachable"):
        shortest_path_loads(X, D)
    load, hops = shortest_path_loads(X, np.zeros((4, 4)))
    assert hops == 0 and not load.any()
    with pytest.raises(ValueError):
        shortest_path_loads(X, -np.ones((4, 4)))
    with pytest.raises(ValueError):
        shortest_path_loads(X, np.ones((3, 3)))
    # the diagonal of D is ignored
    D = np.eye(4)
    assert not shortest_path_loads(X, D)[0].any()


@settings(max_examples=30, deadline=None)
@given(st.integers(3, 30), st.sets(st.integers(1, 29), min_size=1, max_size=3), st.integers(0, 2**31 - 1))
def test_shortest_path_loads_total_is_demand_times_distance(n: int, jumps: set[int], seed: int) -> None:
    jumps = {j for j in jumps if j % n}
    if not jumps:
        return
    X = circulant(n, jumps)
    dist, _ = hop_distances(X)
    D = np.random.default_rng(seed).random((n, n)) * (dist > 0)
    load, _ = shortest_path_loads(X, D)
    assert load.sum() == pytest.approx((D * dist).sum(), rel=1e-10)
    assert np.all(load[X == 0] == 0)


# ---------------------------------------------------------------------------------------------
# path_loads
# ---------------------------------------------------------------------------------------------


def test_path_loads_by_hand() -> None:
    D = np.zeros((4, 4))
    D[0, 3] = 10.0
    D[1, 2] = 4.0
    paths = PathSet.from_lists([([0, 1, 2, 3], 0.25), ([0, 3], 0.75), ([1, 2], 1.0)])
    load = path_loads(4, paths, D)
    expect = np.zeros((4, 4))
    expect[0, 1] = expect[2, 3] = 2.5
    expect[1, 2] = 2.5 + 4.0
    expect[0, 3] = 7.5
    np.testing.assert_array_equal(load, expect)
    assert not path_loads(4, PathSet.empty(), D).any()


def test_path_loads_validation() -> None:
    D = np.ones((3, 3))
    with pytest.raises(ValueError):
        path_loads(3, PathSet(np.array([[0, -1, 2]]), np.array([1.0])), D)
    with pytest.raises(ValueError):
        path_loads(3, PathSet(np.array([[0, 3]]), np.array([1.0])), D)
    with pytest.raises(ValueError):
        path_loads(3, PathSet(np.array([[0, 0, 1]]), np.array([1.0])), D)


# ---------------------------------------------------------------------------------------------
# max_concurrent_flow: closed forms (unit capacity per arc, all-to-all unit demand)
# ---------------------------------------------------------------------------------------------


CLOSED_FORMS = [
    *[(f"ring{n}", circulant(n, [1]), 2 / (n * n // 4)) for n in (5, 8, 11)],
    *[(f"Q{m}", _nx_matrix(nx.hypercube_graph(m)), 2 / 2**m) for m in (3, 4)],
    *[(f"torus{k}", _nx_matrix(nx.grid_2d_graph(k, k, periodic=True)), 2 / (k * (k * k // 4))) for k in (3, 4)],
    ("petersen", _nx_matrix(nx.petersen_graph()), 1 / 5),
    ("K6", np.ones((6, 6), dtype=np.int64) - np.eye(6, dtype=np.int64), 1.0),
    # directed ring: every pair has a single path, total hops n * n(n-1)/2 over n arcs
    ("dring7", circulant(7, [1], directed=True), 2 / (7 * 6)),
]


@pytest.mark.parametrize("name, X, lam", CLOSED_FORMS, ids=[c[0] for c in CLOSED_FORMS])
def test_mcf_closed_forms(name: str, X: np.ndarray, lam: float) -> None:
    D = _a2a(X.shape[0])
    res = max_concurrent_flow(X, D)
    assert res.lam == pytest.approx(lam, rel=1e-9)
    # these graphs are arc-transitive: the distance bound |arcs| / sum dist is exact
    dist, _ = hop_distances(X)
    assert res.lam == pytest.approx((X > 0).sum() / dist.sum(), rel=1e-9)
    _check_mcf_paths(X, D, 1.0, res)
    # the min-total-flow stage routes on shortest paths only when the bound is tight
    assert res.max_hops == dist.max()


def test_mcf_distance_bound_random_regular() -> None:
    for n, d, seed in [(10, 3, 0), (12, 4, 1), (14, 3, 2), (16, 4, 3)]:
        X = _nx_matrix(nx.random_regular_graph(d, n, seed=seed))
        D = _a2a(n)
        dist, _ = hop_distances(X)
        if np.any(dist < 0):
            continue
        res = max_concurrent_flow(X, D)
        bound = n * d / dist.sum()  # = d / ((n-1) * ASPL)
        assert res.lam <= bound * (1 + 1e-9)
        _check_mcf_paths(X, D, 1.0, res)


def test_mcf_strictly_below_distance_bound() -> None:
    # A 4-regular graph on 8 nodes (found by searching networkx random_regular_graph(4, 8, seed=1)),
    # not arc-transitive: every node sees 4 nodes at distance 1 and 3 at distance 2, so the
    # distance bound is 32 / 80 = 0.4, but the LP optimum is 4/11 (confirmed by the per-pair LP).
    edges = [
        (0, 2),
        (0, 4),
        (0, 5),
        (0, 7),
        (1, 4),
        (1, 5),
        (1, 6),
        (1, 7),
        (2, 3),
        (2, 5),
        (2, 6),
        (3, 4),
        (3, 6),
        (3, 7),
        (4, 7),
        (5, 6),
    ]
    X = links_to_matrix(8, [(a, b, 1) for a, b in edges])
    D = _a2a(8)
    dist, _ = hop_distances(X)
    bound = (X > 0).sum() / dist.sum()
    assert bound == pytest.approx(0.4)
    res = max_concurrent_flow(X, D)
    assert res.lam == pytest.approx(4 / 11, rel=1e-9)
    assert res.lam < bound - 0.03
    assert _pair_lp(X, D) == pytest.approx(res.lam, rel=1e-9)
    _check_mcf_paths(X, D, 1.0, res)


def test_mcf_bridge_cut_bound() -> None:
    # two K4 joined by one link: 16 unit demands cross the bridge each way -> lam = 1/16
    K4 = [(a, b, 1) for a in range(4) for b in range(a + 1, 4)]
    X = links_to_matrix(8, K4 + [(a + 4, b + 4, 1) for a, b, _ in K4] + [(0, 4, 1)])
    res = max_concurrent_flow(X, _a2a(8))
    assert res.lam == pytest.approx(1 / 16, rel=1e-9)
    assert res.load[0, 4] == pytest.approx(1.0) and res.load[4, 0] == pytest.approx(1.0)
    _check_mcf_paths(X, _a2a(8), 1.0, res)


def test_mcf_vs_pair_lp_random() -> None:
    rng = np.random.default_rng(5)
    done = 0
    for trial in range(20):
        n = int(rng.integers(3, 8))
        directed = bool(trial % 2)
        X = _random_topology(rng, n, 0.5, directed)
        D = rng.random((n, n)) * (rng.random((n, n)) < 0.6) * 10
        np.fill_diagonal(D, 0)
        dist, _ = hop_distances(X)
        D[dist < 0] = 0
        if not D.any():
            continue
        cap = float(rng.uniform(0.5, 3.0))
        res = max_concurrent_flow(X, D, cap)
        assert res.lam == pytest.approx(_pair_lp(X, D, cap), rel=1e-8)
        _check_mcf_paths(X, D, cap, res)
        # ECMP is one feasible routing, so it can never beat the optimum
        ecmp, _ = shortest_path_loads(X, D)
        arcs = X > 0
        assert res.lam >= (cap * X[arcs] / ecmp[arcs].clip(1e-300)).min() * (1 - 1e-9)
        done += 1
    assert done >= 10


def test_mcf_scaling() -> None:
    X = _nx_matrix(nx.random_regular_graph(3, 10, seed=3))
    D = _a2a(10)
    base = max_concurrent_flow(X, D, return_flows=False).lam
    assert base == pytest.approx(0.12, rel=1e-9)
    for cap in (0.5, 3.0, 1e9):
        res = max_concurrent_flow(X, D, cap)
        assert res.lam == pytest.approx(cap * base, rel=1e-9)
        _check_mcf_paths(X, D, cap, res)
    assert max_concurrent_flow(X, 1e6 * D).lam == pytest.approx(base / 1e6, rel=1e-9)
    # doubling every link doubles lam
    assert max_concurrent_flow(2 * X, D).lam == pytest.approx(2 * base, rel=1e-9)


def test_mcf_edge_cases() -> None:
    X = circulant(6, [1])
    res = max_concurrent_flow(X, np.zeros((6, 6)))
    assert res.lam == np.inf and len(res.paths) == 0 and res.max_hops == 0 and not res.load.any()
    res = max_concurrent_flow(X, _a2a(6), return_flows=False)
    assert res.lam == pytest.approx(2 / 9) and len(res.paths) == 0 and res.max_hops == -1
    assert np.all(res.load <= X + 1e-9) and res.load.sum() > 0
    # single pair on a ring: both directions of the ring are used, each at full capacity
    D = np.zeros((6, 6))
    D[0, 3] = 1.0
    res = max_concurrent_flow(X, D)
    assert res.lam == pytest.approx(2.0)
    assert sorted(p for p, _ in res.paths.to_lists()) == [[0, 1, 2, 3], [0, 5, 4, 3]]
    assert np.allclose(res.paths.fraction, 0.5)
    Y = links_to_matrix(4, [(0, 1, 1), (2, 3, 1)])
    with pytest.raises(ValueError, match="unreachable"):
        max_concurrent_flow(Y, _a2a(4))
    with pytest.raises(ValueError):
        max_concurrent_flow(X, _a2a(6), cap=0.0)


def test_mcf_size_n16(monkeypatch) -> None:
    """The LP's size instead of its time: source-aggregated, |S| * m + 1
    variables, |S| * (n - 1) equalities and m capacity rows (not a commodity per pair), solved twice
    (max lam, then min total flow), by dual simplex at this size."""
    n = 16
    X = _nx_matrix(nx.random_regular_graph(4, n, seed=1))
    D = _a2a(n)
    calls = []

    def counting_linprog(c, **kw):
        calls.append((c.size, kw["A_eq"].shape, kw["A_ub"].shape, kw["method"]))
        return linprog(c, **kw)

    monkeypatch.setattr(scipy.optimize, "linprog", counting_linprog)  # flows imports it when it solves
    res = max_concurrent_flow(X, D)
    dist, _ = hop_distances(X)
    assert res.lam <= 64 / dist.sum() * (1 + 1e-9)
    _check_mcf_paths(X, D, 1.0, res)
    m = int((X > 0).sum())
    size = (n * m + 1, (n * (n - 1), n * m + 1), (m, n * m + 1), "highs-ds")
    assert calls == [size, size]
