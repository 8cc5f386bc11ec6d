"""The forecast mix (battery_parts/forecast.py): which loads the busy time left is expected
to run, for how long each."""

from __future__ import annotations

import pytest

from governor.runtime.battery_parts.curves import ClockCurves
from governor.runtime.battery_parts.forecast import forecast_mix
from governor.runtime.battery_parts.history import PhaseHistory
from governor.runtime.model import ClockModel

CLOCKS = tuple(300.0 + 100.0 * i for i in range(13))
IDLE_W = 20.0


def _history() -> PhaseHistory:
    power = tuple(IDLE_W + 100.0 * (f / 1500.0) ** 2.5 for f in CLOCKS)
    rel = tuple(1500.0 / f for f in CLOCKS)
    return PhaseHistory(ClockCurves(ClockModel(CLOCKS, power, rel, IDLE_W, 900.0, True, "t")))


def _close(history: PhaseHistory, busy_s: float, memory_s: float) -> None:
    model = history.curves.model
    work = [1.0 / (r + memory_s) for r in model.time_rel]
    power = [
        IDLE_W + (p - IDLE_W) * r / (r + memory_s) for p, r in zip(model.power_w, model.time_rel)
    ]
    history.age_s = busy_s
    history.close((work, power), (0, 12))


NEG = [-1.0, -0.5, -0.25]


def test_before_a_phase_ends_the_prior_stands_for_the_others_drawn_as_the_load_now():
    history = _history()
    history.add_prior(100.0, 0.04)
    history.age_s = 20.0
    inv_b = 1.0 / 1.25
    mix = forecast_mix(history, NEG, inv_b, busy_left_s=300.0)
    assert mix is not None and len(mix) == 2
    now, prior = mix
    assert (now.secs, now.neg, now.power_w, now.band) == (20.0, NEG, None, None)
    assert prior.secs == 100.0 and prior.power_w is None
    assert history.past[0].neg_gaps is not None
    assert prior.neg == [g * inv_b for g in history.past[0].neg_gaps]


def test_once_phases_end_the_busy_time_left_is_shared_out_whole():
    history = _history()
    history.add_prior(100.0, 0.04)
    _close(history, 40.0, 0.5)
    _close(history, 60.0, 0.0)
    history.age_s = 10.0  # younger than the typical 50 s
    left = 400.0
    mix = forecast_mix(history, NEG, 1.0, busy_left_s=left)
    assert mix is not None and len(mix) == 3  # the phase now and the two measured ones
    assert sum(m.secs for m in mix) == pytest.approx(left)
    # the phase now: the rest of a typical phase, or on to the end at odds 1 in 3, plus
    # its share (by age) of the tail after another load's typical phase
    now_s = 40.0 + (left - 40.0) / 3.0
    tail = left - now_s - 50.0
    assert mix[0].secs == pytest.approx(now_s + tail * 10.0 / 110.0)
    assert mix[1].secs / mix[2].secs == pytest.approx(40.0 / 60.0)


def test_a_phase_forecast_to_end_the_mission_or_with_nothing_to_weigh_stands_alone():
    history = _history()
    history.age_s = 5.0
    assert forecast_mix(history, NEG, 1.0, 100.0) is None  # nothing else to weigh
    history.add_prior(100.0, 0.04)
    _close(history, 40.0, 0.5)
    history.age_s = 80.0  # outlived the typical phase: runs as long again, past the end
    assert forecast_mix(history, NEG, 1.0, busy_left_s=60.0) is None
