"""docs/benchmarks/ has a results region for every benchmark script, for benchmarks/report.py to fill.

A region is a line ``<!-- results: SCRIPT_STEM -->``, then anything, then a line ``<!-- /results -->``.
"""

from __future__ import annotations

import re

from conftest import ROOT

PAGES = sorted((ROOT / "docs" / "benchmarks").glob("*.md"))
HELPERS = {"_args", "_results", "small_workloads", "report"}  # modules the scripts share, and the table generator
MARKER = re.compile(r"<!--\s*(/?)results(?::\s*([\w-]+))?\s*-->")


def regions() -> dict[str, list[str]]:
    """Script stem -> the pages that hold its region; fails on a malformed or unbalanced pair."""
    found: dict[str, list[str]] = {}
    for page in PAGES:
        open_stem = None
        for number, line in enumerate(page.read_text().splitlines(), start=1):
            m = MARKER.fullmatch(line.strip())  # a marker is alone on its line (one quoted in prose is none)
            if not m:
                continue
            where = f"{page.relative_to(ROOT)}:{number}"
            closing, stem = m.group(1) == "/", m.group(2)
            if closing:
                assert open_stem is not None and stem is None, f"{where}: '<!-- /results -->' without an open region"
                open_stem = None
            else:
                assert open_stem is None, f"{where}: region {stem} opened inside region {open_stem}"
                assert stem, f"{where}: '<!-- results: SCRIPT_STEM -->' needs the script's stem"
                open_stem = stem
                found.setdefault(stem, []).append(str(page.relative_to(ROOT)))
        assert open_stem is None, f"{page.relative_to(ROOT)}: region {open_stem} is never closed"
    return found


def test_every_region_names_a_script_once():
    found = regions()
    for stem, pages in found.items():
        assert (ROOT / "benchmarks" / f"{stem}.py").exists(), f"{pages}: no benchmarks/{stem}.py"
        assert len(pages) == 1, f"region {stem} appears more than once: {pages}"


def test_every_script_has_a_region():
    scripts = {p.stem for p in (ROOT / "benchmarks").glob("*.py")} - HELPERS
    assert scripts - set(regions()) == set(), "benchmark scripts without a results region in docs/benchmarks/"


def test_the_index_lists_every_page_and_the_generator():
    index = (ROOT / "docs" / "benchmarks" / "index.md").read_text()
    assert "python benchmarks/report.py" in index
    for page in PAGES:
        if page.name != "index.md":
            assert f"]({page.name})" in index, f"docs/benchmarks/index.md does not link {page.name}"
