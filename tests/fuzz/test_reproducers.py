"""The 22 hostile-input reproducers, each run verbatim through the CLI: every one ends with the
documented exit code and one short line that names the file and the field, never an internal error,
never an echo of kilobytes, never an output file.

The files in ``reproducers/`` are kept as they were found. Two are bundles: a solution and a schedule
file that ``schedule --check`` compares byte for byte, unpacked into a scratch folder first. One is a
job of 8,192 servers: it must finish, which takes a minute on two cores, so it runs with the long
fuzz run (``--fuzz-long``) only.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import INSTANCES
from topoopt_ilp.cli import main

HERE = Path(__file__).resolve().parent / "reproducers"
RING8 = str(INSTANCES / "fixed-ring-8.json")
PRISM6 = str(INSTANCES / "fixed-links-6.json")
DLRM6 = str(INSTANCES / "dlrm-mini-6.json")

#: At most this many bytes on stderr: one line, the path of the file included.
MAX_LINE = 400

#: (reproducer, command (FILE stands for it), exit code, what the one line must say)
CASES = [
    # A: internal errors that are now refusals naming the field
    ("overflow-link-count", ["verify", RING8, "FILE"], 2, "topology.links[0][2]: must be <="),
    ("overflow-link-count", ["evaluate", RING8, "FILE"], 2, "topology.links[0][2]: must be <="),
    ("overflow-path-node", ["verify", RING8, "FILE"], 2, "routing.paths[0][1][1]: must be <="),
    ("overflow-path-node", ["evaluate", RING8, "FILE"], 2, "routing.paths[0][1][1]: must be <="),
    ("overflow-offset-jump", ["verify", RING8, "FILE"], 2, "routing.offset_routes[0][2][0]: must be <="),
    ("overflow-offset-offset", ["verify", RING8, "FILE"], 2, "routing.offset_routes[0][0]: must be <="),
    ("overflow-ring-group", ["verify", RING8, "FILE"], 2, "routing.rings[0][0]: must be <="),
    ("overflow-ring-member", ["verify", RING8, "FILE"], 2, "routing.rings[0][2][1]: must be <="),
    ("float-overflow-solution-claim", ["verify", RING8, "FILE"], 2, "wall_time_s: must be a finite number"),
    ("float-overflow-solution-claim", ["evaluate", RING8, "FILE"], 2, "wall_time_s: must be a finite number"),
    ("schedule-float-overflow-bound", ["schedule", DLRM6, "SOLUTION", "--check", "FILE"], 2, "bound_s: must be"),
    ("metrics-group-times-not-list", ["verify", RING8, "FILE"], 2, "metrics.group_times_s: expected a list"),
    ("metrics-group-times-not-list", ["evaluate", RING8, "FILE"], 2, "metrics.group_times_s: expected a list"),
    ("path-minus-one-third", ["verify", RING8, "FILE"], 2, "routing.paths[0][1][2]: must be >= 0"),
    ("path-minus-one-third", ["evaluate", RING8, "FILE"], 2, "routing.paths[0][1][2]: must be >= 0"),
    ("path-repeated-node", ["evaluate", RING8, "FILE"], 2, "path 0 visits a server twice"),
    # B: tampered solutions verify accepted
    ("offset-zero-jump-claimed", ["verify", RING8, "FILE"], 2, "routing.offset_routes[1][2][1]: a jump is never 0"),
    ("offset-zero-then-nonlink", ["verify", RING8, "FILE"], 2, "routing.offset_routes[5][2][1]: a jump is never 0"),
    ("verify-path-via-minus-one", ["verify", RING8, "FILE"], 2, "routing.paths[0][1][1]: must be >= 0"),
    # C: a malformed file accepted
    ("ring-member-minus-one", ["verify", PRISM6, "FILE"], 2, "routing.rings[0][2][1]: must be >= 0"),
    # E: one-line messages that echoed kilobytes
    ("libra-long-communicator-name", ["bandwidth", "FILE"], 2, "unknown communicator 'xxx"),
    ("long-offset-route", ["evaluate", RING8, "FILE"], 2, "do not add up to offset 1"),
    ("instance-format-long-list", ["validate", "FILE"], 2, "format: expected 'topoopt-instance', got ["),
    ("instance-format-long-list", ["solve", "FILE"], 2, "format: expected 'topoopt-instance', got ["),
    ("instance-4000-digit-config", ["validate", "FILE"], 2, "an integer of 4000 digits"),
    ("schedule-long-micro-batches", ["schedule", DLRM6, "SOLUTION", "--check", "FILE"], 2, "micro_batches: must be"),
    ("libra-nested-version", ["bandwidth", "FILE"], 2, "version: unsupported version {'a': {'a': "),
]


def _materialise(name: str, folder: Path) -> dict[str, str]:
    """The reproducer as files in ``folder``: FILE is the reproducer itself or, for a bundle, its
    schedule, and SOLUTION the bundle's solution."""
    source = HERE / f"{name}.json"
    data = json.loads(source.read_text())
    if isinstance(data, dict) and data.get("format") == "fuzz-reproducer-bundle":
        for file_name, text in data["files"].items():
            (folder / file_name).write_text(text)
        return {"FILE": str(folder / "check.schedule.json"), "SOLUTION": str(folder / "dlrm6.solution.json")}
    target = folder / source.name
    shutil.copyfile(source, target)
    return {"FILE": str(target)}


def _run(argv: list[str], files: dict[str, str]) -> int:
    return main([files.get(arg, arg) for arg in argv])


def test_every_reproducer_is_covered():
    named = {case[0] for case in CASES} | {"solve-8192-servers"}
    assert named == {p.stem for p in HERE.glob("*.json")}


@pytest.mark.parametrize("name, argv, code, needle", CASES, ids=[f"{c[0]}-{c[1][0]}" for c in CASES])
def test_a_reproducer_gives_one_short_line_naming_the_field(tmp_path, capsys, name, argv, code, needle):
    files = _materialise(name, tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert _run(argv, files) == code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {files['FILE']}: "), err[:500]
    assert len(err.encode()) <= MAX_LINE and needle in err, err[:500]
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written


def test_the_tampered_claims_are_refused_under_verify_prove_too(tmp_path, capsys):
    """B1: the [1, 0, 1] route would score 11 % better than [1, 1]; it never reaches the scorer."""
    files = _materialise("offset-zero-jump-claimed", tmp_path)
    assert main(["verify", RING8, files["FILE"], "--prove", "--time-limit", "5"]) == 2
    assert "a jump is never 0" in capsys.readouterr().err


@pytest.mark.fuzz_long
def test_a_job_of_8192_servers_finishes(tmp_path, capsys):
    """D1: ResNet-50 at 8,192 servers solves with the heuristic and verifies."""
    files = _materialise("solve-8192-servers", tmp_path)
    out = tmp_path / "solution.json"
    assert main(["solve", files["FILE"], "--out", str(out), "--quiet"]) == 0
    assert main(["verify", files["FILE"], str(out)]) == 0
