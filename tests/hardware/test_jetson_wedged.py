"""A Jetson whose power monitor stalls (an INA3221 on a hung I2C bus blocks its hwmon reads):
the rail's file in the fake AGX Orin tree is a FIFO, whose open blocks until a writer comes,
as the real read blocks. A read past its deadline (0.5 s here) marks the board not responding
instead of holding the caller; what the governor set stays journaled and is restored once the
monitor answers again. The devfreq files are read from the tree, never through the library."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from hw_trees import build_agx_orin, install_tools

import governor
from governor.devices.ownership import RestoreError
from governor.devices.reset import reset_all
from governor.errors import DeviceNotRespondingError

OUTER_S = 60.0
RAIL = "/sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon1/in1_input"  # VDD_GPU_SOC volts


@pytest.fixture
def orin(tmp_path, monkeypatch):
    root = tmp_path / "root"
    info = build_agx_orin(root, jetpack=6)
    monkeypatch.setenv("GOVERNOR_SYSFS_ROOT", str(root))
    bin_dir = install_tools(tmp_path / "bin", node=info["node"])
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("GOVERNOR_DEVICE_DEADLINES", "read=0.5,write=0.5,open=0.5,close=0.5")
    info["root"] = root
    info["stall"] = lambda: stall(root / RAIL.lstrip("/"))
    yield info
    _release_all(info)


def stall(path: Path) -> None:
    """Make ``path`` a FIFO: opening it blocks until a writer comes (as a read from a hung
    I2C monitor blocks)."""
    path.unlink()
    os.mkfifo(path)


def _release_all(info) -> None:
    """Let the blocked readers go (a writer: O_RDWR never blocks on a FIFO) and put a
    regular file back for the reads after them."""
    path = info["root"] / RAIL.lstrip("/")
    if path.is_fifo():
        fd = os.open(path, os.O_RDWR)
        regular = path.with_name(path.name + ".new")
        regular.write_text("5000\n")
        os.replace(regular, path)
        os.write(fd, b"5000\n" * 64)
        os.close(fd)


def frequencies(info):
    node = info["root"] / info["node"].lstrip("/")
    return (node / "min_freq").read_text().strip(), (node / "max_freq").read_text().strip()


def test_a_stalled_power_monitor_is_not_responding_and_reset_restores_later(orin):
    original = frequencies(orin)
    dev = governor.open_device("jetson")
    came_back = threading.Event()
    dev.on_responding(lambda responding, why: responding and came_back.set())
    assert dev.sample().power_w is not None
    dev.lock_gpu_clocks(408)
    assert frequencies(orin) == ("408000000", "408000000")
    orin["stall"]()
    with pytest.raises(DeviceNotRespondingError, match="^jetson.*not responding"):
        dev.sample()
    with pytest.raises(DeviceNotRespondingError):  # at once now, not after another deadline
        dev.state()
    with pytest.raises(RestoreError, match="not responding"):
        dev.close()
    assert frequencies(orin) == ("408000000", "408000000")  # journaled for reset
    # the monitor answers again: reset restores the devfreq files from the journal
    _release_all(orin)
    assert came_back.wait(OUTER_S)
    (report,) = reset_all()
    assert report["failed"] == {}, report
    assert frequencies(orin) == original


def test_run_returns_the_jobs_code_while_the_power_monitor_is_stalled(orin, tmp_path):
    import subprocess
    import sys

    rail = orin["root"] / RAIL.lstrip("/")
    job = (
        "import os, sys, time\n"
        f"p = {str(rail)!r}\n"
        "v = open(p).read(); os.unlink(p); os.mkfifo(p)\n"
        "time.sleep(1.5); sys.exit(5)\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "governor", "run", "--device", "jetson", "--policy", "max",
         "--interval-s", "0.05", "--", sys.executable, "-c", job],
        env=dict(os.environ), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 5, done.stderr
    assert "not responding" in done.stderr and "Traceback" not in done.stderr
    _release_all(orin)
