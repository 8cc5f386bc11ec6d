"""The power fit stays in the physical region by bounds, not by a clamp after it: idle power
>= 0, alpha > 0, the ridge within the probed clocks, P_max at or above every unclipped point.
Checked against an independent bounded search written here (scipy's NNLS over a (ridge,
slope) grid), on data whose unbounded fit leaves that region (issue 39)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from power_profile_reference import profile_sse_w2
from scipy.optimize import nnls

from governor.errors import CalibrationError
from governor.models import formulas
from governor.models import power as pw


def _law(f, idle_w, ridge_mhz, beta, noise_rel=0.0, seed=0):
    p = formulas.power_w(f, idle_w, 0.1, ridge_mhz, beta)
    return p * (1.0 + noise_rel * np.random.default_rng(seed).standard_normal(len(f)))


def _bounded_sse_w2(f, p):
    """The least SSE (W²) over idle >= 0 and alpha >= 0 (NNLS) on a fine (ridge, slope) grid:
    an upper bound on the bounded optimum, written without the library's code."""
    best = math.inf
    for ridge in np.linspace(f.min(), f.max(), 121):
        for beta in np.concatenate([[0.0], np.geomspace(1e-6, 1e-1, 120)]):
            g = f * (1.0 + beta * np.maximum(0.0, f - ridge)) ** 2
            _, resid = nnls(np.stack([np.ones_like(f), g], 1), p)
            best = min(best, resid**2)
    return best


CASES = [(-6.0, 950.0, 0.0015), (-2.0, 1100.0, 0.001), (-0.5, 700.0, 0.003)]


@pytest.mark.parametrize("idle_w, ridge_mhz, beta", CASES)
def test_a_negative_intercept_law_fits_on_the_boundary(idle_w, ridge_mhz, beta):
    # clocks from 500 MHz: the bounded fit still explains the points (the error of a zero
    # intercept is small against the power there), so it answers, on the boundary
    f = np.arange(500.0, 1531.0, 60.0)
    p = _law(f, idle_w, ridge_mhz, beta, 0.002, seed=int(-idle_w * 10))
    m = pw.fit_power_model(f, p)
    assert m.p_idle_w >= 0 and m.alpha_w_per_mhz > 0
    assert f.min() <= m.ridge_clock_mhz <= f.max()
    # on the bound (to the solver's tolerance), not clamped onto it after the fit
    assert m.p_idle_w == pytest.approx(0.0, abs=1e-4 * p.max())
    sse = m.residual_rms_w**2 * len(f)
    assert sse <= _bounded_sse_w2(f, p) * (1 + 1e-6)  # as good as the bounded search
    lo, hi = m.ridge_interval_mhz
    assert f.min() <= lo <= m.ridge_clock_mhz <= hi <= f.max()
    # the profile the interval is drawn from is the bounded one (reference written apart)
    assert pw._profile_sse(
        f / f.max(), p / p.max(), m.ridge_clock_mhz / f.max()
    ) * p.max() ** 2 == (pytest.approx(profile_sse_w2(f, p, m.ridge_clock_mhz), rel=1e-6))


def test_a_negative_intercept_the_bound_cannot_explain_is_no_model():
    # down to 135 MHz a zero intercept misses the lowest points by far more than 10 %: no
    # model (calibration then answers with its best probe), never a negative idle power
    f = np.arange(135.0, 1531.0, 60.0)
    with pytest.raises(CalibrationError, match="does not explain the measurements"):
        pw.fit_power_model(f, _law(f, -6.0, 950.0, 0.0015))


def test_a_positive_intercept_is_unchanged_by_the_bounds():
    f = np.arange(300.0, 1801.0, 100.0)
    m = pw.fit_power_model(f, _law(f, 20.0, 1000.0, 0.0008))
    assert m.p_idle_w == pytest.approx(20.0, rel=1e-6)
    assert m.ridge_clock_mhz == pytest.approx(1000.0, rel=1e-4)


@pytest.mark.parametrize("seed", range(6))
def test_linear_solve_is_the_bounded_least_squares(seed):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0.1, 1.0, 9))
    y = rng.uniform(0.2, 1.0) * x**2 + rng.uniform(-0.3, 0.3) + 0.02 * rng.standard_normal(9)
    y = np.abs(y) + 0.01
    r, b = float(rng.uniform(0.1, 1.0)), float(rng.uniform(0.0, 5.0))
    c0, a = pw._linear(x, y, r, b)
    g = formulas.cmos_power_w(x, 1.0, r, b)
    (c_ref, a_ref), _ = nnls(np.stack([np.ones_like(x), g], 1), y)
    assert c0 >= 0 and a >= 0
    assert (c0, a) == pytest.approx((c_ref, a_ref), rel=1e-7, abs=1e-12)


def test_p_max_is_at_least_every_unclipped_point():
    # two points flagged at the limit read less than the unclipped point below them (the
    # firmware held a lower clock there): a cap under that point would clip what was
    # measured without one, so P_max is bounded below by it
    f = np.array([300.0, 500.0, 700.0, 900.0, 1100.0, 1300.0, 1500.0])
    p = np.array([40.0, 60.0, 82.0, 106.0, 132.0, 129.0, 130.0])
    m = pw.fit_power_model(f, p, capped=[False] * 5 + [True, True])
    assert m.p_max_w == pytest.approx(132.0) and m.n_capped == 2
    assert np.all(m.power_w(f[:5]) <= m.p_max_w)
    # a cap above the unclipped points is the capped points' mean, as before
    p[5:] = [140.0, 142.0]
    assert pw.fit_power_model(f, p, capped=[False] * 5 + [True, True]).p_max_w == 141.0
