"""The README's commands work as written: the two set-up commands match CI, and every
`governor ...` example and the Python example run."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```(\w*)\n(.*?)```", README, flags=re.S)


def _examples():
    for lang, body in BLOCKS:
        if lang:
            continue
        for line in body.splitlines():
            if line.startswith("governor "):
                yield line.split("  #")[0].strip()


def test_ci_runs_the_readmes_test_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    setup = [body.strip() for lang, body in BLOCKS if "pytest" in body and "venv" in body]
    assert len(setup) == 1 and setup[0] in ci
    main = [
        body.strip() for lang, body in BLOCKS if "governor calibrate" in body and "venv" in body
    ]
    assert len(main) == 1 and "pip install -q ." in main[0]


@pytest.mark.parametrize("command", sorted(set(_examples())))
def test_readme_example_runs(command, tmp_path):
    args = shlex.split(command)[1:]
    args = [str(tmp_path / a) if a.endswith(".png") else a for a in args]
    env = dict(os.environ, COLUMNS="120")
    proc = subprocess.run(
        [sys.executable, "-m", "governor", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr


def test_readme_python_examples_run():
    governed = [body for lang, body in BLOCKS if lang == "python" and "Governor" in body]
    assert governed
    for code in governed:
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stderr
    code = next(body for lang, body in BLOCKS if lang == "python" and "lock_gpu_clocks" in body)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    clock, power, scope = out.stdout.split()
    assert float(clock) == 918.0 and scope == "gpu+soc" and float(power) > 10


def test_readme_energy_window_example_prints_what_it_says():
    code = next(body for lang, body in BLOCKS if lang == "python" and "measure_energy" in body)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    said = code.split("print(", 1)[1].split("# ", 1)[1].strip()
    assert out.stdout.strip() == said
