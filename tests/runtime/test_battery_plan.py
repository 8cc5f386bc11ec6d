"""The battery plan (governor/runtime/battery_parts/plan.py): the busy-power target from
what is left, the time left, the idle power and the duty cycle."""

from __future__ import annotations

import math

import pytest

from governor.runtime.battery_parts.plan import PRIOR_BUSY_S, MissionPlan


def test_the_slack_is_spent_while_busy_and_idle_time_pays_idle_power():
    plan = MissionPlan(target_s=100.0, reserve_j=50.0)
    for _ in range(3):  # 30 s busy then 10 s idle at 20 W (the first idle period straddles)
        plan.observe(True, 10.0, 100.0)
    for _ in range(10):
        plan.observe(False, 1.0, 20.0)
    assert plan.idle_w is not None and 19.0 < plan.idle_w <= 20.0
    mean_w, busy_w = plan.plan(remaining_j=5050.0, elapsed_s=40.0)
    assert mean_w == pytest.approx(5000.0 / 60.0)
    duty = (30.0 + PRIOR_BUSY_S) / (40.0 + PRIOR_BUSY_S)
    busy_left = duty * 60.0
    assert plan.busy_left_s == pytest.approx(busy_left)
    assert busy_w == pytest.approx((5000.0 - plan.idle_w * (60.0 - busy_left)) / busy_left)
    # spending only while busy asks more than the mean
    assert busy_w > mean_w


def test_a_wait_is_left_out_of_the_duty_cycle_and_its_savings_go_to_the_time_left():
    """A wait of a third of the mission, then work: the joules the wait did not use are
    spread over all the time left, not over the sliver a recurring wait would leave."""
    plan = MissionPlan(target_s=600.0, reserve_j=0.0)
    for _ in range(2000):
        plan.observe(False, 0.1, 5.0)
    assert plan.wait_s == pytest.approx(200.0)  # the whole run, once known to be a wait
    for _ in range(3):
        plan.observe(True, 0.1, 15.0)
    mean_w, busy_w = plan.plan(remaining_j=4000.0, elapsed_s=200.3)
    assert plan.busy_left_s == pytest.approx(399.7)
    assert busy_w == pytest.approx(4000.0 / 399.7) == pytest.approx(mean_w)
    # a gap shorter than a wait still counts idle
    for _ in range(50):
        plan.observe(False, 0.1, 5.0)
    assert plan.wait_s == pytest.approx(200.0)
    plan.observe(True, 0.1, 15.0)
    plan.plan(remaining_j=3900.0, elapsed_s=205.4)
    duty = (0.4 + PRIOR_BUSY_S) / (5.4 + PRIOR_BUSY_S)
    assert plan.busy_left_s == pytest.approx(duty * (600.0 - 205.4))


def test_past_the_end_the_plan_is_unbounded_while_energy_is_left_else_nothing():
    plan = MissionPlan(target_s=10.0, reserve_j=0.0)
    assert plan.plan(1.0, 10.0) == (math.inf, math.inf)
    assert plan.plan(0.0, 12.0) == (0.0, 0.0)
    reserved = MissionPlan(target_s=10.0, reserve_j=5.0)
    assert reserved.plan(5.0, 10.0) == (0.0, 0.0)  # only the reserve left


def test_a_period_that_straddles_a_change_is_not_steady_and_teaches_no_idle_power():
    plan = MissionPlan(target_s=10.0, reserve_j=0.0)
    assert plan.observe(True, 0.1, 50.0) is False  # no period before it
    assert plan.observe(True, 0.1, 50.0) is True
    assert plan.observe(False, 0.1, 5.0) is False
    assert plan.idle_w is None
    assert plan.observe(False, 0.1, 5.0) is True
    assert plan.idle_w == 5.0
    plan.observe(False, 0.1, 10.0)
    assert plan.idle_w == pytest.approx(5.0 + 0.2 * 5.0)
    assert (plan.busy_s, plan.idle_s) == pytest.approx((0.2, 0.3))


def test_the_board_scope_takes_the_rest_of_the_board_off_the_gpus_target():
    plan = MissionPlan(target_s=10.0, reserve_j=0.0)
    assert plan.gpu_target(40.0, board_scope=True) == 40.0  # nothing measured yet
    plan.learn_rest(10.0)
    plan.learn_rest(20.0)
    assert plan.rest_w == pytest.approx(12.0)
    assert plan.gpu_target(40.0, board_scope=True) == pytest.approx(28.0)
    assert plan.gpu_target(40.0, board_scope=False) == 40.0
