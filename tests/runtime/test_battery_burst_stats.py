"""Burst statistics (governor/runtime/battery_parts/bursts.py): whole bursts and gaps are
kept, and a burst under way is forecast to run for its residual life, then a mean gap."""

from __future__ import annotations

import pytest

from governor.runtime.battery_parts.bursts import MAX_BURSTS, MIN_BURSTS, WAIT_S, BurstStats


def _cycle(stats: BurstStats, busy_s: float, gap_s: float, dt: float = 0.5) -> None:
    for _ in range(int(round(busy_s / dt))):
        stats.note(True, dt)
    for _ in range(int(round(gap_s / dt))):
        stats.note(False, dt)


def test_only_runs_that_began_and_ended_in_the_mission_are_kept():
    stats = BurstStats()
    stats.note(True, 3.0)  # begun before the mission was seen: not a whole burst
    stats.note(False, 1.0)
    stats.note(None, 5.0)  # unknown: not counted
    stats.note(True, 2.0)
    stats.note(True, 2.0)
    stats.note(False, 1.0)
    assert stats.lengths_s == [4.0]
    assert (stats.gaps_n, stats.gaps_s) == (1, 1.0)
    assert stats.tail_s == [4.0, 0.0]


def test_a_burst_under_way_runs_on_for_the_mean_excess_of_the_longer_bursts_then_a_gap():
    stats = BurstStats()
    stats.note(False, 1.0)
    lengths = [2.0, 4.0, 6.0, 8.0, 10.0, 2.0, 4.0, 6.0]
    for length in lengths:
        _cycle(stats, length, 3.0)
    assert stats.lengths_s == sorted(lengths)
    assert len(stats.lengths_s) >= MIN_BURSTS
    for _ in range(6):  # a burst 3 s old
        stats.note(True, 0.5)
    # the bursts longer than 3 s: 4, 4, 6, 6, 8, 10, their mean excess (1+1+3+3+5+7)/6 s;
    # then a mean gap of 3 s, and the duty cycle's share of the rest
    residual = 20.0 / 6.0
    left_s, duty = 100.0, 0.5
    want = residual + duty * (left_s - residual - 3.0)
    assert stats.expected_busy_s(left_s, duty) == pytest.approx(want)
    assert stats.expected_busy_s(2.0, duty) == pytest.approx(2.0)  # the burst outlasts it


def test_without_gaps_or_enough_bursts_the_busy_share_is_the_duty_cycles():
    stats = BurstStats()
    for _ in range(100):
        stats.note(True, 0.1)
    assert stats.expected_busy_s(50.0, 0.8) == 50.0 * 0.8
    few = BurstStats()
    few.note(False, 1.0)
    for _ in range(MIN_BURSTS - 1):
        _cycle(few, 2.0, 1.0)
    few.note(True, 0.5)
    assert few.expected_busy_s(50.0, 0.6) == 50.0 * 0.6


def test_the_kept_lengths_stay_bounded_and_sorted_with_their_tail_sums():
    stats = BurstStats()
    stats.note(False, 1.0)
    for k in range(MAX_BURSTS + 40):
        _cycle(stats, 0.5 * (1 + k % 7), 0.5)
    assert len(stats.lengths_s) == MAX_BURSTS
    assert stats.lengths_s == sorted(stats.lengths_s)
    assert stats.tail_s[0] == pytest.approx(sum(stats.lengths_s))
    assert stats.tail_s[100] == pytest.approx(sum(stats.lengths_s[100:]))


def test_a_load_is_cyclic_after_min_bursts_whole_bursts_and_gaps():
    stats = BurstStats()
    stats.note(False, 1.0)  # begun before the mission: not kept
    for _ in range(MIN_BURSTS - 1):
        _cycle(stats, 2.0, 1.0)
    assert not stats.cyclic()
    _cycle(stats, 2.0, 1.0)
    assert not stats.cyclic()  # the last gap is under way
    stats.note(True, 0.5)
    assert len(stats.lengths_s) == MIN_BURSTS and stats.gaps_n == MIN_BURSTS
    assert stats.cyclic()


def test_an_idle_run_is_a_wait_past_wait_s_or_twice_a_cyclic_loads_mean_gap():
    stats = BurstStats()
    stats.note(True, 5.0)
    assert not stats.waiting()  # busy
    stats.note(False, WAIT_S)
    assert not stats.waiting()
    stats.note(False, 0.5)
    assert stats.waiting()  # no duty cycle seen: a wait once past WAIT_S
    gap_s = 0.75 * WAIT_S  # a cyclic load whose mean gap is 3/4 of WAIT_S
    cyclic = BurstStats()
    cyclic.note(False, 1.0)
    for _ in range(MIN_BURSTS + 1):
        _cycle(cyclic, 2.0, gap_s)
    cyclic.note(True, 0.5)
    assert cyclic.cyclic()
    assert cyclic.wait_threshold_s() == pytest.approx(2.0 * gap_s)
    cyclic.note(False, 1.9 * gap_s)  # past WAIT_S, under two mean gaps: a gap
    assert not cyclic.waiting()
    cyclic.note(False, 0.2 * gap_s)
    assert cyclic.waiting()
