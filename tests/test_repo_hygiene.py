"""Issue 49 items 5 and 7: the checkout holds no symlink into one machine's file system (a
tracked ``.venv-main`` pointed at a path on one machine) and ignores virtual environments of
any name; the README says how long the whole suite takes and how to run one folder."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


@pytest.fixture
def checkout():
    if shutil.which("git") is None or _git("rev-parse", "--is-inside-work-tree").returncode:
        pytest.skip("not a git checkout (an sdist): nothing tracked to check")


def test_no_tracked_symlink_leaves_the_checkout(checkout):
    listed = _git("ls-files", "-s").stdout.splitlines()
    links = [line.split("\t", 1)[1] for line in listed if line.startswith("120000 ")]
    outside = []
    for name in links:
        target = os.readlink(ROOT / name) if (ROOT / name).is_symlink() else ""
        resolved = (ROOT / name).parent.joinpath(target).resolve()
        if os.path.isabs(target) or ROOT.resolve() not in (resolved, *resolved.parents):
            outside.append(f"{name} -> {target}")
    assert outside == []
    assert ".venv-main" not in links


@pytest.mark.parametrize("name", [".venv", ".venv-main", ".venv38", ".venv/bin/python"])
def test_virtual_environments_of_any_name_are_ignored(checkout, name):
    assert _git("check-ignore", "-q", "--no-index", name).returncode == 0, name


def test_readme_says_how_long_the_suite_takes_and_how_to_run_one_folder():
    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert re.search(r"whole suite takes about [^.]*(hour|minutes)", text)
    folder = re.search(r"`\.venv/bin/python -m pytest -q (tests/[a-z0-9_]+)`", text)
    assert folder is not None and (ROOT / folder.group(1)).is_dir()
