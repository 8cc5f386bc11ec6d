"""Real file trees of Jetson boards under a temporary root, and fake NVIDIA tools on PATH.

Layouts follow shared/data/boards.md: devfreq nodes, the INA3221 iio (JetPack 4) and hwmon
(JetPack 5+) layouts, thermal zones, the device tree and /etc/nv_tegra_release.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Dict, Iterable, Optional, Tuple

NANO_HZ = "76800000 153600000 230400000 307200000 384000000 460800000 537600000 614400000 691200000 768000000 844800000 921600000"
XAVIER_HZ = "114750000 216750000 318750000 420750000 522750000 624750000 675750000 828750000 905250000 1032750000 1198500000 1236750000 1338750000 1377000000"
ORIN_HZ = "306000000 408000000 510000000 612000000 714000000 816000000 918000000 1020000000 1122000000 1224000000 1300500000"
# Thor's GPC table is not public: only its top, 1575 MHz (gpu-gpc-0 cur_freq under
# jetson_clocks in MAXN, published measurements), is confirmed. The steps below are assumed.
THOR_HZ = " ".join(str(675000000 + 75000000 * i) for i in range(13))

ORIN_NVPMODEL_CONF = """# nvpmodel configuration (excerpt)
< PARAM TYPE=CLOCK NAME=GPU >
GPU MAX_FREQ /sys/devices/17000000.ga10b/devfreq/17000000.ga10b/max_freq
< POWER_MODEL ID=0 NAME=MAXN >
GPU MAX_FREQ 1300500000
< POWER_MODEL ID=1 NAME=MODE_15W >
GPU MAX_FREQ 408000000
< POWER_MODEL ID=2 NAME=MODE_30W >
GPU MAX_FREQ 612000000
< POWER_MODEL ID=3 NAME=MODE_50W >
GPU MAX_FREQ 816000000
< PM_CONFIG DEFAULT=2 >
"""


def write(root: Path, absolute: str, text: str) -> Path:
    path = root / absolute.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def link(root: Path, absolute: str, target: str) -> None:
    path = root / absolute.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, path)


def devfreq_node(
    root: Path, node: str, hz: str, *, min_hz: int, max_hz: int, cur_hz: int, of_name: str
) -> None:
    """A devfreq node at ``node`` (absolute), linked from /sys/class/devfreq, whose device
    (two levels up, as in sysfs) carries ``of_node/name``."""
    write(root, f"{node}/available_frequencies", hz + "\n")
    write(root, f"{node}/min_freq", f"{min_hz}\n")
    write(root, f"{node}/max_freq", f"{max_hz}\n")
    write(root, f"{node}/cur_freq", f"{cur_hz}\n")
    write(root, f"{node}/governor", "nvhost_podgov\n")
    link(root, f"{node}/device", "../..")
    device_dir = str(Path(node).parent.parent)
    write(root, f"{device_dir}/of_node/name", of_name + "\x00")
    link(root, f"/sys/class/devfreq/{Path(node).name}", "../../" + node.lstrip("/")[len("sys/") :])


def decoy_devfreq(root: Path, name: str, of_name: str) -> None:
    """Another engine's devfreq node (host1x, vic...) the finder must not take for the GPU."""
    devfreq_node(
        root,
        f"/sys/devices/platform/{name}/devfreq/{name}",
        "100000000 200000000",
        min_hz=100000000,
        max_hz=200000000,
        cur_hz=100000000,
        of_name=of_name,
    )


def thermal(root: Path, zones: Iterable[Tuple[str, int]]) -> None:
    for i, (kind, millidegrees) in enumerate(zones):
        write(root, f"/sys/class/thermal/thermal_zone{i}/type", kind + "\n")
        write(root, f"/sys/class/thermal/thermal_zone{i}/temp", f"{millidegrees}\n")


def iio_rails(
    root: Path, device: str, rails: Iterable[Tuple[str, int, int, int]], iio: str = "iio:device0"
) -> None:
    """JetPack 4: (name, mV, mA, mW) per channel 0..2 (``iio`` numbers differ per monitor)."""
    base = f"/sys/bus/i2c/drivers/ina3221x/{device}/{iio}"
    for c, (name, mv, ma, mw) in enumerate(rails):
        write(root, f"{base}/rail_name_{c}", name + "\n")
        write(root, f"{base}/in_voltage{c}_input", f"{mv}\n")
        write(root, f"{base}/in_current{c}_input", f"{ma}\n")
        write(root, f"{base}/in_power{c}_input", f"{mw}\n")


def hwmon_rails(root: Path, device: str, hwmon: int, rails: Iterable[Tuple[str, int, int]]) -> None:
    """JetPack 5+: (label, mV, mA) per channel 1..3, plus the in7 shunt sum to be skipped."""
    base = f"/sys/bus/i2c/drivers/ina3221/{device}/hwmon/hwmon{hwmon}"
    for c, (label, mv, ma) in enumerate(rails, start=1):
        write(root, f"{base}/in{c}_label", label + "\n")
        write(root, f"{base}/in{c}_input", f"{mv}\n")
        write(root, f"{base}/curr{c}_input", f"{ma}\n")
    write(root, f"{base}/in7_label", "sum of shunt voltages\n")
    write(root, f"{base}/in7_input", "40\n")
    write(root, f"{base}/name", "ina3221\n")


def ina238_rail(
    root: Path, device: str, hwmon: int, mv: int, ma: int, uw: int, label: Optional[str] = None
) -> str:
    """An INA238 (kernel ina238 hwmon driver: in0 shunt mV, in1 bus mV, curr1 mA, power1 uW,
    temp1 m°C; no in1_label) linked from /sys/class/hwmon, as hwmon devices are."""
    base = f"/sys/bus/i2c/drivers/ina238/{device}/hwmon/hwmon{hwmon}"
    write(root, f"{base}/name", "ina238\n")
    write(root, f"{base}/in0_input", "2\n")
    write(root, f"{base}/in1_input", f"{mv}\n")
    write(root, f"{base}/curr1_input", f"{ma}\n")
    write(root, f"{base}/power1_input", f"{uw}\n")
    write(root, f"{base}/temp1_input", "41250\n")
    write(root, f"{base}/shunt_resistor", "1000\n")
    if label is not None:
        write(root, f"{base}/label", label + "\n")
    link(root, f"/sys/class/hwmon/hwmon{hwmon}", "../../" + base.lstrip("/")[len("sys/") :])
    return base


def bpmp_emc(root: Path, rates_khz: Iterable[int], rate_hz: Optional[int] = None) -> str:
    """The BPMP's EMC clock in debugfs as L4T has it (``jetson_clocks``' ``do_emc`` paths):
    ``clk/emc/{rate,min_rate,max_rate,mrq_rate_locked}`` in Hz, unlocked, and the table in
    ``emc/possible_rates`` (kHz). Returns the clock's directory (absolute board path)."""
    rates = sorted(rates_khz)
    clk = "/sys/kernel/debug/bpmp/debug/clk/emc"
    write(root, clk + "/rate", f"{rate_hz or rates[-1] * 1000}\n")
    write(root, clk + "/min_rate", f"{rates[0] * 1000}\n")
    write(root, clk + "/max_rate", f"{rates[-1] * 1000}\n")
    write(root, clk + "/mrq_rate_locked", "0\n")
    write(  # as an Orin NX prints it: kHz, then the unit
        root,
        "/sys/kernel/debug/bpmp/debug/emc/possible_rates",
        " ".join(map(str, rates)) + " (kHz)\n",
    )
    return clk


#: AGX Orin's EMC rates (kHz), LPDDR5 up to 3199 MHz (boards.md)
ORIN_EMC_KHZ = (204000, 665600, 2133000, 3199000)


def build_thor(root: Path, *, vin_label: Optional[str] = None) -> Dict[str, str]:
    """AGX Thor devkit, JetPack 7.0 (L4T R38.2.0), idle with the GPU rail-gated.

    Confirmed (public captures): model, compatible and nv_tegra_release text (jetson-stats
    issue #711); GPU devfreq nodes ``/sys/class/devfreq/gpu-gpc-0`` and ``gpu-nvd-0`` without
    ``device/of_node/name`` and without a ``load`` file (jetson-stats issue #885); 1575 MHz
    top clock; thermal zones cpu/gpu/soc012/soc345/tj with ``gpu-thermal`` unreadable while the
    GPU is rail-gated and VDD_GPU at 0 W then (ThorFAN README); INA3221 labels VDD_GPU,
    VDD_CPU_SOC_MSS, VIN_SYS_5V0 (tegrastats) and an INA238 (hwmon name ``ina238``,
    power1_input in uW) measuring the board input, VIN.
    Assumed: the GPC frequency table below 1575 MHz, the I2C addresses (2-0040, 2-0044) and
    hwmon numbers, devfreq nodes as plain directories (real ones are links into
    /sys/devices), the values, and the INA238's ``label`` file (absent unless ``vin_label``).
    """
    write(root, "/proc/device-tree/model", "NVIDIA Jetson AGX Thor Developer Kit\x00")
    write(
        root,
        "/proc/device-tree/compatible",
        "nvidia,p4071-0000+p3834-0008\x00nvidia,p3834-0008\x00nvidia,tegra264\x00",
    )
    write(
        root,
        "/etc/nv_tegra_release",
        "# R38 (release), REVISION: 2.0, GCID: 41844464, BOARD: generic, EABI: aarch64, DATE: Fri Aug 22 00:55:42 UTC 2025\n",
    )
    node = "/sys/class/devfreq/gpu-gpc-0"
    for name, cur in (("gpu-gpc-0", 675000000), ("gpu-nvd-0", 675000000)):
        base = f"/sys/class/devfreq/{name}"
        write(root, f"{base}/available_frequencies", THOR_HZ + "\n")
        write(root, f"{base}/min_freq", "675000000\n")
        write(root, f"{base}/max_freq", "1575000000\n")
        write(root, f"{base}/cur_freq", f"{cur}\n")
        write(root, f"{base}/governor", "nvhost_podgov\n")
    decoy_devfreq(root, "bwmgr", "bwmgr")
    thermal(root, [("cpu-thermal", 53700), ("soc012-thermal", 55100), ("soc345-thermal", 53700)])
    write(root, "/sys/class/thermal/thermal_zone3/type", "tj-thermal\n")
    write(root, "/sys/class/thermal/thermal_zone3/temp", "55100\n")
    write(root, "/sys/class/thermal/thermal_zone4/type", "gpu-thermal\n")
    (root / "sys/class/thermal/thermal_zone4/temp").mkdir(parents=True)  # unreadable (EAGAIN)
    hwmon_rails(
        root,
        "2-0040",
        1,
        [("VDD_GPU", 5008, 0), ("VDD_CPU_SOC_MSS", 5008, 1300), ("VIN_SYS_5V0", 5016, 1300)],
    )
    ina238_rail(root, "2-0044", 3, 19968, 1202, 24001536, label=vin_label)
    return {"node": node}


def build_nano(root: Path) -> Dict[str, str]:
    """Jetson Nano 4GB, JetPack 4.6.1 (L4T R32.7.1), idle at 76.8 MHz."""
    write(root, "/proc/device-tree/model", "NVIDIA Jetson Nano Developer Kit\x00")
    write(
        root,
        "/proc/device-tree/compatible",
        "nvidia,p3450-0000\x00nvidia,jetson-nano\x00nvidia,tegra210\x00",
    )
    write(
        root,
        "/etc/nv_tegra_release",
        "# R32 (release), REVISION: 7.1, GCID: 29818004, BOARD: t210ref, EABI: aarch64, DATE: Sat Feb 19 17:05:08 UTC 2022\n",
    )
    node = "/sys/devices/gpu.0/devfreq/57000000.gpu"
    devfreq_node(
        root, node, NANO_HZ, min_hz=76800000, max_hz=921600000, cur_hz=76800000, of_name="gpu"
    )
    write(root, "/sys/devices/gpu.0/load", "123\n")
    decoy_devfreq(root, "13e10000.host1x", "host1x")
    thermal(
        root,
        [("AO-therm", 39500), ("CPU-therm", 36500), ("GPU-therm", 36000), ("PLL-therm", 34000)],
    )
    iio_rails(
        root,
        "6-0040",
        [
            ("POM_5V_IN", 5000, 204, 1022),
            ("POM_5V_GPU", 5000, 120, 600),
            ("POM_5V_CPU", 5000, 40, 204),
        ],
    )
    return {"node": node}


def build_agx_xavier(root: Path) -> Dict[str, str]:
    """AGX Xavier, JetPack 4.6 (L4T R32.6.1): two INA3221 in the iio layout, no input rail."""
    write(root, "/proc/device-tree/model", "Jetson-AGX\x00")
    write(
        root,
        "/proc/device-tree/compatible",
        "nvidia,p2972-0000\x00nvidia,galen\x00nvidia,tegra194\x00",
    )
    write(
        root,
        "/etc/nv_tegra_release",
        "# R32 (release), REVISION: 6.1, GCID: 27863751, BOARD: t186ref, EABI: aarch64, DATE: Mon Jul 26 19:36:31 UTC 2021\n",
    )
    node = "/sys/devices/17000000.gv11b/devfreq/17000000.gv11b"
    devfreq_node(
        root,
        node,
        XAVIER_HZ,
        min_hz=114750000,
        max_hz=1377000000,
        cur_hz=318750000,
        of_name="gv11b",
    )
    write(root, "/sys/devices/gpu.0/load", "0\n")
    decoy_devfreq(root, "15340000.vic", "vic")
    thermal(
        root,
        [
            ("CPU-therm", 37500),
            ("GPU-therm", 37500),
            ("AUX-therm", 36000),
            ("Tboard_tegra", 37000),
            ("PMIC-Die", 100000),
        ],
    )
    iio_rails(
        root,
        "1-0040",
        [("GPU", 1000, 1500, 1500), ("CPU", 1000, 311, 311), ("SOC", 1000, 932, 932)],
    )
    iio_rails(
        root, "1-0041", [("CV", 1000, 0, 0), ("VDDRQ", 1000, 621, 621), ("SYS5V", 5000, 296, 1482)]
    )
    return {"node": node}


def build_agx_orin(
    root: Path, jetpack: int = 6, mode_cap_hz: int = 612000000, emc: bool = True
) -> Dict[str, str]:
    """AGX Orin 64GB, JetPack 5.1 (R35.4.1) or 6 (R36.3.0), in MODE_30W (GPU capped at 612
    MHz); with ``emc`` the BPMP's EMC clock in debugfs (as root sees it)."""
    write(root, "/proc/device-tree/model", "NVIDIA Jetson AGX Orin Developer Kit\x00")
    write(
        root,
        "/proc/device-tree/compatible",
        "nvidia,p3737-0000+p3701-0005\x00nvidia,p3701-0005\x00nvidia,tegra234\x00",
    )
    if jetpack >= 6:
        write(
            root,
            "/etc/nv_tegra_release",
            "# R36 (release), REVISION: 3.0, GCID: 36191598, BOARD: generic, EABI: aarch64, DATE: Mon May  6 17:34:21 UTC 2024\n",
        )
        node = "/sys/devices/platform/bus@0/17000000.gpu/devfreq/17000000.gpu"
        of_name = "gpu"
        load = "/sys/devices/platform/bus@0/17000000.gpu/load"
        hw = (1, 2)
    else:
        write(
            root,
            "/etc/nv_tegra_release",
            "# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64, DATE: Tue Aug  1 19:57:35 UTC 2023\n",
        )
        node = "/sys/devices/17000000.ga10b/devfreq/17000000.ga10b"
        of_name = "ga10b"
        load = "/sys/devices/gpu.0/load"
        hw = (3, 4)
    devfreq_node(
        root, node, ORIN_HZ, min_hz=306000000, max_hz=mode_cap_hz, cur_hz=306000000, of_name=of_name
    )
    write(root, load, "625\n")
    decoy_devfreq(root, "15480000.nvdec", "nvdec")
    decoy_devfreq(root, "15340000.vic", "vic")
    # zone types: JetPack 5 spells them CPU-therm ... tj-therm, JetPack 6 cpu-thermal ...
    # (tests/data/sysfs/README.md)
    names = (
        ("cpu-thermal", "gpu-thermal", "soc0-thermal", "tj-thermal")
        if jetpack >= 6
        else ("CPU-therm", "GPU-therm", "SOC0-therm", "tj-therm")
    )
    thermal(root, list(zip(names, (53062, 47812, 48843, 53062))))
    hwmon_rails(
        root,
        "1-0040",
        hw[0],
        [("VDD_GPU_SOC", 5000, 641), ("VDD_CPU_CV", 5000, 881), ("VIN_SYS_5V0", 4992, 955)],
    )
    hwmon_rails(root, "1-0041", hw[1], [("NC", 0, 0), ("VDDQ_VDD2_1V8AO", 1800, 300), ("NC", 0, 0)])
    write(root, "/etc/nvpmodel.conf", ORIN_NVPMODEL_CONF)
    if emc:
        bpmp_emc(root, ORIN_EMC_KHZ)
    return {"node": node}


# -- fake tools ------------------------------------------------------------------------------
def _script(bin_dir: Path, name: str, body: str) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text(f"#!{sys.executable}\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


NVPMODEL = r"""
import os, re, sys
# Prints what the real nvpmodel prints (formats from tests/data/nvpmodel/): FAKE_NVPMODEL_PARSE,
# FAKE_NVPMODEL_QUERY and FAKE_NVPMODEL_M_OUTPUT name recorded outputs to print instead.
here = os.path.dirname(os.path.abspath(__file__))
state = os.path.join(here, "nvpmodel.state")
conf = os.path.join(os.environ["GOVERNOR_SYSFS_ROOT"], "etc", "nvpmodel.conf")
text = open(conf).read() if os.path.exists(conf) else ""
modes = dict((int(i), n) for i, n in re.findall(r"POWER_MODEL ID=(\d+) NAME=(\S+)", text))
default = re.search(r"PM_CONFIG DEFAULT=(\d+)", text)
current = int(open(state).read()) if os.path.exists(state) else int(default.group(1)) if default else 2
args = sys.argv[1:]
with open(os.path.join(here, "nvpmodel.log"), "a") as fh:
    fh.write(" ".join(args) + "\n")
def recorded(var):
    path = os.environ.get(var)
    if path:
        sys.stdout.write(open(path).read())
        sys.exit(0)
if args[:1] == ["-p"]:
    recorded("FAKE_NVPMODEL_PARSE")
    print("NVPM VERB: Config file: /etc/nvpmodel.conf")
    print("NVPM VERB: parsing done for /etc/nvpmodel.conf")
    for i in sorted(modes):
        print("NVPM VERB: POWER_MODEL: ID=%d NAME=%s" % (i, modes[i]))
elif args[:1] == ["-q"]:
    recorded("FAKE_NVPMODEL_QUERY")
    if "--verbose" in args:  # like the real one: the active mode's line only
        print("NVPM VERB: Current mode: NV Power Mode: %s" % modes[current])
        print(current)
        print("NVPM VERB: POWER_MODEL: ID=%d NAME=%s" % (current, modes[current]))
    else:
        print("NV Power Mode: %s" % modes[current])
        print(current)
elif args[:1] == ["-m"]:
    if os.environ.get("FAKE_NVPMODEL_DENY"):
        sys.stderr.write("NVPM ERROR: Permission denied: run as root\n")
        sys.exit(1)
    recorded("FAKE_NVPMODEL_M_OUTPUT")
    if not os.environ.get("FAKE_NVPMODEL_IGNORE"):
        with open(state, "w") as fh:
            fh.write(args[1])
else:
    sys.exit(2)
"""

JETSON_CLOCKS = r"""
import os, sys
node = os.path.join(os.environ["GOVERNOR_SYSFS_ROOT"], NODE.lstrip("/"))
args = sys.argv[1:]
if args[0] == "--store":
    with open(args[1], "w") as fh:
        for name in ("min_freq", "max_freq"):
            fh.write("%s:%s\n" % (name, open(os.path.join(node, name)).read().strip()))
elif args[0] == "--restore":
    for line in open(args[1]):
        name, value = line.strip().split(":")
        with open(os.path.join(node, name), "w") as fh:
            fh.write(value)
elif args[0] == "--show":
    print("SOC family:tegra234  Machine:NVIDIA Jetson AGX Orin Developer Kit")
else:
    sys.exit(2)
"""

TEGRASTATS = r"""
import sys, time
args = sys.argv[1:]
interval_ms = int(args[args.index("--interval") + 1]) if "--interval" in args else 1000
lines = [l for l in open(SOURCE).read().splitlines()]
while True:
    for line in lines:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
        time.sleep(interval_ms / 1000.0)
"""


def install_tools(
    bin_dir: Path, *, node: Optional[str] = None, tegrastats_source: Optional[Path] = None
) -> Path:
    """Write fake nvpmodel, jetson_clocks and (given a source log) tegrastats into ``bin_dir``."""
    _script(bin_dir, "nvpmodel", NVPMODEL)
    if node is not None:
        _script(bin_dir, "jetson_clocks", f"NODE = {node!r}\n" + JETSON_CLOCKS)
    if tegrastats_source is not None:
        _script(bin_dir, "tegrastats", f"SOURCE = {str(tegrastats_source)!r}\n" + TEGRASTATS)
    return bin_dir
