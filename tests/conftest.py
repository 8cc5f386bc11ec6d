"""Shared fixtures. Every test runs with its own state and data directories, and fails if it
leaves a simulated device changed (STYLE: restoring is part of the contract)."""

from __future__ import annotations

import weakref
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
REPLAY = DATA / "replay"


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path_factory, monkeypatch):
    base = tmp_path_factory.mktemp("governor-home")
    monkeypatch.setenv("GOVERNOR_STATE_DIR", str(base / "state"))
    monkeypatch.setenv("GOVERNOR_DATA_DIR", str(base / "data"))
    yield


@pytest.fixture(autouse=True)
def _no_device_left_changed(monkeypatch):
    from governor.devices.sim import device as sim_device

    opened = []
    original_init = sim_device.SimDevice.__init__

    def tracking_init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        opened.append(weakref.ref(self))

    monkeypatch.setattr(sim_device.SimDevice, "__init__", tracking_init)
    yield
    changed = [ref() for ref in opened if ref() is not None and ref().changed]
    for dev in changed:
        dev.restore()
    assert not changed, f"test left simulated device(s) changed: {[d.uri for d in changed]}"


@pytest.fixture(scope="session")
def fake_nvml_lib(tmp_path_factory):
    """The fake ``libnvidia-ml.so.1`` built once per session (skips without a C compiler)."""
    from fakes.nvml import build_library

    return build_library(tmp_path_factory.mktemp("fake-nvml-lib"))


@pytest.fixture
def fake_nvml(fake_nvml_lib, tmp_path, monkeypatch):
    """The fake NVIDIA driver under the real pynvml, with this test's config and state files
    (see tests/fakes/nvml). Two GPUs unless the test calls ``fake_nvml.configure(...)``."""
    from fakes.nvml import FakeNvml

    fake = FakeNvml(fake_nvml_lib, tmp_path / "fake-nvml", monkeypatch)
    yield fake
    fake.close()
