"""What a ticking battery step computes: a past phase's curves do not change, so their
work-per-joule gaps are computed when the phase closes, not again every control period;
and the load-change test keeps the recent periods' sums as periods come and go."""

from __future__ import annotations

import math

from battery_helpers import model_of, observation

from governor.runtime.battery_parts import curves as curves_module
from governor.runtime.battery_parts import share as share_module
from governor.runtime.battery_parts.curves import BEND_TABLE
from governor.runtime.battery_parts.probe import Run
from governor.runtime.battery_parts.tables import concave, gaps
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
    assert len(ctl.history.past) >= 2  # the prior and the memory phase, closed
    assert ctl.probes.run is Run.MIX  # the compute phase is past its probes

    calls = []
    real = curves_module.gaps

    def counting(work, power):
        calls.append(len(work))
        return real(work, power)

    for module in (curves_module, share_module):  # every caller of gaps
        monkeypatch.setattr(module, "gaps", counting)
    for _ in range(50):
        t += 0.1
        clock = _step(ctl, model, t, clock, loads[1], state)
    assert ctl.phase_level is not None and ctl.probes.run is Run.MIX
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


def test_a_recent_bend_rejects_the_same_curves_as_the_whole_table(profile_of):
    """The phase's curve is checked first where it bent lately (three clocks' work): on
    random fits it is rejected exactly when the whole table's check rejects it, and a curve
    that passes gets the same gaps. A load whose work hardly moves with the clock (the
    bench's app ticking one unit a period: A ~ 1e-15 s) has gaps equal to zero but for
    rounding, which bend anywhere; a compute- or partly memory-bound one is concave."""
    import random

    model = model_of(profile_of, "a100-sxm")
    policy = Battery(energy_j=0.8 * model.power_w[-1] * 600, duration_s=600)
    warm, fresh = BatteryController(model, policy), BatteryController(model, policy)
    rng = random.Random(11)
    outcomes = {True: 0, False: 0}
    for _ in range(3000):
        if rng.random() < 0.5:  # flat: all memory time
            A, B = rng.uniform(1e-16, 1e-14), rng.uniform(0.05, 0.15)
        else:
            A, B = rng.uniform(0.01, 0.08), rng.choice((0.0, rng.uniform(0.0, 0.05)))
        fit = (A, B, rng.uniform(5.0, 80.0), rng.uniform(0.3, 1.6))
        fresh.curves.bends = []  # the whole table's check, from its first gap
        want = fresh.curves.phase_curves(fit)
        got = warm.curves.phase_curves(fit)
        assert (got is None) == (want is None)
        if got is not None:
            assert got == want
        outcomes[got is None] += 1
    assert warm.curves.bends  # the shortcut was armed ...
    assert outcomes[True] > 100 and outcomes[False] > 100  # ... on curves of both kinds


def test_a_short_tables_curve_test_is_the_general_rule(profile_of):
    """On a table too short for the recent-bend shortcut (the AGX Orin's 11 clocks), the
    phase's curve is taken exactly when the general rule calls its gaps concave (the gaps of
    its work over its fitted power line, ``gaps`` and ``concave``), and its gaps negated
    are those gaps negated; random fits of compute-bound, partly and wholly memory-bound
    loads, and a flat power line."""
    import random

    model = model_of(profile_of, "agx-orin")
    ctl = BatteryController(model, Battery(energy_j=0.8 * model.power_w[-1] * 600, duration_s=600))
    end = ctl.curves.capped_top + 1
    assert end <= BEND_TABLE  # the whole test, no shortcut
    rng = random.Random(5)
    outcomes = {True: 0, False: 0}
    for _ in range(3000):
        kind = rng.random()
        if kind < 0.4:  # flat: all memory time
            A, B = rng.uniform(1e-16, 1e-14), rng.uniform(0.05, 0.15)
        elif kind < 0.9:
            A, B = rng.uniform(0.01, 0.08), rng.choice((0.0, rng.uniform(0.0, 0.05)))
        else:  # a gap that falls the wrong way: work falling with the clock
            A, B = -rng.uniform(0.001, 0.01), rng.uniform(0.05, 0.15)
        a, b = rng.uniform(5.0, 80.0), rng.uniform(0.3, 1.6)
        got = ctl.curves.phase_curves((A, B, a, b))
        work = [1.0 / (A * r + B) for r in model.time_rel[:end]]
        line = [a + b * (p - model.idle_w) for p in model.power_w[:end]]
        found = gaps(work, line)
        want = concave(found)
        assert (got is not None) == want
        if got is not None:
            neg, fitted_line, inv_b = got
            assert fitted_line == (a, b) and inv_b == 1.0 / b
            assert all(math.isclose(-x, g, rel_tol=1e-9) for x, g in zip(neg, found))
        outcomes[got is not None] += 1
    assert outcomes[True] > 200 and outcomes[False] > 200
