from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import shortest_path

from topoopt_ilp.core.routes import Routing
from topoopt_ilp.heuristic import circulant_matrix, circulant_stats, topology_finder


def _check_routing(res, groups, mp):
    n, X = res.n, res.X
    assert isinstance(res.routing, Routing)
    # offset routes: from every source, each jump is an existing link and the walk ends at s + offset
    R = res.routing.offset_routes
    s = np.arange(n)
    for off, js, f in R.to_lists():
        cur = s.copy()
        for j in js:
            nxt = (cur + j) % n
            assert (X[cur, nxt] > 0).all()
            cur = nxt
        assert np.array_equal(cur, (s + off) % n)
    # explicit paths follow links
    explicit = set()
    for p, f in res.routing.paths.to_lists():
        assert all(X[a, b] > 0 for a, b in zip(p, p[1:]))
        explicit.add((p[0], p[-1]))
    # MP pairs with demand are routable
    for a, b in zip(*np.nonzero(mp)):
        if a != b:
            assert (a, b) in explicit or res.coin_dist[(b - a) % n] > 0
    # rings: each visits its group's members once, fractions of a group sum to 1, hops routable
    rings = res.routing.rings
    for g, (mem, S) in enumerate(groups):
        rows = [o for gg, o, f in rings.to_lists() if gg == g]
        if len(mem) <= 1 or S == 0:  # trivial groups carry no traffic and get no rings
            assert not rows
            continue
        assert rows
        assert np.isclose(sum(f for gg, o, f in rings.to_lists() if gg == g), 1.0)
        for o in rows:
            assert sorted(o) == sorted(np.asarray(mem).tolist())
            for a, b in zip(o, o[1:] + o[:1]):
                assert X[a, b] > 0 or res.coin_dist[(b - a) % n] > 0 or (a, b) in explicit


def _regular(res):
    X = res.X
    assert np.array_equal(X, res.ar_matrix + res.mp_matrix)
    assert (X.sum(axis=1) == res.d).all() and (X.sum(axis=0) == res.d).all()
    assert np.trace(X) == 0 and (X >= 0).all()
    if not res.directed:
        assert (X == X.T).all()


@pytest.mark.parametrize("mode", ["paper", "authors"])
def test_testbed_12_4(mode):
    groups = [(np.arange(12), 1e8)]
    mp = np.zeros((12, 12))
    res = topology_finder(12, 4, groups, mp, mode=mode)
    assert res.jumps == {12: (1, 5)}
    assert np.array_equal(res.X, circulant_matrix(12, [1, 5]))
    X = res.X
    assert X[0, 1] == X[0, 11] == X[0, 5] == X[0, 7] == 1
    assert shortest_path(X > 0, unweighted=True).max() == 3
    assert (res.d_allreduce, res.d_mp) == (4, 0)
    assert res.coin_dist.max() == 3
    assert len(res.routing.paths) == 0
    # rings: +-1 and +-5 single cycles through all 12 members, 1/4 of the bytes each
    rl = res.routing.rings.to_lists()
    assert [o[:3] for _, o, _ in rl] == [[0, 1, 2], [0, 11, 10], [0, 5, 10], [0, 7, 2]]
    assert all(f == 0.25 for _, _, f in rl)
    _regular(res)
    _check_routing(res, groups, mp)
    assert res.group_kind == ("direct",)


def test_authors_duplicate_quirk_n12_d8():
    res = topology_finder(12, 8, [(np.arange(12), 1.0)], np.zeros((12, 12)), mode="authors")
    assert res.jumps == {12: (1, 5, 7, 11)}
    assert res.X[0, 1] == 2 and res.X[0, 5] == 2 and res.X[0, 2] == 0
    res_p = topology_finder(12, 8, [(np.arange(12), 1.0)], np.zeros((12, 12)), mode="paper")
    assert sorted(res_p.jumps[12]) == [1, 1, 5, 5]  # only two +-classes exist at n=12
    _regular(res)


def test_multi_group_paper_mode():
    n, d = 12, 8
    groups = [(np.arange(12), 4e6)]
    groups += [(np.array([s, s + 4, s + 8]), 3e6) for s in range(4)]  # size 3 cosets
    groups += [(np.array([s, s + 6]), 1e5) for s in range(6)]  # size 2 cosets
    groups += [(np.array([0, 1, 3]), 1e5), (np.array([5]), 1e9)]  # not a coset; trivial
    mp = np.zeros((12, 12))
    res = topology_finder(n, d, groups, mp, mode="paper")
    # W[12] = 4e6 * 23/12, W[3] = 4 * 3e6 * 5/3, W[2] = 6 * 1e5 * 3/2
    assert res.group_weights[12] == pytest.approx(4e6 * 23 / 12)
    assert res.group_weights[3] == pytest.approx(2e7)
    # 4 units of 2 ports: 3 -> 2.80, 12 -> 1.07, 2 -> 0.13  => 3, 1, 0 (largest remainder)
    assert res.ports == {3: 6, 12: 2}
    assert res.jumps[3] == (4, 4, 4)  # one +-class at k = 3: parallel rings
    assert res.jumps[12] == (1,)
    assert res.X[0, 4] == 3 and res.X[0, 1] == 1
    assert res.virtual_jumps == {2: (6,)}
    assert res.group_kind[:1] == ("direct",) and res.group_kind[-2:] == ("ordered", "trivial")
    assert set(res.group_kind[5:11]) == {"virtual"}
    _regular(res)
    _check_routing(res, groups, mp)


def test_multi_group_authors_connectivity_ring():
    n, d = 16, 6
    groups = [(np.array([s, s + 4, s + 8, s + 12]), 1e7) for s in range(4)]  # size 4 heaviest
    groups += [(np.arange(16), 1e5)]
    mp = np.zeros((n, n))
    res = topology_finder(n, d, groups, mp, mode="authors")
    assert res.ports == {4: 4, 16: 2}
    assert res.jumps[4] == (4, 12)  # authors: both +4 and -4 (duplicate quirk)
    assert res.jumps[16] == (1,)
    assert res.coin_dist.min() == 0 and (res.coin_dist[1:] > 0).all()
    _regular(res)
    _check_routing(res, groups, mp)


def test_mp_links_for_heavy_pairs():
    n, d = 16, 6
    groups = [(np.arange(16), 1e6)]
    mp = np.zeros((n, n))
    heavy = [(0, 8), (3, 11), (5, 10), (2, 13)]
    for a, b in heavy:
        mp[a, b] = 3e6
    mp[1, 9] = 1.0
    res = topology_finder(n, d, groups, mp, mode="paper", matching="blossom")
    # T_AR = 1e6 * 31, T_MP = 1.2e7 + 1 -> d_A = round(6 * 31/43) = 4, d_MP = 2
    assert (res.d_allreduce, res.d_mp) == (4, 2)
    for a, b in heavy:
        assert res.mp_matrix[a, b] >= 1
    direct = {(p[0], p[-1]) for p, _ in res.routing.paths.to_lists() if len(p) == 2}
    assert {(a, b) for a, b in heavy} <= direct
    _regular(res)
    _check_routing(res, groups, mp)


def test_mp_routing_options_and_sparse_input():
    n, d = 16, 6
    rng = np.random.default_rng(3)
    mp = rng.random((n, n)) * (rng.random((n, n)) < 0.2) * 1e6
    np.fill_diagonal(mp, 0)
    groups = [(np.arange(16), 1e6)]
    a = topology_finder(n, d, groups, mp, matching="blossom")
    b = topology_finder(n, d, groups, sp.csr_matrix(mp), matching="blossom")
    assert np.array_equal(a.X, b.X)
    for how in ("ecmp", "ksp"):
        r = topology_finder(n, d, groups, mp, matching="blossom", mp_routing=how)
        _check_routing(r, groups, mp)
        assert np.array_equal(r.X, a.X)


def test_directed():
    n, d = 12, 3
    groups = [(np.arange(12), 1e6)]
    mp = np.zeros((n, n))
    mp[0, 6] = 2.3e7  # T_AR = 2.3e7 too: d_A = round(1.5) = 2
    res = topology_finder(n, d, groups, mp, directed=True, split="proportional")
    assert res.d_allreduce == 2 and res.d_mp == 1
    _regular(res)
    _check_routing(res, groups, mp)
    assert res.mp_matrix[0, 6] == 1


def test_best_select_and_callable():
    n, d = 16, 8
    groups = [(np.arange(16), 1.0)]
    g = topology_finder(n, d, groups, None, select="geometric")
    b = topology_finder(n, d, groups, None, select="best")
    assert circulant_stats(n, b.jumps[16])[1] <= circulant_stats(n, g.jumps[16])[1]
    first = lambda c, m, **kw: tuple(int(x) for x in c[:m])  # noqa: E731
    r = topology_finder(n, d, groups, None, select=first)
    assert r.jumps[16] == (1, 3, 5, 7) and r.select == "<lambda>"


def test_odd_n_and_no_allreduce():
    res = topology_finder(9, 4, [(np.arange(9), 1.0)], np.ones((9, 9)))
    assert res.d_mp == 0 and res.notes
    _regular(res)
    mp = np.zeros((8, 8))
    mp[0, 1] = 1.0
    res = topology_finder(8, 2, [], mp)
    assert res.d_allreduce == 0 and res.d_mp == 2
    _regular(res)
    assert shortest_path(res.X > 0, unweighted=True).max() < np.inf  # connected after repair
    _check_routing(res, [], mp)


@settings(max_examples=25, deadline=None)
@given(
    n=st.sampled_from([6, 8, 12, 16, 18, 20, 24]),
    half_d=st.integers(1, 4),
    mode=st.sampled_from(["paper", "authors"]),
    select=st.sampled_from(["geometric", "best"]),
    seed=st.integers(0, 5),
)
def test_finder_properties(n, half_d, mode, select, seed):
    d = 2 * half_d
    rng = np.random.default_rng(seed)
    groups = []
    divs = [k for k in range(2, n + 1) if n % k == 0]
    for k in rng.choice(divs, size=min(3, len(divs)), replace=False):
        step = n // int(k)
        for s in range(step):
            groups.append((np.arange(s, n, step), float(rng.integers(1, 100)) * 1e5))
    groups.append((rng.permutation(n)[:4], 1e5))  # usually not a coset
    mp = rng.random((n, n)) * (rng.random((n, n)) < 0.2) * 1e7
    np.fill_diagonal(mp, 0)
    res = topology_finder(n, d, groups, mp, mode=mode, select=select, seed=seed)
    _regular(res)
    _check_routing(res, groups, mp)
    assert res.d_allreduce + res.d_mp == d
    assert sum(res.ports.values()) == res.d_allreduce
    assert (res.coin_dist[1:] > 0).all()  # AllReduce jumps always generate Z_n (connectivity ring)


@pytest.mark.parametrize("n,d", [(8, 2), (8, 3), (16, 4), (9, 1)])
def test_directed_all_to_all_without_allreduce_is_strongly_connected(n, d):
    # Repeated matching alone splits uniform demand into components (8x2: two 4-server ones); the
    # repair swaps arcs between strongly connected components, keeping in- and out-degrees.
    mp = np.ones((n, n)) - np.eye(n)
    res = topology_finder(n, d, [], mp, directed=True)
    assert res.d_allreduce == 0 and res.d_mp == d
    X = res.X
    assert (X.sum(axis=0) == d).all() and (X.sum(axis=1) == d).all() and np.trace(X) == 0
    assert shortest_path(X > 0, unweighted=True).max() < np.inf  # every ordered pair reachable
    assert any("rewired to connect" in note for note in res.notes)
    _check_routing(res, [], mp)


@pytest.mark.parametrize("mode", ["paper", "authors"])
def test_uniform_all_to_all_matching_needs_no_connectivity_repair(mode):
    # No AllReduce: all 8 ports go to MP matching rounds. Every perfect matching of unlinked pairs
    # weighs the same; the distance tie-break spreads the rounds out (connected, short paths)
    # where the matcher's index order built ~8-server near-cliques that only the repair joined.
    n, d = 64, 8
    mp = np.ones((n, n)) - np.eye(n)
    res = topology_finder(n, d, [], mp, mode=mode)
    assert res.d_allreduce == 0 and res.d_mp == d
    D = shortest_path(res.X > 0, unweighted=True)
    assert D.max() <= 4 and D[np.triu_indices(n, 1)].mean() < 2.5
    assert not any("rewired to connect" in note for note in res.notes)
    _check_routing(res, [], mp)
    old = topology_finder(n, d, [], mp, mode=mode, mp_tie_break="none")
    assert any("rewired to connect" in note for note in old.notes)
    assert shortest_path(old.X > 0, unweighted=True).max() > D.max()


@pytest.mark.parametrize("n,d,groups", [(7, 3, []), (9, 3, [(np.arange(9), 1e7)]), (11, 5, [(np.arange(11), 1e7)])])
def test_odd_ports_without_regularity(n, d, groups):
    """n*d odd with ``regular=False`` (what the validation message suggests for such clusters): the
    rings take d - 1 ports, one near-perfect matching round and the free-port pairing the last, so
    exactly one server keeps a free port and the topology is connected (it used to raise)."""
    from scipy.sparse.csgraph import connected_components

    mp = np.zeros((n, n))
    mp[0, 3] = mp[1, 4] = 4e6
    if not groups:
        mp = np.ones((n, n)) - np.eye(n)
    with pytest.raises(ValueError, match="odd"):
        topology_finder(n, d, groups, mp)
    res = topology_finder(n, d, groups, mp, regular=False, multi_links=False)
    deg = res.X.sum(axis=1)
    assert (res.X == res.X.T).all() and res.X.max() == 1 and deg.max() == d and (deg < d).sum() == 1
    assert connected_components(res.X > 0)[0] == 1


def test_odd_ports_end_to_end():
    from topoopt_ilp import Cluster, Demand, Instance, solve
    from topoopt_ilp.evaluation.verify import verify

    inst = Instance(Cluster(7, 3, 100.0, regular=False), Demand(all_to_all=1e6), objective="throughput")
    for method in ("heuristic", "exact"):
        sol = solve(inst, method=method, **({"time_limit_s": 30} if method == "exact" else {}))
        assert sol.has_solution and verify(inst, sol).valid


def test_circulant_family_heuristic_rings_on_its_jumps():
    """A circulant-family instance got a jump set with offset routes only, so the evaluator rang the
    AllReduce once in member order over one link direction: 4x slower than the same jumps under
    family 'any' (a user's report). Its rings are now TopologyFinder's on the chosen jumps."""
    from dataclasses import replace

    from topoopt_ilp import Cluster, Demand, Instance, solve
    from topoopt_ilp.core.instance import AllReduceGroup
    from topoopt_ilp.evaluation.verify import verify

    base = Instance(
        Cluster(10, 4, 100.0), Demand(allreduce=(AllReduceGroup(tuple(range(10)), 1e7),), mp=((0, 1, 5e6), (2, 4, 3e6)))
    )
    general = solve(base, method="heuristic")
    coprime = solve(replace(base, topology_family="coprime_circulant"), method="heuristic")
    assert coprime.topology.jumps == general.topology.jumps == (1, 3)
    assert len(coprime.routing.rings.group) == 4  # jumps 1 and 3, both directions
    assert coprime.metrics["iteration_time_s"] == pytest.approx(general.metrics["iteration_time_s"])
    assert verify(replace(base, topology_family="coprime_circulant"), coprime).valid
