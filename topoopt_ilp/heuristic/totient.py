"""TotientPerms: the candidate ring permutations of TopoOpt (docs/methods/heuristic.md).

A group of size ``k`` (``k`` divides ``n``) placed on a coset ``{s, s + n/k, s + 2n/k, ...}`` of the
cyclic subgroup of order ``k`` of Z_n can be ordered on a ring by any generator ``p`` of Z_k
(``gcd(p, k) == 1``): member ``t`` is followed by member ``t + p``. Embedded in Z_n that is the
physical jump ``j = (n/k) * p``, and the same jump applied from every coset start
``s in [0, n/k)`` gives ``n/k`` disjoint rings. There are ``phi(k)`` (Euler's totient) candidates.

The number theory is small (``n`` is at most a few thousand servers) and done here: divisors by
trial division up to ``sqrt(n)``, generators by numpy's ``gcd``; each cached per argument. (A
computer-algebra package would cost a quarter of a second to import on every run; the tests check
both against sympy.)
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

__all__ = [
    "divisors",
    "totient_perms",
    "candidate_jumps",
    "coset_rings",
    "coset_of",
    "jump_ports",
]


def divisors(n: int) -> list[int]:
    """Sorted positive divisors of ``n`` (a new list each call)."""
    return list(_divisors(int(n)))


@lru_cache(maxsize=4096)
def _divisors(n: int) -> tuple[int, ...]:
    small = [k for k in range(1, int(n**0.5) + 1) if n % k == 0]
    return tuple(sorted(set(small) | {n // k for k in small}))


@lru_cache(maxsize=4096)
def _generators(k: int) -> np.ndarray:
    """The generators of Z_k, ``1 <= p < k`` with ``gcd(p, k) == 1``, sorted (read-only): Euler's
    ``phi(k)`` of them."""
    p = np.arange(1, k, dtype=np.int64)
    gens = p[np.gcd(p, k) == 1]
    gens.setflags(write=False)
    return gens


def totient_perms(n: int, k: int) -> np.ndarray:
    """Candidate physical jumps for a group of size ``k`` on ``n`` servers.

    Parameters
    ----------
    n : int
        Number of servers.
    k : int
        Group size; must divide ``n`` and be at least 2.

    Returns
    -------
    numpy.ndarray
        Sorted int64 jumps ``(n/k) * p`` for ``1 <= p < k`` with ``gcd(p, k) == 1``;
        ``len == phi(k)``.
    """
    if k < 2 or n % k:
        raise ValueError(f"group size k={k} must be >= 2 and divide n={n}")
    return (n // k) * _generators(int(k))


def candidate_jumps(n: int) -> dict[int, np.ndarray]:
    """TotientPerms candidates for every divisor ``k >= 2`` of ``n`` (the authors'
    ``construct_candidate_jumps``). The sets are disjoint: ``gcd(j, n) == n/k`` identifies ``k``."""
    return {k: totient_perms(n, k) for k in divisors(n) if k >= 2}


def coset_rings(n: int, k: int, jump: int) -> np.ndarray:
    """The ``n/k`` rings made by ``jump`` (a TotientPerms candidate of size ``k``).

    Returns
    -------
    numpy.ndarray
        Shape ``(n/k, k)``; row ``s`` is ``s, s + jump, s + 2*jump, ... (mod n)``, which visits the
        coset ``{s + t*n/k}`` exactly once when ``jump`` is a candidate (the authors' ``add_ring``).
    """
    starts = np.arange(n // k, dtype=np.int64)[:, None]
    return (starts + jump * np.arange(k, dtype=np.int64)[None, :]) % n


def coset_of(members: np.ndarray, n: int) -> tuple[int, int] | None:
    """If ``members`` is a coset ``{s, s + n/k, ...}`` of the order-``k`` subgroup of Z_n, return
    ``(k, s)`` with ``s = min(members)`` in ``[0, n/k)``; else ``None``."""
    m = np.unique(np.asarray(members, dtype=np.int64))
    k = len(m)
    if k != len(members) or k < 1 or n % k or m[0] < 0 or m[-1] >= n:
        return None
    step = n // k
    s = int(m[0])
    if s >= step or not np.array_equal(m, s + step * np.arange(k)):
        return None
    return k, s


def jump_ports(n: int, jump: int, directed: bool) -> int:
    """Ports per node used by one ring family of ``jump``: 1 if directed or ``jump == n/2``
    (the links to ``i + n/2`` and ``i - n/2`` coincide), else 2 (links to ``i + j`` and ``i - j``)."""
    return 1 if directed or 2 * (jump % n) == n else 2
