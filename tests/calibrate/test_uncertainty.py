"""The ridge interval is honest: on simulated boards with a known ridge, a 90 % interval
holds the truth about 90 % of the time (held-out truth: the simulator's voltage curve)."""

from __future__ import annotations

import numpy as np

from governor.devices.sim.catalog import load_catalog
from governor.models.power import RIDGE_INTERVAL_LEVEL, fit_power_model


def ridge_coverage(seeds=range(4), noise_rel=0.01):
    """(hits, trials): 10 clocks spread over each catalog board's table, the compute load's
    steady power with Gaussian measurement noise, the 90 % interval against the true ridge."""
    hits = trials = 0
    for board in load_catalog().values():
        work = board.workloads["compute"]
        clocks = np.array(board.clocks_mhz)
        f = clocks[np.unique(np.round(np.linspace(0, len(clocks) - 1, 10)).astype(int))]
        truth = (work.voltage or board.voltage).ridge_mhz
        clean = np.array([board.steady_gpu_power_w(c, work) for c in f])
        for seed in seeds:
            noisy = clean * (1 + noise_rel * np.random.default_rng(seed).standard_normal(len(f)))
            fit = fit_power_model(f, noisy, capped=[False] * len(f))
            lo, hi = fit.ridge_interval_mhz
            hits += lo <= truth <= hi
            trials += 1
    return hits, trials


def test_ninety_percent_ridge_interval_covers_about_ninety_percent():
    hits, trials = ridge_coverage()
    assert RIDGE_INTERVAL_LEVEL == 0.9
    assert trials >= 60
    assert 0.8 <= hits / trials <= 0.98, f"coverage {hits}/{trials}"


def test_interval_holds_the_fit_and_is_reported_as_an_equivalent_sd():
    f = np.arange(300.0, 1501.0, 120.0)
    v = 1 + 0.001 * np.maximum(0, f - 1000)
    p = (30 + 0.1 * f * v * v) * (1 + 0.01 * np.random.default_rng(1).standard_normal(len(f)))
    fit = fit_power_model(f, p)
    lo, hi = fit.ridge_interval_mhz
    assert lo <= fit.ridge_clock_mhz <= hi
    assert abs(fit.uncertainty["ridge_clock_mhz"] * 2 * 1.645 - (hi - lo)) < 1e-6
    doc = fit.to_dict()
    assert doc["ridge_interval_mhz"] == [lo, hi] and doc["interval_level"] == 0.9
