"""The duty meter's split of a period: the sum over a run is the energy that was used."""

from __future__ import annotations

import pytest

from governor.runtime.controllers import Tick
from governor.runtime.metering import DutyMeter
from governor.runtime.model import ClockModel


def _model() -> ClockModel:
    return ClockModel(
        clocks_mhz=(500.0, 1000.0),
        power_w=(5.0, 10.0),
        time_rel=(2.0, 1.0),
        idle_w=1.0,
        ppw_clock_mhz=500.0,
        fitted=True,
        source="test",
    )


def test_a_frame_longer_than_the_period_is_paid_back_from_the_next_gaps():
    """GPU: 2 W idle, 12 W busy at 1000 MHz (the model says 10: busy readings correct it),
    board = GPU + 1 W idle, + 1.5 W busy. Frames of 0.05 s and 0.25 s over six 0.1-s
    periods: 0.3 s busy, 0.3 s idle."""
    meter = DutyMeter(_model())
    meter.reading(2.0, 3.0, False, 1000.0)
    meter.reading(12.0, 13.5, True, 1000.0)
    ticks = [
        [Tick(0.1, 1.0, 0.05, 1000.0)],
        [],
        [],
        [Tick(0.4, 1.0, 0.25, 1000.0)],  # ran from 0.15 s: three periods
        [],
        [],
    ]
    gpu_j = board_j = 0.0
    for period in ticks:
        gpu, board = meter.period(0.1, period, 1000.0)
        gpu_j += gpu
        board_j += board
    assert gpu_j == pytest.approx(0.3 * 12.0 + 0.3 * 2.0)
    assert board_j == pytest.approx(0.3 * 13.5 + 0.3 * 3.0)


def test_a_reading_whose_value_belongs_to_the_other_state_is_not_filed():
    """A frame that started just after the sensor refreshed: utilisation says busy, the
    value is the gap's. Filing it would take the busy power for idle power."""
    meter = DutyMeter(_model())
    meter.reading(2.0, None, False, 1000.0)
    meter.reading(2.1, None, True, 1000.0)  # busy by utilisation, idle by value
    assert meter.busy_readings == 0
    gpu, _ = meter.period(0.1, [Tick(0.1, 1.0, 0.05, 1000.0)], 1000.0)
    assert gpu == pytest.approx(0.05 * 10.0 + 0.05 * 2.0)


def test_without_busy_time_the_readings_stand():
    meter = DutyMeter(_model())
    meter.reading(2.0, None, False, 1000.0)
    assert meter.period(0.1, [Tick(0.1, 1.0, None, 1000.0)], 1000.0) is None
