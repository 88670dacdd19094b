"""Collective schedules on links of different bandwidths and latencies: closed forms, the model against
the independent checker and bound, uniform links unchanged, HiGHS and CP-SAT agreeing
(docs/guide/collectives.md, heterogeneous links)."""

from __future__ import annotations

import numpy as np
import pytest

from topoopt_ilp.core.collective import Collective, CollectiveSchedule, LinkModel, Send
from topoopt_ilp.core.solution import Topology
from topoopt_ilp.errors import InputError
from topoopt_ilp.evaluation.collective_bounds import collective_lower_bound
from topoopt_ilp.evaluation.collective_check import check_schedule
from topoopt_ilp.models.collective import solve_collective
from topoopt_ilp.models.common import ExactOptions

FAST = 1e9  # bytes per second
CHUNK = 1e6  # bytes of one chunk in the cases below: tau = 1 ms on a fast link without alpha


def undirected(n: int, pairs) -> Topology:
    m = np.zeros((n, n), dtype=np.int64)
    for u, v in pairs:
        m[u, v] = m[v, u] = 1
    return Topology(m)


def both_ways(u: int, v: int, alpha: float, bandwidth: float) -> list[tuple[int, int, float, float]]:
    return [(u, v, alpha, bandwidth), (v, u, alpha, bandwidth)]


def solved(topology, collective, link, method="exact", **options):
    res = solve_collective(topology, collective, link, method=method, options=ExactOptions(**options))
    report = check_schedule(topology, collective, link, res.schedule)
    assert report.violations == []
    assert report.finish_step == res.steps
    assert report.finish_s == pytest.approx(res.finish_s, rel=1e-12)
    assert res.bound.steps <= res.steps
    return res


PATH = undirected(3, [(0, 1), (1, 2)])
SLOW_PATH = LinkModel(0.0, FAST, tuple(both_ways(1, 2, 0.0, FAST / 2)))


@pytest.mark.parametrize("pieces", [1, 2, 3])
def test_broadcast_down_a_fast_then_a_slow_link(pieces):
    """1 step on the fast link, then 2 per piece on the slow one: 1 + 2 k steps of tau = chunk / B."""
    coll = Collective("broadcast", (0, 1, 2), CHUNK * pieces, pieces)
    for method in ("exact", "heuristic"):
        res = solved(PATH, coll, SLOW_PATH, method=method)
        assert res.step_s == pytest.approx(CHUNK / FAST)
        assert res.steps == 1 + 2 * pieces
        assert res.finish_s == pytest.approx(CHUNK / FAST + pieces * CHUNK / (FAST / 2))
        assert res.status == ("optimal" if method == "exact" else "feasible")


def test_allgather_on_the_path_waits_for_the_slow_link():
    """Server 2 receives two chunks over a link that takes two steps each: 4 steps, the bound."""
    coll = Collective("allgather", (0, 1, 2), 3 * CHUNK)
    res = solved(PATH, coll, SLOW_PATH)
    assert (res.steps, res.bound.steps, res.status) == (4, 4, "optimal")
    for kind in ("reducescatter", "allreduce"):
        for method in ("exact", "heuristic"):
            red = solved(PATH, Collective(kind, (0, 1, 2), 3 * CHUNK), SLOW_PATH, method=method)
            assert red.steps == (4 if kind == "reducescatter" else 8)


def test_latency_counts_in_the_steps_of_a_link():
    """alpha 3 ms on 1 -> 2 and 2 -> 1 (chunk 1 ms): that link takes 4 steps of 1 ms."""
    link = LinkModel(0.0, FAST, tuple(both_ways(1, 2, 3e-3, FAST)))
    res = solved(PATH, Collective("broadcast", (0, 1, 2), CHUNK), link)
    assert (res.steps, res.step_s) == (5, pytest.approx(1e-3))


def one_way_ring_with_a_slow_link(n: int = 4) -> tuple[Topology, LinkModel]:
    m = np.zeros((n, n), dtype=np.int64)
    for i in range(n):
        m[i, (i + 1) % n] = 1
    return Topology(m), LinkModel(0.0, FAST, ((n - 1, 0, 0.0, FAST / 2),))


def test_one_way_ring_with_one_slow_link():
    """Server 0 receives n - 1 chunks over the slow link, two steps each: 2 (n - 1) steps, met."""
    topology, link = one_way_ring_with_a_slow_link(4)
    coll = Collective("allgather", (0, 1, 2, 3), 4 * CHUNK)
    res = solved(topology, coll, link)
    assert (res.steps, res.bound.steps, res.status) == (6, 6, "optimal")
    for method in ("heuristic", "ring"):
        assert solved(topology, coll, link, method=method).steps >= 6


def test_uniform_rates_given_per_arc_change_nothing():
    topology, _ = one_way_ring_with_a_slow_link(5)
    plain = LinkModel(1e-6, FAST)
    listed = LinkModel(1e-6, FAST, tuple((u, v, 1e-6, FAST) for u, v in zip(*np.nonzero(topology.matrix))))
    coll = Collective("allgather", tuple(range(5)), 5 * CHUNK, 2)
    for method in ("exact", "heuristic", "ring"):
        a, b = solved(topology, coll, plain, method=method), solved(topology, coll, listed, method=method)
        assert a.schedule == b.schedule
        assert a.bound.steps == b.bound.steps and a.bound.fluid_s == pytest.approx(b.bound.fluid_s)


@pytest.mark.parametrize("kind", ["allgather", "alltoall", "broadcast"])
def test_highs_and_cpsat_agree_on_a_heterogeneous_case(kind):
    topology = undirected(4, [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)])
    link = LinkModel(0.0, FAST, tuple(both_ways(0, 2, 0.0, FAST / 3) + both_ways(2, 3, 5e-4, FAST)))
    coll = Collective(kind, (0, 1, 2, 3), 4 * CHUNK)
    a = solved(topology, coll, link, backend="highs")
    b = solved(topology, coll, link, backend="cpsat")
    assert a.steps == b.steps
    assert a.status == b.status == "optimal"


def test_random_heterogeneous_cases_every_method_checked():
    rng = np.random.default_rng(7)
    for _ in range(6):
        n = int(rng.integers(3, 6))
        pairs = {tuple(sorted((i, (i + 1) % n))) for i in range(n)} | {
            tuple(sorted(map(int, rng.choice(n, 2, replace=False)))) for _ in range(2)
        }
        topology = undirected(n, pairs)
        arcs = []
        for u, v in pairs:
            arcs += both_ways(u, v, float(rng.choice([0.0, 1e-3])), FAST / float(rng.choice([1, 2, 3])))
        link = LinkModel(0.0, FAST, tuple(arcs))
        coll = Collective("allgather", tuple(range(n)), n * CHUNK, int(rng.integers(1, 3)))
        exact = solved(topology, coll, link, time_limit_s=20)
        greedy = solved(topology, coll, link, method="heuristic")
        assert exact.steps <= greedy.steps
        assert collective_lower_bound(topology, coll, link).steps <= exact.steps


def test_the_checker_holds_a_slow_link_for_its_steps():
    coll = Collective("broadcast", (0, 1, 2), 2 * CHUNK, 2)
    tau = CHUNK / FAST
    # the second piece enters 1 -> 2 while the first still occupies it (steps 2-3)
    sends = (Send(1, 0, 0, 1), Send(2, 1, 0, 1), Send(2, 0, 1, 2), Send(3, 1, 1, 2))
    report = check_schedule(PATH, coll, SLOW_PATH, CollectiveSchedule(sends, tau, 4))
    assert any("2 chunks on 1 -> 2" in v for v in report.violations)
    # a chunk forwarded by 1 before it has arrived over the slow link 2 -> 1 (steps 1-2)
    early = (Send(1, 0, 2, 1), Send(2, 0, 1, 0))
    from_two = Collective("broadcast", (0, 1, 2), CHUNK, root=2)
    report = check_schedule(PATH, from_two, SLOW_PATH, CollectiveSchedule(early, tau, 2))
    assert any("does not hold the complete chunk" in v for v in report.violations)
    wrong_step = check_schedule(PATH, coll, SLOW_PATH, CollectiveSchedule(sends, 2 * tau, 4))
    assert any("step length" in v for v in wrong_step.violations)


def test_bad_arcs_are_refused():
    with pytest.raises(InputError, match=r"link.arcs\[0\]\[3\]"):
        LinkModel(0.0, FAST, ((0, 1, 0.0, -1.0),))
    with pytest.raises(InputError, match="listed twice"):
        LinkModel(0.0, FAST, ((0, 1, 0.0, 1.0), (0, 1, 0.0, 2.0)))
