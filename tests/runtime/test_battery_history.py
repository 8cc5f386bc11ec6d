"""The past phases (battery_parts/history.py): a phase is kept with its gaps when it ends,
the prior goes first, and past MAX_PHASES the two most alike measured phases merge."""

from __future__ import annotations

import pytest

from governor.runtime.battery_parts.curves import ClockCurves
from governor.runtime.battery_parts.history import MAX_PHASES, PhaseHistory
from governor.runtime.model import ClockModel

CLOCKS = tuple(300.0 + 100.0 * i for i in range(13))
IDLE_W = 20.0


def _history() -> PhaseHistory:
    power = tuple(IDLE_W + 100.0 * (f / 1500.0) ** 2.5 for f in CLOCKS)
    rel = tuple(1500.0 / f for f in CLOCKS)
    return PhaseHistory(ClockCurves(ClockModel(CLOCKS, power, rel, IDLE_W, 900.0, True, "t")))


def _curves(history: PhaseHistory, memory_s: float, scale: float = 1.0):
    """Work and power of a load taking ``t_rel + memory_s`` s a unit."""
    model = history.curves.model
    work = [scale / (r + memory_s) for r in model.time_rel]
    power = [
        IDLE_W + (p - IDLE_W) * r / (r + memory_s) for p, r in zip(model.power_w, model.time_rel)
    ]
    return work, power


def test_a_closed_phase_is_kept_with_its_gaps_band_and_length():
    history = _history()
    history.age_s = 30.0
    history.close(_curves(history, 0.5), (3, 9))
    history.age_s = 10.0
    history.close(None, (0, 12))  # too sparse to fit: counted, not kept
    assert len(history.past) == 1
    phase = history.past[0]
    assert (phase.busy_s, phase.band) == (30.0, (3, 9))
    assert phase.neg_gaps == history.curves.past_gaps(phase.work, phase.power_w)
    assert (history.closed_n, history.closed_busy_s, history.age_s) == (2, 40.0, 0.0)
    assert history.typical_s() == 20.0


def test_the_prior_goes_first_with_the_models_power():
    history = _history()
    history.age_s = 5.0
    history.close(_curves(history, 0.2), (2, 8))
    history.add_prior(100.0, 0.04)
    prior = history.past[0]
    assert history.has_prior and prior.busy_s == 100.0 and prior.power_w is None
    model = history.curves.model
    assert prior.work == [1.0 / (0.04 * r) for r in model.time_rel]
    assert prior.neg_gaps is not None  # a compute-bound load on a convex power table


def test_past_max_phases_the_two_most_alike_merge_weighted_by_their_seconds():
    history = _history()
    history.add_prior(100.0, 0.04)
    shares = [0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 12.2]  # the last two nearly alike
    for k, memory_s in enumerate(shares):
        history.age_s = 10.0 + k
        history.close(_curves(history, memory_s), (k, k + 3))
    assert len(history.past) == MAX_PHASES  # the prior and seven measured phases
    merged = history.past[-1]
    a, b = _curves(history, 12.0), _curves(history, 12.2)
    sa, sb = 16.0, 17.0
    assert merged.busy_s == sa + sb
    assert merged.work == pytest.approx([(sa * x + sb * y) / (sa + sb) for x, y in zip(a[0], b[0])])
    assert merged.power_w == pytest.approx(
        [(sa * x + sb * y) / (sa + sb) for x, y in zip(a[1], b[1])]
    )
    assert merged.band == (6, 10)
    assert history.past[0].power_w is None  # the prior never merges
