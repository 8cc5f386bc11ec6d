"""The throughput search's measurement windows (governor/runtime/throughput_parts/window.py):
a window measures only once its clock has settled, and fits the rise of power with the busy
share over its periods."""

from __future__ import annotations

import math
import random

import pytest

from governor.runtime.throughput_parts.window import MeasureWindow, YoungWindow

SETTLE_S = 0.25  # two 0.1-s periods settle, the third is measured


def _fill(window, periods, idle_w=20.0, rise_w=60.0, seed=0):
    """0.1-s periods whose busy share scatters around 0.45 and whose power is exactly
    ``idle_w + share·rise_w``."""
    rng = random.Random(seed)
    for _ in range(periods):
        b = rng.uniform(0.35, 0.55)
        window.add(idle_w + b * rise_w, 0.1, b * 0.1, 1.25, SETTLE_S)


def test_a_window_measures_only_after_the_clock_settles():
    window = MeasureWindow()
    for _ in range(2):  # 0.2 s: settling
        window.add(50.0, 0.1, 0.05, 1.25, SETTLE_S)
    assert window.measured_s == 0.0 and window.energy_j == 0.0
    window.add(50.0, 0.1, 0.05, 1.25, SETTLE_S)
    assert window.measured_s == pytest.approx(0.1)
    assert window.energy_j == pytest.approx(5.0)
    assert window.busy_s == pytest.approx(0.05)
    assert window.rel_s == pytest.approx(0.125)


def test_the_fit_recovers_the_rise_of_power_with_the_busy_share():
    window = MeasureWindow()
    _fill(window, 25)
    assert window.slope_w(10) == pytest.approx(60.0, rel=1e-9)


def test_no_slope_from_too_few_periods_or_shares_that_do_not_spread():
    window = MeasureWindow()
    _fill(window, 8)  # 5 measured periods
    assert window.slope_w(10) is None
    flat = MeasureWindow()
    for _ in range(25):
        flat.add(47.0, 0.1, 0.045, 1.25, SETTLE_S)  # the same share every period
    assert flat.slope_w(10) is None


def test_a_fall_of_power_with_the_busy_share_is_no_slope():
    window = MeasureWindow()
    _fill(window, 25, rise_w=-10.0)
    assert window.slope_w(10) is None


def test_reset_starts_the_window_again():
    window = MeasureWindow()
    _fill(window, 25)
    window.reset()
    assert window == MeasureWindow()


def test_a_window_resumed_from_the_young_frames_keeps_their_sums_but_fits_no_slope():
    young = YoungWindow(900.0)
    for _ in range(6):  # 0.6 s at the clock: 0.4 s of it measured
        young.add(40.0, 0.1, 0.04, SETTLE_S)
    assert (young.seconds, young.energy_j, young.held_s) == pytest.approx((0.4, 16.0, 0.6))
    window = MeasureWindow()
    window.resume(young, 1.1)
    assert (window.held_s, window.measured_s, window.energy_j) == pytest.approx((0.6, 0.4, 16.0))
    assert window.busy_s == pytest.approx(0.16)
    assert window.rel_s == pytest.approx(1.1 * 0.4)
    _fill(window, 30)  # periods added after resuming: still no slope (the sums are not)
    assert math.isnan(window.b2_s) and window.slope_w(10) is None
