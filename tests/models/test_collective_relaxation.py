"""The LP-relaxation bound of the collective model (docs/guide/collectives.md): never above the
MILP's optimum, at least the model's floor, compared with the independent cut bound, and reported by
``topoopt collective --method all``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from topoopt_ilp.core.collective import Collective, LinkModel
from topoopt_ilp.core.graph import circulant as circulant_matrix
from topoopt_ilp.core.solution import Topology
from topoopt_ilp.errors import InputError
from topoopt_ilp.models.collective import solve_collective
from topoopt_ilp.models.collective_relaxation import RELAXATION_KIND, relaxation_bound
from topoopt_ilp.models.common import ExactOptions

LINK = LinkModel(1e-6, 12.5e9)


def circulant(n: int, jumps: tuple[int, ...], directed: bool = False) -> Topology:
    return Topology(circulant_matrix(n, jumps, directed))


CASES = [
    (circulant(6, (1,), directed=True), "allgather", 1),
    (circulant(8, (1,)), "allgather", 2),
    (circulant(8, (1, 2)), "alltoall", 1),
    (circulant(8, (1,)), "alltoall", 1),
    (circulant(8, (1, 3)), "broadcast", 2),
    (circulant(7, (1, 2), directed=True), "reducescatter", 1),
    (circulant(8, (1,)), "allreduce", 2),
    (circulant(6, (1, 2)), "allgather", 3),
]


@pytest.mark.parametrize("topology, kind, chunks", CASES)
def test_the_relaxation_is_a_lower_bound_on_the_optimum(topology, kind, chunks):
    collective = Collective(kind, tuple(range(topology.n)), 1e6, chunks)
    lp = relaxation_bound(topology, collective, LINK)
    exact = solve_collective(topology, collective, LINK, options=ExactOptions(time_limit_s=30))
    assert lp.kind == RELAXATION_KIND and lp.settled
    assert lp.floor_steps <= lp.steps <= exact.steps
    assert lp.seconds == pytest.approx(lp.steps * LINK.step_s(collective.chunk_bytes))
    # compared with the independent bound, reported either way: on these cases never stronger
    assert lp.steps <= max(exact.bound.steps, lp.floor_steps)


def test_closed_forms():
    # a one-way ring's AllGather: n - 1 steps, the floor, with no LP to solve
    lp = relaxation_bound(circulant(6, (1,), directed=True), Collective("allgather", tuple(range(6)), 1e6), LINK)
    assert (lp.steps, lp.solves) == (5, 0)
    # the 8-ring's all-to-all: the floor is 8 (volume: 2 x (1+2+3+4+3+2+1) / 16 per server), proven by LPs
    lp = relaxation_bound(circulant(8, (1,)), Collective("alltoall", tuple(range(8)), 1e6), LINK)
    assert lp.steps == 8 and lp.solves >= 1
    # an AllReduce is bounded by its ReduceScatter's relaxation: n - 1 on the 8-ring with 2 chunks,
    # below the independent bound's 8 there
    reduce = Collective("allreduce", tuple(range(8)), 1e6, 2)
    assert relaxation_bound(circulant(8, (1,)), reduce, LINK).steps == 7


def test_refusals():
    with pytest.raises(InputError, match="does not connect"):
        two = Topology(np.array([[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]]))
        relaxation_bound(two, Collective("allgather", (0, 1, 2, 3), 1e6), LINK)
    with pytest.raises(InputError, match="not in the topology"):
        relaxation_bound(circulant(4, (1,)), Collective("allgather", (0, 7), 1e6), LINK)


def test_the_command_reports_it(tmp_path, capsys):
    from conftest import INSTANCES
    from topoopt_ilp.cli import main
    from topoopt_ilp.files import load_instance, save_solution
    from topoopt_ilp.methods import solve

    sol = tmp_path / "mix.json"
    save_solution(solve(load_instance(INSTANCES / "mix-8.json"), method="heuristic"), sol, directed=False)
    argv = ["collective", str(INSTANCES / "mix-8.json"), str(sol), "--collective", "alltoall", "--bytes", "1e6"]
    assert main([*argv, "--method", "all", "--time-limit", "10"]) == 0
    out = capsys.readouterr().out
    assert "LP relaxation" in out and "the independent bound" in out
    assert main([*argv, "--method", "all", "--time-limit", "10", "--json"]) == 0
    relaxation = json.loads(capsys.readouterr().out)["relaxation"]
    assert relaxation["kind"] == RELAXATION_KIND and relaxation["bound_steps"] >= relaxation["floor_steps"]
    assert main([*argv, "--method", "heuristic", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["relaxation"] is None
