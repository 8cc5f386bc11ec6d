"""The jtop backend against the structures jetson-stats really returns (tests/data/jtop/),
served by a stand-in client (jetson-stats is AGPL, needs a Jetson and is not installed here)."""

from __future__ import annotations

import pytest
from hw_trees import (
    build_agx_orin,
    build_agx_xavier,
    build_nano,
    build_thor,
    install_tools,
    write,
)
from jtop_fake import BOARDS, make_module, record

import governor
from governor.devices import jtop as backend
from governor.errors import (
    DeviceNotFoundError,
    GovernorError,
    InvalidRequestError,
    TelemetryError,
)

TREES = {
    "nano-jp4": (build_nano, {}),
    "xavier-jp5": (build_agx_xavier, {}),
    "orin-jp5": (build_agx_orin, {"jetpack": 5}),
    "orin-jp6": (build_agx_orin, {"jetpack": 6}),
    "thor-jp7": (build_thor, {}),
}
# What each board calls its GPU in jetson.gpu, and its GPU sensor in jetson.temperature.
GPU_KEY = {
    "nano-jp4": "gpu",
    "xavier-jp5": "gv11b",
    "orin-jp5": "ga10b",
    "orin-jp6": "gpu",
    "thor-jp7": "Thor",
}
TEMP_KEY = {
    "nano-jp4": "GPU",
    "xavier-jp5": "GPU",
    "orin-jp5": "GPU",
    "orin-jp6": "gpu",
    "thor-jp7": "gpu",
}


@pytest.fixture
def board(tmp_path, monkeypatch):
    """Build ``name``'s sysfs tree (clocks are locked through sysfs) and a fake jtop serving
    its recorded structures; returns the fake module."""

    def make(name, **fake):
        root = tmp_path / "root"
        builder, kwargs = TREES[name]
        info = builder(root, **kwargs)
        monkeypatch.setenv("GOVERNOR_SYSFS_ROOT", str(root))
        bin_dir = install_tools(tmp_path / "bin", node=info["node"])
        monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
        module = make_module(name, **fake)
        monkeypatch.setattr(backend, "_import_jtop", lambda: module)
        module.root, module.node = root, info["node"]
        return module

    return make


@pytest.mark.parametrize("name", BOARDS)
def test_recorded_stats_agree_with_the_recorded_structures(name):
    """The recorded jetson.stats is what jtop derives from the other records."""
    rec = record(name)
    stats = rec["stats"]
    assert stats["GPU"] == rec["gpu"][GPU_KEY[name]]["status"]["load"]
    assert stats["Power TOT"] == rec["power"]["tot"]["power"]
    assert stats["nvp model"] == rec["nvpmodel"]["status"]["model"]["name"]
    for sensor, values in rec["temperature"].items():
        assert stats[f"Temp {sensor}"] == values["temp"]


@pytest.mark.parametrize("name", BOARDS)
def test_gpu_clock_load_and_temperature_by_the_boards_own_keys(board, name):
    board(name)
    rec = record(name)
    entry = rec["gpu"][GPU_KEY[name]]
    with governor.open_device("jtop") as dev:
        caps = dev.capabilities
        assert caps.gpu_clock and caps.utilisation and caps.temperature and caps.power
        s = dev.sample()
    if entry["power_control"] == "nvml":  # 7.x on Thor: cur/max may be MHz, GPC is kHz
        assert s.gpu_clock_mhz == entry["freq"]["GPC"][0] / 1000
        assert entry["freq"]["max"] < 10000  # NVML's MHz, not the clock we report
    else:
        assert s.gpu_clock_mhz == entry["freq"]["cur"] / 1000
    assert s.utilisation_pct == entry["status"]["load"]
    sensor = rec["temperature"][TEMP_KEY[name]]
    assert s.temperature_c == (sensor["temp"] if sensor["online"] else None)


def test_offline_sensors_are_dropped_not_averaged(board):
    """Orin's CV zones read -256 °C (offline) on JetPack 5; Thor's GPU zone does while the GPU
    is rail-gated. Neither may leak into the GPU temperature."""
    board("orin-jp5")
    rec = record("orin-jp5")
    assert [k for k, v in rec["temperature"].items() if not v["online"]] == ["CV0", "CV1", "CV2"]
    with governor.open_device("jtop") as dev:
        assert dev.sample().temperature_c == rec["temperature"]["GPU"]["temp"]


def test_thor_idle_has_no_gpu_temperature_rather_than_another_sensors(board):
    board("thor-jp7")
    rec = record("thor-jp7")
    assert rec["temperature"]["gpu"] == {"temp": -256, "online": False}
    assert "temperature" not in rec["gpu"]["Thor"]["status"]
    with governor.open_device("jtop") as dev:
        assert dev.sample().temperature_c is None


def test_nvml_temperature_is_used_when_the_gpu_zone_is_offline(board):
    module = board("thor-jp7")
    with governor.open_device("jtop") as dev:
        module.clients[0].data["gpu"]["Thor"]["status"]["temperature"] = 44
        assert dev.sample().temperature_c == 44.0


def test_board_input_comes_from_tot_with_its_name(board):
    """jetson-stats moves POM_5V_IN / VDD_IN out of the rails into power['tot']."""
    board("nano-jp4")
    rec = record("nano-jp4")
    tot = rec["power"]["tot"]
    assert tot["name"] == "POM_5V_IN" and "POM_5V_IN" not in rec["power"]["rail"]
    with governor.open_device("jtop") as dev:
        s = dev.sample()
    rail = s.rail("POM_5V_IN")
    assert (rail.power_w, rail.scope) == (tot["power"] / 1000, "board input")
    assert (rail.voltage_v, rail.current_a) == (tot["volt"] / 1000, tot["curr"] / 1000)
    gpu = rec["power"]["rail"]["POM_5V_GPU"]
    assert (s.power_w, s.power_scope) == (gpu["power"] / 1000, "gpu")


@pytest.mark.parametrize("name", ["xavier-jp5", "orin-jp5", "orin-jp6"])
def test_an_unnamed_total_is_not_taken_for_a_measurement(board, name):
    """Without an input rail, tot is jtop's sum of every rail it listed (VIN_SYS_5V0 and
    1V8AO together on AGX Orin, USB-C supplies too): no rail of ours carries it."""
    board(name)
    rec = record(name)
    assert "name" not in rec["power"]["tot"]
    with governor.open_device("jtop") as dev:
        s = dev.sample()
    online = {k: v for k, v in rec["power"]["rail"].items() if v["online"]}
    assert {r.name: r.power_w for r in s.rails} == {k: v["power"] / 1000 for k, v in online.items()}
    assert all(r.scope != "board input" for r in s.rails)


def test_offline_power_supplies_are_dropped(board):
    board("orin-jp6")
    rec = record("orin-jp6")
    offline = [k for k, v in rec["power"]["rail"].items() if not v["online"]]
    assert offline == ["1-00081", "1-00082"]
    with governor.open_device("jtop") as dev:
        s = dev.sample()
    assert not any(s.rail(name) for name in offline)
    gpu = rec["power"]["rail"]["VDD_GPU_SOC"]
    assert (s.power_w, s.power_scope) == (gpu["power"] / 1000, "gpu+soc")


def test_thor_input_rail_from_the_ina238_which_jetson_stats_misses(board):
    module = board("thor-jp7")
    rec = record("thor-jp7")
    assert "VIN" not in rec["power"]["rail"] and "name" not in rec["power"]["tot"]
    base = module.root / "sys/bus/i2c/drivers/ina238/2-0044/hwmon/hwmon3"
    with governor.open_device("jtop") as dev:
        s = dev.sample()
    vin = s.rail("VIN")
    assert vin.scope == "board input"
    assert vin.power_w == int((base / "power1_input").read_text()) / 1e6
    assert (s.power_w, s.power_scope) == (rec["power"]["rail"]["VDD_GPU"]["power"] / 1000, "gpu")


def test_reads_never_wait_for_the_next_update(board):
    module = board("orin-jp6")
    with governor.open_device("jtop") as dev:
        client = module.clients[0]
        before = client.updates
        for _ in range(5):
            dev.sample()
    assert client.ok_calls and all(client.ok_calls)  # ok(spin=True) only
    assert client.updates == before


def test_power_mode_switch_is_confirmed_by_reading_it_back(board):
    module = board("orin-jp6")
    rec = record("orin-jp6")
    assert rec["nvpmodel"]["status"]["model"]["name"] == "MODE_30W"
    with governor.open_device("jtop") as dev:
        assert dev.power_modes() == tuple(rec["nvpmodel"]["init"]["models"])
        assert dev.state().power_mode == "MODE_30W"
        dev.set_power_mode("MAXN")
        assert dev.state().power_mode == "MAXN"
    client = module.clients[0]
    assert client.requests == ["MAXN", "MODE_30W"]  # switched, then restored
    assert client.nvpmodel.name == "MODE_30W" and client.closed


@pytest.mark.parametrize(
    "policy, why", [("drop", "dropped or did not finish"), ("fail", "marks it unavailable")]
)
def test_a_power_mode_that_does_not_take_is_an_error(board, monkeypatch, policy, why):
    board("orin-jp5", mode_policy=policy)
    monkeypatch.setattr(backend, "MODE_TIMEOUT_S", 0.3)
    monkeypatch.setattr(backend, "MODE_POLL_S", 0.01)
    dev = governor.open_device("jtop")
    try:
        with pytest.raises(GovernorError, match=f"MAXN did not take.*MODE_30W.*{why}") as err:
            dev.set_power_mode("MAXN")
        assert "\n" not in str(err.value)
        assert not dev.changed  # nothing to undo
    finally:
        dev.close()


def test_clocks_locked_through_sysfs_and_jetson_clocks_through_jtop(board):
    module = board("orin-jp6")
    node = module.root / module.node.lstrip("/")
    with governor.open_device("jtop") as dev:
        assert dev.identity.kind == "jtop" and dev.identity.model == "agx-orin"
        dev.lock_gpu_clocks(408)
        assert (node / "min_freq").read_text() == "408000000"
        dev.set_jetson_clocks(True)
        assert dev.jetson_clocks_enabled()
    assert (node / "max_freq").read_text().strip() == "612000000"


@pytest.mark.parametrize("name", ["orin-jp5", "orin-jp6"])
def test_clocks_above_the_mode_cap_jtop_reports_are_not_offered(board, name):
    """jtop reports MODE_30W (recorded structures); nvpmodel.conf caps that mode's GPU at
    612 MHz, which is also the devfreq max the recorded jetson.gpu shows. Clocks above it are
    refused until the mode changes."""
    module = board(name)
    rec = record(name)
    recorded_max_mhz = rec["gpu"][GPU_KEY[name]]["freq"]["max"] / 1000.0  # kHz
    node = module.root / module.node.lstrip("/")
    with governor.open_device("jtop") as dev:
        assert dev.devfreq.table_mhz[-1] == 1300.5
        assert dev.supported_clocks_mhz()[-1] == recorded_max_mhz == 612.0
        with pytest.raises(InvalidRequestError, match="306-612 MHz"):
            dev.lock_gpu_clocks(816)
        assert (node / "max_freq").read_text().strip() == "612000000"  # nothing written
        dev.set_power_mode("MODE_50W")
        assert dev.supported_clocks_mhz()[-1] == 816.0
        assert dev.lock_gpu_clocks(816) == (816.0, 816.0)
        assert (node / "min_freq").read_text() == "816000000"
        dev.set_power_mode("MAXN")
        assert dev.supported_clocks_mhz() == dev.devfreq.table_mhz


def test_no_cap_when_nvpmodel_conf_does_not_name_the_mode(board):
    """Thor's recorded mode (120W) is not in its tree's (absent) nvpmodel.conf: the whole
    devfreq table stays on offer."""
    board("thor-jp7")
    with governor.open_device("jtop") as dev:
        assert dev.state().power_mode == "120W"
        assert dev.supported_clocks_mhz() == dev.devfreq.table_mhz


def test_discovery_needs_the_socket(board):
    module = board("nano-jp4")
    assert backend.discover_jtop() == []
    write(module.root, "/run/jtop.sock", "")
    assert backend.discover_jtop() == ["jtop"]


def test_service_lost_mid_run_is_a_telemetry_error(board):
    module = board("xavier-jp5")
    with governor.open_device("jtop") as dev:
        module.clients[0].alive = False
        with pytest.raises(TelemetryError, match="jtop: reading failed: Lost connection"):
            dev.sample()


def test_not_installed_or_not_running(board, monkeypatch):
    board("nano-jp4", running=False)
    with pytest.raises(DeviceNotFoundError, match="systemctl restart jtop") as err:
        governor.open_device("jtop")
    assert "\n" not in str(err.value)

    def missing():
        raise ImportError("No module named 'jtop'")

    monkeypatch.setattr(backend, "_import_jtop", missing)
    assert backend.discover_jtop() == []
    with pytest.raises(DeviceNotFoundError, match=r"governor\[jetson\]"):
        governor.open_device("jtop")
