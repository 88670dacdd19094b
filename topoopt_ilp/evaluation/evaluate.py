"""The independent evaluator: one score for every solution, whatever produced it.

It recomputes everything from the instance, the topology and (for ``given`` routing) the
solution's rings and routes, and shares no code with the optimisation models.

Time model (docs/guide/evaluator.md), per iteration:

* link load ``L[i,j]`` = bytes crossing the arc i -> j; capacity ``c[i,j] = B * X[i,j]`` bytes/s;
* bandwidth term ``T_bw = max_{i,j} L[i,j] / c[i,j]``; latency term ``T_lat = alpha * H`` with H
  the hop count of the longest path that carries traffic;
* ``comm_time_s = T_bw + T_lat``; with a demand (no workload) ``iteration_time_s = comm_time_s``;
  with a job, ``compute_time_s`` = compute + bubble + scale-up of the job (:func:`job_term`) and the
  job's overlap rule applies as a workload's does;
  with a workload, the placement gives the demand and ``compute_time_s`` (the most loaded server;
  with ``compute_model: critical_path`` the larger of that and the critical path P of one
  micro-batch, computed here by :func:`critical_path_s`), and ``iteration_time_s = compute + comm``
  (``overlap: none``) or ``max(compute, comm)`` (``overlap: full``);
* ``throughput = 1 / T_bw``: how many iterations' worth of this traffic the network carries per
  second with the evaluated routing (with ``optimal`` routing it is the max-concurrent-flow lambda);
* ``max_link_utilization`` = busiest link's busy time / comm time; ``mean_link_utilization`` the
  mean over existing arcs.

Routing modes: ``given`` (the solution's own rings and paths), ``shortest_path`` (every pair split
equally over all its shortest paths), ``optimal`` (the max-concurrent-flow LP, solved exactly).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from topoopt_ilp.core import graph
from topoopt_ilp.core.checks import brief
from topoopt_ilp.core.instance import Instance, with_job_choice
from topoopt_ilp.core.routes import PathSet, RingSet, Routing
from topoopt_ilp.core.solution import Solution, Topology
from topoopt_ilp.core.strategy import data_parallel, parse_strategy
from topoopt_ilp.core.traffic import (
    all_to_all_pairs,
    default_rings,
    effective_demand,
    group_traffic,
    group_traffic_pairs,
    traffic_matrix,
    traffic_pairs,
)
from topoopt_ilp.errors import InputError, UnsupportedError
from topoopt_ilp.evaluation import flows

__all__ = [
    "ROUTING_MODES",
    "Metrics",
    "RoutingError",
    "arc_loads",
    "evaluate",
    "objective_value",
    "link_loads",
    "critical_path_s",
    "job_term",
]

ROUTING_MODES = ("given", "shortest_path", "optimal")
# Flow variables above which the source-aggregated MCF LP is refused: at n = 128, d = 8 (131k) it did
# not finish in 2.5 minutes (docs/notes/routing-lps.md).
MAX_OPTIMAL_ROUTING_LP = 100_000
_TOL = 1e-6


class RoutingError(InputError):
    """A solution this instance's evaluator cannot score: a ``given`` routing that does not carry
    the demand (missing or partial routes), or a topology with another number of servers."""


@dataclass(frozen=True)
class Metrics:
    """The evaluator's numbers for one (instance, topology, routing)."""

    iteration_time_s: float
    compute_time_s: float
    comm_time_s: float
    bandwidth_time_s: float
    latency_time_s: float
    throughput: float
    diameter: float
    aspl: float
    connected: bool
    max_link_utilization: float
    mean_link_utilization: float
    max_hops: int
    total_bytes: float
    group_times_s: tuple[float, ...]
    routing: str

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["group_times_s"] = list(self.group_times_s)
        return d


def objective_value(instance: Instance, metrics: Metrics) -> float:
    """The instance's objective read off the metrics (``iteration_time`` -> ``iteration_time_s`` ...)."""
    key = {"iteration_time": "iteration_time_s", "comm_time": "comm_time_s"}.get(instance.objective, instance.objective)
    return float(getattr(metrics, key))


# ----------------------------------------------------------------------------------------------
# Loads are kept per arc: ``key = u * n + v`` (ascending, unique) and the bytes on each, so that
# their cost grows with the traffic and its routes rather than with n^2. Every per-arc sum adds the
# same terms in the same order as a dense n x n accumulation would (numpy's ``bincount`` and
# ``add.at`` both add in order of occurrence), so the numbers are the same to the last bit.
ArcLoads = tuple[np.ndarray, np.ndarray]
_NO_LOAD: ArcLoads = (np.zeros(0, dtype=np.int64), np.zeros(0))


def _summed(keys: np.ndarray, weights: np.ndarray) -> ArcLoads:
    """The distinct ``keys`` (ascending) and the sum of each one's ``weights``, added in order."""
    uniq, inv = np.unique(keys, return_inverse=True)
    return uniq, np.bincount(inv.ravel(), weights=weights, minlength=len(uniq)).astype(np.float64, copy=False)


def _looked_up(keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``values`` at ``query`` in the sorted ``keys``; 0 where a query is not a key."""
    if not len(keys):
        return np.zeros(len(query))
    pos = np.minimum(np.searchsorted(keys, query), len(keys) - 1)
    return np.where(keys[pos] == query, values[pos], 0.0)


def _plus(a: ArcLoads, b: ArcLoads) -> ArcLoads:
    keys = np.union1d(a[0], b[0])
    return keys, _looked_up(*a, keys) + _looked_up(*b, keys)


def _dense(n: int, loads: ArcLoads) -> np.ndarray:
    out = np.zeros(n * n)
    out[loads[0]] = loads[1]
    return out.reshape(n, n)


def _given_loads(
    n: int, pair: np.ndarray, amount: np.ndarray, routing: Routing, base: float = 0.0
) -> tuple[ArcLoads, int]:
    """Loads of the traffic ``amount`` between the pairs ``pair`` (``s * n + t``, ascending, the
    pairs with traffic) routed as ``routing`` says: explicit paths first, offset routes for the
    rest. ``base`` (uniform all-to-all, offset routes only): the bytes of every other pair of
    distinct servers. Raises :class:`RoutingError` when a pair with traffic is not fully routed."""
    paths, offsets = routing.paths, routing.offset_routes
    if base and len(paths):
        raise ValueError("uniform bytes on every pair are scored on offset routes alone")
    load = _NO_LOAD
    max_hops = 0
    if len(paths):
        nodes = paths.nodes
        if nodes.max() >= n or (nodes[:, :2] < 0).any():
            raise RoutingError("a path names a server outside the topology or has fewer than 2 nodes")
        named = nodes >= 0
        if (~named[:, :-1] & named[:, 1:]).any():  # -1 pads a row at its end: inside, it names no server
            raise RoutingError("a path names server -1, which does not exist")
        if ((nodes[:, 1:] == nodes[:, :-1]) & named[:, 1:]).any():
            p = int(np.flatnonzero(((nodes[:, 1:] == nodes[:, :-1]) & named[:, 1:]).any(axis=1))[0])
            raise RoutingError(f"path {p} stays at a server for a hop (a node repeated on consecutive positions)")
        key = paths.src * n + paths.dst
        routed, share = _summed(key, paths.fraction)
        covered = share > 0
        bad = covered & (_looked_up(pair, amount, routed) > 0) & (np.abs(share - 1.0) > _TOL)
        if bad.any():
            b = int(np.flatnonzero(bad)[0])
            s, t = divmod(int(routed[b]), n)
            raise RoutingError(f"the paths of pair {s}->{t} carry {share[b]:.6g} of its traffic, not all of it")
        path_demand = _looked_up(pair, amount, key)
        load = _path_loads(n, paths, pair, amount, path_demand)
        carrying = (paths.fraction > 0) & (path_demand > 0)
        if carrying.any():
            max_hops = int(paths.hops[carrying].max())
        rest = ~np.isin(pair, routed[covered])
        pair, amount = pair[rest], amount[rest]
    if not len(pair) and not base:
        return load, max_hops
    s_idx, t_idx = np.divmod(pair, n)
    needed = np.arange(1, n) if base else np.unique((t_idx - s_idx) % n)
    if len(offsets):
        share = np.bincount(offsets.offset % n, weights=offsets.fraction, minlength=n)
        jumps = offsets.jumps
        if ((jumps < 0) | (jumps >= n)).any() or (jumps[:, 0] == 0).any():
            raise RoutingError(f"an offset route has an empty jump list or a jump outside 1..{n - 1}")
        if ((jumps[:, :-1] == 0) & (jumps[:, 1:] != 0)).any():  # 0 pads a row at its end: inside, it is no link
            raise RoutingError("an offset route has a 0 jump, which is not a link")
        sums = (jumps.sum(axis=1) - offsets.offset) % n
        if (sums != 0).any():
            r = int(np.flatnonzero(sums)[0])
            raise RoutingError(
                f"offset route {r}: jumps {brief(offsets.to_lists()[r][1])} do not add up to offset "
                f"{int(offsets.offset[r])} mod {n}"
            )
    else:
        share = np.zeros(n)
    bad = needed[np.abs(share[needed] - 1.0) > _TOL]
    if bad.size:
        o = int(bad[0])
        s = 0 if base else int(s_idx[np.flatnonzero((t_idx - s_idx) % n == o)[0]])  # the first sender at o
        raise RoutingError(
            f"no complete route for pair {s}->{(s + o) % n}: its routes carry {share[o]:.6g} of its traffic"
        )
    hop_load, offset_hops = _offset_loads(n, s_idx, t_idx, amount, offsets, base)
    return _plus(load, hop_load), max(max_hops, offset_hops)


def _path_loads(n: int, paths: PathSet, pair: np.ndarray, amount: np.ndarray, path_demand: np.ndarray) -> ArcLoads:
    """Arc loads of explicit paths: path ``p`` carries ``fraction[p]`` of its pair's bytes on each hop
    (the pairs with traffic ``pair`` and their bytes ``amount``; ``path_demand`` those of each path).
    The checks and numbers of :func:`topoopt_ilp.evaluation.flows.path_loads`, per arc."""
    if not np.all(np.isfinite(amount)):
        raise ValueError("demand has non-finite entries")
    if np.any(amount < 0):
        raise ValueError("demand has negative entries")
    nodes = paths.nodes
    if nodes.shape[1] < 2:
        return _NO_LOAD
    valid = nodes >= 0
    if np.any(~valid[:, 0]):
        raise ValueError("empty path")
    per_path = paths.fraction * np.where(paths.src == paths.dst, 0.0, path_demand)  # no traffic to oneself
    u, v = nodes[:, :-1], nodes[:, 1:]
    hop = valid[:, 1:]  # hop h exists iff node h+1 exists
    return _summed(u[hop] * n + v[hop], np.broadcast_to(per_path[:, None], u.shape)[hop])


def _offset_loads(
    n: int, s_idx: np.ndarray, t_idx: np.ndarray, amount: np.ndarray, offsets, base: float = 0.0
) -> tuple[ArcLoads, int]:
    """Loads of the traffic ``amount`` from ``s_idx`` to ``t_idx`` (row-major order) routed by
    offset routes, and their longest used route in hops. Every other pair of distinct servers
    carries ``base`` bytes (uniform all-to-all; 0: no traffic).

    A route for offset o with jumps j_1..j_h sends, from every server s, its fraction of
    ``rest[s, s+o]`` over the hops s+c_k -> s+c_k+j_k (c_k the prefix sums). That traffic splits into
    a level, the smallest ``rest[s, s+o]`` over s, which every server sends alike, and the excess
    above it. Every hop with jump j adds the level to each arc u -> u+j, so the levels of all routes
    are summed per jump value in one pass; the excess (a few servers' model-parallel bytes, say) is
    walked hop by hop from the servers that have some. An offset without listed pairs has the level
    ``base`` and no excess, so uniform all-to-all costs n x routes work, not n^2."""
    if not len(offsets):
        return _NO_LOAD, 0
    used = offsets.offset % n
    pair_offset = (t_idx - s_idx) % n
    by_offset = np.argsort(pair_offset, kind="stable")  # senders stay in ascending order
    sorted_offsets = pair_offset[by_offset]
    floor = np.full(n, base)
    floor[0] = 0.0  # no traffic to oneself
    excess: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # offset -> (senders, bytes above the level)
    distinct = np.intersect1d(np.unique(used), sorted_offsets)
    starts = np.searchsorted(sorted_offsets, distinct, side="left").tolist()
    stops = np.searchsorted(sorted_offsets, distinct, side="right").tolist()
    for o, a, b in zip(distinct.tolist(), starts, stops):
        members = by_offset[a:b]
        senders, bytes_ = s_idx[members], amount[members]
        level = float(bytes_.min()) if b - a == n else min(float(bytes_.min()), base)
        floor[o] = level
        if b - a < n and level != base:  # servers not listed at this offset are below the level
            every = np.full(n, base)
            every[senders] = bytes_
            senders, bytes_ = np.arange(n), every
        above = bytes_ - level
        some = above != 0
        if some.any():
            excess[o] = (senders[some], above[some])
    jumps = offsets.jumps
    hops = (jumps != 0).sum(axis=1)
    level = floor[used] * offsets.fraction
    on = (jumps != 0) & (level != 0)[:, None]
    per_jump = np.bincount(jumps[on] % n, weights=np.broadcast_to(level[:, None], jumps.shape)[on], minlength=n)
    src = np.arange(n)
    levelled = np.flatnonzero(per_jump)
    keys = [(src[None, :] * n + (src[None, :] + levelled[:, None]) % n).ravel()]
    weights = [np.repeat(per_jump[levelled], n)]
    carrying = level != 0
    for r in np.flatnonzero(offsets.fraction != 0).tolist():
        walk = excess.get(int(used[r]))
        if walk is None:
            continue
        senders, above = walk
        carrying[r] = True
        steps = np.concatenate(([0], np.cumsum(jumps[r][: hops[r]])))
        at = (senders[:, None] + steps[None, :]) % n  # the servers each sender's traffic passes
        keys.append((at[:, :-1] * n + at[:, 1:]).ravel())
        weights.append(np.repeat(offsets.fraction[r] * above, hops[r]))
    return _summed(np.concatenate(keys), np.concatenate(weights)), int(hops[carrying].max()) if carrying.any() else 0


def _check_topology(x: np.ndarray) -> None:
    """A topology the evaluator can score: no negative link counts, no link from a server to itself."""
    if (x < 0).any():
        i, j = map(int, np.argwhere(x < 0)[0])
        raise InputError(f"the topology has a negative link count {int(x[i, j])} for {i}->{j}")
    loops = np.flatnonzero(np.diag(x))
    if loops.size:
        raise InputError(f"the topology is not a valid design: server {int(loops[0])} has a link to itself")


def _check_rings(rings: RingSet, groups, n: int, no_placement: bool) -> None:
    """The solution's rings must belong to the instance's AllReduce groups: a solution made for another
    instance (or for another placement) is refused in one line rather than scored as nonsense."""
    why = (
        " (the solution states no placement, so the instance's default data-parallel placement applies)"
        if no_placement
        else ""
    )
    for r in range(len(rings)):
        g = int(rings.group[r])
        if not 0 <= g < len(groups):
            raise InputError(
                f"the solution does not match the instance: ring {r} names AllReduce group {g}, "
                f"the instance has {len(groups)} group(s){why}"
            )
        order = rings.order[r][rings.order[r] >= 0]
        if (order >= n).any():
            raise InputError(f"the solution does not match the instance: ring {r} names a server >= {n}")
        if sorted(order.tolist()) != sorted(groups[g].members):
            raise InputError(
                f"the solution does not match the instance: ring {r} does not visit each member of "
                f"AllReduce group {g} exactly once{why}"
            )


def link_loads(
    instance: Instance,
    x: np.ndarray,
    demand: np.ndarray,
    routing: Routing | None,
    mode: str,
    mcf_paths: PathSet | None = None,
) -> tuple[np.ndarray, int]:
    """Arc loads (n x n) and longest used path for ``demand`` under routing ``mode``."""
    loads, hops = _arc_loads(instance, x, demand, routing, mode, mcf_paths)
    return _dense(instance.n, loads), hops


def _nonzero(load: np.ndarray) -> ArcLoads:
    keys = np.flatnonzero(load)
    return keys, load.ravel()[keys]


def _arc_loads(
    instance: Instance,
    x: np.ndarray,
    demand: np.ndarray,
    routing: Routing | None,
    mode: str,
    mcf_paths: PathSet | None = None,
) -> tuple[ArcLoads, int]:
    """:func:`link_loads` per arc."""
    n = instance.n
    if not demand.any():
        return _NO_LOAD, 0
    if mode == "given":
        pair = np.flatnonzero(demand)  # the pairs with traffic, s * n + t, in row-major order
        return _given_loads(n, pair, demand.ravel()[pair], routing or Routing())
    if mode == "shortest_path":
        try:
            load, hops = flows.shortest_path_loads(x, demand)
        except ValueError as exc:  # a pair with traffic in two components
            raise RoutingError(f"shortest-path routing impossible: {exc}") from None
        return _nonzero(load), int(hops)
    if mode == "optimal":
        assert mcf_paths is not None
        load = flows.path_loads(n, mcf_paths, demand)
        used = (mcf_paths.fraction > 0) & (demand[mcf_paths.src, mcf_paths.dst] > 0)
        return _nonzero(load), int(mcf_paths.hops[used].max()) if used.any() else 0
    raise InputError(f"unknown routing {mode!r}; choose one of {', '.join(ROUTING_MODES)}")


def _every_group_ringed(rings: RingSet, groups) -> RingSet:
    """``rings`` plus one ring in member order for every group with traffic that they leave out: a
    group's bytes are never dropped from the score (a solution that rings only some groups fails
    verification, and was scored as if the others sent nothing)."""
    share = (
        np.bincount(rings.group, weights=rings.fraction, minlength=len(groups)) if len(rings) else np.zeros(len(groups))
    )
    partial = np.flatnonzero((share > 0) & (np.abs(share - 1.0) > _TOL))
    if partial.size:  # scaling the group's bytes down would under-count them; paths are refused the same way
        g = int(partial[0])
        raise RoutingError(f"the rings of AllReduce group {g} carry {share[g]:.6g} of its bytes, not all of them")
    covered = set(rings.group.tolist())
    missing = [g for g, grp in enumerate(groups) if g not in covered and len(grp.members) > 1 and grp.bytes > 0]
    if not missing:
        return rings
    kept = [
        (int(rings.group[r]), rings.order[r][rings.order[r] >= 0].tolist(), float(rings.fraction[r]))
        for r in range(len(rings))
    ]
    return RingSet.from_lists(kept + [(g, list(groups[g].members), 1.0) for g in missing])


def critical_path_s(instance: Instance, placement: Any) -> float:
    """P of the workload's ``critical_path`` compute model (topoopt_ilp.core.workload, **Compute model**):
    a chain of compute one iteration with one micro-batch runs in turn, communication free,
    ``max(sum_i tau_i, max_b (c_b + sum_{i >= consumer(b)} tau_i))`` (at most the longest chain: a
    block's chain leaves out the backward passes before its consumer). Computed here from the
    layers' degrees, independently of the models' own path terms."""
    w, n = instance.workload, instance.n
    if w is None:
        raise InputError("the critical path is a workload's: this instance has a fixed demand")
    strategy = data_parallel(w, n) if placement is None else parse_strategy(placement, w, n)
    tail = 0.0  # sum of tau_i for i >= the current layer, built from the last layer back
    from_layer = [0.0] * len(w.layers)
    for i in range(len(w.layers) - 1, -1, -1):
        tail += w.layer_time(i, int(strategy.layer_degree[i]))
        from_layer[i] = tail
    path = from_layer[0]
    for block in w.blocks:
        path = max(path, float(block.compute_s) + from_layer[int(block.consumer)])
    return path


# ---------------------------------------------------------------------------------------------- job term
def job_term(instance: Instance, compute: float, overlap: str) -> tuple[float, str]:
    """A job instance's time off the designed network (docs/guide/llm-jobs.md, **Job instances**):
    ``compute_time_s`` = compute + pipeline bubble + scale-up, fixed by the job on the cluster, and
    the job's overlap rule (``none``: added to the communication time; ``full``: the larger of the
    two). Any other instance: ``compute`` and ``overlap`` unchanged."""
    job = instance.compiled_job
    if job is None:
        return compute, overlap
    return job.compute_s + job.bubble_s + job.scale_up_s, job.overlap


def _times(instance: Instance, x: np.ndarray, loads: ArcLoads, hops: int) -> tuple[float, float]:
    keys, load = loads
    busy = load > 0
    if not busy.any():
        return 0.0, 0.0
    cap = instance.cluster.link_bytes_per_s * x.ravel()[keys[busy]]
    if (cap <= 0).any():
        return float("inf"), hops * instance.cluster.hop_latency_s
    return float((load[busy] / cap).max()), hops * instance.cluster.hop_latency_s


def _utilisations(instance: Instance, x: np.ndarray, loads: ArcLoads) -> np.ndarray:
    """Load / capacity of every arc of the topology (``x > 0``, row-major order; 0 without load)."""
    flat = x.ravel()
    arcs = np.flatnonzero(flat)  # no negative counts (checked): the arcs
    keys, load = loads
    on_arc = flat[keys] > 0
    util = np.zeros(len(arcs))
    util[np.searchsorted(arcs, keys[on_arc])] = load[on_arc] / (instance.cluster.link_bytes_per_s * flat[keys[on_arc]])
    return util


def _scored_rings(instance: Instance, dm, sol_routing: Routing | None, routing: str, placement) -> tuple[RingSet, str]:
    """The rings and routing mode a solution is scored with: its rings (default ones for groups it
    leaves out, all default without any), and shortest paths for ``given`` routing when it gives no
    routes."""
    if sol_routing is not None and len(sol_routing.rings):
        _check_rings(sol_routing.rings, dm.allreduce, instance.n, instance.workload is not None and placement is None)
    rings: RingSet = (
        sol_routing.rings if sol_routing is not None and len(sol_routing.rings) else default_rings(instance, dm)
    )
    rings = _every_group_ringed(rings, dm.allreduce)
    mode = routing
    if mode == "given" and (
        sol_routing is None or (len(sol_routing.paths) == 0 and len(sol_routing.offset_routes) == 0)
    ):
        mode = "shortest_path"  # nothing given to follow: the documented fallback
    return rings, mode


def _matrix_free(dm, mode: str, routing: Routing | None) -> bool:
    """Whether the traffic is scored without its n x n matrix (2 GiB at n = 16,384 for a few hundred
    thousand pairs): routes given and no all-to-all (the pairs with traffic are all it needs), or
    all-to-all on offset routes alone (its bytes on every pair, and the pairs with more)."""
    return mode == "given" and (not dm.all_to_all or (routing is not None and not len(routing.paths)))


def _given_loads_from_pairs(
    instance: Instance, dm, rings: RingSet, routing: Routing | None
) -> tuple[ArcLoads, int, float]:
    """The loads, longest used route and total bytes of the traffic where :func:`_matrix_free` holds."""
    n = instance.n
    routing = routing or Routing()
    if dm.all_to_all:
        base, pair, amount = all_to_all_pairs(instance, rings, dm)
        load, hops = _given_loads(n, pair, amount, routing, base)
        # n(n-1) - len(pair) pairs carry base alone; fsum adds the others exactly. The dense
        # matrix's pairwise sum rounds otherwise: the two agree within 1e-12 relative.
        return load, hops, math.fsum(amount.tolist()) + base * (n * (n - 1) - pair.size)
    pair, amount = traffic_pairs(instance, rings, dm)
    load, hops = _given_loads(n, pair, amount, routing) if pair.size else (_NO_LOAD, 0)
    return load, hops, float(amount.sum())


def arc_loads(instance: Instance, solution: Solution) -> np.ndarray:
    """Bytes per iteration on each arc (n x n, summed over parallel links) as :func:`evaluate`
    scores ``solution`` with its own routing."""
    dm, _ = effective_demand(instance, solution.placement)
    rings, mode = _scored_rings(instance, dm, solution.routing, "given", solution.placement)
    if _matrix_free(dm, mode, solution.routing):
        return _dense(instance.n, _given_loads_from_pairs(instance, dm, rings, solution.routing)[0])
    demand = traffic_matrix(instance, rings, dm)
    return link_loads(instance, solution.topology.matrix, demand, solution.routing, mode)[0]


#: The last solution scored, its key and its metrics (see :func:`evaluate`).
_LAST_SCORED: list[tuple[tuple, tuple, Metrics]] = []


def _memo_key(instance: Instance, solution: Any, routing: str) -> tuple[tuple, tuple] | None:
    """What makes a Solution's score: the instance, its topology, routing and placement (by identity:
    all three are immutable, frozen over read-only arrays; the placement, a small mapping, by
    content), and the routing mode. The objects themselves are kept with the key, so that an id is
    never reused while the key lives."""
    if not isinstance(solution, Solution) or solution.topology is None:
        return None
    placement = None if solution.placement is None else repr(sorted(dict(solution.placement).items()))
    keep = (instance, solution.topology, solution.routing)
    return (tuple(id(o) for o in keep) + (placement, routing)), keep


def evaluate(instance: Instance, solution: Solution | Topology | np.ndarray, routing: str = "given") -> Metrics:
    """Score a solution (or a bare topology) on an instance.

    A solution scored twice in a row with the same objects (a method scores its design, then
    ``verify`` checks the stated metrics) is evaluated once: the result depends on nothing else.

    Parameters
    ----------
    instance : the problem.
    solution : a :class:`Solution`, a :class:`Topology`, or a link-count matrix. A bare topology has
        no rings or routes: ``given`` routing then means default rings and shortest-path routes.
    routing : ``given`` | ``shortest_path`` | ``optimal``.
    """
    if isinstance(solution, Solution):  # a job's split and mapping as the solution chose them
        instance = with_job_choice(instance, solution.job)
    memo = _memo_key(instance, solution, routing)
    if memo is not None and _LAST_SCORED and _LAST_SCORED[0][0] == memo[0]:
        return _LAST_SCORED[0][2]
    metrics = _evaluate(instance, solution, routing)
    if memo is not None:
        _LAST_SCORED[:] = [(memo[0], memo[1], metrics)]
    return metrics


def _evaluate(instance: Instance, solution: Solution | Topology | np.ndarray, routing: str) -> Metrics:
    if routing not in ROUTING_MODES:
        raise InputError(f"unknown routing {routing!r}; choose one of {', '.join(ROUTING_MODES)}")
    sol_routing: Routing | None = None
    placement = None
    if isinstance(solution, Solution):
        placement = solution.placement
        if solution.topology is None:
            raise InputError("the solution has no topology to evaluate")
        topo, sol_routing = solution.topology, solution.routing
    elif isinstance(solution, Topology):
        topo = solution
    else:
        topo = Topology(np.asarray(solution))
    x = topo.matrix
    n = instance.n
    if x.shape != (n, n):
        # A RoutingError, so that the CLI names the solution file (and the verifier's words) with it.
        raise RoutingError(f"the topology has {x.shape[0]} servers, the instance {n}")
    _check_topology(x)
    dm, compute_s = effective_demand(instance, placement)
    compute = float(compute_s.max()) if compute_s.size else 0.0
    if instance.workload is not None and instance.workload.compute_model == "critical_path":
        compute = max(compute, critical_path_s(instance, placement))
    compute = job_term(instance, compute, "none")[0]
    rings, mode = _scored_rings(instance, dm, sol_routing, routing, placement)
    demand = None if _matrix_free(dm, mode, sol_routing) else traffic_matrix(instance, rings, dm)

    diam, mean_hops = (float(v) for v in graph.diameter_and_aspl(x))
    dist_connected = math.isfinite(diam)

    mcf_paths = None
    if mode == "optimal":
        lp_size = int((demand.sum(axis=1) > 0).sum()) * int((x > 0).sum())
        if lp_size > MAX_OPTIMAL_ROUTING_LP:
            raise UnsupportedError(
                f"optimal routing here is an LP with {lp_size:,} flow variables (sources x arcs); above "
                f"{MAX_OPTIMAL_ROUTING_LP:,} it takes minutes to hours. Use --routing shortest_path or given"
            )
    try:
        if mode == "optimal":
            mcf_paths = flows.max_concurrent_flow(x, demand, instance.cluster.link_bytes_per_s).paths
        if demand is None:
            load, hops, total_bytes = _given_loads_from_pairs(instance, dm, rings, sol_routing)
        else:
            load, hops = _arc_loads(instance, x, demand, sol_routing, mode, mcf_paths)
            total_bytes = float(demand.sum())
    except (RoutingError, ValueError):
        if mode == "given" or dist_connected:
            raise
        # Traffic between two components: no routing carries it, and the evaluator says so.
        inf = float("inf")
        return Metrics(
            inf,
            compute,
            inf,
            inf,
            0.0,
            0.0,
            diam,
            mean_hops,
            False,
            0.0,
            0.0,
            0,
            float(demand.sum()),  # not given routing: the matrix was built
            tuple(inf for _ in dm.allreduce),
            mode,
        )
    t_bw, t_lat = _times(instance, x, load, hops)
    comm = t_bw + t_lat
    util = _utilisations(instance, x, load)
    max_util = float(util.max(initial=0.0) / comm) if comm > 0 and np.isfinite(comm) else 0.0
    mean_util = float(util.mean() / comm) if comm > 0 and np.isfinite(comm) and len(util) else 0.0

    group_times = []
    for g in range(len(dm.allreduce)):
        if mode == "given":  # the group's ring pairs alone, without an n x n matrix per group
            pair, amount = group_traffic_pairs(instance, rings, g, dm)
            lg, hg = _given_loads(n, pair, amount, sol_routing or Routing()) if pair.size else (_NO_LOAD, 0)
        else:
            lg, hg = _arc_loads(instance, x, group_traffic(instance, rings, g, dm), sol_routing, mode, mcf_paths)
        tb, tl = _times(instance, x, lg, hg)
        group_times.append(tb + tl)

    overlap = instance.workload.overlap if instance.workload is not None else "none"
    compute, overlap = job_term(instance, compute, overlap)
    return Metrics(
        iteration_time_s=max(compute, comm) if overlap == "full" else compute + comm,
        compute_time_s=compute,
        comm_time_s=comm,
        bandwidth_time_s=t_bw,
        latency_time_s=t_lat,
        throughput=(1.0 / t_bw) if t_bw > 0 else float("inf"),
        diameter=diam,
        aspl=mean_hops,
        connected=bool(dist_connected),
        max_link_utilization=max_util,
        mean_link_utilization=mean_util,
        max_hops=int(hops),
        total_bytes=total_bytes,
        group_times_s=tuple(group_times),
        routing=mode,
    )
