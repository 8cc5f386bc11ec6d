"""The memory-share estimator and the power ratio (governor/runtime/battery_parts/share.py):
what a load's power says about how much it gains from the clock, without ticks."""

from __future__ import annotations

import pytest

from governor.runtime.battery_parts.share import (
    PowerRatio,
    ShareEstimator,
    share_gaps,
    share_power,
)
from governor.runtime.battery_parts.tables import match, slope_at, tabled
from governor.runtime.model import ClockModel

CLOCKS = tuple(300.0 + 100.0 * i for i in range(13))
IDLE_W = 20.0


def _model() -> ClockModel:
    power = tuple(IDLE_W + 100.0 * (f / 1500.0) ** 2.5 for f in CLOCKS)
    rel = tuple(1500.0 / f for f in CLOCKS)
    return ClockModel(CLOCKS, power, rel, IDLE_W, 900.0, True, "test")


def _learn(est: ShareEstimator, model: ClockModel, i: int, power_w: float, periods: int) -> None:
    for _ in range(periods):
        est.learn(power_w, i, 0.1)


def test_a_load_at_the_models_power_is_compute_bound_and_one_below_it_memory_bound():
    model = _model()
    est = ShareEstimator(model, prior_s=0.0)
    i = 8
    _learn(est, model, i, model.power_w[i], 5)
    assert est.k == 0.0 and est.gain == 1.0
    # half the model's dynamic power: the SMs compute half the time, k = t_rel·(1/u − 1)
    half = IDLE_W + 0.5 * (model.power_w[i] - IDLE_W)
    _learn(est, model, i, half, 60)
    assert est.k == pytest.approx(model.time_rel[i], rel=1e-6)
    # a heavier load than the calibration one: compute-bound with a power gain
    heavy = ShareEstimator(model, prior_s=0.0)
    _learn(heavy, model, i, IDLE_W + 1.5 * (model.power_w[i] - IDLE_W), 60)
    assert heavy.k == 0.0 and heavy.gain == pytest.approx(1.5, rel=1e-6)


def test_nothing_is_learnt_at_a_clock_with_too_little_dynamic_power_or_an_uncalibrated_model():
    model = _model()
    flat = ClockModel(CLOCKS, (IDLE_W + 1.0,) * 13, model.time_rel, IDLE_W, 900.0, True, "t")
    est = ShareEstimator(flat, prior_s=0.0)
    _learn(est, flat, 5, IDLE_W, 3)
    assert est.k is None and est.mission_busy_s == 0.0
    raw = ClockModel(CLOCKS, model.power_w, model.time_rel, IDLE_W, 900.0, False, "t")
    est = ShareEstimator(raw, prior_s=0.0)
    _learn(est, raw, 5, IDLE_W, 3)
    assert est.k is None


def test_a_memory_bound_phase_runs_below_the_plan_and_the_mean_load_at_it():
    model = _model()
    est = ShareEstimator(model, prior_s=100.0)  # the calibration load's prior: share 0
    assert est.phase_level(6.0, 1.0) == 6.0  # nothing learnt: the plan's level
    i = 8
    _learn(est, model, i, IDLE_W + 0.4 * (model.power_w[i] - IDLE_W), 100)
    level = est.phase_level(6.0, 1.0)
    assert level is not None and level < 6.0
    # the joules it leaves are the compute-bound share's to spend: both loads at the
    # multiplier that meets the phase's gaps at its level draw what the mean load draws at
    # the plan (the mean's share is x of the phase now's, the rest compute-bound)
    mean_k = est.mission_k_s / est.mission_busy_s
    mean_gain = est.mission_gain_s / est.mission_busy_s
    x = mean_k / est.k
    other_gain = (mean_gain - x * est.gain) / (1.0 - x)
    phase = share_gaps(model, est.k, est.gain)
    other = share_gaps(model, 0.0, other_gain)
    lam = slope_at(phase, level)
    top = float(len(CLOCKS) - 1)
    drawn = x * tabled(share_power(model, est.k, est.gain), level) + (1.0 - x) * tabled(
        share_power(model, 0.0, other_gain), match(other, lam, top)
    )
    assert drawn == pytest.approx(tabled(share_power(model, mean_k, mean_gain), 6.0), rel=1e-4)
    # a plan the mean load cannot spend at the top clock lowers the threshold: higher
    higher = est.phase_level(6.0, 1.05)
    assert higher is not None and higher > level


def test_the_lighter_phase_runs_higher_the_more_of_the_mission_it_is():
    """The joules a memory-bound phase saves are the compute-bound share's to spend (the
    prior's 100 s here): the longer the phase has run, the less is left to spend them, and
    the higher it runs, up to the plan's level once it is all the mission has seen. Matched
    to the mean load alone, such a phase ran at the lowest clock on the Xavier NX for
    joules nothing came to spend."""
    model = _model()
    est = ShareEstimator(model, prior_s=100.0)
    memory_w = IDLE_W + 0.4 * (model.power_w[8] - IDLE_W)
    levels = []
    for periods in (500, 500, 500, 500, 50_000):  # 50 s at a time, then 5000 s more
        _learn(est, model, 8, memory_w, periods)
        found = est.phase_level(6.0, 1.0)
        assert found is not None
        levels.append(found)
    assert levels == sorted(levels) and levels[0] < levels[3] < 6.0
    assert levels[-1] == pytest.approx(6.0, abs=0.25)


def test_a_period_at_a_clock_too_low_to_read_counts_at_the_share_last_read():
    """Held at a clock whose dynamic power is too small to read the share from, a phase
    still counts in the mission's mean (it used to freeze there, so a memory-bound phase
    parked at the lowest clock left the mean compute-bound and stayed parked)."""
    model = _model()
    est = ShareEstimator(model, prior_s=100.0)
    _learn(est, model, 8, IDLE_W + 0.4 * (model.power_w[8] - IDLE_W), 10)
    k, busy_s, k_s = est.k, est.mission_busy_s, est.mission_k_s
    assert model.power_w[0] - IDLE_W <= 0.2 * model.power_w[0]  # too little to read
    _learn(est, model, 0, model.power_w[0], 100)
    assert est.k == k  # nothing read
    assert est.mission_busy_s == pytest.approx(busy_s + 10.0)
    assert est.mission_k_s == pytest.approx(k_s + 10.0 * k)


def test_the_ratio_counts_the_prior_and_the_own_ratio_leaves_it_out():
    ratio = PowerRatio.with_prior(1000.0)
    assert ratio.ratio(0.7) == 1.0 and ratio.own_ratio(0.7) == 0.7
    ratio.add(80.0, 100.0)
    assert ratio.ratio(0.7) == pytest.approx(1080.0 / 1100.0)
    assert ratio.own_ratio(0.7) == pytest.approx(0.8)
    empty = PowerRatio.with_prior(0.0)
    assert empty.ratio(1.3) == 1.3
