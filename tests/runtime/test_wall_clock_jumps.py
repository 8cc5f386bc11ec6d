"""Clocks that jump: an NTP step or a Jetson without a real-time clock booting in 1970 moves the
wall clock, never a duration. The control loop and the energy windows take their durations
from the device's clock (monotonic on hardware, virtual on a simulated board); a fake wall
clock that jumps back to 1970 and forward by years between control periods changes no budget,
run-out time, mission length or window. ``until`` (a time of day) is read from the wall clock
once, when the policy starts."""

from __future__ import annotations

import time

import pytest

import governor
from governor.measure.window import measure_window
from governor.runtime import Governor
from governor.timebase import WallClock

START_UNIX_S = 1_764_000_000.0  # a fixed "now" for both runs (2025-11-24)
JUMPS_UNIX_S = (0.0, 86_400.0 * 365 * 3, -1.0e6, START_UNIX_S + 3.0e8, 12.5)  # 1970 and back

KEYS = (
    "clock_mhz",
    "power_w",
    "steps",
    "clock_changes",
    "remaining_j",
    "target_s",
    "target_power_w",
    "exhausted_at_s",
    "duration_s",
    "energy_j",
    "rate_hz",
)


@pytest.fixture
def wall(monkeypatch):
    """A wall clock the test sets: ``time.time()`` (and ``time_ns``) return ``now[0]``."""
    now = [START_UNIX_S]
    monkeypatch.setattr(time, "time", lambda: now[0])
    monkeypatch.setattr(time, "time_ns", lambda: int(now[0] * 1e9))
    return now


def governed(policy, wall, jump):
    """The status after each of 120 control periods of ``policy`` on a busy AGX Orin; with
    ``jump``, the wall clock jumps before every period."""
    dev = governor.open_device("sim:agx-orin")
    dev.run_workload("compute")
    rows = []
    wall[0] = START_UNIX_S
    try:
        with Governor(dev, policy, background=False) as gov:
            for i in range(120):
                if jump:
                    wall[0] = JUMPS_UNIX_S[i % len(JUMPS_UNIX_S)]
                gov.tick()
                status = gov.step()
                rows.append({k: status.get(k) for k in KEYS})
    finally:
        dev.stop_workload()
        dev.close()
    return rows


@pytest.mark.parametrize(
    "policy",
    [
        {"policy": "battery", "energy_j": 20000, "duration_s": 3600},
        {"policy": "battery", "battery_wh": 5, "hours": 2},
        {"policy": "throughput", "rate_hz": 30, "energy_j": 20000, "until": "18:00"},
        {"policy": "throughput", "rate_hz": 30},
    ],
    ids=["battery-duration", "battery-hours", "throughput-until", "throughput"],
)
def test_a_wall_clock_jump_changes_no_budget_or_run_out(policy, wall):
    steady = governed(policy, wall, jump=False)
    jumped = governed(policy, wall, jump=True)
    assert jumped == steady
    assert steady[-1]["steps"] == 120  # it did govern


def window(wall, jump):
    """A 2-s energy window on a fresh busy AGX Orin; with ``jump``, the wall clock jumps at
    every wait inside it."""
    dev = governor.open_device("sim:agx-orin")
    dev.run_workload("compute")
    ticks = iter(JUMPS_UNIX_S * 100)
    real_sleep = dev.clock.sleep

    def sleep_and_jump(duration_s):
        wall[0] = next(ticks)
        real_sleep(duration_s)

    if jump:
        dev.clock.sleep = sleep_and_jump  # type: ignore[method-assign]
    try:
        return measure_window(dev, 2.0)
    finally:
        dev.stop_workload()
        dev.close()


def test_an_energy_window_is_device_time_not_wall_time(wall):
    steady, jumped = window(wall, jump=False), window(wall, jump=True)
    assert jumped.duration_s == steady.duration_s and jumped.energy_j == steady.energy_j
    assert steady.duration_s == pytest.approx(2.0, abs=0.2)


def test_hardware_durations_come_from_the_monotonic_clock(wall, monkeypatch):
    ticks = iter([100.0, 100.25])
    monkeypatch.setattr(time, "monotonic", lambda: next(ticks))
    clock = WallClock()
    t0 = clock.now_s()
    wall[0] = 0.0  # the wall clock goes back to 1970 between the two readings
    assert clock.now_s() - t0 == 0.25
