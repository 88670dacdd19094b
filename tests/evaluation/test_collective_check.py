"""The independent schedule checker and lower bound on hand-made schedules and closed forms
(docs/guide/collectives.md)."""

from __future__ import annotations

import numpy as np
import pytest

from topoopt_ilp.core.collective import Collective, CollectiveSchedule, LinkModel, Send
from topoopt_ilp.core.solution import Topology
from topoopt_ilp.evaluation.collective_bounds import collective_lower_bound
from topoopt_ilp.evaluation.collective_check import check_schedule

LINK = LinkModel(alpha_s=1e-6, bandwidth_Bps=1e9)
M = 3e6
ONE_WAY = Topology(np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]]))  # 0 -> 1 -> 2 -> 0
GATHER = Collective("allgather", (0, 1, 2), M)
REDUCE = Collective("reducescatter", (0, 1, 2), M)
STEP = LINK.alpha_s + M / 3 / LINK.bandwidth_Bps

# the ring AllGather by hand: each server forwards what it received the step before
RING_GATHER = [
    Send(1, 0, 0, 1),
    Send(1, 1, 1, 2),
    Send(1, 2, 2, 0),
    Send(2, 2, 0, 1),
    Send(2, 0, 1, 2),
    Send(2, 1, 2, 0),
]
# the ring ReduceScatter by hand: server i owns chunk i; the partial sum of chunk c starts at c + 1
RING_REDUCE = [Send(1, 2, 0, 1, True), Send(1, 0, 1, 2, True), Send(1, 1, 2, 0, True)]
RING_REDUCE += [Send(2, 1, 0, 1, True), Send(2, 2, 1, 2, True), Send(2, 0, 2, 0, True)]


def check(sends, collective=GATHER, steps=2, step_s=STEP, topology=ONE_WAY):
    return check_schedule(topology, collective, LINK, CollectiveSchedule(tuple(sends), step_s, steps))


def test_hand_made_ring_schedules_pass():
    for sends, coll in ((RING_GATHER, GATHER), (RING_REDUCE, REDUCE)):
        report = check(sends, coll)
        assert report.valid, report.violations
        assert report.finish_step == 2 and report.finish_s == pytest.approx(2 * STEP)
    allreduce = RING_REDUCE + [Send(s.step + 2, s.chunk, s.src, s.dst) for s in RING_GATHER]
    assert check(allreduce, Collective("allreduce", (0, 1, 2), M), steps=4).valid


@pytest.mark.parametrize(
    "sends, steps, step_s, expected",
    [
        (RING_GATHER[:-1], 2, STEP, "server 0 lacks the complete chunk 1"),
        (RING_GATHER + [Send(1, 0, 0, 1)], 2, STEP, "2 chunks on 0 -> 1, which has 1 link"),
        ([Send(1, 2, 0, 1)] + RING_GATHER[1:], 2, STEP, "does not hold the complete chunk"),
        (RING_GATHER + [Send(2, 0, 0, 2)], 2, STEP, "on 0 -> 2, which has 0 link"),
        (RING_GATHER, 3, STEP, "claims 3 steps, the replay finishes in 2"),
        (RING_GATHER + [Send(3, 0, 0, 1)], 2, STEP, "sends in step 3, after the collective is done"),
        (RING_GATHER, 2, 2 * STEP, "step length"),
        ([Send(1, 0, 0, 1, True)] + RING_GATHER[1:], 2, STEP, "a partial sum in a allgather"),
        ([Send(0, 0, 0, 1)] + RING_GATHER[1:], 2, STEP, "steps count from 1"),
        ([Send(1, 9, 0, 1)] + RING_GATHER[1:], 2, STEP, "no such chunk"),
    ],
)
def test_broken_allgather_schedules_fail(sends, steps, step_s, expected):
    report = check(sends, steps=steps, step_s=step_s)
    assert not report.valid
    assert any(expected in v for v in report.violations), report.violations


def test_broken_reductions_fail():
    # server 1 sends its partial of chunk 2 twice, once straight to the owner: counted twice there
    twice = RING_REDUCE + [Send(1, 2, 1, 2, True)]
    assert any("twice" in v for v in check(twice, REDUCE).violations)
    # a complete copy of a chunk nobody has summed yet
    early = [Send(1, 2, 0, 1)] + RING_REDUCE[1:]
    assert any("complete chunk" in v for v in check(early, REDUCE).violations)
    # the owner of chunk 0 never gets server 1's contribution
    missing = [s for s in RING_REDUCE if not (s.chunk == 0 and s.step == 1)]
    assert any("lacks the complete chunk 0" in v for v in check(missing, REDUCE).violations)


def test_alltoall_and_broadcast_demands():
    a2a = Collective("alltoall", (0, 1), 2e6)
    two = Topology(np.array([[0, 1], [1, 0]]))
    step = LINK.alpha_s + 2e6 / 2 / LINK.bandwidth_Bps
    # chunk (i * 2 + i2): from server i to server i2; 1 -> 0 is chunk 2, 0 -> 1 chunk 1
    assert check([Send(1, 1, 0, 1), Send(1, 2, 1, 0)], a2a, 1, step, two).valid
    assert not check([Send(1, 1, 0, 1)], a2a, 1, step, two).valid
    bc = Collective("broadcast", (0, 1, 2), M, chunks=1, root=1)
    bstep = LINK.alpha_s + M / LINK.bandwidth_Bps
    assert check([Send(1, 0, 1, 2), Send(2, 0, 2, 0)], bc, 2, bstep).valid
    assert not check([Send(1, 0, 0, 1), Send(2, 0, 1, 2)], bc, 2, bstep).valid


def test_lower_bound_closed_forms():
    n = 6
    one_way = np.roll(np.eye(n, dtype=np.int64), 1, axis=1)  # i -> i + 1
    b = collective_lower_bound(one_way, Collective("allgather", tuple(range(n)), M), LINK)
    assert b.steps == n - 1 and b.parts["cut"] == n - 1 and b.parts["latency"] == n - 1
    assert b.seconds == pytest.approx((n - 1) * (LINK.alpha_s + M / n / LINK.bandwidth_Bps))
    # the chunking-free bound: (n - 1) alpha + (n - 1) / n x M / B
    assert b.fluid_s == pytest.approx((n - 1) * LINK.alpha_s + (n - 1) / n * M / LINK.bandwidth_Bps)
    full = np.ones((n, n), dtype=np.int64) - np.eye(n, dtype=np.int64)
    assert collective_lower_bound(full, Collective("allgather", tuple(range(n)), M), LINK).steps == 1
    # all-to-all on the one-way ring: sum of hops 6 x 15 over 6 links
    a2a = collective_lower_bound(one_way, Collective("alltoall", tuple(range(n)), M), LINK)
    assert a2a.parts["volume"] == 15
    # ReduceScatter's cut leaves each server: (n - 1) chunks over its one out-link
    rs = collective_lower_bound(one_way, Collective("reducescatter", tuple(range(n)), M), LINK)
    assert rs.parts["cut"] == n - 1
