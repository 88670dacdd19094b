from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from topoopt_ilp.heuristic import blossom_matching, circulant_matrix, greedy_matching, repeated_matching, route_pairs


def _demand(n, density, seed):
    rng = np.random.default_rng(seed)
    T = rng.random((n, n)) * (rng.random((n, n)) < density)
    np.fill_diagonal(T, 0)
    return T


def test_single_round_is_max_weight_perfect_matching():
    T = np.zeros((6, 6))
    T[0, 1], T[1, 2], T[2, 3], T[3, 4], T[4, 5] = 3, 4, 3, 4, 3
    M = repeated_matching(T, 1, method="blossom")
    assert (M.sum(axis=1) == 1).all() and (M == M.T).all()
    # best matching: 0-1, 2-3, 4-5 (weight 9) beats 1-2, 3-4 (8)
    assert M[0, 1] == M[2, 3] == M[4, 5] == 1


def test_discount_lets_a_dominant_pair_repeat():
    n = 8
    T = np.zeros((n, n))
    T[0, 1] = 100.0
    T[2, 3] = 30.0
    T[4, 5] = 45.0
    M = repeated_matching(T, 3, method="blossom")
    # 0-1 discounted 100 -> 50 -> 33.3: gets a link in each of the three rounds
    assert M[0, 1] == 3
    assert (M.sum(axis=1) == 3).all() and (M == M.T).all() and np.trace(M) == 0


def test_symmetrised_demand_is_used():
    T = np.zeros((4, 4))
    T[0, 1] = 1.0
    T[1, 0] = 1.0
    T[0, 2] = 1.5
    M = repeated_matching(T, 1, method="blossom")
    assert M[0, 1] == 1  # 2.0 (both directions) beats 1.5


@pytest.mark.parametrize("seed", range(3))
def test_greedy_vs_blossom(seed):
    n = 40
    T = _demand(n, 0.2, seed)
    W = T + T.T
    i, j = np.nonzero(np.triu(W, 1))
    w = W[i, j]
    eb = blossom_matching(i, j, w, n)
    eg = greedy_matching(i, j, w, n)
    # greedy is a valid matching with >= 1/2 of the optimum
    used = np.concatenate([i[eg], j[eg]])
    assert np.unique(used).size == used.size
    assert w[eg].sum() >= 0.5 * w[eb].sum()
    assert w[eb].sum() >= w[eg].sum()
    # greedy equals the sequential heaviest-first greedy
    seq, free = 0.0, np.ones(n, bool)
    for e in np.lexsort((np.arange(w.size), -w)):
        if free[i[e]] and free[j[e]]:
            free[i[e]] = free[j[e]] = False
            seq += w[e]
    assert w[eg].sum() == pytest.approx(seq)


def test_sparse_input_and_regularity():
    T = _demand(30, 0.1, 1)
    M1 = repeated_matching(T, 2, seed=3)
    M2 = repeated_matching(sp.csr_matrix(T), 2, seed=3)
    assert np.array_equal(M1, M2)
    assert (M1.sum(axis=1) == 2).all()


def test_directed_rounds_are_permutations():
    T = _demand(10, 0.3, 2)
    M = repeated_matching(T, 2, directed=True)
    assert (M.sum(axis=0) == 2).all() and (M.sum(axis=1) == 2).all() and np.trace(M) == 0


def test_odd_n_gives_near_perfect_rounds():
    """Odd n (a cluster with ``regular: false``): every round matches all nodes but one."""
    M = repeated_matching(np.ones((5, 5)) - np.eye(5), 3, seed=2)
    assert (M == M.T).all() and M.sum() == 2 * 3 * 2 and M.sum(axis=1).max() <= 3


def test_route_pairs_shortest_and_filter():
    X = circulant_matrix(12, [1, 5])
    src = np.array([0, 0, 3, 4])
    dst = np.array([6, 1, 9, 4 + 3])
    dist, P = route_pairs(X, src, dst)
    assert dist.tolist() == [2, 1, 2, 3]
    for path, f in P.to_lists():
        assert f == 1.0
        assert all(X[a, b] > 0 for a, b in zip(path, path[1:]))
    assert [(p[0], p[-1]) for p, _ in P.to_lists()] == [(0, 6), (0, 1), (3, 9), (4, 7)]
    _, P2 = route_pairs(X, src, dst, shorter_than=np.array([2, 9, 9, 3]))
    assert [(p[0], p[-1]) for p, _ in P2.to_lists()] == [(0, 1), (3, 9)]


def test_route_pairs_ecmp_and_ksp():
    X = circulant_matrix(12, [1, 5])
    d, P = route_pairs(X, np.array([0]), np.array([6]), method="ecmp")
    assert d.tolist() == [2] and len(P) == 4 and np.isclose(P.fraction.sum(), 1)
    d, P = route_pairs(X, np.array([0]), np.array([6]), method="ksp", k=5)
    assert len(P) == 5 and P.hops.min() == 2 and np.isclose(P.fraction.sum(), 1)


def test_bfs_public_fallback_matches_kernel(monkeypatch):
    import topoopt_ilp.heuristic.mp_links as ml

    rng = np.random.default_rng(5)
    X = repeated_matching(_demand(24, 0.3, 5), 2) + circulant_matrix(24, [1, 7])
    src, dst = rng.integers(0, 24, 60), rng.integers(0, 24, 60)
    d1, p1 = route_pairs(X, src, dst, chunk=7)
    monkeypatch.setattr(ml, "_BFS_KERNEL", None)
    d2, p2 = route_pairs(X, src, dst, chunk=5)
    assert np.array_equal(d1, d2)
    G = nx.from_numpy_array((X > 0).astype(int))
    assert d1.tolist() == [nx.shortest_path_length(G, int(s), int(t)) for s, t in zip(src, dst)]
    assert np.array_equal(p1.hops, d1) and np.array_equal(p2.hops, d2)
    assert np.array_equal(p1.src, src) and np.array_equal(p1.dst, dst)


# ---- ties between equally heavy matchings: distance tie-break, and the greedy's sequential scan


def _sequential_greedy(i, j, w, n):
    """Reference: heaviest edge first, ties by edge index, skip edges touching a matched node."""
    free = np.ones(n, dtype=bool)
    out = []
    for e in np.lexsort((np.arange(w.size), -w)):
        if w[e] > 0 and free[i[e]] and free[j[e]]:
            free[i[e]] = free[j[e]] = False
            out.append(e)
    return np.sort(np.array(out, dtype=np.int64))


@pytest.mark.parametrize("kind", ["uniform", "few_values", "random"])
def test_greedy_equals_sequential_greedy_with_scan(kind):
    # > _SCAN_MIN_EDGES edges: uniform weights in index order stall the vectorized rounds (one
    # dominant edge each), so the sequential scan finishes; the result must be the plain greedy's
    n = 120
    i, j = np.triu_indices(n, 1)
    rng = np.random.default_rng(3)
    w = {
        "uniform": np.ones(i.size),
        "few_values": rng.integers(0, 3, i.size).astype(float),
        "random": rng.random(i.size),
    }[kind]
    assert np.array_equal(greedy_matching(i, j, w, n), _sequential_greedy(i, j, w, n))


@pytest.mark.parametrize("seed", range(5))
def test_distance_tie_break_keeps_every_strict_weight_order(seed):
    from topoopt_ilp.heuristic import distance_tie_break

    rng = np.random.default_rng(seed)
    n = 40
    w = rng.choice([1.0, 1.0 + 1e-9, 2.5, 1e6, 1e6 / 3], size=300)
    dist = rng.integers(1, n + 1, size=w.size)
    v = distance_tie_break(w, dist, n, rng=np.random.default_rng(seed))
    a, b = np.meshgrid(np.arange(w.size), np.arange(w.size))
    strict = w[a] < w[b]
    assert (v[a][strict] < v[b][strict]).all()  # no strict difference overridden
    tie = (w[a] == w[b]) & (dist[a] < dist[b])
    # delta = 1e-9 here, so eps * dist is below the float spacing of 1e6: those ties may stay
    # unbroken (never reversed)
    assert (v[a][tie] <= v[b][tie]).all()
    # well-conditioned weights: among equal weights the farther pair is strictly heavier, with or
    # without the random part (which only orders equal distances)
    w = rng.choice([1.0, 2.5, 1e6, 1e6 / 3], size=300)
    strict = w[a] < w[b]
    tie = (w[a] == w[b]) & (dist[a] < dist[b])
    for v in (distance_tie_break(w, dist, n, rng=np.random.default_rng(seed)), distance_tie_break(w, dist, n)):
        assert (v[a][strict] < v[b][strict]).all()
        assert (v[a][tie] < v[b][tie]).all()


@pytest.mark.parametrize("seed", range(6))
def test_exact_tie_break_keeps_the_maximum_weight(seed):
    # Blossom on the exact integer weights returns a maximum of the demand weights (matching totals
    # compared exactly) and, among those, one whose distance total is largest
    from fractions import Fraction
    from itertools import combinations

    from topoopt_ilp.heuristic import distance_tie_break

    rng = np.random.default_rng(seed)
    n = 8
    i, j = map(np.asarray, zip(*combinations(range(n), 2)))
    w = rng.choice([1.0, 0.35, 0.7, 0.6, 1 / 3, 2 / 3], size=i.size)
    dist = rng.integers(1, n + 1, size=i.size)
    W = distance_tie_break(w, dist, n, exact=True, rng=np.random.default_rng(seed))
    assert all(isinstance(x, int) for x in W.tolist())
    e = blossom_matching(i, j, W, n, maxcardinality=True)

    def total(edges, vals):
        return sum((Fraction(float(vals[k])) for k in edges), Fraction(0))

    best_w, best_d = Fraction(-1), -1
    G = nx.Graph()
    G.add_edges_from(zip(i.tolist(), j.tolist()))
    eid = {(int(a), int(b)): k for k, (a, b) in enumerate(zip(i, j))}
    for m in _perfect_matchings(list(range(n))):
        ks = [eid[p] for p in m]
        tw, td = total(ks, w), int(dist[ks].sum())
        if (tw, td) > (best_w, best_d):
            best_w, best_d = tw, td
    assert total(e, w) == best_w and int(dist[e].sum()) == best_d


def _perfect_matchings(nodes):
    if not nodes:
        yield []
        return
    a, rest = nodes[0], nodes[1:]
    for k, b in enumerate(rest):
        for m in _perfect_matchings(rest[:k] + rest[k + 1 :]):
            yield [(a, b)] + m


@pytest.mark.parametrize("n", [16, 64, 128])
def test_uniform_demand_rounds_spread_out(n):
    # uniform all-to-all, d = 8: without the tie-break the index order builds near-cliques (above
    # 2000 pairs the greedy's 8 rounds leave components of ~8 servers; Blossom at n = 16 gives
    # K_{8,8}); with it the result is connected with an expander-like diameter
    T = np.ones((n, n))
    np.fill_diagonal(T, 0)
    M = repeated_matching(T, 8)
    assert (M.sum(axis=1) == 8).all() and (M == M.T).all()
    G = nx.from_numpy_array(M)
    assert nx.is_connected(G) and nx.diameter(G) <= (2 if n == 16 else 4)
    if n >= 64:
        M0 = repeated_matching(T, 8, tie_break="none")
        assert nx.number_connected_components(nx.from_numpy_array(M0)) > 1


def test_tie_break_changes_nothing_without_ties():
    T = _demand(40, 1.0, 7)  # distinct random weights: greedy and Blossom order fixed by demand
    for method in ("greedy", "blossom"):
        a = repeated_matching(T, 4, method=method, seed=2)
        b = repeated_matching(T, 4, method=method, seed=2, tie_break="none")
        assert np.array_equal(a, b)


def test_tie_break_uses_base_links():
    # a ring on 0..7 as base: the single round should pair servers at ring distance 4
    n = 8
    T = np.ones((n, n))
    np.fill_diagonal(T, 0)
    base = circulant_matrix(n, [1], False)
    M = repeated_matching(T, 1, base=base, method="blossom")
    a, b = np.nonzero(np.triu(M))
    assert ((b - a) % n == 4).all() and a.size == 4
    with pytest.raises(ValueError):
        repeated_matching(T, 1, tie_break="bogus")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_greedy_tie_break_needs_distances_of_tied_pairs_only(seed):
    """The greedy matcher's tie term only orders pairs of equal weight, so computing hop distances
    for the tied pairs alone (a pair with a weight of its own gets 0) picks the same matching."""
    from topoopt_ilp.heuristic.mp_links import _tie_distances, distance_tie_break, pair_hop_distances

    rng = np.random.default_rng(seed)
    n = 40
    G = circulant_matrix(n, (1, 7), False)
    i, j = np.triu_indices(n, 1)
    keep = rng.random(i.size) < 0.3
    i, j = i[keep], j[keep]
    w = np.where(rng.random(i.size) < 0.5, rng.choice([1.0, 2.0, 3.0], i.size), rng.random(i.size) * 3)
    some = _tie_distances(G, i, j, w, exact=False)
    assert (some[np.unique(w, return_counts=True)[1][np.unique(w, return_inverse=True)[1]] == 1] == 0).all()
    full = distance_tie_break(w, pair_hop_distances(G, i, j), n, rng=np.random.default_rng(5))
    part = distance_tie_break(w, some, n, rng=np.random.default_rng(5))
    assert np.array_equal(np.sort(greedy_matching(i, j, full, n)), np.sort(greedy_matching(i, j, part, n)))
    assert np.array_equal(_tie_distances(G, i, j, w, exact=True), pair_hop_distances(G, i, j))


def _exact_weight(w, edges):
    from fractions import Fraction

    return sum(Fraction(v) for v in np.asarray(w, dtype=object)[edges].tolist())


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("maxcardinality", [False, True])
def test_rustworkx_and_networkx_agree_on_the_weight(seed, maxcardinality):
    """The compiled Blossom (rustworkx, integer arithmetic on the weights scaled exactly) finds a matching
    of the same weight as networkx's, the reference, on float, integer and tie-broken weights."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(6, 60))
    T = _demand(n, float(rng.uniform(0.05, 0.6)), seed)
    if seed % 3 == 1:
        T = np.floor(T * 5)  # many equal integer weights: ties everywhere
    W = T + T.T
    i, j = np.nonzero(np.triu(W, 1))
    w = W[i, j] / 3.0  # fractions that are not short binary numbers
    reference = blossom_matching(i, j, w, n, maxcardinality=maxcardinality, library="networkx")
    compiled = blossom_matching(i, j, w, n, maxcardinality=maxcardinality, library="rustworkx")
    used = np.concatenate([i[compiled], j[compiled]])
    assert np.unique(used).size == used.size  # a matching
    assert _exact_weight(w, compiled) == _exact_weight(w, reference)
    if maxcardinality:
        assert compiled.size == reference.size
    big = np.array([2**80 + k for k in range(w.size)], dtype=object)  # exact tie-break weights: Python ints
    assert _exact_weight(big, blossom_matching(i, j, big, n, library="rustworkx")) == _exact_weight(
        big, blossom_matching(i, j, big, n, library="networkx")
    )


def test_weights_beyond_128_bits_fall_back_to_networkx():
    i, j = np.array([0, 1]), np.array([1, 2])
    w = np.array([2**130, 2**130 + 1], dtype=object)
    assert blossom_matching(i, j, w, 3).tolist() == [1]  # auto: networkx computes it
    with pytest.raises(ValueError, match="do not scale to integers rustworkx can hold"):
        blossom_matching(i, j, w, 3, library="rustworkx")
    with pytest.raises(ValueError, match="unknown matching library 'lemon'"):
        blossom_matching(i, j, w, 3, library="lemon")


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("maxcardinality", [False, True])
def test_the_compiled_blossom_by_component_agrees_on_many_components(seed, maxcardinality):
    """The compiled Blossom runs on each connected component of the demand apart (single edges without
    it): on demands of many small blocks, lone pairs and isolated servers it finds a matching of
    networkx's weight (and, with ``maxcardinality``, its size)."""
    rng = np.random.default_rng(seed)
    n = 90
    W = np.zeros((n, n))
    perm = rng.permutation(n)
    at = 0
    while at < n - 1:
        size = int(rng.choice([2, 2, 3, 5, 8]))  # blocks of a few servers, many of them single pairs
        block = perm[at : at + size]
        for u in block:
            for v in block:
                if u < v and rng.random() < 0.7:
                    W[u, v] = W[v, u] = float(rng.integers(1, 4)) if seed % 2 else rng.lognormal()
        at += size + int(rng.integers(0, 2))  # a server now and then without demand
    i, j = np.nonzero(np.triu(W, 1))
    w = W[i, j]
    reference = blossom_matching(i, j, w, n, maxcardinality=maxcardinality, library="networkx")
    compiled = blossom_matching(i, j, w, n, maxcardinality=maxcardinality, library="rustworkx")
    used = np.concatenate([i[compiled], j[compiled]])
    assert np.unique(used).size == used.size
    assert _exact_weight(w, compiled) == _exact_weight(w, reference)
    if maxcardinality:
        assert compiled.size == reference.size
