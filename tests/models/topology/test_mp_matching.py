"""Exact MP b-matching against brute force, and the repeated-Blossom heuristic's gap."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import bounded_multigraphs
from topoopt_ilp.models.common import ExactOptions
from topoopt_ilp.models.topology.mp_matching import (
    build_mp_matching_model,
    matching_value,
    mp_matching_gap,
    solve_mp_matching,
)


def brute_force(T, b, multi=True):
    """Best matching_value over every multigraph with degree <= b."""
    return max(
        matching_value(T, links) for links in bounded_multigraphs(T.shape[0], b, max_multiplicity=None if multi else 1)
    )


def random_T(rng, n, density=0.6):
    T = rng.integers(1, 20, (n, n)).astype(float) * (rng.random((n, n)) < density)
    np.fill_diagonal(T, 0.0)
    return T


@pytest.mark.parametrize(
    "n,b,multi", [(4, 1, True), (4, 2, True), (5, 2, True), (6, 1, True), (6, 2, False), (5, 3, True)]
)
def test_exact_equals_brute_force(n, b, multi):
    rng = np.random.default_rng(n * 10 + b)
    for _ in range(3):
        T = random_T(rng, n)
        res = solve_mp_matching(T, b, multi_links=multi)
        assert res.status == "optimal"
        assert abs(res.value - brute_force(T, b, multi)) <= 1e-9 * max(1.0, res.value)
        assert (res.links.sum(axis=1) <= b).all() and np.array_equal(res.links, res.links.T)
        assert abs(res.value - res.bound) <= 1e-4 * res.value  # model objective == carried bytes


def test_heuristic_never_beats_exact():
    rng = np.random.default_rng(7)
    for n, b in [(6, 1), (6, 2), (8, 2), (8, 3), (10, 2)]:
        T = random_T(rng, n)
        exact, heur, gap = mp_matching_gap(T, b)
        assert heur <= exact * (1 + 1e-9)
        assert 0.0 <= gap <= 1.0


def test_repeated_matching_is_strictly_suboptimal_somewhere():
    """Seeded search for a demand on which repeated max-weight matching loses carried bytes."""
    rng = np.random.default_rng(2024)
    found = None
    for _ in range(200):
        T = random_T(rng, 6, density=0.5)
        exact, heur, gap = mp_matching_gap(T, 2)
        if gap > 1e-6:
            found = (T, exact, heur, gap)
            break
    assert found is not None
    T, exact, heur, gap = found
    assert abs(exact - brute_force(T, 2)) <= 1e-9 * exact  # the exact side is really optimal
    assert heur < exact * (1 - 1e-6)


@pytest.mark.parametrize("backend", ["highs", "scip", "cbc", "cpsat"])
def test_backends_agree(backend):
    T = random_T(np.random.default_rng(11), 8)
    ref = solve_mp_matching(T, 2)
    res = solve_mp_matching(T, 2, ExactOptions(backend=backend, warm_start="none"))
    assert res.status == "optimal"
    assert abs(res.value - ref.value) <= 1e-6 * ref.value


def test_model_shape_and_diminishing_weights():
    T = np.array([[0, 6, 0, 0], [0, 0, 0, 0], [0, 0, 0, 3], [0, 0, 1, 0]], dtype=float)
    mm = build_mp_matching_model(T, 3)
    assert mm.x.shape == (2, 3)
    np.testing.assert_allclose(mm.model.objective[mm.x.index], [[6, 3, 2], [4, 2, 4 / 3]])
    # with b = 3 both pairs take all three links: 6 * H(3) + 4 * H(3)
    assert abs(solve_mp_matching(T, 3).value - 10 * (1 + 1 / 2 + 1 / 3)) < 1e-9


def test_gap_needs_even_n():
    with pytest.raises(ValueError, match="even"):  # odd n: the heuristic's rounds leave a node out
        mp_matching_gap(np.ones((5, 5)), 1)
