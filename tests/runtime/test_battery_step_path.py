"""The cheaper ticking battery step (issue 15, item 7): the mix's multiplier is searched from
the last one (kept when it still holds, else a Newton step on the piecewise-linear mean
power) and must answer what the search from scratch answers; the model's clock-to-index
dictionary must answer what its nearest-clock rule answers; the mix is solved every third
period of a phase's run, the level it found held between."""

from __future__ import annotations

import math

from battery_helpers import model_of
from test_battery_step_cost import _step

from governor.runtime.battery_parts.probe import Run
from governor.runtime.controllers import BatteryController
from governor.runtime.model import ClockModel
from governor.runtime.policies import Battery


def test_the_index_dictionary_answers_the_nearest_clock_rule():
    """Table clocks through the dictionary, others through the bisection: the same index as
    the bisection alone (the model with its dictionary emptied), equal clocks included."""
    for clocks in ((300.0, 420.5, 600.0, 905.25, 1200.0), (300.0, 420.5, 420.5, 600.0)):
        n = len(clocks)
        model = ClockModel(clocks, (1.0,) * n, (1.0,) * n, 0.5, 600.0, True, "test")
        plain = ClockModel(clocks, (1.0,) * n, (1.0,) * n, 0.5, 600.0, True, "test")
        object.__setattr__(plain, "index_of", {})
        probes = list(clocks) + [0.0, 360.25, 360.26, 510.0, 1e9, 420.4999, 905.250001]
        for value in probes:
            assert model.index(value) == plain.index(value), value
        assert [model.index(c) for c in clocks] == [clocks.index(c) for c in clocks]
        # the dictionary is not part of the model's value
        assert plain == model and hash(plain) == hash(model) and "index_of" not in repr(model)


def test_the_warm_started_multiplier_is_the_one_searched_from_scratch(profile_of, monkeypatch):
    """Every mix a two-load mission solves on agx-orin: the answer from the last multiplier
    (as the controller solves it) against the answer with no last multiplier."""
    model = model_of(profile_of, "agx-orin")
    ctl = BatteryController(model, Battery(energy_j=0.8 * model.power_w[-1] * 600, duration_s=600))
    seen = []
    real = BatteryController._mix_lambda

    def recording(self, mix, gpu_w, line):
        last = self.last_lam
        lam = real(self, mix, gpu_w, line)
        seen.append((list(mix), gpu_w, line, last, lam))
        return lam

    monkeypatch.setattr(BatteryController, "_mix_lambda", recording)
    clock = ctl.initial_mhz()
    state = {"done": 0.0}
    t = 0.0
    for load in (lambda rel: 0.003 * rel + 0.047, lambda rel: 0.05 * rel):  # memory, compute
        for _ in range(500):
            t += 0.1
            clock = _step(ctl, model, t, clock, load, state)
    warm = [s for s in seen if s[3] is not None]
    assert len(warm) > 100
    moved = 0
    for mix, gpu_w, line, last, lam in warm:
        ctl.last_lam = None
        cold = real(ctl, mix, gpu_w, line)
        assert math.isclose(lam, cold, rel_tol=2e-4), (lam, cold)  # the search's 0.01 % width
        moved += lam != last
    assert moved > len(warm) // 2  # the multiplier moves: not an answer kept regardless


def test_the_mix_is_solved_every_third_period_and_its_level_held_between(profile_of, monkeypatch):
    """The outer loop (the phase's fit, its curves, the mix's multiplier) runs once every
    SOLVE_EVERY periods of a phase past its probes; the periods between ask for the clocks
    around the level that solve found (dithered), and a change of load is still seen."""
    model = model_of(profile_of, "agx-orin")
    ctl = BatteryController(model, Battery(energy_j=0.8 * model.power_w[-1] * 600, duration_s=600))
    every = BatteryController.SOLVE_EVERY
    assert every == 3
    solved = []
    real = BatteryController._mix_lambda

    def recording(self, mix, gpu_w, line):
        solved.append(True)
        return real(self, mix, gpu_w, line)

    monkeypatch.setattr(BatteryController, "_mix_lambda", recording)
    clock = ctl.initial_mhz()
    state = {"done": 0.0}
    t = 0.0
    rows = []  # per period: (run before, solved, level found, clock asked, phases, level used)
    for load in (lambda rel: 0.003 * rel + 0.047, lambda rel: 0.05 * rel):  # memory, compute
        for _ in range(500):
            t += 0.1
            run, n = ctl.probes.run, len(solved)
            clock = _step(ctl, model, t, clock, load, state)
            rows.append(
                (run, len(solved) > n, ctl.want, clock, ctl.history.closed_n, ctl.phase_level)
            )
    # the compute load is seen as a new phase within the recent window and a few periods
    switch = next(i for i, r in enumerate(rows) if r[4] >= 1)
    assert 500 <= switch < 500 + 40 + every
    # in a phase's run, solves come exactly every third period
    idx = [i for i, r in enumerate(rows) if r[1]]
    assert len(idx) > 100
    runs = 0
    for a, b in zip(idx, idx[1:]):
        if all(rows[k][0] is Run.MIX and rows[k][4] == rows[a][4] for k in range(a, b + 1)):
            assert b - a == every, (a, b)
            runs += 1
            # between them the level found is kept, and the clock asked is one of the two
            # table clocks around the level used (the found one, or the trusted band's edge)
            top = len(model.clocks_mhz) - 1
            for k in range(a + 1, b):
                assert rows[k][2] == rows[a][2]
                used = rows[k][5]
                i = int(math.floor(used))
                near = (model.clocks_mhz[min(i, top)], model.clocks_mhz[min(i + 1, top)])
                assert rows[k][3] in near, (k, rows[k][3], near)
    assert runs > 100
