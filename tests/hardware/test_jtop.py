"""The jtop backend against a fake jtop module (jetson-stats is AGPL and not installed here)."""

from __future__ import annotations

import types

import pytest
from hw_trees import build_agx_orin, install_tools, write

import governor
from governor.devices import jtop as backend
from governor.errors import DeviceNotFoundError, TelemetryError


class JtopException(Exception):
    pass


class _Model:
    def __init__(self, name, models):
        self.name, self.models = name, models


def make_fake_jtop(*, running=True):
    """A module with ``jtop`` (the client class) and ``JtopException``, as in jetson-stats 4."""
    mod = types.ModuleType("fake_jtop")
    mod.JtopException = JtopException
    mod.clients = []

    class jtop:  # noqa: N801 - the real class name
        def __init__(self, interval=1.0):
            self._mode = "MODE_30W"
            self._clocks = False
            self.alive = True
            self.closed = False
            mod.clients.append(self)

        def start(self):
            if not running:
                raise JtopException(
                    "The jtop.service is not active. Please run: sudo systemctl restart jtop.service"
                )

        def close(self):
            self.closed = True

        def ok(self):
            if not self.alive:
                raise JtopException("jtop service lost")
            return True

        @property
        def power(self):
            return {
                "rail": {
                    "VDD_GPU_SOC": {
                        "online": True,
                        "volt": 5000,
                        "curr": 641,
                        "power": 3205,
                        "avg": 3100,
                    },
                    "VDD_CPU_CV": {
                        "online": True,
                        "volt": 5000,
                        "curr": 881,
                        "power": 4405,
                        "avg": 4400,
                    },
                    "VIN_SYS_5V0": {
                        "online": True,
                        "volt": 4992,
                        "curr": 955,
                        "power": 4767,
                        "avg": 4700,
                    },
                },
                "tot": {"power": 12377},
            }

        @property
        def gpu(self):
            return {
                "gpu": {
                    "type": "integrated",
                    "status": {"load": 42.0},
                    "freq": {"cur": 612000, "min": 306000, "max": 612000},
                }
            }

        @property
        def temperature(self):
            return {"cpu": {"temp": 50.1, "online": True}, "gpu": {"temp": 47.8, "online": True}}

        @property
        def nvpmodel(self):
            return _Model(self._mode, ["MAXN", "MODE_15W", "MODE_30W", "MODE_50W"])

        @nvpmodel.setter
        def nvpmodel(self, value):
            self._mode = value

        @property
        def jetson_clocks(self):
            return self._clocks

        @jetson_clocks.setter
        def jetson_clocks(self, value):
            self._clocks = value

    mod.jtop = jtop
    return mod


@pytest.fixture
def orin(tmp_path, monkeypatch):
    root = tmp_path / "root"
    info = build_agx_orin(root)
    monkeypatch.setenv("GOVERNOR_SYSFS_ROOT", str(root))
    monkeypatch.setenv(
        "PATH", f"{install_tools(tmp_path / 'bin', node=info['node'])}:/usr/bin:/bin"
    )
    info["root"] = root
    return info


def test_telemetry_modes_and_clocks(orin, monkeypatch):
    fake = make_fake_jtop()
    monkeypatch.setattr(backend, "_import_jtop", lambda: fake)
    assert backend.discover_jtop() == []  # no socket
    write(orin["root"], "/run/jtop.sock", "")
    assert backend.discover_jtop() == ["jtop"]
    with governor.open_device("jtop") as dev:
        assert dev.identity.kind == "jtop" and dev.identity.model == "agx-orin"
        s = dev.sample()
        assert (s.power_w, s.power_scope) == (3.205, "gpu+soc")
        assert s.rail("VDD_GPU_SOC").voltage_v == 5.0 and s.rail("VDD_GPU_SOC").current_a == 0.641
        assert (s.gpu_clock_mhz, s.utilisation_pct, s.temperature_c) == (612.0, 42.0, 47.8)
        assert dev.power_modes() == ("MAXN", "MODE_15W", "MODE_30W", "MODE_50W")
        dev.set_power_mode("MAXN")
        assert fake.clients[0]._mode == "MAXN"
        dev.lock_gpu_clocks(918)  # through sysfs
        node = orin["root"] / orin["node"].lstrip("/")
        assert (node / "min_freq").read_text() == "918000000"
        dev.set_jetson_clocks(True)
        assert dev.jetson_clocks_enabled()
    assert fake.clients[0]._mode == "MODE_30W"
    assert (node / "max_freq").read_text().strip() == "612000000"
    assert fake.clients[0].closed


def test_service_lost_mid_run_is_a_telemetry_error(orin, monkeypatch):
    fake = make_fake_jtop()
    monkeypatch.setattr(backend, "_import_jtop", lambda: fake)
    with governor.open_device("jtop") as dev:
        fake.clients[0].alive = False
        with pytest.raises(TelemetryError, match="jtop"):
            dev.sample()


def test_not_installed_or_not_running(orin, monkeypatch):
    def missing():
        raise ImportError("No module named 'jtop'")

    monkeypatch.setattr(backend, "_import_jtop", missing)
    assert backend.discover_jtop() == []
    with pytest.raises(DeviceNotFoundError, match=r"governor\[jetson\]"):
        governor.open_device("jtop")
    monkeypatch.setattr(backend, "_import_jtop", lambda: make_fake_jtop(running=False))
    with pytest.raises(DeviceNotFoundError, match="systemctl restart jtop"):
        governor.open_device("jtop")
