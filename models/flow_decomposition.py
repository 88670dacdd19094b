"""Turn a model's arc flows into explicit paths, so a MILP's routing can be written down and scored.

The evaluator never sees arc flows: it sees paths with fractions. This module is on the model side
(it decodes what a model produced); the evaluator recomputes the loads from the paths on its own.
"""

from __future__ import annotations

import numpy as np

from topoopt_ilp.core.graph import hop_distances
from topoopt_ilp.errors import UnsupportedError

__all__ = [
    "decompose_layered_flow",
    "decompose_source_flow",
    "layered_arcs",
    "paths_on_links",
    "shortest_path",
    "without_loops",
]


def decompose_source_flow(
    flow: np.ndarray, source: int, supply: np.ndarray, tol: float = 1e-9
) -> list[tuple[list[int], float]]:
    """Paths (and their flow) that carry ``supply[t]`` from ``source`` to every node t.

    ``flow[i, j]`` is the source's flow on arc i -> j. Flow cycles (which an optimal solution may
    contain without cost) are cancelled on the way. Amounts below ``tol`` times the largest supply
    are treated as numerical noise.
    """
    f = np.where(flow > 0, flow, 0.0).astype(float)
    remaining = np.where(supply > 0, supply, 0.0).astype(float)
    remaining[source] = 0.0
    eps = tol * max(float(remaining.max(initial=0.0)), 1e-300)
    paths: list[tuple[list[int], float]] = []
    n = f.shape[0]
    for _ in range(n * n * 4 + 16):  # each round zeroes an arc or a supply: bounded
        if remaining.max(initial=0.0) <= eps:
            break
        # Walk from the source along the heaviest arcs until a node that still needs flow.
        path = [source]
        position = {source: 0}
        node = source
        while True:
            if node != source and remaining[node] > eps:
                break
            nxt = int(np.argmax(f[node]))
            if f[node, nxt] <= eps:
                path = []  # dead end: the remaining supply is numerical noise
                break
            if nxt in position:  # a cycle: cancel it and restart the walk
                cycle = path[position[nxt] :] + [nxt]
                amount = min(f[a, b] for a, b in zip(cycle, cycle[1:]))
                for a, b in zip(cycle, cycle[1:]):
                    f[a, b] -= amount
                path = None
                break
            position[nxt] = len(path)
            path.append(nxt)
            node = nxt
        if path is None:
            continue
        if not path:
            break
        amount = min(min(f[a, b] for a, b in zip(path, path[1:])), remaining[node])
        for a, b in zip(path, path[1:]):
            f[a, b] -= amount
        remaining[node] -= amount
        paths.append((path, float(amount)))
    return paths


def layered_arcs(n: int, sources: np.ndarray, max_hops: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The arcs of hop-layered flows, as arrays (source, hop, tail, head): flow of source s whose
    h-th hop is tail -> head. Hop 1 leaves s; later hops neither leave nor enter s (an optimal flow
    never returns to its source), so a unit delivered at hop h has travelled exactly h links."""
    sources = np.asarray(sources, dtype=np.int64)
    S1, V1 = np.nonzero(sources[:, None] != np.arange(n)[None, :])
    src, hop, tail, head = [sources[S1]], [np.ones(len(S1), dtype=np.int64)], [sources[S1]], [V1]
    if max_hops >= 2:
        Ss, Us, Vs = np.meshgrid(sources, np.arange(n), np.arange(n), indexing="ij")
        ok = (Us != Vs) & (Us != Ss) & (Vs != Ss)
        Ss, Us, Vs = Ss[ok], Us[ok], Vs[ok]
        for h in range(2, max_hops + 1):
            src.append(Ss), hop.append(np.full(len(Ss), h)), tail.append(Us), head.append(Vs)
    return tuple(np.concatenate(v).astype(np.int64) for v in (src, hop, tail, head))  # type: ignore[return-value]


def decompose_layered_flow(
    n: int, source: int, hop: np.ndarray, tail: np.ndarray, head: np.ndarray, amount: np.ndarray
) -> list[tuple[list[int], float]]:
    """Paths (and their flow) of one source's hop-layered flows (arrays as :func:`layered_arcs`
    gives, restricted to that source). Decomposed in the layered graph - node (h, v): the flow has
    reached v at hop h - so no path has more hops than the layers; what reaches (h, v) and does not
    go on at hop h + 1 is delivered to v. A walk that revisits a server has its loop cut."""
    keep = amount > 0
    hop, tail, head, amount = hop[keep], tail[keep], head[keep], amount[keep]
    if not len(hop):
        return []
    hmax = int(hop.max())
    N = 1 + hmax * n + n  # the source, (layer, server) nodes, one sink per server

    def node(h: np.ndarray, v: np.ndarray) -> np.ndarray:
        return 1 + (h - 1) * n + v

    flow = np.zeros((N, N))
    tails = np.where(hop == 1, 0, node(np.maximum(hop - 1, 1), tail))
    np.add.at(flow, (tails, node(hop, head)), amount)
    inflow = flow.sum(axis=0)[1 : 1 + hmax * n].reshape(hmax, n)  # reaches v at hop h
    forward = flow.sum(axis=1)[1 : 1 + hmax * n].reshape(hmax, n)  # leaves v at hop h + 1
    delivered = np.maximum(inflow - forward, 0.0)
    hh, vv = np.nonzero(delivered)
    flow[node(hh + 1, vv), 1 + hmax * n + vv] = delivered[hh, vv]
    supply = np.zeros(N)
    supply[1 + hmax * n :] = delivered.sum(axis=0)
    return [
        (without_loops([source] + [int((x - 1) % n) for x in p[1:-1]]), a)
        for p, a in decompose_source_flow(flow, 0, supply)
    ]


def without_loops(walk: list[int]) -> list[int]:
    """The walk with every loop cut out (a server visited twice keeps its first visit and continues
    from its last). Hop-layered flows are acyclic in (hop, server) but may revisit a server at a
    later hop (a routing the verifier rejects); cutting the loop only lowers link loads and hops."""
    out: list[int] = []
    for v in walk:
        if v in out:
            del out[out.index(v) + 1 :]
        else:
            out.append(v)
    return out


def shortest_path(X: np.ndarray, s: int, t: int) -> list[int]:
    """One shortest path s -> t on link-count matrix ``X`` (for pairs whose decoded flow was noise)."""
    dist, _ = hop_distances(X)
    if dist[s, t] < 0:
        raise UnsupportedError(f"the decoded topology does not connect {s} and {t}")
    path = [s]
    while path[-1] != t:
        cur = path[-1]
        path.append(int(next(v for v in np.flatnonzero(X[cur] > 0) if dist[v, t] == dist[cur, t] - 1)))
    return path


def paths_on_links(
    X: np.ndarray,
    decoded: dict[tuple[int, int], list[tuple[list[int], float]]],
    wanted: list[tuple[int, int]],
    keep_unconnected: bool,
) -> list[tuple[list[int], float]]:
    """(path, fraction of its pair) rows from decoded (path, amount) lists, without solver noise.

    Flow on a link the rounded topology ``X`` lacks (a link count within integrality tolerance of 0)
    is noise: such paths are dropped (measured: 1.5e-8 of a pair on such a link, which the evaluator
    scores as an infinite bandwidth term). A ``wanted`` pair left without a path, or whose flow fell
    below the decomposition's tolerance, takes a shortest path. When ``X`` has none: with
    ``keep_unconnected`` the pair keeps its decoded paths, so that the evaluator sees a design that
    does not carry it; otherwise (or with no decoded path either) UnsupportedError."""
    paths = {
        pair: kept
        for pair, plist in decoded.items()
        if (kept := [(p, a) for p, a in plist if all(X[u, v] > 0 for u, v in zip(p, p[1:]))])
    }
    missing = [pair for pair in wanted if pair not in paths]
    if missing:  # rare (solver noise): only then are the hop distances computed
        dist = hop_distances(X)[0]
        for pair in missing:
            keep = keep_unconnected and dist[pair] < 0 and pair in decoded
            paths[pair] = decoded[pair] if keep else [(shortest_path(X, *pair), 1.0)]
    rows = []
    for plist in (paths[pair] for pair in sorted(paths)):
        total = sum(a for _, a in plist)
        rows += [(p, a / total) for p, a in plist]
    return rows
