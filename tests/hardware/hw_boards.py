"""File trees of the Jetsons without a GPU-only rail or with the JetPack 4 iio layout: TX2,
Xavier NX, Orin NX and Orin Nano, each with the paths, tables, labels, zone names and power
modes found in public captures.

Every fact below is listed, with the address it came from, in ``tests/data/sysfs/README.md``;
what could not be sourced is said there and in the builder's docstring (``Assumed:``).
Sensor *values* (mV, mA, m°C, load) are chosen, not measured, unless the docstring says where
they were read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Iterable, Optional, Sequence, Tuple

from hw_trees import decoy_devfreq, devfreq_node, hwmon_rails, iio_rails, write

# TX2: the 14 entries of available_frequencies printed by a TX2 power-measurement project
# (sysfs/README.md; the L4T release it was read on is not stated).
TX2_HZ = (
    "140250000 229500000 318750000 408000000 497250000 586500000 675750000 765000000 "
    "854250000 943500000 1032750000 1122000000 1211250000 1300500000"
)
# Xavier NX: `cat available_frequencies` in NVIDIA's L4T R32 guide ("Configuring GPU Clocks").
XAVIER_NX_HZ = (
    "114750000 204000000 306000000 408000000 510000000 599250000 701250000 752250000 "
    "803250000 854250000 905250000 956250000 1007250000 1058250000 1109250000"
)
# Orin NX 16GB (non-Super modes): the 7-entry GPU table listed next to the 8-core Orin NX CPU
# table (268800-1984000 kHz) by a benchmarking script.
ORIN_NX_HZ = "306000000 408000000 510000000 612000000 714000000 816000000 918000000"
# Orin Nano (JetPack 5, 15W/7W modes): only these three entries are sourced; the real table
# may hold more between them (sysfs/README.md).
ORIN_NANO_JP5_HZ = "306000000 510000000 624750000"
# Orin Nano Super (JetPack 6): the 8 devfreq points a measurement campaign swept, up to the
# Super's 1020 MHz.
ORIN_NANO_SUPER_HZ = (
    "306000000 408000000 510000000 612000000 714000000 816000000 918000000 1020000000"
)

# TX2 /etc/nvpmodel.conf of L4T R28 (NVIDIA's file as quoted in a 2017 blog post): the PARAM
# block and the GPU lines of each mode (CPU lines left out). MAX_FREQ -1 means no cap.
TX2_R28_NVPMODEL_CONF = """< PARAM TYPE=CLOCK NAME=GPU >
FREQ_TABLE /sys/devices/17000000.gp10b/devfreq/17000000.gp10b/available_frequencies
MAX_FREQ /sys/devices/17000000.gp10b/devfreq/17000000.gp10b/max_freq
MIN_FREQ /sys/devices/17000000.gp10b/devfreq/17000000.gp10b/min_freq
< POWER_MODEL ID=0 NAME=MAXN >
GPU MIN_FREQ 0
GPU MAX_FREQ -1
< POWER_MODEL ID=1 NAME=MAXQ >
GPU MIN_FREQ 0
GPU MAX_FREQ 850000000
< POWER_MODEL ID=2 NAME=MAXP_CORE_ALL >
GPU MIN_FREQ 0
GPU MAX_FREQ 1120000000
< POWER_MODEL ID=3 NAME=MAXP_CORE_ARM >
GPU MIN_FREQ 0
GPU MAX_FREQ 1120000000
< POWER_MODEL ID=4 NAME=MAXP_CORE_DENVER >
GPU MAX_FREQ 1120000000
< PM_CONFIG DEFAULT=3 >
"""

# Orin NX 16GB, JetPack 6, non-Super nvpmodel_p3767_0000.conf: ids and names from a device
# report (0 MAXN active, 2 15W the factory default); GPU caps 612 MHz (15W) and 408 MHz (25W)
# from the same report; the 10W cap is not in any capture found and is left out.
ORIN_NX_NVPMODEL_CONF = """< POWER_MODEL ID=0 NAME=MAXN >
GPU MAX_FREQ -1
< POWER_MODEL ID=1 NAME=10W >
< POWER_MODEL ID=2 NAME=15W >
GPU MAX_FREQ 612000000
< POWER_MODEL ID=3 NAME=25W >
GPU MAX_FREQ 408000000
< PM_CONFIG DEFAULT=2 >
"""

# Orin Nano, JetPack 5: modes 0 15W and 1 7W (a real `nvpmodel -q`, and `< POWER_MODEL >`
# lines of a device report); 15W caps the GPU at 624750000 Hz (`jetson_clocks --show` in that
# mode). The 7W cap is reported as 408 and as 420 MHz by two secondary sources: left out.
ORIN_NANO_NVPMODEL_CONF = """< POWER_MODEL ID=0 NAME=15W >
GPU MAX_FREQ 624750000
< POWER_MODEL ID=1 NAME=7W >
< PM_CONFIG DEFAULT=0 >
"""

# Orin Nano Super, JetPack 6: MAXN_SUPER is mode 2 and the board boots into mode 1, 25W (a
# carrier vendor's power notes); 15W as mode 0 and the 612/918 MHz caps are from the shared
# boards.md, not from a capture.
ORIN_NANO_SUPER_NVPMODEL_CONF = """< POWER_MODEL ID=0 NAME=15W >
GPU MAX_FREQ 612000000
< POWER_MODEL ID=1 NAME=25W >
GPU MAX_FREQ 918000000
< POWER_MODEL ID=2 NAME=MAXN_SUPER >
GPU MAX_FREQ -1
< PM_CONFIG DEFAULT=1 >
"""

# Xavier NX, JetPack 5: mode ids and names of a real `nvpmodel -p --verbose`
# (../data/nvpmodel/xavier-nx-jp5-p-verbose-power-models.txt); GPU caps from the shared
# boards.md (1109.25 in the 15W and 20W modes, 803.25 in 10W, 510 in 10W_DESKTOP), no capture.
XAVIER_NX_NVPMODEL_CONF = """< POWER_MODEL ID=0 NAME=MODE_15W_2CORE >
GPU MAX_FREQ 1109250000
< POWER_MODEL ID=1 NAME=MODE_15W_4CORE >
GPU MAX_FREQ 1109250000
< POWER_MODEL ID=2 NAME=MODE_15W_6CORE >
GPU MAX_FREQ 1109250000
< POWER_MODEL ID=3 NAME=MODE_10W_2CORE >
GPU MAX_FREQ 803250000
< POWER_MODEL ID=4 NAME=MODE_10W_4CORE >
GPU MAX_FREQ 803250000
< POWER_MODEL ID=5 NAME=MODE_10W_DESKTOP >
GPU MAX_FREQ 510000000
< POWER_MODEL ID=6 NAME=MODE_20W_2CORE >
GPU MAX_FREQ 1109250000
< POWER_MODEL ID=7 NAME=MODE_20W_4CORE >
GPU MAX_FREQ 1109250000
< POWER_MODEL ID=8 NAME=MODE_20W_6CORE >
GPU MAX_FREQ 1109250000
< PM_CONFIG DEFAULT=2 >
"""

# Orin (T234) zone types: JetPack 5 spells them CPU-therm ... tj-therm, JetPack 6 and later
# cpu-thermal ... tj-thermal. The cv* zones cannot be read while the DLA/PVA are power-gated
# (EAGAIN), so they are directories here, which cannot be read either.
ORIN_JP5_ZONES = (
    ("CPU-therm", 47937),
    ("GPU-therm", 45875),
    ("CV0-therm", None),
    ("CV1-therm", None),
    ("CV2-therm", None),
    ("SOC0-therm", 46968),
    ("SOC1-therm", 48875),
    ("SOC2-therm", 46093),
    ("tj-therm", 48875),
)
ORIN_JP6_ZONES = (
    ("cpu-thermal", 48000),
    ("gpu-thermal", 48125),
    ("cv0-thermal", None),
    ("cv1-thermal", None),
    ("cv2-thermal", None),
    ("soc0-thermal", 46031),
    ("soc1-thermal", 46906),
    ("soc2-thermal", 46906),
    ("tj-thermal", 48125),
)


def zones(root: Path, entries: Iterable[Tuple[str, Optional[int]]]) -> None:
    """``thermal_zone<i>``: (type, m°C); None makes ``temp`` unreadable (EAGAIN on a board)."""
    for i, (kind, millidegrees) in enumerate(entries):
        write(root, f"/sys/class/thermal/thermal_zone{i}/type", kind + "\n")
        if millidegrees is None:
            (root / f"sys/class/thermal/thermal_zone{i}/temp").mkdir(parents=True)
        else:
            write(root, f"/sys/class/thermal/thermal_zone{i}/temp", f"{millidegrees}\n")


def _device_tree(root: Path, model: Optional[str], compatible: Sequence[str]) -> None:
    if model is not None:
        write(root, "/proc/device-tree/model", model + "\x00")
    if compatible:
        write(root, "/proc/device-tree/compatible", "".join(c + "\x00" for c in compatible))


def build_tx2(root: Path, iio: Tuple[str, str] = ("iio:device0", "iio:device1")) -> Dict[str, str]:
    """Jetson TX2 (facts of L4T R28 and R32.1): iio INA3221 layout, 14-step GPU table, idle.

    ``iio``: the iio directory of each monitor, ``iio:device0``/``iio:device1`` as TX2
    scripts read them, or ``iio_device`` as NVIDIA's TX2 guide writes it.

    Sourced: devfreq node ``/sys/devices/17000000.gp10b/devfreq/17000000.gp10b`` and its
    table; load at ``/sys/devices/17000000.gp10b/load``; INA3221 at ``0-0040/iio:device0``
    (VDD_SYS_GPU, VDD_SYS_SOC, VDD_4V0_WIFI) and ``0-0041/iio:device1`` (VDD_IN, VDD_SYS_CPU,
    VDD_SYS_DDR), or the same under ``iio_device``; eight thermal zone types (R32.1); R28
    nvpmodel.conf modes and GPU caps. Rail powers (mW) are a real R28 tegrastats line
    (Datadog). Assumed: the device tree and
    ``/etc/nv_tegra_release`` text (not written: the board is known by its clock table), the
    mV/mA values, the zone temperatures.
    """
    node = "/sys/devices/17000000.gp10b/devfreq/17000000.gp10b"
    devfreq_node(
        root,
        node,
        TX2_HZ,
        min_hz=140250000,
        max_hz=1300500000,
        cur_hz=140250000,
        of_name="gp10b",
    )
    write(root, "/sys/devices/17000000.gp10b/load", "0\n")
    decoy_devfreq(root, "15340000.vic", "vic")
    zones(
        root,
        [
            ("BCPU-therm", 37500),
            ("MCPU-therm", 37500),
            ("GPU-therm", 35000),
            ("PLL-therm", 37500),
            ("Tboard_tegra", 32000),
            ("Tdiode_tegra", 34250),
            ("PMIC-Die", 100000),
            ("thermal-fan-est", 36500),
        ],
    )
    iio_rails(
        root,
        "0-0040",
        [
            ("VDD_SYS_GPU", 19000, 8, 152),
            ("VDD_SYS_SOC", 19000, 36, 687),
            ("VDD_4V0_WIFI", 4000, 0, 0),
        ],
        iio=iio[0],
    )
    iio_rails(
        root,
        "0-0041",
        [
            ("VDD_IN", 19000, 160, 3056),
            ("VDD_SYS_CPU", 19000, 8, 152),
            ("VDD_SYS_DDR", 4900, 180, 883),
        ],
        iio=iio[1],
    )
    write(root, "/etc/nvpmodel.conf", TX2_R28_NVPMODEL_CONF)
    return {"node": node}


def build_xavier_nx(root: Path) -> Dict[str, str]:
    """Jetson Xavier NX devkit on JetPack 5: one INA3221 on I2C bus 7 (hwmon4), no GPU rail.

    Sourced: node ``/sys/devices/17000000.gv11b/devfreq/17000000.gv11b`` and its 15-entry
    table; INA3221 ``7-0040`` with ``hwmon/hwmon4`` and an ``in7_label`` "sum of shunt
    voltages" (jtop log of a Xavier NX devkit); labels in1 VDD_IN, in2 VDD_CPU_GPU_CV,
    in3 VDD_SOC; load at ``/sys/devices/gpu.0/load``; mode names. Assumed: the thermal
    zone *types* (tegrastats prints AO, CPU, GPU, AUX, PMIC and thermal on this board; the
    ``-therm``/``-Die``/``-fan-est`` spelling is AGX Xavier's), the GPU caps of the modes
    (boards.md), the device tree text (p3668 from NVIDIA's EEPROM guide), the values.
    """
    _device_tree(
        root,
        "NVIDIA Jetson Xavier NX Developer Kit",
        ["nvidia,p3509-0000+p3668-0000", "nvidia,p3668-0000", "nvidia,tegra194"],
    )
    node = "/sys/devices/17000000.gv11b/devfreq/17000000.gv11b"
    devfreq_node(
        root,
        node,
        XAVIER_NX_HZ,
        min_hz=114750000,
        max_hz=1109250000,
        cur_hz=306000000,
        of_name="gv11b",
    )
    write(root, "/sys/devices/gpu.0/load", "620\n")
    decoy_devfreq(root, "15340000.vic", "vic")
    zones(
        root,
        [
            ("AO-therm", 41500),
            ("CPU-therm", 43500),
            ("GPU-therm", 43000),
            ("AUX-therm", 41500),
            ("PMIC-Die", 100000),
            ("thermal-fan-est", 42550),
        ],
    )
    hwmon_rails(
        root,
        "7-0040",
        4,
        [("VDD_IN", 5000, 813), ("VDD_CPU_GPU_CV", 5000, 148), ("VDD_SOC", 5000, 271)],
    )
    write(root, "/etc/nvpmodel.conf", XAVIER_NX_NVPMODEL_CONF)
    return {"node": node}


def build_orin_nx(root: Path, jetpack: int = 6) -> Dict[str, str]:
    """Jetson Orin NX 16GB (p3767-0000) on the p3768 devkit carrier, JetPack 5 or 6 (non-Super).

    Sourced: the compatible strings (device report, R36.5); devfreq node
    ``17000000.ga10b`` on JetPack 5 (nvpmodel template for T234) and
    ``/sys/devices/platform/bus@0/17000000.gpu`` with its ``load`` on JetPack 6; the 7-entry
    table; INA3221 at I2C 1-0040 (``tegra234-p3767.dtsi``: i2c@c240000, labels VDD_IN,
    VDD_CPU_GPU_CV, VDD_SOC); zone types of both releases; modes and caps on JetPack 6
    (``ORIN_NX_NVPMODEL_CONF``). Idle VDD_IN 5160 mV / 1010 mA is a measured idle point
    (ARK's power notes). Assumed: the hwmon numbers, the table on JetPack 6 being the JetPack 5
    one, no ``model`` file (the board is known by its part number), the other values.
    """
    _device_tree(
        root, None, ["nvidia,p3768-0000+p3767-0000", "nvidia,p3767-0000", "nvidia,tegra234"]
    )
    if jetpack >= 6:
        device = "/sys/devices/platform/bus@0/17000000.gpu"
        node = f"{device}/devfreq/17000000.gpu"
        of_name, hw, table = "gpu", 1, ORIN_NX_HZ
        zone_list = ORIN_JP6_ZONES
    else:
        device = "/sys/devices/17000000.ga10b"
        node = f"{device}/devfreq/17000000.ga10b"
        of_name, hw, table = "ga10b", 3, ORIN_NX_HZ
        zone_list = ORIN_JP5_ZONES
    devfreq_node(
        root,
        node,
        table,
        min_hz=306000000,
        max_hz=918000000,
        cur_hz=306000000,
        of_name=of_name,
    )
    write(root, f"{device}/load", "0\n")
    decoy_devfreq(root, "15340000.vic", "vic")
    decoy_devfreq(root, "15480000.nvdec", "nvdec")
    zones(root, zone_list)
    hwmon_rails(
        root,
        "1-0040",
        hw,
        [("VDD_IN", 5160, 1010), ("VDD_CPU_GPU_CV", 5152, 150), ("VDD_SOC", 5152, 276)],
    )
    if jetpack >= 6:
        write(root, "/etc/nvpmodel.conf", ORIN_NX_NVPMODEL_CONF)
    return {"node": node}


def build_orin_nano(root: Path, jetpack: int = 5) -> Dict[str, str]:
    """Jetson Orin Nano devkit (p3767-0005): JetPack 5 in 15W, or JetPack 6 Super in 25W.

    Sourced: model text and zone types (device report of an Orin Nano devkit); compatible
    ``p3768-0000+p3767-0005``; INA3221 1-0040 labels as Orin NX (same p3767 module tree,
    no GPU-only rail); JetPack 5 node ``17000000.ga10b`` with the three sourced table entries
    and the 15W cap; JetPack 6 node ``/sys/devices/platform/17000000.gpu`` (the path a Super
    campaign script writes) with 8 entries to 1020 MHz; Super mode ids. Rail powers are the
    idle tegrastats sample of that report (VDD_IN 4832 mW, VDD_CPU_GPU_CV 1236, VDD_SOC 1437).
    Assumed: the full JetPack 5 table, the hwmon numbers, the 15W/25W caps on the Super
    (boards.md), the other values.
    """
    _device_tree(
        root,
        "NVIDIA Jetson Orin Nano Developer Kit",
        ["nvidia,p3768-0000+p3767-0005", "nvidia,p3767-0005", "nvidia,tegra234"],
    )
    if jetpack >= 6:
        device = "/sys/devices/platform/17000000.gpu"
        node = f"{device}/devfreq/17000000.gpu"
        of_name, hw, table, top = "gpu", 1, ORIN_NANO_SUPER_HZ, 918000000
        conf, zone_list = ORIN_NANO_SUPER_NVPMODEL_CONF, ORIN_JP6_ZONES
    else:
        device = "/sys/devices/17000000.ga10b"
        node = f"{device}/devfreq/17000000.ga10b"
        of_name, hw, table, top = "ga10b", 3, ORIN_NANO_JP5_HZ, 624750000
        conf, zone_list = ORIN_NANO_NVPMODEL_CONF, ORIN_JP5_ZONES
    devfreq_node(root, node, table, min_hz=306000000, max_hz=top, cur_hz=306000000, of_name=of_name)
    write(root, f"{device}/load", "40\n")
    decoy_devfreq(root, "15340000.vic", "vic")
    zones(root, zone_list)
    hwmon_rails(
        root,
        "1-0040",
        hw,
        [("VDD_IN", 5120, 944), ("VDD_CPU_GPU_CV", 5120, 241), ("VDD_SOC", 5120, 281)],
    )
    write(root, "/etc/nvpmodel.conf", conf)
    return {"node": node}
