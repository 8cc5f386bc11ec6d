"""scripts/causal_lp.py: the exact program of what a causal policy can be sure of."""

from __future__ import annotations

import pytest
from script_helpers import script_module

# one load whose work rate rises 2/W from 1 W to 2 W, then 1/W to 3 W; a wait at 1 W
HULLS = {"load": [(1.0, 0.0), (2.0, 2.0), (3.0, 3.0)], None: [(1.0, 0.0)]}


@pytest.fixture(scope="module")
def lp():
    with script_module("causal_lp") as mod:
        yield mod


def test_a_load_that_may_stop_after_one_second_is_hedged_as_by_hand(lp):
    """4 J over 2 s: on the load throughout the best is 2 W each second (4 units); if a
    wait (1 J) follows the first second, the best is 3 W in it (3 units). Spending e in the
    first second (2 ≤ e ≤ 3) does e units if the wait comes, 2 + (e − 2) + 2(3 − e) = 6 − e
    if not: e/3 = (6 − e)/4 at e = 18/7, where both are 6/7 of their best."""
    missions = [[("load", 2.0)], [("load", 1.0), (None, 1.0)]]
    z, spent = lp.sure_ratio(HULLS, missions, [4.0, 3.0], 4.0)
    assert z == pytest.approx(6 / 7, abs=1e-9)
    # both missions spend the same in the shared first second (causality)
    assert spent[0][1] == pytest.approx(18 / 7, abs=1e-9)
    assert spent[1][1] == pytest.approx(18 / 7, abs=1e-9)
    assert spent[1][2] == pytest.approx(18 / 7 + 1.0, abs=1e-9)


def test_one_mission_alone_gets_hindsights_best_and_more_missions_only_lower_it(lp):
    alone, _ = lp.sure_ratio(HULLS, [[("load", 2.0)]], [4.0], 4.0)
    assert alone == pytest.approx(1.0, abs=1e-9)
    three = [[("load", 2.0)], [("load", 1.0), (None, 1.0)], [("load", 1.5), (None, 0.5)]]
    z3, _ = lp.sure_ratio(HULLS, three, [4.0, 3.0, 3.5], 4.0)
    # the third wait costs nothing more here: the first second's 18/7 J leave it 3.5 units
    assert z3 == pytest.approx(6 / 7, abs=1e-9)


def test_no_schedule_lasting_every_mission_gives_zero(lp):
    z, spent = lp.sure_ratio(HULLS, [[("load", 2.0)]], [4.0], 1.5)  # least: 2 J
    assert z == 0.0 and spent is None


def test_missions_of_different_lengths_are_refused(lp):
    with pytest.raises(ValueError, match="one length"):
        lp.pieces([[("load", 2.0)], [("load", 1.0)]])
