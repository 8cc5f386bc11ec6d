"""The formulas in governor/models/ against values worked out by hand from their definitions.

Written to kill the mutants scripts/mutation.py reports (docs/mutation.md): every expected
number below is computed in the comment next to it, not read from the code's output.
"""

import math

import numpy as np
import pytest
from power_profile_reference import profile_sse_w2

from governor.models import formulas as fm


def test_volts_is_one_up_to_the_ridge_and_rises_by_beta_above():
    # 1 + 0.001 * (1200 - 1000) = 1.2
    assert fm.volts(1200.0, 1000.0, 0.001) == pytest.approx(1.2, rel=1e-12)
    assert fm.volts(800.0, 1000.0, 0.001) == 1.0
    assert fm.volts(1000.0, 1000.0, 0.001) == 1.0
    arr = fm.volts(np.array([800.0, 1000.0, 1500.0]), 1000.0, 0.002)
    # 1, 1, 1 + 0.002 * 500 = 2
    assert arr.tolist() == pytest.approx([1.0, 1.0, 2.0], rel=1e-12)


def test_cmos_and_total_power_by_hand():
    # alpha f V^2 = 0.01 * 1200 * 1.2^2 = 17.28
    assert fm.cmos_power_w(1200.0, 0.01, 1000.0, 0.001) == pytest.approx(17.28, rel=1e-12)
    # + P_idle 5 = 22.28; no cap (inf, None)
    assert fm.power_w(1200.0, 5.0, 0.01, 1000.0, 0.001) == pytest.approx(22.28, rel=1e-12)
    assert fm.power_w(1200.0, 5.0, 0.01, 1000.0, 0.001, None) == pytest.approx(22.28, rel=1e-12)
    # cap at 20 W binds above, not below: 5 + 0.01 * 800 = 13
    assert fm.power_w(1200.0, 5.0, 0.01, 1000.0, 0.001, 20.0) == 20.0
    assert fm.power_w(800.0, 5.0, 0.01, 1000.0, 0.001, 20.0) == pytest.approx(13.0, rel=1e-12)
    arr = fm.power_w(np.array([800.0, 1200.0]), 5.0, 0.01, 1000.0, 0.001, 20.0)
    assert arr.tolist() == pytest.approx([13.0, 20.0], rel=1e-12)


def test_mem_time_scales_inversely_with_memory_clock():
    # 0.5 s at 3200 MHz -> 0.5 * 3200 / 1600 = 1.0 s at 1600 MHz
    assert fm.mem_time_s(0.5, 1600.0, 3200.0) == pytest.approx(1.0, rel=1e-12)
    assert fm.mem_time_s(0.5, 6400.0, 3200.0) == pytest.approx(0.25, rel=1e-12)
    assert fm.mem_time_s(0.0, 1600.0, 3200.0) == 0.0
    assert fm.mem_time_s(1.0, 1600.0, 3200.0) == pytest.approx(2.0, rel=1e-12)  # 1 * 3200 / 1600
    assert fm.mem_time_s(0.5, None, 3200.0) == 0.5
    assert fm.mem_time_s(0.5, 1600.0, None) == 0.5


def test_roofline_adds_or_overlaps():
    # k = 1: 0.2 + 0.3; k = 2: sqrt(0.04 + 0.09)
    assert fm.roofline_time_s(0.2, 0.3) == pytest.approx(0.5, rel=1e-12)
    assert fm.roofline_time_s(0.2, 0.3, 2.0) == pytest.approx(math.sqrt(0.13), rel=1e-12)
    assert fm.roofline_time_s(0.2, 0.0, 2.0) == 0.2
    assert fm.roofline_time_s(0.0, 0.3, 2.0) == 0.3
    # a part of exactly 1 s is not a special case: 1 + 0.5
    assert fm.roofline_time_s(1.0, 0.5) == pytest.approx(1.5, rel=1e-12)
    assert fm.roofline_time_s(0.5, 1.0) == pytest.approx(1.5, rel=1e-12)
    arr = fm.roofline_time_s(np.array([0.2, 0.4]), np.array([0.3, 0.3]), 2.0)
    assert arr.tolist() == pytest.approx([math.sqrt(0.13), 0.5], rel=1e-12)  # 0.5 = hypot(.4,.3)


def test_roofline_large_k_is_the_larger_part_without_underflow():
    # k = 1000: (0.3^1000 + 0.2^1000)^(1/1000) = 0.3 * (1 + (2/3)^1000)^(1/1000) = 0.3; unscaled
    # powers of 0.3 and 0.2 underflow to 0 and would give 0.
    arr = fm.roofline_time_s(np.array([0.2]), np.array([0.3]), 1000.0)
    assert arr.tolist() == pytest.approx([0.3], rel=1e-9)


def test_time_with_and_without_the_low_clock_term():
    # compute 200 / 1000 = 0.2, memory 0.1, k = 1 by default: 0.3
    assert fm.time_s(1000.0, 0.1, 200.0) == pytest.approx(0.3, rel=1e-12)
    # + 0.05 * (500 / 1000)^2 = 0.0125
    assert fm.time_s(1000.0, 0.1, 200.0, 1.0, 0.05, 500.0, 2.0) == pytest.approx(0.3125, rel=1e-12)
    # default exponent 0: the low term is the constant 0.05
    assert fm.time_s(1000.0, 0.1, 200.0, low_s=0.05, low_ref_mhz=500.0) == pytest.approx(
        0.35, rel=1e-12
    )
    # default reference 1 MHz: 0.05 * (1 / 1000)^2 = 5e-8
    assert fm.time_s(1000.0, 0.1, 200.0, low_s=0.05, low_exp=2.0) == pytest.approx(
        0.3 + 5e-8, rel=1e-13
    )


# -- power.py ----------------------------------------------------------------------------

from governor.errors import CalibrationError  # noqa: E402
from governor.models import power as pw  # noqa: E402


def _truth():
    return pw.PowerModel(20.0, 0.05, 1000.0, 0.0008)


def test_power_model_evaluates_the_formula_scalar_and_array():
    m = pw.PowerModel(20.0, 0.05, 1000.0, 0.0008, p_max_w=100.0)
    # 1500 MHz: V = 1 + 0.0008 * 500 = 1.4; 20 + 0.05 * 1500 * 1.96 = 167 -> capped 100
    # 800 MHz: 20 + 0.05 * 800 = 60
    assert isinstance(m.power_w(800.0), float) and m.power_w(800.0) == pytest.approx(60.0)
    assert m.power_w(np.array([800.0, 1500.0])).tolist() == pytest.approx([60.0, 100.0])
    assert m.volts(1500.0) == pytest.approx(1.4)


def test_power_model_dict_round_trip_and_defaults():
    m = pw.PowerModel(
        20.0,
        0.05,
        1000.0,
        0.0008,
        150.0,
        {"p_idle_w": 0.5},
        0.1,
        0.02,
        9,
        2,
        False,
        (900.0, 1100.0),
    )
    d = m.to_dict()
    assert d["p_max_w"] == 150.0 and d["ridge_interval_mhz"] == [900.0, 1100.0]
    assert d["interval_level"] == 0.9 and d["ridge_reached"] is False
    assert pw.PowerModel.from_dict(d) == m
    bare = pw.PowerModel.from_dict(
        {
            "p_idle_w": 1,
            "alpha_w_per_mhz": 2,
            "ridge_clock_mhz": 3,
            "beta_per_mhz": 4,
            "uncertainty": {"beta_per_mhz": None, "p_idle_w": 1},
        }
    )
    assert math.isinf(bare.p_max_w) and bare.uncertainty == {"p_idle_w": 1.0}
    assert (bare.residual_rms_w, bare.max_rel_residual, bare.n_points, bare.n_capped) == (
        0.0,
        0.0,
        0,
        0,
    )
    assert bare.ridge_reached is True and all(math.isnan(v) for v in bare.ridge_interval_mhz)
    # a model built by hand claims nothing it was not told: no cap, ridge reached, no interval
    hand = _truth()
    assert hand.ridge_reached is True and math.isinf(hand.p_max_w) and hand.n_points == 0
    d = bare.to_dict()
    assert d["p_max_w"] is None and d["ridge_interval_mhz"] == [None, None]


def test_fit_recovers_exact_parameters_and_counts():
    f = np.arange(300.0, 1801.0, 100.0)  # 16 clocks
    # +-0.1 % deterministic ripple, so the ridge interval has a residual to work from
    ripple = 1.0 + 0.001 * np.where(np.arange(16) % 2 == 0, 1.0, -1.0)
    m = pw.fit_power_model(f, _truth().power_w(f) * ripple)
    assert m.p_idle_w == pytest.approx(20.0, rel=2e-2)
    assert m.alpha_w_per_mhz == pytest.approx(0.05, rel=2e-2)
    assert m.ridge_clock_mhz == pytest.approx(1000.0, rel=2e-2)
    assert m.beta_per_mhz == pytest.approx(0.0008, rel=5e-2)
    assert (m.n_points, m.n_capped, m.ridge_reached) == (16, 0, True)
    assert math.isinf(m.p_max_w) and m.max_rel_residual < 3e-3 and m.residual_rms_w < 0.3
    lo, hi = m.ridge_interval_mhz
    assert lo <= 1000.0 <= hi
    assert set(m.uncertainty) == {"p_idle_w", "alpha_w_per_mhz", "ridge_clock_mhz", "beta_per_mhz"}
    # the ridge SD is the interval's half-width over z(0.95) = 1.645
    assert m.uncertainty["ridge_clock_mhz"] == pytest.approx((hi - lo) / 2 / 1.645, rel=1e-6)


def test_fit_of_a_straight_line():
    f = np.arange(300.0, 901.0, 100.0)  # all below 1000: a straight line
    m = pw.fit_power_model(f, _truth().power_w(f))
    # a straight line: P = 20 + 0.05 f at every point
    assert m.power_w(600.0) == pytest.approx(50.0, rel=1e-6)


def test_plateau_at_the_top_is_detected_as_capped():
    f = np.arange(300.0, 1801.0, 100.0)
    p = np.minimum(_truth().power_w(f), 120.0)  # truth: 1500 -> 167 W; 1300 -> 125.5 W
    capped_truth = p >= 120.0
    m = pw.fit_power_model(f, p)
    assert m.n_capped == int(capped_truth.sum()) and m.p_max_w == pytest.approx(120.0)
    assert m.ridge_clock_mhz == pytest.approx(1000.0, rel=0.02)
    flags = pw._detect_capped(f, p)
    assert flags.tolist() == capped_truth.tolist()
    # no rising pair at all: nothing is capped
    assert not pw._detect_capped(np.array([1.0, 2.0, 3.0]), np.array([3.0, 2.0, 1.0])).any()
    # given flags win over detection; too few free points: flags dropped
    m2 = pw.fit_power_model(f, p, capped=capped_truth)
    assert m2.n_capped == int(capped_truth.sum())


def test_fit_refusals():
    f = [300.0, 600.0, 900.0]
    for clocks, powers, match in [
        ([1.0, 2.0], [1.0], "equal-length"),
        ([0.0, 1.0, 2.0], [1.0, 2.0, 3.0], "positive finite"),
        ([1.0, 2.0, 3.0], [1.0, -2.0, 3.0], "positive finite"),
        ([1.0, math.nan, 3.0], [1.0, 2.0, 3.0], "positive finite"),
        ([1.0, 1.0, 3.0, 3.0], [1.0, 2.0, 3.0, 4.0], "at least 3 distinct clocks, got 2"),
        (f, [30.0, 20.0, 10.0], "does not rise"),
    ]:
        with pytest.raises(CalibrationError, match=match):
            pw.fit_power_model(clocks, powers)


def test_numeric_jacobian_of_a_linear_map():
    mat = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    jac = pw._numeric_jacobian(lambda q: mat @ q, np.array([0.5, 2.0]))
    assert jac == pytest.approx(mat, rel=1e-5)


# -- time.py -----------------------------------------------------------------------------

from governor.models import time as tmod  # noqa: E402

F = np.arange(300.0, 1501.0, 150.0)  # 9 clocks


def test_time_model_evaluates_and_splits_memory_share():
    m = tmod.TimeModel(0.1, 200.0, top_clock_mhz=1000.0)
    # 0.1 + 200 / 1000 = 0.3
    assert isinstance(m.time_s(1000.0), float) and m.time_s(1000.0) == pytest.approx(0.3)
    assert m.time_s(np.array([1000.0, 2000.0])).tolist() == pytest.approx([0.3, 0.2])
    assert m.memory_share(1000.0) == pytest.approx(1 / 3)
    assert m.memory_bound_share == pytest.approx(1 / 3)
    # no top clock: taken where the parts are equal, c / t_mem = 2000 MHz -> 0.1 / 0.2
    assert tmod.TimeModel(0.1, 200.0).memory_bound_share == pytest.approx(0.5)
    assert tmod.TimeModel(0.0, 200.0).memory_bound_share == 0.0
    # a sharp roofline where memory dominates: the share is capped at 1
    assert tmod.TimeModel(0.5, 200.0, k=16.0).memory_share(1000.0) <= 1.0


def test_time_model_dict_round_trip_and_defaults():
    m = tmod.TimeModel(
        0.1,
        200.0,
        2.0,
        {"c_s_mhz": 1.0},
        0.01,
        0.05,
        300.0,
        3.0,
        0.004,
        1500.0,
        "roofline + low-clock (f_low/f)^3",
    )
    d = m.to_dict()
    assert d["kind"] == m.form and d["loo_rel_error"] == 0.004 and d["top_clock_mhz"] == 1500.0
    assert tmod.TimeModel.from_dict(d) == m
    bare = tmod.TimeModel.from_dict({"t_mem_s": 0.1, "c_s_mhz": 200, "k": None})
    assert (bare.k, bare.low_s, bare.low_ref_mhz, bare.low_exp, bare.max_rel_residual) == (
        1.0,
        0.0,
        1.0,
        0.0,
        0.0,
    )
    assert math.isnan(bare.loo_rel_error) and math.isnan(bare.top_clock_mhz)
    assert bare.form == "roofline"
    d = bare.to_dict()
    assert d["loo_rel_error"] is None and d["top_clock_mhz"] is None


def test_forms_tried_depend_on_the_point_count():
    assert tmod._forms(3) == [(1.0, 0.0)]
    forms = tmod._forms(4)
    assert forms[0] == (1.0, 0.0) and len(forms) == 1 + 6 + 4
    assert (16.0, 0.0) in forms and (1.0, 6.0) in forms


def test_fit_two_term_data_exactly():
    m = tmod.fit_time_model(F, 0.1 + 200.0 / F)
    assert m.t_mem_s == pytest.approx(0.1, rel=1e-4) and m.c_s_mhz == pytest.approx(200.0, rel=1e-4)
    assert (m.k, m.low_exp, m.low_ref_mhz, m.form) == (1.0, 0.0, 1.0, "two-term")
    assert m.top_clock_mhz == 1500.0 and m.max_rel_residual < 1e-4
    assert m.loo_rel_error < 1e-4
    # three points: only the simplest form, no held-out error
    m3 = tmod.fit_time_model(F[:3], 0.1 + 200.0 / F[:3])
    assert m3.form == "two-term" and math.isnan(m3.loo_rel_error)


def test_fit_low_clock_rise_is_modelled():
    t = 0.1 + 200.0 / F + 0.3 * (300.0 / F) ** 3
    m = tmod.fit_time_model(F, t)
    assert m.low_exp > 0 and m.low_ref_mhz == 300.0 and "low-clock" in m.form
    assert m.max_rel_residual < 0.02
    two = tmod.fit_time_model(F, t, forms=[(1.0, 0.0)])
    assert two.max_rel_residual > m.max_rel_residual


def test_fit_sharp_roofline():
    t = (0.2**8 + (200.0 / F) ** 8) ** (1 / 8)
    m = tmod.fit_time_model(F, t)
    assert m.k > 1.0 and m.form.startswith("roofline")
    assert m.time_s(1500.0) == pytest.approx(0.2, rel=0.02)


def test_one_outlier_is_allowed_with_six_points_two_are_not():
    t = 0.1 + 200.0 / F
    one = t.copy()
    one[4] *= 1.3
    assert tmod.fit_time_model(F, one, forms=[(1.0, 0.0)]).max_rel_residual > 0.08
    two = one.copy()
    two[6] *= 1.3
    with pytest.raises(CalibrationError, match="time model does not explain"):
        tmod.fit_time_model(F, two, forms=[(1.0, 0.0)])
    few = (0.1 + 200.0 / F)[:5]
    few[2] *= 1.3
    with pytest.raises(CalibrationError, match="time model does not explain"):
        tmod.fit_time_model(F[:5], few, forms=[(1.0, 0.0)])


def test_time_fit_refusals():
    for clocks, times, match in [
        ([1.0, 2.0], [1.0], "equal-length"),
        ([1.0, 2.0], [1.0, 0.0], "positive finite"),
        ([1.0, -2.0], [1.0, 1.0], "positive finite"),
        ([1.0, math.inf], [1.0, 1.0], "positive finite"),
        ([0.0, 2.0], [1.0, 1.0], "positive finite"),
        ([1.0, 2.0], [1.0, math.nan], "positive finite"),
        ([5.0, 5.0, 5.0], [1.0, 1.0, 1.0], "at least 2 distinct"),
    ]:
        with pytest.raises(CalibrationError, match=match):
            tmod.fit_time_model(clocks, times)


# -- optimum.py --------------------------------------------------------------------------

from statistics import NormalDist  # noqa: E402

from governor.models import optimum as om  # noqa: E402

TABLE = np.arange(300.0, 1801.0, 50.0)
TRUE_T = tmod.TimeModel(0.004, 6.0)  # t = 0.004 + 6 / f


def _energy(clocks):
    return _truth().power_w(clocks) * TRUE_T.time_s(clocks)


def _band(spread):
    return NormalDist().inv_cdf(0.9) * math.sqrt(2.0) * spread


def test_interval_on_exact_probes_uses_the_minimum_error():
    probes = np.array([300.0, 600.0, 900.0, 1200.0, 1500.0, 1800.0])
    p, t = _truth().power_w(probes), TRUE_T.time_s(probes)
    iv = om.optimum_interval(TABLE, probes, p, t, _truth(), TRUE_T)
    assert iv.held_out_rel_error < 1e-3  # exact data: held-out error ~0
    assert iv.band_rel == pytest.approx(_band(0.002), rel=1e-9)  # floored at 0.2 %
    e = _energy(TABLE)
    inside = TABLE[e <= e.min() * (1.0 + _band(0.002))]
    assert (iv.low_mhz, iv.high_mhz) == (inside.min(), inside.max())
    assert iv.low_mhz <= TABLE[np.argmin(e)] <= iv.high_mhz and iv.level == 0.9
    # a chosen clock outside stretches it, on either side; NaN is ignored
    assert (
        om.optimum_interval(TABLE, probes, p, t, _truth(), TRUE_T, chosen_mhz=300.0).low_mhz
        == 300.0
    )
    assert (
        om.optimum_interval(TABLE, probes, p, t, _truth(), TRUE_T, chosen_mhz=1800.0).high_mhz
        == 1800.0
    )
    same = om.optimum_interval(TABLE, probes, p, t, _truth(), TRUE_T, chosen_mhz=math.nan)
    assert (same.low_mhz, same.high_mhz) == (iv.low_mhz, iv.high_mhz)
    wider = om.optimum_interval(TABLE, probes, p, t, _truth(), TRUE_T, level=0.99)
    assert wider.band_rel == pytest.approx(NormalDist().inv_cdf(0.99) * math.sqrt(2) * 0.002)
    d = iv.to_dict()
    assert d["low_mhz"] == iv.low_mhz and d["band_rel"] == iv.band_rel and d["level"] == 0.9
    assert d["held_out_rel_error"] == iv.held_out_rel_error
    import dataclasses

    with pytest.raises(dataclasses.FrozenInstanceError):
        iv.low_mhz = 0.0


def test_interval_without_held_out_probes_uses_the_fit_residual():
    probes = np.array([300.0, 1000.0, 1800.0])  # one interior probe: 2 left, no fit
    p, t = _truth().power_w(probes), TRUE_T.time_s(probes)
    loose = tmod.TimeModel(0.004, 6.0, max_rel_residual=0.05)
    iv = om.optimum_interval(TABLE, probes, p, t, _truth(), loose)
    assert math.isnan(iv.held_out_rel_error) and iv.to_dict()["held_out_rel_error"] is None
    assert iv.band_rel == pytest.approx(_band(0.05), rel=1e-9)
    tight = om.optimum_interval(TABLE, probes, p, t, _truth(), TRUE_T)  # residual 0 -> 0.2 %
    assert tight.band_rel == pytest.approx(_band(0.002), rel=1e-9)


def test_held_out_error_is_the_robust_spread_of_relative_errors():
    probes = np.array([300.0, 500.0, 700.0, 900.0, 1100.0, 1300.0, 1500.0, 1800.0])
    p, t = _truth().power_w(probes), TRUE_T.time_s(probes).copy()
    t[3] *= 1.05  # one interior probe 5 % slow
    cap = np.zeros(len(probes), dtype=bool)
    errs = om._held_out_errors(probes, p, t, cap, (1.0, 0.0))
    assert len(errs) == 6  # interior probes only
    iv = om.optimum_interval(TABLE, probes, p, t, _truth(), TRUE_T)
    assert iv.held_out_rel_error == pytest.approx(float(np.median(np.abs(errs))) / 0.6745)
    # capped probes (a 150 W plateau at 1500 and 1800 MHz) are not held out: 5 of 6 interior
    p = p.copy()
    p[6] = p[7] = 150.0
    cap[6] = cap[7] = True
    assert len(om._held_out_errors(probes, p, t, cap, (1.0, 0.0))) == 5


def test_time_fit_edges_two_clocks_and_four_points():
    # two distinct clocks are enough: t = 0.1 + 20 / f at 100 and 200 MHz
    m = tmod.fit_time_model([100.0, 200.0], [0.3, 0.2])
    assert m.time_s(150.0) == pytest.approx(0.1 + 20 / 150, rel=1e-4)
    # from 4 points the form is chosen by held-out error (a number, not NaN)
    m4 = tmod.fit_time_model(F[:4], 0.1 + 200.0 / F[:4])
    assert math.isfinite(m4.loo_rel_error) and m4.form == "two-term"


def test_power_fit_with_points_inside_ten_percent_but_no_trend_is_refused():
    # 100 W + 0.01 W/MHz over 300-1200 MHz (a 9 W rise) under +-6 % alternating noise: every
    # point is within 10 %, but the noise (+-6 W) swamps the rise: R^2 far below 0.9
    f = np.arange(300.0, 1201.0, 100.0)
    p = (100.0 + 0.01 * f) * (1.0 + 0.06 * np.where(np.arange(len(f)) % 2 == 0, 1.0, -1.0))
    with pytest.raises(CalibrationError, match="R² 0.[0-8]"):
        pw.fit_power_model(f, p)


def test_power_uncertainty_grows_with_noise_and_models_are_frozen():
    import dataclasses

    f = np.arange(300.0, 1801.0, 100.0)
    sign = np.where(np.arange(16) % 2 == 0, 1.0, -1.0)
    quiet = pw.fit_power_model(f, _truth().power_w(f) * (1.0 + 0.001 * sign))
    loud = pw.fit_power_model(f, _truth().power_w(f) * (1.0 + 0.01 * sign))
    for name in ("p_idle_w", "alpha_w_per_mhz"):
        assert loud.uncertainty[name] > 3.0 * quiet.uncertainty[name]
    with pytest.raises(dataclasses.FrozenInstanceError):
        quiet.p_idle_w = 1.0


def test_numeric_jacobian_step_scales_with_the_parameter():
    # d(q^2)/dq = 2q = 20000 at q = 1e4; a step of 1e-7 * |q| = 1e-3 keeps the forward
    # difference accurate (error = step = 0.001); an unscaled tiny step would lose it to
    # rounding of q^2 = 1e8
    jac = pw._numeric_jacobian(lambda q: q**2, np.array([1e4]))
    assert jac[0, 0] == pytest.approx(20000.0, abs=0.01)


# -- the ridge interval ------------------------------------------------------------------


def test_ridge_interval_on_exact_data_is_the_true_ridge():
    # Exact data: the ridge is pinned, and the interval shrinks onto it. It used to fall back
    # to the whole probed range here (300 to 1800 MHz) when the kink missed the profile's ridge
    # grid, yet gave a point when the kink lay on it (docs/mutation.md, Findings): the answer
    # hung on the grid. Its ends are now solved where the profile crosses the limit, so both
    # cases give the true ridge, and the ridge SD reported from the interval vanishes.
    f = np.arange(300.0, 1801.0, 100.0)
    m = pw.fit_power_model(f, _truth().power_w(f))
    assert m.ridge_interval_mhz == pytest.approx((1000.0, 1000.0), abs=1e-3)
    assert m.uncertainty["ridge_clock_mhz"] == pytest.approx(0.0, abs=1e-3)
    # called directly in normalised units, exact data whose kink (0.6) lies on the ridge scan
    x = np.linspace(0.2, 1.0, 9)
    y = 0.1 + 0.5 * x * (1.0 + 2.0 * np.maximum(0.0, x - 0.6)) ** 2
    # (to 1e-6: the limit is never under the profile's rounding, n·eps·S(y·y), and the
    # profile rises as the square of the distance from the kink, so about sqrt(eps) wide)
    assert pw._ridge_interval(x, y, 0.0, 4, 0.6) == pytest.approx((0.6, 0.6), abs=1e-6)
    # and off the scan (0.61 is no scanned ridge: 0.2 + k·0.005): the same, to the tolerance
    y = 0.1 + 0.5 * x * (1.0 + 2.0 * np.maximum(0.0, x - 0.6123)) ** 2
    m = pw.fit_power_model(x * 1000.0, y * 100.0)
    assert m.ridge_clock_mhz == pytest.approx(612.3, abs=1e-3)
    assert m.ridge_interval_mhz == pytest.approx((612.3, 612.3), abs=1e-3)


def _exact_ridge_interval(f, p, window):
    """The 90 % profile-likelihood interval of the ridge (MHz): every ridge whose profile SSE
    is within SSE_min·(1 + F(q; 1, n - 4)/(n - 4)), q the calibrated quantile
    (``RIDGE_LR_QUANTILE``), its ends found to 0.01 MHz."""
    from scipy.optimize import brentq
    from scipy.stats import f as f_dist

    grid = np.linspace(window[0], window[1], 121)
    prof = np.array([profile_sse_w2(f, p, r) for r in grid])
    dof = len(f) - 4
    limit = prof.min() * (1.0 + f_dist.ppf(pw.RIDGE_LR_QUANTILE, 1, dof) / dof)
    inside = np.nonzero(prof <= limit)[0]
    a, b = int(inside.min()), int(inside.max())
    assert 0 < a and b < len(grid) - 1  # the interval lies inside the window

    def over(r):
        return profile_sse_w2(f, p, r) - limit

    lo = brentq(over, grid[a - 1], grid[a], xtol=0.01)
    return lo, brentq(over, grid[b], grid[b + 1], xtol=0.01)


@pytest.mark.parametrize("seed", [1, 4])
def test_ridge_interval_lies_inside_the_exact_profile_likelihood_interval(seed):
    # 16 clocks with 1 % Gaussian noise: the data place the kink, so the interval is a narrow
    # band around the fitted ridge. The fit profiles the SSE on grids (ridge and slope), which
    # can only overestimate the exact profile, so its interval lies within the exact one (to
    # 1 MHz of ridge-grid resolution) and always holds the fitted ridge.
    f = np.arange(300.0, 1801.0, 100.0)
    p = _truth().power_w(f) * (1.0 + 0.01 * np.random.default_rng(seed).standard_normal(16))
    m = pw.fit_power_model(f, p)
    exact_lo, exact_hi = _exact_ridge_interval(f, p, (700.0, 1300.0))
    lo, hi = m.ridge_interval_mhz
    assert exact_lo - 1.0 <= lo <= m.ridge_clock_mhz <= hi <= exact_hi + 1.0
    assert exact_lo < 1000.0 < exact_hi  # (the truth is inside the exact one for these seeds)
    assert hi - lo < 0.1 * (1800.0 - 300.0)  # not the fallback to the probed range


def test_parameter_uncertainties_are_the_least_squares_standard_errors():
    # one SD of p_idle, alpha and beta: sqrt(diag(s²·(JᵀJ)⁻¹)) with s² = SSE / (n - 4) and J the
    # model's Jacobian at the fitted parameters (by central differences here, in MHz and W)
    f = np.arange(300.0, 1801.0, 100.0)
    p = _truth().power_w(f) * (1.0 + 0.01 * np.random.default_rng(1).standard_normal(16))
    m = pw.fit_power_model(f, p)
    q = np.array([m.p_idle_w, m.alpha_w_per_mhz, m.ridge_clock_mhz, m.beta_per_mhz])

    def model(v):
        return pw.PowerModel(*v).power_w(f)

    cols = []
    for i, h in enumerate(np.abs(q) * 1e-6):
        up, down = q.copy(), q.copy()
        up[i] += h
        down[i] -= h
        cols.append((model(up) - model(down)) / (2 * h))
    jac = np.stack(cols, 1)
    s2 = float(np.sum((model(q) - p) ** 2)) / (len(f) - 4)
    sd = np.sqrt(np.diag(np.linalg.inv(jac.T @ jac) * s2))
    assert m.uncertainty["p_idle_w"] == pytest.approx(sd[0], rel=0.01)
    assert m.uncertainty["alpha_w_per_mhz"] == pytest.approx(sd[1], rel=0.01)
    assert m.uncertainty["beta_per_mhz"] == pytest.approx(sd[3], rel=0.01)


def test_fit_refines_exact_data_to_the_true_parameters():
    # the grid only finds the kink to a grid step (1500 MHz / 40); the least-squares refinement
    # must then land on the truth itself
    for truth in (_truth(), pw.PowerModel(5.0, 0.01, 700.0, 0.002)):
        f = np.arange(300.0, 1801.0, 100.0)
        m = pw.fit_power_model(f, truth.power_w(f))
        assert m.p_idle_w == pytest.approx(truth.p_idle_w, rel=1e-5)
        assert m.alpha_w_per_mhz == pytest.approx(truth.alpha_w_per_mhz, rel=1e-5)
        assert m.ridge_clock_mhz == pytest.approx(truth.ridge_clock_mhz, rel=1e-5)
        assert m.beta_per_mhz == pytest.approx(truth.beta_per_mhz, rel=1e-5)
        assert m.max_rel_residual < 1e-6


def test_a_gentle_voltage_rise_still_counts_as_reaching_the_ridge():
    # beta = 0.0003 /MHz: V rises only to 1.24 at 1800 MHz, but the points above 1000 MHz lie
    # above the ridge all the same
    gentle = pw.PowerModel(20.0, 0.05, 1000.0, 0.0003)
    f = np.arange(300.0, 1801.0, 100.0)
    m = pw.fit_power_model(f, gentle.power_w(f))
    assert m.ridge_clock_mhz == pytest.approx(1000.0, rel=1e-3) and m.ridge_reached is True


def test_five_points_leave_one_degree_of_freedom_for_uncertainties():
    f = np.array([300.0, 700.0, 1100.0, 1400.0, 1800.0])
    p = _truth().power_w(f) * np.array([1.01, 0.99, 1.0, 1.01, 0.99])
    m = pw.fit_power_model(f, p)
    assert set(m.uncertainty) == {"p_idle_w", "alpha_w_per_mhz", "ridge_clock_mhz", "beta_per_mhz"}
    assert all(v > 0 for v in m.uncertainty.values())
    # four points: no residual freedom, no uncertainties, and the interval is the probed range
    m4 = pw.fit_power_model(f[:4], _truth().power_w(f[:4]))
    assert m4.uncertainty == {} and m4.ridge_interval_mhz == (300.0, 1400.0)


def test_three_uncapped_points_are_enough_to_keep_the_capped_flags():
    # 5 clocks, the top two flagged as capped at 100 W: the 3 others fit the CMOS law
    f = np.array([300.0, 500.0, 700.0, 900.0, 1100.0])
    p = np.array([50.0, 70.0, 90.0, 100.0, 100.0])  # 20 + 0.1 f below: 110 W at 900 MHz
    m = pw.fit_power_model(f, p, capped=[False, False, False, True, True])
    assert (m.n_capped, m.p_max_w) == (2, 100.0)
    assert m.power_w(600.0) == pytest.approx(80.0, rel=1e-6)
    # two uncapped points cannot carry the fit: the flags are dropped and all five are fitted
    with pytest.raises(CalibrationError) as err:
        pw.fit_power_model(f, p, capped=[False, False, True, True, True])
    assert err.value.data["model"]["n_capped"] == 0


def test_a_plateau_after_a_single_rise_is_detected():
    # one rising step (10 -> 40 W), then flat: the flat top point is at the limit
    flags = pw._detect_capped(np.array([300.0, 600.0, 900.0]), np.array([10.0, 40.0, 40.0]))
    assert flags.tolist() == [False, False, True]


# -- the time fit: start points, small samples, the outlier allowance, the message -------


@pytest.mark.parametrize("t_mem", [0.15, 0.2])
def test_a_sharp_roofline_whose_memory_floor_shows_only_at_the_top_is_fitted(t_mem):
    # k = 16: t = max(t_mem, 200 / f) to within 4 %; the memory floor is reached only above
    # 200 / t_mem = 1333 (1000) MHz of the 300-1500 MHz sweep. Fitting that form must find the
    # floor all the same (from the two-term start it sits on the compute part).
    t = (t_mem**16 + (200.0 / F) ** 16) ** (1 / 16)
    m = tmod.fit_time_model(F, t, forms=[(16.0, 0.0)])
    assert m.t_mem_s == pytest.approx(t_mem, rel=1e-4)
    assert m.c_s_mhz == pytest.approx(200.0, rel=1e-4)
    assert m.max_rel_residual < 1e-4


def test_four_clocks_are_enough_to_choose_a_low_clock_term():
    # the smallest sample whose form is chosen by held-out error: with a low-clock rise in the
    # data, the low-clock form must be among those tried and win
    f = np.array([300.0, 600.0, 900.0, 1200.0])
    t = 0.1 + 200.0 / f + 0.3 * (300.0 / f) ** 2
    m = tmod.fit_time_model(f, t)
    assert "low-clock" in m.form and m.max_rel_residual < 0.01


def test_six_points_tolerate_one_outlier_row():
    # "with 6+ points one outlier row may miss": 6 clocks, one row 30 % slow, is accepted and
    # the others are still explained; 5 clocks with the same row are refused (above)
    f = F[:6]
    t = 0.1 + 200.0 / f
    t[3] *= 1.3
    m = tmod.fit_time_model(f, t, forms=[(1.0, 0.0)])
    rel = np.abs(m.time_s(f) / t - 1.0)
    assert m.max_rel_residual == pytest.approx(rel.max()) and rel[3] > 0.2
    assert np.delete(rel, 3).max() < 0.02


def test_the_refusal_message_gives_the_worst_miss_in_percent():
    # five clocks (no outlier allowance), one row five times as slow: the message's percentage
    # is the kept model's worst relative miss (about 1 - 1/5 = 80 %), rounded
    f = F[:5]
    t = 0.1 + 200.0 / f
    t[2] *= 5.0
    with pytest.raises(CalibrationError) as err:
        tmod.fit_time_model(f, t, forms=[(1.0, 0.0)])
    model = tmod.TimeModel.from_dict(err.value.data["model"])
    worst = float(np.max(np.abs(model.time_s(f) / t - 1.0)))
    assert worst == pytest.approx(0.8, abs=0.01)
    assert f"off by {100 * worst:.0f} %" in str(err.value)


def test_the_simplest_form_wins_whatever_order_the_forms_are_offered_in():
    # compute-only data (t = 200 / f) are explained exactly by the two-term form (t_mem = 0)
    # and by a roofline; the roofline's sharpness is one more parameter, so among forms that
    # predict equally well the two-term form is chosen even when offered second
    t = 200.0 / F
    m = tmod.fit_time_model(F, t, forms=[(2.0, 0.0), (1.0, 0.0)])
    assert (m.form, m.k) == ("two-term", 1.0)
    assert m.c_s_mhz == pytest.approx(200.0, rel=1e-6)


def test_a_straight_line_reaches_no_ridge():
    # every clock below any ridge: the fit's kink may sit just under the top clock with a
    # vanishing slope (b ~ 1e-13), which is no voltage rise (docs/mutation.md, Findings)
    f = np.arange(300.0, 901.0, 100.0)
    m = pw.fit_power_model(f, 20.0 + 0.05 * f)
    assert m.ridge_reached is False
    # a real rise over the last 100 MHz of the same range does count
    rising = pw.PowerModel(20.0, 0.05, 800.0, 0.001)
    assert pw.fit_power_model(f, rising.power_w(f)).ridge_reached is True


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_ridge_interval_at_low_noise_is_narrow_and_holds_the_truth(seed):
    # 0.3 % noise, 16 clocks: the slope grid alone let no ridge pass for seeds 1 and 2 (the
    # whole probed range) and missed the truth for seed 3 (993.9-999.8 MHz)
    f = np.arange(300.0, 1801.0, 100.0)
    p = _truth().power_w(f) * (1.0 + 0.003 * np.random.default_rng(seed).standard_normal(16))
    lo, hi = pw.fit_power_model(f, p).ridge_interval_mhz
    assert lo < 1000.0 < hi and hi - lo < 40.0


# -- defaults, forced forms and the parameter count (branch h-mut) ------------------------


def test_a_profile_without_the_optional_keys_loads_as_the_model_with_its_defaults():
    # a model saved before a field existed, or written by hand, names only the parameters: it
    # must load as the same model built from those parameters, so the loader's defaults and
    # the class's agree (a residual, an error and a point count of 0 mean "none recorded")
    params = {
        "p_idle_w": 20.0,
        "alpha_w_per_mhz": 0.05,
        "ridge_clock_mhz": 1000.0,
        "beta_per_mhz": 0.001,
    }
    assert pw.PowerModel.from_dict(params) == pw.PowerModel(20.0, 0.05, 1000.0, 0.001)
    built = pw.PowerModel(20.0, 0.05, 1000.0, 0.001)
    assert (built.residual_rms_w, built.max_rel_residual, built.n_points, built.n_capped) == (
        0.0,
        0.0,
        0,
        0,
    )
    assert tmod.TimeModel.from_dict({"t_mem_s": 0.1, "c_s_mhz": 200.0}) == tmod.TimeModel(
        0.1, 200.0
    )


def test_a_form_fixed_by_the_caller_is_fitted_once_without_held_out_scoring(monkeypatch):
    # held-out error exists to choose among forms; a caller that fixes the form (optimum.py,
    # once per left-out probe) has nothing to choose, and must not pay one fit per point for it
    calls = []
    real = tmod._fit_form
    monkeypatch.setattr(tmod, "_fit_form", lambda *a: calls.append(a[2]) or real(*a))
    m = tmod.fit_time_model(F, 0.1 + 200.0 / F, forms=[(1.0, 0.0)])
    assert calls == [(1.0, 0.0)] and math.isnan(m.loo_rel_error)
    assert m.t_mem_s == pytest.approx(0.1, rel=1e-6) and m.c_s_mhz == pytest.approx(200.0, rel=1e-6)
    # two forms offered: each is scored by leaving each of the 9 points out, then the winner
    # is fitted to all of them: 2 * 9 + 1 fits
    calls.clear()
    tmod.fit_time_model(F, 0.1 + 200.0 / F, forms=[(1.0, 0.0), (2.0, 0.0)])
    assert len(calls) == 2 * len(F) + 1


def test_a_form_with_more_parameters_than_the_held_out_fits_have_points_is_not_scored(monkeypatch):
    # a roofline with a low-clock term has four parameters (t_mem, c, k, t_low); at four
    # clocks each held-out fit has three points, too few to pin them, so the form is never
    # scored and never chosen; at five clocks (four left per held-out fit) it is
    scored = []
    real = tmod._loo
    monkeypatch.setattr(
        tmod, "_loo", lambda f, t, form, f_low: scored.append(form) or real(f, t, form, f_low)
    )
    forms = [(1.0, 0.0), (2.0, 3.0)]
    f4 = np.array([300.0, 600.0, 900.0, 1200.0])
    m = tmod.fit_time_model(f4, 0.1 + 200.0 / f4, forms=forms)
    assert scored == [(1.0, 0.0)] and m.form == "two-term"
    scored.clear()
    f5 = np.array([300.0, 525.0, 750.0, 975.0, 1200.0])
    tmod.fit_time_model(f5, 0.1 + 200.0 / f5, forms=forms)
    assert scored == forms


def test_the_candidate_grids_are_tried_once_each_softest_first():
    # forms with as many parameters that predict equally well go to the first one scored, so
    # the grids must run from the softest roofline (nearest the two-term form) and the
    # gentlest low-clock rise upwards, each value once (a repeat costs a held-out fit per
    # point and leaves a gap elsewhere)
    for grid, floor in ((tmod._KS, 1.0), (tmod._LOW_EXPS, 0.0)):
        assert all(a < b for a, b in zip(grid, grid[1:])) and grid[0] > floor
    forms = tmod._forms(4)
    assert len(set(forms)) == len(forms)


def test_a_fitted_time_model_cannot_be_changed_in_place():
    # models are shared between a profile, the optimum search and the runtime: one holder
    # changing a field would change it under every other
    import dataclasses

    m = tmod.TimeModel(0.1, 200.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.t_mem_s = 0.2  # type: ignore[misc]
    assert m.t_mem_s == 0.1


# -- the exact ridge profile and the solved interval ends (branch h-mutpow) ----------------


def _sweep_with_noise(beta_per_mhz, noise_rel, seed, clocks=None):
    f = np.arange(300.0, 1801.0, 100.0) if clocks is None else np.asarray(clocks, dtype=float)
    truth = pw.PowerModel(20.0, 0.05, 1000.0, beta_per_mhz)
    rng = np.random.default_rng(seed)
    return f, truth.power_w(f) * (1.0 + noise_rel * rng.standard_normal(len(f)))


@pytest.mark.parametrize(
    "beta_per_mhz, noise_rel, seed, ridge_mhz",
    [
        (0.0008, 0.01, 1, 1000.0),  # a probe clock
        (0.0008, 0.01, 1, 1037.5),  # between probes
        (0.0003, 0.003, 2, 1210.0),  # best slope below 1 in normalised units (0.0003·1800)
        (0.0003, 0.003, 2, 250.0),  # below the lowest probe: every probe above the ridge
        (0.002, 0.02, 5, 1650.0),  # two probes above the ridge
    ],
)
def test_profile_sse_is_the_least_sse_over_every_slope(beta_per_mhz, noise_rel, seed, ridge_mhz):
    # the closed form (b = 0, the quintic's roots, b -> inf) against a bounded search over
    # log(beta) written in the test in MHz and W: the same least SSE, to 1e-6
    f, p = _sweep_with_noise(beta_per_mhz, noise_rel, seed)
    x, y = f / f.max(), p / p.max()
    r = ridge_mhz / f.max()
    oracle_w2 = profile_sse_w2(f, p, ridge_mhz)
    assert pw._profile_sse(x, y, r) * p.max() ** 2 == pytest.approx(oracle_w2, rel=1e-6)
    # the best finite slope is a real fit: its linear least squares give that SSE
    sse, b = min(c for c in pw._slope_candidates(x, y, r) if math.isfinite(c[1]))
    c0, a = pw._linear(x, y, r, b)
    direct = float(np.sum((fm.power_w(x, c0, a, r, b) - y) ** 2))
    assert a > 0 and b >= 0 and direct == pytest.approx(sse, rel=1e-9)
    assert sse * p.max() ** 2 == pytest.approx(oracle_w2, rel=1e-6)


def test_profile_sse_of_data_that_fall_with_clock_has_no_fit():
    # power falling with clock: no a > 0 explains it at any ridge or slope
    x = np.linspace(0.2, 1.0, 8)
    y = 1.0 - 0.5 * x
    assert pw._profile_sse(x, y, 0.5) == math.inf
    assert pw._slope_candidates(x, y, 0.5) == []


def test_profile_sse_at_the_top_probe_and_above_is_the_straight_line_fit():
    # a ridge at or above the top probe puts no probe above it: the fit is y = c0 + a·x,
    # whatever the slope, and its SSE is the straight line's
    x = np.linspace(0.2, 1.0, 8)
    y = 0.1 + 0.5 * x + 0.02 * np.sin(7.0 * x)
    line = np.polyfit(x, y, 1)
    sse_line = float(np.sum((np.polyval(line, x) - y) ** 2))
    assert pw._profile_sse(x, y, 1.0) == pytest.approx(sse_line, rel=1e-9)
    assert pw._profile_sse(x, y, 1.3) == pytest.approx(sse_line, rel=1e-9)


@pytest.mark.parametrize(
    "beta_per_mhz, noise_rel, seed, clocks",
    [
        pytest.param(
            0.0008,
            0.01,
            7,
            None,
            marks=pytest.mark.xfail(
                reason="with the grid start the fit's SSE and the test's least profile SSE "
                "disagree by 0.5 % here (the exact start passed); not resolved, "
                "docs/mutation.md",
                strict=True,
            ),
        ),
        (0.0008, 0.005, 3, [300.0, 600.0, 800.0, 950.0, 1100.0, 1300.0, 1500.0, 1800.0]),
    ],
)
def test_ridge_interval_ends_are_where_the_profile_crosses_the_limit(
    beta_per_mhz, noise_rel, seed, clocks
):
    # the limit SSE_min·(1 + F(1, n - 4; q)/(n - 4)) worked out in the test from the fit's
    # residuals (W), the profile at each end from the test's own bounded search: it equals
    # the limit at both ends (to the solver's tolerance), is under it 0.5 MHz inside and over
    # it 0.5 MHz outside
    from scipy.stats import f as f_dist

    f, p = _sweep_with_noise(beta_per_mhz, noise_rel, seed, clocks)
    m = pw.fit_power_model(f, p)
    dof = len(f) - 4
    # the least SSE over every ridge: the fit's, or the test's profile minimised over ridges
    # (at every probe, where it may kink, and between the best probe's neighbours)
    from scipy.optimize import minimize_scalar

    at_probes = [profile_sse_w2(f, p, c) for c in f]
    k = int(np.argmin(at_probes))
    between = minimize_scalar(
        lambda r: profile_sse_w2(f, p, r),
        bounds=(f[max(k - 1, 0)], f[min(k + 1, len(f) - 1)]),
        method="bounded",
        options={"xatol": 1e-4},
    )
    sse_min = min(m.residual_rms_w**2 * len(f), min(at_probes), float(between.fun))
    limit = sse_min * (1.0 + f_dist.ppf(pw.RIDGE_LR_QUANTILE, 1, dof) / dof)
    # the interval always holds the fitted ridge: where the fit ends at a ridge whose profile
    # is above that limit (seed 7: the refinement stops in a worse local minimum), the limit
    # is the profile there (docs/mutation.md, Findings)
    limit = max(limit, profile_sse_w2(f, p, m.ridge_clock_mhz))
    lo, hi = m.ridge_interval_mhz
    assert f[0] < lo < m.ridge_clock_mhz < hi < f[-1]
    for end, outward in ((lo, -1.0), (hi, 1.0)):
        assert profile_sse_w2(f, p, end) == pytest.approx(limit, rel=1e-5)
        assert (
            profile_sse_w2(f, p, end - 0.5 * outward)
            < limit
            < profile_sse_w2(f, p, end + 0.5 * outward)
        )
    # the reported SD is the interval's half-width over z(0.95)
    assert m.uncertainty["ridge_clock_mhz"] == pytest.approx((hi - lo) / 2 / 1.645, rel=1e-9)


def test_ridge_intervals_nest_as_the_level_rises(monkeypatch):
    # a higher quantile raises the limit, so the interval can only grow, and it always
    # holds the fitted ridge
    f, p = _sweep_with_noise(0.0008, 0.01, 11)
    widths = []
    for q in (0.5, 0.8, 0.95, 0.99):
        monkeypatch.setattr(pw, "RIDGE_LR_QUANTILE", q)
        m = pw.fit_power_model(f, p)
        lo, hi = m.ridge_interval_mhz
        assert lo <= m.ridge_clock_mhz <= hi
        widths.append((lo, hi))
    for (lo_a, hi_a), (lo_b, hi_b) in zip(widths, widths[1:]):
        assert lo_b < lo_a and hi_a < hi_b


def test_a_rise_below_the_least_one_inside_the_top_step_is_no_ridge():
    # exact data whose ridge (1790 MHz) lies inside the top step: only the 1800 MHz probe is
    # above it, with a voltage rise of 1e-5·10 = 1e-4, below RIDGE_MIN_RISE: no ridge reached
    # (the fit may treat it as a straight line, missing the top by less than that rise). Ten
    # times the rise (1e-3) is a ridge: the fit places it in the top step with that rise.
    f = np.arange(300.0, 1801.0, 100.0)
    p = pw.PowerModel(20.0, 0.05, 1790.0, 1e-5).power_w(f)
    m = pw.fit_power_model(f, p)
    assert m.max_rel_residual < 2.0 * 1e-4 and m.ridge_reached is False
    p = pw.PowerModel(20.0, 0.05, 1790.0, 1e-4).power_w(f)
    m = pw.fit_power_model(f, p)
    assert m.max_rel_residual < 1e-6
    assert 1700.0 <= m.ridge_clock_mhz < 1800.0
    rise = m.beta_per_mhz * (1800.0 - m.ridge_clock_mhz)
    assert rise == pytest.approx(1e-3, rel=1e-3)
    assert m.ridge_reached is True


def test_a_ridge_below_the_lowest_probe_is_reported_at_the_lowest_probe():
    # with every probe above the ridge, V = 1 + b·(f - r) = c·(1 + b/c·(f - f_min)) at every
    # probe (c = 1 + b·(f_min - r)), so no data tell r from f_min: the fit reports f_min,
    # with the equivalent slope b/c and alpha·c², and reproduces the powers
    f = np.arange(300.0, 1801.0, 100.0)
    truth = pw.PowerModel(20.0, 0.05, 200.0, 0.0008)
    m = pw.fit_power_model(f, truth.power_w(f))
    c = 1.0 + 0.0008 * (300.0 - 200.0)
    assert m.ridge_clock_mhz == pytest.approx(300.0, abs=1e-3)
    assert m.beta_per_mhz == pytest.approx(0.0008 / c, rel=1e-5)
    assert m.alpha_w_per_mhz == pytest.approx(0.05 * c * c, rel=1e-5)
    assert m.max_rel_residual < 1e-6 and m.ridge_reached is True


def test_numeric_jacobian_at_a_zero_parameter():
    # the step is eps·max(1, |q|): at q = 0 it is still eps, not zero (0/0)
    mat = np.array([[1.0, 2.0], [3.0, -1.0]])
    jac = pw._numeric_jacobian(lambda q: mat @ q, np.array([0.0, 0.0]))
    assert jac == pytest.approx(mat, rel=1e-6)


def test_profile_sse_counts_the_infimum_as_the_slope_grows_without_bound():
    # power with no linear part above the ridge, y = 0.3 + 0.5·x·(x - 0.5)²₊, is the limit
    # b -> inf of c0 + a·x·(1 + b·(x - 0.5))² with a·b² = 0.5: every finite slope leaves an
    # error, the infimum is 0
    x = np.linspace(0.2, 1.0, 9)
    y = 0.3 + 0.5 * x * np.maximum(0.0, x - 0.5) ** 2
    assert pw._profile_sse(x, y, 0.5) == pytest.approx(0.0, abs=1e-15)
    assert min(c[0] for c in pw._slope_candidates(x, y, 0.5) if math.isfinite(c[1])) > 1e-6


def test_ridge_interval_without_points_or_residual_freedom():
    # no points: NaN; fewer points than parameters: the probed range
    empty = np.array([])
    lo, hi = pw._ridge_interval(empty, empty, 0.0, 4, 0.5)
    assert math.isnan(lo) and math.isnan(hi)
    assert pw._ridge_interval(np.array([0.5]), np.array([1.0]), 0.0, 4, 0.5) == (0.5, 0.5)
    x = np.array([0.3, 0.5, 0.8, 1.0])
    assert pw._ridge_interval(x, x * x, 0.0, 4, 0.6) == (0.3, 1.0)


def test_five_probes_give_a_real_ridge_interval_and_its_sd():
    # four parameters, five probes: one degree of freedom is enough for the F-based interval
    # (0.3 % noise, a clear kink at 900 MHz): narrower than the probed range, holding the true
    # ridge, and the ridge SD is its half-width over z(0.95), not the Jacobian's
    f = np.array([500.0, 700.0, 900.0, 1100.0, 1300.0])
    p = pw.PowerModel(20.0, 0.1, 900.0, 0.003).power_w(f)
    p = p * (1.0 + 0.003 * np.random.default_rng(3).standard_normal(5))
    m = pw.fit_power_model(f, p)
    lo, hi = m.ridge_interval_mhz
    assert lo <= 900.0 <= hi and hi - lo < 0.9 * (1300.0 - 500.0)
    assert m.uncertainty["ridge_clock_mhz"] == pytest.approx((hi - lo) / 2 / 1.645, rel=1e-9)


def test_a_straight_line_leaves_the_ridge_anywhere_in_the_probed_range():
    # exact straight-line data: every ridge fits with b = 0 (the profile is flat at zero, up
    # to rounding), so the interval is the whole probed range, not a piece of it cut by noise
    f = np.arange(300.0, 901.0, 100.0)
    m = pw.fit_power_model(f, 20.0 + 0.05 * f)
    assert m.ridge_interval_mhz == pytest.approx((300.0, 900.0), abs=1e-9)


def test_profile_sse_without_a_rising_fit_is_infinite_at_every_ridge():
    # no slope gives a > 0 for power that falls with clock, nor for flat power (a = 0 fits it
    # exactly, but a CMOS fit needs a > 0): no fit, at a ridge inside the range and at the top
    # (where no probe lies above the ridge and the slope drops out)
    x = np.linspace(0.2, 1.0, 8)
    for y in (1.0 - 0.5 * x, np.full_like(x, 0.7)):
        for r in (0.5, 1.0):
            assert pw._profile_sse(x, y, r) == math.inf


def test_the_fit_does_not_depend_on_the_units():
    # the fit normalises clocks and powers, so clocks in GHz and power in kW (all below 1)
    # give the same model, scaled: ridge x 1e-3, p_idle x 1e-3, alpha unchanged (kW/GHz),
    # beta x 1e3
    f = np.arange(300.0, 1801.0, 100.0)
    p = _truth().power_w(f) * (1.0 + 0.01 * np.random.default_rng(2).standard_normal(16))
    mhz = pw.fit_power_model(f, p)
    ghz = pw.fit_power_model(f / 1000.0, p / 1000.0)
    assert ghz.ridge_clock_mhz == pytest.approx(mhz.ridge_clock_mhz / 1000.0, rel=1e-6)
    assert ghz.p_idle_w == pytest.approx(mhz.p_idle_w / 1000.0, rel=1e-6)
    assert ghz.alpha_w_per_mhz == pytest.approx(mhz.alpha_w_per_mhz, rel=1e-6)
    assert ghz.beta_per_mhz == pytest.approx(mhz.beta_per_mhz * 1000.0, rel=1e-6)
    lo, hi = mhz.ridge_interval_mhz
    assert ghz.ridge_interval_mhz == pytest.approx((lo / 1000.0, hi / 1000.0), rel=1e-6)


def test_one_point_off_by_more_than_ten_percent_is_refused_whatever_the_r2():
    # 16 exact points with the one at 500 MHz 20 % high: the trend is clear (R² near 1), but a fit whose
    # worst point misses by more than MAX_REL_RESIDUAL (10 %) does not explain its data;
    # 6 % high is within it and accepted
    f = np.arange(300.0, 1801.0, 100.0)
    for high, refused in ((1.20, True), (1.06, False)):
        p = _truth().power_w(f)
        p[2] *= high
        if refused:
            with pytest.raises(CalibrationError, match=r"off by 1\d % at 500 MHz .*R² (0\.9|1\.0)"):
                pw.fit_power_model(f, p)
        else:
            assert 0.03 < pw.fit_power_model(f, p).max_rel_residual < 0.10
