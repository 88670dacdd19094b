"""Server relabellings that map strategies to equivalent strategies (for the strategy enumeration).

With a free topology (``topology_family: any``) a permutation pi of the servers maps a design to an
equivalent one (same link counts between relabelled servers, same routes): the least communication
time T*(S) of a strategy S depends on its traffic only up to relabelling. pi is a *symmetry of the
strategy space* when for every layer option (k, s) there is an option (k, s') of the same layer with

    pi(a_{k,s}(t)) = a_{k,s'}(pi(t))   for every batch unit t,                                (1)

a_{k,s}(t) being the server of unit t (:func:`topoopt_ilp.core.strategy.unit_servers`). Then the strategy
pi(S) (every layer's option mapped by (1), every block on pi of its server) has

* resharding i -> i+1: sum_t [a_i(t) -> a_{i+1}(t)] mapped by pi is sum_t [a'_i(pi t) -> a'_{i+1}(pi t)],
  the same sum over units in another order, i.e. pi(S)'s resharding (equal options map to equal
  options, so the pairs that skip resharding are the same);
* lookups: block on b sends to its consumer's units' servers; mapped, pi(b) sends to a'_c(pi t);
* AllReduce groups: cosets are the images of the unit maps, so coset C maps to coset pi(C), with the
  same layers (same bytes); groups of at most ``ALL_RINGS_UP_TO`` members may take any ring order,
  a set-level space that pi maps onto itself; a larger group only takes TotientPerms' rings
  (member r -> member r + p, p coprime with k, in coset order), so pi must also map that family of
  rings onto the family of the image coset (checked explicitly);
* compute and memory: coset members and block servers relabelled, same amounts.

So pi(S) has pi-relabelled traffic, compute and memory: the same objective and memory feasibility,
and every bound of the search (port, volume, Moore, latency, compute, the degree-2 cut bound: each
a function of the traffic that ignores server names) takes the same value at pi(P) as at a partial
strategy P. The symmetries form a group G (they compose); :func:`strategy_symmetries` finds the ones
whose unit relabelling is pi itself (a subgroup, which is all the search needs), by trying every
permutation for n <= :data:`MAX_SERVERS`.

How the search uses G (lex-leader): strategies are sequences (layer options in layer order, then
block servers in block order, identical blocks on non-decreasing servers). The image pi*(S) maps
every entry and re-sorts each class of identical blocks (same fields, so interchangeable), which is
again in the search space with the same objective. Only the orbit's lexicographically least member
needs to be searched; a prefix can be cut when every completion S has pi*(S) < S for some pi:

* layers: pi maps layer options entry by entry, so pi(P) < P on the placed layers implies
  pi*(S) < S for every completion;
* blocks, for pi fixing every layer option (pi(P) = P on the layers): in a class, the placed
  blocks are its r smallest servers Q, and the r-th smallest of pi(whole class) is at most the r-th
  smallest of pi(Q). So pi*(S) is entry by entry at most U = (per class, sorted pi(Q)) on the placed
  positions; if U < the placed prefix lexicographically, then pi*(S) < S.

The orbit's least member satisfies S <= pi*(S) for every pi, so neither rule ever cuts its prefixes.
"""

from __future__ import annotations

import itertools

import numpy as np

from topoopt_ilp.core.strategy import unit_servers

__all__ = ["MAX_SERVERS", "strategy_symmetries"]

#: Every permutation is tried up to this many servers (8! = 40,320; 9! would take a few seconds).
MAX_SERVERS = 8


def _ring_family(members: np.ndarray) -> frozenset:
    """TotientPerms' rings of a coset listed in order: member r -> member r + p, gcd(p, k) = 1."""
    k = len(members)
    return frozenset(
        frozenset(zip(members.tolist(), np.roll(members, -p).tolist())) for p in range(1, k) if np.gcd(p, k) == 1
    )


def strategy_symmetries(
    n: int, opt_layer: np.ndarray, opt_k: np.ndarray, opt_s: np.ndarray, ordered_rings: np.ndarray
) -> np.ndarray:
    """The symmetries of the module docstring other than the identity, as an option map: row g
    gives, for every option o (layer opt_layer[o], degree opt_k[o], start opt_s[o]), the index of
    its image option, and column ``len(opt_layer) + v`` the image of server v (so the array is
    (|G| - 1, options + n)). ``ordered_rings[o]``: option o forms a group whose rings are only
    TotientPerms' (more than ALL_RINGS_UP_TO members and bytes to AllReduce), checked by their family.
    Empty when n > :data:`MAX_SERVERS` (no symmetry used)."""
    n_opt = len(opt_layer)
    if n > MAX_SERVERS or n_opt == 0:
        return np.zeros((0, n_opt + n), dtype=np.int64)
    perms = np.array(list(itertools.permutations(range(n))), dtype=np.int64)[1:]  # the identity first: skip it
    inverse = np.argsort(perms, axis=1)
    weights = n ** np.arange(n, dtype=np.int64)  # a unit map as one integer (n^n < 2^63 for n <= 15)
    image = np.zeros((len(perms), n_opt), dtype=np.int64)
    keep = np.ones(len(perms), dtype=bool)
    rows = np.arange(len(perms))[:, None]
    for o in range(n_opt):
        units = unit_servers(n, int(opt_k[o]), int(opt_s[o]))
        conjugated = perms[rows, units[inverse]]  # pi(a(pi^-1(u))) for every unit u
        same_kind = np.flatnonzero((opt_layer == opt_layer[o]) & (opt_k == opt_k[o]))
        codes = np.array([unit_servers(n, int(opt_k[q]), int(opt_s[q])) @ weights for q in same_kind])
        found = conjugated @ weights
        match = found[:, None] == codes[None, :]
        keep &= match.any(axis=1)
        image[:, o] = same_kind[match.argmax(axis=1)]
    perms, image = perms[keep], image[keep]
    for o in np.flatnonzero(ordered_rings):  # TotientPerms rings must map onto the image's rings
        members = np.arange(int(opt_s[o]), n, n // int(opt_k[o]))
        ok = []
        for pi, im in zip(perms, image):
            target = np.arange(int(opt_s[im[o]]), n, n // int(opt_k[im[o]]))
            mapped = frozenset(frozenset((int(pi[a]), int(pi[b])) for a, b in ring) for ring in _ring_family(members))
            ok.append(mapped == _ring_family(target))
        perms, image = perms[np.array(ok, dtype=bool)], image[np.array(ok, dtype=bool)]
    return np.concatenate([image, perms], axis=1)
