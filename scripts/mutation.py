#!/usr/bin/env python3
"""Mutation testing: change one operator or constant of a module at a time and run the tests
that exercise it; a mutant the tests still pass is a *survivor* (the tests do not bite there).

    python scripts/mutation.py --list                      # modules and their tests
    python scripts/mutation.py --module journal            # every mutant of one module
    python scripts/mutation.py --sample 40 --seed 1        # a seeded sample per module
    python scripts/mutation.py --module occupancy --survivors-only

Each mutant is written into a copy of the checkout (without .git and .venv) in a temporary
directory, and the module's tests run there (the runner checks the copy's package is what
they import). A mutant that fails the tests, errors or runs past three times the
clean run's time is killed. Standard library only; one mutant at a time (2-core machines).

Operators: comparisons (``<`` ``<=`` ``>`` ``>=`` ``==`` ``!=`` swapped), arithmetic (``+``
``-`` ``*`` ``/`` swapped), ``and``/``or`` swapped, ``not`` dropped, numeric constants (0 and 1
swapped, n to n+1), ``True``/``False`` swapped, ``return X`` to ``return None``. Docstrings,
type annotations, ``__all__`` and data tables (a list, tuple, dict or set literal of four
or more entries assigned to a name: facts such as GPU limits, checked against their sources
elsewhere) are left alone.
"""

from __future__ import annotations

import argparse
import ast
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[1]

#: module (path under governor/) -> the tests that exercise it (the smallest set that does)
MODULES: Dict[str, Tuple[str, Sequence[str]]] = {
    "formulas": (
        "models/formulas.py",
        [
            "tests/calibrate/test_formulas_exact.py",
            "tests/calibrate/test_models.py",
            "tests/devices/test_sim_physics.py",
        ],
    ),
    "power": (
        "models/power.py",
        ["tests/calibrate/test_models.py", "tests/calibrate/test_uncertainty.py"],
    ),
    "time": (
        "models/time.py",
        ["tests/calibrate/test_time_model_exact.py", "tests/calibrate/test_models.py"],
    ),
    "optimum": (
        "models/optimum.py",
        ["tests/calibrate/test_optimum_exact.py", "tests/calibrate/test_optimum_interval.py"],
    ),
    "procedure": (
        "calibrate/procedure.py",
        ["tests/calibrate/test_procedure_rules.py", "tests/calibrate/test_procedure.py"],
    ),
    "loads": ("calibrate/loads.py", ["tests/calibrate/test_procedure.py"]),
    "journal": (
        "devices/journal.py",
        ["tests/devices/test_journal_fuzz.py", "tests/runtime/test_ownership.py"],
    ),
    "lock": (
        "devices/lock.py",
        ["tests/runtime/test_ownership.py", "tests/runtime/test_governor.py"],
    ),
    "occupancy": ("tuning/occupancy.py", ["tests/tuning/test_occupancy.py"]),
}

_COMPARE = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
}
_ARITH = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult}


@dataclass(frozen=True)
class Mutant:
    index: int  # the n-th mutation site of the module, in walk order
    line: int
    what: str  # e.g. "< -> <="


def _skipped_nodes(tree: ast.AST) -> set:
    """Nodes not to mutate: docstrings, annotations, ``__all__``."""
    skip = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                skip.update(ast.walk(body[0]))
        for field in ("annotation", "returns"):
            sub = getattr(node, field, None)
            if sub is not None:
                skip.update(ast.walk(sub))
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            skip.update(ast.walk(node))
    for stmt in ast.walk(tree):  # data tables (facts, not logic): 4 or more literal entries
        value = getattr(stmt, "value", None)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and isinstance(
            value, (ast.List, ast.Tuple, ast.Dict, ast.Set)
        ):
            entries = value.keys if isinstance(value, ast.Dict) else value.elts
            if len(entries) >= 4:
                skip.update(ast.walk(stmt))
    return skip


def _sites(tree: ast.AST) -> Iterator[Tuple[ast.AST, str, object]]:
    """(node, description, how) for every mutation site, in a fixed order."""
    skip = _skipped_nodes(tree)
    for node in ast.walk(tree):
        if node in skip:
            continue
        if isinstance(node, ast.Compare):
            for k, op in enumerate(node.ops):
                new = _COMPARE.get(type(op))
                if new is not None:
                    yield node, f"{_sym(op)} -> {_sym(new())}", ("cmp", k, new)
        elif isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
            new = _ARITH[type(node.op)]
            yield node, f"{_sym(node.op)} -> {_sym(new())}", ("bin", new)
        elif isinstance(node, ast.AugAssign) and type(node.op) in _ARITH:
            new = _ARITH[type(node.op)]
            yield node, f"{_sym(node.op)}= -> {_sym(new())}=", ("bin", new)
        elif isinstance(node, ast.BoolOp):
            yield node, "and <-> or", ("bool",)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield node, "not dropped", ("not",)
        elif isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bool):
                yield node, f"{value} -> {not value}", ("const", not value)
            elif isinstance(value, (int, float)):
                new_value = {0: 1, 1: 0}.get(value, value + 1) if value in (0, 1) else value + 1
                yield node, f"{value!r} -> {new_value!r}", ("const", new_value)
        elif isinstance(node, ast.Return) and node.value is not None:
            if not (isinstance(node.value, ast.Constant) and node.value.value is None):
                yield node, "return X -> return None", ("ret",)


_SYMBOLS = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
}


def _sym(op: ast.AST) -> str:
    return _SYMBOLS.get(type(op), type(op).__name__)


def mutants(source: str) -> List[Mutant]:
    tree = ast.parse(source)
    return [
        Mutant(i, getattr(node, "lineno", 0), what)
        for i, (node, what, _) in enumerate(_sites(tree))
    ]


def mutate(source: str, index: int) -> str:
    """The module's source with mutation site ``index`` applied."""
    tree = ast.parse(source)
    for i, (node, _, how) in enumerate(_sites(tree)):
        if i != index:
            continue
        kind = how[0]
        if kind == "cmp":
            node.ops[how[1]] = how[2]()  # type: ignore[attr-defined]
        elif kind == "bin":
            node.op = how[1]()  # type: ignore[attr-defined]
        elif kind == "bool":
            node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()  # type: ignore[attr-defined]
        elif kind == "not":
            _replace(tree, node, node.operand)  # type: ignore[attr-defined]
        elif kind == "const":
            node.value = how[1]  # type: ignore[attr-defined]
        elif kind == "ret":
            node.value = ast.Constant(None)  # type: ignore[attr-defined]
        return ast.unparse(ast.fix_missing_locations(tree))
    raise IndexError(index)


def _replace(tree: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return
            if isinstance(value, list):
                for k, item in enumerate(value):
                    if item is old:
                        value[k] = new
                        return


def run_tests(copy: Path, tests: Sequence[str], timeout_s: Optional[float]) -> Tuple[str, float]:
    """'pass', 'fail' or 'timeout', and the seconds it took."""
    env = dict(os.environ, PYTHONPATH=str(copy), PYTHONDONTWRITEBYTECODE="1")
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
            cwd=copy,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - t0
    return ("pass" if proc.returncode == 0 else "fail"), time.monotonic() - t0


def check_copy_is_imported(copy: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(copy))
    out = subprocess.run(
        [sys.executable, "-c", "import governor; print(governor.__file__)"],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not out.startswith(str(copy)):
        raise SystemExit(f"mutation: the tests would import {out}, not the mutated copy")


def run_module(
    name: str, sample: Optional[int], seed: int, survivors_only: bool
) -> Tuple[int, int]:
    rel, tests = MODULES[name]
    path = ROOT / "governor" / rel
    source = path.read_text(encoding="utf-8")
    every = mutants(source)
    chosen = every
    if sample is not None and sample < len(every):
        chosen = sorted(random.Random(seed).sample(every, sample), key=lambda m: m.index)
    with tempfile.TemporaryDirectory(prefix="governor-mutation-") as tmp:
        copy = Path(tmp) / "repo"  # the whole checkout but .git and .venv: tests read data
        shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".git", ".venv", "__pycache__"))
        check_copy_is_imported(copy)
        target = copy / "governor" / rel
        status, clean_s = run_tests(copy, tests, None)
        if status != "pass":
            raise SystemExit(f"mutation: the tests of {name} fail unmutated: {' '.join(tests)}")
        killed = 0
        survivors: List[Mutant] = []
        for m in chosen:
            target.write_text(mutate(source, m.index), encoding="utf-8")
            status, _ = run_tests(copy, tests, max(10.0, 3 * clean_s))
            if status == "pass":
                survivors.append(m)
            else:
                killed += 1
        target.write_text(source, encoding="utf-8")
    lines = source.splitlines()
    if not survivors_only or survivors:
        print(
            f"| {name} | governor/{rel} | {len(every)} | {len(chosen)} | {killed} | "
            f"{100.0 * killed / len(chosen) if chosen else 100.0:.1f} % |",
            flush=True,
        )
    for m in survivors:
        text = lines[m.line - 1].strip() if 0 < m.line <= len(lines) else ""
        print(f"  survivor governor/{rel}:{m.line}: {m.what}: {text}", file=sys.stderr, flush=True)
    return killed, len(chosen)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", action="append", choices=sorted(MODULES), help="repeatable")
    parser.add_argument("--sample", type=int, help="at most this many mutants per module")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--list", action="store_true", help="list modules, mutants and tests")
    parser.add_argument("--survivors-only", action="store_true")
    args = parser.parse_args()
    names = args.module or list(MODULES)
    if args.list:
        for name in names:
            rel, tests = MODULES[name]
            count = len(mutants((ROOT / "governor" / rel).read_text(encoding="utf-8")))
            print(f"{name}: governor/{rel}, {count} mutants; tests: {' '.join(tests)}")
        return 0
    if args.sample is not None and args.sample < 1:
        parser.error("--sample must be at least 1")
    print("| module | file | mutants | run | killed | score |")
    print("|---|---|---:|---:|---:|---:|")
    total_killed = total_run = 0
    for name in names:
        killed, run = run_module(name, args.sample, args.seed, args.survivors_only)
        total_killed += killed
        total_run += run
    score = 100.0 * total_killed / total_run if total_run else 100.0
    print(f"| all | | | {total_run} | {total_killed} | {score:.1f} % |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
