"""A phase's work-per-joule curves below the power cap (battery_parts/curves.py): the cap
found on the model's table, the band a probe pair is trusted within, the phase's gaps."""

from __future__ import annotations

import math

import pytest

from governor.runtime.battery_parts.curves import TRUST, ClockCurves, capped_top
from governor.runtime.battery_parts.tables import concave, gaps
from governor.runtime.model import ClockModel

CLOCKS = tuple(300.0 + 100.0 * i for i in range(13))
IDLE_W = 20.0


def _model(power=None) -> ClockModel:
    if power is None:
        power = tuple(IDLE_W + 100.0 * (f / 1500.0) ** 2.5 for f in CLOCKS)
    rel = tuple(1500.0 / f for f in CLOCKS)
    return ClockModel(CLOCKS, tuple(power), rel, IDLE_W, 900.0, True, "test")


def test_the_table_ends_below_the_first_clock_drawing_the_capped_power():
    assert capped_top([1.0, 2.0, 3.0, 4.0]) == 3  # uncapped: the top
    assert capped_top([1.0, 2.0, 5.0, 5.0, 5.0]) == 1
    assert capped_top([5.0, 5.0]) == 0
    curves = ClockCurves(_model([IDLE_W + i for i in range(10)] + [40.0, 40.0, 40.0]))
    assert curves.capped_top == 9 and curves.end == 10 and len(curves.dyn_end) == 10


def test_a_probe_pair_is_trusted_within_trust_of_its_relative_times():
    curves = ClockCurves(_model())
    rel = curves.model.time_rel
    lo, hi = 5, 7
    floor_i, ceil_i = curves.trusted(lo, hi)
    assert rel[floor_i] <= rel[lo] * TRUST < rel[floor_i - 1]
    assert rel[ceil_i] * TRUST >= rel[hi] > rel[ceil_i + 1] * TRUST
    assert curves.trusted(lo, hi) is curves.trusted(lo, hi)  # kept per pair


def test_a_phases_gaps_are_the_general_rules_over_its_fitted_power_line():
    model = _model()
    curves = ClockCurves(model)
    A, B, a, b = 0.05, 0.02, 10.0, 0.9  # partly memory-bound
    got = curves.phase_curves((A, B, a, b))
    assert got is not None
    neg, line, inv_b = got
    work = [1.0 / (A * r + B) for r in model.time_rel]
    power = [a + b * (p - IDLE_W) for p in model.power_w]
    want = gaps(work, power)
    assert concave(want) and line == (a, b) and inv_b == 1.0 / b
    assert all(math.isclose(-x, g, rel_tol=1e-9) for x, g in zip(neg, want))
    # where that line draws 60 W: between the clocks whose line power brackets it
    level = curves.own_level(line, 60.0)
    i = int(level)
    assert power[i] <= 60.0 <= power[i + 1]


def test_a_curve_that_is_not_concave_is_refused_and_its_bend_remembered_on_a_long_table():
    clocks = tuple(300.0 + 20.0 * i for i in range(40))
    power = tuple(IDLE_W + 2.0 * i for i in range(40))  # equal power steps
    model = ClockModel(clocks, power, tuple(1100.0 / f for f in clocks), IDLE_W, 700.0, True, "t")
    curves = ClockCurves(model)
    bent = (-0.005, 0.15, 10.0, 1.0)  # work falls as the clock rises
    assert curves.phase_curves(bent) is None
    assert curves.bends == [0]
    assert curves.phase_curves(bent) is None  # settled at the remembered bend
    assert curves.phase_curves((0.05, 0.0, 10.0, 1.0)) is not None  # compute-bound: concave


def test_past_gaps_are_negated_when_concave_and_none_when_not():
    curves = ClockCurves(_model())
    model = curves.model
    work = [1.0 / r for r in model.time_rel]
    neg = curves.past_gaps(work, model.power_w)
    assert neg is not None and neg == [-g for g in gaps(work, model.power_w)]
    assert curves.past_gaps(list(reversed(work)), model.power_w) is None
    assert neg == sorted(neg)  # rising, for bisect
    assert pytest.approx(-neg[0]) == gaps(work, model.power_w)[0]
