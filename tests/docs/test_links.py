"""The README and docs/ link only to what exists, and speak of the product, not of its development."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

from conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
IDS = [str(p.relative_to(ROOT)) for p in PAGES]

FENCED = re.compile(r"^(```|~~~).*?^\1[ \t]*$", flags=re.S | re.M)
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", flags=re.S)
HTML_COMMENT = re.compile(r"<!--.*?-->", flags=re.S)
# [text](target) and ![alt](target), the target up to the first space or ')' (an optional "title" after it).
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", flags=re.M)

# Development narrative and references to documents outside the repository.
FORBIDDEN = {
    r"\.\./shared": "a path outside the repository",
    r"design §": "a section of a design document outside the repository",
    r"topoopt\.md": "a document outside the repository",
    r"\bsessions?\b": "development narrative ('session ...')",
    r"\bprevious release\b|\brelease before\b|\bearlier release\b|\btwo releases ago\b": "development narrative (releases)",
}


def prose(text: str) -> str:
    """``text`` without code blocks, inline code and HTML comments (lines kept, for line numbers)."""
    blank = lambda m: re.sub(r"[^\n]", " ", m.group(0))  # noqa: E731
    return INLINE_CODE.sub(blank, FENCED.sub(blank, HTML_COMMENT.sub(blank, text)))


def slugs(page: Path) -> set[str]:
    """The anchors of ``page``'s headings, as GitHub and as Python-Markdown's toc extension make them."""
    out = set()
    for _, title in HEADING.findall(prose_headings(page.read_text())):
        title = re.sub(r"`([^`]*)`", r"\1", title)
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title).strip()
        github = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        norm = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
        markdown = re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", norm).strip().lower())
        out |= {github, markdown}
    return out


def prose_headings(text: str) -> str:
    """``text`` without fenced code blocks (a '#' comment in a shell block is no heading)."""
    return FENCED.sub("", text)


def links(page: Path) -> list[tuple[int, str]]:
    text = prose(page.read_text())
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in LINK.finditer(text)]


def test_pages_found():
    assert (ROOT / "docs" / "index.md") in PAGES and len(PAGES) > 20


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_relative_links_resolve(page):
    broken = []
    for line, target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, flags=re.I):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        where = f"{page.relative_to(ROOT)}:{line}: {target}"
        if not dest.exists():
            broken.append(f"{where}: no such file")
        elif not dest.is_relative_to(ROOT):
            broken.append(f"{where}: outside the repository")
        elif anchor and dest.suffix == ".md" and anchor not in slugs(dest):
            broken.append(f"{where}: no heading with anchor #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_no_narrative_or_outside_references(page):
    found = []
    for number, line in enumerate(page.read_text().splitlines(), start=1):
        for pattern, why in FORBIDDEN.items():
            if re.search(pattern, line, flags=re.I):
                found.append(f"{page.relative_to(ROOT)}:{number}: {why}: {line.strip()}")
    assert not found, "\n".join(found)


def test_the_link_checker_sees_links():
    """The patterns above find what they should (a checker that finds nothing passes everything)."""
    sample = 'See [a](a.md#x), ![img](b.png "t"), `[not](c.md)` and [url](https://x.org).\n```\n[no](d.md)\n```\n'
    text = prose(sample)
    assert [m.group(1) for m in LINK.finditer(text)] == ["a.md#x", "b.png", "https://x.org"]


#: A repository path named in inline code (`models/topology/milp.py`, `instances/testbed-12.json`).
CODE_PATH = re.compile(r"`((?:topoopt_ilp|models|solvers|benchmarks|tests|instances)/[\w./*-]*)`")
#: Paths the pages name on purpose although they do not exist (an error example).
NOT_A_FILE = {"instances/no-such-file.json"}


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_code_paths_named_exist(page):
    text = page.read_text()
    missing = []
    for match in CODE_PATH.finditer(text):
        path = match.group(1).rstrip(".")
        if path in NOT_A_FILE:
            continue
        found = list(ROOT.glob(path)) if "*" in path else [ROOT / path] if (ROOT / path).exists() else []
        if not found:
            missing.append(path)
    assert not missing, f"{page.relative_to(ROOT)} names files that do not exist: {', '.join(sorted(set(missing)))}"
