"""What the governor measures each control period: one reading of the device, the run's
energy, time and clock integrated over it, and the health of the telemetry.

:class:`Telemetry` turns readings into the :class:`~governor.runtime.controller_base.Observation`
a controller decides on: the period's mean power from the energy counter where the device has
one (else the latest reading, split by the app's busy time through
:class:`~governor.runtime.metering.DutyMeter`), a frozen sensor told from a steady one, and the
safe hold entered after ``fail_limit`` failed readings in a row.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Tuple

from governor.devices.base import Device, board_power_w, frozen_record
from governor.errors import DeviceLostError, DeviceNotRespondingError, GovernorError
from governor.runtime.controller_base import Observation, Tick
from governor.runtime.metering import DutyMeter
from governor.runtime.model import ClockModel

__all__ = ["RunMeter", "Telemetry"]

log = logging.getLogger("governor.runtime")


class RunMeter:
    """Energy, time and clock integrated over the governed run."""

    def __init__(self) -> None:
        self.energy_j = 0.0
        self.duration_s = 0.0
        self.clock_s = 0.0  # ∫ clock dt (MHz·s)
        self.mem_clock_s = 0.0  # ∫ memory clock dt over the periods it was read in (MHz·s)
        self.mem_read_s = 0.0  # the time of those periods (s)
        self.estimated_s = 0.0  # time whose power was not measured
        self.max_power_w: Optional[float] = None
        self.board_energy_j: Optional[float] = None  # where the device reports board power
        self.board_last_w: Optional[float] = None

    def add(
        self, dt: float, power_w: Optional[float], last_w: Optional[float], clock_mhz: float
    ) -> None:
        if dt <= 0:
            return
        self.duration_s += dt
        self.clock_s += clock_mhz * dt
        if power_w is None:
            self.estimated_s += dt
            power_w = last_w or 0.0
        else:
            self.max_power_w = (
                power_w if self.max_power_w is None else max(self.max_power_w, power_w)
            )
        self.energy_j += power_w * dt

    def add_mem(self, dt: float, mem_clock_mhz: Optional[float]) -> None:
        """A period's memory clock (as read at its end, where the knob set it for the
        period; None: the device reads none)."""
        if dt > 0 and mem_clock_mhz is not None:
            self.mem_clock_s += mem_clock_mhz * dt
            self.mem_read_s += dt

    def add_board(self, dt: float, board_w: Optional[float]) -> None:
        if dt <= 0:
            return
        if board_w is None:
            board_w = self.board_last_w
            if board_w is None:
                return
        else:
            self.board_last_w = board_w
        self.board_energy_j = (self.board_energy_j or 0.0) + board_w * dt

    def to_dict(self) -> Dict[str, Any]:
        """``duration_s``, ``energy_j`` (GPU figure, J), ``mean_power_w``,
        ``mean_clock_mhz``, ``mean_mem_clock_mhz`` (over the periods the device read a
        memory clock in; None where it reads none), ``max_power_w``, ``unmeasured_s``,
        ``board_energy_j`` (None without a board rail)."""
        d = self.duration_s
        return {
            "duration_s": d,
            "energy_j": self.energy_j,
            "mean_power_w": self.energy_j / d if d > 0 else None,
            "mean_clock_mhz": self.clock_s / d if d > 0 else None,
            "mean_mem_clock_mhz": (
                self.mem_clock_s / self.mem_read_s if self.mem_read_s > 0 else None
            ),
            "max_power_w": self.max_power_w,
            "unmeasured_s": self.estimated_s,
            "board_energy_j": self.board_energy_j,
        }


@dataclass
class _Reading:
    """One control period's reading (see :meth:`Telemetry._read`)."""

    power_w: Optional[float] = None
    board_w: Optional[float] = None
    busy: Optional[bool] = None
    clock_mhz: Optional[float] = None
    mem_clock_mhz: Optional[float] = None
    problem: Optional[str] = None


class Telemetry:
    """The device's readings over a governed run (see the module docstring)."""

    def __init__(self, device: Device, model: ClockModel, fail_limit: int) -> None:
        self.device = device
        self.model = model
        self.fail_limit = fail_limit
        self.t_start: Optional[float] = None
        self.t_last: Optional[float] = None
        self.energy_last: Optional[float] = None
        self.power_last: Optional[float] = None
        self.power_prev_reading: Optional[float] = None
        self.same_readings = 0
        self.changes_since_reading = False  # set by the governor when it changes the clock
        self.clock_measured: Optional[float] = None
        self.failures = 0
        self.good = 0
        self.failures_total = 0
        self.safe_hold = False
        self.safe_reason: Optional[str] = None
        self.lost: Optional[str] = None  # why the device stopped answering
        self.lost_wedged = False  # whether it was a call past its deadline (it may come back)
        self.meter = RunMeter()
        # no energy counter: a period's energy from the app's busy time (see metering.py)
        self.duty = None if device.capabilities.energy_counter else DutyMeter(model)
        self.tick_read = False  # whether a tick took its extra reading this period
        self.duty_active = False  # set by the first tick with busy_s
        # (device time, GPU-figure J, board J) when the policy took over; None: at start()
        self.policy_origin: Tuple[Optional[float], float, Optional[float]] = (None, 0.0, None)

    def start(self, now_s: float) -> None:
        """The run starts at ``now_s``: the first period is measured from here."""
        self.t_start = self.t_last = now_s
        self.read_energy_baseline()

    def new_policy(self) -> None:
        """A policy takes over now: its budget and mission count from the last reading."""
        if self.t_start is not None:
            self.policy_origin = (
                self.t_last if self.t_last is not None else self.device.clock.now_s(),
                self.meter.energy_j,
                self.meter.board_energy_j,
            )

    def read_energy_baseline(self) -> None:
        if self.device.capabilities.energy_counter:
            try:
                self.energy_last = self.device.sample().energy_j
            except (GovernorError, OSError):
                self.energy_last = None

    def observe(
        self, ticks: Sequence[Tick], applied_mhz: float, steps: int
    ) -> Optional[Observation]:
        """Read the device, meter the period since the last call and return it as an
        :class:`Observation`; None when no time has passed since (after the first step).
        ``applied_mhz``: the clock the governor holds."""
        now = self.device.clock.now_s()
        last = self.t_last if self.t_last is not None else now
        dt = now - last
        if dt <= 0 and steps > 0:
            return None
        reading = self._read(dt)
        self.changes_since_reading = False
        self._meter_period(dt, reading, ticks, applied_mhz)
        self.t_last = now
        self.health(reading.problem)
        # the policy's own time and energy: from start(), or from set_policy()
        start, e0, board_e0 = self.policy_origin
        if start is None:
            start = self.t_start if self.t_start is not None else now
        board_j = self.meter.board_energy_j
        return frozen_record(
            Observation,
            {
                "t_s": now,
                "dt_s": dt,
                "power_w": reading.power_w,
                "clock_mhz": reading.clock_mhz,
                "applied_mhz": applied_mhz,
                "energy_used_j": self.meter.energy_j - e0,
                "elapsed_s": now - start,
                "busy": reading.busy,
                "board_power_w": reading.board_w,
                "board_energy_used_j": None if board_j is None else board_j - (board_e0 or 0.0),
                "idle_power_w": self.duty.idle_w if self.duty is not None else None,
            },
        )

    def _read(self, dt: float) -> _Reading:
        """One reading: the period's mean power from the energy counter where there is one
        (else the sensor's reading, unless it is frozen), the board's, the clock, whether the
        GPU was busy, and what went wrong (None: nothing)."""
        out = _Reading()
        try:
            sample = self.device.sample()
        except DeviceLostError as err:
            self.lost, self.lost_wedged = str(err), isinstance(err, DeviceNotRespondingError)
            out.problem = f"telemetry failed: {err}"
            return out
        except (GovernorError, OSError) as err:
            out.problem = f"telemetry failed: {err}"
            return out
        out.clock_mhz = sample.gpu_clock_mhz
        out.mem_clock_mhz = sample.mem_clock_mhz
        out.board_w = board_power_w(sample)
        if sample.utilisation_pct is not None:
            out.busy = sample.utilisation_pct >= 50.0
        elif "idle" in sample.throttle_reasons:
            out.busy = False
        energy = sample.energy_j
        if (
            energy is not None
            and self.energy_last is not None
            and dt > 0
            and energy >= self.energy_last
        ):
            out.power_w = (energy - self.energy_last) / dt
        elif sample.power_w is not None:
            out.power_w = sample.power_w
            if self._frozen(sample.power_w, out.busy):
                out.power_w = None
                out.problem = "power sensor stuck (same reading while the clock changed)"
        else:
            out.problem = "the device reports no power"
        if energy is not None:
            self.energy_last = energy
        if out.board_w is not None and out.power_w is not None and sample.power_w is not None:
            # the rest of the board + the GPU's period mean
            out.board_w = out.board_w - sample.power_w + out.power_w
        return out

    def _frozen(self, power_w: float, busy: Optional[bool]) -> bool:
        """Whether the sensor looks frozen: the very same reading although the clock moved.
        Not while the GPU idles: its power hardly moves with the clock, so a frame loop whose
        readings all land between frames repeats the same quantised idle reading (on the
        simulated Nano that was taken for a stuck sensor: periods unmetered, the board's
        energy under-counted by 2 %)."""
        if power_w == self.power_prev_reading:
            if busy is False:
                pass  # neither a sign of a frozen sensor nor of a live one
            elif self.changes_since_reading or self.same_readings > 0:
                self.same_readings += 1
        else:
            self.same_readings = 0
        self.power_prev_reading = power_w
        return self.same_readings >= 2

    def _meter_period(
        self, dt: float, reading: _Reading, ticks: Sequence[Tick], applied_mhz: float
    ) -> None:
        """File the period in the run's meter; without an energy counter, split by the app's
        busy time where sampled power aliases with its frames (see metering.py)."""
        power, board_w, clock = reading.power_w, reading.board_w, reading.clock_mhz
        meter_w, meter_board_w = power, board_w
        if self.duty_active and self.duty is not None and power is not None:
            if reading.busy is not None:
                self.duty.reading(power, board_w, reading.busy, clock or applied_mhz)
                split = self.duty.period(dt, ticks, applied_mhz) if dt > 0 else None
                if split is not None:
                    meter_w = split[0] / dt
                    if split[1] is not None:
                        meter_board_w = split[1] / dt
        self.meter.add(dt, meter_w, self.power_last, clock or applied_mhz)
        self.meter.add_board(dt, meter_board_w)
        self.meter.add_mem(dt, reading.mem_clock_mhz)
        if power is not None:
            self.power_last = power
        self.clock_measured = clock

    def health(self, problem: Optional[str]) -> None:
        """Count a failed (or a good) reading; ``fail_limit`` failures in a row enter the
        safe hold, as many good ones leave it."""
        if problem is None:
            self.failures = 0
            self.good += 1
            if self.safe_hold and self.good >= self.fail_limit:
                log.info("%s: telemetry back; leaving the safe hold", self.device.uri)
                self.safe_hold, self.safe_reason = False, None
            return
        self.good = 0
        self.failures += 1
        self.failures_total += 1
        if not self.safe_hold and self.failures >= self.fail_limit:
            self.safe_hold, self.safe_reason = True, problem
            log.warning("%s: %s; holding a safe clock", self.device.uri, problem)

    def busy_reading(self, applied_mhz: float, dev_lock: Any) -> None:
        """One extra power reading per period, as a frame ends (no energy counter): the
        control step's readings may all land between frames (see metering.py). Skipped when
        the control step holds the device (``dev_lock``, the governor's), and when the sensor
        has not refreshed since the last reading (the same value: it may predate the frame)."""
        if self.tick_read or not dev_lock.acquire(blocking=False):
            return
        try:  # the meter is the control step's too: filed under the same lock
            self.tick_read = True
            duty = self.duty
            try:
                sample = self.device.sample()
            except (GovernorError, OSError):
                return
            power = sample.power_w
            if duty is None or power is None or power == duty.last_reading_w:
                return
            busy = sample.utilisation_pct is None or sample.utilisation_pct >= 50.0
            duty.reading(power, board_power_w(sample), busy, sample.gpu_clock_mhz or applied_mhz)
        finally:
            dev_lock.release()
