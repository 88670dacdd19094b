"""The joint topology + collective-schedule model against closed forms, brute force over every
2-regular graph, the independent schedule checker and degree check, and a second back-end
(docs/guide/collectives.md, "Topology and schedule together")."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from topoopt_ilp.core.collective import Collective, LinkModel
from topoopt_ilp.core.solution import Topology
from topoopt_ilp.errors import InputError
from topoopt_ilp.evaluation.collective_check import check_schedule
from topoopt_ilp.evaluation.degree_check import degree_violations
from topoopt_ilp.heuristic.collective import chunk_demand
from topoopt_ilp.models.collective import solve_collective
from topoopt_ilp.models.collective_topology import (
    build_joint_model,
    candidate_designs,
    joint_floor_steps,
    solve_joint_collective,
)
from topoopt_ilp.models.common import ExactOptions, run_model, solution_status
from topoopt_ilp.models.topology.catalogue import regular_graphs

LINK = LinkModel(alpha_s=1e-6, bandwidth_Bps=12.5e9)
OPTIONS = ExactOptions(time_limit_s=20, threads=1)


def gather(n: int, kind: str = "allgather", chunks: int = 1) -> Collective:
    return Collective(kind, tuple(range(n)), 1e6, chunks)


def joint(n: int, d: int, kind: str = "allgather", **kw):
    return solve_joint_collective(gather(n, kind), d, LINK, options=kw.pop("options", OPTIONS), **kw)


def two_regular_graphs(n: int):
    """Every simple 2-regular graph on servers 0..n-1 (unions of cycles of length >= 3), by brute force
    over edge sets."""
    pairs = list(itertools.combinations(range(n), 2))
    for edges in itertools.combinations(pairs, n):
        m = np.zeros((n, n), dtype=np.int64)
        for u, v in edges:
            m[u, v] = m[v, u] = 1
        if (m.sum(axis=1) == 2).all():
            yield m


def test_complete_graph_for_four_servers_of_degree_three():
    r = joint(4, 3)
    assert r.status == "optimal" and r.result.steps == 1
    assert np.array_equal(r.topology.matrix, np.ones((4, 4), dtype=np.int64) - np.eye(4, dtype=np.int64))


@pytest.mark.parametrize("designs", [True, False])
def test_four_servers_of_degree_two_take_a_ring(designs):
    r = joint(4, 2, designs=designs, multi_links=False)
    assert r.status == "optimal" and r.result.steps == 2
    m = r.topology.matrix
    assert (m.sum(axis=1) == 2).all() and m.max() == 1  # a simple 2-regular graph on 4 servers: the 4-ring


@pytest.mark.parametrize("designs", [True, False])
def test_eight_servers_of_degree_three_match_the_hypercube(designs):
    r = joint(8, 3, designs=designs)
    cube = solve_collective(Topology(candidate_designs(8, 3)[0][1].matrix), gather(8), LINK, options=OPTIONS)
    assert r.status == "optimal" and r.result.steps == cube.steps == 3
    assert r.design == ("hypercube" if designs else "joint model")


@pytest.mark.parametrize("n", [5, 6])
def test_brute_force_over_every_two_regular_graph(n):
    graphs = [m for m in two_regular_graphs(n) if _connected(m)]  # 12 five-rings, 60 six-rings
    assert len(graphs) == {5: 12, 6: 60}[n]
    best = min(solve_collective(Topology(m), gather(n), LINK, options=OPTIONS).steps for m in graphs)
    r = joint(n, 2, designs=False, multi_links=False)
    assert r.status == "optimal" and r.result.steps == best


def _connected(m: np.ndarray) -> bool:
    seen, todo = {0}, [0]
    while todo:
        u = todo.pop()
        for v in np.flatnonzero(m[u]):
            if int(v) not in seen:
                seen.add(int(v))
                todo.append(int(v))
    return len(seen) == m.shape[0]


def test_a_probe_below_the_optimum_is_infeasible_and_the_optimum_is_not():
    # 6 servers of degree 2: the floor ceil(5 / 2) = 3 is met; a horizon of 2 is proven too short by the model
    origin, sinks = chunk_demand(gather(6), 6)
    for horizon, expected in ((2, "infeasible"), (3, "optimal")):
        jm = build_joint_model(6, 2, origin, sinks, horizon, floor=horizon, integral_holds=False)
        assert solution_status(run_model(jm.model, OPTIONS)) == expected


@pytest.mark.parametrize("kind", ["allgather", "reducescatter", "allreduce"])
def test_the_schedule_replays_to_the_claimed_finish_and_the_degrees_hold(kind):
    for n, d in ((5, 2), (6, 3)):
        r = joint(n, d, kind, designs=False)
        report = check_schedule(r.topology, gather(n, kind), LINK, r.result.schedule)
        assert report.valid and report.finish_step == r.result.steps
        assert not degree_violations(r.topology.matrix, d, directed=False, regular=True)
        assert r.result.bound_steps <= r.result.steps
        assert r.result.steps == (2 if kind == "allreduce" else 1) * r.floor_steps


def test_directed_reducescatter_uses_the_reverse_of_the_gather_topology():
    r = solve_joint_collective(gather(5, "reducescatter"), 2, LINK, directed=True, options=OPTIONS, designs=False)
    assert r.status == "optimal" and r.result.steps == 2
    assert check_schedule(r.topology, gather(5, "reducescatter"), LINK, r.result.schedule).valid
    assert not degree_violations(r.topology.matrix, 2, directed=True, regular=True)


@pytest.mark.parametrize("directed", [False, True])
def test_highs_and_cpsat_agree(directed):
    origin, sinks = chunk_demand(gather(5), 5)
    for backend in ("highs", "cpsat"):
        opts = ExactOptions(backend=backend, time_limit_s=20, threads=1)
        for horizon, expected in ((1, "infeasible"), (2, "optimal")):
            jm = build_joint_model(
                5, 2, origin, sinks, horizon, floor=horizon, directed=directed, integral_holds=backend == "cpsat"
            )
            assert solution_status(run_model(jm.model, opts)) == expected, (backend, horizon)
        r = solve_joint_collective(gather(5), 2, LINK, directed=directed, options=opts, designs=False)
        assert r.result.steps == 2 and r.status == "optimal"


def test_the_floor_closed_forms():
    assert joint_floor_steps(8, 3, 1) == 3  # ceil(7 / 3) chunks in
    assert joint_floor_steps(8, 3, 2) == 5  # ceil(14 / 3)
    assert joint_floor_steps(16, 15, 1) == 1  # the complete graph
    assert joint_floor_steps(100, 50, 1) == 2  # holders: 1, 51, 2601: log_51 100 rounds up to 2


def test_bad_requests():
    with pytest.raises(InputError, match="every server"):
        solve_joint_collective(Collective("allgather", (0, 2), 1e6), 1, LINK)
    with pytest.raises(InputError, match="odd"):
        joint(5, 3)
    with pytest.raises(InputError, match="pairs"):
        joint(4, 1)
    with pytest.raises(InputError, match="time limit"):
        joint(4, 2, options=ExactOptions(time_limit_s=0))
    with pytest.raises(InputError, match="undirected"):
        solve_joint_collective(gather(4, "allreduce"), 2, LINK, directed=True)


def test_at_most_degree_when_no_regular_graph_exists():
    # 5 servers of degree 3 have no 3-regular graph (5 x 3 is odd); at most 3 links each, 2 steps (ceil(4 / 3))
    r = joint(5, 3, regular=False, designs=False)
    assert r.status == "optimal" and r.result.steps == 2
    assert not degree_violations(r.topology.matrix, 3, directed=False, regular=False)
    assert check_schedule(r.topology, gather(5), LINK, r.result.schedule).finish_step == 2


def test_a_limit_before_any_probe_falls_back_to_a_known_design():
    r = joint(8, 3, designs=False, options=ExactOptions(time_limit_s=1e-6, threads=1))
    assert r.probes == () and r.design != "joint model" and r.result.steps == 3
    assert r.status == "optimal"  # the greedy schedule on the hypercube meets the floor


@pytest.mark.parametrize(("n", "d"), [(6, 3), (7, 4), (8, 3)])
def test_brute_force_over_every_regular_graph_of_the_catalogue(n, d):
    graphs = regular_graphs(n, d)  # every connected d-regular simple graph up to isomorphism
    best = min(solve_collective(Topology(g.astype(np.int64)), gather(n), LINK, options=OPTIONS).steps for g in graphs)
    r = joint(n, d, designs=False, multi_links=False)
    assert r.status == "optimal" and r.result.steps == best


def broadcast_or_alltoall(n: int, kind: str, chunks: int = 1) -> Collective:
    return Collective(kind, tuple(range(n)), 1e6, chunks, 2 if kind == "broadcast" else None)


@pytest.mark.parametrize("kind", ["broadcast", "alltoall"])
@pytest.mark.parametrize("n", [5, 6])
def test_broadcast_and_alltoall_brute_force_over_every_two_regular_graph(kind, n):
    collective = broadcast_or_alltoall(n, kind, 2 if kind == "broadcast" else 1)
    graphs = [m for m in two_regular_graphs(n) if _connected(m)]
    best = min(solve_collective(Topology(m), collective, LINK, options=OPTIONS).steps for m in graphs)
    r = solve_joint_collective(collective, 2, LINK, options=OPTIONS, designs=False, multi_links=False)
    assert r.status == "optimal" and r.result.steps == best
    replay = check_schedule(r.topology, collective, LINK, r.result.schedule)
    assert replay.violations == [] and replay.finish_step == r.result.steps
    assert not degree_violations(r.topology.matrix, 2, directed=False, regular=True, multi_links=False)


@pytest.mark.parametrize("kind", ["broadcast", "alltoall"])
def test_broadcast_and_alltoall_brute_force_over_the_catalogue(kind):
    collective = broadcast_or_alltoall(6, kind, 3 if kind == "broadcast" else 1)
    graphs = regular_graphs(6, 3)
    best = min(solve_collective(Topology(g.astype(np.int64)), collective, LINK, options=OPTIONS).steps for g in graphs)
    r = solve_joint_collective(collective, 3, LINK, options=OPTIONS, designs=False, multi_links=False)
    assert r.status == "optimal" and r.result.steps == best
    assert check_schedule(r.topology, collective, LINK, r.result.schedule).finish_step == best


def test_a_broadcast_from_another_root_is_relabelled():
    # 6 servers of degree 2 with two pieces from root 3: 3 steps (the floor 2 proven too short)
    collective = Collective("broadcast", tuple(range(6)), 1e6, 2, 3)
    r = solve_joint_collective(collective, 2, LINK, options=OPTIONS, designs=False)
    assert r.status == "optimal" and r.result.steps == 3 and r.design == "joint model"
    assert {s.src for s in r.result.schedule.sends if s.step == 1} == {3}
    assert check_schedule(r.topology, collective, LINK, r.result.schedule).valid


def test_broadcast_and_alltoall_floors():
    # broadcast: ceil(k / d) - 1 + ceil(log_{d+1} n)
    assert joint_floor_steps(8, 3, 1, kind="broadcast") == 2
    assert joint_floor_steps(8, 3, 7, kind="broadcast") == 4
    # all-to-all on 5 servers of degree 2: two servers 1 hop away, two 2 hops: 6 hops / 2 links
    assert joint_floor_steps(5, 2, 1, kind="alltoall") == 3
    # directed degree 2 on 7 servers: 2 at 1 hop, 4 at 2: 10 hops / 2; in-links: ceil(6 / 2)
    assert joint_floor_steps(7, 2, 1, directed=True, kind="alltoall") == 5
