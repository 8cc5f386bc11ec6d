"""The memory-share estimator and the power ratio (governor/runtime/battery_parts/share.py):
what a load's power says about how much it gains from the clock, without ticks."""

from __future__ import annotations

import pytest

from governor.runtime.battery_parts.share import (
    PowerRatio,
    ShareEstimator,
    share_gaps,
)
from governor.runtime.battery_parts.tables import concave, slope_at
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
    # there its marginal work per joule is the mission's mean load's at the plan
    mean_k = est.mission_k_s / est.mission_busy_s
    mean_gain = est.mission_gain_s / est.mission_busy_s
    mean, phase = share_gaps(model, mean_k, mean_gain), share_gaps(model, est.k, est.gain)
    assert concave(mean) and concave(phase)
    assert slope_at(phase, level) == pytest.approx(slope_at(mean, 6.0), rel=1e-6)
    # a plan the mean load cannot spend at the top clock lowers the threshold: higher
    higher = est.phase_level(6.0, 1.05)
    assert higher is not None and higher > level


def test_the_ratio_counts_the_prior_and_the_own_ratio_leaves_it_out():
    ratio = PowerRatio.with_prior(1000.0)
    assert ratio.ratio(0.7) == 1.0 and ratio.own_ratio(0.7) == 0.7
    ratio.add(80.0, 100.0)
    assert ratio.ratio(0.7) == pytest.approx(1080.0 / 1100.0)
    assert ratio.own_ratio(0.7) == pytest.approx(0.8)
    empty = PowerRatio.with_prior(0.0)
    assert empty.ratio(1.3) == 1.3
