"""scripts/mutation.py makes the mutants its documentation lists, one change each."""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "mutation.py"


def _runner():
    spec = importlib.util.spec_from_file_location("mutation_script", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


SOURCE = '''"""doc"""


def f(a: int = 0, b=True):
    """doc"""
    if a < 2 and not b:
        return a + 1
    return a * 3  # pragma: no mutate
'''


def test_each_operator_class_is_mutated_once_per_site():
    mut = _runner()
    mutants = mut.enumerate_mutants(SOURCE)
    changed = sorted({mut.mutate(SOURCE, m) for m in mutants})
    assert len(changed) == len(mutants)  # every mutant is a distinct program
    lines = sorted(
        next(
            y.strip()
            for x, y in zip(mut.ast.unparse(mut.ast.parse(SOURCE)).splitlines(), c.splitlines())
            if x != y
        )
        for c in changed
    )
    assert lines == sorted(
        [
            "def f(a: int=1, b=True):",  # 0 -> 1 (the annotation `int` is left alone)
            "def f(a: int=0, b=False):",  # True -> False
            "if a <= 2 and (not b):",
            "if a > 2 and (not b):",
            "if a < 3 and (not b):",  # 2 -> 3
            "if a < 2 or not b:",
            "if a < 2 and b:",  # dropped not
            "return a - 1",
            "return a + 0",  # 1 -> 0
            "return None",
        ]
    )
    # the docstrings and the `# pragma: no mutate` line are never touched


def test_every_module_in_the_table_exists_with_its_tests():
    mut = _runner()
    root = SCRIPT.parents[1]
    for name, (path, tests) in mut.MODULES.items():
        assert (root / path).is_file(), name
        assert tests and all((root / t.split("::")[0]).is_file() for t in tests), name
