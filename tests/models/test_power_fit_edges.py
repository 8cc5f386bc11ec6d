"""Edges of the power fit that the mutation runs found untested (docs/mutation.md): the
ridge interval of a fit with a single degree of freedom left, and when a ridge counts as reached."""

import numpy as np
import pytest

from governor.errors import CalibrationError
from governor.models import formulas
from governor.models.power import fit_power_model


def _sweep(clocks_mhz, ridge_mhz, beta_per_mhz=0.002, idle_w=20.0, alpha=0.1):
    f = np.asarray(clocks_mhz, dtype=float)
    return f, formulas.power_w(f, idle_w, alpha, ridge_mhz, beta_per_mhz)


def test_five_probes_leave_one_degree_of_freedom_and_still_give_a_ridge_interval():
    """Four parameters, five probes: one degree of freedom, enough for an F-based
    interval. With a clear kink at 900 MHz and 0.3 % noise the interval is narrower than
    the probed range and holds the true ridge; only with no degree left (four probes) is
    the whole probed range the answer."""
    f, p = _sweep([500.0, 700.0, 900.0, 1100.0, 1300.0], ridge_mhz=900.0, beta_per_mhz=0.003)
    rng = np.random.default_rng(3)
    noisy = p * (1.0 + 0.003 * rng.standard_normal(len(p)))
    lo, hi = fit_power_model(f, noisy).ridge_interval_mhz
    assert lo <= 900.0 <= hi
    assert hi - lo < 0.9 * (f[-1] - f[0])


def test_a_ridge_just_under_the_top_probe_is_not_reached_when_the_voltage_hardly_rises():
    """``ridge_reached`` asks whether the probes above the ridge see a voltage rise that
    matters (RIDGE_MIN_RISE, 0.05 %): the top probe's rise is the slope times its distance
    above the ridge, not times anything larger. A kink 0.1 % under the top probe with a
    steep slope raises the top probe's voltage by 0.01 %: not reached; the same slope 1 %
    under the top: 0.1 %, reached; no probe above the ridge, or no slope: never."""
    from governor.models.power import RIDGE_MIN_RISE, _ridge_reached

    x = np.array([0.2, 0.5, 0.8, 1.0])  # normalised clocks, the top probe at 1
    slope = 0.1
    assert slope * 0.001 < RIDGE_MIN_RISE < slope * 0.01
    assert not _ridge_reached(x, 0.999, slope)
    assert _ridge_reached(x, 0.99, slope)
    assert _ridge_reached(x, 1.0, 5.0) is False  # a bool, as the profile's JSON writes it
    assert _ridge_reached(x, 0.5, 0.0) is False
    assert _ridge_reached(np.array([]), 0.5, 1.0) is False


def test_a_zero_power_reading_is_refused_not_fitted():
    """A power of exactly 0 W under load is a sensor that did not answer, not a point on the
    CMOS curve: the fit refuses it with a clear error (as it refuses negative and NaN
    readings) instead of fitting through it."""
    f, p = _sweep([500.0, 700.0, 900.0, 1100.0, 1300.0, 1500.0], ridge_mhz=1000.0)
    for bad in (0.0, -1.0, float("nan")):
        readings = p.copy()
        readings[2] = bad
        with pytest.raises(CalibrationError, match="positive finite"):
            fit_power_model(f, readings)
