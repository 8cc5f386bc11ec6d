"""The Jetson memory clock (EMC) on fake debugfs trees with the real paths: the BPMP clock
(``/sys/kernel/debug/bpmp/debug/clk/emc``, as ``jetson_clocks`` writes it) and the upstream
``tegra186-emc`` files (``/sys/kernel/debug/emc``). Every assertion reads the files the kernel
would see, and the journal files in the state directory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cli_helpers import run_cli
from hw_trees import build_agx_orin, install_tools, write

import governor
from governor.errors import GovernorError, InvalidRequestError, UnsupportedError
from governor.paths import state_dir

REPO = Path(__file__).resolve().parents[2]
CLK = "sys/kernel/debug/bpmp/debug/clk/emc"


def _tree(tmp_path, monkeypatch, **kw):
    root = tmp_path / "root"
    info = build_agx_orin(root, **kw)
    monkeypatch.setenv("GOVERNOR_SYSFS_ROOT", str(root))
    bin_dir = install_tools(tmp_path / "bin", node=info["node"])
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    return root


@pytest.fixture
def orin(tmp_path, monkeypatch):
    """An AGX Orin with the BPMP's EMC clock in debugfs; returns a reader of (locked, rate Hz)."""
    root = _tree(tmp_path, monkeypatch)

    def emc():
        clk = root / CLK
        return (
            int((clk / "mrq_rate_locked").read_text()),
            int((clk / "rate").read_text()),
        )

    emc.root = root
    return emc


def journals():
    directory = state_dir()
    if not directory.exists():
        return []
    return [json.loads(p.read_text()) for p in sorted(directory.glob("journal-*.json"))]


def test_the_bpmp_emc_table_and_rate_are_read(orin):
    with governor.open_device("jetson") as dev:
        assert dev.capabilities.mem_clock and dev.capabilities.lock_mem_clock
        assert dev.supported_mem_clocks_mhz() == (204.0, 665.6, 2133.0, 3199.0)
        assert dev.sample().mem_clock_mhz == 3199.0
        assert dev.state().mem_clock_mhz is None  # BPMP scales it: nothing locked
        assert dev.control_notes() == []


def test_a_lock_is_journaled_first_then_written_as_jetson_clocks_does(orin):
    with governor.open_device("jetson") as dev:
        assert dev.lock_mem_clock(2000) == 2133.0  # snapped to the table
        assert orin() == (1, 2133000000)
        (doc,) = journals()
        assert doc["layers"][-1]["original"] == {"mem_clock": None}  # unlocked before
        assert dev.state().mem_clock_mhz == 2133.0
        assert dev.sample().mem_clock_mhz == 2133.0
    assert orin() == (0, 2133000000)  # handed back to BPMP's scaling
    assert journals() == []


def test_another_process_lock_is_put_back_not_undone(orin):
    clk = orin.root / CLK
    (clk / "mrq_rate_locked").write_text("1\n")
    (clk / "rate").write_text("665600000\n")
    with governor.open_device("jetson") as dev:
        assert dev.state().mem_clock_mhz == 665.6
        dev.lock_mem_clock(3199)
        assert orin() == (1, 3199000000)
    assert orin() == (1, 665600000)  # their lock, at their rate


def test_apply_mem_clock_snaps_says_so_and_reset_restores(orin, capsys):
    code, out, err = run_cli(capsys, "apply", "--device", "jetson", "--mem-clock", "700", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["applied"]["mem_clock_mhz"] == 665.6
    assert "snapped to 665.6 MHz" in err and "snapped to 665.6 MHz" in doc["notes"][0]
    assert orin() == (1, 665600000)  # outlives the command
    code, _, err = run_cli(capsys, "reset", "--device", "jetson")
    assert code == 0, err
    assert orin()[0] == 0 and journals() == []


def test_a_mem_clock_outside_the_table_is_refused_and_nothing_changes(orin, capsys):
    code, _, err = run_cli(capsys, "apply", "--device", "jetson", "--mem-clock", "5000")
    assert code == 1 and "outside the range 204-3199 MHz" in err and err.count("\n") == 1
    assert orin() == (0, 3199000000) and journals() == []


def test_devices_json_lists_the_memory_clocks(orin, capsys):
    code, out, _ = run_cli(capsys, "devices", "--json", "--device", "jetson")
    assert code == 0
    (row,) = json.loads(out)["devices"]
    assert row["supported_mem_clocks_mhz"] == [204.0, 665.6, 2133.0, 3199.0]
    assert row["capabilities"]["lock_mem_clock"] is True


def test_without_debugfs_the_core_clock_is_governed_alone(tmp_path, monkeypatch, capsys):
    root = _tree(tmp_path, monkeypatch, emc=False)
    assert not (root / "sys/kernel/debug").exists()
    with governor.open_device("jetson") as dev:
        assert not dev.capabilities.lock_mem_clock and dev.supported_mem_clocks_mhz() == ()
        (note,) = dev.control_notes()
        assert "no debugfs at /sys/kernel/debug" in note and "GPU clock alone" in note
        with pytest.raises(UnsupportedError):
            dev.lock_mem_clock(2133)
        dev.lock_gpu_clocks(510)  # the core clock still works
    code, _, err = run_cli(capsys, "apply", "--device", "jetson", "--mem-clock", "2133")
    assert code == 1 and "cannot lock its memory clock: no debugfs" in err
    assert err.count("\n") == 1


def test_one_emc_rate_is_not_a_knob(tmp_path, monkeypatch):
    root = _tree(tmp_path, monkeypatch, emc=False)
    clk = "/sys/kernel/debug/bpmp/debug/clk/emc"
    for name, value in (("rate", 2133000000), ("min_rate", 2133000000), ("max_rate", 2133000000)):
        write(root, f"{clk}/{name}", f"{value}\n")
    write(root, f"{clk}/mrq_rate_locked", "0\n")
    with governor.open_device("jetson") as dev:
        assert dev.capabilities.mem_clock and not dev.capabilities.lock_mem_clock
        assert dev.sample().mem_clock_mhz == 2133.0
        assert dev.control_notes() == [
            "the board offers one memory clock: governing the GPU clock alone"
        ]


def test_the_upstream_tegra186_emc_files(tmp_path, monkeypatch):
    root = _tree(tmp_path, monkeypatch, emc=False)
    emc = root / "sys/kernel/debug/emc"
    write(
        root, "/sys/kernel/debug/emc/available_rates", "204000000 665600000 2133000000 3199000000\n"
    )
    write(root, "/sys/kernel/debug/emc/min_rate", "204000000\n")
    write(root, "/sys/kernel/debug/emc/max_rate", "3199000000\n")

    def caps():
        return (int((emc / "min_rate").read_text()), int((emc / "max_rate").read_text()))

    with governor.open_device("jetson") as dev:
        assert dev.supported_mem_clocks_mhz() == (204.0, 665.6, 2133.0, 3199.0)
        dev.lock_mem_clock(665.6)
        assert caps() == (665600000, 665600000)
        assert dev.state().mem_clock_mhz == 665.6
        dev.lock_mem_clock(3199)  # up: max first, so min never passes max
        assert caps() == (3199000000, 3199000000)
    assert caps() == (204000000, 3199000000)


def test_a_bad_value_in_the_table_file_is_skipped(tmp_path, monkeypatch):
    root = _tree(tmp_path, monkeypatch)
    write(root, "/sys/kernel/debug/bpmp/debug/emc/possible_rates", "204000 junk 3199000\n")
    with governor.open_device("jetson") as dev:
        assert dev.supported_mem_clocks_mhz() == (204.0, 3199.0)
    with pytest.raises(InvalidRequestError):
        with governor.open_device("jetson") as dev:
            dev.lock_mem_clock(9000)


HOLD = """
    import time
    import governor
    from governor.runtime import Governor
    with governor.open_device("jetson") as dev:  # as 'governor run --mem-clock' holds it
        dev.lock_mem_clock(665.6)
        with Governor(dev, {"policy": "clock", "clock_mhz": 408}, interval_s=0.05):
            print("ready", flush=True)
            time.sleep(120)
"""


def _hold() -> subprocess.Popen:
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(HOLD)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    assert child.stdout.readline().strip() == "ready", child.stderr.read()
    return child


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_restores_the_memory_clock(orin, signum):
    child = _hold()
    try:
        assert orin() == (1, 665600000)
        child.send_signal(signum)
        child.wait(timeout=30)
        assert orin()[0] == 0 and journals() == []
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_kill_9_then_reset_restores_the_memory_clock(orin, capsys):
    clk = orin.root / CLK
    (clk / "mrq_rate_locked").write_text("1\n")  # someone else's lock, before the governor
    (clk / "rate").write_text("2133000000\n")
    child = _hold()
    try:
        assert orin() == (1, 665600000)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        assert orin() == (1, 665600000)  # nobody put it back yet
        code, _, err = run_cli(capsys, "reset", "--device", "jetson")
        assert code == 0, err
        assert orin() == (1, 2133000000) and journals() == []  # their lock, not undone
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def _run_cli_child(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "governor", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )


def _wait_locked(orin, child: subprocess.Popen) -> None:
    import time

    deadline = time.monotonic() + 60
    while orin() != (1, 665600000):
        assert child.poll() is None, child.stderr.read()
        assert time.monotonic() < deadline, "governor run never locked the memory clock"
        time.sleep(0.05)


RUN = ("run", "--device", "jetson", "--policy", "clock", "--clock", "408", "--mem-clock", "700")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_governor_run_mem_clock_is_restored_after_a_signal(orin, signum, tmp_path):
    import time

    started = tmp_path / "started"  # the job runs: run forwards signals to it from now on
    child = _run_cli_child(*RUN, "--", "sh", "-c", f"touch {started}; exec sleep 60")
    try:
        _wait_locked(orin, child)
        deadline = time.monotonic() + 60
        while not started.exists():
            assert child.poll() is None and time.monotonic() < deadline, child.stderr.read()
            time.sleep(0.05)
        child.send_signal(signum)
        child.wait(timeout=60)
        assert orin()[0] == 0 and journals() == []
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_governor_run_mem_clock_after_kill_9_is_restored_by_reset(orin, capsys):
    child = _run_cli_child(*RUN, "--", "sleep", "60")
    try:
        _wait_locked(orin, child)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        assert orin() == (1, 665600000)
        code, _, err = run_cli(capsys, "reset", "--device", "jetson")
        assert code == 0, err
        assert orin()[0] == 0 and journals() == []
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_governor_run_pins_the_memory_clock_for_the_job_and_reports_it(orin, tmp_path):
    seen, report = tmp_path / "seen", tmp_path / "report.json"
    clk = orin.root / CLK
    script = f"cat {clk}/mrq_rate_locked > {seen}; echo >> {seen}; cat {clk}/rate >> {seen}"
    done = subprocess.run(
        [sys.executable, "-m", "governor", *RUN, "--json-out", str(report), "--"]
        + ["sh", "-c", script],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "snapped to 665.6 MHz" in done.stderr
    assert seen.read_text().split() == ["1", "665600000"]  # what the job ran under
    assert json.loads(report.read_text())["mem_clock_mhz"] == 665.6
    assert orin()[0] == 0 and journals() == []  # and handed back after it


def test_a_rate_the_bpmp_drops_is_an_error_and_leaves_nothing_behind(orin, monkeypatch):
    import governor.devices.jetson.sysfs as sysfs

    real = sysfs._write_file

    def bpmp(path, text):  # BPMP ignores a rate whose timing table it did not load
        if path.name == "rate" and text == "3199000000":
            return
        real(path, text)

    clk = orin.root / CLK
    (clk / "rate").write_text("2133000000\n")
    monkeypatch.setattr(sysfs, "_write_file", bpmp)
    with governor.open_device("jetson") as dev:
        with pytest.raises(GovernorError, match="kept the memory clock at 2133 MHz"):
            dev.lock_mem_clock(3199)
        assert orin() == (0, 2133000000) and journals() == []  # unlocked again, no entry
        dev.lock_mem_clock(665.6)  # a loaded rate still works
        assert orin() == (1, 665600000)
    assert orin()[0] == 0
