"""The layers of DESIGN.md import one way: each only from the layers below it.

devices → measure → models → profiles → calibrate | tuning → runtime → fleet → cli, with errors,
timebase, paths and _compat below them all. Imports inside functions (the lazy ones) count.
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
