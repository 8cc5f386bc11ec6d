"""Tests written against survivors of the 2026-11-25 (session 27) mutation runs of
governor/calibrate/procedure.py (docs/mutation.md, "Re-measured on the current code")."""

import types

import pytest

from governor.calibrate import procedure as pr
from governor.models import formulas

CLOCKS_MHZ = [100.0 * i for i in range(1, 11)]  # 100 ... 1000 MHz, indices 0 ... 9


def _probe(clock_mhz, energy_j):
    # power 10 W at every clock (flat: no power model fits), time energy / 10 s
    return pr.Probe(clock_mhz, clock_mhz, 10.0, energy_j / 10.0)


class _FastestIsBestProber(pr.Prober):
    """Flat power, so the fit fails and calibration answers with the best probe; the energy
    per unit falls with the clock, 2 - f / 1000 J, so the best probe is the top clock."""

    def __init__(self):
        self.device = types.SimpleNamespace(
            uri="table:top", supported_clocks_mhz=lambda: CLOCKS_MHZ
        )
        self.asked = []

    def probe(self, clock_mhz):
        self.asked.append(clock_mhz)
        return _probe(clock_mhz, 2.0 - clock_mhz / 1000.0)


def test_a_best_probe_at_the_top_clock_is_refined_below_it():
    # Kills :446 (`len(clocks) - 1` -> `+ 1` as the right edge when nothing is probed above
    # the best probe): the mutant indexes past the table's end. Initial probes 100, 500, 800,
    # 1000; best 1000 (index 9), its probed left neighbour 800 (index 7): (9 + 7) // 2 = 8 ->
    # 900 MHz. Then 1000's neighbours 900 and nothing above are done: 5 probes, answer 1000.
    prober = _FastestIsBestProber()
    result = pr.calibrate(prober, max_probes=6, measure_idle=False)
    assert result.method == "best-probe"
    assert prober.asked == [100.0, 500.0, 800.0, 1000.0, 900.0]
    assert result.ppw_optimal_clock_mhz == 1000.0


def test_next_to_best_at_the_top_clock_looks_only_below():
    # the same rule on the helper: best 1000 (index 9), left neighbour 500 (index 4) ->
    # (9 + 4) // 2 = 6 -> 700 MHz; the right side is the best probe itself
    probes = [_probe(500.0, 3.0), _probe(1000.0, 1.0)]
    assert pr._next_to_best(CLOCKS_MHZ, probes) == 700.0
    assert pr._next_to_best(CLOCKS_MHZ, probes + [_probe(900.0, 2.0)]) is None


class _CmosProber(pr.Prober):
    """Exact ridge-point power (formulas.power_w) and two-term time 0.1 s + 100 s·MHz / f."""

    def __init__(self, ridge_mhz, beta_per_mhz):
        self.device = types.SimpleNamespace(
            uri="table:cmos", supported_clocks_mhz=lambda: CLOCKS_MHZ
        )
        self.ridge_mhz = ridge_mhz
        self.beta_per_mhz = beta_per_mhz

    def probe(self, clock_mhz):
        power_w = formulas.power_w(clock_mhz, 20.0, 0.05, self.ridge_mhz, self.beta_per_mhz)
        return pr.Probe(clock_mhz, clock_mhz, power_w, 0.1 + 100.0 / clock_mhz)


_EXTRAPOLATION_NOTE = "no probe lies above the fitted ridge: the ridge clock is an extrapolation"


def test_the_extrapolated_ridge_note_appears_only_when_no_probe_lies_above_the_ridge():
    # Kills :607 (the `not` dropped from `if not power.ridge_reached`). With the voltage
    # rising from 600 MHz, the probes at 800 and 1000 MHz lie above the ridge: no note.
    result = pr.calibrate(_CmosProber(600.0, 0.002), max_probes=4, measure_idle=False)
    assert result.method == "model" and result.power_model.ridge_reached
    assert result.ridge_clock_mhz == pytest.approx(600.0, abs=1.0)
    assert _EXTRAPOLATION_NOTE not in result.notes
    # Power linear in the clock (no voltage rise anywhere): the ridge is not reached, so
    # the note says the ridge clock is an extrapolation.
    result = pr.calibrate(_CmosProber(600.0, 0.0), max_probes=4, measure_idle=False)
    assert result.method == "model" and not result.power_model.ridge_reached
    assert _EXTRAPOLATION_NOTE in result.notes


def test_a_ridge_below_the_lowest_clock_is_reported_at_the_lowest_clock():
    # Kills :616 (the clamp's `clocks[0]` -> `clocks[1]`): the voltage rises from 50 MHz,
    # below the table's 100 MHz, so the board's ridge is its lowest clock, not the second.
    result = pr.calibrate(_CmosProber(50.0, 0.002), max_probes=4, measure_idle=False)
    assert result.method == "model"
    assert result.ridge_clock_mhz == pytest.approx(CLOCKS_MHZ[0], abs=2.0)  # fitted: 101.4
