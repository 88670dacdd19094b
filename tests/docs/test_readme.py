"""The README's Python example runs as written, from the repository root."""

from __future__ import annotations

import os
import re

from conftest import ROOT


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
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("(1, 5) ")  # the testbed's jumps
    status, objective, comm = out[1].split()
    assert status == "optimal" and float(objective) == float(comm)  # the MILP agrees with the evaluator


def test_readme_instance_example_is_valid():
    import json

    from topoopt_ilp import io

    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```json\n(.*?)```", text, flags=re.S)
    assert blocks
    for block in blocks:
        inst = io.parse_instance(json.loads(block))
        assert inst.fixed_topology_matrix().sum(axis=1).tolist() == [inst.d] * inst.n
