"""A clock's mean power at the rate, predicted by the model and measured by a window
(governor/runtime/throughput_parts/pricing.py)."""

from __future__ import annotations

import pytest
from throughput_model import IDLE_W, busy_w, small_model

from governor.runtime.controller_base import Observation, Tick
from governor.runtime.throughput_parts.frames import FrameStats, IdlePower
from governor.runtime.throughput_parts.pricing import Pricing
from governor.runtime.throughput_parts.tables import ClockTables

RATE_HZ = 30.0
WORK_S = 0.012  # a frame's top-clock time: 36 % of a period at the top clock


def _pricing(frames_seen=60, idle_w=None):
    model = small_model()
    tables = ClockTables(model)
    frames, idle = FrameStats(), IdlePower(metered=True)
    for k in range(frames_seen):
        t = (k + 1) / RATE_HZ
        obs = Observation(t, 1.0 / RATE_HZ, None, 1000.0, 1000.0, 0.0, t, True)
        frames.learn(obs, [Tick(t, 1.0, WORK_S, 1000.0)], tables, RATE_HZ)
    idle.idle_w = idle_w
    return Pricing(model, RATE_HZ, frames, idle), model


def test_a_clock_is_priced_busy_at_its_power_and_idle_between_frames():
    pricing, model = _pricing(idle_w=6.0)
    share = RATE_HZ * WORK_S * model.time_rel[2]  # 700 MHz
    assert pricing.predicted_w(2) == pytest.approx(share * busy_w(700.0) + (1 - share) * 6.0)
    # before an idle power is measured, the model's
    unmeasured, _ = _pricing()
    assert unmeasured.predicted_w(2) == pytest.approx(share * busy_w(700.0) + (1 - share) * IDLE_W)


def test_a_window_s_power_is_moved_to_the_long_run_busy_share_along_its_slope():
    """A window whose frames happened to be busier than the long run's: its power, moved
    along the given rise with the busy share, is the clock's at the long run's share."""
    pricing, model = _pricing()
    idle_w, slope_w = 6.0, busy_w(700.0) - 6.0
    busy = 0.6  # the window's share; the long run's is 0.36 * 1.43 = 0.51
    mean_w = idle_w + busy * slope_w
    share = RATE_HZ * WORK_S * model.time_rel[2]
    assert pricing.rate_cost(2, mean_w, busy, slope_w) == pytest.approx(idle_w + share * slope_w)


def test_without_a_fitted_slope_the_learnt_idle_power_gives_it():
    pricing, model = _pricing(idle_w=6.0)
    busy, mean_w = 0.6, 6.0 + 0.6 * 30.0
    share = RATE_HZ * WORK_S * model.time_rel[2]
    assert pricing.rate_cost(2, mean_w, busy) == pytest.approx(6.0 + share * 30.0)


def test_a_window_is_taken_as_measured_while_little_is_known():
    few, _ = _pricing(frames_seen=10, idle_w=6.0)
    assert few.rate_cost(2, 25.0, 0.6, 30.0) == 25.0  # too few frames for a long mean
    pricing, _ = _pricing(idle_w=6.0)
    assert pricing.rate_cost(2, 25.0, 0.99, 30.0) == 25.0  # busy all of the window
    unknown, _ = _pricing(idle_w=None)
    assert unknown.rate_cost(2, 25.0, 0.6) == 25.0  # no slope and no idle power


def test_a_clock_whose_frames_queue_is_priced_at_its_busy_power():
    pricing, model = _pricing()
    # 500 MHz: 0.36 of a period at the top clock is 0.72 at half the clock; at 3x the work
    # per unit the share would exceed 1, so price the time_rel of a slower clock directly
    mean_w, busy, slope_w = 20.0, 0.5, 30.0
    assert pricing.rate_cost(0, mean_w, busy, slope_w, time_rel=3.0) == pytest.approx(
        mean_w + slope_w * (1.0 - busy)
    )
