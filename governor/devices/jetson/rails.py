"""INA3221 power rails in both sysfs layouts, each labelled with what it measures.

- JetPack 4 (L4T <= R32): ``/sys/bus/i2c/drivers/ina3221x/<bus>-<addr>/iio:device<N>/`` (or
  ``iio_device/``, the spelling of NVIDIA's TX2 guide) with
  ``rail_name_<c>``, ``in_power<c>_input`` (mW), ``in_voltage<c>_input`` (mV),
  ``in_current<c>_input`` (mA), c = 0..2.
- JetPack 5+ (L4T >= R34): ``/sys/bus/i2c/drivers/ina3221/<bus>-<addr>/hwmon/hwmon<N>/`` with
  ``in<c>_label``, ``in<c>_input`` (mV), ``curr<c>_input`` (mA), c = 1..3; power is V·I;
  ``in7`` is the shunt sum and is skipped; the hwmon number varies.
- Thor also carries an INA238 (hwmon ``name`` ``ina238``) on the board input, found through
  ``/sys/class/hwmon/hwmon*/name``. Its files follow the kernel's ina238 driver
  (Documentation/hwmon/ina238.rst): ``in1_input`` bus voltage (mV), ``curr1_input`` (mA),
  ``power1_input`` (**uW**); ``in0_input`` is the shunt voltage, not a rail. The upstream driver
  has no ``in1_label``; the chip's ``label`` file is used when the device tree gives one, else
  the name tegrastats prints for it on Thor, ``VIN``. Whatever its label, it is the board input.

No Jetson has a GPU-only rail except the Nano (POM_5V_GPU), TX2 (VDD_SYS_GPU), AGX Xavier
(GPU) and Thor (VDD_GPU), so :func:`best_rail` picks the narrowest rail that includes the GPU.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from governor.devices.base import Rail
from governor.devices.jetson.sysfs import SysfsRoot

__all__ = ["RailSource", "best_rail", "find_input_rails", "find_rails", "rail_scope"]

# Rail names (tegrastats and sysfs labels, boards.md) -> base.SCOPES.
_SCOPES: Dict[str, str] = {
    "POM_5V_IN": "board input",
    "VDD_IN": "board input",
    "VIN": "board input",
    "POM_5V_GPU": "gpu",
    "VDD_SYS_GPU": "gpu",
    "VDD_GPU": "gpu",
    "GPU": "gpu",
    "VDD_GPU_SOC": "gpu+soc",
    "VDD_CPU_GPU_CV": "cpu+gpu+cv",
    "POM_5V_CPU": "cpu",
    "VDD_SYS_CPU": "cpu",
    "VDD_CPU": "cpu",
    "CPU": "cpu",
    "VDD_CPU_CV": "cpu+cv",
    "VDD_SOC": "soc",
    "VDD_SYS_SOC": "soc",
    "SOC": "soc",
    # Thor's CPU+SoC+memory-subsystem rail: SCOPES has no "cpu+soc", and it excludes the GPU
    "VDD_CPU_SOC_MSS": "soc",
    "CV": "cv",
    "VDDRQ": "memory",
    "VDD_SYS_DDR": "memory",
    "VDD_DDR": "memory",  # TX2 on L4T R32 (tegrastats)
    "VDDQ_VDD2_1V8AO": "memory",
    "SYS5V": "system",
    "VIN_SYS_5V0": "system",
    "VDD_4V0_WIFI": "system",
    "VDD_WIFI": "system",
}
# How narrow each GPU-including scope is (smaller is narrower).
_GPU_RANK = {"gpu": 0, "gpu+soc": 1, "cpu+gpu+cv": 2, "module": 3, "board input": 4}


def rail_scope(name: str) -> str:
    """What rail ``name`` measures (one of ``base.SCOPES``); unknown rails count as "system"."""
    return _SCOPES.get(name.strip().upper(), "system")


def best_rail(rails: Sequence[Rail]) -> Optional[Rail]:
    """The narrowest rail that includes the GPU; else the board input; else None."""
    ranked = [(r.scope in _GPU_RANK, _GPU_RANK.get(r.scope, 99), i) for i, r in enumerate(rails)]
    usable = [x for x in ranked if x[0]]
    if not usable:
        return None
    return rails[min(usable, key=lambda x: (x[1], x[2]))[2]]


@dataclass(frozen=True)
class _Channel:
    name: str
    power: Optional[Path]  # see power_per_w; None: compute from voltage and current
    voltage: Path  # mV
    current: Path  # mA
    power_per_w: float = 1000.0  # units of ``power`` in one W: mW (INA3221 iio), uW (INA238)
    scope: Optional[str] = None  # None: from the name (rail_scope)


class RailSource:
    """The INA3221 channels found under a root; :meth:`read` returns Rails in W."""

    def __init__(self, fs: SysfsRoot, channels: Sequence[_Channel], layout: str) -> None:
        self.fs = fs
        self.channels = tuple(channels)
        self.layout = layout  # "iio" (JetPack 4) or "hwmon" (JetPack 5+)

    @property
    def names(self) -> List[str]:
        return [c.name for c in self.channels]

    def read(self) -> List[Rail]:
        """Every rail, in W with V and A.

        Raises:
            TelemetryError: a rail file vanished or holds garbage.
        """
        rails = []
        for ch in self.channels:
            volts = self.fs.read_number(ch.voltage) / 1000.0
            amps = self.fs.read_number(ch.current) / 1000.0
            if ch.power is not None:
                watts = self.fs.read_number(ch.power) / ch.power_per_w
            else:
                watts = volts * amps
            scope = ch.scope or rail_scope(ch.name)
            rails.append(Rail(ch.name, watts, scope, volts, amps))
        return rails


def _usable(name: Optional[str]) -> bool:
    if not name:
        return False
    return name.upper() not in ("NC", "N/A", "") and "SUM" not in name.upper()


def _iio_devices(fs: SysfsRoot) -> List[Path]:
    """The iio directories of the INA3221s: ``<bus>-<addr>/iio:device<N>``, or
    ``<bus>-<addr>/iio_device`` as NVIDIA's TX2 guide writes it; one per monitor."""
    base = fs.path("/sys/bus/i2c/drivers/ina3221x")
    found: List[Path] = []
    seen = set()
    for dev in sorted(base.glob("*/iio:device*")) + sorted(base.glob("*/iio_device")):
        key = os.path.realpath(str(dev))
        if dev.is_dir() and key not in seen:
            seen.add(key)
            found.append(dev)
    return sorted(found, key=lambda d: d.parent.name)


def _iio_channels(fs: SysfsRoot) -> List[_Channel]:
    out = []
    for dev in _iio_devices(fs):
        for c in range(3):
            name = fs.read_optional(dev / f"rail_name_{c}")
            power = dev / f"in_power{c}_input"
            if name is not None and _usable(name) and power.exists():
                out.append(
                    _Channel(
                        name.strip(),
                        power,
                        dev / f"in_voltage{c}_input",
                        dev / f"in_current{c}_input",
                    )
                )
    return out


def _hwmon_channels(fs: SysfsRoot) -> List[_Channel]:
    out = []
    base = fs.path("/sys/bus/i2c/drivers/ina3221")
    for dev in sorted(base.glob("*/hwmon/hwmon*")):
        for c in (1, 2, 3):  # in7 is the shunt-voltage sum, not a rail
            name = fs.read_optional(dev / f"in{c}_label")
            volts, amps = dev / f"in{c}_input", dev / f"curr{c}_input"
            if name is not None and _usable(name) and volts.exists() and amps.exists():
                out.append(_Channel(name.strip(), None, volts, amps))
    return out


def _ina238_channels(fs: SysfsRoot) -> List[_Channel]:
    """The INA238 board-input monitors (Thor), by hwmon ``name``."""
    out = []
    for dev in sorted(fs.path("/sys/class/hwmon").glob("hwmon*")):
        if (fs.read_optional(dev / "name") or "").strip().lower() != "ina238":
            continue
        power, volts, amps = dev / "power1_input", dev / "in1_input", dev / "curr1_input"
        if not (power.exists() and volts.exists() and amps.exists()):
            continue
        label = (fs.read_optional(dev / "label") or "").strip() or "VIN"
        out.append(_Channel(label, power, volts, amps, power_per_w=1e6, scope="board input"))
    return out


def find_input_rails(fs: SysfsRoot) -> Optional[RailSource]:
    """Only the board-input monitors outside the INA3221s (Thor's INA238), or None."""
    channels = _ina238_channels(fs)
    return RailSource(fs, channels, "hwmon") if channels else None


def find_rails(fs: SysfsRoot) -> Optional[RailSource]:
    """The INA3221 rails under the root (JetPack 5+ layout first) and Thor's INA238 input
    rail, or None if there are none."""
    for layout, finder in (("hwmon", _hwmon_channels), ("iio", _iio_channels)):
        channels = finder(fs)
        if layout == "hwmon":
            channels += _ina238_channels(fs)
        if channels:
            return RailSource(fs, channels, layout)
    return None
