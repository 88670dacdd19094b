"""The README's examples run as written, from the repository root, and the README stays short."""

from __future__ import annotations

import json
import os
import re

from conftest import ROOT

README_MAX_LINES = 400


def test_readme_python_blocks_run(capsys):
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "the README has a Python example"
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        for block in blocks:
            exec(compile(block, "README.md", "exec"), {"__name__": "readme"})
    finally:
        os.chdir(cwd)
    captured = capsys.readouterr()
    out = captured.out.splitlines()
    assert out[0].startswith("(1, 5) ")  # the testbed's jumps
    status, objective, comm = out[1].split()
    assert status == "optimal" and float(objective) == float(comm)  # the MILP agrees with the evaluator
    assert out[2:5] == ["0", "4", "2"]  # the embedding example's exit codes: solved, no solution, bad input
    assert "error: instances/no-such-file.json: " in captured.err


def test_readme_instance_example_is_valid():
    from topoopt_ilp import parse_instance

    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```json\n(.*?)```", text, flags=re.S)
    assert blocks
    for block in blocks:
        inst = parse_instance(json.loads(block))
        assert inst.fixed_topology_matrix().sum(axis=1).tolist() == [inst.d] * inst.n


def test_readme_is_a_short_guide():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; the details belong in docs/"
