"""Solution files: atomic writes, strict reading, round trips."""

from __future__ import annotations

import json
import os

import pytest

from topoopt_ilp import files
from topoopt_ilp.errors import SolutionFileError
from topoopt_ilp.files import jsonio, solution_file


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "sol.json"
    target.write_text("old content\n")
    with pytest.raises(ValueError):
        files.write_json_atomic(target, {"x": float("nan")})  # JSON has no NaN: serialisation fails midway
    assert target.read_text() == "old content\n"  # the previous file is untouched
    assert sorted(os.listdir(tmp_path)) == ["sol.json"]  # and no temporary file is left behind
    files.write_json_atomic(target, {"x": 1})
    assert json.loads(target.read_text()) == {"x": 1}
    assert oct(target.stat().st_mode & 0o777) != oct(0o600)  # an ordinary file, not mkstemp's private mode


@pytest.mark.parametrize(
    "doc, field",
    [
        ({"format": "topoopt-solution", "version": 1, "status": "great", "method": "x", "topology": None}, "status"),
        (
            {
                "format": "topoopt-solution",
                "version": 1,
                "status": "feasible",
                "method": "x",
                "topology": {"servers": 4, "links": [[0, 9, 1]]},
            },
            "topology.links[0][1]",
        ),
        (
            {
                "format": "topoopt-solution",
                "version": 1,
                "status": "feasible",
                "method": "x",
                "topology": {"servers": 4, "links": []},
                "routing": {"paths": [[1.5, [0, 1]]]},
            },
            "routing.paths[0][0]",
        ),
        ({"format": "topoopt-instance", "version": 1, "status": "feasible", "method": "x", "topology": None}, "format"),
    ],
)
def test_malformed_solutions_name_the_field(doc, field):
    with pytest.raises(SolutionFileError) as exc:
        files.parse_solution(doc)
    assert exc.value.field == field


def test_direction_is_read_from_the_file():
    doc = {
        "format": "topoopt-solution",
        "version": 1,
        "status": "feasible",
        "method": "x",
        "topology": {"servers": 3, "directed": True, "links": [[0, 1, 1], [1, 2, 1], [2, 0, 1]]},
    }
    sol = files.parse_solution(doc)
    assert sol.topology.matrix[0, 1] == 1 and sol.topology.matrix[1, 0] == 0
    doc["topology"]["directed"] = False
    assert files.parse_solution(doc).topology.matrix[1, 0] == 1


def test_non_finite_numbers_are_written_as_null_and_read_back(tmp_path):
    """A disconnected design's times are inf: the file is still written (JSON null) and reads back."""
    import numpy as np

    from conftest import minimal
    from topoopt_ilp.core.solution import Solution, Topology
    from topoopt_ilp.evaluation.verify import verify
    from topoopt_ilp.methods import finalize

    inst = files.parse_instance(minimal(demand={"allreduce": [{"members": "all", "bytes": 1e6}], "all_to_all": 1e6}))
    half = np.roll(np.eye(4, dtype=np.int64), 1, axis=1)
    half = half + half.T
    x = np.zeros((8, 8), dtype=np.int64)
    x[:4, :4] = x[4:, 4:] = half  # two 4-rings: disconnected, every time inf
    sol = finalize(inst, Solution("feasible", "baseline", Topology(x)))
    assert sol.metrics["group_times_s"] == [float("inf")]
    sol = Solution(
        "feasible",
        "baseline",
        sol.topology,
        objective=float("inf"),
        bound=float("nan"),
        wall_time_s=float("inf"),
        metrics=sol.metrics,
        details={"trace": [1.0, float("nan")], "best": np.float64("inf"), "n": np.int64(3)},
    )
    path = tmp_path / "sol.json"
    files.save_solution(sol, path, directed=False)
    data = json.loads(path.read_text())
    assert data["objective"] is None and data["bound"] is None and data["wall_time_s"] is None
    assert data["metrics"]["iteration_time_s"] is None and data["metrics"]["group_times_s"] == [None]
    assert data["details"] == {"trace": [1.0, None], "best": None, "n": 3}
    again = files.load_solution(path)
    assert again.objective is None and again.wall_time_s == 0.0 and again.metrics["throughput"] == 0.0
    # the file round trip keeps everything; the design itself cannot carry the demand across the rings
    assert all(v.startswith("no path from") for v in verify(inst, again).violations), verify(inst, again).violations


def test_file_size_limits_instances_and_solutions_apart(tmp_path, monkeypatch):
    """Instances are capped at MAX_FILE_BYTES before parsing; solution files, which carry their
    routing (77 MiB at 1024 servers), at MAX_SOLUTION_BYTES: what solve writes, it reads back."""
    from conftest import INSTANCES
    from topoopt_ilp.errors import InstanceError
    from topoopt_ilp.methods import solve

    inst = files.load_instance(INSTANCES / "mix-8.json")
    out = tmp_path / "sol.json"
    files.save_solution(solve(inst, method="heuristic"), out, directed=False)
    size = out.stat().st_size
    monkeypatch.setattr(jsonio, "MAX_FILE_BYTES", size - 1)
    assert files.load_solution(out).has_solution  # the instance limit does not apply
    with pytest.raises(InstanceError, match="MiB limit"):
        files.load_instance(out)
    monkeypatch.setattr(solution_file, "MAX_SOLUTION_BYTES", size - 1)
    with pytest.raises(SolutionFileError, match="MiB limit"):
        files.load_solution(out)
