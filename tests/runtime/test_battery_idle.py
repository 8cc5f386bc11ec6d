"""The battery policy on a mission with idle phases (issue 37): a wait (a robot at a dock)
runs at the board's lowest clock, and what it saves goes to the busy time left instead of
being kept for waits forecast to recur."""

from __future__ import annotations

import governor
from governor.runtime import Governor
from governor.runtime.battery_parts.bursts import WAIT_S
from governor.runtime.simulate import simulate


def _fixed_clock_budget(board: str, trace: str, duration_s: float, clock_mhz: float):
    run = simulate(board, {"policy": "clock", "clock_mhz": clock_mhz}, trace, duration_s)
    return run["board_energy_j"], run["work_done"]


def test_a_wait_then_work_does_the_fixed_clocks_work_on_its_energy():
    """As a new user tries it: no profile, the budget of a fixed clock's whole-board energy.
    The wait used to be forecast to recur, the plan spent the budget early at the top clock
    and ran short at the end (0.82 of the fixed clock's work on this mission)."""
    board, trace, duration = "xavier-nx", "idle:1,compute:2", 90.0
    clocks = governor.open_device(f"sim:{board}").supported_clocks_mhz()
    fixed = clocks[int(0.75 * (len(clocks) - 1))]
    budget_j, fixed_work = _fixed_clock_budget(board, trace, duration, fixed)
    spec = {"policy": "battery", "energy_j": budget_j, "duration_s": duration, "scope": "board"}
    run = simulate(board, spec, trace, duration)
    assert run["board_energy_j"] <= 1.01 * budget_j
    assert run["work_done"] >= 0.99 * fixed_work


def test_the_board_idles_at_its_lowest_clock_in_a_wait_and_keeps_its_clock_in_a_short_gap(
    profile_of,
):
    board = "agx-orin"
    dev = governor.open_device(f"sim:{board}")
    lowest = dev.supported_clocks_mhz()[0]
    spec = {"policy": "battery", "energy_j": 20_000.0, "duration_s": 600.0, "scope": "board"}
    gov = Governor(dev, spec, profile=profile_of(board), background=False, handle_signals=False)
    seen = {}
    with dev:
        with gov:
            for label, load, seconds in (
                ("work", "compute", 20.0),
                ("gap", None, 0.5),
                ("work again", "compute", 5.0),
                ("wait", None, 2 * WAIT_S),
            ):
                if load is None:
                    dev.stop_workload()
                else:
                    dev.run_workload(load)
                clocks = []
                for _ in range(int(round(seconds / gov.interval_s))):
                    dev.clock.sleep(gov.interval_s)
                    gov.step(advance_s=0)
                    clocks.append(dev.sample().gpu_clock_mhz)
                seen[label] = clocks
        dev.stop_workload()
    assert min(seen["work"][-10:]) > lowest
    # a gap shorter than a wait keeps the clock the next burst starts at
    assert all(c > lowest for c in seen["gap"])
    # a wait: the busy clock kept while it could be a gap, then the lowest to its end
    waited = int(round(WAIT_S / 0.1))
    assert seen["wait"][waited - 2] > lowest
    assert all(c == lowest for c in seen["wait"][waited + 1 :])
