"""``pip install .`` and ``pip install -e .`` both work, and only ``topoopt_ilp`` lands in site-packages."""

from __future__ import annotations

import subprocess
import sys
import zipfile

from conftest import ROOT


def _run(*args, cwd=None, env=None):
    return subprocess.run(list(args), capture_output=True, text=True, cwd=cwd, env=env, timeout=600)


def test_editable_install_maps_models_and_solvers_inside_the_namespace(tmp_path):
    # Run from a neutral folder so the repository root is not on sys.path.
    code = (
        "import importlib.util, topoopt_ilp.models, topoopt_ilp.solvers, pathlib;"
        "print(pathlib.Path(topoopt_ilp.models.__file__).parent.name);"
        "print(pathlib.Path(topoopt_ilp.solvers.__file__).parent.name);"
        "print(importlib.util.find_spec('models') is None, importlib.util.find_spec('solvers') is None)"
    )
    r = _run(sys.executable, "-c", code, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["models", "solvers", "True", "True"]


def test_wheel_contains_only_the_topoopt_ilp_package(tmp_path):
    r = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(ROOT))
    assert r.returncode == 0, r.stderr[-2000:]
    wheels = list((tmp_path / "dist").glob("topoopt_ilp-*.whl"))
    assert len(wheels) == 1
    names = zipfile.ZipFile(wheels[0]).namelist()
    tops = {n.split("/")[0] for n in names}
    assert "topoopt_ilp" in tops and all(t == "topoopt_ilp" or t.endswith(".dist-info") for t in tops), tops
    assert "topoopt_ilp/models/__init__.py" in names and "topoopt_ilp/solvers/__init__.py" in names
    assert not any(n.startswith(("models/", "solvers/")) for n in names)
    # Every module of the source tree is in the wheel (a subpackage missing from pyproject would not be).
    sources = {
        f"topoopt_ilp/{p.relative_to(ROOT / 'topoopt_ilp').as_posix()}" for p in (ROOT / "topoopt_ilp").rglob("*.py")
    }
    sources |= {
        f"topoopt_ilp/{top}/{p.relative_to(ROOT / top).as_posix()}"
        for top in ("models", "solvers")
        for p in (ROOT / top).rglob("*.py")
    }
    assert sources - set(names) == set()
    # A plain (non-editable) install of that wheel imports from a neutral folder.
    target = tmp_path / "site"
    r = _run(sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheels[0]))
    assert r.returncode == 0, r.stderr[-2000:]
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import topoopt_ilp.models, topoopt_ilp.solvers, importlib.util;"
        "import topoopt_ilp.heuristic, topoopt_ilp.cli;"
        "assert topoopt_ilp.__file__.startswith(sys.argv[1]); print(importlib.util.find_spec('models'))"
    )
    r = _run(sys.executable, "-c", code, str(target), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "None"
