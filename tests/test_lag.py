"""Power-lag correction: the formula, the fit of C from a step, and its use on a lagging sensor."""

from __future__ import annotations

import math

import pytest

from governor.devices.registry import open_device
from governor.errors import CalibrationError, InvalidRequestError, UnsupportedError
from governor.measure.lag import (
    corrected_energy_j,
    fit_lag_constant,
    integrate_energy_j,
    lag_correct,
    step_response,
)


def _first_order(c_s, lo=50.0, hi=150.0, dt=0.05, before=1.0, after=5.0):
    """A sensor that follows a step at t=0 like a first-order system of time constant c_s."""
    times = [-before + i * dt for i in range(int((before + after) / dt) + 1)]
    powers = [lo if t < 0 else hi - (hi - lo) * math.exp(-t / c_s) for t in times]
    return times, powers


def test_correction_undoes_a_first_order_lag():
    times, powers = _first_order(0.8)
    fixed = lag_correct(times, powers, 0.8)
    # a few samples after the step the corrected reading is at the new level (the raw one is not)
    i = next(k for k, t in enumerate(times) if t >= 0.5)
    assert powers[i] < 120.0
    assert fixed[i] == pytest.approx(150.0, rel=0.01)


def test_fit_recovers_the_time_constant():
    times, powers = _first_order(0.79)
    fit = fit_lag_constant(times, powers, 0.0)
    assert fit.c_s == pytest.approx(0.79, rel=0.1)
    assert fit.before_w == pytest.approx(50.0) and fit.after_w == pytest.approx(150.0, rel=0.01)


def test_integration_is_trapezoidal_and_windowed():
    assert integrate_energy_j([0.0, 1.0, 2.0], [10.0, 10.0, 10.0]) == pytest.approx(20.0)
    assert integrate_energy_j([0.0, 2.0], [0.0, 20.0], 1.0, 2.0) == pytest.approx(15.0)
    # a lagging sensor under-reports a run that starts at a step; the correction recovers it
    times, powers = _first_order(0.8)
    raw = integrate_energy_j(times, powers, 0.0, 2.0)
    fixed = corrected_energy_j(times, powers, 0.8, 0.0, 2.0)
    assert raw < 0.8 * 300.0 and fixed == pytest.approx(300.0, rel=0.03)


def test_bad_inputs():
    with pytest.raises(InvalidRequestError):
        lag_correct([0.0, 1.0], [1.0], 0.5)
    with pytest.raises(InvalidRequestError):
        lag_correct([0.0, 0.0], [1.0, 1.0], 0.5)
    with pytest.raises(InvalidRequestError):
        lag_correct([0.0, 1.0], [1.0, 1.0], -1.0)
    with pytest.raises(CalibrationError):
        fit_lag_constant([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [5.0] * 7, 2.5)


def test_step_response_on_a_simulated_nvml_sensor_with_1s_averaging():
    # rtx-a4000 reports a 1 s average: a boxcar lags by about half its width
    with open_device("sim:rtx-a4000") as dev:
        fit = step_response(dev, before_s=2.0, after_s=4.0)
        assert 0.3 < fit.c_s < 0.7 and fit.after_w > fit.before_w
        # a 2 s run starting at a step: the corrected integral is closer to the true energy
        dev.clock.sleep(3.0)
        e0, t0 = dev.true_energy_j(), dev.clock.now_s()
        times, powers = [], []
        dev.run_workload("compute")
        while dev.clock.now_s() < t0 + 2.5:
            dev.clock.sleep(0.05)
            s = dev.sample()
            times.append(s.t_s)
            powers.append(s.power_w)
        dev.stop_workload()
        truth = dev.true_energy_j() - e0
        # an idle sample at t0 anchors the integral
        times.insert(0, t0)
        powers.insert(0, fit.before_w)
        raw = integrate_energy_j(times, powers, t0, times[-1])
        fixed = corrected_energy_j(times, powers, fit.c_s, t0, times[-1])
        assert abs(fixed - truth) < abs(raw - truth)


def test_step_response_needs_a_device_that_can_make_a_step():
    class Fixed:
        uri = "fixed:0"

    with pytest.raises(UnsupportedError):
        step_response(Fixed())
