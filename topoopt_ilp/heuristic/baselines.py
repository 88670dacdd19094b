"""Baseline topologies from TopoOpt's evaluation (docs/methods/baselines.md): random expander, demand greedy
("dheu", used for the OCS-reconfig and SiP-ML baselines) and tori.

The ideal big switch and the (oversubscribed) Fat-tree are *evaluator-level* baselines: they are
not d-regular server-to-server matrices (the authors add switch rows/columns), so they are not
built here; an evaluator models them as a non-blocking switch of per-server bandwidth ``d*B`` (or
the Fat-tree's equivalent).
"""

from __future__ import annotations

import heapq

import numpy as np
from scipy.sparse.csgraph import connected_components

from topoopt_ilp.core.graph import split_link
from topoopt_ilp.core.lazy import nx

__all__ = ["random_expander", "demand_greedy", "torus", "connect_components"]


def _pair_stubs(X: np.ndarray, stubs: np.ndarray, rng: np.random.Generator) -> None:
    """Pair free ports at random, in place, without self-loops.

    A self-pair ``(a, a)`` is fixed by swapping with another random pair; if every free port sits
    on one node, an existing link ``u - v`` not touching it is rewired to ``a - u``, ``a - v``.
    """
    stubs = rng.permutation(stubs)
    if stubs.size % 2:
        raise ValueError("odd number of free ports")
    a, b = stubs[0::2].copy(), stubs[1::2].copy()
    for _ in range(100 * (a.size + 1)):
        bad = np.flatnonzero(a == b)
        if not bad.size:
            break
        p = int(bad[0])
        q = int(rng.integers(a.size))
        if a[q] != a[p] and b[q] != b[p]:
            b[p], b[q] = b[q], b[p]
        elif ((a == a[p]) & (b == a[p])).all():
            break  # every free port is on one node: rewired below
    for x, y in zip(a.tolist(), b.tolist()):
        if x != y:
            X[x, y] += 1
            X[y, x] += 1
            continue
        # all remaining free ports on node x: rewire a link u-v not touching x
        us, vs = np.nonzero(np.triu(X, 1))
        ok = np.flatnonzero((us != x) & (vs != x))
        if not ok.size:
            raise ValueError("cannot pair ports without self-loops")
        e = int(rng.choice(ok))
        split_link(X, int(us[e]), int(vs[e]), x, x)


def _pick(masks, weight: np.ndarray | None, rng: np.random.Generator) -> int | None:
    """Index of a candidate of the first non-empty mask: at random, or the least ``weight``."""
    for mask in masks:
        cand = np.flatnonzero(mask)
        if cand.size:
            return int(rng.choice(cand)) if weight is None else int(cand[np.argmin(weight[cand])])
    return None


def _swap_edge(
    X: np.ndarray, nodes: np.ndarray, rng: np.random.Generator, weight: np.ndarray | None = None
) -> tuple[int, int] | None:
    """A link inside ``nodes`` whose removal keeps them connected: a single non-bridge link if any
    (so demand-driven parallel links are kept), else one of a parallel bundle, else any link. With
    ``weight`` (per link, n x n) the least-weighted link whose removal keeps them connected (single
    non-bridge or one of a bundle), else the least-weighted of all."""
    sub = X[np.ix_(nodes, nodes)]
    iu, ju = np.nonzero(np.triu(sub, 1))
    if not iu.size:
        return None
    G = nx.Graph()
    G.add_edges_from(zip(iu.tolist(), ju.tolist()))
    br = {frozenset(e) for e in nx.bridges(G)}
    cnt = sub[iu, ju]
    nonbr = np.array([frozenset((a, b)) not in br for a, b in zip(iu.tolist(), ju.tolist())])
    if weight is None:
        masks = (nonbr & (cnt == 1), cnt >= 2, np.ones(iu.size, dtype=bool))
    else:
        masks = ((nonbr & (cnt == 1)) | (cnt >= 2), np.ones(iu.size, dtype=bool))
    w = None if weight is None else weight[nodes[iu], nodes[ju]]
    e = _pick(masks, w, rng)
    return None if e is None else (int(nodes[iu[e]]), int(nodes[ju[e]]))


def connect_components(
    X: np.ndarray, rng: np.random.Generator, directed: bool = False, weight: np.ndarray | None = None
) -> None:
    """Join the components of a multigraph in place, keeping every degree. With ``weight`` (n x n,
    e.g. each link's load) the links given up are the least-weighted candidates instead of random.

    Undirected: the smallest component is merged into the largest: a link ``a1-a2`` of one and
    ``b1-b2`` of the other become ``a1-b1`` and ``a2-b2``. Removing a non-bridge keeps a component
    connected, so the two merge; single (non-parallel) non-bridge links are preferred to keep
    demand-driven bundles.

    Directed (strongly connected components, in- and out-degrees kept): arcs ``a1->a2`` and
    ``b1->b2`` become ``a1->b2`` and ``b1->a2``. A simple path ending at a1 never uses the arc out
    of a1, nor one starting at a2 the arc into a2, so every server of A still reaches a1 and is
    reached from a2 (and likewise in B); with the cycle a1 -> b2 ~> b1 -> a2 ~> a1 the two form one
    strongly connected component, whichever arcs are taken (single arcs are preferred).
    """
    while True:
        nc, lab = connected_components(X > 0, directed=directed, connection="strong")
        if nc <= 1:
            return
        sizes = np.bincount(lab)
        cb = int(np.argmax(sizes))
        sizes[cb] = np.iinfo(np.int64).max
        ca = int(np.argmin(sizes))
        pick = _swap_arc if directed else _swap_edge
        ea = pick(X, np.flatnonzero(lab == ca), rng, weight)
        eb = pick(X, np.flatnonzero(lab == cb), rng, weight)
        if ea is None or eb is None:
            raise ValueError("component without links: cannot connect while keeping degrees")
        (a1, a2), (b1, b2) = ea, eb
        if directed:
            for u, v, s in ((a1, a2, -1), (b1, b2, -1), (a1, b2, 1), (b1, a2, 1)):
                X[u, v] += s
            continue
        for u, v, s in ((a1, a2, -1), (b1, b2, -1), (a1, b1, 1), (a2, b2, 1)):
            X[u, v] += s
            X[v, u] += s


def _swap_arc(
    X: np.ndarray, nodes: np.ndarray, rng: np.random.Generator, weight: np.ndarray | None = None
) -> tuple[int, int] | None:
    """An arc inside ``nodes`` (a strongly connected component): a single one if any, else one of
    a parallel bundle (the least ``weight`` of them when given, else at random)."""
    sub = X[np.ix_(nodes, nodes)]
    iu, ju = np.nonzero(sub)
    if not iu.size:
        return None
    w = None if weight is None else weight[nodes[iu], nodes[ju]]
    e = _pick((sub[iu, ju] == 1, np.ones(iu.size, dtype=bool)), w, rng)
    return int(nodes[iu[e]]), int(nodes[ju[e]])


def random_expander(n: int, d: int, seed: int = 0) -> np.ndarray:
    """Connected random ``d``-regular multigraph (TopoOpt's ``random`` / Expander baseline).

    A random spanning path (a random node order) guarantees connectivity; the remaining ports are
    paired at random (parallel links allowed, no self-loops).

    Raises
    ------
    ValueError
        If ``n * d`` is odd (no ``d``-regular graph exists) or ``d < 2`` with ``n > 2``.
    """
    if (n * d) % 2:
        raise ValueError(f"n*d = {n * d} is odd: no {d}-regular graph on {n} nodes")
    if n < 2 or (d < 2 and n > 2):
        raise ValueError("need n >= 2 and d >= 2 (d = 1 cannot be connected for n > 2)")
    rng = np.random.default_rng(seed)
    X = np.zeros((n, n), dtype=np.int64)
    order = rng.permutation(n)
    X[order[:-1], order[1:]] += 1
    X[order[1:], order[:-1]] += 1
    free = d - X.sum(axis=1)
    _pair_stubs(X, np.repeat(np.arange(n), free), rng)
    return X


def demand_greedy(n: int, d: int, T: np.ndarray, seed: int = 0) -> np.ndarray:
    """TopoOpt's demand heuristic ("dheu"): links to the heaviest pairs first.

    Pairs are keyed by ``max(T_ij, T_ji)``; the heaviest pair whose endpoints both have a free port
    gets a link and its key is halved; pairs with a full endpoint are dropped. Leftover ports are
    then joined by a random path through the nodes that still have free ports, paired at random,
    and components are merged (:func:`connect_components`). Returns a connected ``d``-regular
    multigraph.
    """
    if (n * d) % 2:
        raise ValueError(f"n*d = {n * d} is odd: no {d}-regular graph on {n} nodes")
    rng = np.random.default_rng(seed)
    T = np.asarray(T, dtype=float)
    K = np.triu(np.maximum(T, T.T), 1)
    i, j = np.nonzero(K > 0)
    heap = [(-float(K[a, b]), int(a), int(b)) for a, b in zip(i, j)]
    heapq.heapify(heap)
    X = np.zeros((n, n), dtype=np.int64)
    free = np.full(n, d, dtype=np.int64)
    while heap:
        key, a, b = heapq.heappop(heap)
        if free[a] == 0 or free[b] == 0:
            continue  # drop the pair
        X[a, b] += 1
        X[b, a] += 1
        free[a] -= 1
        free[b] -= 1
        heapq.heappush(heap, (key / 2, a, b))
    # random path through nodes with free ports (connectivity first), then random pairing
    walk = rng.permutation(np.flatnonzero(free > 0))
    for a, b in zip(walk[:-1].tolist(), walk[1:].tolist()):
        if free[a] > 0 and free[b] > 0:
            X[a, b] += 1
            X[b, a] += 1
            free[a] -= 1
            free[b] -= 1
    if free.sum():
        _pair_stubs(X, np.repeat(np.arange(n), free), rng)
    if n > 1 and d >= 2:
        connect_components(X, rng)
    return X


def torus(n: int, d: int, dims: int = 2, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """Wrap-around ``dims``-D torus, ``d = 2*dims``.

    ``shape`` defaults to the most balanced factorisation of ``n`` into ``dims`` sides. A side of 2
    gives a double link (``+1`` and ``-1`` reach the same neighbour), keeping the graph d-regular.
    """
    if dims not in (2, 3):
        raise ValueError("dims must be 2 or 3")
    if d != 2 * dims:
        raise ValueError(f"a {dims}-D torus has degree {2 * dims}, got d={d}")
    if shape is None:
        best = None
        for a in range(2, n + 1):
            if n % a:
                continue
            if dims == 2:
                cand = (a, n // a)
            else:
                for b in range(2, n // a + 1):
                    if (n // a) % b == 0 and n // a // b >= 2:
                        cand2 = tuple(sorted((a, b, n // a // b)))
                        if best is None or max(cand2) - min(cand2) < max(best) - min(best):
                            best = cand2
                continue
            cand = tuple(sorted(cand))
            if min(cand) >= 2 and (best is None or max(cand) - min(cand) < max(best) - min(best)):
                best = cand
        if best is None:
            raise ValueError(f"n={n} has no {dims}-D factorisation with sides >= 2")
        shape = best
    if int(np.prod(shape)) != n or len(shape) != dims or min(shape) < 2:
        raise ValueError(f"bad torus shape {shape} for n={n}")
    X = np.zeros((n, n), dtype=np.int64)
    coords = np.array(np.unravel_index(np.arange(n), shape)).T
    for ax, side in enumerate(shape):
        for step in (1, -1):
            c = coords.copy()
            c[:, ax] = (c[:, ax] + step) % side
            X[np.arange(n), np.ravel_multi_index(c.T, shape)] += 1
    return X
