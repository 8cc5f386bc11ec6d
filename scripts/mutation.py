"""Mutation testing for governor's core modules (stdlib only).

For each target module, enumerate small AST mutants (comparison swaps, arithmetic swaps,
numeric constant changes, True<->False, and<->or, dropped ``not``, ``return X`` ->
``return None``), apply them one at a time to a copy of the ``governor/`` package in a
temporary directory, and run the module's tests against that copy. A mutant is *killed* when
the tests fail (or time out, at 3x the clean run); it *survives* when they pass.

Usage:
    python scripts/mutation.py                      # all modules
    python scripts/mutation.py --module models.formulas --module devices.lock
    python scripts/mutation.py --module calibrate.procedure --sample 80 --seed 1
    python scripts/mutation.py --list               # mutant counts only

The tests are run with PYTHONPATH=<tempdir> and PYTHONSAFEPATH=1 (so the worktree's own
``governor/`` on the current directory cannot shadow the mutated copy); the runner checks this
once per run by asking the interpreter where ``governor`` comes from.
"""

from __future__ import annotations

import argparse
import ast
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# tests/calibrate/test_procedure.py without its slow sweeps over every replay file and every
# simulated board (about 90 s: a surviving mutant would cost that much each)
_PROCEDURE = "tests/calibrate/test_procedure.py"
_PROCEDURE_FAST = [
    "test_memory_bound_load_gets_a_lower_clock_than_compute",
    "test_power_capped_probes_are_flagged_and_fit_p_max",
    "test_initial_clocks_are_spread_and_distinct",
    "test_probe_budget_and_tiny_tables_are_validated",
    "test_energy_from_counter_and_from_integrated_power_agree_with_the_truth",
    "test_flaky_sensors_are_tolerated_and_counted",
    "test_command_load_counts_runs_and_reports_failures",
    "test_builtin_load_needs_a_known_kind_of_device",
]

# Module -> (source file, smallest set of test files (or test ids) that exercise it).
MODULES = {
    "models.formulas": (
        "governor/models/formulas.py",
        [
            "tests/calibrate/test_formulas_exact.py",
            "tests/models/test_models_mutants_more.py",
            "tests/models/test_models_mutants.py",
            "tests/calibrate/test_models.py",
        ],
    ),
    "models.power": (
        "governor/models/power.py",
        [
            "tests/models/test_power_fit_edges.py",
            "tests/models/test_models_mutants_more.py",
            "tests/models/test_models_mutants.py",
            "tests/calibrate/test_models.py",
        ],
    ),
    "models.time": (
        "governor/models/time.py",
        [
            "tests/models/test_time_mutants_2.py",
            "tests/calibrate/test_time_model_exact.py",
            "tests/models/test_models_mutants_more.py",
            "tests/models/test_models_mutants.py",
            "tests/calibrate/test_models.py",
        ],
    ),
    "models.optimum": (
        "governor/models/optimum.py",
        [
            "tests/models/test_optimum_mutants_2.py",
            "tests/calibrate/test_optimum_exact.py",
            "tests/models/test_models_mutants_more.py",
            "tests/models/test_models_mutants.py",
            "tests/calibrate/test_optimum_interval.py",
            "tests/calibrate/test_models.py",
        ],
    ),
    "calibrate.procedure": (
        "governor/calibrate/procedure.py",
        [
            "tests/calibrate/test_procedure_mutants_2.py",
            "tests/calibrate/test_procedure_rules.py",
            "tests/calibrate/test_procedure_mutants.py",
            # the result's optimum interval reaches the JSON and the profile (kills `return
            # optimum_interval(...)` -> `return None`, which no fast test above reads)
            "tests/calibrate/test_optimum_interval.py::test_json_and_profile_carry_the_interval",
        ]
        + [_PROCEDURE + "::" + t for t in _PROCEDURE_FAST],
    ),
    "calibrate.loads": (
        "governor/calibrate/loads.py",
        [
            "tests/calibrate/test_loads_mutants.py",
        ]
        + [_PROCEDURE + "::" + t for t in _PROCEDURE_FAST],
    ),
    "devices.journal": (
        "governor/devices/journal.py",
        [
            "tests/devices/test_journal_mutants_more.py",
            "tests/devices/test_journal_mutants.py",
            "tests/runtime/test_ownership.py",
        ],
    ),
    "devices.lock": (
        "governor/devices/lock.py",
        [
            "tests/devices/test_lock_mutants_more.py",
            "tests/devices/test_lock_mutants.py",
            "tests/runtime/test_ownership.py",
        ],
    ),
    "devices.replay_files": (
        "governor/devices/replay_files.py",
        [
            "tests/devices/test_replay_files_edges.py",
            "tests/calibrate/test_replay_bad_rows.py",
            "tests/devices/test_replay_columns.py",
        ],
    ),
    "devices.replay_columns": (
        "governor/devices/replay_columns.py",
        [
            "tests/devices/test_replay_columns.py",
        ],
    ),
    "runtime.policies": (
        "governor/runtime/policies.py",
        [
            "tests/runtime/test_policy_edges.py",
            "tests/runtime/test_policies.py",
            "tests/runtime/test_policy_registry.py",
            "tests/cli/test_run_usage.py",
        ],
    ),
    "runtime.unmet": (
        "governor/runtime/unmet.py",
        [
            "tests/runtime/test_unmet_rules.py",
            "tests/runtime/test_notes.py",
        ],
    ),
    "tuning.occupancy": (
        "governor/tuning/occupancy.py",
        [
            "tests/tuning/test_occupancy_mutants_more.py",
            "tests/tuning/test_occupancy_mutants.py",
            "tests/tuning/test_occupancy.py",
        ],
    ),
}

_CMP_SWAPS = {
    ast.Lt: [ast.LtE, ast.Gt],
    ast.LtE: [ast.Lt, ast.GtE],
    ast.Gt: [ast.GtE, ast.Lt],
    ast.GtE: [ast.Gt, ast.LtE],
    ast.Eq: [ast.NotEq],
    ast.NotEq: [ast.Eq],
}
_BIN_SWAPS = {
    ast.Add: [ast.Sub],
    ast.Sub: [ast.Add],
    ast.Mult: [ast.Div],
    ast.Div: [ast.Mult],
}


def _docstring_nodes(tree):
    """ids of Constant nodes that are docstrings (mutating them is pointless)."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _skip_lines(source):
    """Lines not worth mutating: under ``if TYPE_CHECKING`` or marked ``# pragma: no mutate``."""
    lines = set()
    for i, line in enumerate(source.splitlines(), 1):
        if "pragma: no mutate" in line:
            lines.add(i)
    return lines


def enumerate_mutants(source):
    """Return a list of (index, lineno, description, apply) for every mutant of ``source``.

    ``apply(tree)`` mutates the node with the same walk position in a fresh copy of the tree.
    """
    tree = ast.parse(source)
    docs = _docstring_nodes(tree)
    skip = _skip_lines(source)
    nodes = list(ast.walk(tree))
    annotations = set()
    for node in nodes:
        # Never mutate type annotations (no behaviour) .
        for attr in ("annotation", "returns"):
            sub = getattr(node, attr, None)
            if sub is not None:
                for s in ast.walk(sub):
                    annotations.add(id(s))
    mutants = []

    def add(pos, lineno, desc, fn):
        if lineno in skip:
            return
        mutants.append((pos, lineno, desc, fn))

    for pos, node in enumerate(nodes):
        if id(node) in annotations:
            continue
        lineno = getattr(node, "lineno", 0)
        if isinstance(node, ast.Compare):
            for k, op in enumerate(node.ops):
                for new in _CMP_SWAPS.get(type(op), []):

                    def fn(n, k=k, new=new):
                        n.ops[k] = new()

                    add(pos, lineno, f"{type(op).__name__} -> {new.__name__}", fn)
        elif isinstance(node, (ast.BinOp, ast.AugAssign)):
            for new in _BIN_SWAPS.get(type(node.op), []):

                def fn(n, new=new):
                    n.op = new()

                add(pos, lineno, f"{type(node.op).__name__} -> {new.__name__}", fn)
        elif isinstance(node, ast.Constant) and id(node) not in docs:
            v = node.value
            if isinstance(v, bool):

                def fn(n):
                    n.value = not n.value

                add(pos, lineno, f"{v!r} -> {not v!r}", fn)
            elif isinstance(v, (int, float)):
                if v == 0:
                    new_v = type(v)(1)
                elif v == 1:
                    new_v = type(v)(0)
                else:
                    new_v = v + 1

                def fn(n, new_v=new_v):
                    n.value = new_v

                add(pos, lineno, f"{v!r} -> {new_v!r}", fn)
        elif isinstance(node, ast.BoolOp):
            other = ast.Or if isinstance(node.op, ast.And) else ast.And

            def fn(n, other=other):
                n.op = other()

            add(pos, lineno, f"{type(node.op).__name__} -> {other.__name__}", fn)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            add(pos, lineno, "drop not", "DROP_NOT")
        elif isinstance(node, ast.Return) and node.value is not None:
            if isinstance(node.value, ast.Constant) and node.value.value is None:
                continue

            def fn(n):
                n.value = ast.Constant(value=None)

            add(pos, lineno, "return X -> return None", fn)
    return mutants


def mutate(source, mutant):
    """The mutated source of ``source`` for one mutant from ``enumerate_mutants``."""
    pos, _lineno, _desc, fn = mutant
    tree = ast.parse(source)
    nodes = list(ast.walk(tree))
    target = nodes[pos]
    if fn == "DROP_NOT":
        # Replace the UnaryOp with its operand inside its parent.
        for parent in nodes:
            for field, value in ast.iter_fields(parent):
                if value is target:
                    setattr(parent, field, target.operand)
                elif isinstance(value, list):
                    for i, item in enumerate(value):
                        if item is target:
                            value[i] = target.operand
    else:
        fn(target)
    ast.fix_missing_locations(tree)
    return ast.unparse(tree)


def run_tests(tmp, tests, timeout):
    env = dict(os.environ)
    env["PYTHONPATH"] = tmp
    env["PYTHONSAFEPATH"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    cmd = ["nice", "-n", "10", sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
    cmd += tests
    start = time.monotonic()
    try:
        proc = subprocess.run(
            cmd,
            cwd=ROOT,
            env=env,
            timeout=timeout,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - start, ""
    out = proc.stdout.decode("utf-8", "replace")
    return ("passed" if proc.returncode == 0 else "failed"), time.monotonic() - start, out


def check_import_origin(tmp):
    env = dict(os.environ, PYTHONPATH=tmp, PYTHONSAFEPATH="1")
    out = subprocess.run(
        [sys.executable, "-c", "import governor; print(governor.__file__)"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        check=True,
    ).stdout.decode()
    origin = out.strip()
    if not origin.startswith(os.path.realpath(tmp)) and not origin.startswith(tmp):
        sys.exit(f"governor imported from {origin}, not the mutated copy in {tmp}")
    print(f"tests import governor from {origin}")


def _diff_line(original, mutated):
    """The first line that differs between ast.unparse(original) and the mutated source."""
    a = ast.unparse(ast.parse(original)).splitlines()
    b = mutated.splitlines()
    for x, y in zip(a, b):
        if x != y:
            return x.strip(), y.strip()
    return "", ""


def run_module(name, tmp, sample, seed, verbose):
    rel, tests = MODULES[name]
    tests = [t for t in tests if os.path.exists(os.path.join(ROOT, t.split("::")[0]))]
    path = os.path.join(ROOT, rel)
    with open(path) as fh:
        source = fh.read()
    mutants = enumerate_mutants(source)
    total = len(mutants)
    if sample and sample < total:
        mutants = random.Random(seed).sample(mutants, sample)
        mutants.sort(key=lambda m: (m[1], m[0]))
    target = os.path.join(tmp, rel)
    status, clean_s, out = run_tests(tmp, tests, None)
    if status != "passed":
        print(out)
        sys.exit(f"{name}: tests fail on the unmutated code")
    timeout = max(3 * clean_s, 10.0)
    which = f"sample {len(mutants)}" if len(mutants) < total else "all"
    print(
        f"## {name}: {total} mutants ({which}), clean run {clean_s:.1f} s, "
        f"tests: {' '.join(tests)}",
        flush=True,
    )
    killed = 0
    survivors = []
    try:
        for i, m in enumerate(mutants):
            mutated = mutate(source, m)
            with open(target, "w") as fh:
                fh.write(mutated)
            status, _s, _out = run_tests(tmp, tests, timeout)
            if status == "passed":
                orig_line, new_line = _diff_line(source, mutated)
                survivors.append((rel, m[1], m[2], orig_line, new_line))
            else:
                killed += 1
            if verbose:
                print(
                    f"  [{i + 1}/{len(mutants)}] {rel}:{m[1]} {m[2]} -> {status}",
                    flush=True,
                )
    finally:
        shutil.copy(path, target)
    return name, total, len(mutants), killed, survivors


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", action="append", choices=sorted(MODULES))
    parser.add_argument("--sample", type=int, default=0, help="run a random subset of N mutants")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--list", action="store_true", help="only count mutants per module")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    names = args.module or list(MODULES)
    if args.list:
        print("| module | mutants |\n|---|---:|")
        for name in names:
            with open(os.path.join(ROOT, MODULES[name][0])) as fh:
                print(f"| {name} | {len(enumerate_mutants(fh.read()))} |")
        return 0
    # a plain kill (SIGTERM) still removes the temporary copy
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("mutation run terminated"))
    results = []
    tmp = tempfile.mkdtemp(prefix="governor-mut-")
    try:
        shutil.copytree(
            os.path.join(ROOT, "governor"),
            os.path.join(tmp, "governor"),
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        # Data files the package finds relative to its own location (profiles/, ...): link the
        # rest of the worktree's top level next to the copied package.
        for entry in os.listdir(ROOT):
            if entry not in ("governor", ".git", ".venv") and not entry.startswith("."):
                os.symlink(os.path.join(ROOT, entry), os.path.join(tmp, entry))
        check_import_origin(tmp)
        for name in names:
            results.append(run_module(name, tmp, args.sample, args.seed, args.verbose))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\n| module | mutants | run | killed | survived | score |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, total, run, killed, survivors in results:
        score = 100.0 * killed / run if run else 100.0
        print(f"| {name} | {total} | {run} | {killed} | {len(survivors)} | {score:.1f} % |")
    for name, _total, _run, _killed, survivors in results:
        if survivors:
            print(f"\n### Survivors: {name}")
            for rel, lineno, desc, orig_line, new_line in survivors:
                print(f"- {rel}:{lineno} ({desc}): `{orig_line}` -> `{new_line}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
