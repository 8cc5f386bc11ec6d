"""scripts/mutation.py makes the mutants it says it makes, and leaves docstrings alone."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("mutation", ROOT / "scripts" / "mutation.py")
mutation = importlib.util.module_from_spec(spec)
sys.modules["mutation"] = mutation  # its dataclasses look their module up there
spec.loader.exec_module(mutation)

SOURCE = '''
def f(a: int, b: int = 2) -> bool:
    """1 < 2 in a docstring is not code."""
    if not a:
        return a + 1 < b and True
    return None
'''


def test_each_site_is_listed_once_with_its_change():
    whats = [m.what for m in mutation.mutants(SOURCE)]
    assert sorted(whats) == sorted(
        [
            "not dropped",
            "return X -> return None",
            "and <-> or",
            "< -> <=",
            "+ -> -",
            "1 -> 0",
            "True -> False",
            "2 -> 3",  # a default value is code; the annotations beside it are not
        ]
    )


def test_mutate_changes_exactly_one_site():
    sites = {m.what: m.index for m in mutation.mutants(SOURCE)}
    changed = mutation.mutate(SOURCE, sites["< -> <="])
    assert "a + 1 <= b and True" in changed and "1 < 2 in a docstring" in changed
    assert "return a - 1 < b" in mutation.mutate(SOURCE, sites["+ -> -"])
    assert "if a:" in mutation.mutate(SOURCE, sites["not dropped"])
    namespace = {}
    exec(mutation.mutate(SOURCE, sites["return X -> return None"]), namespace)
    assert namespace["f"](0) is None


def test_every_listed_module_and_test_file_exists():
    for rel, tests in mutation.MODULES.values():
        assert (ROOT / "governor" / rel).is_file(), rel
        for test in tests:
            assert (ROOT / test).is_file(), test
