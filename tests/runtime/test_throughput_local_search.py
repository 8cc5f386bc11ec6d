"""The throughput policy's local search on measured power
(governor/runtime/throughput_parts/search.py), driven alone over synthetic periods whose
mean power is a known cost per clock: no frames, no model price to lean on (every clock
priced alike), so only the measurements decide."""

from __future__ import annotations

import pytest
from throughput_model import CLOCKS_MHZ, small_model

from governor.runtime.controller_base import Observation
from governor.runtime.throughput_parts.duel import Measured
from governor.runtime.throughput_parts.frames import FrameStats, IdlePower
from governor.runtime.throughput_parts.pricing import Pricing
from governor.runtime.throughput_parts.search import LocalSearch

PERIOD_S = 0.1
BUSY_S = 0.045  # each period's frames: a 45 % busy share


def _search():
    model = small_model()
    pricing = Pricing(model, 30.0, FrameStats(), IdlePower(metered=True))
    return LocalSearch(model, pricing)


def _run(search, cost_of, seconds, seed, floor, t0=0.0, clock=None):
    """Periods of measured power ``cost_of(clock_mhz)`` at the clock the search asked for;
    returns the clocks asked for, per period."""
    clock = CLOCKS_MHZ[seed] if clock is None else clock
    asked = []
    for k in range(int(round(seconds / PERIOD_S))):
        t = t0 + PERIOD_S * (k + 1)
        obs = Observation(t, PERIOD_S, cost_of(clock), clock, clock, 0.0, t, True)
        clock, _ = search.decide(obs, seed, floor, BUSY_S, clock)
        asked.append(clock)
    return asked


TRUE_W = {700.0: 30.0, 800.0: 29.0, 900.0: 28.5, 1000.0: 29.5, 500.0: 40.0, 600.0: 35.0}


def test_the_search_walks_from_the_pick_to_the_measured_minimum_and_holds_it():
    search = _search()
    asked = _run(search, TRUE_W.get, 40.0, seed=3, floor=2)
    assert set(asked[-100:]) == {900.0}  # the last 10 s
    assert search.settled_cost == pytest.approx(28.5)
    # each neighbour of the minimum was compared with it between two of its windows
    assert search.pairs.pairs[(5, 4)].ratio == pytest.approx(29.5 / 28.5)
    assert search.pairs.pairs[(3, 4)].ratio == pytest.approx(29.0 / 28.5)


def test_a_settled_minimum_whose_cost_moves_is_searched_again():
    search = _search()
    _run(search, TRUE_W.get, 40.0, seed=3, floor=2)
    moved = {f: 1.05 * w for f, w in TRUE_W.items()}
    moved[1000.0] = 0.9 * moved[900.0]  # the load changed: the top clock is now cheapest
    asked = _run(search, moved.get, 40.0, seed=3, floor=2, t0=40.0, clock=900.0)
    assert set(asked[-50:]) == {1000.0}


def test_a_rising_floor_takes_the_clock_up_at_once():
    search = _search()
    _run(search, TRUE_W.get, 1.0, seed=3, floor=2)
    obs = Observation(1.1, PERIOD_S, 29.0, 800.0, 800.0, 0.0, 1.1, True)
    assert search.decide(obs, 3, 4, BUSY_S, 800.0) == (900.0, True)
    assert search.target == 4


def test_a_pick_far_above_the_floor_is_first_measured_against_it():
    search = _search()
    search.start(5, 0.0, 1)
    assert search.duel is not None and search.duel.pick == 5
    assert search.target == 1  # the floor's window first
    near = _search()
    near.start(3, 0.0, 1)  # two search steps above: no duel
    assert near.duel is None and near.target == 3


def test_a_duel_s_pick_window_survives_the_floor_rising_under_the_duel():
    search = _search()
    search.start(5, 0.0, 1)
    obs = Observation(0.1, PERIOD_S, 30.0, CLOCKS_MHZ[1], CLOCKS_MHZ[1], 0.0, 0.1, True)
    search.costs[5] = Measured(29.0, 0.0)
    search.costs[1] = Measured(30.0, 0.0)
    clock, urgent = search.decide(obs, 5, 2, BUSY_S, CLOCKS_MHZ[1])
    assert (clock, urgent) == (CLOCKS_MHZ[2], True)
    assert search.duel is not None  # the pick is still 3 steps above the risen floor
    assert set(search.costs) == {5}  # the pick's window stands, the floor's is dropped


def test_the_young_frames_window_follows_their_clock():
    search = _search()
    for k in range(8):
        t = PERIOD_S * (k + 1)
        obs = Observation(t, PERIOD_S, 40.0, 900.0, 900.0, 0.0, t, True)
        search.meter_young(obs, BUSY_S)
    young = search.young
    assert young.clock_mhz == 900.0 and young.held_s == pytest.approx(0.8)
    assert young.seconds == pytest.approx(0.5, abs=0.11)  # past the settling time
    obs = Observation(0.9, PERIOD_S, 40.0, 800.0, 800.0, 0.0, 0.9, True)
    search.meter_young(obs, BUSY_S)
    assert search.young.clock_mhz == 800.0 and search.young.seconds == 0.0
