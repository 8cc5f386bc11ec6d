"""The layers of DESIGN.md import one way: each only from the layers below it.

devices → measure → models → profiles → calibrate | tuning → runtime → fleet → cli, with errors,
timebase, paths and _compat below them all. Imports inside functions (the lazy ones) count,
both for the layers and for import cycles, which no two modules may form.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "governor"
RANK = {
    "_version": 0,
    "_compat": 0,
    "errors": 0,
    "timebase": 0,
    "paths": 0,
    "documents": 0,  # the typed reader of profile documents (models and calibrate parse with it)
    "devices": 1,
    "measure": 2,
    "models": 3,
    "profiles": 4,
    "calibrate": 5,
    "tuning": 5,
    "kernels": 5.5,  # CUDA templates over tuning's selectors and occupancy limits
    "runtime": 6,
    "fleet": 7,  # cluster integration (Slurm prolog/epilog) over runtime
    "cli": 8,
    "__main__": 9,
    "__init__": 9,
}
# Allowed exceptions, each with its reason.
ALLOWED: set = {
    # the simulator evaluates the one copy of P(f) and t(f) (governor/models/formulas.py, pure
    # Python importing nothing of governor) instead of keeping its own that could drift
    ("devices", "models"),
}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name


def test_no_layer_imports_from_a_layer_above_it():
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        here = _layer(".".join(rel.parts))
        here = here if here in RANK else "__init__"
        for line, module in _imports(path):
            if not module.startswith("governor.") or module == "governor":
                continue
            there = _layer(module)
            if there not in RANK or (here, there) in ALLOWED:
                continue
            if RANK[there] > RANK[here] and here not in ("__init__", "__main__"):
                wrong.append(f"{rel}:{line} ({here}) imports {module} ({there})")
    assert not wrong, "\n".join(wrong)


def _module_name(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _type_checking_only(tree: ast.AST) -> set:
    """The nodes under ``if TYPE_CHECKING:``: imports for the type checker, never run."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
            for stmt in node.body:
                skipped.update(id(sub) for sub in ast.walk(stmt))
    return skipped


def import_graph(package: Path = PACKAGE) -> dict:
    """Module -> the governor modules it imports, at the top or inside a function (an import
    under ``if TYPE_CHECKING:`` never runs and does not count). ``from pkg import name``
    imports the submodule ``pkg.name`` when there is one, else ``pkg``."""
    modules = {_module_name(p, package): p for p in package.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = _type_checking_only(tree)
        found = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    found.add(sub if sub in modules else node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        graph[name] = sorted(m for m in found if m in modules and m != name)
    return graph


def import_cycles(graph: dict) -> list:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on_stack: set = set()
    groups: list = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def test_no_import_cycles_lazy_imports_included():
    cycles = import_cycles(import_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_a_cycle_through_a_lazy_import(tmp_path):
    pkg = tmp_path / "governor"
    (pkg / "a").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "__init__.py").write_text("")
    (pkg / "a" / "one.py").write_text("from governor.a import two\n")
    (pkg / "a" / "two.py").write_text("def f():\n    from governor.a.one import x\n")
    (pkg / "a" / "three.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from governor.a import one\n"
    )
    graph = import_graph(pkg)
    assert import_cycles(graph) == [["governor.a.one", "governor.a.two"]]
    assert graph["governor.a.three"] == []
