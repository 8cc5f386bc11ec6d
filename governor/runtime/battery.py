"""Reading a battery's remaining energy from ``/sys/class/power_supply``.

The root directory follows ``GOVERNOR_SYSFS_ROOT`` (default ``/``) like the Jetson backend,
so tests build a real file tree. Kernel units: ``energy_now`` µWh; ``charge_now`` µAh with
``voltage_now`` µV (or ``voltage_min_design``). The first supply whose ``type`` is
``Battery`` is used unless a name is given. ``energy_full`` / ``charge_full`` give the full
capacity (a battery policy's reserve is a share of it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from governor.errors import DeviceNotFoundError, TelemetryError

__all__ = ["SysfsBattery", "find_battery"]


def _root() -> Path:
    return Path(os.environ.get("GOVERNOR_SYSFS_ROOT") or "/")


class SysfsBattery:
    """A callable returning the battery's remaining energy in J."""

    def __init__(self, name: Optional[str] = None, root: Optional[Path] = None) -> None:
        base = Path(root) if root is not None else _root()
        supplies = base / "sys/class/power_supply"
        if name is not None:
            self.path = supplies / name
            if not self.path.is_dir():
                raise DeviceNotFoundError(f"no power supply {name!r} under {supplies}")
        else:
            found = None
            for entry in sorted(supplies.glob("*")) if supplies.is_dir() else []:
                try:
                    kind = (entry / "type").read_text().strip()
                except OSError:
                    continue
                if kind == "Battery":
                    found = entry
                    break
            if found is None:
                raise DeviceNotFoundError(f"no battery under {supplies}")
            self.path = found
        self.name = self.path.name

    def _read(self, key: str) -> Optional[float]:
        try:
            return float((self.path / key).read_text().strip())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as err:
            raise TelemetryError(f"cannot read battery {self.path / key}: {err}") from err

    def remaining_j(self) -> float:
        energy = self._read("energy_now")
        if energy is not None:
            return energy * 1e-6 * 3600.0
        charge = self._read("charge_now")
        volts = self._read("voltage_now") or self._read("voltage_min_design")
        if charge is not None and volts:
            return charge * 1e-6 * volts * 1e-6 * 3600.0
        raise TelemetryError(
            f"battery {self.path} reports neither energy_now nor charge_now with a voltage"
        )

    def capacity_j(self) -> Optional[float]:
        """The full charge in J (``energy_full``, or ``charge_full`` × voltage); None when
        the battery does not say."""
        energy = self._read("energy_full")
        if energy is not None:
            return energy * 1e-6 * 3600.0
        charge = self._read("charge_full")
        volts = self._read("voltage_now") or self._read("voltage_min_design")
        if charge is not None and volts:
            return charge * 1e-6 * volts * 1e-6 * 3600.0
        return None

    __call__ = remaining_j


def find_battery() -> Optional[SysfsBattery]:
    """The system's battery under ``/sys/class/power_supply`` (root from
    ``GOVERNOR_SYSFS_ROOT``), or None when there is none or it reports no energy."""
    try:
        battery = SysfsBattery()
        battery.remaining_j()
    except (DeviceNotFoundError, TelemetryError):
        return None
    return battery
