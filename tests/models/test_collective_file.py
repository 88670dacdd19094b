"""Collective schedule files (``models/collective_file.py``) through the Python API: every kind and
method written, read back and passing the claim check; claims the file cannot back are violations;
the reader refuses what it must."""

from __future__ import annotations

import json

import numpy as np
import pytest

from topoopt_ilp.core.collective import Collective, LinkModel
from topoopt_ilp.core.solution import Topology
from topoopt_ilp.errors import InputError
from topoopt_ilp.models.collective import solve_collective
from topoopt_ilp.models.collective_file import (
    collective_claim_violations,
    collective_schedule_to_dict,
    parse_collective_schedule,
    read_collective_schedule,
    write_collective_schedule,
)
from topoopt_ilp.models.common import ExactOptions

LINK = LinkModel(alpha_s=1e-6, bandwidth_Bps=12.5e9)


def cube() -> Topology:
    return Topology(np.array([[int(bin(i ^ j).count("1") == 1) for j in range(8)] for i in range(8)]))


def ring(n: int) -> Topology:
    m = np.zeros((n, n), dtype=int)
    for i in range(n):
        m[i, (i + 1) % n] = m[(i + 1) % n, i] = 1
    return Topology(m)


CASES = [
    (kind, method)
    for kind in ("allgather", "reducescatter", "allreduce", "alltoall", "broadcast")
    for method in ("exact", "heuristic", "ring")
    if not (method == "ring" and kind in ("alltoall", "broadcast"))
]


@pytest.mark.parametrize("kind, method", CASES)
def test_every_kind_and_method_round_trips_and_passes(tmp_path, kind, method):
    topology = ring(6)
    collective = Collective(kind, tuple(range(6)), 6e5, chunks=2, root=2 if kind == "broadcast" else None)
    result = solve_collective(topology, collective, LINK, method=method, options=ExactOptions(time_limit_s=20))
    path = tmp_path / "s.json"
    write_collective_schedule(path, collective, LINK, result, instance="i.json", instance_sha256="a" * 64)
    sf = read_collective_schedule(path)
    assert sf.collective == collective and sf.link == LINK and sf.schedule == result.schedule
    assert sf.instance_sha256 == "a" * 64 and sf.solution_sha256 is None
    assert collective_claim_violations(topology, LINK, sf) == []


def _file(**changes):
    collective = Collective("allgather", tuple(range(8)), 8e5)
    result = solve_collective(cube(), collective, LINK, method="heuristic")
    data = json.loads(json.dumps(collective_schedule_to_dict(collective, LINK, result)))
    data.update(changes)
    return parse_collective_schedule(data)


def test_the_cube_greedy_file_states_the_closed_form():
    """The 3-cube's AllGather: 3 steps (recursive doubling), the independent bound 3, gap 0."""
    sf = _file()
    assert sf.schedule.steps == 3 and sf.bound_steps == 3 and sf.gap == 0
    assert sf.finish_s == pytest.approx(3 * (1e-6 + 1e5 / 12.5e9))
    assert collective_claim_violations(cube(), LINK, sf) == []


@pytest.mark.parametrize(
    "changes, needle",
    [
        ({"status": "optimal"}, "never claims optimal"),
        (
            {"bound_steps": 2, "bound_s": 2 * (1e-6 + 1e5 / 12.5e9)},
            "the heuristic schedule's bound is the independent 3",
        ),
        ({"method": "exact", "bound_steps": 2, "bound_s": 2 * (1e-6 + 1e5 / 12.5e9)}, "below the independent bound 3"),
        ({"bound_s": 1.0}, "is not bound_steps x step_s"),
        ({"algbw_Bps": 1.0}, "algorithm bandwidth 1.0"),
        ({"finish_s": 1e-9}, "the replay finishes at"),
    ],
)
def test_claims_the_file_cannot_back_are_violations(changes, needle):
    problems = collective_claim_violations(cube(), LINK, _file(**changes))
    assert any(needle in p for p in problems), problems


def test_another_link_model_is_a_violation():
    problems = collective_claim_violations(cube(), LinkModel(0.0, 12.5e9), _file())
    assert problems == ["link.alpha_s 1e-06, the instance's is 0"]


def test_the_reader_names_the_field():
    with pytest.raises(InputError, match=r"sends\[0\]\[2\]: expected an integer, got a boolean"):
        _file(sends=[[1, 0, True, 1, False]])
    with pytest.raises(InputError, match="collective.root: only a broadcast has a root"):
        _file(collective={"kind": "allgather", "servers": [0, 1], "bytes": 1.0, "chunks": 1, "root": 0})
    with pytest.raises(InputError, match="expected 'topoopt-collective-schedule'"):
        _file(format="topoopt-schedule")
