"""Every number a file format holds goes through a checked reader: the test finds the numeric fields
of each format in real files (the shipped instances and LIBRA problems; solutions and a schedule the
tool writes) and puts in each field, one at a time, what no number check lets through: a string
that reads as a number, a boolean, a 400-digit integer, a list, an object. Each must be refused with
exit 2 and one short line naming that field. Values a number check lets through but a range check
may not (2^64, -1, 0.5, 1e300, 0) must never cause an internal error.

A new field read with a bare ``float()`` or ``int()`` fails here as soon as a file holds it: a
string ``"1"`` and ``true`` pass ``float()``, and a 400-digit integer makes it raise.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fuzz_seeds import INSTANCE_DOCS, LIBRA_DOCS, collective_schedule_files, schedule_files, solutions

from conftest import INSTANCES
from topoopt_ilp.cli import main

#: What no number check lets through.
NOT_A_NUMBER = {"a string": "1", "a boolean": True, "a 400-digit integer": 10**400, "a list": [1], "an object": {}}
#: What a number check lets through; a range check may refuse it, nothing may crash on it.
EDGE_VALUES = {"2^64": 2**64, "-2^64": -(2**64), "-1": -1, "0": 0, "0.5": 0.5, "1e300": 1e300, "-1e300": -1e300}
MAX_LINE = 400


def numeric_leaves(value, path: str = "") -> Iterator[tuple[str, tuple]]:
    """(printed path, key path) of every number in a JSON document."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from numeric_leaves(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for k, item in enumerate(value):
            yield from numeric_leaves(item, f"{path}[{k}]")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield path, ()


def _keyed(value, keys: tuple = ()) -> Iterator[tuple[tuple, object]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _keyed(item, (*keys, key))
    elif isinstance(value, list):
        for k, item in enumerate(value):
            yield from _keyed(item, (*keys, k))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield keys, value


def printed(keys: tuple) -> str:
    out = ""
    for key in keys:
        if isinstance(key, int):
            out += f"[{key}]"
        elif not key.isidentifier():  # a table keyed by value, as the messages name it: cost.nic_port_usd["10"]
            out += f'["{key}"]'
        else:
            out += f".{key}" if out else key
    return out


def fields(documents: dict[str, dict], skip: tuple[str, ...] = ()) -> list[tuple[str, str, tuple]]:
    """One (document name, field pattern, key path) per numeric field pattern (indices as ``[*]``): the
    first place any of the documents holds it."""
    seen: dict[str, tuple[str, tuple]] = {}
    for name, doc in documents.items():
        for keys, _ in _keyed(doc):
            pattern = re.sub(r"\[\d+\]", "[*]", printed(keys))
            if not pattern.startswith(skip):
                seen.setdefault(pattern, (name, keys))
    return [(name, pattern, keys) for pattern, (name, keys) in sorted(seen.items())]


def replaced(doc: dict, keys: tuple, value) -> dict:
    out = copy.deepcopy(doc)
    target = out
    for key in keys[:-1]:
        target = target[key]
    target[keys[-1]] = value
    return out


def run(capsys, argv: list[str]) -> tuple[int, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.err.strip()


def assert_names_the_field(code: int, err: str, path: str, field: str) -> None:
    assert code == 2, (field, code, err[:300])
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {path}: "), err[:300]
    assert len(err.encode()) <= MAX_LINE, err[:300]
    assert field in err, (field, err)


def assert_no_crash(code: int, err: str, path: str) -> None:
    assert code in (0, 1, 2, 3, 4), (code, err[:300])
    assert "internal error" not in err and "Traceback" not in err, err[:500]
    if code == 2:
        assert len(err.splitlines()) == 1 and err.startswith(f"error: {path}: ") and len(err.encode()) <= MAX_LINE


# --- the documents ------------------------------------------------------------------------------


# --- the formats ----------------------------------------------------------------------------------

INSTANCE_FIELDS = fields(INSTANCE_DOCS)
LIBRA_FIELDS = fields(LIBRA_DOCS)
#: A solution's ``details`` are what its method reports, free-form (docs/guide/instance-format.md).
SOLUTION_SKIP = ("details",)


def test_the_formats_have_the_fields_this_test_expects():
    """A guard that the enumeration finds what it must: if a sample file lost a section, the fields
    below would no longer be tried."""
    instance = {pattern for _, pattern, _ in INSTANCE_FIELDS}
    assert {"cluster.servers", "cluster.degree", "cluster.link_bandwidth_gbps", "version"} <= instance
    assert any(p.startswith("workload.layers[*]") for p in instance)
    assert any(p.startswith("demand.mp") for p in instance) and any(p.startswith("cost.") for p in instance)
    assert {"job.expert_load[*].matrix[*][*]", "job.expert_load[*].zipf", "job.expert_scenario"} <= instance
    libra = {pattern for _, pattern, _ in LIBRA_FIELDS}
    assert any(p.startswith("dimensions[*]") for p in libra) and any(p.startswith("workload.") for p in libra)


@pytest.mark.parametrize("name, pattern, keys", INSTANCE_FIELDS, ids=[f[1] for f in INSTANCE_FIELDS])
def test_every_numeric_field_of_an_instance_is_checked(tmp_path, capsys, name, pattern, keys):
    path = tmp_path / name
    for what, value in NOT_A_NUMBER.items():
        path.write_text(json.dumps(replaced(INSTANCE_DOCS[name], keys, value)))
        assert_names_the_field(*run(capsys, ["validate", str(path)]), str(path), printed(keys))
    for value in EDGE_VALUES.values():
        path.write_text(json.dumps(replaced(INSTANCE_DOCS[name], keys, value)))
        assert_no_crash(*run(capsys, ["validate", str(path)]), str(path))


@pytest.mark.parametrize("name, pattern, keys", LIBRA_FIELDS, ids=[f[1] for f in LIBRA_FIELDS])
def test_every_numeric_field_of_a_libra_problem_is_checked(tmp_path, capsys, name, pattern, keys):
    path = tmp_path / name
    for value in NOT_A_NUMBER.values():
        path.write_text(json.dumps(replaced(LIBRA_DOCS[name], keys, value)))
        assert_names_the_field(*run(capsys, ["bandwidth", str(path), "--time-limit", "5"]), str(path), printed(keys))


def test_every_numeric_field_of_a_solution_is_checked(tmp_path, capsys):
    docs = solutions()
    checked = fields(docs, SOLUTION_SKIP)
    assert {"objective", "bound", "gap", "wall_time_s", "topology.links[*][*]", "routing.rings[*][*][*]"} <= {
        p for _, p, _ in checked
    }
    assert any(p.startswith("routing.offset_routes") for _, p, _ in checked)
    assert any(p.startswith("routing.paths") for _, p, _ in checked)
    assert any(p.startswith("placement.") for _, p, _ in checked)
    path = tmp_path / "solution.json"
    for name, _pattern, keys in checked:
        instance = str(INSTANCES / f"{name}.json")
        for value in NOT_A_NUMBER.values():
            path.write_text(json.dumps(replaced(docs[name], keys, value)))
            assert_names_the_field(*run(capsys, ["verify", instance, str(path)]), str(path), printed(keys))
        for value in EDGE_VALUES.values():
            path.write_text(json.dumps(replaced(docs[name], keys, value)))
            assert_no_crash(*run(capsys, ["verify", instance, str(path)]), str(path))


def test_every_numeric_field_of_a_schedule_is_checked(tmp_path, capsys):
    solution, schedule_file = schedule_files()
    doc = json.loads(Path(schedule_file).read_text())
    instance = str(INSTANCES / "dlrm-mini-6.json")
    path = tmp_path / "schedule.json"
    checked = fields({"schedule": doc})
    assert {"makespan_s", "time_unit_s", "micro_batches", "tasks[*].start_s"} <= {p for _, p, _ in checked}
    for _name, _pattern, keys in checked:
        for value in NOT_A_NUMBER.values():
            path.write_text(json.dumps(replaced(doc, keys, value)))
            code, err = run(capsys, ["schedule", instance, solution, "--check", str(path)])
            assert_names_the_field(code, err, str(path), printed(keys))
        for value in EDGE_VALUES.values():
            path.write_text(json.dumps(replaced(doc, keys, value)))
            assert_no_crash(*run(capsys, ["schedule", instance, solution, "--check", str(path)]), str(path))


def test_every_numeric_field_of_a_collective_schedule_is_checked(tmp_path, capsys):
    instance, solution, schedule_file = collective_schedule_files()
    doc = json.loads(Path(schedule_file).read_text())
    path = tmp_path / "collective.json"
    checked = fields({"schedule": doc})
    assert {"steps", "step_s", "collective.bytes", "link.alpha_s", "sends[*][*]"} <= {p for _, p, _ in checked}
    argv = ["collective", instance, solution, "--check", str(path)]
    for _name, _pattern, keys in checked:
        for value in NOT_A_NUMBER.values():
            path.write_text(json.dumps(replaced(doc, keys, value)))
            assert_names_the_field(*run(capsys, argv), str(path), printed(keys))
        for value in EDGE_VALUES.values():
            path.write_text(json.dumps(replaced(doc, keys, value)))
            assert_no_crash(*run(capsys, argv), str(path))
