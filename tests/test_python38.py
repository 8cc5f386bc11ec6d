"""The library must run on Python 3.8 (JetPack 5), though only 3.11 is installed here:
vermin reads every module and reports anything newer than 3.8."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _vermin():
    beside = Path(sys.executable).parent / "vermin"  # a virtual environment not on PATH
    return str(beside) if beside.exists() else shutil.which("vermin")


def test_package_needs_at_most_python_3_8():
    vermin = _vermin()
    if vermin is None:
        pytest.fail("vermin is not installed: pip install -e '.[dev]'")
    proc = subprocess.run(
        [
            vermin,
            "-t=3.8-",
            "--no-tips",
            "--violations",
            "--eval-annotations",
            "--backport",
            "typing_extensions",
            str(ROOT / "governor"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_vermin_catches_a_3_9_feature(tmp_path):
    """The check above can fail: a dict union (3.9) is reported."""
    vermin = _vermin()
    if vermin is None:
        pytest.fail("vermin is not installed")
    (tmp_path / "new.py").write_text("a = {} | {}\nprint('x'.removeprefix('y'))\n")
    proc = subprocess.run(
        [vermin, "-t=3.8-", "--no-tips", "--violations", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0
