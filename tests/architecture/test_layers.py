"""Imports run one way (docs/architecture.md): a layer table, no cycle between modules, no import of
another module's private names, and the models reach the solvers through ``topoopt_ilp.solvers``
except where a declared reason says otherwise. Every import counts, module-level or inside a
function, so a function-level import cannot hide a cycle."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Source folder -> the package it is installed as (setuptools ``package-dir``).
PACKAGES = {"topoopt_ilp": "topoopt_ilp", "models": "topoopt_ilp.models", "solvers": "topoopt_ilp.solvers"}

#: Module prefix -> layer (the longest matching prefix wins). An import goes to the same layer or a
#: lower one.
LAYERS = {
    "topoopt_ilp.errors": 0,
    "topoopt_ilp.solvers": 0,
    "topoopt_ilp.core": 1,
    "topoopt_ilp.files": 2,
    "topoopt_ilp.evaluation": 2,
    "topoopt_ilp.heuristic": 2,
    "topoopt_ilp.libra": 2,
    "topoopt_ilp.schedule": 2,
    "topoopt_ilp.jobs": 1,  # a job section is part of an instance: core compiles it (imports errors only)
    "topoopt_ilp.models": 3,
    "topoopt_ilp.export": 3,  # beside the models: the exact interface assignment is one
    "topoopt_ilp.methods": 4,
    "topoopt_ilp.experiments": 5,
    "topoopt_ilp.draw": 5,
    "topoopt_ilp.cli": 5,
    "topoopt_ilp": 5,  # the public facade (topoopt_ilp/__init__.py)
    "topoopt_ilp.__main__": 6,
}

#: Inside layer 2 the packages stay independent of one another; only the file readers are shared.
#: (The evaluator and verifier in particular share no code with the heuristic.)
LAYER_2_SHARED = ("topoopt_ilp.files",)

#: Models that call a solver library directly, with the reason. Every other model reaches the
#: solvers through ``topoopt_ilp.solvers`` (the capability table and the guard speak for its solves).
SOLVER_BYPASS = {
    "topoopt_ilp.models.reroute": "column generation: adds columns to one HiGHS LP and re-solves it warm",
    "topoopt_ilp.models.placement.bounds": "cutting planes: adds rows to one HiGHS LP and re-solves it warm",
    "topoopt_ilp.models.schedule": "CP-SAT interval variables and no-overlap constraints, which LinearModel has not",
}
SOLVER_LIBRARIES = ("highspy", "ortools", "pulp")

#: Packages whose modules import inside functions by design, with the reason. Anywhere else an
#: internal import inside a function must say on its line that it keeps start-up fast.
LAZY_PACKAGES = {
    "topoopt_ilp.cli": "`topoopt --help` and a usage error answer at once: each command imports what it runs in run()",
}
#: (importer prefix, imported prefix) pairs imported inside functions by design, with the reason.
LAZY_EDGES = {
    (
        "topoopt_ilp.methods",
        "topoopt_ilp.models",
    ): "`import topoopt_ilp` loads no solver library: the models import highspy and OR-Tools",
}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the internal module imported
    name: str | None  # the name taken from it (``from target import name``), None for a module import
    line: int
    in_function: bool


def module_names(root: Path = ROOT, packages: dict[str, str] = PACKAGES) -> dict[str, Path]:
    """Every internal module by its installed name."""
    out = {}
    for folder, package in packages.items():
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([package, *parts])] = path
    return out


def imports_of(module: str, path: Path, known: dict[str, Path]) -> tuple[list[Import], list[tuple[int, str]]]:
    """The internal imports of one module, and its imports of anything else (line, top-level name)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.stem == "__init__"
    internal: list[Import] = []
    external: list[tuple[int, str]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name in known:
                        internal.append(Import(module, alias.name, None, child.lineno, inside))
                    else:
                        external.append((child.lineno, alias.name))
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    parts = module.split(".")
                    parts = parts[: len(parts) - child.level + is_package]
                    base = ".".join(parts + ([child.module] if child.module else []))
                else:
                    base = child.module or ""
                for alias in child.names:
                    if f"{base}.{alias.name}" in known:  # a module taken from its package
                        internal.append(Import(module, f"{base}.{alias.name}", None, child.lineno, inside))
                    elif base in known:
                        internal.append(Import(module, base, alias.name, child.lineno, inside))
                    else:
                        external.append((child.lineno, base))
            visit(child, inside)

    visit(tree, False)
    return internal, external


def import_graph(root: Path = ROOT, packages: dict[str, str] = PACKAGES):
    known = module_names(root, packages)
    internal, external = [], {}
    for module, path in known.items():
        inside, outside = imports_of(module, path, known)
        internal += [imp for imp in inside if imp.target != module]
        external[module] = outside
    return known, internal, external


def cycles(modules, imports: list[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for imp in imports:
        edges[imp.module].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def private_imports(imports: list[Import]) -> list[Import]:
    return [imp for imp in imports if imp.name and imp.name.startswith("_") and not imp.name.startswith("__")]


def layer_of(module: str) -> tuple[str, int]:
    prefix = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return prefix, LAYERS[prefix]


def layer_violations(imports: list[Import]) -> list[str]:
    bad = []
    for imp in imports:
        (src_prefix, src), (dst_prefix, dst) = layer_of(imp.module), layer_of(imp.target)
        if dst > src:
            bad.append(f"{imp.module}:{imp.line} (layer {src}) imports {imp.target} (layer {dst})")
        elif src == dst == 2 and src_prefix != dst_prefix and dst_prefix not in LAYER_2_SHARED:
            bad.append(f"{imp.module}:{imp.line} imports {imp.target}: layer-2 packages are independent")
    return bad


KNOWN, IMPORTS, EXTERNAL = import_graph()


def test_every_module_has_a_layer():
    assert all(layer_of(m) for m in KNOWN)


@pytest.mark.parametrize("module", sorted(KNOWN))
def test_imports_go_down_the_layers(module):
    bad = layer_violations([i for i in IMPORTS if i.module == module])
    assert not bad, "imports against the layers (docs/architecture.md):\n" + "\n".join(bad)


def test_no_import_cycles():
    found = cycles(KNOWN, IMPORTS)
    assert not found, "import cycles (function-level imports included):\n" + "\n".join(" <-> ".join(c) for c in found)


@pytest.mark.parametrize("module", sorted(KNOWN))
def test_no_private_name_crosses_a_module(module):
    bad = [
        f"{i.module}:{i.line} imports {i.name} from {i.target}" for i in private_imports(IMPORTS) if i.module == module
    ]
    assert not bad, "private names used as another module's API (make them public where they live):\n" + "\n".join(bad)


def unexplained_lazy_imports(known: dict[str, Path], imports: list[Import], module: str) -> list[str]:
    """The imports inside functions of ``module`` that neither a lazy package nor a comment explains."""
    if any(module == p or module.startswith(p + ".") for p in LAZY_PACKAGES):
        return []
    lines = known[module].read_text().split("\n")

    def declared(i: Import) -> bool:
        return any(
            (i.module == a or i.module.startswith(a + ".")) and (i.target == b or i.target.startswith(b + "."))
            for a, b in LAZY_EDGES
        )

    return [
        f"{module}:{i.line}: {lines[i.line - 1].strip()}"
        for i in imports
        if i.module == module and i.in_function and "start-up" not in lines[i.line - 1] and not declared(i)
    ]


@pytest.mark.parametrize("module", sorted(KNOWN))
def test_function_level_imports_only_for_start_up_time(module):
    bad = unexplained_lazy_imports(KNOWN, IMPORTS, module)
    assert not bad, (
        "imports inside functions (move them to the top, or say '# start-up time: why' on the line):\n" + "\n".join(bad)
    )


def test_models_reach_solvers_through_the_solver_interface():
    bad = []
    for module, outside in EXTERNAL.items():
        if not module.startswith("topoopt_ilp.models") or module in SOLVER_BYPASS:
            continue
        bad += [f"{module}:{line} imports {name}" for line, name in outside if name.split(".")[0] in SOLVER_LIBRARIES]
    for imp in IMPORTS:
        if (
            imp.module.startswith("topoopt_ilp.models")
            and imp.module not in SOLVER_BYPASS
            and imp.target.startswith("topoopt_ilp.solvers.")
        ):
            bad.append(f"{imp.module}:{imp.line} imports {imp.target} (use topoopt_ilp.solvers)")
    assert not bad, (
        "models calling solvers around the interface (or declare the reason in SOLVER_BYPASS):\n" + "\n".join(bad)
    )


def test_the_bypass_list_names_real_modules_that_need_it():
    for module in SOLVER_BYPASS:
        assert module in KNOWN, f"SOLVER_BYPASS names {module}, which does not exist"
        assert any(name.split(".")[0] in SOLVER_LIBRARIES for _, name in EXTERNAL[module]), (
            f"{module} no longer calls a solver library directly: drop it from SOLVER_BYPASS"
        )


def test_solvers_know_nothing_of_the_domain():
    bad = [
        f"{i.module}:{i.line}: {i.target}"
        for i in IMPORTS
        if i.module.startswith("topoopt_ilp.solvers")
        and not (i.target.startswith("topoopt_ilp.solvers") or i.target == "topoopt_ilp.errors")
    ]
    assert not bad, "solvers import domain modules: " + "; ".join(bad)


# The checks themselves, on a small package built for the purpose: each must fail when it should.
def _toy(tmp_path: Path, files: dict[str, str]):
    for name, text in files.items():
        path = tmp_path / "topoopt_ilp" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return import_graph(tmp_path, {"topoopt_ilp": "topoopt_ilp"})


def test_the_checks_see_a_cycle_hidden_in_a_function(tmp_path):
    known, imports, _ = _toy(
        tmp_path,
        {
            "__init__.py": "",
            "core/__init__.py": "",
            "core/a.py": "from topoopt_ilp.core.b import B\n",
            "core/b.py": "B = 1\ndef f():\n    from topoopt_ilp.core import a\n",
        },
    )
    assert cycles(known, imports) == [["topoopt_ilp.core.a", "topoopt_ilp.core.b"]]


def test_the_checks_see_a_private_import_and_an_upward_import(tmp_path):
    known, imports, _ = _toy(
        tmp_path,
        {
            "__init__.py": "",
            "core/__init__.py": "",
            "methods/__init__.py": "_helper = 1\n",
            "core/a.py": "def f():\n    from ..methods import _helper\n",
        },
    )
    assert [(i.module, i.name) for i in private_imports(imports)] == [("topoopt_ilp.core.a", "_helper")]
    assert layer_violations(imports) == ["topoopt_ilp.core.a:2 (layer 1) imports topoopt_ilp.methods (layer 4)"]


def test_the_checks_see_an_unexplained_import_inside_a_function(tmp_path):
    known, imports, _ = _toy(
        tmp_path,
        {
            "__init__.py": "",
            "core/__init__.py": "",
            "core/b.py": "",
            "core/a.py": "def f():\n    from topoopt_ilp.core import b\n\ndef g():\n"
            "    from topoopt_ilp.core import b  # start-up time: b is slow to import\n",
        },
    )
    assert unexplained_lazy_imports(known, imports, "topoopt_ilp.core.a") == [
        "topoopt_ilp.core.a:2: from topoopt_ilp.core import b"
    ]


def test_the_checks_see_layer_two_packages_using_each_other(tmp_path):
    _, imports, _ = _toy(
        tmp_path,
        {
            "__init__.py": "",
            "evaluation/__init__.py": "",
            "heuristic/__init__.py": "",
            "files/__init__.py": "",
            "evaluation/verify.py": "from topoopt_ilp.heuristic import x\nfrom topoopt_ilp.files import y\n",
        },
    )
    assert layer_violations(imports) == [
        "topoopt_ilp.evaluation.verify:1 imports topoopt_ilp.heuristic: layer-2 packages are independent"
    ]


@pytest.mark.parametrize(
    "module",
    [
        "topoopt_ilp.core.instance",
        "topoopt_ilp.models.placement.milp",
        "topoopt_ilp.cli.route",
        "topoopt_ilp.solvers.highs",
    ],
)
def test_the_walker_knows_the_modules(module):
    assert module in KNOWN
