"""Time-sharing the deadline's floor with the clock below
(governor/runtime/throughput_parts/dither.py): the mix lets the allowed share of the frames
run late, no more, and only where the clock below is cheaper."""

from __future__ import annotations

from throughput_model import CLOCKS_MHZ, small_model

from governor.runtime.controller_base import Observation, Tick
from governor.runtime.throughput_parts.dither import Dither
from governor.runtime.throughput_parts.frames import FrameStats, IdlePower
from governor.runtime.throughput_parts.pricing import Pricing
from governor.runtime.throughput_parts.tables import ClockTables

RATE_HZ = 30.0
FLOOR = 2  # 700 MHz: a period holds 0.0233 s of top-clock work, 600 MHz's 0.02 s


def _dither(slow_share=0.02, idle_w=None, ran_late=0):
    """Frames of 0.015 s of top-clock work, ``slow_share`` of them 0.021 s: all on time at
    700 MHz, the slow ones late at 600 MHz. The first ``ran_late`` slow frames ran at 600 MHz
    (late, as a dither's periods below make them); the others at the top clock."""
    model = small_model()
    tables = ClockTables(model)
    frames, idle = FrameStats(), IdlePower(metered=True)
    idle.idle_w = idle_w
    every = round(1.0 / slow_share)
    slow_seen = 0
    for k in range(FrameStats.LATE_FRAMES):  # every one counted by the stop
        work = 0.021 if k % every == 0 else 0.015
        clock_mhz = 1000.0
        if work > 0.015:
            slow_seen += 1
            if slow_seen <= ran_late:
                clock_mhz = CLOCKS_MHZ[FLOOR - 1]
        busy_s = work * tables.time_rel_at(clock_mhz)
        t = (k + 1) / RATE_HZ
        obs = Observation(t, 1.0 / RATE_HZ, None, clock_mhz, clock_mhz, 0.0, t, True)
        frames.learn(obs, [Tick(t, 1.0, busy_s, clock_mhz)], tables, RATE_HZ)
    pricing = Pricing(model, RATE_HZ, frames, idle)
    return Dither(model, RATE_HZ, frames, pricing)


def test_the_mix_lets_the_allowed_share_of_frames_run_late():
    dither = _dither(slow_share=0.02)
    periods = 400
    below = sum(dither.step(FLOOR, FLOOR, True) == CLOCKS_MHZ[FLOOR - 1] for _ in range(periods))
    here, late_below = dither.shares(FLOOR, FLOOR, True)
    assert here == 0.0 and late_below == 0.02
    # the periods below, times the frames they let run late, are the allowed share
    assert below / periods * late_below == Dither.SHARE


def test_a_clock_below_missing_too_few_frames_to_matter_is_not_rationed():
    dither = _dither(slow_share=0.005)  # below misses under the share: every period there
    picks = {dither.step(FLOOR, FLOOR, True) for _ in range(20)}
    assert picks == {CLOCKS_MHZ[FLOOR - 1]}


def test_no_dither_off_the_floor_while_the_search_measures_or_where_below_costs_more():
    dither = _dither()
    assert dither.step(FLOOR + 1, FLOOR, True) is None  # not the floor
    for _ in range(2):
        dither.step(FLOOR, FLOOR, True)
    assert dither.carry > 0.0
    assert dither.step(FLOOR, FLOOR, False) is None  # a search measuring, or a margin
    assert dither.carry == 0.0  # the diffusion starts again
    # an idle power so low that racing to idle pays: the clock below costs more
    assert _dither(idle_w=-500.0).step(FLOOR, FLOOR, True) is None


def test_late_frames_seen_stop_the_dither_at_the_kept_rates_limit_not_at_its_aim():
    # 2 % of the last LATE_FRAMES frames are slow; those that ran at 600 MHz were late
    n = FrameStats.LATE_FRAMES
    on_aim = round(0.0083 * n)  # 0.83 % seen late: past SHARE, under STOP
    assert Dither.SHARE * n < on_aim < Dither.STOP_SHARE * n
    dither = _dither(slow_share=0.02, ran_late=on_aim)
    assert dither.frames.late_count == on_aim
    assert dither.shares(FLOOR, FLOOR, True) == (0.0, 0.02)
    assert CLOCKS_MHZ[FLOOR - 1] in {dither.step(FLOOR, FLOOR, True) for _ in range(100)}
    stopped = round(Dither.STOP_SHARE * n)  # 1 % seen late: stopped
    past = _dither(slow_share=0.02, ran_late=stopped)
    assert past.frames.late_count == stopped
    assert past.shares(FLOOR, FLOOR, True) is None
