"""Files under the sysfs root: reading, the one write helper, and finding the GPU's devfreq node.

All paths are absolute paths of a real Jetson (``/sys/class/devfreq``) resolved under
:func:`sysfs_root`. Values are converted where read: Hz -> MHz, millidegrees -> °C,
load 0-1000 -> %.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from governor.errors import DevicePermissionError, GovernorError, TelemetryError

__all__ = [
    "GpuDevfreq",
    "SysfsRoot",
    "find_gpu_devfreq",
    "sysfs_root",
]

ROOT_ENV = "GOVERNOR_SYSFS_ROOT"

# of_node names and devfreq node names of Jetson GPUs (boards.md): Nano gm20b ("gpu"),
# TX2 gp10b, Xavier gv11b, Orin ga10b ("gpu" on JetPack 6), Thor gpu-gpc-0.
_GPU_OF_NAMES = ("gpu", "gm20b", "gp10b", "gv11b", "ga10b")
_GPU_NODE_SUFFIXES = (".gpu", ".gm20b", ".gp10b", ".gv11b", ".ga10b")
# Known node paths, tried when /sys/class/devfreq cannot be listed.
KNOWN_NODES = (
    "/sys/devices/gpu.0/devfreq/57000000.gpu",
    "/sys/devices/17000000.gp10b/devfreq/17000000.gp10b",
    "/sys/devices/17000000.gv11b/devfreq/17000000.gv11b",
    "/sys/devices/17000000.ga10b/devfreq/17000000.ga10b",
    "/sys/devices/platform/bus@0/17000000.gpu/devfreq/17000000.gpu",
    "/sys/class/devfreq/gpu-gpc-0",
)
# Where the GPU load (0-1000) lives when the devfreq node's device has none.
_LOAD_FILES = (
    "/sys/devices/gpu.0/load",
    "/sys/devices/platform/bus@0/17000000.gpu/load",
    "/sys/devices/platform/17000000.gpu/load",  # Orin Nano Super, JetPack 6 (sysfs/README)
    "/sys/devices/platform/gpu.0/load",
)


def sysfs_root() -> Path:
    """The directory standing for ``/`` (``GOVERNOR_SYSFS_ROOT``, default ``/``)."""
    return Path(os.environ.get(ROOT_ENV) or "/")


def _write_file(path: Path, text: str) -> None:
    """The only place the Jetson backend writes a file (tests replace it to simulate EACCES)."""
    with open(path, "w", encoding="ascii") as fh:
        fh.write(text)


class SysfsRoot:
    """Reads and writes under one root directory."""

    def __init__(self, root: Optional[Path] = None) -> None:
        self.root = Path(root) if root is not None else sysfs_root()

    def path(self, absolute: str) -> Path:
        """The file standing for the absolute Jetson path ``absolute``."""
        return self.root / absolute.lstrip("/")

    def exists(self, absolute: str) -> bool:
        return self.path(absolute).exists()

    def read(self, path: Path) -> str:
        """A file's text, stripped of whitespace and device-tree NULs.

        Raises:
            TelemetryError: the file cannot be read.
        """
        try:
            return path.read_text(encoding="utf-8", errors="replace").strip().strip("\x00").strip()
        except OSError as err:
            raise TelemetryError(f"cannot read {self.shown(path)}: {err.strerror or err}") from err

    def read_optional(self, path: Path) -> Optional[str]:
        try:
            return self.read(path)
        except TelemetryError:
            return None

    def read_number(self, path: Path) -> float:
        text = self.read(path)
        try:
            return float(text.split()[0])
        except (ValueError, IndexError):
            raise TelemetryError(f"{self.shown(path)} holds {text!r}, not a number") from None

    def write(self, path: Path, value: str) -> None:
        """Write ``value`` to a sysfs file.

        Raises:
            DevicePermissionError: EACCES/EPERM (not root), with how to get the right.
            GovernorError: any other failure (the driver rejected the value...).
        """
        try:
            _write_file(path, value)
        except OSError as err:
            if err.errno in (errno.EACCES, errno.EPERM):
                raise DevicePermissionError(
                    f"writing {self.shown(path)} needs root: run with sudo or use the governor daemon"
                ) from err
            raise GovernorError(
                f"cannot write {value!r} to {self.shown(path)}: {err.strerror or err}"
            ) from err

    def shown(self, path: Path) -> str:
        """``path`` as it would be on the board (the root stripped), for messages."""
        try:
            return "/" + str(Path(path).relative_to(self.root))
        except ValueError:
            return str(path)


def can_write(path: Path) -> bool:
    """Whether this process may write ``path`` (root may write any sysfs file)."""
    return os.access(path, os.W_OK)


class GpuDevfreq:
    """The GPU's devfreq node: its frequency table, min/max caps and current clock."""

    def __init__(self, fs: SysfsRoot, node: Path) -> None:
        self.fs = fs
        self.node = node
        self.name = node.name
        self.table_hz = self._read_table()

    def _read_table(self) -> Tuple[int, ...]:
        text = self.fs.read(self.node / "available_frequencies")
        values = []
        for word in text.split():
            try:
                values.append(int(word))
            except ValueError:
                raise TelemetryError(
                    f"unexpected {self.fs.shown(self.node / 'available_frequencies')}: {text!r}"
                ) from None
        if not values:
            raise TelemetryError(f"{self.fs.shown(self.node)} lists no GPU frequencies")
        return tuple(sorted(set(values)))

    @property
    def table_mhz(self) -> Tuple[float, ...]:
        return tuple(hz / 1e6 for hz in self.table_hz)

    def hz_for(self, mhz: float) -> int:
        """The table entry (Hz) nearest ``mhz`` (so 1300.5 MHz is written as 1300500000)."""
        return min(self.table_hz, key=lambda hz: abs(hz / 1e6 - mhz))

    def read_mhz(self, name: str) -> float:
        return self.fs.read_number(self.node / name) / 1e6

    def caps_mhz(self) -> Tuple[float, float]:
        return (self.read_mhz("min_freq"), self.read_mhz("max_freq"))

    def set_caps_mhz(self, min_mhz: float, max_mhz: float) -> List[str]:
        """Write min_freq/max_freq in the order devfreq accepts; returns the files written.

        Going up (new min above the current max) raises max_freq first; otherwise min_freq
        is written first, so min never exceeds max between the two writes.
        """
        lo, hi = self.hz_for(min_mhz), self.hz_for(max_mhz)
        current_max = self.fs.read_number(self.node / "max_freq")
        order = (
            [("max_freq", hi), ("min_freq", lo)]
            if lo > current_max
            else [("min_freq", lo), ("max_freq", hi)]
        )
        for name, hz in order:
            self.fs.write(self.node / name, str(hz))
        return [name for name, _ in order]

    def writable(self) -> bool:
        return can_write(self.node / "min_freq") and can_write(self.node / "max_freq")

    def load_pct(self) -> Optional[float]:
        """GPU load in % (the driver reports 0-1000), or None where there is no load file."""
        path = self.load_path()
        if path is None:
            return None
        return self.fs.read_number(path) / 10.0

    def load_path(self) -> Optional[Path]:
        candidates = [self.node / "device" / "load"] + [self.fs.path(p) for p in _LOAD_FILES]
        for path in candidates:
            if path.is_file():
                return path
        return None


def _of_name(fs: SysfsRoot, node: Path) -> str:
    return (fs.read_optional(node / "device" / "of_node" / "name") or "").lower()


def _is_gpu_node(fs: SysfsRoot, node: Path) -> bool:
    name = node.name.lower()
    if name.startswith("gpu-gpc") or name.endswith(_GPU_NODE_SUFFIXES):
        return True
    return _of_name(fs, node) in _GPU_OF_NAMES


def find_gpu_devfreq(fs: SysfsRoot) -> Optional[Path]:
    """The GPU's devfreq directory under the root, or None (not a Jetson, or no GPU node).

    Scans ``/sys/class/devfreq/*`` and matches the node's ``device/of_node/name`` or its
    name (boards.md lists the node of every generation), then falls back to the known paths.
    Thor has two GPU nodes (``gpu-gpc-0`` and ``gpu-nvd-0``): the GPC one is the SM clock.
    """
    klass = fs.path("/sys/class/devfreq")
    candidates: List[Path] = []
    try:
        entries = sorted(klass.iterdir())
    except OSError:
        entries = []
    for entry in entries:
        if (entry / "available_frequencies").exists() and _is_gpu_node(fs, entry):
            candidates.append(entry)
    if not candidates:
        candidates = [
            fs.path(p) for p in KNOWN_NODES if fs.path(p).joinpath("available_frequencies").exists()
        ]
    if not candidates:
        return None
    candidates.sort(key=lambda p: (not p.name.startswith("gpu-gpc"), p.name))
    return candidates[0]


def thermal_zones(fs: SysfsRoot) -> Dict[str, float]:
    """Zone type -> temperature in °C, from ``/sys/class/thermal/thermal_zone*``."""
    out: Dict[str, float] = {}
    base = fs.path("/sys/class/thermal")
    try:
        zones = sorted(base.glob("thermal_zone*"))
    except OSError:
        return out
    for zone in zones:
        kind = fs.read_optional(zone / "type")
        raw = fs.read_optional(zone / "temp")
        if not kind or raw is None:
            continue
        try:
            millidegrees = float(raw)
        except ValueError:
            continue
        if millidegrees <= -40000 or millidegrees >= 150000:  # offline sensors report -256 °C...
            continue
        out[kind] = millidegrees / 1000.0
    return out


def gpu_temperature_c(zones: Dict[str, float]) -> Optional[float]:
    """The GPU zone (``GPU-therm``, ``gpu-thermal``...) from :func:`thermal_zones`."""
    for kind, value in zones.items():
        if kind.lower().startswith("gpu"):
            return value
    return None
