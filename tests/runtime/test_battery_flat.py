"""The battery policy on a flat (issue 37): where the load's work is linear in its power
(below the voltage floor) it runs at the top of the flat, as far as the rest can still run
on it, so joules are not kept for a wait or a memory-bound phase that cannot use them."""

from __future__ import annotations

import pytest

from governor.runtime.battery_parts.flat import flat_top
from governor.runtime.simulate import simulate

# four clocks on a flat (equal gaps), then a knee
GAPS = [2.0, 2.0, 2.0, 0.8, 0.5]
POWER_W = [10.0, 11.0, 12.0, 13.0, 15.0, 18.0]
CLOCKS_MHZ = [300.0, 330.0, 360.0, 390.0, 420.0, 450.0]


def test_a_level_on_the_flat_goes_to_its_top():
    assert (
        flat_top(GAPS, CLOCKS_MHZ, POWER_W, 1.5, 11.5, busy_left_s=300.0, dt_s=0.1, age_s=0.0)
        == 3.0
    )


def test_off_the_flat_or_at_its_top_the_level_stays():
    assert (
        flat_top(GAPS, CLOCKS_MHZ, POWER_W, 3.6, 14.2, busy_left_s=300.0, dt_s=0.1, age_s=0.0)
        == 3.6
    )
    assert (
        flat_top(GAPS, CLOCKS_MHZ, POWER_W, 3.0, 13.0, busy_left_s=300.0, dt_s=0.1, age_s=0.0)
        == 3.0
    )


def test_gaps_falling_as_fast_as_above_a_voltage_floor_are_no_flat():
    # a fine table (15 MHz steps) whose gaps fall as f^-2: each within 3 % of the last
    clocks = [1200.0 + 15.0 * i for i in range(8)]
    gaps = [((a + b) / 2) ** -2.0 for a, b in zip(clocks, clocks[1:])]
    power = [50.0 + 0.5 * i for i in range(8)]
    assert flat_top(gaps, clocks, power, 2.5, 51.25, busy_left_s=300.0, dt_s=0.1, age_s=0.0) == 2.5


def test_the_rest_is_left_the_flats_bottom_one_clock_above_the_lowest():
    # the plan is at clock 1's power, the flat's kept bottom: nothing to spend ahead
    assert (
        flat_top(GAPS, CLOCKS_MHZ, POWER_W, 1.0, 11.0, busy_left_s=300.0, dt_s=0.1, age_s=0.0)
        == 1.0
    )
    # a little above it with little time left: only as much as keeps the rest there
    # (spending 12 W for 0.1 s leaves 11.2 W − 0.8 W·0.1/0.4 = 11 W for the 0.4 s after)
    level = flat_top(GAPS, CLOCKS_MHZ, POWER_W, 1.2, 11.2, busy_left_s=0.5, dt_s=0.1, age_s=0.0)
    assert level == pytest.approx(2.0)


def test_a_load_forecast_to_run_to_the_end_spends_at_the_plan():
    # it has run 300 s with 200 s of busy time left: no other phase is forecast to come
    assert flat_top(GAPS, CLOCKS_MHZ, POWER_W, 1.5, 11.5, 200.0, 0.1, age_s=300.0) == 1.5
    assert flat_top(GAPS, CLOCKS_MHZ, POWER_W, 1.5, 11.5, 200.0, 0.1, age_s=100.0) == 3.0


def _best_fixed(board, trace, duration_s, budget_j):
    """The work of the best fixed clock whose board energy fits ``budget_j`` (hindsight)."""
    import governor

    clocks = governor.open_device(f"sim:{board}").supported_clocks_mhz()
    best = 0.0
    for clock in clocks:
        run = simulate(board, {"policy": "clock", "clock_mhz": clock}, trace, duration_s)
        if run["board_energy_j"] <= budget_j:
            best = max(best, run["work_done"])
    return best


@pytest.mark.parametrize(
    "trace, floor",
    [
        # waits that come back, a memory-bound phase last: 0.70 of the best fixed clock's
        # work when the compute phase ran at the plan's level
        ("idle:1,compute:1,idle:1,memory:1", 0.78),
        # its twin until the second wait: spending ahead on the flat costs it nothing
        ("idle:1,compute:3", 0.99),
    ],
)
def test_titan_x_spends_ahead_on_its_flat(profile_of, trace, floor):
    board, duration = "titan-x", 240.0
    fixed = simulate(board, {"policy": "clock", "clock_mhz": 1050.0}, trace, duration)
    budget_j = fixed["board_energy_j"]
    spec = {"policy": "battery", "energy_j": budget_j, "duration_s": duration, "scope": "board"}
    run = simulate(board, spec, trace, duration, profile=profile_of(board))
    assert run["board_energy_j"] <= 1.01 * budget_j
    assert run["work_done"] >= floor * _best_fixed(board, trace, duration, budget_j)
