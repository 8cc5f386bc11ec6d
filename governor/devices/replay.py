"""Replay devices: a recorded sweep (replay CSV or Kernel Tuner cache) as a device.

``replay:PATH`` opens one. Its supported clocks are the measured ones; locking a clock and
sampling returns that row's power; :meth:`ReplayDevice.probe` returns the row's power and time
per run and counts how many distinct clocks were asked for, which is how calibration
procedures are scored against exhaustive measurements.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional, Set, Tuple

from governor.devices.base import (
    Capabilities,
    DeviceState,
    Identity,
    Rail,
    RecordedDevice,
    RecordedRow,
    Sample,
)
from governor.devices.replay_files import Sweep, read_sweep
from governor.errors import InvalidRequestError
from governor.timebase import Clock, VirtualClock

__all__ = ["ReplayDevice", "open_replay"]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "replay"


class ReplayDevice(RecordedDevice):
    """A device whose every reading comes from a measured sweep."""

    persistent_state = False  # lives in this process: journal in memory, no device lock

    def __init__(self, sweep: Sweep, *, clock: Optional[Clock] = None) -> None:
        self.sweep = sweep
        identity = Identity(
            uri=f"replay:{sweep.path}",
            kind="replay",
            name=f"{sweep.device} (replay of {Path(sweep.path).name})",
            model="replay-" + _slug(Path(sweep.path).stem),
        )
        caps = Capabilities(
            power=True,
            rails=True,
            gpu_clock=True,
            lock_gpu_clocks=True,
            utilisation=True,
            throttle_reasons=True,
        )
        super().__init__(identity, caps, clock=clock or VirtualClock())
        self._locked: Optional[Tuple[float, float]] = None
        self._probed: Set[float] = set()
        self.probe_calls = 0

    @property
    def probe_count(self) -> int:
        """Distinct clocks probed so far."""
        return len(self._probed)

    def _row(self, clock_mhz: float) -> int:
        clocks = self.sweep.clock_mhz
        return min(range(len(clocks)), key=lambda i: abs(clocks[i] - clock_mhz))

    def probe(self, clock_mhz: float) -> RecordedRow:
        """The measured row at ``clock_mhz`` (snapped to a measured clock)."""
        clock = self.snap_clock_mhz(clock_mhz)
        i = self._row(clock)
        self._probed.add(self.sweep.clock_mhz[i])
        self.probe_calls += 1
        requested = self.sweep.requested_mhz[i]
        measured = self.sweep.clock_mhz[i]
        return RecordedRow(
            requested_mhz=requested,
            clock_mhz=measured,
            power_w=self.sweep.power_w[i],
            time_per_unit_s=self.sweep.time_s[i],
            throttled=measured < requested - 0.005 * requested,
        )

    def _supported_clocks_mhz(self) -> Tuple[float, ...]:
        return self.sweep.clock_mhz

    def _current_row(self) -> int:
        return self._row(self._locked[1] if self._locked else self.sweep.clock_mhz[-1])

    def _read_sample(self) -> Sample:
        i = self._current_row()
        power = self.sweep.power_w[i]
        return Sample(
            t_s=self.clock.now_s(),
            power_w=power,
            power_scope="gpu",
            rails=(Rail("gpu", power, "gpu"),),
            gpu_clock_mhz=self.sweep.clock_mhz[i],
            utilisation_pct=100.0,
        )

    def _read_state(self) -> DeviceState:
        return DeviceState(gpu_clocks_mhz=self._locked)

    def _write_gpu_clocks(self, min_mhz: float, max_mhz: float) -> None:
        self._locked = (min_mhz, max_mhz)

    def _reset_gpu_clocks(self) -> None:
        self._locked = None


def open_replay(spec: str, *, clock: Optional[Clock] = None) -> ReplayDevice:
    """Open ``replay:PATH`` (``spec`` is PATH)."""
    if not spec:
        raise InvalidRequestError("a replay device needs a file, e.g. replay:sweep.csv")
    return ReplayDevice(read_sweep(spec), clock=clock)
