"""The battery plan on a bursty load: a burst under way is expected to run on for its
residual life and a gap to follow, so a mission that ends in a gap spends its budget in the
last burst instead of keeping it for a gap where no joule buys work."""

from __future__ import annotations

import pytest
from battery_helpers import model_of, observation

from governor.runtime.controllers import BatteryController
from governor.runtime.policies import Battery


def _mission(model, budget_j, cycles, busy_s=5.0, gap_s=3.0, dt=0.1):
    """Bursts of ``busy_s`` and gaps of ``gap_s`` (the mission ends in a gap), the GPU
    drawing the model's power at the clock while busy and its idle power between: the
    controller and the energy it leaves unspent."""
    duration = cycles * (busy_s + gap_s)
    ctl = BatteryController(model, Battery(energy_j=budget_j, duration_s=duration))
    clock = ctl.initial_mhz()
    used = 0.0
    steps = int(round(duration / dt))
    per_cycle = int(round((busy_s + gap_s) / dt))
    busy_steps = int(round(busy_s / dt))
    for k in range(steps):
        busy = k % per_cycle < busy_steps
        power = model.power_at(clock) if busy else model.idle_w
        used += power * dt
        t = (k + 1) * dt
        obs = observation(
            t,
            clock,
            power,
            elapsed_s=t,  # as the Governor reports it: now, the end of the period
            energy_used_j=used,
            board_energy_used_j=used,
            busy=busy,
            dt_s=dt,
        )
        clock, _ = ctl.decide(obs, [], clock)
    return ctl, budget_j - used


def test_a_mission_that_ends_in_a_gap_spends_its_budget_in_the_last_burst(profile_of):
    board = "a100-sxm"
    model = model_of(profile_of, board)
    cycles = 40
    # a budget between the lowest and the top clock's, busy 5 s of every 8
    busy_share = 5.0 / 8.0
    mid_w = 0.5 * (model.power_w[0] + model.power_w[-1])
    budget = cycles * 8.0 * (busy_share * mid_w + (1 - busy_share) * model.idle_w)
    ctl, left_j = _mission(model, budget, cycles)
    lengths = ctl.plan.bursts.lengths_s
    assert lengths and abs(lengths[0] - 5.0) < 0.15
    # the duty cycle's share alone keeps the busy share of the last gap's time for it:
    # 3 s of the planned busy power's excess over idle, about 0.3 % of this budget
    assert -0.002 * budget <= left_j <= 0.0005 * budget


def test_a_steady_load_plans_its_whole_time_left_busy(profile_of):
    board = "a100-sxm"
    model = model_of(profile_of, board)
    ctl = BatteryController(model, Battery(energy_j=1e5, duration_s=600.0))
    # no gaps seen: the duty cycle's share
    assert ctl.plan.bursts.expected_busy_s(100.0, 1.0) == 100.0


def test_the_plan_counts_the_time_left_from_now(profile_of):
    """The observation's ``elapsed_s`` is now (the end of the period just measured): the
    plan spreads what is left over the time from now to the end, so the mission's last
    period gets what is left, not an unbounded plan (budget left, no time)."""
    model = model_of(profile_of, "a100-sxm")
    budget, duration, dt = 60_000.0, 600.0, 0.1
    ctl = BatteryController(model, Battery(energy_j=budget, duration_s=duration))
    clock = ctl.initial_mhz()
    for t, used in ((300.0, 30_000.0), (duration - dt, budget - 25.0)):
        power = used / t
        obs = observation(t, clock, power, elapsed_s=t, energy_used_j=used, dt_s=dt)
        clock, _ = ctl.decide(obs, [], clock)
        assert ctl.budget.target_w == pytest.approx((budget - used) / (duration - t), rel=1e-9)
    assert ctl.budget.target_w == pytest.approx(250.0)  # 25 J over the last 0.1 s
