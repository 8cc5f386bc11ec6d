"""The device interface every backend implements.

The base class owns policy: validating and snapping requested clocks, checking capabilities,
journaling the original state before any write, restoring it (safe to repeat). Backends own
I/O only, through the underscored hooks (``_read_sample``, ``_write_gpu_clocks``...).

Units follow the names: clocks in MHz (floats: Jetson has 1300.5), power in W, energy in J,
time in s, temperature in °C. Backends convert from mW/mJ/Hz/kHz where they read.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, FrozenSet, Optional, Sequence, Tuple

from governor.devices.journal import Journal
from governor.errors import InvalidRequestError, UnsupportedError
from governor.timebase import Clock, WallClock

__all__ = [
    "SCOPES",
    "THROTTLE_REASONS",
    "Capabilities",
    "Device",
    "DeviceState",
    "Identity",
    "PowerLimitRange",
    "Rail",
    "Sample",
]

log = logging.getLogger("governor.devices")

# What a power figure covers. No Jetson has a GPU-only rail; NVML may report module power.
SCOPES = (
    "gpu",  # the GPU alone (NVML on a discrete board: the whole card)
    "gpu+soc",  # AGX Orin VDD_GPU_SOC, TX2 VDD_SYS_GPU is gpu
    "cpu+gpu+cv",  # Xavier NX / Orin NX / Orin Nano VDD_CPU_GPU_CV
    "cpu",
    "cpu+cv",
    "soc",
    "cv",
    "memory",
    "system",  # 5 V system rail, Wi-Fi and the like
    "module",  # the sum of the module's rails (no input rail on AGX boards)
    "board input",  # the module's input rail (VDD_IN, POM_5V_IN, VIN)
)

# Why the GPU runs below the clock asked for (NVML "clocks event reasons", Jetson equivalents).
THROTTLE_REASONS = (
    "idle",
    "clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "sync_boost",
    "sw_thermal",
    "hw_thermal",
    "hw_power_brake",
    "display_clock",
)


@dataclass(frozen=True)
class Identity:
    """Who a device is. ``model`` is the catalog name when known (``agx-orin``, ``a100-pcie``)."""

    uri: str
    kind: str
    name: str
    model: str
    serial: Optional[str] = None
    uuid: Optional[str] = None
    driver_version: Optional[str] = None
    l4t_version: Optional[str] = None
    key: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Capabilities:
    """What a device can read and set, probed once when it is opened."""

    power: bool = False
    energy_counter: bool = False
    rails: bool = False
    gpu_clock: bool = False
    mem_clock: bool = False
    temperature: bool = False
    utilisation: bool = False
    throttle_reasons: bool = False
    lock_gpu_clocks: bool = False
    lock_mem_clock: bool = False
    power_limit: bool = False
    power_mode: bool = False

    def to_dict(self) -> Dict[str, bool]:
        return asdict(self)


@dataclass(frozen=True)
class PowerLimitRange:
    """The power limits a device accepts, in W."""

    min_w: float
    max_w: float
    default_w: float

    def __post_init__(self) -> None:
        if not (0 < self.min_w <= self.default_w <= self.max_w):
            raise ValueError(f"inconsistent power limit range {self}")


@dataclass(frozen=True)
class Rail:
    """One power reading: a named rail (or sensor) and what it covers (see ``SCOPES``)."""

    name: str
    power_w: float
    scope: str
    voltage_v: Optional[float] = None
    current_a: Optional[float] = None


@dataclass(frozen=True)
class Sample:
    """One telemetry reading. Any field a device cannot read is None.

    ``power_w`` is the device's best single figure for the GPU (or the board when the GPU has
    no rail of its own); ``power_scope`` says which. ``energy_j`` is a monotonic counter with
    an arbitrary origin, present only where the hardware keeps one.
    """

    t_s: float
    power_w: Optional[float] = None
    power_scope: Optional[str] = None
    rails: Tuple[Rail, ...] = ()
    energy_j: Optional[float] = None
    gpu_clock_mhz: Optional[float] = None
    mem_clock_mhz: Optional[float] = None
    temperature_c: Optional[float] = None
    utilisation_pct: Optional[float] = None
    throttle_reasons: FrozenSet[str] = field(default_factory=frozenset)

    def rail(self, name: str) -> Optional[Rail]:
        for rail in self.rails:
            if rail.name == name:
                return rail
        return None

    def to_dict(self) -> Dict[str, Any]:
        """The keys of ``governor monitor --json`` (see specs/cli-json.md), and a few more."""
        return {
            "t_s": self.t_s,
            "gpu_clock_mhz": self.gpu_clock_mhz,
            "mem_clock_mhz": self.mem_clock_mhz,
            "rails": {r.name: {"power_w": r.power_w, "scope": r.scope} for r in self.rails},
            "power_w": self.power_w,
            "scope": self.power_scope,
            "energy_j": self.energy_j,
            "temperature_c": self.temperature_c,
            "utilisation_pct": self.utilisation_pct,
            "throttle_reasons": sorted(self.throttle_reasons),
        }


@dataclass(frozen=True)
class DeviceState:
    """The settings governor may change. ``None`` means the driver's default (not locked)."""

    gpu_clocks_mhz: Optional[Tuple[float, float]] = None
    mem_clock_mhz: Optional[float] = None
    power_limit_w: Optional[float] = None
    power_mode: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        return {
            "gpu_clocks_mhz": list(self.gpu_clocks_mhz) if self.gpu_clocks_mhz else None,
            "mem_clock_mhz": self.mem_clock_mhz,
            "power_limit_w": self.power_limit_w,
            "power_mode": self.power_mode,
        }


def _finite(value: float, what: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidRequestError(f"{what} must be a number, not {value!r}") from None
    if not math.isfinite(number):
        raise InvalidRequestError(f"{what} must be finite, not {value!r}")
    return number


class Device:
    """A GPU or board governor can read and (where capable and permitted) control.

    Use as a context manager: leaving the block restores every setting governor changed.
    Subclasses set ``identity`` and ``capabilities`` at open and implement the hooks.
    """

    #: clocks closer than this to a table entry count as that entry (MHz)
    CLOCK_TOLERANCE_MHZ = 0.5

    def __init__(
        self,
        identity: Identity,
        capabilities: Capabilities,
        *,
        clock: Optional[Clock] = None,
        journal: Optional[Journal] = None,
    ) -> None:
        self.identity = identity
        self.capabilities = capabilities
        self.clock: Clock = clock if clock is not None else WallClock()
        self.journal = journal if journal is not None else Journal(identity.uri)
        self._closed = False

    # -- description -----------------------------------------------------------------
    @property
    def uri(self) -> str:
        return self.identity.uri

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.identity.uri} ({self.identity.name})>"

    def supported_clocks_mhz(self) -> Tuple[float, ...]:
        """GPU clocks the device can be locked to, ascending (MHz)."""
        return tuple(sorted(self._supported_clocks_mhz()))

    def supported_mem_clocks_mhz(self) -> Tuple[float, ...]:
        """Memory clocks the device can be locked to, ascending (MHz); empty if none."""
        return tuple(sorted(self._supported_mem_clocks_mhz()))

    def power_limit_range(self) -> Optional[PowerLimitRange]:
        """The power limits the device accepts (W), or None if it has no settable limit."""
        return None

    def power_modes(self) -> Tuple[str, ...]:
        """Named power modes (nvpmodel) the device can switch to; empty if none."""
        return ()

    def control_permitted(self) -> bool:
        """Whether this process may change settings now (root, or a daemon holding the right)."""
        return True

    def control_reason(self) -> Optional[str]:
        """Why settings cannot be changed here, in one line; None when they can."""
        caps = self.capabilities
        if not (caps.lock_gpu_clocks or caps.lock_mem_clock or caps.power_limit or caps.power_mode):
            return "nothing can be set on this device"
        return None if self.control_permitted() else "not permitted for this user"

    # -- reading ---------------------------------------------------------------------
    def sample(self) -> Sample:
        """One telemetry reading, stamped with this device's clock.

        Raises:
            TelemetryError: the sensors could not be read.
        """
        return self._read_sample()

    def state(self) -> DeviceState:
        """The current settings (what a restore would bring back to)."""
        return self._read_state()

    # -- clocks ----------------------------------------------------------------------
    def snap_clock_mhz(self, clock_mhz: float, *, strict: bool = False, mem: bool = False) -> float:
        """The supported clock nearest ``clock_mhz`` (MHz).

        Raises:
            InvalidRequestError: outside the supported range, or (``strict``) not in the table.
        """
        what = "memory clock" if mem else "GPU clock"
        value = _finite(clock_mhz, what)
        table = self.supported_mem_clocks_mhz() if mem else self.supported_clocks_mhz()
        if not table:
            raise UnsupportedError(f"{self.uri} reports no supported {what}s")
        tol = self.CLOCK_TOLERANCE_MHZ
        lo, hi = table[0], table[-1]
        if value < lo - tol or value > hi + tol:
            raise InvalidRequestError(
                f"{what} {value:g} MHz is outside the range {lo:g}-{hi:g} MHz of {self.identity.name}"
            )
        nearest = min(table, key=lambda c: (abs(c - value), c))
        if abs(nearest - value) > tol:
            if strict:
                below = max((c for c in table if c < value), default=lo)
                above = min((c for c in table if c > value), default=hi)
                raise InvalidRequestError(
                    f"{what} {value:g} MHz is not supported by {self.identity.name}; "
                    f"nearest are {below:g} and {above:g} MHz"
                )
            log.info("%s: %s %g MHz snapped to %g MHz", self.uri, what, value, nearest)
        return nearest

    def lock_gpu_clocks(
        self, min_mhz: float, max_mhz: Optional[float] = None, *, strict: bool = False
    ) -> Tuple[float, float]:
        """Lock the GPU clock to ``[min_mhz, max_mhz]`` (one clock when ``max_mhz`` is None).

        Requested clocks are snapped to the nearest supported clock (``strict`` rejects them
        instead). Returns the range applied, in MHz.

        Raises:
            UnsupportedError, InvalidRequestError, DevicePermissionError.
        """
        self._require("lock_gpu_clocks", "locking the GPU clock")
        lo = self.snap_clock_mhz(min_mhz, strict=strict)
        hi = lo if max_mhz is None else self.snap_clock_mhz(max_mhz, strict=strict)
        if lo > hi:
            raise InvalidRequestError(f"minimum clock {lo:g} MHz is above maximum {hi:g} MHz")
        self._change("gpu_clocks", lambda: self._write_gpu_clocks(lo, hi))
        log.info("%s: GPU clock locked to %g-%g MHz", self.uri, lo, hi)
        return (lo, hi)

    def reset_gpu_clocks(self) -> None:
        """Let the driver choose the GPU clock again."""
        self._require("lock_gpu_clocks", "resetting the GPU clock")
        self._change("gpu_clocks", self._reset_gpu_clocks)

    def lock_mem_clock(self, clock_mhz: Optional[float]) -> Optional[float]:
        """Lock the memory clock (MHz; None unlocks). Returns the clock applied."""
        self._require("lock_mem_clock", "locking the memory clock")
        value = None if clock_mhz is None else self.snap_clock_mhz(clock_mhz, mem=True)
        self._change("mem_clock", lambda: self._write_mem_clock(value))
        return value

    def set_power_limit(self, power_w: float) -> float:
        """Set the board power limit (W) within the device's range. Returns the limit set.

        Raises:
            UnsupportedError, InvalidRequestError, DevicePermissionError.
        """
        self._require("power_limit", "setting a power limit")
        value = _finite(power_w, "power limit")
        limits = self.power_limit_range()
        if limits is None:
            raise UnsupportedError(f"{self.uri} reports no power-limit range")
        if not (limits.min_w <= value <= limits.max_w):
            raise InvalidRequestError(
                f"power limit {value:g} W is outside {limits.min_w:g}-{limits.max_w:g} W "
                f"for {self.identity.name}"
            )
        self._change("power_limit", lambda: self._write_power_limit(value))
        return value

    def set_power_mode(self, mode: str) -> str:
        """Switch to a named power mode (nvpmodel). Returns the mode set."""
        self._require("power_mode", "switching power modes")
        modes = self.power_modes()
        if mode not in modes:
            raise InvalidRequestError(
                f"unknown power mode {mode!r} for {self.identity.name}; known: {', '.join(modes)}"
            )
        self._change("power_mode", lambda: self._write_power_mode(mode))
        return mode

    # -- restore ---------------------------------------------------------------------
    @property
    def changed(self) -> bool:
        """Whether governor changed something it has not restored yet."""
        return bool(self.journal)

    def restore(self) -> Dict[str, Any]:
        """Put back every journaled setting (safe to repeat). Returns field -> value restored."""
        restored: Dict[str, Any] = {}
        for name, original in ((f, self.journal.originals()[f]) for f in self.journal.fields()):
            self._apply_original(name, original)
            self.journal.forget(name)
            restored[name] = original
            log.info("%s: restored %s to %r", self.uri, name, original)
        return restored

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._close()

    def __enter__(self) -> Device:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.restore()
        finally:
            self.close()

    # -- internals -------------------------------------------------------------------
    def _require(self, capability: str, doing: str) -> None:
        if not getattr(self.capabilities, capability):
            raise UnsupportedError(f"{self.identity.name} ({self.uri}) does not support {doing}")

    def _current(self, name: str) -> Any:
        state = self._read_state()
        if name == "gpu_clocks":
            return list(state.gpu_clocks_mhz) if state.gpu_clocks_mhz else None
        return {
            "mem_clock": state.mem_clock_mhz,
            "power_limit": state.power_limit_w,
            "power_mode": state.power_mode,
        }[name]

    def _change(self, name: str, write: Callable[[], None]) -> None:
        """Journal the original of ``name`` (first change only), then write. A write that
        fails leaves nothing to undo, so an entry this call made is dropped again."""
        original = self._current(name)
        recorded = self.journal.record(name, original)
        if recorded:
            log.debug("%s: journaled original %s=%r", self.uri, name, original)
        try:
            write()
        except BaseException:
            if recorded:
                self.journal.forget(name)
            raise

    def _apply_original(self, name: str, original: Any) -> None:
        if name == "gpu_clocks":
            if original is None:
                self._reset_gpu_clocks()
            else:
                self._write_gpu_clocks(float(original[0]), float(original[1]))
        elif name == "mem_clock":
            self._write_mem_clock(None if original is None else float(original))
        elif name == "power_limit":
            if original is not None:
                self._write_power_limit(float(original))
        elif name == "power_mode":
            if original is not None:
                self._write_power_mode(str(original))

    # -- backend hooks ---------------------------------------------------------------
    def _supported_clocks_mhz(self) -> Sequence[float]:
        return ()

    def _supported_mem_clocks_mhz(self) -> Sequence[float]:
        return ()

    def _read_sample(self) -> Sample:  # pragma: no cover - every backend overrides
        raise NotImplementedError

    def _read_state(self) -> DeviceState:
        return DeviceState()

    def _write_gpu_clocks(self, min_mhz: float, max_mhz: float) -> None:
        raise UnsupportedError(f"{self.uri} cannot lock GPU clocks")

    def _reset_gpu_clocks(self) -> None:
        raise UnsupportedError(f"{self.uri} cannot reset GPU clocks")

    def _write_mem_clock(self, clock_mhz: Optional[float]) -> None:
        raise UnsupportedError(f"{self.uri} cannot lock the memory clock")

    def _write_power_limit(self, power_w: float) -> None:
        raise UnsupportedError(f"{self.uri} cannot set a power limit")

    def _write_power_mode(self, mode: str) -> None:
        raise UnsupportedError(f"{self.uri} cannot switch power modes")

    def _close(self) -> None:
        pass
