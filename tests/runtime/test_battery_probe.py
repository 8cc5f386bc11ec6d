"""A phase's probe runs and the hold within its trusted band (battery_parts/probe.py)."""

from __future__ import annotations

from governor.runtime.battery_parts.probe import EDGE_S, PROBE_S, ProbeRuns, Run
from governor.runtime.model import ClockModel
from governor.runtime.workrate import PhaseFit

CLOCKS = tuple(300.0 + 100.0 * i for i in range(13))


def _fit() -> PhaseFit:
    power = tuple(20.0 + 100.0 * (f / 1500.0) ** 2.5 for f in CLOCKS)
    rel = tuple(1500.0 / f for f in CLOCKS)
    return PhaseFit(ClockModel(CLOCKS, power, rel, 20.0, 900.0, True, "t"))


def test_a_new_phase_probes_low_then_high_then_runs():
    work = _fit()
    probes = ProbeRuns(capped_top=12)
    lo_i = probes.probe_index(work, 6.2)
    assert probes.pair == work.probe_pair(6, 12) and lo_i == probes.pair[0]
    # enough units in the low run: on to the high one
    for _ in range(10):
        work.add(Run.LO, CLOCKS[lo_i], 0.1, 5.0, 50.0)
    probes.advance(work)
    assert probes.run is Run.HI and probes.probe_index(work, 0.0) == probes.pair[1]
    # no units at all: PROBE_S seconds end the run anyway
    steps = int(PROBE_S / 0.5)
    for _ in range(steps):
        work.add(Run.HI, CLOCKS[probes.pair[1]], 0.5, 0.0, 60.0)
    probes.advance(work)
    assert probes.run is Run.MIX and probes.probe_index(work, 6.0) is None


def test_the_level_is_held_in_the_band_and_an_edge_pressed_long_asks_for_new_probes():
    probes = ProbeRuns(capped_top=12, run=Run.MIX, pair=(5, 7))
    assert probes.hold(6.5, 6.0, (4, 8), 0.1) == (6.5, False)  # inside: as asked
    assert probes.edge_s == 0.0
    assert probes.hold(10.0, 6.0, (4, 8), 0.1) == (8.0, False)  # above the band: its edge
    assert probes.hold(10.0, 9.0, (4, 8), 0.1) == (9.0, False)  # the plan's level widens it
    assert probes.hold(1.0, 6.0, (4, 8), 0.1) == (4.0, False)
    steps, again = 0, False
    while not again:
        level, again = probes.hold(10.0, 6.0, (4, 8), 0.5)
        assert level == 8.0
        steps += 1
    assert steps * 0.5 + 0.3 >= EDGE_S > (steps - 1) * 0.5  # held at the edge that long
    # the hold only asks: the run and the pair are the controller's to change
    assert (probes.run, probes.pair, probes.edge_s) == (Run.MIX, (5, 7), 0.0)
    probes.probe_again((7, 9))
    assert (probes.run, probes.pair) == (Run.LO, (7, 9))
    probes.restart()
    assert (probes.run, probes.pair, probes.edge_s) == (Run.LO, None, 0.0)
    assert probes.probed() == (0, 12)


def test_the_hold_leaves_the_phase_fit_alone():
    """Asking for new probes does not reset a PhaseFit: none is given to the hold."""
    work = _fit()
    for _ in range(10):
        work.add(Run.MIX, CLOCKS[6], 0.1, 5.0, 50.0)
    before = work.units_in(Run.MIX)
    assert before[1] == 50.0
    probes = ProbeRuns(capped_top=12, run=Run.MIX, pair=(5, 7))
    again = False
    while not again:
        _, again = probes.hold(10.0, 6.0, (4, 8), 0.5)
    assert work.units_in(Run.MIX) == before
