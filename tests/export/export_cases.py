"""Instances, designs and an independent check of interface assignments for the export tests."""

from __future__ import annotations

import networkx as nx
import numpy as np

from topoopt_ilp import solve
from topoopt_ilp.files import parse_instance


def fixed(n: int, d: int, links, *, directed: bool = False, regular: bool = True):
    """An instance with the fixed topology ``links`` ([i, j, count]) and the design that keeps it."""
    data = {
        "format": "topoopt-instance",
        "version": 1,
        "cluster": {
            "servers": n,
            "degree": d,
            "link_bandwidth_gbps": 100,
            "links": "directed" if directed else "undirected",
            "regular": regular,
        },
        "demand": {"mp": {"pairs": [[int(links[0][0]), int(links[0][1]), 1e6]]}},
        "fixed_topology": {"links": [list(map(int, link)) for link in links]},
    }
    inst = parse_instance(data)
    return inst, solve(inst)


def petersen():
    return fixed(10, 3, [[a, b, 1] for a, b in nx.petersen_graph().edges()])


def ring(n: int):
    return fixed(n, 2, [[i, (i + 1) % n, 1] for i in range(n)])


def check_assignment(inst, sol, plan, *, ocs: bool) -> None:
    """Independent of the exporter's code: every link once, interfaces distinct and in range, and on
    an OCS fabric each interface index a matching (undirected) or permutation (directed)."""
    n, d, directed = inst.n, inst.d, inst.cluster.directed
    ends, ifs = np.asarray(plan.ends), np.asarray(plan.interfaces)
    x = np.zeros((n, n), dtype=np.int64)
    np.add.at(x, (ends[:, 0], ends[:, 1]), 1)
    if not directed:
        assert (ends[:, 0] < ends[:, 1]).all()
        x = x + x.T
    assert np.array_equal(x, sol.topology.matrix)
    assert ((ifs >= 0) & (ifs < d)).all()
    if directed:
        tx, rx = list(zip(ends[:, 0], ifs[:, 0])), list(zip(ends[:, 1], ifs[:, 1]))
        assert len(set(tx)) == len(tx) and len(set(rx)) == len(rx)
        if inst.cluster.regular:
            assert len(tx) == n * d
    else:
        used = list(zip(ends[:, 0], ifs[:, 0])) + list(zip(ends[:, 1], ifs[:, 1]))
        assert len(set(used)) == len(used)
        if inst.cluster.regular:
            assert len(used) == n * d
    if ocs or directed:
        assert (ifs[:, 0] == ifs[:, 1]).all()
        for k in range(d):
            on_k = ends[ifs[:, 0] == k]
            if directed:  # a partial permutation: each server sends and receives at most once on k
                assert len(set(on_k[:, 0])) == len(on_k) and len(set(on_k[:, 1])) == len(on_k)
            else:  # a matching
                assert len(set(on_k.ravel())) == 2 * len(on_k)
            if inst.cluster.regular:
                assert len(on_k) == (n if directed else n // 2)


def proper_colouring(a, b, colours, n: int, d: int) -> bool:
    """Is ``colours`` a proper edge colouring with colours 0..d-1 of the links (a[e], b[e])?"""
    seen = set()
    for u, v, k in zip(np.asarray(a).tolist(), np.asarray(b).tolist(), np.asarray(colours).tolist()):
        if not 0 <= k < d or (u, k) in seen or (v, k) in seen:
            return False
        seen.update({(u, k), (v, k)})
    return True
