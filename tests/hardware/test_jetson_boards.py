"""The jetson backend on the sourced file trees of a TX2, a Xavier NX, an Orin NX and an Orin
Nano (tests/hardware/hw_boards.py; every fact and its source in tests/data/sysfs/README.md):
read clocks, rails and temperatures, lock the GPU clock and read the files back, restore."""

from __future__ import annotations

from pathlib import Path

import pytest
from hw_boards import (
    ORIN_NANO_JP5_HZ,
    ORIN_NANO_SUPER_HZ,
    ORIN_NX_HZ,
    TX2_HZ,
    XAVIER_NX_HZ,
    build_orin_nano,
    build_orin_nx,
    build_tx2,
    build_xavier_nx,
)
from hw_trees import install_tools

import governor
from governor.errors import InvalidRequestError


@pytest.fixture
def board(tmp_path, monkeypatch):
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


def _node_file(info, name: str) -> str:
    return (info["root"] / info["node"].lstrip("/") / name).read_text().strip()


def _mhz(table_hz: str):
    return tuple(int(w) / 1e6 for w in table_hz.split())


def _hwmon_w(info, device: str, channel: int) -> float:
    """V·I of an INA3221 hwmon channel, read from the tree's files."""
    base = next((info["root"] / "sys/bus/i2c/drivers/ina3221" / device / "hwmon").glob("hwmon*"))
    mv = int((base / f"in{channel}_input").read_text())
    ma = int((base / f"curr{channel}_input").read_text())
    return mv * ma / 1e6


def _iio_w(info, device: str, iio: str, channel: int) -> float:
    path = info["root"] / "sys/bus/i2c/drivers/ina3221x" / device / iio
    return int((path / f"in_power{channel}_input").read_text()) / 1000.0


def _lock_verify_restore(info, dev, clock_mhz: float) -> None:
    """Lock at ``clock_mhz``; both devfreq files must hold its Hz; closing restores them."""
    before = (_node_file(info, "min_freq"), _node_file(info, "max_freq"))
    assert dev.lock_gpu_clocks(clock_mhz) == (clock_mhz, clock_mhz)
    hz = str(int(round(clock_mhz * 1e6)))
    assert (_node_file(info, "min_freq"), _node_file(info, "max_freq")) == (hz, hz)
    assert dev.state().gpu_clocks_mhz == (clock_mhz, clock_mhz)
    dev.close()
    assert (_node_file(info, "min_freq"), _node_file(info, "max_freq")) == before


def test_tx2_iio_rails_table_and_power_modes(board):
    info = board(build_tx2)
    dev = governor.open_device("jetson")
    try:
        assert dev.identity.model == "tx2"  # known by its clock table: no device tree here
        assert dev.devfreq.name == "17000000.gp10b"
        assert dev.devfreq.table_mhz == _mhz(TX2_HZ) and len(dev.devfreq.table_mhz) == 14
        assert dev.rail_source.layout == "iio"
        # nvpmodel.conf default MAXP_CORE_ARM caps the GPU at 1120 MHz: 1032.75 is the top
        assert dev.state().power_mode == "MAXP_CORE_ARM"
        assert dev.supported_clocks_mhz()[-1] == 1032.75
        s = dev.sample()
        assert [r.name for r in s.rails] == [
            "VDD_SYS_GPU",
            "VDD_SYS_SOC",
            "VDD_4V0_WIFI",
            "VDD_IN",
            "VDD_SYS_CPU",
            "VDD_SYS_DDR",
        ]
        scopes = {r.name: r.scope for r in s.rails}
        assert scopes["VDD_SYS_GPU"] == "gpu" and scopes["VDD_IN"] == "board input"
        assert scopes["VDD_SYS_DDR"] == "memory" and scopes["VDD_SYS_CPU"] == "cpu"
        assert s.rail("VDD_IN").power_w == _iio_w(info, "0-0041", "iio:device1", 0)
        assert s.rail("VDD_SYS_DDR").power_w == _iio_w(info, "0-0041", "iio:device1", 2)
        assert (s.power_w, s.power_scope) == (_iio_w(info, "0-0040", "iio:device0", 0), "gpu")
        assert s.temperature_c == 35.0  # GPU-therm, not BCPU/MCPU
        assert s.gpu_clock_mhz == 140.25
        assert s.utilisation_pct == 0.0
        assert dev.power_modes() == (
            "MAXN",
            "MAXQ",
            "MAXP_CORE_ALL",
            "MAXP_CORE_ARM",
            "MAXP_CORE_DENVER",
        )
        dev.set_power_mode("MAXQ")  # 850 MHz cap: devfreq's 765 is the highest below it
        assert dev.supported_clocks_mhz()[-1] == 765.0
        with pytest.raises(InvalidRequestError, match="140.25-765 MHz"):
            dev.lock_gpu_clocks(943.5)
        dev.set_power_mode("MAXN")  # MAX_FREQ -1: no cap
        assert dev.supported_clocks_mhz() == _mhz(TX2_HZ)
        _lock_verify_restore(info, dev, 1211.25)
    finally:
        dev.close()
    calls = (info["bin"] / "nvpmodel.log").read_text().splitlines()
    assert [c for c in calls if c.startswith("-m")][-1] == "-m 3"  # back to MAXP_CORE_ARM


def test_tx2_rails_under_iio_device_as_nvidias_guide_writes_them(board):
    """NVIDIA's TX2 guide reads ``0-0040/iio_device/rail_name_0`` (VDD_SYS_GPU); scripts
    on boards read ``iio:device0``: both layouts give the same six rails."""
    info = board(build_tx2, iio=("iio_device", "iio_device"))
    with governor.open_device("jetson") as dev:
        s = dev.sample()
        assert len(s.rails) == 6
        assert s.rail("VDD_SYS_GPU").power_w == _iio_w(info, "0-0040", "iio_device", 0)
        assert s.rail("VDD_IN").power_w == _iio_w(info, "0-0041", "iio_device", 0)
        assert s.power_scope == "gpu"


def test_xavier_nx_jetpack5_hwmon_bus7_and_no_gpu_rail(board):
    info = board(build_xavier_nx)
    dev = governor.open_device("jetson")
    try:
        assert dev.identity.model == "xavier-nx"
        assert dev.devfreq.name == "17000000.gv11b"
        assert dev.supported_clocks_mhz() == _mhz(XAVIER_NX_HZ)
        assert dev.rail_source.layout == "hwmon"
        s = dev.sample()
        assert {r.name: r.scope for r in s.rails} == {
            "VDD_IN": "board input",
            "VDD_CPU_GPU_CV": "cpu+gpu+cv",
            "VDD_SOC": "soc",
        }  # in7 (sum of shunt voltages) is not a rail
        # no GPU-only rail: the narrowest one that holds the GPU is CPU+GPU+CV
        assert s.power_scope == "cpu+gpu+cv"
        assert s.power_w == pytest.approx(_hwmon_w(info, "7-0040", 2))
        assert s.rail("VDD_IN").power_w == pytest.approx(_hwmon_w(info, "7-0040", 1))
        assert s.temperature_c == 43.0
        assert s.utilisation_pct == 62.0
        assert dev.state().power_mode == "MODE_15W_6CORE"
        _lock_verify_restore(info, dev, 803.25)
    finally:
        dev.close()


def test_xavier_nx_desktop_mode_caps_the_offered_clocks(board):
    board(build_xavier_nx)
    with governor.open_device("jetson") as dev:
        dev.set_power_mode("MODE_10W_DESKTOP")
        assert dev.supported_clocks_mhz()[-1] == 510.0
        assert dev.lock_gpu_clocks(510) == (510.0, 510.0)
        dev.set_power_mode("MODE_20W_6CORE")
        assert dev.supported_clocks_mhz()[-1] == 1109.25


@pytest.mark.parametrize(
    "jetpack, node, zone_name",
    [(5, "17000000.ga10b", "GPU-therm"), (6, "17000000.gpu", "gpu-thermal")],
)
def test_orin_nx_both_releases(board, jetpack, node, zone_name):
    info = board(build_orin_nx, jetpack=jetpack)
    dev = governor.open_device("jetson")
    try:
        assert dev.identity.model == "orin-nx"  # p3767-0000 in compatible, no model file
        assert dev.devfreq.name == node
        assert dev.devfreq.table_mhz == _mhz(ORIN_NX_HZ)
        s = dev.sample()
        assert [r.name for r in s.rails] == ["VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"]
        assert s.power_scope == "cpu+gpu+cv"
        assert s.power_w == pytest.approx(_hwmon_w(info, "1-0040", 2))
        assert s.rail("VDD_IN").power_w == pytest.approx(5.160 * 1.010)
        assert s.temperature_c == pytest.approx(45.875 if jetpack == 5 else 48.125)
        zones = governor.devices.jetson.sysfs.thermal_zones(dev.fs)
        assert zone_name in zones
        assert not any(k.lower().startswith("cv") for k in zones)  # power-gated: unreadable
        assert s.utilisation_pct == 0.0
        _lock_verify_restore(info, dev, 714.0 if jetpack == 5 else 408.0)
    finally:
        dev.close()


def test_orin_nx_jetpack6_power_modes_cap_the_clocks(board):
    board(build_orin_nx, jetpack=6)
    with governor.open_device("jetson") as dev:
        assert dev.power_modes() == ("MAXN", "10W", "15W", "25W")
        assert dev.state().power_mode == "15W"
        assert dev.supported_clocks_mhz()[-1] == 612.0
        dev.set_power_mode("25W")  # the 25W mode holds the GPU at 408 MHz
        assert dev.supported_clocks_mhz() == (306.0, 408.0)
        dev.set_power_mode("MAXN")
        assert dev.supported_clocks_mhz()[-1] == 918.0
        assert dev.lock_gpu_clocks(918) == (918.0, 918.0)


def test_orin_nano_jetpack5_rails_modes_and_restore(board):
    info = board(build_orin_nano, jetpack=5)
    dev = governor.open_device("jetson")
    try:
        assert dev.identity.model == "orin-nano"
        assert dev.devfreq.name == "17000000.ga10b"
        assert dev.power_modes() == ("15W", "7W")
        assert dev.state().power_mode == "15W"
        assert dev.supported_clocks_mhz() == _mhz(ORIN_NANO_JP5_HZ)
        s = dev.sample()
        # the Orin Nano has no GPU-only rail either
        assert {r.name: r.scope for r in s.rails}["VDD_CPU_GPU_CV"] == "cpu+gpu+cv"
        assert (s.power_scope, s.power_w) == ("cpu+gpu+cv", pytest.approx(5.12 * 0.241))
        assert s.temperature_c == pytest.approx(45.875)
        assert s.utilisation_pct == 4.0
        _lock_verify_restore(info, dev, 510.0)
    finally:
        dev.close()


def test_orin_nano_super_jetpack6_modes(board):
    info = board(build_orin_nano, jetpack=6)
    dev = governor.open_device("jetson")
    try:
        assert dev.identity.model == "orin-nano"
        real = (info["root"] / info["node"].lstrip("/")).resolve()
        assert dev.devfreq.node.resolve() == real  # the class link into /sys/devices/platform
        assert dev.devfreq.table_mhz == _mhz(ORIN_NANO_SUPER_HZ)
        assert dev.state().power_mode == "25W"
        assert dev.supported_clocks_mhz()[-1] == 918.0
        with pytest.raises(InvalidRequestError):
            dev.lock_gpu_clocks(1020)
        dev.set_power_mode("MAXN_SUPER")
        assert dev.supported_clocks_mhz()[-1] == 1020.0
        _lock_verify_restore(info, dev, 1020.0)
    finally:
        dev.close()
    assert _node_file(info, "max_freq") == "918000000"


@pytest.mark.parametrize("builder", [build_tx2, build_xavier_nx, build_orin_nx, build_orin_nano])
def test_every_new_tree_is_found_through_sys_class_devfreq(board, builder):
    """The finder takes the GPU node, never the vic/nvdec decoys, on each tree."""
    info = board(builder)
    node = governor.devices.jetson.sysfs.find_gpu_devfreq(governor.devices.jetson.sysfs.SysfsRoot())
    assert node is not None
    assert Path(node).name == Path(info["node"]).name


def test_orin_nano_super_load_without_the_devfreq_device_link(board):
    """Where the class node carries no ``device`` link, the GPU is still found by its node
    name and its load read from /sys/devices/platform/17000000.gpu/load."""
    info = board(build_orin_nano, jetpack=6)
    (info["root"] / info["node"].lstrip("/") / "device").unlink()
    load = info["root"] / "sys/devices/platform/17000000.gpu/load"
    load.write_text("873\n")
    with governor.open_device("jetson") as dev:
        assert dev.devfreq.name == "17000000.gpu"
        assert dev.sample().utilisation_pct == 87.3
