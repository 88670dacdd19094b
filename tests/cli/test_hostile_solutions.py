"""Tampered and malformed solution, LIBRA and instance files through the CLI: each is refused with exit 2
and one short line naming the file and the field (or, for a claim that does not hold, a verify
violation), never an internal error, never a value echoed in full."""

from __future__ import annotations

import json

import pytest

from conftest import INSTANCES
from topoopt_ilp.cli import main

RING8 = str(INSTANCES / "fixed-ring-8.json")
PRISM6 = str(INSTANCES / "fixed-links-6.json")
HUGE = 2**64  # beyond numpy's int64: must be refused by range, never converted
LONG = 10**400  # beyond a float: refused by its length

#: At most this many bytes in one error line (the file's path included).
MAX_LINE = 400


def ring8(**extra) -> dict:
    """A valid 8-server ring solution for ``fixed-ring-8.json``; ``extra`` adds or replaces top-level keys."""
    links = [[k, (k + 1) % 8, 1] for k in range(8)]
    doc = {
        "format": "topoopt-solution",
        "version": 1,
        "status": "feasible",
        "method": "given",
        "topology": {"servers": 8, "directed": False, "links": links},
    }
    doc.update(extra)
    return doc


def offsets(routes: dict[int, list[int]], **extra) -> dict:
    """A ring solution with translation-invariant routes: offset -> its jumps (every other offset the
    shortest way round the ring)."""
    shortest = {o: [1] * o if o <= 4 else [7] * (8 - o) for o in range(1, 8)}
    shortest.update(routes)
    doc = ring8(routing={"offset_routes": [[o, 1.0, shortest[o]] for o in range(1, 8)]}, **extra)
    doc["topology"]["jumps"] = [1]
    return doc


def prism6(ring: list[int]) -> dict:
    """The 6-server prism of ``fixed-links-6.json`` with one given AllReduce ring."""
    links = [[0, 1, 1], [1, 2, 1], [2, 0, 1], [3, 4, 1], [4, 5, 1], [5, 3, 1], [0, 3, 1], [1, 4, 1], [2, 5, 1]]
    return {
        "format": "topoopt-solution",
        "version": 1,
        "status": "feasible",
        "method": "given",
        "topology": {"servers": 6, "directed": False, "links": links},
        "routing": {"rings": [[0, 1.0, ring]]},
    }


#: (case, solution document, the field the one-line refusal names and what it says)
REFUSED = [
    ("link count of 2^64", ring8(topology={"servers": 8, "links": [[0, 1, HUGE]]}), "topology.links[0][2]: must be"),
    ("path node of 2^64", ring8(routing={"paths": [[1.0, [0, HUGE]]]}), "routing.paths[0][1][1]: must be <="),
    ("jump of 2^64", ring8(routing={"offset_routes": [[1, 1.0, [HUGE]]]}), "routing.offset_routes[0][2][0]: must be"),
    ("offset of 2^64", ring8(routing={"offset_routes": [[HUGE, 1.0, [1]]]}), "routing.offset_routes[0][0]: must be"),
    ("offset of -2^63-1", ring8(routing={"offset_routes": [[-(2**63) - 1, 1.0, [1]]]}), "offset_routes[0][0]"),
    ("ring group of 2^64", ring8(routing={"rings": [[HUGE, 1.0, [0, 1]]]}), "routing.rings[0][0]: must be <="),
    ("ring member of 2^64", ring8(routing={"rings": [[0, 1.0, [0, HUGE]]]}), "routing.rings[0][2][1]: must be <="),
    ("401-digit wall time", ring8(wall_time_s=LONG), "wall_time_s: must be a finite number, got an integer of 401"),
    ("401-digit objective", ring8(objective=LONG), "objective: must be a finite number, got an integer of 401"),
    ("401-digit bound", ring8(bound=LONG), "bound: must be a finite number"),
    ("401-digit gap", ring8(gap=LONG), "gap: must be a finite number"),
    ("401-digit throughput", ring8(metrics={"throughput": LONG}), "metrics.throughput: must be a finite number"),
    ("401-digit bytes", ring8(metrics={"total_bytes": LONG}), "metrics.total_bytes: must be a finite number"),
    ("group times not a list", ring8(metrics={"group_times_s": 5}), "metrics.group_times_s: expected a list"),
    ("routing not a string", ring8(metrics={"routing": 3}), "metrics.routing"),
    ("connected not a bool", ring8(metrics={"connected": "yes"}), "metrics.connected"),
    ("-1 late in a path", ring8(routing={"paths": [[1.0, [0, 1, -1, 2]]]}), "routing.paths[0][1][2]: must be >= 0"),
    (
        "-1 inside a path that claims shortest_path routing",
        ring8(routing={"paths": [[1.0, [0, -1, 1]]]}, metrics={"routing": "shortest_path"}),
        "routing.paths[0][1][1]: must be >= 0, got -1",
    ),
    ("a 0 jump", offsets({2: [1, 0, 1]}), "routing.offset_routes[1][2][1]: a jump is never 0"),
    ("a 0 jump then a non-link", offsets({6: [1, 0, 5]}), "routing.offset_routes[5][2][1]: a jump is never 0"),
]


def _write(tmp_path, doc, name="tampered.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def _one_line(capsys, path: str) -> str:
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {path}: "), err
    assert len(err.encode()) <= MAX_LINE, err
    assert "internal error" not in err and "Traceback" not in err
    return err


@pytest.mark.parametrize("command", ["verify", "evaluate"])
@pytest.mark.parametrize("case, doc, needle", REFUSED, ids=[r[0] for r in REFUSED])
def test_a_malformed_solution_is_one_line_exit_2(tmp_path, capsys, command, case, doc, needle):
    path = _write(tmp_path, doc)
    assert main([command, RING8, path]) == 2
    assert needle in _one_line(capsys, path)


def test_a_zero_jump_that_would_score_better_is_refused_not_scored(tmp_path, capsys):
    """The route [1, 0, 1] is the route [1, 1] with a jump that names no link; scoring it would claim an
    11 % better throughput for the same ring. The file claims what such a score would be."""
    doc = offsets({2: [1, 0, 1]}, objective=1388.888888888889, metrics={"throughput": 1388.888888888889})
    path = _write(tmp_path, doc)
    assert main(["verify", RING8, path]) == 2
    assert "a jump is never 0" in _one_line(capsys, path)
    honest = _write(tmp_path, offsets({2: [1, 1]}), "honest.json")
    assert main(["evaluate", RING8, honest, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["throughput"] == pytest.approx(1250.0)


def test_a_path_that_repeats_a_node_cannot_be_scored_and_fails_verification(tmp_path, capsys):
    path = _write(tmp_path, ring8(routing={"paths": [[1.0, [0, 0]]]}))
    assert main(["evaluate", RING8, path]) == 2
    assert "path 0 visits a server twice" in _one_line(capsys, path)
    assert main(["verify", RING8, path]) == 1
    assert "path 0 visits a server twice" in capsys.readouterr().out


def test_a_ring_naming_server_minus_one_is_refused_not_dropped(tmp_path, capsys):
    """Server -1 names no server of any cluster: the file is malformed. Server 8 could exist in a larger
    cluster, so the file reads and verify finds the ring wrong for this one."""
    path = _write(tmp_path, prism6([0, -1, 1, 2, 5, 4, 3]))
    assert main(["verify", PRISM6, path]) == 2
    assert "routing.rings[0][2][1]: must be >= 0, got -1" in _one_line(capsys, path)
    path = _write(tmp_path, prism6([0, 8, 1, 2, 5, 4, 3]))
    assert main(["verify", PRISM6, path]) == 1
    assert "ring 0 of group 0 does not visit each member of the group exactly once" in capsys.readouterr().out


def test_a_long_route_is_echoed_short(tmp_path, capsys):
    """5,000 jumps that do not add up to their offset: evaluate refuses in one short line, verify reports a
    violation whose line is short too."""
    path = _write(tmp_path, offsets({1: [1] * 5000}))
    assert main(["evaluate", RING8, path]) == 2
    assert "do not add up to offset 1" in _one_line(capsys, path)
    assert main(["verify", RING8, path]) == 1
    out = capsys.readouterr().out
    assert "do not add up" in out and max(len(line) for line in out.splitlines()) < MAX_LINE, out[:500]


def test_instance_values_are_echoed_short(tmp_path, capsys):
    data = json.loads((INSTANCES / "dlrm-mini-6.json").read_text())
    for edit, needle in (
        (lambda d: d.update(format=["topoopt-instance"] * 2000), "format: expected 'topoopt-instance', got ["),
        (lambda d: d["workload"]["layers"][0].update(configs=[1, 10**3999]), "an integer of 4000 digits"),
        (lambda d: d.update(version={"a": {"a": {"a": {"a": 1}}}}), "version: unsupported version {'a': {'a': "),
    ):
        doc = json.loads(json.dumps(data))
        edit(doc)
        path = _write(tmp_path, doc, "instance.json")
        assert main(["validate", path]) == 2
        assert needle in _one_line(capsys, path)


def _first_collective(libra: dict) -> dict:
    return libra["workload"]["layers"][0]["forward"]["collective"]


def test_libra_values_are_echoed_short(tmp_path, capsys):
    data = json.loads((INSTANCES / "libra" / "small-2d.json").read_text())
    for edit, needle in (
        (lambda d: d.update(version={"a": {"a": {"a": {"a": 1}}}}), "version: unsupported version {'a': {'a': "),
        (lambda d: d.update(format="x" * 20000), "format: expected"),
        (lambda d: _first_collective(d).update(communicator="x" * 20000), "unknown communicator 'xxx"),
        (lambda d: _first_collective(d).update(type="y" * 20000), "collective.type"),
    ):
        doc = json.loads(json.dumps(data))
        edit(doc)
        path = _write(tmp_path, doc, "libra.json")
        assert main(["bandwidth", path]) == 2
        assert needle in _one_line(capsys, path)


def test_a_libra_budget_too_small_to_solve_is_refused(tmp_path, capsys):
    """A budget of 1e-300 GB/s scales the LP beyond what any solver takes: refused by the reader."""
    data = json.loads((INSTANCES / "libra" / "gpt3-4d.json").read_text())
    data["budget"] = {"total_bandwidth_gbps": 1e-300}
    path = _write(tmp_path, data, "libra.json")
    assert main(["bandwidth", path]) == 2
    assert "budget.total_bandwidth_gbps: must be at least 1e-06" in _one_line(capsys, path)
