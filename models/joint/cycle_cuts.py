"""A cut bound on the bandwidth term over every degree-2 topology: min over topologies, max over cuts.

With undirected links, degree d = 2 and every interface used (``regular``), a topology is a 2-regular
loopless multigraph: a disjoint union of cycles, a cycle of two servers being a double link. On
n <= :data:`MAX_SERVERS` servers there are few of them (1, 0, 1, 1, 6, 22, 130, 822, 6202 for
n = 0..8, OEIS A002137), so a bound can range over all of them.

Bound. Let T be the bandwidth term of a design (topology X, ring split, routing): every arc carries
at most B T bytes per iteration. For any server set A, every byte from A to its complement crosses
an arc leaving A at least once, and likewise into A; an AllReduce group with members on both sides
sends, on each of its rings (a cyclic order of its members, whatever order), at least one ring
transfer of r_g = 2(k-1)/k S_g bytes out of A and one into A, so at least r_g each way summed over
its ring split (fractions summing to 1). Hence, with c_X(A) the links between A and the rest,

    T >= cross(A) / (c_X(A) B),   cross(A) = max(bytes A -> rest, bytes rest -> A) + sum over split groups r_g,

and T = 0 is impossible when c_X(A) = 0 and cross(A) > 0 (a traffic pair in two components). In a
cycle of X any two of its edges cut it into two arcs, one of them A, with c_X(A) = 2 links
(A closed under the other components); a double link {u, v} cuts {u} with 2 links; a component
(when X has several) cuts itself with 0. So every design on X has T >= t(X), the largest of those
ratios, and every design at all has T >= min over X of t(X): the bound. Without ``multi_links`` the
minimum runs over the simple topologies only (no double links), a subset of the same list.

Monotone: cross(A) only grows when bytes are added (a pair or a group's bytes), so t(X) and its
minimum do too: the bound is valid at every node of the strategy search (a partial strategy's
traffic is part of every completion's).

On a cycle the cut condition is close to sufficient (for undirected demands it is, by Okamura and
Seymour: every terminal lies on the outer face), so the bound is often tight: on the 16 best leaves of
dlrm-mini-8-d2 it equals the topology MILP's optimum, at about 1 ms instead of 2-5 s.
"""

from __future__ import annotations

import itertools
from functools import lru_cache

import numpy as np

from topoopt_ilp.core.instance import Cluster

__all__ = ["MAX_SERVERS", "CycleCutBound", "applies", "two_regular_multigraphs"]

#: Servers up to which the table of every topology is built (6202 topologies x 28 cuts at n = 8;
#: n = 9 would take 52,552 x 36 and about 5 ms per bound).
MAX_SERVERS = 8
#: Weight of a cut with no link (a component of a disconnected topology): any byte across it
#: makes that topology's bound infinite for all purposes, and zero bytes keep it at zero.
_NO_LINK = 1e30


def applies(cluster: Cluster) -> bool:
    """True when the bound is defined for the cluster: undirected, degree 2, every interface used,
    3 <= n <= :data:`MAX_SERVERS`."""
    return not cluster.directed and cluster.degree == 2 and cluster.regular and 3 <= cluster.servers <= MAX_SERVERS


def two_regular_multigraphs(n: int, multi_links: bool = True) -> list[tuple[tuple[int, ...], ...]]:
    """Every 2-regular loopless multigraph on servers 0..n-1, as its cycles (each starting at its
    least server, the second server less than the last: one listing per cycle); a 2-tuple is a
    double link (only with ``multi_links``)."""
    out: list[tuple[tuple[int, ...], ...]] = []

    def extend(rest: tuple[int, ...], cycles: tuple[tuple[int, ...], ...]) -> None:
        if not rest:
            out.append(cycles)
            return
        first, others = rest[0], rest[1:]
        for size in range(1 if multi_links else 2, len(others) + 1):
            for chosen in itertools.combinations(others, size):
                left = tuple(v for v in others if v not in chosen)
                for order in itertools.permutations(chosen):
                    if size >= 2 and order[0] > order[-1]:  # the same cycle read backwards
                        continue
                    extend(left, cycles + ((first,) + order,))

    extend(tuple(range(n)), ())
    return out


@lru_cache(maxsize=8)
def _cut_table(n: int, multi_links: bool) -> np.ndarray:
    """(cuts, topologies) index into ``[cross / 2, cross * _NO_LINK]`` (length 2^(n+1)): per topology
    (column) its cuts, a server bitmask m standing for cross(m) / 2 (two links across) and
    2^n + m for a component's own cut (no link across), padded by repeating its first cut."""
    columns = []
    for cycles in two_regular_multigraphs(n, multi_links):
        cuts = []
        for cycle in cycles:
            if len(cycles) > 1:
                cuts.append((1 << n) + sum(1 << v for v in cycle))
            if len(cycle) == 2:
                cuts.append(1 << cycle[0])
                continue
            for i, j in itertools.combinations(range(len(cycle)), 2):  # edges (i, i+1) and (j, j+1)
                cuts.append(sum(1 << v for v in cycle[i + 1 : j + 1]))
        columns.append(cuts)
    width = max(len(c) for c in columns)
    return np.array([c + [c[0]] * (width - len(c)) for c in columns], dtype=np.intp).T.copy()


class CycleCutBound:
    """The bound of the module docstring for one cluster (``applies(cluster)`` must hold)."""

    def __init__(self, cluster: Cluster) -> None:
        n = cluster.servers
        self.n = n
        self.link_bytes_per_s = cluster.link_bytes_per_s
        self.cuts = _cut_table(n, cluster.multi_links)
        self._scaled = np.empty(2 << n)  # [cross / 2, cross * _NO_LINK], what the table indexes
        # inside[m, v] = 1 when server v is in the set of bitmask m (every subset of the servers)
        self.inside = ((np.arange(1 << n)[:, None] >> np.arange(n)[None, :]) & 1).astype(float)

    def group_split(self, members) -> np.ndarray:
        """(2^n,) 1.0 for every server set that has members of the group on both sides, else 0.0."""
        count = self.inside[:, np.asarray(members, dtype=np.int64)].sum(axis=1)
        return ((count > 0) & (count < len(members))).astype(float)

    def crossing(self, mp: np.ndarray, ring_cross: np.ndarray) -> np.ndarray:
        """(2^n,) cross(A) for every server set A: ``mp`` the model-parallel bytes, ``ring_cross``
        the summed r_g of the groups each set splits."""
        a_to_rest = ((self.inside @ mp) * (1.0 - self.inside)).sum(axis=1)
        rest_to_a = ((self.inside @ mp.T) * (1.0 - self.inside)).sum(axis=1)
        return np.maximum(a_to_rest, rest_to_a) + ring_cross

    def bandwidth_floor(self, mp: np.ndarray, ring_cross: np.ndarray) -> float:
        """min over topologies of the largest cross(A) / (links B) over their cuts, in seconds."""
        cross = self.crossing(mp, ring_cross)
        if not cross.any():
            return 0.0
        half = 1 << self.n
        np.multiply(cross, 0.5, out=self._scaled[:half])
        np.multiply(cross, _NO_LINK, out=self._scaled[half:])
        return float(self._scaled[self.cuts].max(axis=0).min()) / self.link_bytes_per_s
