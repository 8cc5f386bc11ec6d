"""Flat, noisy energy curves: where a probe can still change the answer (the convex bound
of the probes), and the flat-within-noise report in the result, the JSON and the profile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import run_cli

import governor
from governor.calibrate.procedure import (
    GAP_MIN_STEPS,
    Probe,
    ReplayProber,
    _convex_bounds,
    _flat_clocks,
    _where_it_can_change,
    calibrate,
)
from governor.models.optimum import MIN_REL_ERROR, noise_band_rel

REPLAY = Path(__file__).resolve().parents[1] / "data" / "replay"


def _probe(clock_mhz: float, energy_j: float, throttled: bool = False) -> Probe:
    return Probe(
        requested_mhz=clock_mhz,
        clock_mhz=clock_mhz,
        power_w=energy_j,
        time_per_unit_s=1.0,
        status="throttled" if throttled else "ok",
    )


CLOCKS = [float(c) for c in range(800, 1800, 15)]  # 67 clocks, 15 MHz apart


def test_the_convex_bound_is_where_the_two_secants_cross():
    # 860 -> 935 falls 2 J per 75 MHz, 1265 -> 1520 rises 15 J per 255 MHz: the secants
    # extended into the 935..1265 gap cross near 1100 MHz, below the best probe
    probes = [_probe(860, 107), _probe(935, 105), _probe(1265, 109), _probe(1520, 124)]
    bounds = _convex_bounds(CLOCKS, probes)
    clock = min(bounds, key=bounds.get)
    left = 105 + (105 - 107) / 75 * (clock - 935)
    right = 109 + (124 - 109) / 255 * (clock - 1265)
    assert bounds[clock] == pytest.approx(max(left, right))
    assert 1070 <= clock <= 1130
    assert bounds[clock] < 105
    assert _where_it_can_change(CLOCKS, probes, 0.005) == clock


def test_narrow_gaps_and_one_sided_clocks_get_no_bound():
    probes = [_probe(860, 107), _probe(935, 105), _probe(1265, 109), _probe(1520, 124)]
    bounds = _convex_bounds(CLOCKS, probes)
    # 860..935 is 5 steps (< GAP_MIN_STEPS): nothing inside it is bounded
    assert not [c for c in bounds if 860 < c < 935]
    assert GAP_MIN_STEPS > 5
    # every bounded clock lies in a gap at least GAP_MIN_STEPS wide
    assert all(935 < c < 1265 or 1265 < c < 1520 or c > 1520 for c in bounds)


def test_no_probe_is_moved_when_the_bound_is_within_the_noise():
    # a convex curve whose secants cross barely below the best probe: nothing to gain
    probes = [_probe(860, 101.0), _probe(935, 100.2), _probe(1265, 100.3), _probe(1520, 103)]
    bounds = _convex_bounds(CLOCKS, probes)
    assert min(bounds.values()) < 100.2  # the bound is below the best ...
    assert _where_it_can_change(CLOCKS, probes, 0.02) is None  # ... but within 2 % noise


def test_a_power_capped_probe_switches_the_bound_off():
    probes = [_probe(860, 107), _probe(935, 105), _probe(1265, 109), _probe(1520, 124, True)]
    assert _convex_bounds(CLOCKS, probes) == {}


def test_flat_clocks_are_the_probes_within_the_band_of_the_best():
    probes = [_probe(860, 100.0), _probe(935, 100.3), _probe(1010, 100.9), _probe(1265, 99.9)]
    assert _flat_clocks(probes, 0.005) == (860.0, 935.0, 1265.0)
    assert _flat_clocks(probes, 0.0005) == ()  # only the best itself: not flat
    assert noise_band_rel(0.0) == noise_band_rel(MIN_REL_ERROR) > 0


def test_a_flat_real_sweep_is_reported_and_probed_where_it_can_change():
    # A40, BLOOM backward (Perseus): 60 clocks, the energy within 1 % over 1095-1155 MHz;
    # the model alone spent its probes at 930 and 1005 MHz (+2.6 % above the best row)
    path = REPLAY / "a40_perseus-bloom-stage-backward.csv"
    dev = governor.open_device(f"replay:{path}")
    energy = dict(zip(dev.sweep.requested_mhz, dev.sweep.energy_j()))
    result = calibrate(ReplayProber(dev), max_probes=6)
    assert len(result.probes) == 6
    probed = {p.requested_mhz for p in result.probes}
    assert probed & {c for c in energy if 1005 < c < 1260}  # the wide gap was probed
    assert energy[result.ppw_optimal_clock_mhz] <= 1.01 * min(energy.values())
    assert result.flat
    best = min(p.energy_per_unit_j for p in result.probes)
    for clock in result.flat_clocks_mhz:
        assert energy[clock] <= best * (1 + result.noise_band_rel)
    assert any("flat within the measured noise" in n for n in result.notes)


def test_the_cli_json_and_profile_say_the_curve_is_flat(capsys):
    path = REPLAY / "a40_perseus-bloom-stage-backward.csv"
    code, out, err = run_cli(capsys, "calibrate", "--device", f"replay:{path}", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert len(doc["flat"]["clocks_mhz"]) >= 2
    assert doc["flat"]["band_rel"] > 0
    profile = json.loads(Path(doc["profile_path"]).read_text())
    entries = profile["workloads"].values()
    assert any("flat within the measured noise" in n for e in entries for n in e["notes"])
    code, out, err = run_cli(capsys, "calibrate", "--device", f"replay:{path}", "--no-save")
    assert code == 0, err
    assert "note: the energy curve is flat within the measured noise" in " ".join(out.split())
