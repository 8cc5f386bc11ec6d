"""The device interface every backend implements.

The base class owns policy: validating and snapping requested clocks, checking capabilities,
journaling the original state before any write, restoring it (safe to repeat). Backends own
I/O only, through the underscored hooks (``_read_sample``, ``_write_gpu_clocks``...).

Units follow the names: clocks in MHz (floats: Jetson has 1300.5), power in W, energy in J,
time in s, temperature in °C. Backends convert from mW/mJ/Hz/kHz where they read.
"""

from __future__ import annotations

import bisect
import logging
import math
from dataclasses import asdict, dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    FrozenSet,
    List,
    Optional,
    Sequence,
    Tuple,
    Type,
    TypedDict,
    TypeVar,
)

from governor.devices.journal import Journal, check_value
from governor.errors import InvalidRequestError, TelemetryError, UnsupportedError
from governor.timebase import Clock, WallClock

if TYPE_CHECKING:  # pragma: no cover
    from governor.devices.ownership import Ownership

__all__ = [
    "SCOPES",
    "THROTTLE_REASONS",
    "board_power_w",
    "Capabilities",
    "Device",
    "DeviceState",
    "frozen_record",
    "Identity",
    "PowerLimitRange",
    "Rail",
    "RecordedDevice",
    "RecordedRow",
    "Sample",
    "WorkloadDevice",
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
    "whole GPU",  # a MIG instance: NVML reports its parent GPU's power
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
    """Who a device is. ``model`` is the catalog name when known (``agx-orin``, ``a100-pcie``).

    ``key`` is the physical identity that locks and journals are keyed by, however the device
    was spelled: ``nvml:GPU-<uuid>`` (the whole GPU, for a MIG instance too), ``jetson:<real
    path of the devfreq node>``. None for in-process boards (they fall back to ``uri``).
    """

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
    #: the whole board's input power (W) where the backend knows it beyond a "board input"
    #: rail (the sum of an AGX module's rails through its regulators, a card's NVML power)
    board_power_w: Optional[float] = None

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
            "board_power_w": board_power_w(self),
        }


_R = TypeVar("_R")
# frozen_record's classes: their field names, in order and as a set
_RECORD_FIELDS: Dict[type, Tuple[Tuple[str, ...], Any]] = {}


def frozen_record(cls: Type[_R], fields: Dict[str, Any]) -> _R:
    """An instance of the frozen dataclass ``cls`` whose fields are ``fields``, every field
    by name, built without the generated ``__init__`` (which sets each field through
    ``object.__setattr__``: about a fifth of a simulated power-cap control step went to
    building its Sample, Rails and Observation). ``fields`` becomes the record's
    ``__dict__``: the call takes the dict over (pass a fresh one, a dict display, which
    also costs less than keyword arguments). Equal to ``cls(**fields)`` (checked in
    tests/devices/test_sim_read_path.py).

    Raises:
        TypeError: a field is missing or unknown, or ``cls`` validates in ``__post_init__``
            (which this would skip).
    """
    known = _RECORD_FIELDS.get(cls)
    if known is None:  # first use of cls: its field names, once it is known not to validate
        names = getattr(cls, "__dataclass_fields__").keys()  # noqa: B009 - a dataclass type
        if hasattr(cls, "__post_init__"):
            raise TypeError(
                f"{cls.__name__} validates in __post_init__: build it as {cls.__name__}(...)"
            )
        known = _RECORD_FIELDS[cls] = (tuple(names), names)
    # the fields in the dataclass's order (every call site here): one tuple comparison;
    # in another order, the names as a set
    if tuple(fields) != known[0] and fields.keys() != known[1]:
        raise TypeError(f"{cls.__name__} is built with exactly the fields {list(known[0])}")
    record = object.__new__(cls)
    object.__setattr__(record, "__dict__", fields)
    return record


def board_power_w(sample: Sample) -> Optional[float]:
    """The whole board's input power (W) in ``sample``: the backend's figure, else a rail
    labelled "board input" (``VDD_IN``, ``POM_5V_IN``); None when neither is there."""
    if sample.board_power_w is not None:
        return sample.board_power_w
    for rail in sample.rails:
        if rail.scope == "board input":
            return rail.power_w
    return None


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

    #: whether changes outlive this process (real hardware): the owner then takes the device
    #: lock and keeps its journal on disk; simulated boards keep both in memory
    persistent_state = True

    def __init__(
        self,
        identity: Identity,
        capabilities: Capabilities,
        *,
        clock: Optional[Clock] = None,
    ) -> None:
        self.identity = identity
        self.capabilities = capabilities
        self.clock: Clock = clock if clock is not None else WallClock()
        self._ownership: Optional[Ownership] = None
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

    def parts(self) -> List[Dict[str, Any]]:
        """Devices inside this one that can be opened on their own (MIG instances of an NVML
        GPU): ``{"uri", "name", "power_scope"}`` each; empty for most devices."""
        return []

    def control_notes(self) -> List[str]:
        """Things on the device that may override the clocks governor sets (say, an NVML
        workload power profile), one line each; empty when nothing does."""
        return []

    def device_nodes(self) -> Tuple[str, ...]:
        """The device files (``/dev/nvidia0``) a process must be able to open to use this
        device; empty where there are none (simulated boards, sysfs devices)."""
        return ()

    def fault_counts(self) -> Dict[str, int]:
        """Driver faults absorbed so far: ``transient_retries`` (calls tried again after a
        transient error) and ``transient_failures`` (calls that still failed); zeros for
        devices without a driver that has transient errors."""
        return {"transient_retries": 0, "transient_failures": 0}

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

    def energy_counter_j(self) -> Optional[float]:
        """The hardware energy counter of the GPU figure (J, arbitrary origin) read on its own,
        cheaper than a whole :meth:`sample`; None on a device without one.

        Raises:
            TelemetryError: the counter could not be read.
        """
        if not self.capabilities.energy_counter:
            return None
        return self._read_energy_counter_j()

    def board_input_rail(self) -> Optional[str]:
        """The name of the rail that measures the whole board's input (``VDD_IN``...), or
        None when the device reports none."""
        try:
            rails = self.sample().rails
        except TelemetryError:
            return None
        for rail in rails:
            if rail.scope == "board input":
                return rail.name
        return None

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
        i = bisect.bisect_left(table, value)  # the table is ascending: two neighbours
        if i < len(table) and table[i] == value:
            return table[i]  # a table clock (a controller's every request): nothing to check
        tol = self.CLOCK_TOLERANCE_MHZ
        lo, hi = table[0], table[-1]
        if value < lo - tol or value > hi + tol:
            raise InvalidRequestError(
                f"{what} {value:g} MHz is outside the range {lo:g}-{hi:g} MHz of {self.identity.name}"
            )
        below, above = table[max(i - 1, 0)], table[min(i, len(table) - 1)]
        nearest = below if abs(below - value) <= abs(above - value) else above
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
            UnsupportedError: the device cannot lock its GPU clock.
            InvalidRequestError: a clock it does not support (``strict``), or min above max.
            DevicePermissionError: this process may not change the clock.
        """
        self._require("lock_gpu_clocks", "locking the GPU clock")
        lo = self.snap_clock_mhz(min_mhz, strict=strict)
        hi = lo if max_mhz is None else self.snap_clock_mhz(max_mhz, strict=strict)
        if lo > hi:
            raise InvalidRequestError(f"minimum clock {lo:g} MHz is above maximum {hi:g} MHz")
        self._change("gpu_clocks", lambda: self._write_gpu_clocks(lo, hi), [lo, hi])
        if log.isEnabledFor(logging.INFO):  # (a controller locks up to ten times a second)
            log.info("%s: GPU clock locked to %g-%g MHz", self.uri, lo, hi)
        return (lo, hi)

    def reset_gpu_clocks(self) -> None:
        """Let the driver choose the GPU clock again."""
        self._require("lock_gpu_clocks", "resetting the GPU clock")
        self._change("gpu_clocks", self._reset_gpu_clocks, None)

    def lock_mem_clock(self, clock_mhz: Optional[float]) -> Optional[float]:
        """Lock the memory clock (MHz; None unlocks). Returns the clock applied."""
        self._require("lock_mem_clock", "locking the memory clock")
        value = None if clock_mhz is None else self.snap_clock_mhz(clock_mhz, mem=True)
        self._change("mem_clock", lambda: self._write_mem_clock(value), value)
        return value

    def set_power_limit(self, power_w: float) -> float:
        """Set the board power limit (W) within the device's range. Returns the limit set.

        Raises:
            UnsupportedError: the device has no settable power limit.
            InvalidRequestError: a limit that is not a number or is outside the range.
            DevicePermissionError: this process may not change the limit.
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
        self._change("power_limit", lambda: self._write_power_limit(value), value)
        return value

    def set_power_mode(self, mode: str) -> str:
        """Switch to a named power mode (nvpmodel). Returns the mode set."""
        self._require("power_mode", "switching power modes")
        modes = self.power_modes()
        if mode not in modes:
            raise InvalidRequestError(
                f"unknown power mode {mode!r} for {self.identity.name}; known: {', '.join(modes)}"
            )
        self._change("power_mode", lambda: self._write_power_mode(mode), mode)
        return mode

    # -- ownership and restore ---------------------------------------------------------
    @property
    def owned(self) -> bool:
        """Whether this object holds the device (its lock and a journal layer)."""
        return self._ownership is not None

    @property
    def journal(self) -> Optional[Journal]:
        """The journal this owner writes (every layer of the device), or None if not owned."""
        return self._ownership.journal if self._ownership is not None else None

    @property
    def ownership_notes(self) -> List[str]:
        """What taking the device found (a dead owner's settings restored, a corrupt journal)."""
        return list(self._ownership.notes) if self._ownership is not None else []

    def acquire(self, command: Optional[str] = None) -> Device:
        """Take the device (its lock, on real hardware) and open a journal layer.

        Changes take the device by themselves; call this to claim it before deciding what to
        change, or to stack a layer (a governor over an app's own settings). Each ``acquire``
        is undone by one :meth:`release`. See :mod:`governor.devices.ownership`.

        Raises:
            DeviceBusyError: another live process owns the device (the message names it).
        """
        if self._ownership is None:
            from governor.devices.ownership import Ownership

            ownership = Ownership(self, command)
            ownership.take()
            self._ownership = ownership
        self._ownership.push(command)
        return self

    def release(self, *, keep: bool = False, merge: bool = True) -> Dict[str, Any]:
        """Undo the top layer of changes and let the device go once no layer is left.

        With ``keep`` (``governor apply``) the changes stay, journaled for ``governor reset``;
        ``merge=False`` keeps them in a layer of their own instead of merging them into a
        persistent layer below (see :func:`~governor.devices.ownership.restore_layers_down_to`).
        Returns field -> value restored.

        Raises:
            RestoreError: some fields could not be restored; they stay journaled: on disk,
                with the device let go, for the next owner or ``reset``; in memory (simulated
                boards), with this object, for another ``release`` or ``reset``.
        """
        own = self._ownership
        if own is None:
            return {}
        restored: Dict[str, Any] = {}
        try:
            if keep:
                own.keep_top(merge=merge)
            else:
                restored = own.restore_top()
                own.journal.layers.pop()
                own.save()
        except BaseException:
            if own.on_disk:  # what failed is on disk: the next owner or reset tries again
                own.let_go()
                self._ownership = None
            raise  # in memory, the journal stays with this object for another try
        if own.own_depth <= 0:
            own.let_go()
            self._ownership = None
        return restored

    @property
    def changed(self) -> bool:
        """Whether this owner changed something it has not restored yet."""
        own = self._ownership
        return own is not None and any(
            layer.original for layer in own.journal.layers[own.base_depth :]
        )

    def restore(self) -> Dict[str, Any]:
        """Put back every setting changed in this owner's top layer (safe to repeat), keeping
        the device. Returns field -> value restored.

        Raises:
            RestoreError: each field that failed (all are tried; failures stay journaled).
        """
        if self._ownership is None or self._ownership.own_depth <= 0:
            return {}
        return self._ownership.restore_top()

    def leave_to_others(self, name: str) -> bool:
        """Leave journal field ``name`` as another program set it: drop it from this owner's
        top layer, so that restoring does not undo their change. Returns whether it was
        journaled."""
        own = self._ownership
        if own is None or not own.journaled(name):
            return False
        own.forget(name)
        return True

    def restore_everything(self) -> Dict[str, Any]:
        """Undo every layer this object owns and let the device go (``reset`` of a device
        whose state lives in this process). Returns field -> original value."""
        restored: Dict[str, Any] = {}
        while self._ownership is not None:
            restored.update(self.release())
        return restored

    def default_state(self) -> DeviceState:
        """The driver's defaults: what ``reset`` restores when no journal can be trusted.
        ``None`` clocks mean "unlocked"; a ``None`` power limit or mode is left alone."""
        return DeviceState()

    def default_originals(self) -> Dict[str, Any]:
        """:meth:`default_state` as journal fields, for the controls this device has."""
        caps, state = self.capabilities, self.default_state()
        out: Dict[str, Any] = {}
        if caps.power_mode and state.power_mode is not None:
            out["power_mode"] = state.power_mode
        if caps.power_limit and state.power_limit_w is not None:
            out["power_limit"] = state.power_limit_w
        if caps.lock_mem_clock:
            out["mem_clock"] = state.mem_clock_mhz
        if caps.lock_gpu_clocks:
            out["gpu_clocks"] = list(state.gpu_clocks_mhz) if state.gpu_clocks_mhz else None
        return out

    def close(self) -> None:
        """Restore what this owner changed, let the device go, and close it (safe to repeat)."""
        if self._closed:
            return
        try:
            while self._ownership is not None:
                self.release()
        finally:
            self._closed = True
            self._close()

    def __enter__(self) -> Device:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals -------------------------------------------------------------------
    def _require(self, capability: str, doing: str) -> None:
        if not getattr(self.capabilities, capability):
            raise UnsupportedError(f"{self.identity.name} ({self.uri}) does not support {doing}")

    #: fields the hardware cannot report back (NVML has no getter for locked clocks): their
    #: current value is what the nearest journal layer below set, if one did
    READ_BLIND: FrozenSet[str] = frozenset()

    def _current(self, name: str) -> Any:
        if name in self.READ_BLIND and self._ownership is not None:
            found, value = self._ownership.applied_below_top(name)
            if found:
                return value
        state = self._read_state()
        if name == "gpu_clocks":
            return list(state.gpu_clocks_mhz) if state.gpu_clocks_mhz else None
        return {
            "mem_clock": state.mem_clock_mhz,
            "power_limit": state.power_limit_w,
            "power_mode": state.power_mode,
        }[name]

    def _change(self, name: str, write: Callable[[], None], applied: Any = None) -> None:
        """Take the device if not yet owned, journal the original of ``name`` (first change in
        this layer only), then write. A write that fails with an error leaves nothing to undo,
        so an entry this call made is dropped again; an interrupt (Ctrl-C, SIGTERM turned into
        SystemExit) may have landed after the driver applied the write, so its entry stays
        (putting back an original that was never changed is harmless)."""
        if self._ownership is None:
            self.acquire()
        own = self._ownership
        assert own is not None
        if own.journaled(name):  # the original is on disk already: nothing to read or check
            write()
            if name in self.READ_BLIND:
                own.note_applied(name, applied)
            return
        original = self._current(name)
        try:
            original = check_value(name, original)
            self._check_original(name, original)
        except ValueError as err:
            raise TelemetryError(
                f"{self.uri}: not changing {name}: the device reports a state that cannot be "
                f"restored ({err})"
            ) from None
        recorded = own.record(name, original)
        if recorded:
            log.debug("%s: journaled original %s=%r", self.uri, name, original)
        try:
            write()
        except Exception:
            if recorded:
                own.forget(name)
            raise
        if name in self.READ_BLIND:
            own.note_applied(name, applied)

    def _check_original(self, name: str, value: Any) -> None:
        """A journaled value must be one this device can take back."""
        if value is None:
            return
        if name == "power_limit":
            limits = self.power_limit_range()
            if limits is not None and not (limits.min_w - 1 <= value <= limits.max_w + 1):
                raise ValueError(
                    f"power limit {value:g} W is outside {limits.min_w:g}-{limits.max_w:g} W"
                )
        elif name == "gpu_clocks":
            table = self._all_clocks_mhz()
            if table and not (min(table) - 1 <= value[0] and value[1] <= max(table) + 1):
                raise ValueError(f"clocks {value[0]:g}-{value[1]:g} MHz are outside the table")

    def put_back(self, name: str, original: Any) -> None:
        """Write a journaled original back (``name`` is a journal field: ``gpu_clocks``,
        ``mem_clock``, ``power_limit``, ``power_mode``; None is the driver's default where
        there is one). The hook :mod:`~governor.devices.ownership` restores through: it
        writes the device and leaves the journal to its caller.

        Raises:
            GovernorError or OSError: the backend's write failed.
        """
        self._apply_original(name, original)

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

    def _all_clocks_mhz(self) -> Sequence[float]:
        """Every GPU clock the hardware knows, beyond what the current mode lets run."""
        return self._supported_clocks_mhz()

    def _read_sample(self) -> Sample:  # pragma: no cover - every backend overrides
        raise NotImplementedError

    def _read_energy_counter_j(self) -> Optional[float]:
        return self._read_sample().energy_j

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


class WorkloadDevice(Device):
    """A device that runs named workloads itself: the simulated boards. Calibration's and
    ``governor run``'s built-in loads on it are its workloads, not a CUDA kernel."""

    def workloads(self) -> Tuple[str, ...]:  # pragma: no cover - the simulator overrides
        """Names of the workloads it can run."""
        raise NotImplementedError

    def run_workload(self, workload: Any) -> Any:  # pragma: no cover
        """Start running ``workload`` (a name from :meth:`workloads`) until stopped."""
        raise NotImplementedError

    def stop_workload(self) -> None:  # pragma: no cover
        """Go idle."""
        raise NotImplementedError

    def work_done(self) -> float:  # pragma: no cover
        """Units of work completed since the device was opened."""
        raise NotImplementedError


class RecordedRow(TypedDict):
    """One measured row of a recorded sweep, as :meth:`RecordedDevice.probe` answers it."""

    requested_mhz: float
    clock_mhz: float
    power_w: float
    time_per_unit_s: float
    throttled: bool


class RecordedDevice(Device):
    """A device that answers calibration probes from a recorded sweep (replay): nothing
    runs, and each distinct clock asked for counts as one probe."""

    @property
    def probe_count(self) -> int:  # pragma: no cover - the replay device overrides
        """Distinct clocks probed so far."""
        raise NotImplementedError

    def probe(self, clock_mhz: float) -> RecordedRow:  # pragma: no cover
        """The recorded row at ``clock_mhz`` (snapped to a recorded clock)."""
        raise NotImplementedError
