"""The battery policy with the app's ticks: how much a higher clock buys each load is measured
from the work the app reports, not inferred from power (which cannot tell a memory-bound load
from the calibration load at mid clocks)."""

from __future__ import annotations

import math

import pytest
from battery_helpers import model_of, observation, phase_budget_j, run_mission

from governor.runtime.controllers import BatteryController, Tick
from governor.runtime.policies import Battery
from governor.runtime.workrate import PhaseFit


# -- the fit ---------------------------------------------------------------------------------
def _feed(fit, run, model, i, seconds, s_per_unit, power_w, dt=0.1, done=0.0):
    """Whole units as an app counts them: a unit is reported in the period it ends in
    (``done``: the units under way when the run starts)."""
    for _ in range(int(round(seconds / dt))):
        before = math.floor(done)
        done += dt / s_per_unit(model.time_rel[i])
        fit.add(run, model.clocks_mhz[i], dt, float(math.floor(done) - before), power_w(i))


def test_phase_fit_recovers_the_clock_scaled_and_the_fixed_time_per_unit(profile_of):
    model = model_of(profile_of)
    idle = model.idle_w
    for a_true, b_true in ((0.05, 0.0), (0.003, 0.047)):
        fit = PhaseFit(model)

        def s(rel, a_true=a_true, b_true=b_true):
            return a_true * rel + b_true

        def p(i):
            return 20.0 + 0.6 * (model.power_w[i] - idle)

        assert fit.fit() is None
        _feed(fit, "lo", model, 40, 6.0, s, p)
        assert fit.fit() is None  # one clock says nothing of the slope
        _feed(fit, "hi", model, 60, 6.0, s, p)
        _feed(fit, "run", model, 50, 30.0, s, p)
        A, B, a, b = fit.fit()
        assert A == pytest.approx(a_true, abs=0.003)
        assert B == pytest.approx(b_true, abs=0.003)
        assert b == pytest.approx(0.6, rel=0.02) and a == pytest.approx(20.0, abs=2.0)


def test_phase_fit_does_not_read_a_compute_bound_load_as_memory_bound_from_counting(
    profile_of,
):
    model = model_of(profile_of)

    def p(i):
        return model.power_w[i]

    # two short probes of a compute-bound load, about 25 and 30 units each, half a unit
    # under way at the start: a straight line through them has a fixed part of about 6 %
    # of the time per unit, within what one unit off in either count makes of it
    fit = PhaseFit(model)
    _feed(fit, "lo", model, 40, 2.0, lambda rel: 0.05 * rel, p, done=0.5)
    _feed(fit, "hi", model, 60, 2.0, lambda rel: 0.05 * rel, p, done=0.5)
    A, B, _a, _b = fit.fit()
    assert B == 0.0
    assert A == pytest.approx(0.05, rel=0.05)
    # a memory-bound load probed as briefly keeps its fixed part (it is far above the error)
    fit = PhaseFit(model)
    _feed(fit, "lo", model, 40, 2.0, lambda rel: 0.003 * rel + 0.047, p, done=0.5)
    _feed(fit, "hi", model, 60, 2.0, lambda rel: 0.003 * rel + 0.047, p, done=0.5)
    A, B, _a, _b = fit.fit()
    assert B == pytest.approx(0.047, abs=0.012)


def test_phase_fit_sees_a_new_load_when_rate_and_power_are_each_nearly_off(profile_of):
    """On a board at its power cap a memory-bound load at a high clock does a few per cent
    fewer units at somewhat less power than the compute-bound one: neither alone passes its
    threshold, both together say the load changed."""
    model = model_of(profile_of)

    def compute(rel):
        return 0.05 * rel

    def fitted(rate=1.0, power=1.0):
        fit = PhaseFit(model)
        _feed(fit, "lo", model, 40, 6.0, compute, lambda i: model.power_w[i])
        _feed(fit, "hi", model, 60, 6.0, compute, lambda i: model.power_w[i])
        _feed(fit, "run", model, 50, 20.0, compute, lambda i: model.power_w[i])
        assert not fit.changed()
        _feed(
            fit,
            "run",
            model,
            50,
            5.0,
            lambda rel: compute(rel) / rate,
            lambda i: power * model.power_w[i],
        )
        return fit.changed()

    assert not fitted()
    assert not fitted(rate=0.94)  # 6 % fewer units alone: counting noise allowed for
    assert not fitted(power=0.86)  # 14 % less power alone
    assert fitted(rate=0.94, power=0.86)


def test_phase_fit_sees_a_new_load_at_the_same_clock_but_not_a_move_along_the_table(
    profile_of,
):
    model = model_of(profile_of)

    def compute(rel):
        return 0.05 * rel

    def power(i):
        return model.power_w[i]

    fit = PhaseFit(model)
    _feed(fit, "lo", model, 40, 6.0, compute, power)
    _feed(fit, "hi", model, 60, 6.0, compute, power)
    _feed(fit, "run", model, 50, 20.0, compute, power)
    assert not fit.changed()
    _feed(fit, "run", model, 70, 5.0, compute, power)  # the same load, faster clock
    assert not fit.changed()
    # a memory-bound load at a clock the phase ran: 30 % more units (same power)
    _feed(fit, "run", model, 50, 5.0, lambda rel: 0.003 * rel + 0.047, power)
    assert fit.changed()


# -- the controller --------------------------------------------------------------------------
def _run_controller(model, ticking, seconds=60.0):
    """A memory-bound load whose power is the calibration load's (what the power estimate
    reads as compute-bound) and whose work barely rises with the clock."""
    budget = 0.8 * model.power_w[-1] * 600.0
    ctl = BatteryController(model, Battery(energy_j=budget, duration_s=600.0))
    clock = ctl.initial_mhz()
    done = 0.0
    clocks = []
    for k in range(int(seconds * 10)):
        t = 0.1 * (k + 1)
        before = math.floor(done)
        done += 0.1 / (0.003 * model.time_rel_at(clock) + 0.047)
        units = float(math.floor(done) - before)
        ticks = [Tick(t, units, None, clock)] if ticking and units else []
        obs = observation(t, clock, model.power_at(clock), elapsed_s=t)
        clock, _ = ctl.decide(obs, ticks, clock)
        clocks.append(clock)
    return ctl, clocks


def test_ticks_run_a_memory_bound_load_below_the_plan_the_power_estimate_keeps(profile_of):
    model = model_of(profile_of)
    blind, blind_clocks = _run_controller(model, ticking=False)
    seen, seen_clocks = _run_controller(model, ticking=True)
    late = slice(-300, None)  # after the probes (about 12 s)
    mean_blind = sum(blind_clocks[late]) / 300
    mean_seen = sum(seen_clocks[late]) / 300
    # without ticks the load looks like the calibration one: its clock is the plan's
    plan = model.clocks_mhz[int(round(blind.level))]
    assert abs(mean_blind - plan) <= 0.03 * plan
    # with them, the joules go where they buy work: less here, kept for a load that gains
    assert mean_seen < 0.9 * mean_blind
    assert seen.phase_level < seen.level


# -- on a simulated board ----------------------------------------------------------------
def test_a_ticking_job_that_changes_load_does_more_work_on_the_same_budget(profile_of):
    board = "a100-sxm"
    doc = profile_of(board)
    phases = [("memory", 120.0), ("compute", 120.0), ("memory", 120.0)]
    budget = phase_budget_j(board, phases)
    blind_work, blind_j, _, _, blind_clocks = run_mission(board, doc, budget, phases, False)
    seen_work, seen_j, _, _, seen_clocks = run_mission(board, doc, budget, phases, True)
    assert seen_j <= 1.01 * budget and blind_j <= 1.01 * budget
    # the memory phase gives joules to the compute one, which runs faster than without ticks
    assert seen_clocks[0] < 0.95 * blind_clocks[0]
    assert seen_clocks[1] > 1.03 * blind_clocks[1]
    assert seen_work >= 1.008 * blind_work
