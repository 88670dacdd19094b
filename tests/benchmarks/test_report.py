"""benchmarks/report.py: result records rendered into the marked regions of docs pages, the index
benchmarks/README.md, and --check; on a temporary page and results folder, then on the repository."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import report  # noqa: E402

PAGE = """# Placement

Some prose.

<!-- results: demo -->
stale text
<!-- /results -->

More prose.

<!-- results: never_run -->
<!-- /results -->
"""


def _record(date: str, value: float, **extra) -> dict:
    return {
        "script": "demo",
        "command": f"python benchmarks/demo.py --limit {value:g} --out",
        "commit": "abc1234",
        "date": date,
        "machine": {"cores": 2, "platform": "Linux", "python": "3.11"},
        "parameters": {"limit": value},
        "tables": [
            {
                "title": "times *per* run",
                "columns": ["instance", "time_s", "ratio", "n", "jumps", "speed"],
                "formats": ["{}", "{:.2f}", "{:.1f}x", "{}", "{}", "{}"],
                "rows": [["a|b", value, 2.0, 3, [1, 5], 1.234567], ["c", None, 0.25, 4, [1], 12345.678]],
                "notes": ["total 3 s"],
            }
        ],
        **extra,
    }


@pytest.fixture
def tree(tmp_path):
    results, docs = tmp_path / "benchmarks" / "results", tmp_path / "docs" / "benchmarks"
    results.mkdir(parents=True)
    docs.mkdir(parents=True)
    (results / "demo-2026-12-01.json").write_text(json.dumps(_record("2026-12-01T10:00:00Z", 1.0)))
    (results / "demo-2026-12-03.json").write_text(
        json.dumps(_record("2026-12-03T09:30:00Z", 7.5, ratios={"speed-up": 3.14159}))
    )
    (results / "demo-old-name.json").write_text(json.dumps(_record("2026-11-30T00:00:00Z", 9.0)))
    (docs / "placement.md").write_text(PAGE)
    (docs / "plain.md").write_text("# No markers\n\n<!-- results are elsewhere -->\n")
    return tmp_path


def _run(tree, *extra):
    argv = [
        "--results",
        str(tree / "benchmarks" / "results"),
        "--pages",
        str(tree / "docs" / "benchmarks"),
        "--readme",
        str(tree / "benchmarks" / "README.md"),
        *extra,
    ]
    return report.main(argv)


def test_a_region_gets_the_latest_record_as_tables_headed_by_date_command_commit_and_link(tree):
    assert _run(tree) == 0
    text = (tree / "docs" / "benchmarks" / "placement.md").read_text()
    assert text.startswith("# Placement\n\nSome prose.\n\n<!-- results: demo -->\n")
    assert "stale text" not in text and "\n<!-- /results -->\n\nMore prose.\n" in text
    head = (
        "2026-12-03 09:30 UTC · `python benchmarks/demo.py --limit 7.5 --out` · commit `abc1234` · 2 cores · "
        "[demo-2026-12-03.json](../../benchmarks/results/demo-2026-12-03.json)"
    )
    assert text.count(head) == 2  # above the table and above the ratios
    assert "**times \\*per\\* run**" in text
    assert "| instance | time_s | ratio | n | jumps | speed |\n| :--- | ---: | ---: | ---: | :--- | ---: |\n" in text
    assert "| a\\|b | 7.50 | 2.0x | 3 | [1, 5] | 1.235 |\n| c | - | 0.2x | 4 | [1] | 1.235e+04 |\n" in text
    assert "- total 3 s" in text and "| speed-up | 3.142 |" in text
    assert "No result recorded yet: run `python benchmarks/never_run.py --out`." in text


def test_rendering_is_idempotent_and_check_says_whether_a_page_is_current(tree, capsys):
    page = tree / "docs" / "benchmarks" / "placement.md"
    assert _run(tree, "--check") == 1
    assert "placement.md" in capsys.readouterr().err and page.read_text() == PAGE  # --check writes nothing
    assert _run(tree) == 0
    first = page.read_text()
    assert _run(tree) == 0 and page.read_text() == first
    assert _run(tree, "--check") == 0
    page.write_text(first.replace("| c | - |", "| c | 1.00 |"))  # edited by hand
    capsys.readouterr()
    assert _run(tree, "--check") == 1
    err = capsys.readouterr().err
    assert "placement.md" in err and "plain.md" not in err and "README.md" not in err
    (tree / "benchmarks" / "results" / "demo-2026-12-04.json").write_text(
        json.dumps(_record("2026-12-04T00:00:00Z", 2.0))
    )
    assert _run(tree) == 0
    assert "`python benchmarks/demo.py --limit 2 --out`" in page.read_text()
    assert _run(tree, "--check") == 0


def test_pages_without_markers_are_not_touched(tree):
    plain = tree / "docs" / "benchmarks" / "plain.md"
    before = plain.stat().st_mtime_ns
    assert _run(tree) == 0
    assert (
        plain.read_text() == "# No markers\n\n<!-- results are elsewhere -->\n" and plain.stat().st_mtime_ns == before
    )


@pytest.mark.parametrize(
    "text, message",
    [
        ("<!-- results: demo -->\nno end\n", "never closed"),
        ("<!-- /results -->\n", "without a"),
        ("<!-- results: demo -->\n<!-- results: other -->\n<!-- /results -->\n", "opens inside"),
    ],
)
def test_markers_that_do_not_pair_up_are_an_error_naming_the_line(tree, text, message, capsys):
    (tree / "docs" / "benchmarks" / "bad.md").write_text(text)
    assert _run(tree) == 2
    err = capsys.readouterr().err
    assert message in err and "bad.md:" in err


def test_a_file_that_is_not_a_record_is_an_error(tree, capsys):
    (tree / "benchmarks" / "results" / "junk.json").write_text("[1, 2]")
    assert _run(tree) == 2
    assert "junk.json: not a benchmark record" in capsys.readouterr().err


def test_the_index_lists_every_script_with_its_docstring_line_and_latest_record(tree):
    assert _run(tree, "--scripts", str(ROOT / "benchmarks")) == 0
    index = (tree / "benchmarks" / "README.md").read_text()
    for path in report.benchmark_scripts(ROOT / "benchmarks"):
        assert f"| [`{path.name}`]({path.name}) | {report.cell(report.summary(path))} | - |" in index
    assert "`--out [PATH]`" in index and "report.py --check" in index
    assert "[`_results.py`](_results.py)" in index and "[`small_workloads.py`](small_workloads.py)" in index


def test_the_repository_pages_and_index_are_current():
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "report.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr + "\n(run python benchmarks/report.py and commit the pages)"
