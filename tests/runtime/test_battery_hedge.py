"""The battery plan's hedge against a wait to come (issue 46): the slack above the lowest
clock's power is spent ahead of an even spread while much of the mission is left, so a
mission that stops in a wait has used more of its battery, and one that does not still
lasts it."""

from __future__ import annotations

import contextlib

import pytest

import governor
from governor.runtime.battery_parts import plan as plan_mod
from governor.runtime.battery_parts.plan import MissionPlan
from governor.runtime.simulate import simulate


def test_the_hedge_spends_the_slack_ahead_and_never_under_the_floor():
    plan = MissionPlan(target_s=100.0, reserve_j=0.0, floor_w=10.0, hedge=0.5)
    # the start: the slack above 10 W twice as fast (k = 1 - 0.5)
    assert plan.hedged(20.0, 100.0) == pytest.approx(30.0)
    assert plan.hedged(20.0, 50.0) == pytest.approx(10.0 + 10.0 / 0.75)
    assert plan.hedged(20.0, 0.0) == pytest.approx(20.0)  # the end: the even spread
    assert plan.hedged(8.0, 100.0) == 8.0  # under the floor: nothing to spend ahead
    unhedged = MissionPlan(target_s=100.0, reserve_j=0.0, floor_w=10.0, hedge=0.0)
    assert unhedged.hedged(20.0, 100.0) == 20.0
    no_floor = MissionPlan(target_s=100.0, reserve_j=0.0)  # no model: no floor known
    assert no_floor.hedged(20.0, 100.0) == 20.0


def _budget_j(board, trace, duration_s, profile):
    clocks = governor.open_device(f"sim:{board}").supported_clocks_mhz()
    runs = [
        simulate(board, {"policy": "clock", "clock_mhz": f}, trace, duration_s, profile=profile)
        for f in (clocks[0], clocks[-1])
    ]
    low, top = (r["board_energy_j"] for r in runs)
    return low + 0.6 * (top - low)


def _battery(board, trace, duration_s, budget_j, profile):
    spec = {"policy": "battery", "energy_j": budget_j, "duration_s": duration_s, "scope": "board"}
    return simulate(board, spec, trace, duration_s, profile=profile)


@contextlib.contextmanager
def _hedge(value):
    old = plan_mod.HEDGE
    plan_mod.HEDGE = value
    try:
        yield
    finally:
        plan_mod.HEDGE = old


def test_a_mission_that_stops_in_a_wait_does_more_work_hedged_and_its_twin_lasts(profile_of):
    """The T4, compute for two thirds then a wait, on the bench's budget: the simulated
    board does more work hedged than with the even spread, within the budget; the mission
    that computes to the end (its twin: the same until the wait) on the same battery stays
    within it too and gives up less than the pattern gains."""
    board, duration_s = "t4", 120.0
    doc = profile_of(board)
    pattern, twin = "compute:2,idle:1", "compute:1"
    budget_j = _budget_j(board, pattern, duration_s, doc)
    with _hedge(0.0):
        even_p = _battery(board, pattern, duration_s, budget_j, doc)
        even_t = _battery(board, twin, duration_s, budget_j, doc)
    hedged_p = _battery(board, pattern, duration_s, budget_j, doc)
    hedged_t = _battery(board, twin, duration_s, budget_j, doc)
    for run in (even_p, even_t, hedged_p, hedged_t):
        assert run["board_energy_j"] <= 1.01 * budget_j
    # the hedge spends more of the battery before the wait
    assert hedged_p["board_energy_j"] > even_p["board_energy_j"]
    gain = hedged_p["work_done"] / even_p["work_done"] - 1.0
    loss = 1.0 - hedged_t["work_done"] / even_t["work_done"]
    assert gain > 0.01
    assert loss < gain
