from __future__ import annotations

import itertools

import numpy as np
import pytest

from topoopt_ilp.heuristic import (
    best_rule,
    canonical_jump_sets,
    circulant_distances,
    circulant_stats,
    coin_set,
    geometric_rule,
    select_permutations,
    totient_perms,
)

# (n, d) -> (jumps, diameter, mean hops) of the authors' choose_n_geo rule (docs/methods/heuristic.md)
REFERENCE = {
    (12, 4): ((1, 5), 3, 1.82),
    (16, 4): ((1, 5), 4, 2.13),
    (16, 8): ((1, 3, 5, 9), 2, 1.47),
    (128, 4): ((1, 13), 10, 5.62),
    (128, 6): ((1, 7, 27), 6, 3.67),
    (128, 8): ((1, 5, 13, 39), 5, 2.96),
    (1024, 8): ((1, 7, 33, 181), 8, 5.12),
}


@pytest.mark.parametrize("nd", sorted(REFERENCE))
def test_geometric_authors_reference_table(nd):
    n, d = nd
    jumps, diam, mean = REFERENCE[nd]
    got = select_permutations(totient_perms(n, n), d // 2, n=n, mode="authors")
    assert tuple(sorted(got)) == jumps
    dm, mh = circulant_stats(n, got)
    assert dm == diam
    assert round(mh, 2) == mean


def test_authors_duplicate_quirk_and_paper_fix():
    n = 12
    c = totient_perms(n, n)
    assert select_permutations(c, 4, n=n, mode="authors") == (1, 5, 7, 11)  # = +-1, +-5 doubled
    paper = select_permutations(c, 4, n=n, mode="paper")  # only 2 classes exist: repeats, never j and n-j
    assert all(2 * j <= n for j in paper)
    assert sorted(paper) == [1, 1, 5, 5]


def test_paper_mode_never_picks_j_and_minus_j():
    for n in (16, 30, 64, 128):
        for m in (2, 3, 4):
            got = select_permutations(totient_perms(n, n), m, n=n, mode="paper")
            assert all(2 * j <= n for j in got)
            assert len(set(got)) == m


def test_geometric_directed_exponent():
    # directed: ratio = (c_L/c_1)^(1/(m-1)), so the last pick is c_L
    c = totient_perms(16, 16)
    assert geometric_rule(c, 3, n=16, directed=True) == (1, 5, 15)
    assert geometric_rule(c, 1, n=16, directed=True) == (1,)


def _aspl(n, jumps, directed=False):
    d = circulant_distances(n, coin_set(n, jumps, directed))
    return d[1:].sum() / (n - 1), d.max()


def _brute_best(n, m):
    cls = [j for j in totient_perms(n, n).tolist() if 2 * j <= n]
    return min((_aspl(n, S), S) for S in itertools.combinations(cls, m))[0]


@pytest.mark.parametrize("n,m", [(12, 2), (16, 2), (20, 2), (21, 3), (30, 2), (36, 3), (45, 3)])
def test_best_rule_matches_brute_force(n, m):
    got = select_permutations(totient_perms(n, n), m, n=n, rule=best_rule)
    assert _aspl(n, got) == pytest.approx(_brute_best(n, m))


def test_best_rule_beats_geometric_n128_d8():
    g = select_permutations(totient_perms(128, 128), 4, n=128, mode="authors")
    b = select_permutations(totient_perms(128, 128), 4, n=128, rule=best_rule)
    dg, mg = circulant_stats(128, g)
    db, mb = circulant_stats(128, b)
    assert (mb, db) < (mg, dg)
    assert db == 4 and round(mb, 3) == 2.866


def test_best_rule_local_search_improves_geometric():
    n = 256
    c = totient_perms(n, n)
    g = select_permutations(c, 3, n=n)
    b = best_rule(c[2 * c <= n], 3, n=n, exhaustive_limit=10, seed=1)
    assert _aspl(n, b) <= _aspl(n, g)


def test_best_rule_with_fixed_jumps_scores_combined_graph():
    # k = 3 jumps on n = 12 with jump 1 already present: only class 4 exists
    assert best_rule(totient_perms(12, 3), 1, n=12, fixed=(1,)) == (4,)
    # k = 12, fixed jump 3: best companion measured on the union
    got = best_rule(totient_perms(12, 12), 1, n=12, fixed=(3,))
    assert _aspl(12, (3,) + got) == min(_aspl(12, (3, j)) for j in (1, 5))


def test_canonical_jump_sets_identifies_isomorphic_circulants():
    n = 13
    sets = np.array([[1, 5], [2, 10 % 13], [3, 2]])  # 2*{1,5} = {2,10}; {1,5}*3 = {3,15=2}
    can = canonical_jump_sets(sets, n)
    assert (can == can[0]).all()
    # and distance profiles agree
    assert len({tuple(np.sort(circulant_distances(n, coin_set(n, s)))) for s in sets}) == 1


def test_directed_select():
    got = select_permutations(totient_perms(16, 16), 2, n=16, directed=True, rule=best_rule)
    a, _ = _aspl(16, got, directed=True)
    brute = min(_aspl(16, S, True)[0] for S in itertools.combinations(totient_perms(16, 16).tolist(), 2))
    assert a == pytest.approx(brute)
