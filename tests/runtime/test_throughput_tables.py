"""The throughput policy's price of a clock at the rate and the cheapest clock that keeps a
deadline (governor/runtime/throughput_parts/tables.py), on a hand-made table whose
answers can be worked out by hand."""

from __future__ import annotations

import pytest
from throughput_model import CLOCKS_MHZ, IDLE_W, busy_w, small_model

from governor.runtime.throughput_parts.tables import ClockTables, cost_w, keeps_pick, scan


def test_a_clock_busy_part_of_the_time_costs_its_share_of_busy_and_idle_power():
    assert cost_w(0.25, 40.0, 8.0) == pytest.approx(0.25 * 40.0 + 0.75 * 8.0)
    # a clock whose frames do not fit their period is busy all of the time, no more
    assert cost_w(1.7, 40.0, 8.0) == 40.0


def test_the_floor_is_the_lowest_clock_whose_frame_fits_its_period():
    model = small_model()
    rate = 30.0
    # a frame needing 60 % of its period at the top clock: 1/0.6 = 1.67x slower fits, so
    # 600 MHz (1.67x) is the lowest clock that keeps it
    need = 0.6 / rate
    floor, best = scan(model, need, rate, need, IDLE_W)
    assert CLOCKS_MHZ[floor] == 600.0
    # energy per frame rises with the clock (power with f², time with 1/f) and the idle
    # power is the same everywhere: the floor is also the cheapest
    assert best == floor
    assert ClockTables(model).cheapest(need, rate, need, IDLE_W) == (floor, best)


def test_a_low_idle_power_makes_a_clock_above_the_floor_cheaper():
    """With a negative idle power the gaps between frames pay: racing to idle wins, and the
    cheapest clock is above the floor, by the scan and by the hull alike."""
    model = small_model()
    rate, need = 30.0, 0.3 / 30.0
    floor, best = scan(model, need, rate, need, -200.0)
    costs = [
        cost_w(rate * need * model.time_rel[i], model.power_w[i], -200.0)
        for i in range(len(CLOCKS_MHZ))
    ]
    assert best == costs.index(min(costs)) > floor
    assert ClockTables(model).cheapest(need, rate, need, -200.0) == (floor, best)


def test_no_clock_keeps_a_frame_longer_than_its_period_at_the_top_clock():
    model = small_model()
    assert scan(model, 1.2 / 30.0, 30.0, 1.0 / 30.0, IDLE_W) == (None, None)
    assert ClockTables(model).pick(1.2 / 30.0, 30.0, 1.0 / 30.0, IDLE_W) == (None, None)


def test_look_ups_answer_for_table_clocks_and_the_nearest_for_others():
    tables = ClockTables(small_model())
    assert tables.index(800.0) == 3
    assert tables.index(820.0) == 3  # the nearest table clock
    assert tables.time_rel_at(500.0) == pytest.approx(2.0)
    assert tables.power_at(1000.0) == busy_w(1000.0)
    assert tables.power_at(980.0) == busy_w(1000.0)


def test_a_table_whose_power_falls_somewhere_is_not_answered_by_the_hull():
    model = small_model()
    power = list(model.power_w)
    power[3] = power[2] - 1.0
    dip = type(model)(model.clocks_mhz, tuple(power), model.time_rel, IDLE_W, 700.0, True, "x")
    assert ClockTables(model).fast
    assert not ClockTables(dip).fast


def test_a_held_pick_is_kept_while_priced_within_the_stick_of_the_cheapest():
    model = small_model()
    rate, need = 30.0, 0.3 / 30.0
    held, best = 1, 0  # 600 MHz held; 500 MHz the cheapest
    held_w = cost_w(rate * need * model.time_rel[held], model.power_w[held], IDLE_W)
    best_w = cost_w(rate * need * model.time_rel[best], model.power_w[best], IDLE_W)
    dearer = held_w / best_w - 1.0
    assert dearer > 0
    assert keeps_pick(model, held, best, need, rate, need, IDLE_W, dearer * 1.01)
    assert not keeps_pick(model, held, best, need, rate, need, IDLE_W, dearer * 0.99)
    # a held clock that no longer keeps the deadline is left whatever its price
    slow = 0.7 / 30.0  # 600 MHz is 1.67x slower: 1.17 of a period
    assert not keeps_pick(model, held, 3, slow, rate, need, IDLE_W, 1.0)
