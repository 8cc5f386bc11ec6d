"""Tests written to kill mutants of governor/models (see docs/mutation.md).

Every expected number here is worked out by hand from the formulas in the module docstring,
never read back from the code under test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from governor.models import formulas
from governor.models.power import PowerModel
from governor.models.time import TimeModel


def test_volts_is_one_up_to_the_ridge_and_rises_linearly_above():
    assert formulas.volts(800.0, 1000.0, 0.001) == 1.0
    assert formulas.volts(1000.0, 1000.0, 0.001) == 1.0
    # 1 + 0.001 * (1500 - 1000) = 1.5
    assert formulas.volts(1500.0, 1000.0, 0.001) == pytest.approx(1.5)


def test_cmos_power_is_alpha_f_v_squared():
    # 0.01 * 1500 * 1.5**2 = 33.75
    assert formulas.cmos_power_w(1500.0, 0.01, 1000.0, 0.001) == pytest.approx(33.75)
    assert formulas.cmos_power_w(500.0, 0.01, 1000.0, 0.001) == pytest.approx(5.0)


def test_power_adds_idle_and_caps_at_p_max():
    assert formulas.power_w(1500.0, 10.0, 0.01, 1000.0, 0.001) == pytest.approx(43.75)
    assert formulas.power_w(1500.0, 10.0, 0.01, 1000.0, 0.001, None) == pytest.approx(43.75)
    assert formulas.power_w(1500.0, 10.0, 0.01, 1000.0, 0.001, 30.0) == 30.0
    assert formulas.power_w(500.0, 10.0, 0.01, 1000.0, 0.001, 30.0) == pytest.approx(15.0)


def test_formulas_accept_arrays():
    f = np.array([500.0, 1500.0])
    assert np.allclose(formulas.volts(f, 1000.0, 0.001), [1.0, 1.5])
    assert np.allclose(formulas.power_w(f, 10.0, 0.01, 1000.0, 0.001, 30.0), [15.0, 30.0])
    assert np.allclose(formulas.roofline_time_s(np.array([1.0, 3.0]), 2.0, 1.0), [3.0, 5.0])


def test_mem_time_scales_inversely_with_memory_clock():
    assert formulas.mem_time_s(2.0, 3200.0, 1600.0) == pytest.approx(1.0)
    assert formulas.mem_time_s(2.0, None, 1600.0) == 2.0
    assert formulas.mem_time_s(2.0, 3200.0, None) == 2.0
    assert formulas.mem_time_s(0.0, 3200.0, 1600.0) == 0.0


def test_roofline_adds_for_k1_and_overlaps_for_large_k():
    assert formulas.roofline_time_s(3.0, 4.0, 1.0) == pytest.approx(7.0)
    assert formulas.roofline_time_s(3.0, 4.0, 2.0) == pytest.approx(5.0)  # 3-4-5
    assert formulas.roofline_time_s(3.0, 0, 2.0) == 3.0
    assert formulas.roofline_time_s(0, 4.0, 2.0) == 4.0
    # very large k: the larger part alone, without overflow
    assert formulas.roofline_time_s(3.0, 4.0, 400.0) == pytest.approx(4.0, rel=1e-3)


def test_time_adds_the_low_clock_term():
    # compute 1000/500 = 2, memory 1, k=1 -> 3; low term 0.5 * (250/500)^2 = 0.125
    assert formulas.time_s(500.0, 1.0, 1000.0) == pytest.approx(3.0)
    t = formulas.time_s(500.0, 1.0, 1000.0, 1.0, 0.5, 250.0, 2.0)
    assert t == pytest.approx(3.125)


def test_power_model_round_trips_and_predicts():
    m = PowerModel(10.0, 0.01, 1000.0, 0.001, p_max_w=40.0, ridge_interval_mhz=(900.0, 1100.0))
    assert m.power_w(500.0) == pytest.approx(15.0)
    assert isinstance(m.power_w(500.0), float)
    assert np.allclose(m.power_w([500.0, 1500.0]), [15.0, 40.0])
    assert np.allclose(m.volts([500.0, 1500.0]), [1.0, 1.5])
    doc = m.to_dict()
    assert doc["p_max_w"] == 40.0 and doc["ridge_interval_mhz"] == [900.0, 1100.0]
    assert PowerModel.from_dict(doc) == m
    nocap = PowerModel(10.0, 0.01, 1000.0, 0.001)
    assert nocap.to_dict()["p_max_w"] is None
    assert nocap.to_dict()["ridge_interval_mhz"] == [None, None]
    assert math.isinf(PowerModel.from_dict(nocap.to_dict()).p_max_w)


def test_time_model_memory_share_and_round_trip():
    m = TimeModel(t_mem_s=1.0, c_s_mhz=1000.0, top_clock_mhz=1000.0)
    # at 1000 MHz: compute 1, memory 1 -> share 0.5
    assert m.memory_share(1000.0) == pytest.approx(0.5)
    assert m.memory_bound_share == pytest.approx(0.5)
    assert isinstance(m.time_s(1000.0), float)
    assert np.allclose(m.time_s([500.0, 1000.0]), [3.0, 2.0])
    # without a top clock: the clock where compute equals memory, c / t_mem = 1000 MHz
    assert TimeModel(t_mem_s=1.0, c_s_mhz=1000.0).memory_bound_share == pytest.approx(0.5)
    doc = m.to_dict()
    assert doc["top_clock_mhz"] == 1000.0 and doc["loo_rel_error"] is None
    back = TimeModel.from_dict(doc)
    assert back.time_s(700.0) == pytest.approx(m.time_s(700.0))
    assert back.top_clock_mhz == 1000.0 and math.isnan(back.loo_rel_error)


def test_defaults_are_additive_roofline_without_low_clock_term():
    # k defaults to 1: the parts add up; no low-clock term unless asked for
    assert formulas.roofline_time_s(3.0, 4.0) == pytest.approx(7.0)
    assert formulas.time_s(500.0, 1.0, 1000.0, 2.0) == pytest.approx(math.sqrt(5.0))
    assert formulas.time_s(500.0, 1.0, 1000.0, 1.0, 0.5) == pytest.approx(3.5)
    # low_ref_mhz defaults to 1 MHz: 0.5 * (1/500)^1 = 0.001
    assert formulas.time_s(500.0, 1.0, 1000.0, 1.0, 0.5, low_exp=1.0) == pytest.approx(3.001)


def test_mem_time_of_one_second_scales_too():
    assert formulas.mem_time_s(1.0, 3200.0, 1600.0) == pytest.approx(0.5)
