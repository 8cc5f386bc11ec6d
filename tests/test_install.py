"""A fresh 'pip install .' finds real GPUs by itself: with NVIDIA's library on the loader's
path (here the fake driver, under the real nvidia-ml-py that the install brings) it lists
both GPUs and calibrates NVML; without it, it says it simulates."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    done = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", str(REPO)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        pytest.fail("pip install . failed:\n" + done.stderr[-3000:])
    return venv / "bin" / "governor"


def _env(base, tmp_path):
    env = {k: v for k, v in base.items() if not k.startswith("PYTHON")}
    env["GOVERNOR_STATE_DIR"] = str(tmp_path / "state")
    env["GOVERNOR_DATA_DIR"] = str(tmp_path / "data")
    return env


def test_with_the_driver_it_lists_both_gpus_and_calibrates_nvml(installed, fake_nvml, tmp_path):
    env = _env(fake_nvml.env(), tmp_path)
    out = subprocess.run(
        [str(installed), "devices", "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    names = [d["name"] for d in json.loads(out.stdout)["devices"] if d["kind"] == "nvml"]
    assert names == ["NVIDIA A100-SXM4-80GB", "Tesla T4"]
    cal = subprocess.run(
        [str(installed), "calibrate", "--load", "true", "--window-s", "0.1", "--max-probes", "4"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "calibrating nvml:0 (NVIDIA A100-SXM4-80GB)" in cal.stderr, cal.stderr
    assert "no GPU found" not in cal.stderr + cal.stdout
    assert fake_nvml.gpu(0).writes > 0  # it really set the A100's clocks
    assert fake_nvml.gpu(0).gpu_locked is None  # and gave them back


def test_without_the_driver_it_says_it_simulates(installed, tmp_path):
    env = _env(os.environ, tmp_path)
    env.pop("LD_LIBRARY_PATH", None)
    env.pop("FAKE_NVML_CONFIG", None)
    cal = subprocess.run(
        [str(installed), "calibrate"], env=env, capture_output=True, text=True, timeout=600
    )
    assert cal.returncode == 0, cal.stderr
    assert "no GPU found: using the simulated board sim:agx-orin" in cal.stderr
