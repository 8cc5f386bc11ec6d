"""The mix's multiplier (battery_parts/solver.py): the marginal work per joule at which the
loads, each at its own level for it, draw the plan's power on average."""

from __future__ import annotations

import math
import random

import pytest

from governor.runtime.battery_parts.forecast import MixLoad
from governor.runtime.battery_parts.solver import mix_lambda
from governor.runtime.battery_parts.tables import gaps, level_neg

CLOCKS = [300.0 + 100.0 * i for i in range(13)]
IDLE_W = 20.0
POWER = [IDLE_W + 100.0 * (f / 1500.0) ** 2.5 for f in CLOCKS]
DYN = [p - IDLE_W for p in POWER]
REL = [1500.0 / f for f in CLOCKS]


def _load(memory_s: float, secs: float, band=None) -> MixLoad:
    work = [1.0 / (r + memory_s) for r in REL]
    power = [IDLE_W + d * r / (r + memory_s) for d, r in zip(DYN, REL)]
    return MixLoad(secs, [-g for g in gaps(work, power)], power, band)


def _mean_power(mix, lam, line):
    """The mix's mean power at ``lam``, each load at its level (clamped to its band) with
    its power interpolated there: written from the definitions, not the solver's loop."""
    a, b = line
    total = sum(m.secs for m in mix)
    out = 0.0
    for m in mix:
        power = m.power_w if m.power_w is not None else [a + b * d for d in DYN]
        x = level_neg(m.neg, lam)
        if m.band is not None:
            x = min(max(x, float(m.band[0])), float(m.band[1]))
        i = min(int(x), len(power) - 2)
        out += m.secs * (power[i] + (x - i) * (power[i + 1] - power[i]))
    return out / total


def _now(line, secs=30.0, s_per_unit=0.04, memory_s=0.0) -> MixLoad:
    """The phase now: ``s_per_unit · t_rel + memory_s`` seconds a unit, power its line."""
    a, b = line
    work = [1.0 / (s_per_unit * r + memory_s) for r in REL]
    return MixLoad(secs, [-g for g in gaps(work, [a + b * d for d in DYN])], None, None)


def test_the_multiplier_draws_the_plans_power_from_scratch_and_from_the_last_one():
    """Plans the mix can draw (its mean power at a random multiplier: a load's level jumps
    from 0 to 0.5 past its first gap, so not every power is drawn by some multiplier)."""
    rng = random.Random(7)
    line = (IDLE_W, 1.1)
    for _ in range(200):
        mix = [_now(line, rng.uniform(5.0, 60.0))]
        mix += [_load(rng.uniform(0.0, 3.0), rng.uniform(5.0, 100.0)) for _ in range(3)]
        gpu_w = _mean_power(mix, math.exp(rng.uniform(math.log(1e-3), math.log(0.5))), line)
        lam = mix_lambda(mix, gpu_w, line, DYN, None)
        assert _mean_power(mix, lam, line) == pytest.approx(gpu_w, rel=1e-4)
        warm = mix_lambda(mix, gpu_w, line, DYN, lam * rng.uniform(0.7, 1.4))
        assert _mean_power(mix, warm, line) == pytest.approx(gpu_w, rel=1e-4)


def test_a_plan_beyond_what_the_mix_can_draw_returns_the_bracket_end():
    line = (IDLE_W, 1.0)
    mix = [_now(line), _load(0.5, 50.0)]
    slopes = [-g for m in mix for g in (m.neg[0], m.neg[-1])]
    assert mix_lambda(mix, 1e6, line, DYN, None) == max(min(slopes), 1e-12) * 0.5
    assert mix_lambda(mix, 0.0, line, DYN, None) == max(slopes) * 2.0


def test_a_past_loads_level_stays_in_its_band():
    """Where the band holds a past load below its level, the phase now spends the rest: the
    multiplier falls."""
    line = (IDLE_W, 1.0)
    load = _load(0.3, 50.0)
    now = _now(line, s_per_unit=1.0, memory_s=1.0)
    free = [now, load]
    banded = [now, MixLoad(load.secs, load.neg, load.power_w, (0, 8))]
    lam0 = 0.004
    assert level_neg(load.neg, lam0) > 8.5  # the band binds there
    assert level_neg(now.neg, lam0) < 11.0  # and the phase now can rise
    gpu_w = _mean_power(free, lam0, line)
    lam_free = mix_lambda(free, gpu_w, line, DYN, None)
    lam_banded = mix_lambda(banded, gpu_w, line, DYN, None)
    assert _mean_power(banded, lam_banded, line) == pytest.approx(gpu_w, rel=1e-4)
    assert level_neg(load.neg, lam_banded) > 8.0
    assert lam_banded < lam_free
