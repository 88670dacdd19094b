"""The evaluator's per-arc loads against the dense n x n computation they replaced.

``reference_given_loads`` below is the evaluator's former ``given``-routing load computation, kept
verbatim (dense demand copy, dense loads, every offset's bytes read for all n servers). On random
traffic (sparse and dense, with and without a level every server sends alike), random explicit
paths and random offset routes, the two must give the same loads to the last bit, the same longest
route, and the same error message for a routing that does not carry the demand."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import minimal
from topoopt_ilp import files
from topoopt_ilp.core.checks import brief
from topoopt_ilp.core.routes import OffsetRoutes, PathSet, Routing
from topoopt_ilp.core.solution import Solution, Topology
from topoopt_ilp.evaluation import flows
from topoopt_ilp.evaluation.evaluate import RoutingError, evaluate, link_loads

_TOL = 1e-6


# ---------------------------------------------------------------------------------- the reference
def reference_given_loads(n, demand, routing):
    paths, offsets = routing.paths, routing.offset_routes
    rest = demand.copy()
    load = np.zeros((n, n))
    max_hops = 0
    if len(paths):
        nodes = paths.nodes
        if nodes.max() >= n or (nodes[:, :2] < 0).any():
            raise RoutingError("a path names a server outside the topology or has fewer than 2 nodes")
        named = nodes >= 0
        if (~named[:, :-1] & named[:, 1:]).any():
            raise RoutingError("a path names server -1, which does not exist")
        if ((nodes[:, 1:] == nodes[:, :-1]) & named[:, 1:]).any():
            p = int(np.flatnonzero(((nodes[:, 1:] == nodes[:, :-1]) & named[:, 1:]).any(axis=1))[0])
            raise RoutingError(f"path {p} stays at a server for a hop (a node repeated on consecutive positions)")
        key = paths.src * n + paths.dst
        share = np.bincount(key, weights=paths.fraction, minlength=n * n).reshape(n, n)
        covered = share > 0
        bad = covered & (demand > 0) & (np.abs(share - 1.0) > _TOL)
        if bad.any():
            s, t = map(int, np.argwhere(bad)[0])
            raise RoutingError(f"the paths of pair {s}->{t} carry {share[s, t]:.6g} of its traffic, not all of it")
        load += flows.path_loads(n, paths, demand)
        carrying = (paths.fraction > 0) & (demand[paths.src, paths.dst] > 0)
        if carrying.any():
            max_hops = int(paths.hops[carrying].max())
        rest[covered] = 0.0
    if not rest.any():
        return load, max_hops
    s_idx, t_idx = np.nonzero(rest)
    needed = np.unique((t_idx - s_idx) % n)
    if len(offsets):
        share = np.bincount(offsets.offset % n, weights=offsets.fraction, minlength=n)
        jumps = offsets.jumps
        if ((jumps < 0) | (jumps >= n)).any() or (jumps[:, 0] == 0).any():
            raise RoutingError(f"an offset route has an empty jump list or a jump outside 1..{n - 1}")
        if ((jumps[:, :-1] == 0) & (jumps[:, 1:] != 0)).any():
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
        s = int(s_idx[np.flatnonzero((t_idx - s_idx) % n == o)[0]])
        raise RoutingError(
            f"no complete route for pair {s}->{(s + o) % n}: its routes carry {share[o]:.6g} of its traffic"
        )
    hop_load, offset_hops = reference_offset_loads(n, rest, offsets)
    return load + hop_load, max(max_hops, offset_hops)


def reference_offset_loads(n, rest, offsets):
    load = np.zeros((n, n))
    if not len(offsets):
        return load, 0
    src = np.arange(n)
    used = offsets.offset % n
    per_offset = {o: rest[src, (src + o) % n] for o in np.unique(used).tolist()}
    floor = {o: float(v.min()) for o, v in per_offset.items()}
    jumps = offsets.jumps
    hops = (jumps != 0).sum(axis=1)
    level = np.array([floor[o] for o in used.tolist()]) * offsets.fraction
    on = (jumps != 0) & (level != 0)[:, None]
    per_jump = np.bincount(jumps[on] % n, weights=np.broadcast_to(level[:, None], jumps.shape)[on], minlength=n)
    for j in np.flatnonzero(per_jump):
        load[src, (src + j) % n] += per_jump[j]
    carrying = level != 0
    for r in np.flatnonzero(offsets.fraction != 0).tolist():
        o = int(used[r])
        excess = per_offset[o] - floor[o]
        senders = np.flatnonzero(excess)
        if not senders.size:
            continue
        carrying[r] = True
        amount = offsets.fraction[r] * excess[senders]
        steps = np.concatenate(([0], np.cumsum(jumps[r][: hops[r]])))
        at = (senders[:, None] + steps[None, :]) % n
        np.add.at(load, (at[:, :-1].ravel(), at[:, 1:].ravel()), np.repeat(amount, hops[r]))
    return load, int(hops[carrying].max()) if carrying.any() else 0


# ---------------------------------------------------------------------------------- random cases
def random_demand(rng, n):
    """Sparse pairs, a dense block, or a level at some offsets (every server sends alike) plus excess."""
    kind = rng.integers(3)
    demand = np.zeros((n, n))
    if kind == 0:
        m = int(rng.integers(1, 3 * n))
        np.add.at(demand, (rng.integers(0, n, m), rng.integers(0, n, m)), rng.random(m) * 1e9)
    elif kind == 1:
        demand[:] = rng.random((n, n)) * (rng.random((n, n)) < 0.7)
    else:
        src = np.arange(n)
        for o in rng.choice(np.arange(1, n), size=int(rng.integers(1, min(n - 1, 4) + 1)), replace=False):
            demand[src, (src + o) % n] += rng.choice([1e9, 0.1 + rng.random()])
        few = rng.integers(0, n, 3)
        demand[few, rng.integers(0, n, 3)] += 3e9
    np.fill_diagonal(demand, 0.0)
    return demand


def random_jumps(rng, n, offset):
    k = int(rng.integers(1, 5))
    jumps = [int(j) for j in rng.integers(1, n, k - 1)]
    last = (offset - sum(jumps)) % n
    if last == 0:
        return [offset]
    return [*jumps, last]


def random_routing(rng, n, demand):
    """Offset routes for every offset (one, or two splitting it) and explicit paths for a few pairs."""
    routes = []
    for o in range(1, n):
        if rng.random() < 0.5:
            routes.append((o, random_jumps(rng, n, o), 1.0))
        else:
            f = float(rng.choice([0.25, 0.5, 1 / 3]))
            routes += [(o, random_jumps(rng, n, o), f), (o, random_jumps(rng, n, o), 1.0 - f)]
    paths, routed = [], set()
    for _ in range(int(rng.integers(0, n))):
        s, t = (int(v) for v in rng.choice(n, 2, replace=False))
        if (s, t) in routed:
            continue
        routed.add((s, t))
        others = np.setdiff1d(np.arange(n), [s, t])
        walk = [s, *(int(v) for v in rng.choice(others, int(rng.integers(0, min(3, n - 2) + 1)))), t]
        walk = [v for k, v in enumerate(walk) if k == 0 or v != walk[k - 1]]
        fraction = float(rng.choice([1.0, 0.5, 0.7], p=[0.6, 0.38, 0.02]))  # 0.7 alone: a pair not fully carried
        paths.append((walk, fraction))
        if fraction == 0.5:
            paths.append(([s, t], 0.5))
    return Routing(
        paths=PathSet.from_lists(paths) if paths else PathSet.empty(),
        offset_routes=OffsetRoutes.from_lists(routes),
    )


def instance_of(n):
    return files.parse_instance(
        minimal(cluster={"servers": n, "degree": 2, "link_bandwidth_gbps": 100, "hop_latency_us": 0.0})
    )


def outcome(fn):
    try:
        load, hops = fn()
    except (RoutingError, ValueError) as exc:
        return type(exc), str(exc)
    return load, hops


@pytest.mark.parametrize("seed", range(300))
def test_per_arc_loads_equal_the_dense_reference(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 24))
    demand = random_demand(rng, n)
    routing = random_routing(rng, n, demand)
    if seed % 5 == 4:  # drop a route: the routing no longer carries every offset
        kept = [
            r
            for k, r in enumerate(routing.offset_routes.to_lists())
            if k != int(rng.integers(len(routing.offset_routes)))
        ]
        routing = Routing(paths=routing.paths, offset_routes=OffsetRoutes.from_lists(kept))
    x = np.ones((n, n), dtype=np.int64) - np.eye(n, dtype=np.int64)
    new = outcome(lambda: link_loads(instance_of(n), x, demand, routing, "given"))
    old = outcome(lambda: reference_given_loads(n, demand, routing))
    if isinstance(old[0], type):
        assert new == old
    else:
        np.testing.assert_array_equal(new[0], old[0])
        assert new[1] == old[1]


def test_the_random_cases_reach_every_branch():
    """Levels, excess walks, explicit paths and refusals all occur among the cases above."""
    levels = excess = paths = refused = 0
    for seed in range(300):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(3, 24))
        demand = random_demand(rng, n)
        routing = random_routing(rng, n, demand)
        src = np.arange(n)
        levels += any(demand[src, (src + o) % n].min() > 0 for o in range(1, n))
        excess += bool((demand > 0).sum() < n * n - n)
        paths += len(routing.paths) > 0
        refused += seed % 5 == 4
    assert min(levels, excess, paths, refused) >= 20


def test_scores_of_a_heuristic_design_are_unchanged():
    """An end-to-end score through the per-arc loads: an AllReduce ring plus MP pairs on a circulant
    with offset routes, against the loads the dense reference gives (bandwidth time, utilisations)."""
    n = 12
    pairs = [[k, (k + 5) % n, 2e9] for k in range(0, n, 3)]
    inst = files.parse_instance(
        minimal(
            cluster={"servers": n, "degree": 2, "link_bandwidth_gbps": 8.0, "hop_latency_us": 0.0},
            demand={"allreduce": [{"members": "all", "bytes": 1.2e9}], "mp": {"pairs": pairs}},
        )
    )
    routes = OffsetRoutes.from_lists(
        [(o, [1] * o, 1.0) if 2 * o <= n else (o, [n - 1] * (n - o), 1.0) for o in range(1, n)]
    )
    x = np.zeros((n, n), dtype=np.int64)
    x[np.arange(n), (np.arange(n) + 1) % n] = 1
    x[(np.arange(n) + 1) % n, np.arange(n)] = 1
    sol = Solution("feasible", "x", Topology(x, (1,)), routing=Routing(offset_routes=routes))
    m = evaluate(inst, sol)
    ring = np.zeros((n, n))
    ring[np.arange(n), (np.arange(n) + 1) % n] = 2 * (n - 1) / n * 1.2e9
    for s, t, b in pairs:
        ring[s, t] += b
    load, hops = reference_given_loads(n, ring, Routing(offset_routes=routes))
    busiest = load.max() / 1e9  # 8 Gbps = 1e9 bytes/s per link
    assert m.bandwidth_time_s == busiest
    assert m.max_hops == hops == 5
    assert m.mean_link_utilization == pytest.approx(load[x > 0].mean() / 1e9 / busiest, rel=1e-15)
