"""Every ```python block in docs/ runs as written, from the repository root.

The blocks of one page run in order in one namespace, so a later block may use what an earlier one
defined. A block whose fence reads ```python no-run is shown but not run (docs/index.md states the
convention).
"""

from __future__ import annotations

import os
import re
import time

import pytest

from conftest import ROOT

DOCS = ROOT / "docs"
FENCE = re.compile(r"^```python([^\n]*)\n(.*?)^```[ \t]*$", flags=re.S | re.M)
SLOW_S = 30.0  # the examples are meant to take well under 5 s each; this only catches a runaway one


def python_blocks(text: str) -> list[tuple[str, str, int]]:
    """``(info, code, line)`` for every ```python block: the fence's words after ``python``, the code
    and the line of the fence."""
    return [(m.group(1).strip(), m.group(2), text.count("\n", 0, m.start()) + 1) for m in FENCE.finditer(text)]


PAGES = sorted(p for p in DOCS.rglob("*.md") if python_blocks(p.read_text()))


def test_the_convention_is_documented():
    assert "python no-run" in (DOCS / "index.md").read_text()


def test_fences_are_run_or_no_run():
    for page in DOCS.rglob("*.md"):
        for info, _, line in python_blocks(page.read_text()):
            assert info in ("", "no-run"), f"{page.relative_to(ROOT)}:{line}: unknown fence info {info!r}"


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(DOCS)) for p in PAGES])
def test_doc_python_blocks_run(page, capsys):
    namespace = {"__name__": "docs_example"}
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        for info, code, line in python_blocks(page.read_text()):
            if info == "no-run":
                continue
            started = time.perf_counter()
            exec(compile("\n" * line + code, str(page.relative_to(ROOT)), "exec"), namespace)
            took = time.perf_counter() - started
            assert took < SLOW_S, f"{page.relative_to(ROOT)}:{line}: the example took {took:.1f} s"
    finally:
        os.chdir(cwd)
    capsys.readouterr()
