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

Heterogeneous links (``LinkModel.arcs``): the step is tau, the least alpha + chunk bytes / bandwidth
over the arcs, and a chunk holds an arc for k = ceil(t / tau - 1e-9) steps (t: its time on the
arc), so in T steps an arc of m links carries at most m floor(T / k) chunks. The cut and volume
counts then need the least T at which the arcs carry them, and the latency floor is the fewest steps
(arc lengths k) from a source to a sink. ``fluid_s`` takes the least alpha per hop and the cut's
summed bandwidth.
"""

from __future__ import annotations

import heapq
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


def _arc_rates(m: np.ndarray, collective: Collective, link: LinkModel) -> tuple[float, np.ndarray, np.ndarray, float]:
    """(step length, steps k[u, v] per arc, bandwidth[u, v], least alpha) computed from the link model."""
    n = m.shape[0]
    chunk = collective.bytes / _pieces(collective)
    alpha = np.full((n, n), float(link.alpha_s))
    bandwidth = np.full((n, n), float(link.bandwidth_Bps))
    for u, v, a, b in link.arcs:
        if u < n and v < n:
            alpha[u, v], bandwidth[u, v] = a, b
    arcs = m > 0
    seconds = alpha + chunk / bandwidth
    step = link.alpha_s + chunk / link.bandwidth_Bps
    if not link.arcs or not arcs.any():
        return step, arcs.astype(np.int64), bandwidth, float(link.alpha_s)
    step = float(seconds[arcs].min())
    k = np.where(arcs, np.maximum(1, np.ceil(seconds / step - 1e-9)), 0).astype(np.int64)
    return step, k, bandwidth, float(alpha[arcs].min())


def _steps_for(count: int, links: np.ndarray, k: np.ndarray) -> int:
    """The least T at which arcs of ``links`` links, each holding a chunk ``k`` steps, carry ``count`` chunks."""
    used = links > 0
    links, k = links[used].astype(np.int64), k[used].astype(np.int64)
    if not count or not links.size:
        return 0
    T = math.ceil(count / float((links / k).sum()))
    while int((links * (T // k)).sum()) < count:
        T += 1
    return T


def _step_distances(m: np.ndarray, k: np.ndarray, start: int) -> list[float]:
    """Fewest steps from ``start`` with arc lengths ``k`` (Dijkstra)."""
    n = m.shape[0]
    dist = [math.inf] * n
    dist[start] = 0
    heap = [(0, start)]
    while heap:
        d, u = heapq.heappop(heap)
        if d > dist[u]:
            continue
        for w in np.flatnonzero(m[u] > 0):
            nd = d + int(k[u, w])
            if nd < dist[int(w)]:
                dist[int(w)] = nd
                heapq.heappush(heap, (nd, int(w)))
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
    step_s, k, bandwidth, least_alpha = _arc_rates(m, collective, link)
    timed = [_step_distances(m, k, v) for v in range(n)] if link.arcs else dist

    hops, latency = 0, 0
    for sources, sinks in ends:
        for s in sources:
            for z in sinks:
                hops = max(hops, dist[s][z])
                latency = max(latency, timed[s][z])
    parts: dict[str, int] = {"latency": int(latency) if latency < math.inf else 0}

    cut_steps, cut_fluid = 0, 0.0
    for S in _cut_sets(n, adjacent, dist):
        inside = np.zeros(n, dtype=bool)
        inside[list(S)] = True
        into, out_of = np.outer(~inside, inside), np.outer(inside, ~inside)
        entering = sum(1 for src, snk in ends if (snk & S) and not src <= S)
        leaving = sum(1 for src, snk in ends if (src & S) and not snk <= S)
        for count, cut in ((entering, into), (leaving, out_of)):
            links = int(m[cut].sum())
            if count and links:
                steps = math.ceil(count / links) if not link.arcs else _steps_for(count, m[cut], k[cut])
                cut_steps = max(cut_steps, steps)
                rate = links * link.bandwidth_Bps if not link.arcs else float((m[cut] * bandwidth[cut]).sum())
                cut_fluid = max(cut_fluid, count * (collective.bytes / _pieces(collective)) / rate)
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
    if link.arcs:
        parts["volume"] = _steps_for(sends, m.ravel(), k.ravel())
    else:
        parts["volume"] = math.ceil(sends / total_links) if total_links else 0

    steps = max(parts.values())
    fluid = (int(hops) if hops < math.inf else 0) * least_alpha + cut_fluid
    return CollectiveBound(steps, steps * step_s, fluid, parts)


def _pieces(collective: Collective) -> int:
    return collective.chunks if collective.kind == "broadcast" else len(collective.servers) * collective.chunks
