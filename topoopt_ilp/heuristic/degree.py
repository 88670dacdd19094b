"""Degree split between AllReduce and MP links, and AllReduce port allocation per group size
(docs/methods/heuristic.md, steps 2 and 3)."""

from __future__ import annotations

from collections.abc import Mapping
from math import floor, gcd

import numpy as np

__all__ = ["allreduce_bytes_total", "degree_split", "allocate_ports", "DEFAULT_SPLIT", "DEFAULT_ALLOCATION"]

DEFAULT_SPLIT = "proportional"
DEFAULT_ALLOCATION = "proportional"


def allreduce_bytes_total(groups) -> float:
    """``T_AR`` of :func:`degree_split`: ``sum S (2k - 1)`` over the AllReduce groups ``(members,
    S)`` of ``k >= 2`` members, in group order (the authors' weight)."""
    return sum((S * (2 * len(members) - 1) for members, S in groups if len(members) >= 2), 0.0)


def degree_split(
    d: int,
    ar_bytes_total: float,
    mp_bytes_total: float,
    *,
    split: str = DEFAULT_SPLIT,
    directed: bool = False,
) -> tuple[int, int]:
    """Split the ``d`` interfaces of every server into ``(d_A, d_MP)``.

    Parameters
    ----------
    d : int
        Interfaces per server.
    ar_bytes_total, mp_bytes_total : float
        AllReduce traffic ``T_AR`` (the authors use ``sum S*(2k-1)`` over groups) and total MP bytes.
    split : {"proportional", "all_allreduce"}
        ``"proportional"`` (paper, and the authors' code before June 2022):
        ``d_A = round(d * T_AR / (T_AR + T_MP))`` (half up). ``"all_allreduce"`` (the final code):
        ``d_A = d``, so MP traffic rides the circulant.
    directed : bool
        Directed links: no parity constraint and a minimum ``d_A`` of 1.

    Returns
    -------
    (int, int)
        ``d_A + d_MP == d``.

    Notes
    -----
    Fix-ups, in this order: undirected ``d_A`` must be even (one ring family = 2 ports), so an odd
    ``d_A`` takes one unit from MP (or gives one back if ``d_A == d``); with AllReduce traffic,
    ``d_A >= 2`` undirected (``>= 1`` directed); with no AllReduce traffic ``d_A = 0``.
    With ``"all_allreduce"`` and an odd undirected ``d``, ``d_A = d - 1`` and one port is left
    to an MP matching round.
    """
    if d < 0:
        raise ValueError("d must be >= 0")
    ar, mp = float(ar_bytes_total), float(mp_bytes_total)
    if ar < 0 or mp < 0:
        raise ValueError("traffic totals must be >= 0")
    if ar == 0:
        return 0, d
    if split == "all_allreduce":
        d_a = d
    elif split == "proportional":
        d_a = int(floor(d * ar / (ar + mp) + 0.5))
    else:
        raise ValueError(f"unknown split {split!r}")
    if not directed and d_a % 2:
        d_a = d_a + 1 if d_a + 1 <= d else d_a - 1
    lo = 1 if directed else 2
    if d_a < lo:
        d_a = min(lo, d - (d % 2 if not directed else 0))
    return d_a, d - d_a


def _largest_remainder(weights: np.ndarray, units: int) -> np.ndarray:
    """Integer apportionment of ``units`` proportional to ``weights`` (Hamilton's method; ties go to
    the earlier entry, i.e. the heavier group since callers sort heaviest first)."""
    if units <= 0 or weights.sum() <= 0:
        return np.zeros(weights.size, dtype=np.int64)
    q = weights / weights.sum() * units
    base = np.floor(q).astype(np.int64)
    rem = units - int(base.sum())
    order = np.argsort(-(q - base), kind="stable")
    base[order[:rem]] += 1
    return base


def allocate_ports(
    W: Mapping[int, float],
    d_A: int,
    n: int,
    *,
    mode: str = DEFAULT_ALLOCATION,
    directed: bool = False,
) -> dict[int, int]:
    """Split the ``d_A`` AllReduce ports of every server among group sizes.

    Parameters
    ----------
    W : mapping int -> float
        Traffic weight per group size ``k`` (``k | n``, ``k >= 2``); the authors use
        ``sum S*(2k-1)/k`` over the groups of that size.
    d_A : int
        AllReduce ports per server (even when undirected).
    n : int
        Number of servers.
    mode : {"proportional", "heaviest"}
        ``"proportional"`` (paper): ``d_k`` proportional to ``W[k]`` by largest remainder, in units
        of 2 ports (one undirected ring family) or 1 (directed). ``"heaviest"`` (authors' code): the
        heaviest size takes all ``d_A``.
    directed : bool
        Directed links.

    Returns
    -------
    dict int -> int
        Ports per group size, heaviest first; only sizes with ports appear. May contain ``n`` even
        if no group has size ``n`` (the connectivity ring).

    Notes
    -----
    Connectivity: the AllReduce jumps generate Z_n only if ``gcd({n/k : d_k > 0} | {n}) == 1``.
    ``"heaviest"`` does what the authors do: if the heaviest size is not ``n``, one ring family
    (one unit) goes back to a full ``n``-ring (a coprime jump). ``"proportional"`` applies the same
    repair only when the allocated sizes do not already generate Z_n, taking the unit from the
    largest allocation. For ``k == 2`` the only jump is ``n/2``, one port per ring when undirected,
    so its (even) allocation becomes parallel ``n/2`` links.
    """
    unit = 1 if directed else 2
    if d_A % unit:
        raise ValueError("d_A must be even for undirected links")
    ks = [k for k, w in W.items() if w > 0]
    for k in ks:
        if k < 2 or n % k:
            raise ValueError(f"group size {k} must be >= 2 and divide n={n}")
    if d_A == 0 or not ks:
        return {}
    ks.sort(key=lambda k: (-W[k], -k))
    units = d_A // unit
    if mode == "heaviest":
        alloc = dict.fromkeys(ks, 0)
        alloc[ks[0]] = units
    elif mode == "proportional":
        alloc = dict(zip(ks, _largest_remainder(np.array([W[k] for k in ks], dtype=float), units).tolist()))
    else:
        raise ValueError(f"unknown allocation mode {mode!r}")
    g = n
    for k, u in alloc.items():
        if u:
            g = gcd(g, n // k)
    if g != 1:  # disconnected: give one ring family to a full n-ring
        donor = max(alloc, key=lambda k: (alloc[k], W[k]))
        alloc[donor] -= 1
        alloc[n] = alloc.get(n, 0) + 1
    return {k: u * unit for k, u in sorted(alloc.items(), key=lambda kv: (-W.get(kv[0], 0.0), -kv[0])) if u}
