"""The duel between the model's far pick and the deadline's floor
(governor/runtime/throughput_parts/duel.py): floor, pick, floor, with a window that already
favours the side the board's warming works against deciding at once."""

from __future__ import annotations

from governor.runtime.throughput_parts.duel import Duel, Measured

PICK, FLOOR, NOISE = 9, 3, 0.003


def test_a_pick_cheaper_than_the_mean_of_the_floor_s_two_windows_wins():
    duel = Duel(PICK)
    costs = {}
    step = duel.after_window(FLOOR, FLOOR, 100.0, costs, NOISE)  # the floor's first
    assert step == (PICK, False, False)
    costs[PICK] = Measured(99.8, 1.0)
    step = duel.after_window(PICK, FLOOR, 99.8, costs, NOISE)  # not below 100 by the noise
    assert step == (FLOOR, False, False)
    step = duel.after_window(FLOOR, FLOOR, 100.6, costs, NOISE)  # mean 100.3: 0.5 % dearer
    assert step == (PICK, True, False)


def test_the_floor_is_held_when_the_pick_is_not_clearly_cheaper():
    duel = Duel(PICK)
    costs = {}
    duel.after_window(FLOOR, FLOOR, 100.0, costs, NOISE)
    costs[PICK] = Measured(100.1, 1.0)
    duel.after_window(PICK, FLOOR, 100.1, costs, NOISE)
    step = duel.after_window(FLOOR, FLOOR, 100.2, costs, NOISE)
    assert step == (FLOOR, True, True)


def test_a_pick_cheaper_than_the_floor_measured_before_it_wins_at_once():
    """The warming raises the power as the windows go: a later window read cheaper beyond
    the noise is cheaper for sure, no second floor window needed."""
    duel = Duel(PICK)
    duel.after_window(FLOOR, FLOOR, 100.0, {}, NOISE)
    assert duel.after_window(PICK, FLOOR, 99.0, {}, NOISE) == (PICK, True, False)


def test_the_young_frames_window_at_the_pick_comes_first_and_a_cheaper_floor_wins_at_once():
    duel = Duel(PICK)
    assert duel.after_window(PICK, FLOOR, 100.0, {}, NOISE) == (FLOOR, False, False)
    assert duel.pick_w == 100.0
    assert duel.after_window(FLOOR, FLOOR, 99.0, {}, NOISE) == (FLOOR, True, True)


def test_after_the_young_window_a_floor_not_clearly_cheaper_goes_on_with_the_pick():
    duel = Duel(PICK)
    duel.after_window(PICK, FLOOR, 100.0, {}, NOISE)
    assert duel.after_window(FLOOR, FLOOR, 99.9, {}, NOISE) == (PICK, False, False)
