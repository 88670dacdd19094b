"""Chunk-level collective schedules without a solver: a greedy list schedule for any topology, the ring
schedule on a Hamiltonian ring, and the two transformations that turn AllGather schedules into
ReduceScatter and AllReduce ones (docs/guide/collectives.md).

* :func:`greedy_schedule` - every step, every link forwards the chunks its receiver lacks and is
  closer than its sender to a server still missing them, rarest chunk first (fewest holders), then
  the one whose missing servers are farthest. A chunk that only one server still misses moves as one
  copy, from a holder nearest to that server (an all-to-all chunk never needs two). Each step at least one chunk reaches a server that is
  closer to a server missing it, so the schedule always ends.
* :func:`ring_schedule` - the ring AllGather: in step s every server forwards to its successor the
  chunk it received in step s - 1; with ``chunks`` pieces per server, ``chunks x (P - 1)`` steps on a
  one-way ring, half that on a two-way ring (half the pieces each way).
* :func:`reduction_from_gather` - ReduceScatter is AllGather run backwards: prune an AllGather
  schedule of G's reverse to one tree per chunk (first receipt only, no branch that leads to no
  server that needs the chunk), then reverse time and every send; each send now carries the partial
  sum of its subtree, and a server sends only after all its children have (their receipts came later
  in the AllGather).
* :func:`allreduce_from_phases` - AllReduce as ReduceScatter followed by AllGather.
* :func:`retimed` - a schedule of unit steps moved onto links that take several steps (heterogeneous
  links): every send, in the order of the schedule, as early as its chunk and a free link allow.

Heterogeneous links (``delay[u, v]``: the steps a chunk takes on u -> v, the conventions of
:mod:`topoopt_ilp.core.collective`): a send's ``step`` is the step it starts; it keeps one of the
arc's parallel links busy and arrives at the end of step ``step + delay - 1``. ``delay`` None: one
step on every arc.

The conventions for chunk ids are those of :mod:`topoopt_ilp.core.collective`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

from topoopt_ilp.core.collective import Collective, Send

__all__ = [
    "chunk_demand",
    "hop_distances",
    "greedy_schedule",
    "find_ring",
    "ring_schedule",
    "reduction_from_gather",
    "allreduce_from_phases",
    "arrival",
    "finish_step",
    "retimed",
    "step_distances",
    "trimmed",
]

#: Most extensions a ring search makes before it gives up (a Hamiltonian cycle search is exponential).
RING_SEARCH_LIMIT = 200_000


def chunk_demand(collective: Collective, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The dissemination form of ``collective`` on ``n`` servers: ``origin[c]`` (the server that holds
    chunk c at the start) and ``sinks[c, v]`` (server v must hold c at the end). For ReduceScatter and
    AllReduce: that of the AllGather whose reverse (and composition) gives them."""
    p, k, servers = len(collective.servers), collective.chunks, np.asarray(collective.servers)
    sinks = np.zeros((collective.chunk_count, n), dtype=bool)
    if collective.kind == "broadcast":
        origin = np.full(k, collective.root, dtype=np.int64)
        sinks[:, servers] = True
    elif collective.kind == "alltoall":
        c = np.arange(p * p * k)
        origin = servers[c // k // p]
        sinks[c, servers[(c // k) % p]] = True
    else:
        origin = np.repeat(servers, k)
        sinks[:, servers] = True
    sinks[np.arange(origin.size), origin] = False  # an origin holds its chunk already
    return origin, sinks


def hop_distances(matrix: np.ndarray) -> np.ndarray:
    """Hop counts ``D[u, v]`` along the arcs ``matrix[u, v] > 0`` (inf where v is unreachable)."""
    m = np.asarray(matrix)
    return shortest_path(csr_matrix((m > 0).astype(np.float64)), unweighted=True, directed=True)


def step_distances(matrix: np.ndarray, delay: np.ndarray | None) -> np.ndarray:
    """The fewest steps ``D[u, v]`` for a chunk from u to reach v when arc u -> v takes ``delay[u, v]``
    steps (:func:`hop_distances` when ``delay`` is None)."""
    m = np.asarray(matrix)
    if delay is None:
        return hop_distances(m)
    weights = np.where(m > 0, np.asarray(delay), 0).astype(np.float64)
    return shortest_path(csr_matrix(weights), directed=True)


def arrival(send: Send, delay: np.ndarray | None) -> int:
    """The step at whose end ``send`` arrives."""
    return send.step if delay is None else send.step + int(delay[send.src, send.dst]) - 1


def finish_step(sends: Sequence[Send], delay: np.ndarray | None) -> int:
    """The last arrival of ``sends`` (0 when there is none)."""
    return max((arrival(s, delay) for s in sends), default=0)


def greedy_schedule(
    matrix: np.ndarray, origin: np.ndarray, sinks: np.ndarray, delay: np.ndarray | None = None
) -> list[Send]:
    """The greedy list schedule of a dissemination problem (module docstring): ``matrix[u, v]`` chunks
    per step on arc u -> v; chunk c starts at ``origin[c]`` and must reach every v with ``sinks[c, v]``.
    Every sink must be reachable from its origin. ``delay``: steps per arc (module docstring); a
    chunk on its way to a server counts as coming, a busy link takes nothing new, and a link takes a
    chunk only when no holder could bring it to the receiver in fewer steps (unless that would leave
    a step with nothing sent and nothing on its way)."""
    m = np.asarray(matrix)
    n, chunks = m.shape[0], origin.size
    dist = step_distances(m, delay)
    have = np.zeros((chunks, n), dtype=bool)
    have[np.arange(chunks), origin] = True
    tails, heads = np.nonzero(m > 0)
    span = np.ones(tails.size, dtype=np.int64) if delay is None else np.asarray(delay)[tails, heads]
    pending = np.zeros_like(have)  # on its way, arriving in a later step
    arriving: dict[int, list[tuple[int, int]]] = {}
    in_flight: list[list[int]] = [[] for _ in range(tails.size)]  # per arc: last steps of its sends
    sends: list[Send] = []
    step = 0
    while (unmet := sinks & ~have).any():
        step += 1
        # nearest and farthest server still missing each chunk, seen from every server
        near = np.where(unmet[:, None, :], dist[None, :, :], np.inf).min(axis=2)
        far = np.where(unmet[:, None, :], dist[None, :, :], -np.inf).max(axis=2)
        holders = have.sum(axis=1)
        # a chunk that one server still misses needs one copy on the move, from a holder nearest to it
        lone = unmet.sum(axis=1) == 1
        closest = np.where(have, near, np.inf).min(axis=1)
        # steps from the nearest holder of each chunk to each server: a link slower than that waits
        soonest = np.where(have[:, :, None], dist[None, :, :], np.inf).min(axis=1) if delay is not None else None
        moving = pending.any(axis=1)
        incoming = pending.copy()
        arrive_now = np.zeros_like(have)
        shift = step % tails.size  # rotate which arc chooses first, so no arc always waits
        sent = len(sends)
        for waits in (True, False):  # without the wait rule when it would leave the step empty
            if not waits and (len(sends) > sent or pending.any() or soonest is None):
                break
            for a in np.roll(np.arange(tails.size), -shift):
                u, v = int(tails[a]), int(heads[a])
                in_flight[a] = [end for end in in_flight[a] if end >= step]
                free = int(m[u, v]) - len(in_flight[a])
                if free <= 0:
                    continue
                useful = have[:, u] & ~have[:, v] & ~incoming[:, v] & (near[:, v] < near[:, u])
                if waits and soonest is not None:
                    useful &= soonest[:, v] >= span[a]
                wanted = np.flatnonzero(useful & ~(lone & (moving | (near[:, u] > closest))))
                if wanted.size == 0:
                    continue
                best = wanted[np.lexsort((wanted, -far[wanted, v], holders[wanted]))[:free]]
                incoming[best, v] = True
                moving[best] = True
                end = step + int(span[a]) - 1
                if end == step:
                    arrive_now[best, v] = True
                else:
                    pending[best, v] = True
                    arriving.setdefault(end, []).extend((int(c), v) for c in best)
                    in_flight[a].extend([end] * best.size)
                sends.extend(Send(step, int(c), u, v) for c in best)
        have |= arrive_now
        for c, v in arriving.pop(step, []):
            have[c, v], pending[c, v] = True, False
    return sends


def find_ring(matrix: np.ndarray, servers: Sequence[int], jumps: Sequence[int] | None = None) -> list[int] | None:
    """A cycle through all of ``servers`` along arcs of ``matrix`` (each arc u -> next), or None.
    A circulant on every server with a jump j coprime to n gives 0, j, 2j, ...; otherwise a
    depth-first search over the servers (relays are not used), given up after
    :data:`RING_SEARCH_LIMIT` extensions."""
    m = np.asarray(matrix) > 0
    n, servers = m.shape[0], list(servers)
    if jumps and sorted(servers) == list(range(n)):
        for j in jumps:
            if math.gcd(int(j), n) == 1:
                ring = [(i * int(j)) % n for i in range(n)]
                if all(m[ring[i], ring[(i + 1) % n]] for i in range(n)):
                    return ring
    members = set(servers)
    start, budget = servers[0], [RING_SEARCH_LIMIT]

    def extend(path: list[int], seen: set[int]) -> list[int] | None:
        if len(path) == len(servers):
            return path if m[path[-1], start] else None
        for w in np.flatnonzero(m[path[-1]]):
            w = int(w)
            if w in members and w not in seen and budget[0] > 0:
                budget[0] -= 1
                seen.add(w)
                found = extend(path + [w], seen)
                if found:
                    return found
                seen.discard(w)
        return None

    return extend([start], {start})


def ring_schedule(matrix: np.ndarray, collective: Collective, ring: Sequence[int]) -> list[Send]:
    """The ring AllGather of ``collective`` (its chunks, its servers) along ``ring`` (a cycle through
    every server, :func:`find_ring`). When every reverse arc exists too, the first half of each
    server's pieces go forward and the rest backward, both at once."""
    m = np.asarray(matrix)
    p, k = len(ring), collective.chunks
    index = {s: i for i, s in enumerate(collective.servers)}
    # two servers have one arc each way, which the one-way ring already uses
    two_way = k > 1 and p > 2 and all(m[ring[(i + 1) % p], ring[i]] > 0 for i in range(p))
    directions = [(1, range(0, (k + 1) // 2)), (-1, range((k + 1) // 2, k))] if two_way else [(1, range(k))]
    sends = []
    for direction, pieces in directions:
        for r, j in enumerate(pieces):
            for hop in range(1, p):
                step = r * (p - 1) + hop
                for i in range(p):
                    sender = ring[i]
                    first = ring[(i - direction * (hop - 1)) % p]  # whose piece the sender forwards
                    sends.append(Send(step, index[first] * k + j, sender, ring[(i + direction) % p]))
    return sends


def trimmed(sends: list[Send], origin: np.ndarray, sinks: np.ndarray, delay: np.ndarray | None = None) -> list[Send]:
    """The sends of a dissemination schedule that matter: each server's first receipt of a chunk (the
    earliest arrival), and only where it leads to a server that needs the chunk (the server itself or
    one it forwards to)."""
    first: dict[tuple[int, int], Send] = {}
    for s in sorted(sends, key=lambda s: (arrival(s, delay), s)):
        if s.dst != origin[s.chunk] and (s.chunk, s.dst) not in first:
            first[(s.chunk, s.dst)] = s
    kept = list(first.values())
    while True:  # drop leaves that need nothing, until none is left
        forwards = {(s.chunk, s.src) for s in kept}
        keep = [s for s in kept if sinks[s.chunk, s.dst] or (s.chunk, s.dst) in forwards]
        if len(keep) == len(kept):
            return sorted(keep)
        kept = keep


def reduction_from_gather(
    gather: list[Send], steps: int, origin: np.ndarray, sinks: np.ndarray, delay: np.ndarray | None = None
) -> list[Send]:
    """The ReduceScatter schedule of G from an AllGather schedule of G's reverse that ends in ``steps``
    steps (module docstring): send c: u -> v in step t becomes the partial sum of c: v -> u in step
    ``steps + 1 - t``; with ``delay`` (of G's reverse, the gather's graph) the send that arrived at
    the end of step a starts in step ``steps + 1 - a``, so that it ends in ``steps + 1 - t``."""
    return sorted(
        Send(steps + 1 - arrival(s, delay), s.chunk, s.dst, s.src, True) for s in trimmed(gather, origin, sinks, delay)
    )


def retimed(sends: list[Send], matrix: np.ndarray, origin: np.ndarray, delay: np.ndarray) -> list[Send]:
    """A dissemination schedule of unit steps on links that take ``delay[u, v]`` steps: each send, in
    the schedule's order, starts as early as its chunk is at the sender and one of the arc's parallel
    links is free; a send of a chunk that its sender never receives is dropped."""
    m = np.asarray(matrix)
    held: dict[tuple[int, int], int] = {(int(c), int(o)): 0 for c, o in enumerate(origin)}
    free_from: dict[tuple[int, int], list[int]] = {}
    out = []
    for s in sorted(sends):
        ready = held.get((s.chunk, s.src))
        if ready is None:
            continue
        links = free_from.setdefault((s.src, s.dst), [1] * int(m[s.src, s.dst]))
        k = min(range(len(links)), key=links.__getitem__)
        start = max(ready + 1, links[k])
        end = start + int(delay[s.src, s.dst]) - 1
        links[k] = end + 1
        held[(s.chunk, s.dst)] = min(end, held.get((s.chunk, s.dst), end))
        out.append(Send(start, s.chunk, s.src, s.dst, s.partial))
    return out


def allreduce_from_phases(reduce_scatter: list[Send], rs_steps: int, all_gather: list[Send]) -> list[Send]:
    """AllReduce: the ReduceScatter sends, then the AllGather sends ``rs_steps`` steps later."""
    return sorted(list(reduce_scatter) + [Send(s.step + rs_steps, s.chunk, s.src, s.dst) for s in all_gather])
