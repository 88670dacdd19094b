"""The verifier accepts a valid solution and rejects each kind of corruption with a clear message."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from test_evaluate import ring_offset_routes

from conftest import minimal
from topoopt_ilp import files
from topoopt_ilp.core.routes import PathSet, RingSet, Routing
from topoopt_ilp.core.solution import Solution, Topology
from topoopt_ilp.evaluation.verify import verify
from topoopt_ilp.methods import finalize

N = 8


def instance(**over):
    data = minimal(
        cluster={"servers": N, "degree": 2, "link_bandwidth_gbps": 100, "hop_latency_us": 1.0},
        demand={
            "allreduce": [{"members": "all", "bytes": 8e6}, {"members": [0, 2, 4, 6], "bytes": 1e6}],
            "mp": {"pairs": [[0, 3, 1e6]]},
        },
    )
    data.update(over)
    return files.parse_instance(data)


def ring_matrix():
    r = np.roll(np.eye(N, dtype=np.int64), 1, axis=1)
    return r + r.T


def valid_solution(inst):
    rings = RingSet.from_lists([(0, list(range(N)), 0.5), (0, list(range(N))[::-1], 0.5), (1, [0, 2, 4, 6], 1.0)])
    paths = PathSet.from_lists([([0, 1, 2, 3], 1.0)])
    sol = Solution(
        "feasible",
        "heuristic",
        Topology(ring_matrix(), (1,)),
        routing=Routing(rings=rings, paths=paths, offset_routes=ring_offset_routes(N)),
    )
    return finalize(inst, sol)


def test_valid_solution_passes_and_survives_a_file_round_trip(tmp_path):
    inst = instance()
    sol = valid_solution(inst)
    assert verify(inst, sol).valid, verify(inst, sol).violations
    path = tmp_path / "sol.json"
    files.save_solution(sol, path, directed=False)
    again = files.load_solution(path, directed=False)
    assert verify(inst, again).valid
    assert np.array_equal(again.topology.matrix, sol.topology.matrix)
    assert again.metrics["comm_time_s"] == pytest.approx(sol.metrics["comm_time_s"])


def corrupt_matrix(sol, fn):
    m = sol.topology.matrix.copy()
    fn(m)
    return replace(sol, topology=Topology(m, sol.topology.jumps))


@pytest.mark.parametrize(
    "corrupt, message",
    [
        (
            lambda s: corrupt_matrix(s, lambda m: m.__setitem__((0, 4), 1) or m.__setitem__((4, 0), 1)),
            "server 0 has degree 3, needs exactly 2",
        ),
        (lambda s: corrupt_matrix(s, lambda m: m.__setitem__((0, 1), 2)), "not symmetric"),
        (lambda s: corrupt_matrix(s, lambda m: m.__setitem__((3, 3), 1)), "server 3 has a link to itself"),
        (lambda s: replace(s, topology=Topology(s.topology.matrix, None)), None),  # family any: jumps optional
        (
            lambda s: replace(
                s,
                routing=replace(
                    s.routing, rings=RingSet.from_lists([(0, list(range(N - 1)), 1.0), (1, [0, 2, 4, 6], 1.0)])
                ),
            ),
            "ring 0 of group 0 does not visit each member",
        ),
        (
            lambda s: replace(
                s,
                routing=replace(
                    s.routing, rings=RingSet.from_lists([(0, list(range(N)), 0.7), (1, [0, 2, 4, 6], 1.0)])
                ),
            ),
            "carry 0.7 of its bytes",
        ),
        (
            lambda s: replace(s, routing=replace(s.routing, paths=PathSet.from_lists([([0, 4, 3], 1.0)]))),
            "uses 0->4, which is not a link",
        ),
        (
            lambda s: replace(
                s, routing=replace(s.routing, paths=PathSet.from_lists([([0, 1, 0, 7, 0, 1, 2, 3], 1.0)]))
            ),
            "visits a server twice",
        ),
        (
            lambda s: replace(s, metrics={**s.metrics, "comm_time_s": s.metrics["comm_time_s"] * 1.01}),
            "metrics.comm_time_s is",
        ),
        (lambda s: replace(s, metrics={**s.metrics, "diameter": 3}), "metrics.diameter is 3"),
        (lambda s: replace(s, objective=s.objective * 0.5), "the evaluator gives"),
        (lambda s: replace(s, placement={"layer0": [0]}), "has a placement"),
        (lambda s: replace(s, topology=None), "has no topology"),
    ],
)
def test_corruptions_are_rejected(corrupt, message):
    inst = instance()
    bad = corrupt(valid_solution(inst))
    report = verify(inst, bad)
    if message is None:
        assert report.valid
    else:
        assert not report.valid
        assert any(message in v for v in report.violations), report.violations


def test_routing_that_drops_a_pair_is_rejected():
    inst = instance()
    sol = valid_solution(inst)
    from topoopt_ilp.core.routes import OffsetRoutes

    short = OffsetRoutes.from_lists([(o, j, f) for o, j, f in sol.routing.offset_routes.to_lists() if o != 2])
    report = verify(inst, replace(sol, routing=replace(sol.routing, offset_routes=short)))
    assert any("routing does not carry the demand" in v and "->" in v for v in report.violations)


def test_family_and_fixed_topology_checks():
    inst = instance(topology_family="coprime_circulant")
    sol = valid_solution(inst)
    assert verify(inst, sol).valid
    not_coprime = corrupt_matrix(sol, lambda m: None)
    not_coprime = replace(
        not_coprime,
        topology=Topology(np.roll(np.eye(N, dtype=np.int64), 2, 1) + np.roll(np.eye(N, dtype=np.int64), -2, 1), (2,)),
        metrics={},
    )
    assert any("jump 2 is not coprime" in v for v in verify(inst, not_coprime).violations)
    wrong_jumps = replace(sol, topology=Topology(sol.topology.matrix, (3,)), metrics={})
    assert any("not the circulant of the stated jumps" in v for v in verify(inst, wrong_jumps).violations)
    fixed = instance(fixed_topology={"jumps": [3]})
    assert any("fixes the topology" in v for v in verify(fixed, replace(sol, metrics={})).violations)


def test_non_regular_instance_allows_unused_ports():
    data = minimal(cluster={"servers": 5, "degree": 3, "link_bandwidth_gbps": 1, "regular": False})
    inst = files.parse_instance(data)
    x = np.zeros((5, 5), dtype=np.int64)
    for a in range(5):
        x[a, (a + 1) % 5] = x[(a + 1) % 5, a] = 1
    assert verify(inst, finalize(inst, Solution("feasible", "given", Topology(x)), routing="shortest_path")).valid
    x[0, 2] = x[2, 0] = x[0, 3] = x[3, 0] = 1
    assert any(
        "server 0 has degree 4, needs at most 3" in v
        for v in verify(inst, Solution("feasible", "given", Topology(x))).violations
    )


def test_routing_is_checked_even_without_stated_metrics():
    inst = instance()
    sol = valid_solution(inst)
    from topoopt_ilp.core.routes import OffsetRoutes

    short = OffsetRoutes.from_lists([(o, j, f) for o, j, f in sol.routing.offset_routes.to_lists() if o != 2])
    bare = replace(sol, metrics={}, objective=None, routing=replace(sol.routing, offset_routes=short))
    assert any("routing does not carry the demand" in v for v in verify(inst, bare).violations)


def test_the_files_directed_flag_must_match_the_instance(tmp_path):
    """The instance decides how links are read, but a file that says the other thing is reported as
    such, not as degree errors (or, worse, as valid)."""
    path = tmp_path / "sol.json"

    def report_after_flipping(inst, sol, directed):
        """Save ``sol`` (valid), flip the file's directed flag, and verify the file again."""
        files.save_solution(sol, path, directed=directed)
        assert files.load_solution(path, directed=directed).topology.stated_directed is directed
        assert verify(inst, files.load_solution(path, directed=directed)).valid
        data = json.loads(path.read_text())
        data["topology"]["directed"] = not directed
        path.write_text(json.dumps(data))
        return verify(inst, files.load_solution(path, directed=directed))

    inst = instance()
    report = report_after_flipping(inst, valid_solution(inst), directed=False)
    assert report.violations == ("the solution's links are directed, the instance's undirected",)
    # A directed instance and a file that says undirected (its links otherwise the instance's own).
    cluster = {"servers": N, "degree": 1, "link_bandwidth_gbps": 100, "hop_latency_us": 0.0, "links": "directed"}
    dinst = files.parse_instance(minimal(cluster=cluster))
    ring = np.roll(np.eye(N, dtype=np.int64), 1, axis=1)
    dsol = finalize(dinst, Solution("feasible", "x", Topology(ring, (1,))))
    report = report_after_flipping(dinst, dsol, directed=True)
    assert report.violations == ("the solution's links are undirected, the instance's directed",)
    # Built in code (no file): nothing stated, nothing to compare.
    assert dsol.topology.stated_directed is None and verify(dinst, dsol).valid


def test_optimal_needs_a_bound():
    # Found by a user: a hand-edited heuristic solution claiming "optimal" with no bound was valid.
    inst = instance()
    sol = valid_solution(inst)
    claimed = replace(sol, status="optimal", method="exact")
    assert verify(inst, claimed).violations == ("status optimal but the solution states no bound",)
    proven = replace(sol, status="optimal", method="exact", bound=sol.objective)
    assert verify(inst, proven).valid


@pytest.mark.parametrize("method", ["heuristic", "alternating", "given"])
def test_a_method_that_proves_nothing_claims_no_bound(method):
    # Found by fuzzing: a heuristic solution relabelled optimal with bound = objective and gap 0 passed.
    inst = instance()
    sol = replace(valid_solution(inst), method=method)
    relabelled = replace(sol, status="optimal", bound=sol.objective, gap=0.0)
    assert verify(inst, relabelled).violations == (
        f"status optimal from method {method}, which proves no bound (only the exact method does)",
    )
    bounded = replace(sol, bound=sol.objective * 0.5)
    assert (
        verify(inst, bounded)
        .violations[0]
        .endswith(f"from method {method}, which proves no bound (only the exact method does)")
    )
    assert verify(inst, sol).valid


@pytest.mark.parametrize("routing", ["given", "shortest_path"])
def test_evaluate_names_the_solution_file_of_another_size(tmp_path, capsys, routing):
    """Found by an audit: evaluate said 'the topology has 8 servers, the instance 6' without the file."""
    from topoopt_ilp.cli import main

    sol_path, inst_path = tmp_path / "eight.json", tmp_path / "six.json"
    files.save_solution(valid_solution(instance()), sol_path, directed=False)
    inst_path.write_text(json.dumps(minimal(cluster={"servers": 6, "degree": 2, "link_bandwidth_gbps": 100})))
    assert main(["evaluate", str(inst_path), str(sol_path), "--routing", routing]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {sol_path}: ") and "8 servers" in err[0], err


def test_stated_jumps_must_match_the_links_in_family_any_too(tmp_path):
    """Found by an audit: with topology_family any, a file stating jumps [1, 3] over the links of the
    circulant {1} was reported valid."""
    inst = instance()
    assert inst.topology_family == "any"
    sol = valid_solution(inst)
    assert verify(inst, sol).valid
    path = tmp_path / "sol.json"
    files.save_solution(sol, path, directed=False)
    data = json.loads(path.read_text())
    data["topology"]["jumps"] = [1, 3]
    path.write_text(json.dumps(data))
    report = verify(inst, files.load_solution(path, directed=False))
    assert report.violations == ("links are not the circulant of the stated jumps [1, 3]",)
    data["topology"]["jumps"] = [9]
    path.write_text(json.dumps(data))
    assert "jump set [9] has a jump outside 1..7" in verify(inst, files.load_solution(path, directed=False)).violations
