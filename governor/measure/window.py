"""Energy and power over a window of time, and waiting for steady power.

Energy comes from the device's energy counter when it has one (NVML, Volta and newer), else
from integrating sampled power (trapezoids). NVML power is a ~1 s average refreshed at about
10 Hz, so after a clock change the reading needs more than a second to settle: wait for it
before measuring.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, FrozenSet, List, Optional

from governor.devices.base import Device, Sample
from governor.errors import TelemetryError

__all__ = ["Window", "measure_window", "read_sample", "wait_steady"]

_MAX_FAILED_READS = 20


@dataclass(frozen=True)
class Window:
    """What was measured over one window."""

    duration_s: float
    energy_j: float
    mean_power_w: float
    power_scope: Optional[str]
    work_units: Optional[float]
    mean_clock_mhz: Optional[float]
    temperature_c: Optional[float]
    throttle_reasons: FrozenSet[str]
    n_samples: int
    failed_reads: int
    method: str  # "energy counter" or "integrated power"

    @property
    def time_per_unit_s(self) -> Optional[float]:
        if not self.work_units or self.work_units <= 0:
            return None
        return self.duration_s / self.work_units

    @property
    def energy_per_unit_j(self) -> Optional[float]:
        if not self.work_units or self.work_units <= 0:
            return None
        return self.energy_j / self.work_units


def read_sample(device: Device, failures: List[int]) -> Optional[Sample]:
    """One sample, or None after a failed read (counted in ``failures[0]``).

    Raises:
        TelemetryError: too many failed reads in a row to go on.
    """
    try:
        sample = device.sample()
    except TelemetryError:
        failures[0] += 1
        if failures[0] > _MAX_FAILED_READS:
            raise
        return None
    return sample


def wait_steady(
    device: Device,
    *,
    min_wait_s: float = 1.2,
    max_wait_s: float = 8.0,
    period_s: float = 0.1,
    tolerance: float = 0.01,
) -> float:
    """Wait until power is steady: the mean of the last 0.5 s within ``tolerance`` of the
    0.5 s before (after at least ``min_wait_s``). Returns the time waited (s); gives up
    quietly at ``max_wait_s`` (a drifting board is measured anyway and flagged by the caller)."""
    clock = device.clock
    start = clock.now_s()
    powers: List[float] = []
    failures = [0]
    half = max(1, int(round(0.5 / period_s)))
    while True:
        clock.sleep(period_s)
        s = read_sample(device, failures)
        if s is not None and s.power_w is not None:
            powers.append(s.power_w)
        waited = clock.now_s() - start
        if waited >= min_wait_s and len(powers) >= 2 * half:
            recent = sum(powers[-half:]) / half
            before = sum(powers[-2 * half : -half]) / half
            if abs(recent - before) <= tolerance * max(abs(before), 1e-9):
                return waited
        if waited >= max_wait_s:
            return waited


def measure_window(
    device: Device,
    window_s: float,
    *,
    work_done: Optional[Callable[[], float]] = None,
    period_s: float = 0.1,
) -> Window:
    """Measure energy, mean power, clock and work over ``window_s`` seconds of device time."""
    clock = device.clock
    failures = [0]
    first = None
    while first is None:
        first = read_sample(device, failures)
        if first is None:
            clock.sleep(period_s)
    work0 = work_done() if work_done else None
    t0 = clock.now_s()
    samples = [first]
    while clock.now_s() - t0 < window_s - 1e-9:
        clock.sleep(min(period_s, window_s - (clock.now_s() - t0)))
        s = read_sample(device, failures)
        if s is not None:
            samples.append(s)
    duration = clock.now_s() - t0
    work = (work_done() - work0) if work_done and work0 is not None else None
    last = samples[-1]
    # (t_s, power_w) of the samples that read a power
    powered = [(s.t_s, s.power_w) for s in samples if s.power_w is not None]
    if first.energy_j is not None and last.energy_j is not None and last is not first:
        energy = last.energy_j - first.energy_j
        method = "energy counter"
        span = last.t_s - first.t_s
        mean_power = energy / span if span > 0 else (powered[-1][1] if powered else 0.0)
        energy = mean_power * duration
    else:
        if len(powered) < 2:
            raise TelemetryError(f"{device.uri}: no power readings in a {window_s:g} s window")
        energy = sum(
            0.5 * (pa + pb) * (tb - ta) for (ta, pa), (tb, pb) in zip(powered, powered[1:])
        )
        span = powered[-1][0] - powered[0][0]
        mean_power = energy / span if span > 0 else powered[-1][1]
        energy = mean_power * duration
        method = "integrated power"
    clocks = [s.gpu_clock_mhz for s in samples if s.gpu_clock_mhz is not None]
    reasons = frozenset().union(*(s.throttle_reasons for s in samples))
    return Window(
        duration_s=duration,
        energy_j=energy,
        mean_power_w=mean_power,
        power_scope=last.power_scope,
        work_units=work,
        mean_clock_mhz=sum(clocks) / len(clocks) if clocks else None,
        temperature_c=last.temperature_c,
        throttle_reasons=reasons,
        n_samples=len(samples),
        failed_reads=failures[0],
        method=method,
    )
