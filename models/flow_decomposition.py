"""Turn a model's arc flows into explicit paths, so a MILP's routing can be written down and scored.

The evaluator never sees arc flows: it sees paths with fractions. This module is on the model side
(it decodes what a model produced); the evaluator recomputes the loads from the paths on its own.
"""

from __future__ import annotations

import numpy as np

__all__ = ["decompose_source_flow", "shortest_path"]


def decompose_source_flow(flow: np.ndarray, source: int, supply: np.ndarray, tol: float = 1e-9) -> list[tuple[list[int], float]]:
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
                cycle = path[position[nxt]:] + [nxt]
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


def shortest_path(X: np.ndarray, s: int, t: int) -> list[int]:
    """One shortest path s -> t on link-count matrix ``X`` (for pairs whose decoded flow was noise)."""
    from topoopt_ilp.errors import UnsupportedError
    from topoopt_ilp.graph import hop_distances

    dist, _ = hop_distances(X)
    if dist[s, t] < 0:
        raise UnsupportedError(f"the decoded topology does not connect {s} and {t}")
    path = [s]
    while path[-1] != t:
        cur = path[-1]
        path.append(int(next(v for v in np.flatnonzero(X[cur] > 0) if dist[v, t] == dist[cur, t] - 1)))
    return path
