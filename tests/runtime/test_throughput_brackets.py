"""Comparisons of two neighbouring clocks by brackets and the verdict on them
(governor/runtime/throughput_parts/brackets.py)."""

from __future__ import annotations

import math

import pytest

from governor.runtime.throughput_parts.brackets import (
    BRACKET_NOISE,
    BRACKETS,
    PairBook,
    noise_band,
    verdict,
)


def test_a_comparison_is_kept_both_ways_round():
    book = PairBook(stale_s=20.0)
    book.add(4, 3, 0.998, 10.0)
    assert book.recent(4, 3, 10.0).ratio == pytest.approx(0.998)
    assert book.recent(3, 4, 10.0).ratio == pytest.approx(1.0 / 0.998)


def test_brackets_made_lately_are_averaged():
    book = PairBook(stale_s=20.0)
    for k, ratio in enumerate((0.999, 1.002, 1.000)):
        book.add(4, 3, ratio, 10.0 + k)
    pair = book.recent(4, 3, 13.0)
    assert pair.brackets == 3
    assert pair.ratio == pytest.approx((0.999 + 1.002 + 1.000) / 3)


def test_a_stale_comparison_is_forgotten():
    book = PairBook(stale_s=20.0)
    book.add(4, 3, 0.99, 0.0)
    assert book.recent(4, 3, 25.0) is None  # too old to read
    book.add(4, 3, 1.01, 25.0)  # too old to average with: the mean starts again
    pair = book.recent(4, 3, 25.0)
    assert (pair.ratio, pair.brackets) == (pytest.approx(1.01), 1)


def test_the_noise_band_narrows_as_brackets_are_averaged():
    assert noise_band(1) == BRACKET_NOISE
    assert noise_band(4) == pytest.approx(BRACKET_NOISE / 2)
    assert noise_band(9) == pytest.approx(BRACKET_NOISE / math.sqrt(9))


def test_a_neighbour_is_cheaper_or_dearer_only_beyond_the_noise():
    assert verdict(1.0 - 2 * BRACKET_NOISE, 1) == -1
    assert verdict(1.0 + 2 * BRACKET_NOISE, 1) == 1
    assert verdict(1.0 - 0.5 * BRACKET_NOISE, 1) == 0
    # the same ratio, averaged over four brackets, is told apart
    assert verdict(1.0 - 0.6 * BRACKET_NOISE, 1) == 0
    assert verdict(1.0 - 0.6 * BRACKET_NOISE, 4) == -1


def test_after_the_last_bracket_the_mean_s_side_decides():
    tiny = 0.1 * BRACKET_NOISE
    assert verdict(1.0 - tiny, BRACKETS - 1) == 0
    assert verdict(1.0 - tiny, BRACKETS) == -1
    assert verdict(1.0 + tiny, BRACKETS) == 1
