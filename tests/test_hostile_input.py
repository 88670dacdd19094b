"""Malformed or hostile instance files: one clear InstanceError, quickly, never anything else."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import instance_data
from topoopt_ilp import io
from topoopt_ilp.errors import InstanceError
from topoopt_ilp.instance import Instance

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8),
    st.sampled_from([0, -1, 10**9, 1e308, "all", "12", [], {}]),
)
json_values = st.recursive(json_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                                 st.dictionaries(st.text(max_size=6), inner, max_size=3)), max_leaves=8)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node[:6]):
            yield from _paths(v, prefix + (i,))


def _mutate(data, path, action, value):
    if not path:
        return value if action == "replace" else data
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    if action == "replace":
        parent[key] = value
    elif action == "delete":
        del parent[key]
    elif action == "add" and isinstance(parent, dict):
        parent[str(value)[:10] + "_x"] = value
    return data


@settings(max_examples=int(__import__("os").environ.get("HOSTILE_EXAMPLES", "300")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["testbed-12", "mix-8", "fixed-links-6", "all-to-all-16", "paper/candle-testbed-12-d4"]), st.data())
def test_mutated_instances_give_instance_error_or_instance(name, data):
    doc = instance_data(name)
    paths = list(_paths(doc))
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(paths))
        action = data.draw(st.sampled_from(["replace", "delete", "add"]))
        value = data.draw(json_values)
        try:
            doc = _mutate(doc, path, action, value)
        except (KeyError, IndexError, TypeError):
            pass
        paths = list(_paths(doc))
    started = time.perf_counter()
    try:
        result = io.parse_instance(json.loads(json.dumps(doc)))
    except InstanceError as exc:
        assert str(exc) and "\n" not in str(exc)
    else:
        assert isinstance(result, Instance)
    assert time.perf_counter() - started < 1.0


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "topoopt_ilp", *args], capture_output=True, text=True, cwd=cwd, timeout=60)


def test_cli_hostile_files_exit_2_with_one_line(tmp_path):
    cases = {
        "truncated.json": '{"format": "topoopt-instance", "version": 1, "cluster": {"servers": 12',
        "huge_n.json": json.dumps({"format": "topoopt-instance", "version": 1,
                                   "cluster": {"servers": 10**9, "degree": 4, "link_bandwidth_gbps": 1},
                                   "demand": {"all_to_all": 1}}),
        "nan.json": '{"format": "topoopt-instance", "version": 1, "cluster": {"servers": 4, "degree": 2, '
                    '"link_bandwidth_gbps": 1}, "demand": {"all_to_all": NaN}}',
        "inf.json": '{"format": "topoopt-instance", "version": 1, "cluster": {"servers": 4, "degree": 2, '
                    '"link_bandwidth_gbps": 1}, "demand": {"allreduce": [{"members": "all", "bytes": Infinity}]}}',
        "matrix.json": json.dumps({"format": "topoopt-instance", "version": 1,
                                   "cluster": {"servers": 4, "degree": 2, "link_bandwidth_gbps": 1},
                                   "demand": {"mp": {"matrix": [[0] * 3000] * 3000}}}),
        "string.json": json.dumps({"format": "topoopt-instance", "version": 1,
                                   "cluster": {"servers": "many", "degree": 2, "link_bandwidth_gbps": 1}}),
        "odd.json": json.dumps({"format": "topoopt-instance", "version": 1,
                                "cluster": {"servers": 5, "degree": 3, "link_bandwidth_gbps": 1}, "demand": {"all_to_all": 1}}),
        "binary.json": b"\xff\xfe\x00garbage",
        # Found by a user: a key given twice was accepted silently (the last one won).
        "duplicate.json": '{"format": "topoopt-instance", "version": 1, "cluster": {"servers": 8, "servers": 16, '
                          '"degree": 2, "link_bandwidth_gbps": 1}, "demand": {"all_to_all": 1}}',
        "version_string.json": json.dumps({"format": "topoopt-instance", "version": "1",
                                           "cluster": {"servers": 4, "degree": 2, "link_bandwidth_gbps": 1}}),
    }
    for name, content in cases.items():
        p = tmp_path / name
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
        out = tmp_path / f"{name}.sol.json"
        started = time.perf_counter()
        r = _cli("solve", str(p), "--out", str(out))
        elapsed = time.perf_counter() - started
        assert r.returncode == 2, (name, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and str(p) in lines[0], (name, r.stderr)
        assert "Traceback" not in r.stderr and not out.exists()
        assert elapsed < 10  # interpreter start-up included; the parse itself is checked above to take < 1 s


def test_duplicate_keys_and_string_versions_are_named(tmp_path):
    p = tmp_path / "dup.json"
    p.write_text('{"format": "topoopt-instance", "version": 1, "cluster": {"servers": 8, "servers": 16, "degree": 2, '
                 '"link_bandwidth_gbps": 1}, "demand": {"all_to_all": 1}}')
    r = _cli("validate", str(p))
    assert r.returncode == 2 and "key 'servers' appears twice" in r.stderr
    p.write_text(json.dumps({"format": "topoopt-instance", "version": "1", "cluster": {"servers": 4, "degree": 2,
                                                                                     "link_bandwidth_gbps": 1}}))
    r = _cli("validate", str(p))
    assert r.returncode == 2 and "the string '1'" in r.stderr and "the number 1" in r.stderr


def test_ctrl_c_exits_130_with_one_line(monkeypatch, capsys):
    from topoopt_ilp import cli

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(io, "load_instance", interrupted)
    assert cli.main(["validate", "instances/mix-8.json"]) == 130
    assert capsys.readouterr().err.strip() == "interrupted"
