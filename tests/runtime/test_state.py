"""Crash-safe state: journals on disk, layers over 'governor apply', restore on SIGINT and
SIGTERM, and 'governor reset' after kill -9 — on simulated boards and on a fake Jetson tree
whose real files change and come back."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hw_trees import build_agx_orin, install_tools

import governor
from governor.cli import main
from governor.runtime import Governor
from governor.runtime.lock import DeviceLock
from governor.runtime.state import base_path, journal_file, reset_device

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def jetson(tmp_path, monkeypatch):
    """An AGX Orin (JetPack 6, MODE_30W: 306-612 MHz) under a temporary root."""
    root = tmp_path / "root"
    info = build_agx_orin(root)
    monkeypatch.setenv("GOVERNOR_SYSFS_ROOT", str(root))
    bin_dir = install_tools(tmp_path / "bin", node=info["node"])
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    node = root / info["node"].lstrip("/")

    def caps():
        return (int((node / "min_freq").read_text()), int((node / "max_freq").read_text()))

    return caps


def _child(code: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


GOVERN_AND_WAIT = """
    import sys, time
    import governor
    from governor.runtime import Governor
    dev = governor.open_device({uri!r})
    with Governor(dev, {policy!r}, interval_s=0.05, background={background}):
        print("ready", flush=True)
        time.sleep(60)
"""


def test_kill_9_on_a_jetson_tree_then_reset_restores_the_files(jetson):
    assert jetson() == (306000000, 612000000)
    child = _child(
        GOVERN_AND_WAIT.format(
            uri="jetson", policy={"policy": "clock", "clock_mhz": 408}, background=True
        )
    )
    try:
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
        assert jetson() == (408000000, 408000000)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert jetson() == (408000000, 408000000)  # nobody restored it
    journal = json.loads(journal_file("jetson").read_text())
    assert journal["original"] == {"gpu_clocks": [306.0, 612.0]} and journal["pid"] == child.pid
    assert reset_device("jetson") == {"gpu_clocks": [306.0, 612.0]}
    assert jetson() == (306000000, 612000000)
    assert not journal_file("jetson").exists()
    assert reset_device("jetson") == {}  # nothing left: safe to repeat


def test_sigterm_restores_the_jetson_files(jetson):
    child = _child(
        GOVERN_AND_WAIT.format(
            uri="jetson", policy={"policy": "clock", "clock_mhz": 510}, background=True
        )
    )
    try:
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
        assert jetson() == (510000000, 510000000)
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        if child.poll() is None:
            child.kill()
    assert jetson() == (306000000, 612000000)
    assert not journal_file("jetson").exists()


def test_ctrl_c_restores_a_simulated_board():
    child = _child(
        GOVERN_AND_WAIT.format(uri="sim:agx-orin", policy={"policy": "max"}, background=False)
    )
    try:
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
        assert journal_file("sim:agx-orin").exists()
        child.send_signal(signal.SIGINT)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    assert "KeyboardInterrupt" in child.stderr.read()
    assert not journal_file("sim:agx-orin").exists()  # restored, journal cleared


def test_kill_9_on_a_simulated_board_leaves_a_journal_reset_clears_it(capsys):
    child = _child(
        GOVERN_AND_WAIT.format(uri="sim:agx-orin", policy={"policy": "max"}, background=False)
    )
    try:
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    finally:
        if child.poll() is None:
            child.kill()
    assert json.loads(journal_file("sim:agx-orin").read_text())["original"] == {"gpu_clocks": None}
    with pytest.raises(SystemExit) as info:
        main(["reset", "--device", "sim:agx-orin", "--json"])
    assert info.value.code == 0
    assert json.loads(capsys.readouterr().out) == {
        "device": "sim:agx-orin",
        "restored": {"gpu_clocks": None},
    }
    assert not journal_file("sim:agx-orin").exists()


def test_a_governor_over_apply_returns_to_the_applied_state(jetson, capsys):
    with pytest.raises(SystemExit) as info:
        main(["apply", "--device", "jetson", "--clock", "510", "--json"])
    assert info.value.code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["applied"]["gpu_clocks_mhz"] == [510.0, 510.0]
    assert doc["previous"]["gpu_clocks_mhz"] == [306.0, 612.0]
    assert jetson() == (510000000, 510000000)
    dev = governor.open_device("jetson")
    with Governor(dev, {"policy": "clock", "clock_mhz": 408}, background=False):
        assert jetson() == (408000000, 408000000)
        assert base_path("jetson").exists()
    assert jetson() == (510000000, 510000000)  # back to what apply set
    dev.close()  # the apply stays for 'reset'
    assert not base_path("jetson").exists() and journal_file("jetson").exists()
    assert reset_device("jetson") == {"gpu_clocks": [306.0, 612.0]}
    assert jetson() == (306000000, 612000000)


def test_reset_after_a_killed_layered_governor_undoes_both_layers(jetson):
    with governor.open_device("jetson") as dev:
        from governor.runtime.state import use_disk_journal

        use_disk_journal(dev)
        dev.lock_gpu_clocks(510)
        dev.close()
    child = _child(
        GOVERN_AND_WAIT.format(
            uri="jetson", policy={"policy": "clock", "clock_mhz": 408}, background=True
        )
    )
    try:
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    finally:
        if child.poll() is None:
            child.kill()
    assert jetson() == (408000000, 408000000)
    assert reset_device("jetson") == {"gpu_clocks": [306.0, 612.0]}
    assert jetson() == (306000000, 612000000)
    assert not base_path("jetson").exists() and not journal_file("jetson").exists()


def test_reset_refuses_while_a_governor_runs(orin, capsys):
    with Governor(orin, {"policy": "max"}, background=False):
        with pytest.raises(SystemExit) as info:
            main(["reset", "--device", "sim:agx-orin"])
        assert info.value.code == 1
        err = capsys.readouterr().err
        assert "already governed by pid" in err and err.count("\n") == 1
    with DeviceLock("sim:agx-orin"):
        pass
