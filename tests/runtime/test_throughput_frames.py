"""What the throughput controller learns from the app's ticks
(governor/runtime/throughput_parts/frames.py): each frame's work in top-clock seconds, the
deadline a clock must fit, the tick rate, the late frames, and the power between frames."""

from __future__ import annotations

import math

import pytest
from throughput_model import busy_w, small_model

from governor.runtime.controller_base import Observation, Tick
from governor.runtime.throughput_parts.frames import FrameStats, IdlePower
from governor.runtime.throughput_parts.tables import ClockTables

RATE_HZ = 30.0


def _obs(t_s, dt_s=0.1, power_w=None, applied_mhz=1000.0, idle_power_w=None):
    return Observation(
        t_s, dt_s, power_w, applied_mhz, applied_mhz, 0.0, t_s, True, None, None, idle_power_w
    )


def _feed(frames, tables, works_s, clock_mhz=1000.0, t0=0.0):
    """One tick per frame, three per 0.1-s period; ``works_s`` in top-clock seconds."""
    rel = tables.time_rel_at(clock_mhz)
    busy = 0.0
    for k, work in enumerate(works_s):
        t = t0 + (k + 1) / RATE_HZ
        tick = Tick(t, 1.0, work * rel, clock_mhz)
        busy += frames.learn(_obs(t, 1.0 / RATE_HZ), [tick], tables, RATE_HZ)
    return busy


def test_a_frame_s_work_is_counted_in_top_clock_seconds_whatever_clock_ran_it():
    tables = ClockTables(small_model())
    frames = FrameStats()
    # the same work run at 500 MHz (twice as slow) reads as its top-clock time
    _feed(frames, tables, [0.01, 0.01], clock_mhz=500.0)
    assert list(frames.per_unit_top) == pytest.approx([0.01, 0.01])
    assert frames.unit_mean == pytest.approx(0.01)


def test_the_deadline_of_young_frames_is_the_slowest_with_a_shrinking_headroom():
    tables = ClockTables(small_model())
    frames = FrameStats()
    _feed(frames, tables, [0.010, 0.012, 0.011, 0.009])
    assert frames.young
    want = 0.012 * (1.0 + FrameStats.YOUNG_HEADROOM / math.sqrt(4))
    assert frames.need_s(None) == pytest.approx(want)
    assert frames.need_s(0.2) == pytest.approx(0.012 / 0.8)  # an explicit margin


def test_the_learnt_deadline_lets_only_the_late_share_of_the_frames_exceed_it():
    tables = ClockTables(small_model())
    frames = FrameStats()
    works = [0.010 + 0.00001 * k for k in range(400)]  # all different, rising
    _feed(frames, tables, works)
    assert not frames.young
    need = frames.need_s(None)
    above = sum(w > need for w in works)
    late = FrameStats.LATE_SHARE * len(works)  # 2 of 400
    assert late - 1 <= above <= late
    # the deadline is the work of one of the frames, not a guess above them all
    assert need in works and need < max(works)


def test_an_app_without_busy_s_is_taken_to_run_flat_out():
    tables = ClockTables(small_model())
    frames = FrameStats()
    # 20 units in 0.1 s at 500 MHz (2x slower than the top): 400 units/s at the top clock
    frames.learn(_obs(0.1), [Tick(0.1, 20.0, None, 500.0)], tables, RATE_HZ)
    assert frames.capacity_top == pytest.approx(400.0)
    need = 1.0 / 400.0 / (1.0 - FrameStats.FLAT_MARGIN)
    assert frames.need_s(None) == pytest.approx(need)
    assert frames.mean_s() == pytest.approx(1.0 / 400.0)


def test_the_tick_rate_counts_the_units_of_the_last_two_seconds():
    tables = ClockTables(small_model())
    frames = FrameStats()
    for k in range(50):  # 5 s of 0.1-s periods, 3 units each
        t = 0.1 * (k + 1)
        ticks = [Tick(t - 0.1 + i / RATE_HZ, 1.0, 0.01, 1000.0) for i in range(3)]
        frames.learn(
            Observation(t, 0.1, None, 1000.0, 1000.0, 0.0, t, True), ticks, tables, RATE_HZ
        )
    assert frames.rate_hz == pytest.approx(30.0, rel=0.03)


def test_late_frames_are_counted_over_the_long_window_only():
    tables = ClockTables(small_model())
    frames = FrameStats()
    late = 1.5 / RATE_HZ  # longer than a period at the top clock
    _feed(frames, tables, [late] * 10 + [0.01] * FrameStats.LONG_FRAMES)
    assert frames.late_count == 0  # the late ones dropped out of the window
    _feed(frames, tables, [late] * 3, t0=100.0)
    assert frames.late_count == 3
    assert frames.late_share(0.02) == pytest.approx(3 / FrameStats.LONG_FRAMES)


def test_the_idle_power_is_solved_from_a_metered_period_and_its_busy_share():
    model = small_model()
    tables = ClockTables(model)
    idle = IdlePower(metered=True)
    true_idle_w, b = 7.0, 0.4
    power = b * busy_w(800.0) + (1.0 - b) * true_idle_w
    idle.learn(_obs(0.1, power_w=power, applied_mhz=800.0), b * 0.1, tables)
    assert idle.idle_w == pytest.approx(true_idle_w)
    # later periods move it by a share of the gap only
    idle.learn(
        _obs(0.2, power_w=b * busy_w(800.0) + (1.0 - b) * 9.0, applied_mhz=800.0), b * 0.1, tables
    )
    assert idle.idle_w == pytest.approx(7.0 + IdlePower.GAIN * 2.0)


def test_a_period_almost_all_busy_or_idle_says_nothing_of_the_idle_power():
    tables = ClockTables(small_model())
    idle = IdlePower(metered=True)
    idle.learn(_obs(0.1, power_w=30.0), 0.095, tables)  # 95 % busy
    idle.learn(_obs(0.2, power_w=30.0), 0.002, tables)  # 2 % busy
    assert idle.idle_w is None


def test_without_a_counter_the_readings_filed_as_idle_are_taken():
    tables = ClockTables(small_model())
    idle = IdlePower(metered=False)
    idle.learn(_obs(0.1, power_w=30.0, idle_power_w=6.5), 0.04, tables)
    assert idle.idle_w == 6.5
