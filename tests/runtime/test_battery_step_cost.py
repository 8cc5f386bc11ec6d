"""What a ticking battery step computes: a past phase's curves do not change, so their
work-per-joule gaps are computed when the phase closes, not again every control period;
and the load-change test keeps the recent periods' sums as periods come and go."""

from __future__ import annotations

import math

from battery_helpers import model_of, observation

from governor.runtime.controllers import BatteryController, Tick
from governor.runtime.policies import Battery
from governor.runtime.workrate import PhaseFit


def _step(ctl, model, t, clock, s_per_unit, state):
    """One busy period of a load taking ``s_per_unit(t_rel)`` seconds a unit, ticked in
    whole units, at the calibration load's power."""
    before = math.floor(state["done"])
    state["done"] += 0.1 / s_per_unit(model.time_rel_at(clock))
    units = float(math.floor(state["done"]) - before)
    power = model.power_at(clock)
    obs = observation(t, clock, power, elapsed_s=t, board_energy_used_j=0.8 * power * t)
    ticks = [Tick(t, units, None, clock)] if units else []
    return ctl.decide(obs, ticks, clock)[0]


def test_past_phases_gaps_are_not_recomputed_every_period(profile_of, monkeypatch):
    model = model_of(profile_of)
    ctl = BatteryController(model, Battery(energy_j=0.8 * model.power_w[-1] * 600, duration_s=600))
    clock = ctl.initial_mhz()
    state = {"done": 0.0}
    t = 0.0
    loads = (lambda rel: 0.003 * rel + 0.047, lambda rel: 0.05 * rel)  # memory, compute
    for load in loads:
        for _ in range(600):
            t += 0.1
            clock = _step(ctl, model, t, clock, load, state)
    assert len(ctl.past) >= 2  # the prior and the memory phase, closed
    assert ctl.run == "run"  # the compute phase is past its probes

    calls = []
    real = BatteryController._gaps

    def counting(work, power):
        calls.append(len(work))
        return real(work, power)

    monkeypatch.setattr(BatteryController, "_gaps", staticmethod(counting))
    for _ in range(50):
        t += 0.1
        clock = _step(ctl, model, t, clock, loads[1], state)
    assert ctl.phase_level is not None and ctl.run == "run"
    # the phase now's gaps come from its fit directly; the past ones are cached
    assert calls == []


def test_the_load_change_test_reads_the_same_recent_sums_as_a_recount(profile_of):
    model = model_of(profile_of)
    fit = PhaseFit(model)
    runs = ("lo",) * 60 + ("hi",) * 60 + ("run",) * 300
    for k, run in enumerate(runs):
        i = {"lo": 30, "hi": 50, "run": 40 + (k % 3)}[run]
        fit.add(run, model.clocks_mhz[i], 0.1, float(k % 2 + 1), 100.0 + k % 5)
    recount = {}
    for run, point in fit.recent:
        row = recount.setdefault(run, [0.0] * 5)
        for j, x in enumerate(point):
            row[j] += x
    assert len(fit.recent) == fit.RECENT
    assert set(r for r, _ in fit.recent) == {"run"}
    for run, row in recount.items():
        assert all(math.isclose(a, b, rel_tol=1e-9) for a, b in zip(fit.recent_sums[run], row))
    # the runs that left the window hold nothing recent
    assert all(abs(x) < 1e-6 for x in fit.recent_sums["lo"][:2])
