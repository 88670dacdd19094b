"""Design §2: imports flow one way. ``solvers`` knows nothing of the domain; ``models`` use the core
types and the ``solvers`` interface, never the method layer (``topoopt_ilp.methods``,
``topoopt_ilp.methods.alternating``) nor the CLI - the method layer hands the models what they need as
parameters. Every import counts, module-level or inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]

#: What each package is installed as (setuptools ``package-dir``): ``from . import x`` in models/
#: means ``topoopt_ilp.models.x``.
PACKAGES = {"models": "topoopt_ilp.models", "solvers": "topoopt_ilp.solvers"}


def _imports(path: Path, package: str) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in ``path``, wherever it is (functions included);
    ``from X import y`` counts as both ``X`` and ``X.y`` (y may be a module)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    module = f"{package}.{path.stem}" if path.stem != "__init__" else package
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = module.split(".")
                base_parts = parts[: len(parts) - node.level + (path.stem == "__init__")]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            out.append((node.lineno, base))
            out += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return out


def _files(folder: str) -> list[Path]:
    files = sorted((ROOT / folder).rglob("*.py"))
    assert files, f"no Python files under {folder}/"
    return files


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_the_import_walker_sees_function_level_and_relative_imports(tmp_path):
    src = tmp_path / "joint.py"
    src.write_text("import os\nfrom .common import X\n\ndef f():\n    from topoopt_ilp.methods import METHODS\n"
                   "    from .. import alternating\n")
    names = {name for _, name in _imports(src, "topoopt_ilp.models")}
    assert {"os", "topoopt_ilp.models.common", "topoopt_ilp.methods", "topoopt_ilp.methods.METHODS",
            "topoopt_ilp.methods.alternating"} <= names


@pytest.mark.parametrize("path", _files("models"), ids=lambda p: p.name)
def test_models_never_import_the_method_layer_or_the_cli(path):
    bad = [f"{path.name}:{line}: {name}" for line, name in _imports(path, PACKAGES["models"])
           if _under(name, "topoopt_ilp.methods") or _under(name, "topoopt_ilp.methods.alternating")
           or name.startswith("topoopt_ilp.cli")]
    assert not bad, "models import the method layer (hand what they need in as parameters): " + "; ".join(bad)


#: The one domain module ``solvers`` may use: solvers/errors.py derives its errors from the
#: package-wide classes of this leaf module.
SOLVERS_MAY_IMPORT = ("topoopt_ilp.errors", "topoopt_ilp.solvers")


@pytest.mark.parametrize("path", _files("solvers"), ids=lambda p: p.name)
def test_solvers_know_nothing_of_the_domain(path):
    bad = [f"{path.name}:{line}: {name}" for line, name in _imports(path, PACKAGES["solvers"])
           if _under(name, "topoopt_ilp") and not any(_under(name, ok) for ok in SOLVERS_MAY_IMPORT)]
    assert not bad, "solvers import domain modules: " + "; ".join(bad)


def test_only_the_solver_errors_use_the_package_errors():
    users = sorted({path.name for path in _files("solvers") for _, name in _imports(path, PACKAGES["solvers"])
                    if _under(name, "topoopt_ilp.errors")})
    assert users == ["errors.py"]


# The model layer's own TopoOpt start (used when a caller hands it no heuristic) is the method
# layer's heuristic, link for link.
def _workload(family: str = "any"):
    from dataclasses import replace

    from topoopt_ilp.files.io import load_instance

    inst = load_instance(ROOT / "instances" / "dlrm-mini-6.json")
    return inst if family == "any" else replace(inst, topology_family=family)


@pytest.mark.parametrize("family", ["any", "circulant", "coprime_circulant"])
def test_the_default_placement_topology_is_the_heuristic_methods(family):
    from topoopt_ilp.models.placement.milp import heuristic_topology
    from topoopt_ilp.methods import METHODS

    inst = _workload(family)
    assert np.array_equal(heuristic_topology(inst), METHODS["heuristic"](inst).topology.matrix)
