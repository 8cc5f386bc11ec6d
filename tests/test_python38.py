"""The library must run on Python 3.8 (JetPack 5), though only 3.11 is installed here:
vermin reads every module and reports anything newer than 3.8."""

from __future__ import annotations

import json
import os
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


def _python38():
    """A Python 3.8 interpreter if this machine has one (the release check's own search:
    GOVERNOR_TEST_PYTHON38, PATH, or pyenv's versions), else None."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "release_check", ROOT / "scripts" / "release_check.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.find_python38()


@pytest.fixture(scope="module")
def py38_governor(tmp_path_factory):
    """``pip install .`` into a Python 3.8 virtual environment (JetPack 5's Python)."""
    exe = _python38()
    if exe is None:
        pytest.skip("no Python 3.8 interpreter on this machine (set GOVERNOR_TEST_PYTHON38)")
    venv = tmp_path_factory.mktemp("py38") / "venv"
    subprocess.run([exe, "-m", "venv", str(venv)], check=True, timeout=120)
    done = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        pytest.fail("pip install . on Python 3.8 failed:\n" + done.stderr[-3000:])
    return venv / "bin"


def _env(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["GOVERNOR_STATE_DIR"] = str(tmp_path / "state")
    env["GOVERNOR_DATA_DIR"] = str(tmp_path / "data")
    return env


def test_on_python_3_8_the_documented_options_exist(py38_governor, tmp_path):
    """typer before Python 3.10 does not evaluate string annotations: without the CLI's fix
    ``--json`` was unknown there ("No such option: --json (Possible options: --json-out)")."""
    out = subprocess.run(
        [str(py38_governor / "governor"), "calibrate", "--device", "sim:nano", "--json"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["device"] == "sim:nano"
    assert doc["ppw_optimal_clock_mhz"] in doc["probe_clocks_mhz"] and doc["method"] == "model"
    bad = subprocess.run(
        [str(py38_governor / "governor"), "calibrate", "--device", "sim:nano", "--max-probes", "2"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert "--max-probes must be a whole number >= 4" in bad.stderr


DEEP = r"""
import sys
from governor.devices.daemon.protocol import ProtocolError, decode_request
from governor.errors import ProfileError
from governor.profiles.store import parse_profile
try:
    parse_profile(b"[" * 100000)
except ProfileError as err:
    print("profile:", err)
try:
    decode_request(b"[" * 4000)
except ProtocolError as err:
    print("request:", err)
"""


def test_on_python_3_8_deep_json_is_refused_not_a_crash(py38_governor, tmp_path):
    """Python 3.8's C JSON decoder aborts the interpreter on deeply nested input ("Fatal
    Python error: Cannot recover from stack overflow"): a corrupt profile or a daemon client's
    request must be refused in one line instead."""
    out = subprocess.run(
        [str(py38_governor / "python"), "-c", DEEP],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith("profile:") and "nested more than" in lines[0]
    assert lines[1].startswith("request:") and "nested more than" in lines[1]
