"""AllReduce as one model (docs/guide/collectives.md): closed forms on rings and complete graphs, never
above ReduceScatter + AllGather and below it where phases pipeline, every schedule replayed by the
independent checker with the finish the model claims."""

from __future__ import annotations

import pytest

from topoopt_ilp.core.collective import Collective, LinkModel
from topoopt_ilp.core.graph import circulant as circulant_matrix
from topoopt_ilp.core.solution import Topology
from topoopt_ilp.errors import InputError, UnsupportedError
from topoopt_ilp.evaluation.collective_check import check_schedule
from topoopt_ilp.models.collective import solve_collective
from topoopt_ilp.models.collective_allreduce import build_allreduce_model, solve_allreduce_model
from topoopt_ilp.models.common import ExactOptions, run_model, solution_status

LINK = LinkModel(1e-6, 12.5e9)


def circulant(n: int, jumps: tuple[int, ...], directed: bool = False) -> Topology:
    return Topology(circulant_matrix(n, jumps, directed))


def solved(topology: Topology, chunks: int):
    reduce = Collective("allreduce", tuple(range(topology.n)), 1e6, chunks)
    one = solve_allreduce_model(topology, reduce, LINK, options=ExactOptions(time_limit_s=60))
    report = check_schedule(topology, reduce, LINK, one.schedule)
    assert report.violations == []
    assert report.finish_step == one.steps
    assert report.finish_s == pytest.approx(one.finish_s)
    phases = solve_collective(topology, reduce, LINK, options=ExactOptions(time_limit_s=60))
    assert one.steps <= phases.steps
    return one, phases


@pytest.mark.parametrize("n", [3, 4])
def test_a_one_way_ring_takes_2_n_minus_1_steps(n):
    # the farthest contribution travels n - 1 hops to a chunk's root, its sum n - 1 hops back around
    one, phases = solved(circulant(n, (1,), directed=True), 1)
    assert one.status == "optimal" and one.steps == phases.steps == 2 * (n - 1)


@pytest.mark.parametrize("n", [3, 4])
def test_a_complete_graph_takes_two_steps_with_one_chunk_per_server(n):
    # after one step only a root can hold every contribution, and the others need the sum
    one, _ = solved(circulant(n, tuple(range(1, n)), directed=True) if n == 3 else circulant(4, (1, 2)), 1)
    assert one.status == "optimal" and one.steps == 2


def k4_double_diagonals() -> Topology:
    """K4 with two parallel links on each diagonal (4-regular): 16 links each way."""
    return Topology(circulant_matrix(4, (1, 2)) + circulant_matrix(4, (2,)))


def test_pipelining_beats_reducescatter_then_allgather():
    # two chunks per server: the phases take 2 + 2 steps, one model 3 (one chunk's broadcast overlaps
    # another's reduction)
    one, phases = solved(k4_double_diagonals(), 2)
    assert (one.steps, phases.steps) == (3, 4) and one.status == "optimal"
    assert any(s.partial for s in one.schedule.sends) and any(not s.partial for s in one.schedule.sends)
    # 3 is proven: no schedule of this model in 2 steps
    dm = build_allreduce_model(k4_double_diagonals().matrix, 8, 2, floor=2)
    assert solution_status(run_model(dm.model, ExactOptions(time_limit_s=60))) == "infeasible"


def test_two_way_ring():
    one, phases = solved(circulant(4, (1,)), 1)
    assert one.steps == phases.steps == 4 and one.status == "optimal"


def test_refusals():
    ring = circulant(4, (1,))
    with pytest.raises(InputError, match="every server"):
        solve_allreduce_model(ring, Collective("allreduce", (0, 1, 2), 1e6), LINK)
    with pytest.raises(InputError, match="for allreduce"):
        solve_allreduce_model(ring, Collective("allgather", (0, 1, 2, 3), 1e6), LINK)
    slow = LinkModel(1e-6, 12.5e9, arcs=((0, 1, 1e-6, 1e9),))  # one direction takes several steps
    with pytest.raises(UnsupportedError, match="links of one rate"):
        solve_allreduce_model(ring, Collective("allreduce", (0, 1, 2, 3), 1e6), slow)


def test_the_pipelined_schedule_runs_as_an_msccl_algorithm():
    from topoopt_ilp.evaluation.msccl import msccl_schedule_violations
    from topoopt_ilp.export.msccl_schedule import msccl_schedule_xml

    k4 = k4_double_diagonals()
    one, _ = solved(k4, 2)
    reduce = Collective("allreduce", (0, 1, 2, 3), 1e6, 2)
    text = msccl_schedule_xml(reduce, one.schedule)
    assert msccl_schedule_violations(k4.matrix, reduce.servers, text, "allreduce").valid


def test_the_command_runs_it(tmp_path, capsys):
    import json

    from topoopt_ilp.cli import main
    from topoopt_ilp.core.solution import Solution
    from topoopt_ilp.files import save_solution

    inst = tmp_path / "k4.json"
    cluster = {"servers": 4, "degree": 4, "link_bandwidth_gbps": 100}
    demand = {"allreduce": [{"members": [0, 1, 2, 3], "bytes": 1e6}]}
    inst.write_text(json.dumps({"format": "topoopt-instance", "version": 1, "cluster": cluster, "demand": demand}))
    sol = tmp_path / "k4.solution.json"
    save_solution(Solution(status="feasible", method="by hand", topology=k4_double_diagonals()), sol, directed=False)
    argv = ["collective", str(inst), str(sol), "--collective", "allreduce", "--bytes", "1e6", "--chunks", "2"]
    out = tmp_path / "s.json"
    assert main([*argv, "--one-model", "--method", "all", "--time-limit", "60", "-o", str(out), "--json"]) == 0
    rows = {r["method"]: r for r in json.loads(capsys.readouterr().out)["results"]}
    assert rows["exact"]["steps"] == 3 and rows["exact"]["status"] == "optimal" and rows["greedy"]["steps"] >= 4
    assert main(["collective", str(inst), str(sol), "--check", str(out)]) == 0
    capsys.readouterr()
    for bad in (["--one-model", "--method", "heuristic"], ["--one-model", "--collective", "allgather"]):
        assert main([*argv, *bad]) == 2
        assert "--one-model" in capsys.readouterr().err
