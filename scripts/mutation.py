"""A small AST mutation-testing runner (standard library only).

Each mutant changes one thing in one module (a comparison, an operator, a constant, a boolean
operator, a ``not``, a return value, or deletes one statement), is written over the module in
the worktree, and the module's own table of test files is run with
``pytest -x -q -p no:cacheprovider``. A mutant is *killed* when the tests fail (or hang past
3x the clean run), *survived* when they pass. The original file is always written back (in a
``finally`` and at exit), and the script refuses to start when a listed module has
uncommitted changes, so ``git checkout`` can always repair an interrupted run.

    nice python scripts/mutation.py                       # all modules, all mutants
    nice python scripts/mutation.py --module journal      # one module (name or path part)
    nice python scripts/mutation.py --list                # show mutants, run nothing
    nice python scripts/mutation.py --sample 40 --seed 1  # 40 random mutants per module

Prints a table per module (killed / survived / score) and every survivor as
``file:line operator: original -> mutated``.
"""

from __future__ import annotations

import argparse
import ast
import atexit
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent

# module -> the tests that exercise it, fast mutant-killing files first (pytest -x stops at
# the first failure, so most killed mutants cost one quick file)
TABLE: Dict[str, List[str]] = {
    "governor/models/formulas.py": [
        "tests/models/test_models_mutants.py",
        "tests/calibrate/test_models.py",
    ],
    "governor/models/power.py": [
        "tests/models/test_models_mutants.py",
        "tests/calibrate/test_models.py",
        "tests/calibrate/test_uncertainty.py",
    ],
    "governor/models/time.py": [
        "tests/models/test_models_mutants.py",
        "tests/calibrate/test_models.py",
        "tests/calibrate/test_uncertainty.py",
    ],
    "governor/models/optimum.py": [
        "tests/models/test_models_mutants.py",
        "tests/calibrate/test_models.py",
        "tests/calibrate/test_optimum_interval.py",
    ],
    "governor/calibrate/procedure.py": [
        "tests/calibrate/test_procedure_mutants.py",
        "tests/calibrate/test_procedure.py",
    ],
    "governor/calibrate/loads.py": [
        "tests/calibrate/test_procedure_mutants.py",
        "tests/calibrate/test_procedure.py",
    ],
    "governor/devices/journal.py": [
        "tests/devices/test_journal_mutants.py",
        "tests/devices/test_controls.py",
        "tests/devices/test_journal_fuzz.py",
    ],
    "governor/devices/lock.py": [
        "tests/devices/test_lock_mutants.py",
        "tests/runtime/test_ownership.py",
    ],
    "governor/tuning/occupancy.py": [
        "tests/tuning/test_occupancy_mutants.py",
        "tests/tuning/test_occupancy.py",
    ],
}

CMP_SWAP = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
BIN_SWAP = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
}
SIMPLE_STMTS = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Raise, ast.Delete)

Mutant = Tuple[int, int, str, int, str, str]  # (node index, variant, operator, line, was, now)


def _src(node: ast.AST) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."


def _skipped_nodes(tree: ast.AST) -> set:
    """Docstrings, annotations and ``__all__``: changing them cannot change behaviour."""
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    skip.update(id(n) for n in ast.walk(body[0]))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            parts = [a.annotation for a in node.args.args + node.args.kwonlyargs]
            parts += [a.annotation for a in node.args.posonlyargs]
            parts += [node.returns]
            for extra in (node.args.vararg, node.args.kwarg):
                if extra is not None:
                    parts.append(extra.annotation)
            for part in parts:
                if part is not None:
                    skip.update(id(n) for n in ast.walk(part))
        if isinstance(node, ast.AnnAssign):
            skip.update(id(n) for n in ast.walk(node.annotation))
        if isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            if "__all__" in names:
                skip.update(id(n) for n in ast.walk(node))
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            skip.update(id(n) for n in ast.walk(node))
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    return skip


def _variants(node: ast.AST) -> List[Tuple[str, str]]:
    """The mutations one node offers, as (operator, description of the new code)."""
    out: List[Tuple[str, str]] = []
    if isinstance(node, ast.Compare):
        for k, op in enumerate(node.ops):
            if type(op) in CMP_SWAP:
                out.append(("cmp", f"op{k}->{CMP_SWAP[type(op)].__name__}"))
    elif isinstance(node, ast.BinOp) and type(node.op) in BIN_SWAP:
        out.append(("arith", BIN_SWAP[type(node.op)].__name__))
    elif isinstance(node, ast.AugAssign) and type(node.op) in BIN_SWAP:
        out.append(("arith", BIN_SWAP[type(node.op)].__name__))
    elif isinstance(node, ast.BoolOp):
        out.append(("boolop", "Or" if isinstance(node.op, ast.And) else "And"))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        out.append(("not", "drop not"))
    elif isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool):
            out.append(("const", repr(not value)))
        elif isinstance(value, int):
            out.append(("const", repr(value + 1)))
            if value == 1:
                out.append(("const", "0"))
        elif isinstance(value, float):
            out.append(("const", repr(value + 1.0) if value == 0.0 else repr(value * 2.0)))
    elif isinstance(node, ast.Return) and node.value is not None:
        if not (isinstance(node.value, ast.Constant) and node.value.value is None):
            out.append(("return", "return None"))
    if isinstance(node, SIMPLE_STMTS):
        out.append(("delete", "pass"))
    return out


def _new_value(node: ast.Constant, desc: str) -> object:
    value = node.value
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return int(desc)
    return float(desc)


def enumerate_mutants(source: str) -> List[Mutant]:
    tree = ast.parse(source)
    skip = _skipped_nodes(tree)
    found: List[Mutant] = []
    for index, node in enumerate(ast.walk(tree)):
        if id(node) in skip:
            continue
        for variant, (operator, desc) in enumerate(_variants(node)):
            was = _src(node)
            found.append((index, variant, operator, getattr(node, "lineno", 0), was, desc))
    return found


def apply_mutant(source: str, mutant: Mutant) -> str:
    index, variant, _, _, _, _ = mutant
    tree = ast.parse(source)
    nodes = list(ast.walk(tree))
    node = nodes[index]
    operator, desc = _variants(node)[variant]
    if operator == "delete":
        for parent in nodes:
            for field, value in ast.iter_fields(parent):
                if isinstance(value, list) and any(v is node for v in value):
                    k = next(i for i, v in enumerate(value) if v is node)
                    value[k] = ast.Pass()
                    ast.copy_location(value[k], node)
                    setattr(parent, field, value)
    elif operator == "cmp":
        k = int(desc[2 : desc.index("-")])
        node.ops[k] = CMP_SWAP[type(node.ops[k])]()
    elif operator == "arith":
        node.op = BIN_SWAP[type(node.op)]()
    elif operator == "boolop":
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif operator == "not":
        for parent in nodes:
            for field, value in ast.iter_fields(parent):
                if value is node:
                    setattr(parent, field, node.operand)
                elif isinstance(value, list) and any(v is node for v in value):
                    value[[v is node for v in value].index(True)] = node.operand
    elif operator == "const":
        node.value = _new_value(node, desc)
    elif operator == "return":
        node.value = ast.Constant(value=None)
    ast.fix_missing_locations(tree)
    return ast.unparse(tree) + "\n"


def _clear_pycache(path: Path) -> None:
    cache = path.parent / "__pycache__"
    if cache.is_dir():
        for pyc in cache.glob(path.stem + ".*.pyc"):
            try:
                pyc.unlink()
            except OSError:
                pass


def run_tests(tests: List[str], timeout_s: Optional[float]) -> Tuple[bool, float]:
    """(passed, seconds). A run past the timeout counts as failed (the mutant hangs)."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    start = time.monotonic()
    try:
        done = subprocess.run(
            cmd,
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return False, time.monotonic() - start
    return done.returncode == 0, time.monotonic() - start


def _dirty(path: Path) -> bool:
    out = subprocess.run(
        ["git", "status", "--porcelain", "--", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return bool(out.stdout.strip())


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", action="append", help="module name or path part (repeat)")
    parser.add_argument("--list", action="store_true", help="list mutants and exit")
    parser.add_argument("--sample", type=int, help="at most N random mutants per module")
    parser.add_argument("--seed", type=int, default=0, help="seed for --sample")
    parser.add_argument("--max", type=int, help="at most the first N mutants per module")
    args = parser.parse_args(argv)
    # SIGTERM (and SIGINT, ignored in background jobs) unwind through the finally blocks,
    # so the original module is always written back
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)

    modules = list(TABLE)
    if args.module:
        modules = [m for m in modules if any(part in m for part in args.module)]
        if not modules:
            print(f"error: no module matches {args.module}", file=sys.stderr)
            return 2

    results: List[Tuple[str, int, int, int]] = []
    survivors: List[str] = []
    for module in modules:
        path = ROOT / module
        original = path.read_text()
        mutants = enumerate_mutants(original)
        total = len(mutants)
        if args.sample is not None and args.sample < len(mutants):
            mutants = sorted(random.Random(args.seed).sample(mutants, args.sample))
        if args.max is not None:
            mutants = mutants[: args.max]
        if args.list:
            for m in mutants:
                print(f"{module}:{m[3]} {m[2]}: {m[4]} -> {m[5]}")
            continue
        if _dirty(path):
            print(
                f"error: {module} has uncommitted changes; commit or stash first", file=sys.stderr
            )
            return 2
        tests = [t for t in TABLE[module] if (ROOT / t).exists()]
        _clear_pycache(path)
        ok, clean_s = run_tests(tests, None)
        if not ok:
            print(f"error: the tests for {module} fail without any mutant", file=sys.stderr)
            return 2
        timeout_s = max(3.0 * clean_s, 10.0)
        print(f"{module}: {len(mutants)} of {total} mutants, clean run {clean_s:.1f} s", flush=True)

        def restore(path: Path = path, original: str = original) -> None:
            path.write_text(original)
            _clear_pycache(path)

        atexit.register(restore)
        killed = 0
        for m in mutants:
            try:
                mutated = apply_mutant(original, m)
            except Exception as exc:  # an unparsable mutant is not counted
                print(f"  skip {module}:{m[3]} {m[2]}: {exc}", flush=True)
                continue
            try:
                path.write_text(mutated)
                _clear_pycache(path)
                passed, _ = run_tests(tests, timeout_s)
            finally:
                restore()
            if passed:
                line = f"{module}:{m[3]} {m[2]}: {m[4]} -> {m[5]}"
                survivors.append(line)
                print(f"  SURVIVED {line}", flush=True)
            else:
                killed += 1
        atexit.unregister(restore)
        results.append((module, len(mutants), killed, total))

    if args.list:
        return 0
    print()
    print(f"{'module':<36} {'run':>5} {'killed':>7} {'survived':>9} {'score':>7}")
    all_run = all_killed = 0
    for module, run, killed, _total in results:
        score = 100.0 * killed / run if run else 100.0
        print(f"{module:<36} {run:>5} {killed:>7} {run - killed:>9} {score:>6.1f}%")
        all_run += run
        all_killed += killed
    if all_run:
        score = 100.0 * all_killed / all_run
        print(
            f"{'total':<36} {all_run:>5} {all_killed:>7} {all_run - all_killed:>9} {score:>6.1f}%"
        )
    if survivors:
        print("\nsurvivors:")
        for line in survivors:
            print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
