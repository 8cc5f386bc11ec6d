"""Jetson faults under a running governor, on the file tree of an AGX Orin: another program
(``jetson_clocks``, ``nvpmodel``) changes the devfreq files (the governor notices, says so
once, steps back and leaves that program's setting in place), devfreq refuses a write with
EBUSY (said once, tried again each period, the run goes on), and a rail disappears (the
governor holds a safe clock and the restore still works)."""

from __future__ import annotations

import errno
import logging
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hardware"))
from hw_trees import build_agx_orin  # noqa: E402

import governor  # noqa: E402
from governor.devices.jetson import sysfs  # noqa: E402
from governor.paths import state_dir  # noqa: E402
from governor.runtime import Governor  # noqa: E402


@pytest.fixture
def orin(tmp_path, monkeypatch):
    root = tmp_path / "root"
    info = build_agx_orin(root)
    monkeypatch.setenv("GOVERNOR_SYSFS_ROOT", str(root))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no nvpmodel/jetson_clocks of the test's own
    node = root / info["node"].lstrip("/")
    return node


def files(node):
    return tuple((node / name).read_text().strip() for name in ("min_freq", "max_freq"))


def test_an_external_writer_makes_the_governor_step_back_once(orin):
    original = files(orin)
    dev = governor.open_device("jetson")
    gov = Governor(dev, {"policy": "clock", "clock_mhz": 408}, background=False, interval_s=0.01)
    try:
        gov.start()
        gov.step(0.01)
        assert files(orin) == ("408000000", "408000000")
        # jetson_clocks pins the GPU at the top of the power mode's range
        (orin / "max_freq").write_text("612000000\n")
        (orin / "min_freq").write_text("612000000\n")
        for _ in range(3):
            status = gov.step(0.01)
        assert status["overridden_by_other"] == "612-612 MHz"
        said = [n for n in gov.notes if "another program set the GPU clock" in n]
        assert len(said) == 1 and "steps back" in said[0]
        assert files(orin) == ("612000000", "612000000")  # not fought over
        assert status["clock_changes"] == 1
    finally:
        gov.stop()
        dev.close()
    assert files(orin) == ("612000000", "612000000") != original  # left as the other set it
    assert not list(state_dir().glob("journal-*.json"))  # nothing left for reset to undo


def test_a_refused_devfreq_write_is_said_once_and_tried_again(orin, monkeypatch, caplog):
    original = files(orin)
    real = sysfs._write_file
    busy = {"on": False}

    def write(path, text):
        if busy["on"]:
            raise OSError(errno.EBUSY, "Device or resource busy")
        real(path, text)

    monkeypatch.setattr(sysfs, "_write_file", write)
    dev = governor.open_device("jetson")
    gov = Governor(dev, {"policy": "clock", "clock_mhz": 408}, background=False, interval_s=0.01)
    try:
        gov.start()
        assert files(orin) == ("408000000", "408000000")
        busy["on"] = True
        with caplog.at_level(logging.WARNING, logger="governor.runtime"):
            gov.set_policy({"policy": "clock", "clock_mhz": 510})
            for _ in range(4):
                status = gov.step(0.01)
            assert files(orin) == ("408000000", "408000000")  # the driver kept the old clock
            assert len(status["errors"]) == 5  # every try is kept...
            said = [
                r.getMessage() for r in caplog.records if "Device or resource busy" in r.message
            ]
            assert len(said) == 1 and "said once until it works" in said[0]  # ...said once
            busy["on"] = False
            status = gov.step(0.01)
        assert files(orin) == ("510000000", "510000000") and status["clock_mhz"] == 510
        assert any("works again" in r.getMessage() for r in caplog.records)
    finally:
        busy["on"] = False
        gov.stop()
        dev.close()
    assert files(orin) == original


def test_a_rail_that_disappears_holds_a_safe_clock_and_still_restores(orin):
    original = files(orin)
    dev = governor.open_device("jetson")
    gov = Governor(dev, {"policy": "max"}, background=False, interval_s=0.01, fail_limit=2)
    try:
        gov.start()
        gov.step(0.01)
        monitors = orin.parents[6] / "sys/bus/i2c/drivers/ina3221"
        rails = list(monitors.rglob("curr*_input"))
        assert rails, "the Orin tree has rail files"
        for path in rails:
            path.unlink()  # the INA3221 falls off the I2C bus
        for _ in range(3):
            status = gov.step(0.01)
        assert status["safe_hold"] is True and "telemetry failed" in status["safe_hold_reason"]
        assert status["device_lost"] is None  # a sensor gone is not the GPU gone
    finally:
        gov.stop()
        dev.close()
    assert files(orin) == original


def test_a_lower_maximum_alone_is_a_cap_not_another_writer(orin):
    dev = governor.open_device("jetson")
    gov = Governor(dev, {"policy": "max"}, background=False, interval_s=0.01)
    try:
        gov.start()
        low, high = files(orin)
        assert low == high  # held at the top
        capped = str(int(high) // 2)
        (orin / "max_freq").write_text(capped + "\n")  # a thermal cap, read back in max_freq
        status = gov.step(0.01)
        assert status["overridden_by_other"] is None
        assert not [n for n in gov.notes if "another program" in n]
    finally:
        gov.stop()
        dev.close()
