"""Solution files: atomic writes, strict reading, round trips."""

from __future__ import annotations

import json
import os

import pytest

from topoopt_ilp import io
from topoopt_ilp.errors import SolutionFileError


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "sol.json"
    target.write_text("old content\n")
    with pytest.raises(ValueError):
        io.write_json_atomic(target, {"x": float("nan")})  # JSON has no NaN: serialisation fails midway
    assert target.read_text() == "old content\n"  # the previous file is untouched
    assert sorted(os.listdir(tmp_path)) == ["sol.json"]  # and no temporary file is left behind
    io.write_json_atomic(target, {"x": 1})
    assert json.loads(target.read_text()) == {"x": 1}
    assert oct(target.stat().st_mode & 0o777) != oct(0o600)  # an ordinary file, not mkstemp's private mode


@pytest.mark.parametrize("doc, field", [
    ({"format": "topoopt-solution", "version": 1, "status": "great", "method": "x", "topology": None}, "status"),
    ({"format": "topoopt-solution", "version": 1, "status": "feasible", "method": "x",
      "topology": {"servers": 4, "links": [[0, 9, 1]]}}, "topology.links[0]"),
    ({"format": "topoopt-solution", "version": 1, "status": "feasible", "method": "x",
      "topology": {"servers": 4, "links": []}, "routing": {"paths": [[1.5, [0, 1]]]}}, "routing.paths[0][0]"),
    ({"format": "topoopt-instance", "version": 1, "status": "feasible", "method": "x", "topology": None}, "format"),
])
def test_malformed_solutions_name_the_field(doc, field):
    with pytest.raises(SolutionFileError) as exc:
        io.parse_solution(doc)
    assert exc.value.field == field


def test_direction_is_read_from_the_file():
    doc = {"format": "topoopt-solution", "version": 1, "status": "feasible", "method": "x",
           "topology": {"servers": 3, "directed": True, "links": [[0, 1, 1], [1, 2, 1], [2, 0, 1]]}}
    sol = io.parse_solution(doc)
    assert sol.topology.matrix[0, 1] == 1 and sol.topology.matrix[1, 0] == 0
    doc["topology"]["directed"] = False
    assert io.parse_solution(doc).topology.matrix[1, 0] == 1
