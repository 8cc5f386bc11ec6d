"""Energy windows: how much time and energy a region of code took, per rail and per GPU.

    import governor

    dev = governor.open_device("nvml:0")
    with governor.measure_energy(dev, "train-step") as w:
        train_step()
    print(w.duration_s, w.energy_j, w.rails_j, w.method)

    meter = governor.energy_meter(dev)  # the one meter of this device object
    meter.begin_window("epoch")
    meter.begin_window("eval")  # windows nest and overlap freely, by name
    m = meter.end_window("eval")
    meter.end_window("epoch")

    @governor.measure_energy(dev, "infer")  # a decorator too: each call is one window,
    def infer(x): ...  # kept in meter.history (the last 1000)

Where the energy comes from, said in ``EnergyWindow.method``:

- ``"energy counter"``: the hardware keeps one (NVML total energy on Volta and newer; the
  simulator's datacenter boards). Reading it at ``begin`` and ``end`` is exact whatever the
  load did in between; rails the counter does not cover are integrated.
- ``"integrated power"``: no counter (Jetson INA3221 rails, older GPUs). A sampler thread
  reads power every ``poll_s`` (0.05 s) and integrates it (trapezoids); ``begin``/``end``
  read the running integral and extrapolate the last reading to the present, so they cost a
  few microseconds and never touch the sensors. Windows much shorter than ``poll_s`` then
  carry the last reading's power, not their own. On a virtual clock (simulated boards in
  tests) there is no thread: while a window is open the meter watches the clock, which
  reads it before every sleep and after every ``poll_s`` of it, so whatever advances the
  clock (``gov.step()``, a simulated app) feeds the window.

``readings`` says how many power readings a window integrated and ``sparse`` whether that
was fewer than one per ``2 * poll_s`` of its length (a stalled sampler, a failing sensor):
its energy is then a coarse estimate, said once in the log too.

``gpu_energy_j`` is the device's own GPU figure (its ``power_w``, labelled by
``power_scope``), ``board_energy_j`` the board-input rail where the device has one, else
None. Several devices in one meter (``EnergyMeter([dev0, dev1])``) give one window with
``per_device`` entries and totals over them.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Tuple, Union

from governor.devices.base import Device
from governor.errors import GovernorError, InvalidRequestError
from governor.timebase import VirtualClock

__all__ = [
    "DeviceEnergy",
    "EnergyMeter",
    "EnergyWindow",
    "energy_meter",
    "measure_energy",
]

_LOG = logging.getLogger("governor.measure")

_GPU = "\0gpu"  # key of the device's own figure among the integrated channels


@dataclass(frozen=True)
class DeviceEnergy:
    """One device's share of a window: energy (J) of its GPU figure and of each rail."""

    uri: str
    gpu_energy_j: float
    gpu_scope: Optional[str]
    rails_j: Dict[str, float]
    board_energy_j: Optional[float]
    method: str


@dataclass(frozen=True)
class EnergyWindow:
    """A closed window: ``duration_s`` of the meter's clock, energies in J."""

    name: str
    start_s: float
    duration_s: float
    gpu_energy_j: float
    board_energy_j: Optional[float]
    rails_j: Dict[str, float]
    method: str
    per_device: Tuple[DeviceEnergy, ...] = field(default=())
    #: power readings integrated over the window (the fewest of its devices'); None where
    #: energy counters cover everything it reports
    readings: Optional[int] = None
    #: fewer readings than one per ``2 * poll_s`` of the window: a coarse estimate
    sparse: bool = False

    @property
    def energy_j(self) -> float:
        """The GPU figure summed over the meter's devices (J)."""
        return self.gpu_energy_j

    @property
    def mean_power_w(self) -> Optional[float]:
        return self.gpu_energy_j / self.duration_s if self.duration_s > 0 else None

    def to_dict(self) -> Dict[str, Any]:
        return {
            "name": self.name,
            "start_s": self.start_s,
            "duration_s": self.duration_s,
            "energy_j": self.gpu_energy_j,
            "gpu_energy_j": self.gpu_energy_j,
            "board_energy_j": self.board_energy_j,
            "rails_j": dict(self.rails_j),
            "method": self.method,
            "readings": self.readings,
            "sparse": self.sparse,
            "devices": [
                {
                    "uri": d.uri,
                    "gpu_energy_j": d.gpu_energy_j,
                    "scope": d.gpu_scope,
                    "rails_j": dict(d.rails_j),
                    "board_energy_j": d.board_energy_j,
                    "method": d.method,
                }
                for d in self.per_device
            ],
        }


class _Channel:
    """Running energy integrals of one device (J), fed by counters or by power readings."""

    def __init__(self, device: Device, poll_s: float) -> None:
        self.device = device
        self.poll_s = poll_s
        self.lock = threading.Lock()
        self.counter = bool(device.capabilities.energy_counter)
        self.method = "energy counter" if self.counter else "integrated power"
        self.board_rail: Optional[str] = device.board_input_rail()
        self.scope: Optional[str] = None
        self.gpu_rail: Optional[str] = None  # the rail the GPU figure is read from
        # integrated channels: key -> (energy so far J, last power W); time of last reading
        self.names: Tuple[str, ...] = ()
        self.energy: List[float] = []
        self.power: List[float] = []
        self.t_last: Optional[float] = None
        self.reads = 0  # readings integrated so far
        self._counter_base: Optional[float] = None
        self.read()

    def read(self) -> None:
        """Take one reading and integrate up to it."""
        sample = self.device.sample()
        keys = [_GPU] + [r.name for r in sample.rails]
        values = [sample.power_w if sample.power_w is not None else 0.0] + [
            r.power_w for r in sample.rails
        ]
        if self.gpu_rail is None:
            for rail in sample.rails:
                if rail.scope == sample.power_scope and rail.power_w == sample.power_w:
                    self.gpu_rail = rail.name
        with self.lock:
            self.scope = sample.power_scope
            t = sample.t_s
            if tuple(keys) != self.names:  # first reading, or the rails changed
                old = dict(zip(self.names, self.energy))
                self.names = tuple(keys)
                self.energy = [old.get(k, 0.0) for k in keys]
                self.power = list(values)
                self.t_last = t
                return
            dt = t - self.t_last if self.t_last is not None else 0.0
            if dt > 0:
                energy, power = self.energy, self.power
                for i, p in enumerate(values):
                    energy[i] += 0.5 * (power[i] + p) * dt
                self.reads += 1
            self.power = list(values)
            self.t_last = t

    def snapshot(self, now: float) -> Tuple[float, Optional[float], Tuple[float, ...], int]:
        """(now, counter J or None, integrals J extrapolated to ``now``, readings so far)."""
        counter = self.device.energy_counter_j() if self.counter else None
        with self.lock:
            dt = now - self.t_last if self.t_last is not None else 0.0
            if dt > 0:
                values = tuple(e + p * dt for e, p in zip(self.energy, self.power))
            else:
                values = tuple(self.energy)
            reads = self.reads
        return now, counter, values, reads

    def stale(self, now: float) -> bool:
        return self.t_last is None or now - self.t_last >= self.poll_s


class _Open:
    __slots__ = ("name", "snaps", "start_s")

    def __init__(self, name: str, start_s: float, snaps: List[Any]) -> None:
        self.name = name
        self.start_s = start_s
        self.snaps = snaps


class EnergyMeter:
    """Named energy windows over one device or several (see the module docstring).

    Args:
        devices: a device or a sequence of devices sharing one clock (the first's).
        poll_s: how often power is read where there is no energy counter (s).
        background: read power in a thread (default: only on a wall clock).
    """

    def __init__(
        self,
        devices: Union[Device, Sequence[Device]],
        *,
        poll_s: float = 0.05,
        background: Optional[bool] = None,
    ) -> None:
        devs = [devices] if isinstance(devices, Device) else list(devices)
        if not devs:
            raise InvalidRequestError("an energy meter needs at least one device")
        if not (poll_s > 0):
            raise InvalidRequestError(f"poll_s must be > 0, not {poll_s!r}")
        self.devices = tuple(devs)
        self.clock = devs[0].clock
        self.poll_s = float(poll_s)
        self._channels = [_Channel(d, self.poll_s) for d in devs]
        self._open: Dict[str, _Open] = {}
        self._lock = threading.Lock()
        self.history: Deque[EnergyWindow] = deque(maxlen=1000)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._watching = False
        self._said_sparse = False
        integrating = self._integrating = any(
            not c.counter or set(c.names) - {_GPU, c.gpu_rail} for c in self._channels
        )
        if background is None:
            background = not self.clock.virtual
        if background and integrating:
            self._thread = threading.Thread(
                target=self._poll_loop, name="governor-energy", daemon=True
            )
            self._thread.start()

    # -- sampling -------------------------------------------------------------------------
    def _poll_loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            if any(getattr(ch.device, "_closed", False) for ch in self._channels):
                return  # a closed device is not read again
            self.poll()

    def poll(self) -> None:
        """Read power on every device now (the thread does this by itself on a wall clock)."""
        for ch in self._channels:
            try:
                ch.read()
            except Exception:  # a failed read: the integral carries the last power on
                pass

    def _watch(self, want: bool) -> None:
        """On a virtual clock without a thread, have the clock feed the meter while a window
        is open (the caller holds ``self._lock``)."""
        clock = self.clock
        if self._thread is not None or want == self._watching or not self._integrating:
            return
        if not isinstance(clock, VirtualClock):
            return
        if want:
            clock.watch(self._on_clock, self.poll_s)
        else:
            clock.unwatch(self._on_clock)
        self._watching = want

    def _on_clock(self) -> None:
        if any(getattr(ch.device, "_closed", False) for ch in self._channels):
            return
        self.poll()

    def close(self) -> None:
        """Stop the sampler thread (windows still open can no longer be closed)."""
        self._stop.set()
        with self._lock:
            self._watch(False)
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None

    def __enter__(self) -> EnergyMeter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _snaps(self) -> Tuple[float, List[Any]]:
        now = self.clock.now_s()
        if self._thread is None:
            for ch in self._channels:
                if ch.stale(now):
                    with contextlib.suppress(GovernorError, OSError):
                        ch.read()
        return now, [ch.snapshot(now) for ch in self._channels]

    # -- windows ----------------------------------------------------------------------------
    def begin_window(self, name: str) -> None:
        """Open the window ``name``; windows nest and overlap by name.

        Raises:
            InvalidRequestError: a window of that name is already open.
        """
        now, snaps = self._snaps()
        with self._lock:
            if name in self._open:
                raise InvalidRequestError(f"energy window {name!r} is already open")
            self._open[name] = _Open(name, now, snaps)
            self._watch(True)

    def end_window(self, name: str) -> EnergyWindow:
        """Close the window ``name`` and return what it measured.

        Raises:
            InvalidRequestError: no window of that name is open.
        """
        return self._end(name, name)

    def _end(self, key: str, label: str) -> EnergyWindow:
        now, snaps = self._snaps()
        with self._lock:
            opened = self._open.pop(key, None)
            self._watch(bool(self._open))
        if opened is None:
            raise InvalidRequestError(f"no energy window {key!r} is open")
        window = self._close(opened, label, now, snaps)
        self.history.append(window)
        return window

    def cancel_window(self, name: str) -> None:
        """Forget an open window (no error if there is none)."""
        with self._lock:
            self._open.pop(name, None)
            self._watch(bool(self._open))

    @property
    def open_windows(self) -> Tuple[str, ...]:
        with self._lock:
            return tuple(self._open)

    def _close(self, opened: _Open, label: str, now: float, snaps: List[Any]) -> EnergyWindow:
        per: List[DeviceEnergy] = []
        counts: List[int] = []
        for ch, (_t0, c0, v0, n0), (_t1, c1, v1, n1) in zip(self._channels, opened.snaps, snaps):
            diffs = {k: b - a for k, a, b in zip(ch.names, v0, v1)}
            gpu = diffs.pop(_GPU, 0.0)
            method = "integrated power"
            if c0 is not None and c1 is not None and c1 >= c0:
                gpu, method = c1 - c0, "energy counter"
                if ch.gpu_rail in diffs:
                    diffs[ch.gpu_rail] = gpu
            if method != "energy counter" or set(diffs) - {ch.gpu_rail}:
                counts.append(n1 - n0)  # something in it was integrated
            board = diffs.get(ch.board_rail) if ch.board_rail else None
            per.append(DeviceEnergy(ch.device.uri, gpu, ch.scope, diffs, board, method))
        multi = len(per) > 1
        rails: Dict[str, float] = {}
        for d in per:
            for k, v in d.rails_j.items():
                rails[f"{d.uri}/{k}" if multi else k] = v
        boards = [d.board_energy_j for d in per if d.board_energy_j is not None]
        methods = sorted({d.method for d in per})
        duration = now - opened.start_s
        readings = min(counts) if counts else None
        sparse = readings is not None and readings < int(duration / (2.0 * self.poll_s))
        if sparse and not self._said_sparse:
            self._said_sparse = True
            _LOG.warning(
                "energy window %r: %d power readings over %.3g s (poll_s %g): its energy is "
                "a coarse estimate (is the sampler starved, or the sensor failing?)",
                label,
                readings,
                duration,
                self.poll_s,
            )
        return EnergyWindow(
            name=label,
            start_s=opened.start_s,
            duration_s=duration,
            gpu_energy_j=sum(d.gpu_energy_j for d in per),
            board_energy_j=sum(boards) if len(boards) == len(per) else None,
            rails_j=rails,
            method=" + ".join(methods),
            per_device=tuple(per),
            readings=readings,
            sparse=sparse,
        )

    def measure(self, name: Optional[str] = None) -> _Measure:
        """A window as a context manager (``with meter.measure("x") as w``) or a decorator."""
        return _Measure(self, name)


class _Measure:
    """Context manager and decorator around one named window."""

    def __init__(self, meter: EnergyMeter, name: Optional[str]) -> None:
        self.meter = meter
        self.name = name
        self.result: Optional[EnergyWindow] = None
        self._key: Optional[str] = None

    def __enter__(self) -> _Measure:
        name = self.name or "window"
        key, n = name, 1
        while True:  # the same name may be open in another thread or a recursion
            try:
                self.meter.begin_window(key)
                break
            except InvalidRequestError:
                n += 1
                key = f"{name}#{n}"
        self._key = key
        return self

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        assert self._key is not None
        self.result = self.meter._end(self._key, self.name or "window")

    def __getattr__(self, attr: str) -> Any:
        result = self.__dict__.get("result")
        if result is None:
            raise AttributeError(
                f"{attr}: the energy window {self.name!r} is still open (read it after the block)"
            )
        return getattr(result, attr)

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        name = self.name or getattr(func, "__qualname__", "call")
        meter = self.meter

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with _Measure(meter, name):
                return func(*args, **kwargs)

        return wrapper


def energy_meter(device: Union[Device, Sequence[Device]], **options: Any) -> EnergyMeter:
    """The meter of ``device`` (made on first use and kept on the device object); for a
    sequence of devices a new meter each call."""
    if not isinstance(device, Device):
        return EnergyMeter(device, **options)
    meter = device.__dict__.get("_energy_meter")
    if meter is None:
        meter = EnergyMeter(device, **options)
        device.__dict__["_energy_meter"] = meter
    return meter


def measure_energy(
    device: Union[Device, Sequence[Device], EnergyMeter], name: Optional[str] = None
) -> _Measure:
    """``with measure_energy(dev, "name") as w:`` or ``@measure_energy(dev, "name")``.

    After the block ``w`` reads as an :class:`EnergyWindow` (``w.energy_j``, ``w.rails_j``...).
    """
    meter = device if isinstance(device, EnergyMeter) else energy_meter(device)
    return _Measure(meter, name)
