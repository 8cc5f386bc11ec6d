"""A phase's probe runs and the hold within its trusted band (battery_parts/probe.py)."""

from __future__ import annotations

from governor.runtime.battery_parts.probe import EDGE_S, PROBE_S, ProbeRuns
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
        work.add("lo", CLOCKS[lo_i], 0.1, 5.0, 50.0)
    probes.advance(work)
    assert probes.run == "hi" and probes.probe_index(work, 0.0) == probes.pair[1]
    # no units at all: PROBE_S seconds end the run anyway
    steps = int(PROBE_S / 0.5)
    for _ in range(steps):
        work.add("hi", CLOCKS[probes.pair[1]], 0.5, 0.0, 60.0)
    probes.advance(work)
    assert probes.run == "run" and probes.probe_index(work, 6.0) is None


def test_the_level_is_held_in_the_band_and_an_edge_pressed_long_is_probed_again():
    work = _fit()
    probes = ProbeRuns(capped_top=12, run="run", pair=(5, 7))
    assert probes.hold(6.5, 6.0, (4, 8), 0.1, work) == 6.5  # inside: as asked
    assert probes.edge_s == 0.0
    assert probes.hold(10.0, 6.0, (4, 8), 0.1, work) == 8.0  # above the band: its edge
    assert probes.hold(10.0, 9.0, (4, 8), 0.1, work) == 9.0  # the plan's level widens it
    assert probes.hold(1.0, 6.0, (4, 8), 0.1, work) == 4.0
    steps = 0
    while probes.run == "run":
        probes.hold(10.0, 6.0, (4, 8), 0.5, work)
        steps += 1
    assert steps * 0.5 + 0.3 >= EDGE_S  # held at the edge that long, then probed there
    assert probes.pair == work.probe_pair(8, 12) and probes.edge_s == 0.0
    probes.restart()
    assert (probes.run, probes.pair, probes.edge_s) == ("lo", None, 0.0)
    assert probes.probed() == (0, 12)
