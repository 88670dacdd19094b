"""The independent check of a chosen topology's degrees (docs/guide/collectives.md): a link-count
matrix against a degree d, regular or at most d, undirected or directed. It shares no code with the
models that choose topologies; it reads the matrix as the core types define it (``matrix[u, v]``
links u -> v, symmetric when the links are undirected, an undirected link counted once per end).
"""

from __future__ import annotations

import numpy as np

__all__ = ["degree_violations"]


def degree_violations(matrix, degree: int, *, directed: bool, regular: bool, multi_links: bool = True) -> list[str]:
    """What is wrong with ``matrix`` as a topology of degree ``degree`` (empty: nothing): a negative
    or non-integral count, a self-loop, an asymmetric undirected matrix, a parallel link where none
    is allowed, a server whose degree (out- and in-degree when directed) is not ``degree``
    (``regular``) or exceeds it."""
    m = np.asarray(matrix)
    out: list[str] = []
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        return [f"not a square matrix: shape {m.shape}"]
    if (m < 0).any() or not np.array_equal(m, np.round(m)):
        out.append("a link count is negative or not an integer")
    loops = [int(v) for v in range(m.shape[0]) if m[v, v] != 0]
    if loops:
        out.append(f"server {loops[0]} has a link to itself")
    if not directed and not np.array_equal(m, m.T):
        out.append("undirected links but the matrix is not symmetric")
    if not multi_links and (m > 1).any():
        u, v = (int(k) for k in np.argwhere(m > 1)[0])
        out.append(f"{int(m[u, v])} parallel links {u} -> {v}, but parallel links are not allowed")
    views = [("out-degree", m.sum(axis=1)), ("in-degree", m.sum(axis=0))] if directed else [("degree", m.sum(axis=1))]
    for label, counts in views:
        for v, k in enumerate(counts):
            if (regular and k != degree) or k > degree:
                out.append(f"server {v} has {label} {int(k)}, {'not' if regular else 'more than'} {degree}")
    return out
