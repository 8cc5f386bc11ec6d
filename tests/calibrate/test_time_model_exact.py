"""The time-model fit on data made from known forms in the test (governor/models/time.py)."""

from __future__ import annotations

import math

import pytest

from governor.errors import CalibrationError
from governor.models.time import fit_time_model

CLOCKS = [600.0, 800.0, 1000.0, 1200.0, 1400.0]


def two_term(f, t_mem=0.02, c=30.0):
    return t_mem + c / f


def test_three_clocks_take_the_two_term_form_without_a_held_out_error():
    model = fit_time_model(CLOCKS[:3], [two_term(f) for f in CLOCKS[:3]])
    assert model.form == "two-term" and model.k == 1.0
    assert math.isnan(model.loo_rel_error)  # too few clocks to hold one out
    assert model.t_mem_s == pytest.approx(0.02, rel=1e-6)
    assert model.c_s_mhz == pytest.approx(30.0, rel=1e-6)


def test_the_form_is_named_after_what_was_fitted():
    times = [two_term(f) for f in CLOCKS]
    assert fit_time_model(CLOCKS, times, forms=[(1.0, 0.0)]).form == "two-term"
    assert fit_time_model(CLOCKS, times, forms=[(2.0, 0.0)]).form == "roofline"
    low = fit_time_model(CLOCKS, times, forms=[(1.0, 2.0)])
    assert low.form == "two-term + low-clock (f_low/f)^2"


def test_data_from_a_two_term_load_chooses_the_two_term_form():
    model = fit_time_model(CLOCKS, [two_term(f) for f in CLOCKS])
    assert model.form == "two-term"  # the simplest form within 0.2 % of the best held out
    assert model.loo_rel_error == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize(
    "clocks, times, message",
    [
        ([600.0, 800.0], [0.05, -0.01], "positive finite"),
        ([600.0, 0.0], [0.05, 0.04], "positive finite"),
        ([600.0, 600.0], [0.05, 0.05], "at least 2 distinct clocks"),
        ([600.0, 800.0], [0.05], "equal-length"),
    ],
)
def test_bad_measurements_are_refused(clocks, times, message):
    with pytest.raises(CalibrationError, match=message):
        fit_time_model(clocks, times)


def test_small_times_are_fine():
    times = [two_term(f, t_mem=2e-5, c=0.03) for f in CLOCKS]  # tens of microseconds
    assert fit_time_model(CLOCKS, times).c_s_mhz == pytest.approx(0.03, rel=1e-4)
