"""The battery controller's table arithmetic (governor/runtime/battery_parts/tables.py):
levels read off rising tables and falling gaps, gaps between clocks, concavity."""

from __future__ import annotations

import math
import random

import pytest

from governor.runtime.battery_parts.tables import (
    concave,
    fractional_index,
    gaps,
    level_neg,
    match,
    slope_at,
)


def test_a_value_between_two_entries_is_interpolated_and_the_ends_clamp():
    table = [10.0, 20.0, 40.0, 80.0]
    assert fractional_index(table, 30.0) == pytest.approx(1.5)
    assert fractional_index(table, 20.0) == 1.0
    assert fractional_index(table, 5.0) == 0.0
    assert fractional_index(table, 1e9) == 3.0
    assert fractional_index([10.0, 10.0, 30.0], 10.0) == 1.0  # a flat pair: its upper entry


def test_the_level_of_a_multiplier_is_where_the_interpolated_gaps_pass_it():
    """``level_neg`` against its definition: gap i sits at i + 0.5, linear between gaps;
    the ends (0 and n) past the first and last gaps."""
    rng = random.Random(3)
    for _ in range(500):
        falling = sorted((rng.uniform(0.1, 10.0) for _ in range(7)), reverse=True)
        neg = [-g for g in falling]
        lam = rng.uniform(0.05, 11.0)
        x = level_neg(neg, lam)
        if lam >= falling[0]:
            assert x == 0.0
        elif lam < falling[-1]:
            assert x == float(len(falling))
        else:
            assert 0.5 <= x <= len(falling) - 0.5
            assert slope_at(falling, x) == pytest.approx(lam, rel=1e-9)


def test_gaps_are_marginal_work_over_marginal_power_and_a_flat_step_is_infinite_or_nothing():
    assert gaps([1.0, 2.0, 2.5], [10.0, 12.0, 17.0]) == [0.5, 0.1]
    assert gaps([1.0, 2.0], [10.0, 10.0]) == [math.inf]  # more work for no power
    assert gaps([2.0, 1.0], [10.0, 10.0]) == [0.0]


def test_concave_means_positive_finite_and_falling():
    assert concave([3.0, 2.0, 2.0, 1.0])
    assert concave([2.0, 2.0 * (1 + 1e-10)])  # rounding is not a rise
    assert not concave([1.0, 2.0])
    assert not concave([1.0, 0.0])
    assert not concave([math.inf, 1.0])
    assert not concave([1.0, math.nan])


def test_match_finds_the_level_where_the_gaps_fall_to_the_multiplier():
    slopes = [8.0, 4.0, 2.0, 1.0]
    top = 4.0
    for lam in (7.0, 3.0, 1.5, 1.2):
        x = match(slopes, lam, top)
        assert slope_at(slopes, x) == pytest.approx(lam, rel=1e-6)
    assert match(slopes, 9.0, top) == 0.0  # every gap below it: the bottom
    assert match(slopes, 0.5, top) == top  # every gap above it: the top


def test_slope_at_takes_the_nearer_gap_beside_an_infinite_one():
    assert slope_at([math.inf, 2.0], 0.9) == math.inf
    assert slope_at([math.inf, 2.0], 1.1) == 2.0
    assert slope_at([], 1.0) == 0.0
