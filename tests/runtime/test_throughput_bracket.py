"""The throughput search's comparisons of neighbouring clocks on a warming counter board: a
neighbour is measured between two windows of the held clock (the warming cancels), and a
local minimum between two measured neighbours is refined down to the table's step. Driven
with synthetic periods (no simulator in the loop: deterministic and fast)."""

from __future__ import annotations

from frame_loop import RATE_HZ, drive

from governor.devices.sim.catalog import get_board
from governor.runtime.controllers import ThroughputController
from governor.runtime.model import model_from_profile
from governor.runtime.policies import Throughput

LOAD = 0.45  # of a frame period at the top clock


def _controller(board, profile_of):
    model = model_from_profile(get_board(board).clocks_mhz, profile_of(board))
    return ThroughputController(model, Throughput(rate_hz=RATE_HZ), search=True)


def _board(model, knee_mhz, idle_w, warming_per_s, over_knee=0.004):
    """A board whose busy power is the model's but ``over_knee`` dearer at and above
    ``knee_mhz`` (its voltage knee lower than the calibrated one), with the
    idle power ``idle_w`` between frames, and whose power rises by ``warming_per_s`` of
    itself per second for the first 40 s (a cold board warming). Returns the period's
    power ``power_of(clock_mhz, busy_share, t_s)`` and its cost at a steady rate,
    ``cost_of(clock_mhz)`` (the board's own, with no warming)."""

    def busy_w(clock):
        return model.power_at(clock) * (1.0 + (over_knee if clock >= knee_mhz else 0.0))

    def power_of(clock, busy, t):
        warm = 1.0 + warming_per_s * min(t, 40.0)
        return (busy * busy_w(clock) + (1.0 - busy) * idle_w) * warm

    def cost_of(clock):
        busy = min(1.0, LOAD * model.time_rel_at(clock))
        return busy * busy_w(clock) + (1.0 - busy) * idle_w

    return power_of, cost_of


def test_a_warming_board_s_cheapest_clock_is_found_between_the_search_steps(profile_of):
    """A100 PCIe (a 15-MHz table, searched in 30-MHz steps) whose busy power is 0.4 %
    above the model's from the calibrated PPW clock up (its knee lower than calibrated), so
    that the model's pick is dearer than a clock below it, on a board warming 0.1 % a
    second: a window measured 2.3-4.6 s after another reads 0.23-0.46 % dearer for the
    warming alone, more than the clocks differ. The search
    must end on the board's cheapest clock that keeps the rate (found by brute force on the
    board's own cost), which is not on the search's 30-MHz grid from the pick: it measures
    neighbours between windows of the held clock and halves its step at a minimum."""
    ctl = _controller("a100-pcie", profile_of)
    model = ctl.model
    idle_w = 0.8 * model.idle_w  # the knee, not the floor, is the cheapest: no duel lost
    ppw = model.index(model.ppw_clock_mhz)
    knee_mhz = model.clocks_mhz[ppw]  # the board's knee: the calibrated PPW clock
    power_of, cost_of = _board(model, knee_mhz, idle_w, 0.001)
    applied, _ = drive(ctl, power_of, 60.0, LOAD)
    pick = model.index(ctl.choice_mhz)
    floor = ctl.floor_idx
    cheapest = min(model.clocks_mhz[floor:], key=cost_of)
    # the case at hand: the model's pick is at or above the knee, and the cheapest clock is
    # off the pick's 30-MHz grid
    assert model.clocks_mhz[pick] >= knee_mhz
    assert (pick - model.index(cheapest)) % ctl.local_search.step != 0
    held = {c for t, c in applied if t >= 45.0}
    assert held == {cheapest}, (cheapest, sorted(held), model.clocks_mhz[pick])
