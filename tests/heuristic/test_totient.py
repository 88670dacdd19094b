from __future__ import annotations

import numpy as np
import pytest
import sympy

from topoopt_ilp.heuristic import candidate_jumps, coset_of, coset_rings, divisors, jump_ports, totient_perms


@pytest.mark.parametrize("n", [2, 6, 12, 16, 30, 36, 128])
def test_totient_count_and_values(n):
    for k in divisors(n)[1:]:
        J = totient_perms(n, k)
        assert len(J) == int(sympy.totient(k))
        assert np.all(J % (n // k) == 0)
        assert all(sympy.gcd(int(j) // (n // k), k) == 1 for j in J)


def test_totient_examples():
    assert totient_perms(12, 12).tolist() == [1, 5, 7, 11]
    assert totient_perms(12, 4).tolist() == [3, 9]
    assert totient_perms(12, 3).tolist() == [4, 8]
    assert totient_perms(12, 2).tolist() == [6]
    with pytest.raises(ValueError):
        totient_perms(12, 5)


@pytest.mark.parametrize("n", [12, 16, 30, 36])
def test_every_ring_is_one_cycle_through_its_coset(n):
    for k, J in candidate_jumps(n).items():
        for j in J:
            R = coset_rings(n, k, int(j))
            assert R.shape == (n // k, k)
            for s, ring in enumerate(R):
                assert ring[0] == s
                # visits the coset {s + t n/k} exactly once, and the next step returns to s
                assert sorted(ring.tolist()) == [s + t * (n // k) for t in range(k)]
                assert (ring[-1] + j) % n == s
            # the n/k rings partition the nodes
            assert sorted(R.ravel().tolist()) == list(range(n))


def test_candidate_jumps_disjoint_and_cover_nonzero_residues():
    n = 36
    cj = candidate_jumps(n)
    assert sorted(cj) == [2, 3, 4, 6, 9, 12, 18, 36]
    allj = np.concatenate(list(cj.values()))
    assert sorted(allj.tolist()) == list(range(1, n))  # every nonzero residue has exactly one group size


def test_coset_of():
    assert coset_of(np.array([1, 5, 9]), 12) == (3, 1)
    assert coset_of(np.array([9, 1, 5]), 12) == (3, 1)
    assert coset_of(np.arange(12), 12) == (12, 0)
    assert coset_of(np.array([0, 1, 2]), 12) is None
    assert coset_of(np.array([4, 8, 0]), 12) == (3, 0)
    assert coset_of(np.array([0, 5]), 12) is None


def test_jump_ports():
    assert jump_ports(12, 6, False) == 1
    assert jump_ports(12, 5, False) == 2
    assert jump_ports(12, 5, True) == 1


def test_the_number_theory_agrees_with_sympy_and_is_cached():
    """Divisors and the generators of Z_k against sympy's (an independent implementation) for every
    n and k up to 2,000; callers get their own list or array to change."""
    for n in range(1, 2001):
        assert divisors(n) == [int(v) for v in sympy.divisors(n)], n
    for k in range(2, 2001):
        gens = totient_perms(k, k)
        assert gens.size == int(sympy.totient(k)), k
        assert all(sympy.gcd(int(p), k) == 1 for p in gens[:50]), k
    assert totient_perms(360, 36).tolist() == [10 * p for p in (1, 5, 7, 11, 13, 17, 19, 23, 25, 29, 31, 35)]
    first, again = divisors(360), divisors(360)
    first.append(7)
    a = totient_perms(360, 36)
    a[0] = -1
    assert again[-1] == 360 and divisors(360)[-1] == 360 and totient_perms(360, 36)[0] == 10
