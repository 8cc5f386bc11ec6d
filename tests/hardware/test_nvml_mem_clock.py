"""The memory clock over NVML, through the real nvidia-ml-py over the fake C driver (a T4
with two memory clocks, 405 and 5001 MHz; an A100 with one): the table, apply --mem-clock,
reset, and a governor killed with kill -9 undone by reset. What the driver did is read from
the fake's state file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from cli_helpers import run_cli
from fakes.nvml import T4

import governor.devices.nvml as backend
from governor.paths import state_dir

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def nvml(fake_nvml, monkeypatch):
    monkeypatch.setattr(backend, "_is_root", lambda: True)
    return fake_nvml


def journals():
    directory = state_dir()
    if not directory.exists():
        return []
    return [json.loads(p.read_text()) for p in sorted(directory.glob("journal-*.json"))]


def test_devices_lists_the_memory_clocks_of_a_gpu_with_several(nvml, capsys):
    code, out, err = run_cli(capsys, "devices", "--json")
    assert code == 0, err
    rows = {r["uri"]: r for r in json.loads(out)["devices"]}
    assert rows["nvml:1"]["supported_mem_clocks_mhz"] == [405.0, 5001.0]
    assert rows["nvml:1"]["capabilities"]["lock_mem_clock"] is True
    assert rows["nvml:0"]["supported_mem_clocks_mhz"] == []  # the A100 has one: no knob
    assert rows["nvml:0"]["capabilities"]["lock_mem_clock"] is False


def test_apply_mem_clock_locks_the_driver_and_reset_unlocks_it(nvml, capsys):
    code, out, err = run_cli(capsys, "apply", "--device", "nvml:1", "--mem-clock", "500", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["applied"] == {"mem_clock_mhz": 405.0} and "snapped to 405 MHz" in err
    assert nvml.gpu(1).mem_locked == (405, 405)
    code, _, err = run_cli(capsys, "reset", "--device", "nvml:" + T4["uuid"])
    assert code == 0, err
    assert nvml.gpu(1).mem_locked is None and journals() == []


def test_a_gpu_with_one_memory_clock_refuses_in_one_line(nvml, capsys):
    code, _, err = run_cli(capsys, "apply", "--device", "nvml:0", "--mem-clock", "1593")
    assert code == 1 and "cannot lock its memory clock" in err and err.count("\n") == 1
    assert nvml.gpu(0).mem_locked is None and journals() == []


HOLD = """
    import time
    import governor
    with governor.open_device("nvml:1") as dev:
        dev.lock_mem_clock(405)
        print("ready", flush=True)
        time.sleep(120)
"""


def _hold(nvml) -> subprocess.Popen:
    env = nvml.env()
    env["PYTHONPATH"] = str(REPO)  # the child is root as this process is, or it could not lock
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(HOLD)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = child.stdout.readline().strip()
    assert line == "ready", child.stderr.read()
    return child


def test_kill_9_then_reset_unlocks_the_memory_clock(nvml, capsys):
    child = _hold(nvml)
    try:
        deadline = time.monotonic() + 30
        while nvml.gpu(1).mem_locked != (405, 405):
            assert time.monotonic() < deadline, "the child never locked the memory clock"
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        assert nvml.gpu(1).mem_locked == (405, 405)  # the driver keeps the dead lock
        code, _, err = run_cli(capsys, "reset", "--device", "nvml:1")
        assert code == 0, err
        assert nvml.gpu(1).mem_locked is None and journals() == []
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
