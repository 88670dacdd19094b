"""MkDocs hook: lay the sources out for the API reference as setuptools installs them.

pyproject.toml maps ``topoopt_ilp.models`` to the folder ``models/`` and ``topoopt_ilp.solvers`` to
``solvers/`` (``[tool.setuptools] package-dir``). griffe, which mkdocstrings uses to read the code,
finds a subpackage by its folder inside the parent package's folder, so it cannot see
``topoopt_ilp.models`` in the source tree, not even through the editable install (and
``allow_inspection`` does not help: the subpackage is still looked up as a folder). Before each build
this hook copies the Python files into ``build/api-src/`` laid out as installed; mkdocs.yml points
mkdocstrings there (``paths: [build/api-src]``).
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

from mkdocs.plugins import event_priority

SOURCES = Path("build") / "api-src"


def _not_python(folder: str, names: list[str]) -> list[str]:
    """What ``shutil.copytree`` leaves out: everything but Python files and the folders that may hold them."""
    return [
        name for name in names if name == "__pycache__" or not (name.endswith(".py") or (Path(folder) / name).is_dir())
    ]


@event_priority(100)  # before mkdocstrings reads its handlers' paths
def on_config(config):
    root = Path(config.config_file_path).resolve().parent
    setuptools = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    target = root / SOURCES
    shutil.rmtree(target, ignore_errors=True)
    for package, folder in sorted(setuptools["package-dir"].items(), key=lambda item: item[0].count(".")):
        shutil.copytree(root / folder, target.joinpath(*package.split(".")), ignore=_not_python, dirs_exist_ok=True)
    return config
