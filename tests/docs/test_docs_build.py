"""The documentation site builds with ``mkdocs build --strict``: a broken link, a page missing from
the navigation's files, or a docstring reference the API reference cannot resolve fails the build."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from conftest import ROOT


def _nav_pages(nav) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [p for item in nav for p in _nav_pages(item)]
    if isinstance(nav, dict):
        return [p for value in nav.values() for p in _nav_pages(value)]
    return []


def _config() -> dict:
    yaml = pytest.importorskip("yaml", reason="PyYAML reads mkdocs.yml (the test extra has it)")
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text())


def test_every_page_is_in_the_navigation():
    nav = set(_nav_pages(_config()["nav"]))
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert pages - nav == set(), "pages not in mkdocs.yml's nav"
    assert nav - pages == set(), "nav entries without a page"


def test_api_reference_lists_the_public_api():
    import topoopt_ilp

    text = (ROOT / "docs" / "api.md").read_text()
    block = text.split("::: topoopt_ilp\n", 1)[1].split(":::", 1)[0]
    listed = re.findall(r"^\s+- (\w+)\s*$", block, flags=re.M)
    assert listed == list(topoopt_ilp.__all__)
    for module in ("topoopt_ilp.models", "topoopt_ilp.solvers"):
        assert f"::: {module}\n" in text


def test_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install mkdocs mkdocstrings-python)")
    pytest.importorskip("mkdocstrings", reason="mkdocstrings is not installed (pip install mkdocstrings-python)")
    pytest.importorskip("mkdocstrings_handlers.python", reason="mkdocstrings-python is not installed")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(tmp_path / "site"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    for name in ("load_instance", "solve_exact", "ModelBuilder"):  # the three packages were all found
        assert name in api
