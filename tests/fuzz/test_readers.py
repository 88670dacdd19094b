"""Property-based fuzzing of every reader, through the CLI as a user meets it: hostile variants of
valid instance, workload, solution, schedule, LIBRA and LIBRA-input files (keys dropped, renamed and
retyped, numbers huge, negative and fractional, values long and nested deep, files cut short or
with invalid UTF-8).

The properties, for every variant:

* no internal error: the exit code is one the CLI documents, nothing says ``internal error``;
* a refusal (exit 2) is one line of at most 400 bytes, naming the file it refuses, free of control
  characters;
* a refused input leaves no output file behind.

The default run tries a fixed, seeded set of variants per reader (``FUZZ_DEFAULT_EXAMPLES``); the long
run (``--fuzz-long`` or ``TOPOOPT_FUZZ_EXAMPLES=N``) explores thousands, and prints how many cases
each reader saw and how they ended.
"""

from __future__ import annotations

import functools
import json
import random
import re
from pathlib import Path

import yaml
from fuzz_mutate import HOSTILE_VALUES, file_bytes
from fuzz_seeds import (
    INSTANCE_DOCS,
    LIBRA_DOCS,
    LIBRA_FORMAT,
    collective_schedule_files,
    schedule_files,
    solution_files,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FUZZ_TALLY, INSTANCES
from topoopt_ilp.cli import main

MAX_LINE = 400
DOCUMENTED_EXITS = {0, 1, 2, 3, 4}
#: Small instances: solving one of their variants takes well under a second.
SMALL = [
    "mix-8.json",
    "fixed-ring-8.json",
    "fixed-links-6.json",
    "dlrm-mini-6.json",
    "full.json",
    "matrix.json",
    "job.json",
]
CONTROL = {chr(c) for c in range(32)} - {"\t"} | {"\x7f"}


def _outcome(reader: str, capsys, argv: list[str], files: list[Path], out: Path | None = None) -> int:
    """Run the CLI and check the properties; returns the exit code."""
    if out is not None and out.exists():
        out.unlink()
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    FUZZ_TALLY[reader][code] += 1
    err = captured.err.strip()
    assert code in DOCUMENTED_EXITS, (code, err[:500])
    if code == 1:  # a report of violations: each on a line of its own, short
        assert max((len(line.encode()) for line in captured.out.splitlines()), default=0) <= MAX_LINE, captured.out[
            :2000
        ]
    assert "internal error" not in err and "Traceback" not in err, err[:2000]
    if code == 2:
        lines = err.splitlines()
        assert len(lines) == 1, err[:1000]
        line = lines[0]
        assert len(line.encode()) <= MAX_LINE, line[:600]
        assert any(line.startswith(f"error: {f}") for f in files), line[:600]
        assert not (set(line) & CONTROL), repr(line[:600])
        if out is not None:
            assert not out.exists(), f"{out} written on a refused input"
    return code


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@settings(parent=settings.get_profile("fuzz"))
@given(data=file_bytes(list(INSTANCE_DOCS.values())))
def test_validate_on_hostile_instances(tmp_path_factory, capsys, data):
    path = _write(tmp_path_factory.mktemp("inst") / "instance.json", data)
    _outcome("instance (validate)", capsys, ["validate", path], [path])


@settings(parent=settings.get_profile("fuzz"), max_examples=max(10, settings.get_profile("fuzz").max_examples // 4))
@given(data=file_bytes([INSTANCE_DOCS[name] for name in SMALL]))
def test_solve_on_hostile_instances(tmp_path_factory, capsys, data):
    folder = tmp_path_factory.mktemp("solve")
    path, out = _write(folder / "instance.json", data), folder / "solution.json"
    _outcome("instance (solve --out)", capsys, ["solve", path, "--out", out, "--quiet"], [path], out)


#: Commands that read a solution, and the output they write (None: they write nothing).
SOLUTION_COMMANDS = {
    "verify": None,
    "evaluate": None,
    "export": "plan.csv",
    "draw": "topology.svg",
}


@settings(parent=settings.get_profile("fuzz"))
@given(data=st.data())
def test_every_command_on_hostile_solutions(tmp_path_factory, capsys, data):
    files = solution_files()
    name = data.draw(st.sampled_from(sorted(files)))
    raw = data.draw(file_bytes([json.loads(files[name].read_text())]))
    folder = tmp_path_factory.mktemp("sol")
    path = _write(folder / "solution.json", raw)
    instance = INSTANCES / f"{name}.json"
    command = data.draw(st.sampled_from(sorted(SOLUTION_COMMANDS)))
    out = None if SOLUTION_COMMANDS[command] is None else folder / SOLUTION_COMMANDS[command]
    argv = {
        "verify": ["verify", instance, path],
        "evaluate": ["evaluate", instance, path],
        "export": ["export", instance, path, "--to", "cabling", "-o", out],
        "draw": ["draw", path, "-o", out],
    }[command]
    _outcome(f"solution ({command})", capsys, argv, [path, instance], out)


@settings(parent=settings.get_profile("fuzz"))
@given(data=st.data())
def test_schedule_check_on_hostile_schedules(tmp_path_factory, capsys, data):
    solution, schedule = schedule_files()
    raw = data.draw(file_bytes([json.loads(Path(schedule).read_text())]))
    path = _write(tmp_path_factory.mktemp("sched") / "schedule.json", raw)
    instance = INSTANCES / "dlrm-mini-6.json"
    _outcome("schedule (--check)", capsys, ["schedule", instance, solution, "--check", path], [path])


@settings(parent=settings.get_profile("fuzz"))
@given(data=st.data())
def test_collective_check_on_hostile_schedules(tmp_path_factory, capsys, data):
    instance, solution, schedule = collective_schedule_files()
    raw = data.draw(file_bytes([json.loads(Path(schedule).read_text())]))
    path = _write(tmp_path_factory.mktemp("coll") / "collective.json", raw)
    argv = ["collective", instance, solution, "--check", path]
    _outcome("collective schedule (--check)", capsys, argv, [path])


@settings(parent=settings.get_profile("fuzz"))
@given(data=file_bytes(list(LIBRA_DOCS.values())))
def test_bandwidth_on_hostile_libra_problems(tmp_path_factory, capsys, data):
    folder = tmp_path_factory.mktemp("libra")
    path, out = _write(folder / "libra.json", data), folder / "allocation.json"
    _outcome("libra (bandwidth --out)", capsys, ["bandwidth", path, "--time-limit", "5", "--out", out], [path], out)


def _libra_inputs() -> dict[str, object]:
    return {
        "network": yaml.safe_load((LIBRA_FORMAT / "gpt3-4d-network.yml").read_text()),
        "communicator": yaml.safe_load((LIBRA_FORMAT / "gpt3-4d-communicator.yml").read_text()),
        "cost": yaml.safe_load((LIBRA_FORMAT / "gpt3-4d-cost.yml").read_text()),
    }


def _hostile_text(rng: random.Random, text: str) -> str:
    """ASTRA-sim's workload text with a few tokens replaced, dropped or lines repeated."""
    lines = [line.split() for line in text.splitlines()]
    for _ in range(rng.randint(1, 3)):
        line = rng.choice(lines) if lines else []
        what = rng.choice(["token", "token", "drop", "repeat", "blank"])
        if what == "token" and line:
            line[rng.randrange(len(line))] = str(rng.choice(HOSTILE_VALUES))
        elif what == "drop" and line:
            del line[rng.randrange(len(line))]
        elif what == "repeat":
            lines += [list(line)] * rng.choice([1, 100])
        elif what == "blank":
            lines.insert(rng.randrange(len(lines) + 1), [])
    return "\n".join(" ".join(line) for line in lines) + "\n"


@settings(parent=settings.get_profile("fuzz"))
@given(data=st.data())
def test_import_libra_on_hostile_inputs(tmp_path_factory, capsys, data):
    """LIBRA's own files: one of the three YAML files mutated, or the workload text."""
    folder = tmp_path_factory.mktemp("libra-in")
    docs = _libra_inputs()
    target = data.draw(st.sampled_from(["network", "communicator", "cost", "workload"]))
    workload = (LIBRA_FORMAT / "gpt3-workload.txt").read_text()
    if target == "workload":
        workload = _hostile_text(random.Random(data.draw(st.integers(0, 2**32))), workload)
    files = {}
    for name, doc in docs.items():
        files[name] = folder / f"{name}.yml"
        if name != target:
            files[name].write_text(yaml.safe_dump(doc))
            continue
        raw = data.draw(file_bytes([doc]))
        try:  # a mutated document, written as YAML; a damaged or deep one as it is (JSON is YAML too)
            files[name].write_text(yaml.safe_dump(json.loads(raw)))
        except (ValueError, RecursionError):
            files[name].write_bytes(raw)
    files["workload"] = folder / "workload.txt"
    files["workload"].write_text(workload)
    out = folder / "problem.json"
    argv = ["import-libra", "--network", files["network"], "--workload", files["workload"]]
    argv += ["--communicator", files["communicator"], "--cost-model", files["cost"], "--total-bandwidth", "400"]
    _outcome("libra inputs (import-libra)", capsys, [*argv, "-o", out], list(files.values()), out)


@functools.cache
def _exported() -> dict[str, tuple[list[str], str]]:
    """Files ``topoopt export`` wrote for mix-8's design: format -> (the verify options, the text)."""
    solution = solution_files()["mix-8"]
    instance = INSTANCES / "mix-8.json"
    out = {}
    for fmt, suffix, extra in (
        ("msccl", "xml", ["--group", "0"]),
        ("ns3", "txt", []),
        ("simai", "txt", []),
        ("cabling", "csv", []),
    ):
        path = solution.parent / f"mix-8.{fmt}.{suffix}"
        assert main(["export", str(instance), str(solution), "--to", fmt, "-o", str(path), *extra]) == 0
        out[fmt] = ([f"--{fmt}", *extra], path.read_text())
    return out


def _hostile_lines(rng: random.Random, text: str) -> str:
    """A text file (XML, CSV, ns-3 topology) with a few values replaced, lines dropped or repeated,
    or the file cut short."""
    lines = text.splitlines()
    for _ in range(rng.randint(1, 3)):
        if not lines:
            break
        k = rng.randrange(len(lines))
        what = rng.choice(["value", "value", "drop", "repeat", "cut"])
        if what == "value":
            values = re.findall(r'"[^"]*"|[^\s,<>="]+', lines[k])
            if values:
                old = rng.choice(values)
                new = str(rng.choice(HOSTILE_VALUES))
                lines[k] = lines[k].replace(old, f'"{new}"' if old.startswith('"') else new, 1)
        elif what == "drop":
            del lines[k]
        elif what == "repeat":
            lines[k:k] = [lines[k]] * rng.choice([1, 200])
        else:
            lines = lines[:k] + [lines[k][: rng.randrange(len(lines[k]) + 1)]]
    return "\n".join(lines) + "\n"


@settings(parent=settings.get_profile("fuzz"))
@given(data=st.data())
def test_verify_on_hostile_exported_files(tmp_path_factory, capsys, data):
    """The files ``topoopt export`` writes, as ``verify --msccl/--ns3/--simai/--cabling`` reads them back."""
    fmt = data.draw(st.sampled_from(sorted(_exported())))
    options, text = _exported()[fmt]
    hostile = _hostile_lines(random.Random(data.draw(st.integers(0, 2**32))), text)
    path = tmp_path_factory.mktemp("exported") / f"file.{fmt}"
    path.write_text(hostile)
    instance, solution = INSTANCES / "mix-8.json", solution_files()["mix-8"]
    argv = ["verify", instance, solution, options[0], path, *options[1:]]
    _outcome(f"exported {fmt} (verify)", capsys, argv, [path, instance, solution])


TECCL_DOCS = [json.loads(p.read_text()) for p in sorted((INSTANCES / "teccl").glob("*.json"))]
LINK_LIST = "# a ring of 4 with a chord\n0 1 100 0.5\n1 2 100\n2 3 50 2\n3 0\n0 2 25 1\n"
#: The collective on a file's topology, small whatever the file says (the greedy schedule, one chunk).
SMALL_COLLECTIVE = ["--collective", "allgather", "--bytes", "1e6", "--chunks", "1", "--method", "heuristic"]


@settings(parent=settings.get_profile("fuzz"))
@given(data=file_bytes(TECCL_DOCS))
def test_collective_on_hostile_teccl_inputs(tmp_path_factory, capsys, data):
    """TE-CCL inputs as ``topoopt collective --topology`` reads them."""
    folder = tmp_path_factory.mktemp("teccl")
    path = _write(folder / "input.json", data)
    out = folder / "s.json"
    _outcome(
        "TE-CCL inputs (collective --topology)",
        capsys,
        ["collective", "--topology", path, *SMALL_COLLECTIVE, "-o", out],
        [path],
        out,
    )


@settings(parent=settings.get_profile("fuzz"))
@given(data=st.data())
def test_collective_on_hostile_link_lists(tmp_path_factory, capsys, data):
    """Link lists as ``topoopt collective --topology`` reads them (a default rate half the time)."""
    folder = tmp_path_factory.mktemp("links")
    path = folder / "links.txt"
    path.write_text(_hostile_lines(random.Random(data.draw(st.integers(0, 2**32))), LINK_LIST))
    out = folder / "s.json"
    default = ["--gbps", "40"] if data.draw(st.booleans()) else []
    argv = ["collective", "--topology", path, *default, *SMALL_COLLECTIVE, "-o", out]
    _outcome("link lists (collective --topology)", capsys, argv, [path], out)
