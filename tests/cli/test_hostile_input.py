"""Malformed or hostile instance files: one clear InstanceError, quickly, never anything else."""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc
from contextlib import contextmanager

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import instance_data
from topoopt_ilp import files
from topoopt_ilp.cli import main
from topoopt_ilp.core.instance import Instance
from topoopt_ilp.errors import InstanceError

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.sampled_from([0, -1, 10**9, 1e308, "all", "12", [], {}]),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8,
)


class _OverBudget(BaseException):
    """Raised into the traced code (a BaseException: no ``except Exception`` there swallows it)."""


#: Python lines a parse may run: a valid 8192-server instance takes ~91k (linear in the servers, its
#: "all" member lists), the paper's workload instances ~9k; a quadratic loop over the servers or a
#: loop over a hostile count (10**9) needs millions.
MAX_LINES = 400_000
#: Memory a parse may take at its peak: ~1 MB measured; a dense n x n matrix at 8192 servers is 512 MB.
MAX_PEAK_BYTES = 32 * 1024 * 1024


@contextmanager
def bounded_work(max_lines: int = MAX_LINES, max_peak_bytes: int | None = MAX_PEAK_BYTES):
    """The work of the block as counts, not seconds: Python line events of the calls
    made in the block (stopped with
    an error at ``max_lines``, so a runaway loop fails at once) and, unless None, peak traced memory
    (numpy's arrays included). Yields a dict with ``lines`` and ``peak_bytes``."""
    work = {"lines": 0, "peak_bytes": 0}

    def local(frame, event, arg):
        if event == "line":
            work["lines"] += 1
            if work["lines"] > max_lines:
                raise _OverBudget(f"more than {max_lines} Python lines")
        return local

    previous = sys.gettrace()
    tracing_memory = max_peak_bytes is not None and not tracemalloc.is_tracing()
    if tracing_memory:
        tracemalloc.start()
    sys.settrace(lambda frame, event, arg: local)
    try:
        yield work
    finally:
        sys.settrace(previous)
        if tracing_memory:
            work["peak_bytes"] = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
    if max_peak_bytes is not None:
        assert work["peak_bytes"] <= max_peak_bytes, work


def test_bounded_work_catches_a_runaway_loop_and_a_dense_matrix():
    import numpy as np
    import pytest

    def runaway():
        for _ in range(10**9):
            pass

    with pytest.raises(_OverBudget):
        with bounded_work(max_lines=1000):  # (frames that start inside the block are counted)
            runaway()
    with pytest.raises(AssertionError):
        with bounded_work():
            np.zeros((4096, 4096)).sum()  # 128 MB
    with bounded_work() as work:
        files.parse_instance(instance_data("testbed-12"))
    assert 0 < work["lines"] < MAX_LINES and 0 < work["peak_bytes"] < MAX_PEAK_BYTES


def test_a_fixed_topology_on_many_servers_is_checked_without_a_dense_matrix():
    """Found while replacing the timed assertions: a fixed topology of 8192 servers built an
    8192 x 8192 matrix (1 GB at the peak, 6 s) only to count degrees."""
    doc = instance_data("fixed-links-6")
    doc["cluster"]["servers"] = 8192
    with bounded_work():
        try:
            files.parse_instance(doc)
        except InstanceError as exc:
            assert "fixed_topology: server 6 has 0 links" in str(exc)


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


@settings(
    max_examples=int(__import__("os").environ.get("HOSTILE_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    st.sampled_from(["testbed-12", "mix-8", "fixed-links-6", "all-to-all-16", "paper/candle-testbed-12-d4"]), st.data()
)
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
    doc = json.loads(json.dumps(doc))
    with bounded_work():  # quickly: a bounded count of Python lines and of memory, whatever the values
        try:
            result = files.parse_instance(doc)
        except InstanceError as exc:
            assert str(exc) and "\n" not in str(exc)
        else:
            assert isinstance(result, Instance)


def _cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "topoopt_ilp", *args], capture_output=True, text=True, cwd=cwd, timeout=60
    )


def test_cli_hostile_files_exit_2_with_one_line(tmp_path):
    cases = {
        "truncated.json": '{"format": "topoopt-instance", "version": 1, "cluster": {"servers": 12',
        "huge_n.json": json.dumps(
            {
                "format": "topoopt-instance",
                "version": 1,
                "cluster": {"servers": 10**9, "degree": 4, "link_bandwidth_gbps": 1},
                "demand": {"all_to_all": 1},
            }
        ),
        "nan.json": '{"format": "topoopt-instance", "version": 1, "cluster": {"servers": 4, "degree": 2, '
        '"link_bandwidth_gbps": 1}, "demand": {"all_to_all": NaN}}',
        "inf.json": '{"format": "topoopt-instance", "version": 1, "cluster": {"servers": 4, "degree": 2, '
        '"link_bandwidth_gbps": 1}, "demand": {"allreduce": [{"members": "all", "bytes": Infinity}]}}',
        "matrix.json": json.dumps(
            {
                "format": "topoopt-instance",
                "version": 1,
                "cluster": {"servers": 4, "degree": 2, "link_bandwidth_gbps": 1},
                "demand": {"mp": {"matrix": [[0] * 3000] * 3000}},
            }
        ),
        "string.json": json.dumps(
            {
                "format": "topoopt-instance",
                "version": 1,
                "cluster": {"servers": "many", "degree": 2, "link_bandwidth_gbps": 1},
            }
        ),
        "odd.json": json.dumps(
            {
                "format": "topoopt-instance",
                "version": 1,
                "cluster": {"servers": 5, "degree": 3, "link_bandwidth_gbps": 1},
                "demand": {"all_to_all": 1},
            }
        ),
        "binary.json": b"\xff\xfe\x00garbage",
        # Found by a user: a key given twice was accepted silently (the last one won).
        "duplicate.json": '{"format": "topoopt-instance", "version": 1, "cluster": {"servers": 8, "servers": 16, '
        '"degree": 2, "link_bandwidth_gbps": 1}, "demand": {"all_to_all": 1}}',
        "version_string.json": json.dumps(
            {
                "format": "topoopt-instance",
                "version": "1",
                "cluster": {"servers": 4, "degree": 2, "link_bandwidth_gbps": 1},
            }
        ),
    }
    for name, content in cases.items():
        p = tmp_path / name
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
        out = tmp_path / f"{name}.sol.json"
        r = _cli("solve", str(p), "--out", str(out))
        assert r.returncode == 2, (name, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and str(p) in lines[0], (name, r.stderr)
        assert "Traceback" not in r.stderr and not out.exists()
        # quickly: the same command in this process stops within a bounded count of Python lines
        # (argument parsing included; memory not bounded: reading a 27 MB file takes what it takes)
        with bounded_work(max_peak_bytes=None):
            assert main(["solve", str(p), "--out", str(out), "--quiet"]) == 2


def test_duplicate_keys_and_string_versions_are_named(tmp_path):
    p = tmp_path / "dup.json"
    p.write_text(
        '{"format": "topoopt-instance", "version": 1, "cluster": {"servers": 8, "servers": 16, "degree": 2, '
        '"link_bandwidth_gbps": 1}, "demand": {"all_to_all": 1}}'
    )
    r = _cli("validate", str(p))
    assert r.returncode == 2 and "key 'servers' appears twice" in r.stderr
    p.write_text(
        json.dumps(
            {
                "format": "topoopt-instance",
                "version": "1",
                "cluster": {"servers": 4, "degree": 2, "link_bandwidth_gbps": 1},
            }
        )
    )
    r = _cli("validate", str(p))
    assert r.returncode == 2 and "the string '1'" in r.stderr and "the number 1" in r.stderr


def test_ctrl_c_exits_130_with_one_line(monkeypatch, capsys):
    from topoopt_ilp import cli

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(files, "load_instance", interrupted)
    assert cli.main(["validate", "instances/mix-8.json"]) == 130
    assert capsys.readouterr().err.strip() == "interrupted"
