"""The model formulas (governor/models/formulas.py) against values worked out by hand here:
tests that fail when an operator or a constant of a formula changes (scripts/mutation.py)."""

from __future__ import annotations

import math

import pytest

from governor.models import formulas


def test_memory_time_scales_inversely_with_the_memory_clock():
    # 0.2 s of memory time at 3505 MHz takes 0.2 * 3505 / 810 s at 810 MHz
    assert formulas.mem_time_s(0.2, 810.0, 3505.0) == pytest.approx(0.2 * 3505.0 / 810.0)
    assert formulas.mem_time_s(0.2, 7010.0, 3505.0) == pytest.approx(0.1)
    # no memory part, or no clocks to scale by: unchanged
    assert formulas.mem_time_s(0.0, 810.0, 3505.0) == 0.0
    assert formulas.mem_time_s(0.2, None, 3505.0) == 0.2
    assert formulas.mem_time_s(0.2, 810.0, None) == 0.2


def test_voltage_is_flat_to_the_ridge_then_rises_by_beta_per_mhz():
    assert formulas.volts(900.0, 1000.0, 0.002) == 1.0
    assert formulas.volts(1000.0, 1000.0, 0.002) == 1.0
    assert formulas.volts(1200.0, 1000.0, 0.002) == pytest.approx(1.4)


def test_power_is_idle_plus_alpha_f_v_squared_capped_at_p_max():
    # above the ridge: V = 1 + 0.001 * 200 = 1.2; alpha f V^2 = 0.05 * 1200 * 1.44 = 86.4 W
    assert formulas.cmos_power_w(1200.0, 0.05, 1000.0, 0.001) == pytest.approx(86.4)
    assert formulas.power_w(1200.0, 30.0, 0.05, 1000.0, 0.001) == pytest.approx(116.4)
    assert formulas.power_w(1200.0, 30.0, 0.05, 1000.0, 0.001, None) == pytest.approx(116.4)
    assert formulas.power_w(1200.0, 30.0, 0.05, 1000.0, 0.001, 100.0) == 100.0
    assert formulas.power_w(1200.0, 30.0, 0.05, 1000.0, 0.001, 120.0) == pytest.approx(116.4)
    # below the ridge V = 1: 30 + 0.05 * 800
    assert formulas.power_w(800.0, 30.0, 0.05, 1000.0, 0.001, 100.0) == pytest.approx(70.0)


def test_power_on_an_array_matches_the_scalars():
    np = pytest.importorskip("numpy")
    clocks = np.array([800.0, 1200.0, 1500.0])
    got = formulas.power_w(clocks, 30.0, 0.05, 1000.0, 0.001, 120.0)
    want = [formulas.power_w(float(f), 30.0, 0.05, 1000.0, 0.001, 120.0) for f in clocks]
    assert list(got) == pytest.approx(want)
    assert want[2] == 120.0  # 30 + 0.05*1500*1.5^2 = 198.75 W, capped


def test_roofline_adds_with_k_1_and_overlaps_with_larger_k():
    assert formulas.roofline_time_s(0.3, 0.4, 1.0) == pytest.approx(0.7)
    assert formulas.roofline_time_s(0.3, 0.4, 2.0) == pytest.approx(0.5)  # 3-4-5
    assert formulas.roofline_time_s(0.3, 0.0, 2.0) == 0.3
    assert formulas.roofline_time_s(0.0, 0.4, 2.0) == 0.4
    assert formulas.roofline_time_s(0.3, 0.4, 200.0) == pytest.approx(0.4, rel=1e-3)


def test_roofline_on_arrays_matches_the_scalars():
    np = pytest.importorskip("numpy")
    compute = np.array([0.3, 0.6, 0.0])
    got = formulas.roofline_time_s(compute, 0.4, 2.0)
    assert list(got) == pytest.approx([0.5, math.sqrt(0.36 + 0.16), 0.4])


def test_time_adds_the_low_clock_term():
    # c/f = 600/1200 = 0.5 s, plus t_mem 0.1 (k = 1), plus 0.2 * (600/1200)^2 = 0.05
    t = formulas.time_s(1200.0, 0.1, 600.0, 1.0, low_s=0.2, low_ref_mhz=600.0, low_exp=2.0)
    assert t == pytest.approx(0.65)
    assert formulas.time_s(1200.0, 0.1, 600.0) == pytest.approx(0.6)
