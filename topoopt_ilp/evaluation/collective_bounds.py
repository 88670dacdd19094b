"""An independent lower bound on the finish of a collective (docs/guide/collectives.md). It shares no
code with the schedule model or the heuristics; it reads the conventions of
:mod:`topoopt_ilp.core.collective` and computes them again here.

For every chunk, its *sources* (the servers whose data it must carry: the origin, or every
participant for a reduction) and *sinks* (the servers that must end with it). In the step model a
link carries one chunk per parallel link per step, so for T steps:

* cut, into a set S: every chunk with a sink in S and a source outside S enters S at least once, so
  T >= ceil(entering chunks / links into S); out of S likewise with the links leaving S (partial
  sums may merge inside S, so one exit per chunk is all that is certain);
* the sets: every single server, every server's complement, and the BFS balls of every server
  (radius 1 .. its eccentricity - 1) and their complements;
* latency floor: T >= the largest hop distance from a source of a chunk to one of its sinks
  (the eccentricity for AllGather);
* volume: every sink but the origin receives each chunk (with copies, each receipt is one send; for
  all-to-all, whose chunks have one sink, a chunk makes at least dist(origin, sink) hops); a reduced
  chunk leaves every participant but its owner at least once. T >= ceil(sends / all links).

The time bound is T x (alpha + chunk bytes / bandwidth) for the given chunking; ``fluid_s`` =
floor x alpha + the busiest cut's bytes / its bandwidth is a bound for every chunking.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from topoopt_ilp.core.collective import Collective, LinkModel
from topoopt_ilp.core.solution import Topology

__all__ = ["CollectiveBound", "collective_lower_bound"]


@dataclass(frozen=True)
class CollectiveBound:
    """``steps``: the best of ``parts`` (name -> steps); ``seconds``: steps x the step length;
    ``fluid_s``: a bound independent of the chunking (module docstring)."""

    steps: int
    seconds: float
    fluid_s: float
    parts: dict[str, int] = field(default_factory=dict)


def _bfs(adjacent: list[list[int]], start: int) -> list[float]:
    dist = [math.inf] * len(adjacent)
    dist[start] = 0
    queue = deque([start])
    while queue:
        u = queue.popleft()
        for w in adjacent[u]:
            if dist[w] == math.inf:
                dist[w] = dist[u] + 1
                queue.append(w)
    return dist


def _chunk_ends(collective: Collective) -> list[tuple[frozenset[int], frozenset[int]]]:
    """(sources, sinks) of every chunk id."""
    servers, k, p = collective.servers, collective.chunks, len(collective.servers)
    everyone = frozenset(servers)
    kind = collective.kind
    if kind == "broadcast":
        return [(frozenset([collective.root]), everyone)] * k
    if kind == "alltoall":
        return [
            (frozenset([servers[i]]), frozenset([servers[j]])) for i in range(p) for j in range(p) for _ in range(k)
        ]
    if kind == "allgather":
        return [(frozenset([s]), everyone) for s in servers for _ in range(k)]
    if kind == "reducescatter":
        return [(everyone, frozenset([s])) for s in servers for _ in range(k)]
    return [(everyone, everyone) for _ in range(p * k)]  # allreduce


def _cut_sets(n: int, adjacent: list[list[int]], dist: list[list[float]]) -> list[frozenset[int]]:
    sets: set[frozenset[int]] = set()
    everyone = frozenset(range(n))
    for v in range(n):
        finite = [d for d in dist[v] if d < math.inf]
        for r in range(0, int(max(finite))):
            ball = frozenset(u for u in range(n) if dist[v][u] <= r)
            sets.add(ball)
            sets.add(everyone - ball)
    sets.discard(frozenset())
    sets.discard(everyone)
    return sorted(sets, key=lambda s: (len(s), sorted(s)))


def collective_lower_bound(topology: Topology | np.ndarray, collective: Collective, link: LinkModel) -> CollectiveBound:
    """The lower bound of the module docstring on ``topology`` (link counts, ``matrix[u, v]`` links
    u -> v) under ``link``."""
    m = np.asarray(topology.matrix if isinstance(topology, Topology) else topology)
    n = m.shape[0]
    adjacent = [[int(w) for w in np.flatnonzero(m[u] > 0)] for u in range(n)]
    dist = [_bfs(adjacent, v) for v in range(n)]
    ends = _chunk_ends(collective)

    hops = 0
    for sources, sinks in ends:
        for s in sources:
            for z in sinks:
                hops = max(hops, dist[s][z])
    parts: dict[str, int] = {"latency": int(hops) if hops < math.inf else 0}

    cut_steps, cut_fluid = 0, 0.0
    for S in _cut_sets(n, adjacent, dist):
        inside = np.zeros(n, dtype=bool)
        inside[list(S)] = True
        links_in = int(m[~inside][:, inside].sum())
        links_out = int(m[inside][:, ~inside].sum())
        entering = sum(1 for src, snk in ends if (snk & S) and not src <= S)
        leaving = sum(1 for src, snk in ends if (src & S) and not snk <= S)
        for count, links in ((entering, links_in), (leaving, links_out)):
            if count and links:
                steps = math.ceil(count / links)
                cut_steps = max(cut_steps, steps)
                cut_fluid = max(
                    cut_fluid, count * (collective.bytes / _pieces(collective)) / (links * link.bandwidth_Bps)
                )
    parts["cut"] = cut_steps

    sends = 0
    for sources, sinks in ends:
        if len(sources) == 1:
            (o,) = tuple(sources)
            if len(sinks) == 1:
                (z,) = tuple(sinks)
                sends += int(dist[o][z]) if dist[o][z] < math.inf else 0
            else:
                sends += len(sinks - sources)
        else:
            sends += len(sources) - 1
    total_links = int(m.sum())
    parts["volume"] = math.ceil(sends / total_links) if total_links else 0

    steps = max(parts.values())
    step_s = link.alpha_s + (collective.bytes / _pieces(collective)) / link.bandwidth_Bps
    fluid = parts["latency"] * link.alpha_s + cut_fluid
    return CollectiveBound(steps, steps * step_s, fluid, parts)


def _pieces(collective: Collective) -> int:
    return collective.chunks if collective.kind == "broadcast" else len(collective.servers) * collective.chunks
