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


def test_late_frames_are_counted_over_the_late_window_only():
    tables = ClockTables(small_model())
    frames = FrameStats()
    late = 1.5 / RATE_HZ  # longer than a period at the top clock
    _feed(frames, tables, [late] * 10 + [0.01] * FrameStats.LATE_FRAMES)
    assert frames.late_count == 0  # the late ones dropped out of the stop's window
    assert frames.ranked.count(late) == 10  # but still in the deadline's (LONG_FRAMES)
    _feed(frames, tables, [late] * 3, t0=100.0)
    assert frames.late_count == 3
    n = FrameStats.LATE_FRAMES + 13
    assert frames.late_share(0.02) == pytest.approx(13 / n)


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


def test_the_first_choice_from_the_learnt_frames_lowers_the_clock_without_the_hold_down():
    """The young frames' headroom is a guess, not a measured need: once their spread is
    learnt, the clock it kept up is left at once, not after ``HOLD_DOWN_S``."""
    from governor.runtime.controllers import ThroughputController
    from governor.runtime.policies import Throughput

    ctl = ThroughputController(small_model(), Throughput(rate_hz=RATE_HZ))
    # every frame 0.0263 s of top-clock work: 800 MHz fits it (0.02667 s a period), not the
    # young headroom over it (0.0263 · (1 + 0.1/sqrt(27)) = 0.0268 s)
    assert 0.0263 * (1.0 + FrameStats.YOUNG_HEADROOM / math.sqrt(27)) > 1.0 / RATE_HZ / 1.25
    clock, applied = ctl.initial_mhz(), []
    for k in range(12):
        t = 0.1 * (k + 1)
        busy = 0.0263 * ctl.tables.time_rel_at(clock)
        ticks = [Tick(t - 0.1 + i / RATE_HZ, 1.0, busy, clock) for i in range(3)]
        obs = Observation(t, 0.1, 30.0, clock, clock, 3.0 * t, t, True)
        clock, _ = ctl.decide(obs, ticks, clock)
        applied.append((len(ctl.frames.ranked), clock))
    young = [f for n, f in applied if n < FrameStats.MIN_FRAMES]
    learnt = [f for n, f in applied if n >= FrameStats.MIN_FRAMES]
    assert young[-1] == 900.0  # the young headroom needs 900 MHz
    assert learnt[0] == 800.0  # left as the spread is learnt: no hold-down
