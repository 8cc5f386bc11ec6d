"""Output to a pipe is not cut at rich's 80 columns (issue 49): a script reading
``governor calibrate | grep`` gets whole lines and whole URIs."""

from __future__ import annotations

import os
import subprocess
import sys


def _piped(*args, columns=None):
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    done = subprocess.run(
        [sys.executable, "-m", "governor", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_piped_calibration_keeps_each_line_whole():
    out = _piped("calibrate", "--device", "sim:xavier-nx")
    (line,) = [ln for ln in out.splitlines() if ln.startswith("PPW-optimal clock")]
    assert line.rstrip().endswith("slower)") and len(line) > 80
    assert "…" not in out


def test_columns_still_sets_the_width_of_a_pipe():
    out = _piped("devices", "--simulated", columns=100)
    assert max(len(ln) for ln in out.splitlines()) <= 100
    wide = _piped("devices", "--simulated")
    assert max(len(ln) for ln in wide.splitlines()) > 100
