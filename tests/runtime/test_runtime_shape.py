"""The runtime's shape (issue 44): parts a maintainer can read whole.

No class in ``governor/runtime`` over 350 lines and no function over 60 (read by ``ast``:
a docstring and comments count, as a reader reads them); no part of ``governor`` reads a
key of a governor's or controller's ``status()`` dictionary (the typed records are what
parts read); no controller factory named by a ``"module:function"`` string; and no
``isinstance`` test on a policy class outside the policy table's module.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "governor"
RUNTIME = PACKAGE / "runtime"
CLASS_LINES = 350
FUNCTION_LINES = 60
POLICY_CLASSES = ("MaxEfficiency", "Performance", "FixedClock", "PowerCap", "Battery", "Throughput")


def _sizes():
    for path in sorted(RUNTIME.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                yield path.relative_to(PACKAGE.parent), node, node.end_lineno - node.lineno + 1


def test_no_class_over_350_lines_and_no_function_over_60():
    too_long = [
        f"{path}:{node.lineno} {node.name} ({lines} lines)"
        for path, node, lines in _sizes()
        if lines > (CLASS_LINES if isinstance(node, ast.ClassDef) else FUNCTION_LINES)
    ]
    assert too_long == []


def test_the_size_check_sees_the_largest_parts():
    """The walk reaches methods inside classes and the classes of every subpackage."""
    sizes = {(str(path), node.name): lines for path, node, lines in _sizes()}
    assert sizes[("governor/runtime/governor.py", "Governor")] > 200
    assert ("governor/runtime/daemon/config.py", "parse_config") in sizes
    assert ("governor/runtime/battery_controller.py", "choose") in sizes


def _code(path: Path) -> str:
    """``path``'s source without its docstrings and comments (prose may name a key)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(getattr(body[0], "value", None), ast.Constant):
                body[0] = ast.Pass()
    return ast.unparse(tree)


def _sources():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE.parent), _code(path)


def test_no_part_reads_a_key_of_a_status_dictionary():
    pattern = re.compile(r"\.status\(\)\s*(\[|\.get\()")
    found = [str(path) for path, code in _sources() if pattern.search(code)]
    assert found == []


def test_no_controller_factory_is_a_module_function_string():
    # "governor.runtime.controllers:ppw_controller", or f"{MODULE}:ppw_controller"
    pattern = re.compile(r"['\"][a-z_]+(\.[a-z_]+)+:[a-z_]+['\"]|\}:\w+_controller['\"]")
    found = [str(path) for path, code in _sources() if pattern.search(code)]
    assert found == []


def test_no_isinstance_over_policies_outside_the_policy_table():
    pattern = re.compile(r"isinstance\([^)]*\b(" + "|".join(POLICY_CLASSES) + r")\b")
    found = [
        str(path)
        for path, code in _sources()
        if pattern.search(code) and path.name != "policies.py"
    ]
    assert found == []


POLICY_NAMES = ("ppw", "max", "power-cap", "battery", "throughput", "clock")


def test_no_list_of_policy_names_outside_the_policy_table():
    """Which policies take a mission end, which are one static lock, which a daemon client
    may apply: each is a column of the table (``has_mission``, ``static``,
    ``CLIENT_POLICIES``), not a tuple of names written again somewhere (help text aside)."""
    names = "|".join(re.escape(n) for n in POLICY_NAMES)
    pattern = re.compile(r"[\(\[\{]\s*['\"](" + names + r")['\"]\s*,\s*['\"](" + names + r")['\"]")
    found = [
        str(path)
        for path, code in _sources()
        if pattern.search(code) and path.name != "policies.py"
    ]
    assert found == []


def test_the_tables_columns_say_what_the_old_lists_said():
    from governor.runtime.policies import CLIENT_POLICIES, NAMES, POLICIES

    assert CLIENT_POLICIES == ("ppw", "max")
    assert {n for n, k in POLICIES.items() if k.has_mission} == {"battery", "throughput"}
    assert {n for n, k in POLICIES.items() if k.static} == {"ppw", "max", "clock"}
    assert set(NAMES) == set(POLICY_NAMES)


def test_the_policy_help_of_the_commands_names_every_policy_of_the_table():
    """The one list left in words: ``--policy``'s help (building it from the table would load
    every controller whenever the command line starts)."""
    from governor.runtime.policies import NAMES

    for path in (PACKAGE / "cli" / "run.py", PACKAGE / "cli" / "ros2.py"):
        text = path.read_text(encoding="utf-8")
        helps = re.findall(r'"--policy",\s*help="([^"]+)"', text)
        assert helps, path
        for helped in helps:
            said = set(re.findall(r"[a-z-]+", helped)) - {"or", "none", "the", "default"}
            assert said == set(NAMES), (path, helped)
