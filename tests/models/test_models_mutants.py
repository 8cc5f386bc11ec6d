"""The formulas in governor/models/ against values worked out by hand from their definitions.

Written to kill the mutants scripts/mutation.py reports (docs/mutation.md): every expected
number below is computed in the comment next to it, not read from the code's output.
"""

import math

import numpy as np
import pytest

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
    assert fm.mem_time_s(0.5, None, 3200.0) == 0.5
    assert fm.mem_time_s(0.5, 1600.0, None) == 0.5


def test_roofline_adds_or_overlaps():
    # k = 1: 0.2 + 0.3; k = 2: sqrt(0.04 + 0.09)
    assert fm.roofline_time_s(0.2, 0.3) == pytest.approx(0.5, rel=1e-12)
    assert fm.roofline_time_s(0.2, 0.3, 2.0) == pytest.approx(math.sqrt(0.13), rel=1e-12)
    assert fm.roofline_time_s(0.2, 0.0, 2.0) == 0.2
    assert fm.roofline_time_s(0.0, 0.3, 2.0) == 0.3
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
