"""The optimum's interval is honest: it holds the true optimum on simulated boards (truth from
the simulator's physics, which the fit never sees) and the best measured clock on real sweeps
about as often as it claims, widens with noise, and travels into the JSON and the profile."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import run_cli

import governor
from governor.calibrate.loads import make_load
from governor.calibrate.procedure import DeviceProber, ReplayProber, calibrate
from governor.devices.sim.catalog import load_catalog
from governor.errors import ProfileError
from governor.models import formulas
from governor.models.optimum import MIN_REL_ERROR, optimum_interval
from governor.models.power import fit_power_model
from governor.models.time import fit_time_model
from governor.profiles.schema import check_document

REPLAY = Path(__file__).resolve().parents[1] / "data" / "replay"


def _interval_for(clocks, noise_rel, seed=0, probes=None):
    """Fit on synthetic ridge-point power and roofline time with relative Gaussian noise."""
    f = np.asarray(probes if probes is not None else clocks[:: max(1, len(clocks) // 6)], float)
    rng = np.random.default_rng(seed)
    p = formulas.power_w(f, 20.0, 0.05, 900.0, 0.0015) * (
        1 + noise_rel * rng.standard_normal(len(f))
    )
    t = formulas.time_s(f, 0.002, 5.0, 2.0) * (1 + noise_rel * rng.standard_normal(len(f)))
    pm, tm = fit_power_model(f, p), fit_time_model(f, t)
    return optimum_interval(clocks, f, p, t, pm, tm), pm, tm


def _true_optimum(clocks):
    c = np.asarray(clocks, float)
    e = formulas.power_w(c, 20.0, 0.05, 900.0, 0.0015) * formulas.time_s(c, 0.002, 5.0, 2.0)
    return float(c[int(np.argmin(e))])


CLOCKS = list(np.arange(300.0, 1501.0, 25.0))


def test_noise_free_points_give_a_narrow_interval_around_the_true_optimum():
    iv, _, _ = _interval_for(CLOCKS, 0.0)
    truth = _true_optimum(CLOCKS)
    assert iv.low_mhz <= truth <= iv.high_mhz
    assert iv.held_out_rel_error < 0.01
    # the floor on the error sets the band: z(0.9)·√2·MIN_REL_ERROR
    assert iv.band_rel == pytest.approx(1.2815515655 * 2**0.5 * MIN_REL_ERROR, rel=1e-6)
    assert iv.high_mhz - iv.low_mhz <= 300.0


def test_noise_widens_the_interval_and_it_still_holds_the_truth():
    truth = _true_optimum(CLOCKS)
    quiet = [_interval_for(CLOCKS, 0.002, seed)[0] for seed in range(5)]
    noisy = [_interval_for(CLOCKS, 0.015, seed)[0] for seed in range(5)]
    width = lambda ivs: np.mean([iv.high_mhz - iv.low_mhz for iv in ivs])  # noqa: E731
    assert width(noisy) > 1.5 * width(quiet)
    assert np.mean([iv.band_rel for iv in noisy]) > 3 * np.mean([iv.band_rel for iv in quiet])
    assert sum(iv.low_mhz <= truth <= iv.high_mhz for iv in quiet + noisy) >= 8


def test_the_chosen_clock_is_always_inside():
    f = np.array([300.0, 600.0, 900.0, 1200.0, 1500.0])
    p = formulas.power_w(f, 20.0, 0.05, 900.0, 0.0015)
    t = formulas.time_s(f, 0.002, 5.0, 2.0)
    pm, tm = fit_power_model(f, p), fit_time_model(f, t)
    iv = optimum_interval(CLOCKS, f, p, t, pm, tm, chosen_mhz=1500.0)
    assert iv.high_mhz == 1500.0
    assert iv.low_mhz < 1500.0


def test_an_outlier_probe_raises_the_held_out_error():
    f = np.arange(300.0, 1501.0, 150.0)
    p = formulas.power_w(f, 20.0, 0.05, 900.0, 0.0015)
    t = formulas.time_s(f, 0.002, 5.0, 2.0)
    clean = optimum_interval(CLOCKS, f, p, t, fit_power_model(f, p), fit_time_model(f, t))
    p2 = p.copy()
    p2[2] *= 1.04
    dirty = optimum_interval(CLOCKS, f, p2, t, fit_power_model(f, p2), fit_time_model(f, t))
    assert dirty.held_out_rel_error > clean.held_out_rel_error + 0.01
    assert dirty.high_mhz - dirty.low_mhz > clean.high_mhz - clean.low_mhz


@pytest.mark.parametrize("name", ["agx-orin", "a100-pcie", "nano", "titan-x"])
def test_interval_holds_the_simulators_true_optimum(name):
    board = load_catalog()[name]
    hits = 0
    for seed in range(3):
        with governor.open_device(f"sim:{name}?seed={seed}") as dev:
            res = calibrate(DeviceProber(dev, make_load(dev, "builtin")))
            truth = {
                c: board.steady_energy_per_unit_j(c, board.workloads["compute"])
                for c in dev.supported_clocks_mhz()
            }
        best = min(truth, key=truth.get)
        iv = res.optimum_interval
        hits += iv.low_mhz <= best <= iv.high_mhz
        assert iv.low_mhz <= res.ppw_optimal_clock_mhz <= iv.high_mhz
        # an interval, not the whole table
        assert iv.high_mhz - iv.low_mhz < 0.6 * (max(truth) - min(truth))
    assert hits >= 2


def test_interval_holds_the_best_measured_clock_on_most_real_sweeps():
    hits = total = 0
    for path in sorted(REPLAY.glob("*.csv")):
        with governor.open_device(f"replay:{path}") as dev:
            res = calibrate(ReplayProber(dev))
            rows = {c: dev.probe(c) for c in dev.supported_clocks_mhz()}
        if res.optimum_interval is None:
            continue
        best = min(rows, key=lambda c: rows[c]["power_w"] * rows[c]["time_per_unit_s"])
        hits += res.optimum_interval.low_mhz <= best <= res.optimum_interval.high_mhz
        total += 1
    assert total >= 20
    assert hits / total >= 0.8, f"{hits}/{total}"


def test_best_probe_results_have_no_interval(tmp_path):
    # a sweep whose time explodes at low clocks and whose power jumps: no model explains it
    path = tmp_path / "wild.csv"
    rows = [(300, 50, 9.0), (500, 40, 1.0), (700, 95, 3.0), (900, 60, 0.5), (1100, 200, 0.9)]
    path.write_text("clock_mhz,power_w,time_s\n" + "".join(f"{c},{p},{t}\n" for c, p, t in rows))
    with governor.open_device(f"replay:{path}") as dev:
        res = calibrate(ReplayProber(dev), max_probes=5)
    assert res.method == "best-probe"
    assert res.optimum_interval is None


def test_json_and_profile_carry_the_interval(capsys):
    code, out, err = run_cli(capsys, "calibrate", "--device", "sim:nano", "--json")
    assert code == 0, err
    doc = json.loads(out)
    iv = doc["optimum_interval"]
    assert iv["low_mhz"] <= doc["ppw_optimal_clock_mhz"] <= iv["high_mhz"]
    assert iv["level"] == 0.9
    lo, hi = doc["ridge_interval_mhz"]
    assert lo <= doc["ridge_clock_mhz"] <= hi
    profile = json.loads(Path(doc["profile_path"]).read_text())
    assert profile["workloads"]["builtin"]["optimum_interval"] == iv
    check_document(profile, "nano.json")
    profile["workloads"]["builtin"]["optimum_interval"]["low_mhz"] = iv["high_mhz"] + 1
    with pytest.raises(ProfileError, match="optimum_interval"):
        check_document(profile, "nano.json")
