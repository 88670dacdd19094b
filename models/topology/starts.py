"""Topologies rounded from the strong topology_routing model's LP relaxation.

Primal heuristics for :func:`~topoopt_ilp.models.topology.solve.solve_topology_routing`: each rounding is scored by
the model with its links fixed (an LP) and proves itself optimal when it meets the relaxation's
bound (``_start_proof``); a rounding the model rejects (a degree left open, a parallel link where
none is allowed) is skipped there. Nothing here needs to be right, only cheap. Two kinds:
:func:`relaxation_rounding` (the relaxation's links) and :func:`ring_matching_starts` (TopoOpt's
shape of design, ring plus matched links, for the ring classes the relaxation favours).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np

from topoopt_ilp.core.graph import split_link
from topoopt_ilp.heuristic.mp_links import blossom_matching

if TYPE_CHECKING:
    from topoopt_ilp.models.topology.milp import TopologyRoutingModel

__all__ = ["RING_CLASSES_TRIED", "relaxation_rounding", "ring_matching_starts"]

#: :func:`ring_matching_starts` lays each of this many ring classes of the heaviest group (largest
#: relaxation share first), and from degree 4 every two of them. Three because on the mixes of
#: benchmarks/relaxation_rounding.py a third class proves more of them optimal and further classes
#: prove none more (docs/notes/exact-topology-starts.md).
RING_CLASSES_TRIED = 3


# ------------------------------------------------------------------------------------------------
# Rounding
#
# The relaxation gives fractional link counts xbar[e] and ring shares z[c] (lam x the share of ring c
# in its group). Per group, the ring class of largest summed z is laid first (undirected links: a
# ring and its reverse use the same links, one class; groups by bytes, largest first; a ring whose
# members lack the free ports is left out). The remaining ports then go greedily to the pairs of
# largest residual xbar - X (a pair taken loses one unit of its key), then to any pair with ports at
# both ends (the MP bytes break ties); ports left at one server are closed by splitting a link.
# Only the best ring class per group: the second best, tried as well, proved no more of the benchmark
# mixes optimal (docs/notes/exact-topology-starts.md).
# ------------------------------------------------------------------------------------------------
def relaxation_rounding(m: TopologyRoutingModel, values: np.ndarray, degree: int, multi_links: bool) -> np.ndarray:
    """A link-count matrix (n x n, int64; symmetric when undirected) rounded from the relaxation
    ``values`` of the strong model ``m``."""
    n = m.n
    xbar = np.zeros((n, n))
    xbar[m.edges[:, 0], m.edges[:, 1]] = np.maximum(values[m.x_cols], 0.0)
    if not m.directed:
        xbar = xbar + xbar.T
    X = np.zeros((n, n), dtype=np.int64)
    best = _best_ring_classes(m, np.maximum(values[m.z_cols], 0.0))
    for g in sorted(best, key=lambda g: -_ring_bytes(m, g, best[g])):  # heaviest group first
        _lay_ring(X, best[g], degree, m.directed, multi_links)
    _fill(X, xbar, m.mp + m.mp.T if not m.directed else m.mp, degree, m.directed, multi_links)
    return X


def _ring_classes(m: TopologyRoutingModel, z: np.ndarray) -> dict[int, list[list[tuple[int, int]]]]:
    """Per group, the link sets of its candidate rings' classes, largest summed share first
    (undirected: unordered pairs, so a ring and its reverse are one class; ties in candidate order)."""
    classes: dict[int, dict[tuple, list]] = {}
    for c, ring in enumerate(m.rings):
        o = ring.order
        arcs = [(o[i], o[(i + 1) % len(o)]) for i in range(len(o))]
        if not m.directed:
            arcs = sorted({(min(a, b), max(a, b)) for a, b in arcs})
        classes.setdefault(ring.group, {}).setdefault(tuple(arcs), [0.0, arcs])[0] += float(z[c])
    return {g: [arcs for _, arcs in sorted(cls.values(), key=lambda e: -e[0])] for g, cls in classes.items()}


def _ring_bytes(m: TopologyRoutingModel, g: int, arcs: list[tuple[int, int]]) -> float:
    """How heavy group ``g``'s ring on ``arcs`` is: bytes per member (model units) x its links."""
    return float(m.ring_units[g]) * len(arcs)


def _best_ring_classes(m: TopologyRoutingModel, z: np.ndarray) -> dict[int, list[tuple[int, int]]]:
    """Per group, the link set of its candidate rings' class with the largest summed share."""
    return {g: cls[0] for g, cls in _ring_classes(m, z).items()}


def _free(X: np.ndarray, degree: int, directed: bool) -> tuple[np.ndarray, np.ndarray]:
    """Free ports (new arrays): (out, in) when directed; when not, one array twice, so that taking a
    port at either end of a link counts once at each."""
    out = degree - X.sum(axis=1)
    return (out, degree - X.sum(axis=0)) if directed else (out, out)


def _lay_ring(X: np.ndarray, arcs: list[tuple[int, int]], degree: int, directed: bool, multi_links: bool) -> None:
    """Add the ring's links when every member has the ports (and, without multi-links, none is
    there yet); else leave X as it is."""
    a, b = np.array(arcs).T
    need_out = np.bincount(a, minlength=len(X)) + (0 if directed else np.bincount(b, minlength=len(X)))
    need_in = np.bincount(b, minlength=len(X)) if directed else need_out
    free_out, free_in = _free(X, degree, directed)
    if (need_out > free_out).any() or (need_in > free_in).any() or (not multi_links and X[a, b].any()):
        return
    X[a, b] += 1
    if not directed:
        X[b, a] += 1


def _fill(X: np.ndarray, xbar: np.ndarray, tie: np.ndarray, degree: int, directed: bool, multi_links: bool) -> None:
    """Give the free ports to pairs by residual relaxation links, then to any pair (MP bytes first)."""
    n = len(X)
    key = np.maximum(xbar - X, 0.0) + 1e-6 * tie / max(float(tie.max(initial=0.0)), 1e-300) + 1e-9
    key[np.diag_indices(n)] = -np.inf
    if not directed:
        key[np.tril_indices(n)] = -np.inf
    if not multi_links:
        key[X > 0] = -np.inf
    free_out, free_in = _free(X, degree, directed)  # one array for both when undirected
    for _ in range(n * degree):
        key[free_out <= 0, :] = -np.inf
        key[:, free_in <= 0] = -np.inf
        i, j = divmod(int(np.argmax(key)), n)
        if not np.isfinite(key[i, j]):
            _close_ports(X, free_out, free_in, directed, multi_links)
            return
        X[i, j] += 1
        free_out[i] -= 1
        free_in[j] -= 1
        if not directed:
            X[j, i] += 1
        key[i, j] = key[i, j] - 1.0 if multi_links else -np.inf


def _close_ports(X: np.ndarray, free_out: np.ndarray, free_in: np.ndarray, directed: bool, multi_links: bool) -> None:
    """Ports no pair can take (the last ones at one server, or, without multi-links, at servers
    already linked): for a server a with a free (out) port and b with a free (in) port, a link
    u - v becomes u - b and a - v (directed: u -> b and a -> v), while one fits."""
    for _ in range(int(free_out.sum())):
        if directed:
            a, b = int(np.argmax(free_out > 0)), int(np.argmax(free_in > 0))
        else:
            ports = np.repeat(np.arange(len(X)), np.maximum(free_out, 0))
            if len(ports) < 2:
                return
            a, b = int(ports[0]), int(ports[1])
        if free_out[a] <= 0 or free_in[b] <= 0:
            return
        us, vs = np.nonzero(X)
        ok = (us != b) & (vs != a)
        if not multi_links:
            ok &= (X[us, b] == 0) & (X[a, vs] == 0)
        if not ok.any():
            return
        split_link(X, int(us[ok][0]), int(vs[ok][0]), a, b, directed)
        free_out[a] -= 1
        free_in[b] -= 1


# ------------------------------------------------------------------------------------------------
# Ring + matching starts (undirected links)
#
# TopoOpt's shape of design (docs/methods/heuristic.md): the heaviest AllReduce group's rings as direct links,
# the other ports by repeated maximum-weight matching on the rest of the demand. The relaxation says
# which rings to try: the heaviest group's (largest bytes per member x members) first
# RING_CLASSES_TRIED classes by summed share, each alone and then (degree 4 and up: a ring takes two
# ports of each member) every two of them together, as TotientPerms lays two strides when the
# AllReduce has four ports. Per ring layout, two starts: the free ports matched on
#   W = M + M^T                      (the MP bytes), and on
#   W + the other groups' ring pairs (their best class's links, weighted by bytes per member),
# each round (networkx's exact Blossom, maximum cardinality, so the ports fill) weighing a pair
# W[i, j] / (1 + links it has), as TopoOpt's repeated matching does; ports left over are closed by
# splitting a link. Why not the relaxation's own links for the free ports, as relaxation_rounding
# does: a tight relaxation may put its weight on the wrong ring class, and with either ring forced
# its links may still round to the wrong matching, while the ring plus the MP bytes' matching is the
# optimum; these starts prove at least twice as many benchmark mixes optimal as the rounding
# (docs/notes/exact-topology-starts.md).
# ------------------------------------------------------------------------------------------------
def ring_matching_starts(
    m: TopologyRoutingModel, values: np.ndarray, degree: int, multi_links: bool
) -> list[np.ndarray]:
    """Distinct link-count matrices (n x n, int64, symmetric): one-ring layouts first, best ring
    class first; none for directed links or a demand without AllReduce groups."""
    if m.directed or not m.rings:
        return []
    classes = _ring_classes(m, np.maximum(values[m.z_cols], 0.0))
    heaviest = max(classes, key=lambda g: _ring_bytes(m, g, classes[g][0]))
    mp = m.mp + m.mp.T
    with_rings = mp.copy()
    for g, cls in classes.items():
        if g != heaviest:
            a, b = np.array(cls[0]).T
            with_rings[a, b] += m.ring_units[g]
            with_rings[b, a] += m.ring_units[g]
    tried = classes[heaviest][:RING_CLASSES_TRIED]
    layouts = [(arcs,) for arcs in tried] + (list(itertools.combinations(tried, 2)) if degree >= 4 else [])
    starts, seen = [], set()
    for rings in layouts:
        for weights in (mp, with_rings):
            X = np.zeros((m.n, m.n), dtype=np.int64)
            for arcs in rings:
                _lay_ring(X, arcs, degree, False, multi_links)
            _match_free_ports(X, weights, degree, multi_links)
            if X.tobytes() not in seen:
                seen.add(X.tobytes())
                starts.append(X)
    return starts


def _match_free_ports(X: np.ndarray, weights: np.ndarray, degree: int, multi_links: bool) -> None:
    """Fill X's free ports by rounds of maximum-weight matching (see the comment block above)."""
    n = len(X)
    for _ in range(degree):
        free = degree - X.sum(axis=1)
        open_pair = np.triu((free[:, None] > 0) & (free[None, :] > 0), 1)
        if not multi_links:
            open_pair &= X == 0
        i, j = np.nonzero(open_pair)
        if not len(i):
            break
        e = blossom_matching(i, j, weights[i, j] / (1 + X[i, j]) + 1e-9, n, maxcardinality=True)
        X[i[e], j[e]] += 1
        X[j[e], i[e]] += 1
    free = degree - X.sum(axis=1)
    _close_ports(X, free, free, False, multi_links)
