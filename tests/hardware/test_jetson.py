"""The jetson backend end to end on real file trees of a Nano, an AGX Xavier and an AGX Orin."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

import pytest
from hw_trees import (
    build_agx_orin,
    build_agx_xavier,
    build_nano,
    build_thor,
    install_tools,
    write,
)

import governor
from governor.devices.jetson import device as jetson_device
from governor.devices.jetson import sysfs
from governor.devices.jetson.tools import Nvpmodel
from governor.devices.registry import discover_hardware
from governor.errors import (
    DeviceNotFoundError,
    DevicePermissionError,
    GovernorError,
    InvalidRequestError,
    TelemetryError,
)

NVPMODEL_DATA = Path(__file__).resolve().parents[1] / "data" / "nvpmodel"


@pytest.fixture
def board(tmp_path, monkeypatch):
    """Build a board under a fresh root and point GOVERNOR_SYSFS_ROOT and PATH at it."""

    def make(builder, **kwargs):
        root = tmp_path / "root"
        info = builder(root, **kwargs)
        monkeypatch.setenv("GOVERNOR_SYSFS_ROOT", str(root))
        bin_dir = install_tools(tmp_path / "bin", node=info["node"])
        monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
        info["root"] = root
        info["bin"] = bin_dir
        return info

    return make


def _file(info, name):
    return (info["root"] / info["node"].lstrip("/") / name).read_text().strip()


@pytest.fixture
def writes(monkeypatch):
    """Record every sysfs write (file name, value) in order, then perform it."""
    log = []
    real = sysfs._write_file

    def recording(path, text):
        log.append((Path(path).name, text))
        real(path, text)

    monkeypatch.setattr(sysfs, "_write_file", recording)
    return log


def test_nano_jetpack4_rails_clocks_and_identity(board):
    board(build_nano)
    assert discover_hardware()[:1] == ["jetson"]
    with governor.open_device("jetson") as dev:
        assert dev.identity.model == "nano"
        assert dev.identity.l4t_version == "32.7.1"
        assert dev.supported_clocks_mhz() == (
            76.8,
            153.6,
            230.4,
            307.2,
            384.0,
            460.8,
            537.6,
            614.4,
            691.2,
            768.0,
            844.8,
            921.6,
        )
        assert dev.rail_source.layout == "iio"
        s = dev.sample()
        rails = {r.name: (r.power_w, r.scope) for r in s.rails}
        assert rails == {
            "POM_5V_IN": (1.022, "board input"),
            "POM_5V_GPU": (0.6, "gpu"),
            "POM_5V_CPU": (0.204, "cpu"),
        }
        assert (s.power_w, s.power_scope) == (0.6, "gpu")
        assert s.gpu_clock_mhz == 76.8
        assert s.temperature_c == 36.0
        assert s.utilisation_pct == pytest.approx(12.3)
        assert s.rail("POM_5V_GPU").voltage_v == 5.0 and s.rail("POM_5V_GPU").current_a == 0.12


def test_agx_xavier_two_monitors_and_gpu_rail(board):
    board(build_agx_xavier)
    with governor.open_device("jetson") as dev:
        assert dev.identity.model == "agx-xavier"
        assert dev.identity.l4t_version == "32.6.1"
        assert dev.supported_clocks_mhz()[-1] == 1377.0
        s = dev.sample()
        scopes = {r.name: r.scope for r in s.rails}
        assert scopes == {
            "GPU": "gpu",
            "CPU": "cpu",
            "SOC": "soc",
            "CV": "cv",
            "VDDRQ": "memory",
            "SYS5V": "system",
        }
        assert (s.power_w, s.power_scope) == (1.5, "gpu")
        assert s.temperature_c == 37.5
        assert s.utilisation_pct == 0.0
        assert s.gpu_clock_mhz == 318.75


@pytest.mark.parametrize("jetpack", [5, 6])
def test_agx_orin_hwmon_rails_computed_from_volts_and_amps(board, jetpack):
    board(build_agx_orin, jetpack=jetpack)
    with governor.open_device("jetson") as dev:
        assert dev.identity.model == "agx-orin"
        assert dev.identity.l4t_version == ("36.3.0" if jetpack == 6 else "35.4.1")
        assert dev.devfreq.name == ("17000000.gpu" if jetpack == 6 else "17000000.ga10b")
        assert dev.rail_source.layout == "hwmon"
        s = dev.sample()
        rails = {r.name: r for r in s.rails}
        assert sorted(rails) == [
            "VDDQ_VDD2_1V8AO",
            "VDD_CPU_CV",
            "VDD_GPU_SOC",
            "VIN_SYS_5V0",
        ]  # no NC, no in7
        assert rails["VDD_GPU_SOC"].power_w == pytest.approx(5.0 * 0.641)
        assert rails["VIN_SYS_5V0"].power_w == pytest.approx(4.992 * 0.955)
        assert rails["VDD_GPU_SOC"].scope == "gpu+soc" and rails["VDD_CPU_CV"].scope == "cpu+cv"
        assert rails["VIN_SYS_5V0"].scope == "system" and rails["VDDQ_VDD2_1V8AO"].scope == "memory"
        assert s.power_scope == "gpu+soc" and s.power_w == pytest.approx(3.205)
        assert s.utilisation_pct == 62.5
        assert s.temperature_c == pytest.approx(47.812)
        assert dev.power_modes() == ("MAXN", "MODE_15W", "MODE_30W", "MODE_50W")


def test_lock_raises_max_first_going_up_and_restores_files(board, writes):
    info = board(build_agx_orin)
    original = (_file(info, "min_freq"), _file(info, "max_freq"))
    with governor.open_device("jetson") as dev:
        assert dev.state().gpu_clocks_mhz == (306.0, 612.0)
        dev.lock_gpu_clocks(408)
        assert [w[0] for w in writes] == ["min_freq", "max_freq"]  # going down: min first
        assert (_file(info, "min_freq"), _file(info, "max_freq")) == ("408000000", "408000000")
        del writes[:]
        assert dev.lock_gpu_clocks(612) == (612.0, 612.0)
        assert [w[0] for w in writes] == ["max_freq", "min_freq"]  # going up: max before min
        assert (_file(info, "min_freq"), _file(info, "max_freq")) == ("612000000", "612000000")
    assert (_file(info, "min_freq"), _file(info, "max_freq")) == original
    dev.restore()  # again: harmless
    assert (_file(info, "min_freq"), _file(info, "max_freq")) == original


def test_reset_opens_the_whole_table_and_journal_is_on_disk(board, tmp_path):
    info = board(build_nano)
    with governor.open_device("jetson") as dev:
        dev.lock_gpu_clocks(460.8)
        assert len(list((tmp_path / "state").glob("journal-*.json"))) == 1
        dev.reset_gpu_clocks()
        assert (_file(info, "min_freq"), _file(info, "max_freq")) == ("76800000", "921600000")
    assert not list((tmp_path / "state").glob("journal-*.json"))


def test_write_refused_with_eacces_is_a_permission_error(board, monkeypatch):
    info = board(build_nano)

    def refuse(path, text):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(sysfs, "_write_file", refuse)
    monkeypatch.setattr(sysfs, "can_write", lambda path: False)
    dev = governor.open_device("jetson")
    try:
        assert not dev.control_permitted()
        assert "root" in dev.control_reason()
        with pytest.raises(DevicePermissionError) as err:
            dev.lock_gpu_clocks(614.4)
        assert "sudo" in str(err.value) and "/sys/class/devfreq/57000000.gpu/min_freq" in str(
            err.value
        )
        assert str(info["root"]) not in str(err.value)
        assert not dev.changed  # the refused write left nothing to undo
    finally:
        dev.close()
    assert _file(info, "max_freq") == "921600000"


def test_a_directory_where_a_file_should_be_is_a_clear_error(board):
    info = board(build_nano)
    node = info["root"] / info["node"].lstrip("/")
    (node / "available_frequencies").unlink()
    (node / "available_frequencies").mkdir()
    with pytest.raises(TelemetryError, match="available_frequencies: Is a directory"):
        governor.open_device("jetson")
    (node / "available_frequencies").rmdir()
    write(info["root"], info["node"] + "/available_frequencies", "76800000 lots\n")
    with pytest.raises(TelemetryError, match="available_frequencies"):
        governor.open_device("jetson")


def test_power_mode_through_nvpmodel_and_restore(board):
    info = board(build_agx_orin)
    with governor.open_device("jetson") as dev:
        assert dev.state().power_mode == "MODE_30W"
        dev.set_power_mode("MAXN")
        assert dev.state().power_mode == "MAXN"
    calls = (info["bin"] / "nvpmodel.log").read_text().splitlines()
    assert [c for c in calls if c.startswith("-m")] == ["-m 0", "-m 2"]  # switched, restored
    assert calls[calls.index("-m 0") + 1] == "-q"  # each switch is read back
    assert "-p --verbose" in calls and "-q --verbose" not in calls


def test_nvpmodel_refusal_is_a_permission_error(board, monkeypatch):
    board(build_agx_orin)
    monkeypatch.setenv("FAKE_NVPMODEL_DENY", "1")
    dev = governor.open_device("jetson")
    try:
        with pytest.raises(DevicePermissionError, match="root"):
            dev.set_power_mode("MAXN")
        assert not dev.changed
    finally:
        dev.close()


def test_jetson_clocks_store_and_restore(board, tmp_path):
    info = board(build_agx_orin, jetpack=5)
    saved = tmp_path / "clocks.conf"
    with governor.open_device("jetson") as dev:
        dev.store_clocks(saved)
        write(info["root"], info["node"] + "/max_freq", "1300500000")
        dev.restore_clocks(saved)
    assert _file(info, "max_freq") == "612000000"


def test_no_jetson_here(monkeypatch, tmp_path):
    monkeypatch.setenv("GOVERNOR_SYSFS_ROOT", str(tmp_path))
    assert jetson_device.discover_jetson() == []
    with pytest.raises(DeviceNotFoundError, match="GOVERNOR_SYSFS_ROOT"):
        governor.open_device("jetson")


def test_clocks_above_the_power_modes_gpu_cap_are_not_offered(board):
    """MODE_30W holds an AGX Orin's GPU at 612 MHz (nvpmodel.conf GPU MAX_FREQ); devfreq lists
    clocks up to 1300.5 MHz all the same. Offering them would make calibration probe clocks
    the board cannot run."""
    board(build_agx_orin)
    with governor.open_device("jetson") as dev:
        assert dev.supported_clocks_mhz()[-1] == 612.0
        with pytest.raises(InvalidRequestError, match="outside the range 306-612 MHz"):
            dev.lock_gpu_clocks(1300.5)
        dev.set_power_mode("MAXN")
        assert dev.supported_clocks_mhz()[-1] == 1300.5
        assert dev.lock_gpu_clocks(1300.5) == (1300.5, 1300.5)


@pytest.mark.parametrize("label", [None, "VIN"])
def test_thor_ina238_input_rail_next_to_the_ina3221(board, label):
    """Thor's board input sits on an INA238 (power1_input in uW), not on the INA3221."""
    info = board(build_thor, vin_label=label)
    base = info["root"] / "sys/bus/i2c/drivers/ina238/2-0044/hwmon/hwmon3"
    uw = int((base / "power1_input").read_text())
    with governor.open_device("jetson") as dev:
        assert dev.identity.model == "thor" and dev.identity.l4t_version == "38.2.0"
        assert dev.devfreq.name == "gpu-gpc-0"
        assert dev.supported_clocks_mhz()[-1] == 1575.0
        s = dev.sample()
        vin = s.rail("VIN")
        assert vin.scope == "board input"
        assert vin.power_w == pytest.approx(uw / 1e6)
        assert vin.voltage_v == pytest.approx(int((base / "in1_input").read_text()) / 1000)
        assert vin.current_a == pytest.approx(int((base / "curr1_input").read_text()) / 1000)
        assert {r.name: r.scope for r in s.rails} == {
            "VDD_GPU": "gpu",
            "VDD_CPU_SOC_MSS": "soc",
            "VIN_SYS_5V0": "system",
            "VIN": "board input",
        }
        assert (s.power_w, s.power_scope) == (0.0, "gpu")  # rail-gated GPU draws nothing
        assert s.temperature_c is None  # gpu-thermal cannot be read while the GPU is gated
        assert s.utilisation_pct is None  # Thor's devfreq node has no load file
        assert s.gpu_clock_mhz == 675.0


def _recorded_names(name):
    """Mode names of a recorded nvpmodel output, read without the code under test."""
    text = (NVPMODEL_DATA / name).read_text()
    return [line.split("NAME=")[1].strip() for line in text.splitlines() if "POWER_MODEL:" in line]


def test_modes_are_listed_by_nvpmodel_parse_verbose(board, monkeypatch):
    """Real Xavier NX output of nvpmodel -p --verbose; with no nvpmodel.conf to fall back on."""
    info = board(build_agx_orin)
    (info["root"] / "etc/nvpmodel.conf").unlink()
    recorded = NVPMODEL_DATA / "xavier-nx-jp5-p-verbose-power-models.txt"
    monkeypatch.setenv("FAKE_NVPMODEL_PARSE", str(recorded))
    nvp = Nvpmodel(shutil.which("nvpmodel"), sysfs.SysfsRoot())
    names = _recorded_names(recorded.name)
    assert len(names) == 9
    assert nvp.modes() == list(enumerate(names))


def test_query_verbose_cannot_list_the_modes(board):
    """Real TX2 output of nvpmodel -q --verbose names the active mode only, so the modes are
    listed with -p --verbose."""
    assert _recorded_names("tx2-r28-q-verbose.txt") == ["MAXN"]
    info = board(build_agx_orin)
    nvp = Nvpmodel(shutil.which("nvpmodel"), sysfs.SysfsRoot())
    assert [n for _, n in nvp.modes()] == ["MAXN", "MODE_15W", "MODE_30W", "MODE_50W"]
    assert (info["bin"] / "nvpmodel.log").read_text().splitlines() == ["-p --verbose"]


@pytest.mark.parametrize(
    "recorded, expected",
    [
        ("thor-r38-q.txt", ("120W", 1)),
        ("orin-nano-q.txt", ("15W", 0)),
        ("tx2-r28-q-verbose.txt", ("MAXN", 0)),
    ],
)
def test_query_reads_real_outputs(board, monkeypatch, recorded, expected):
    board(build_agx_orin)
    monkeypatch.setenv("FAKE_NVPMODEL_QUERY", str(NVPMODEL_DATA / recorded))
    assert Nvpmodel(shutil.which("nvpmodel"), sysfs.SysfsRoot()).query() == expected


@pytest.mark.parametrize(
    "recorded, match",
    [
        ("m-reboot-declined.txt", "without a reboot.*optMask is 1.*nvpmodel -m 0 and reboot"),
        ("m-bad-mode.txt", "NVPM ERROR: request for bad power mode 2"),
    ],
)
def test_nvpm_error_with_exit_status_0_is_a_failure(board, monkeypatch, recorded, match):
    """nvpmodel -m printed NVPM ERROR (real outputs) and exited 0: the switch failed."""
    info = board(build_agx_orin)
    monkeypatch.setenv("FAKE_NVPMODEL_M_OUTPUT", str(NVPMODEL_DATA / recorded))
    dev = governor.open_device("jetson")
    try:
        with pytest.raises(GovernorError, match=match) as err:
            dev.set_power_mode("MAXN")
        assert "\n" not in str(err.value)
        assert not dev.changed and dev.state().power_mode == "MODE_30W"
    finally:
        dev.close()
    assert "-m 0" in (info["bin"] / "nvpmodel.log").read_text()


def test_a_switch_that_silently_did_not_take_is_caught_by_reading_back(board, monkeypatch):
    board(build_agx_orin)
    monkeypatch.setenv("FAKE_NVPMODEL_IGNORE", "1")
    dev = governor.open_device("jetson")
    try:
        with pytest.raises(GovernorError, match="still in MODE_30W .id 2., not MAXN"):
            dev.set_power_mode("MAXN")
        assert not dev.changed
    finally:
        dev.close()
