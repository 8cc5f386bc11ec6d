"""Fixtures for the runtime tests: calibrated profiles of simulated boards (made once per
session, handed to the Governor as documents), and a fresh simulated board per test."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hardware"))  # hw_trees

_PROFILES = {}


def calibrated_profile(board: str):
    """A profile document of ``board`` from a real calibration on the simulated board."""
    if board not in _PROFILES:
        import governor
        from governor.calibrate.loads import make_load
        from governor.calibrate.procedure import DeviceProber, calibrate
        from governor.profiles.profile import build_profile

        with governor.open_device(f"sim:{board}") as dev:
            load = make_load(dev, "builtin")
            result = calibrate(DeviceProber(dev, load))
            _PROFILES[board] = build_profile(dev, result, {"kind": load.kind, "name": load.name})
    return _PROFILES[board]


@pytest.fixture
def profile_of():
    return calibrated_profile


@pytest.fixture
def orin():
    import governor

    dev = governor.open_device("sim:agx-orin")
    yield dev
    dev.restore()


@pytest.fixture
def busy_sim():
    """Opens ``sim:NAME`` boards running their compute load (virtual time); each is stopped
    and closed after the test."""
    import governor

    opened = []

    def open_busy(name: str):
        dev = governor.open_device(f"sim:{name}")
        dev.run_workload("compute")
        opened.append(dev)
        return dev

    yield open_busy
    for dev in opened:
        dev.stop_workload()
        dev.close()
