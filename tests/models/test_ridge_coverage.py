"""The ridge interval's likelihood-ratio limit is calibrated: a kink's likelihood ratio has a
heavier tail than F(1, dof), so the nominal F(0.9) limit holds the true ridge in only about 80 %
of fits. These tests fail when that calibration is removed (RIDGE_LR_QUANTILE back at the
interval's level) or overdone."""

from __future__ import annotations

import numpy as np
import pytest
from power_profile_reference import profile_sse_w2
from scipy.stats import f as f_dist

from governor.devices.sim.catalog import load_catalog
from governor.models import power as pw


@pytest.mark.parametrize("seed", [3, 8])
def test_the_interval_reaches_beyond_the_nominal_f_limit(seed):
    # 10 clocks, 1 % relative noise, a kink at 1200 MHz: the interval's ends are where the
    # profile SSE crosses the calibrated limit, which lies above the nominal
    # SSE_min·(1 + F(1, dof; 0.9)/dof) (worked out here from the test's own profile): both
    # ends have a profile SSE above the nominal limit, so the interval is strictly wider than
    # the nominal 90 % one, and still narrower than the probed range
    f = np.linspace(300.0, 1800.0, 10)
    truth = pw.PowerModel(20.0, 0.1, 1200.0, 0.001)
    p = truth.power_w(f) * (1.0 + 0.01 * np.random.default_rng(seed).standard_normal(len(f)))
    m = pw.fit_power_model(f, p)
    lo, hi = m.ridge_interval_mhz
    assert f[0] < lo <= m.ridge_clock_mhz <= hi < f[-1]
    ridges = np.linspace(f[0], f[-1], 301)
    sse_min = min(min(profile_sse_w2(f, p, r) for r in ridges), m.residual_rms_w**2 * len(f))
    dof = len(f) - 4
    nominal = sse_min * (1.0 + f_dist.ppf(pw.RIDGE_INTERVAL_LEVEL, 1, dof) / dof)
    for end in (lo, hi):
        assert profile_sse_w2(f, p, end) > 1.05 * nominal


def _coverage(seeds, quantile, monkeypatch):
    """Share of fits whose interval holds the simulator's true ridge: 10 clocks over each
    catalog board's table, compute load, 1 % relative noise drawn per (board, seed); fits
    whose interval spans the whole probed range are left out (they hold it trivially)."""
    monkeypatch.setattr(pw, "RIDGE_LR_QUANTILE", quantile)
    hits = trials = 0
    for index, (_, board) in enumerate(sorted(load_catalog().items())):
        work = board.workloads["compute"]
        table = np.array(board.clocks_mhz)
        f = table[np.unique(np.round(np.linspace(0, len(table) - 1, 10)).astype(int))]
        if len(f) < 6:
            continue  # too few clocks in the table to place a kink with noise
        ridge = (work.voltage or board.voltage).ridge_mhz
        clean = np.array([board.steady_gpu_power_w(c, work) for c in f])
        for seed in seeds:
            z = np.random.default_rng([index, seed, 7]).standard_normal(len(f))
            lo, hi = pw.fit_power_model(
                f, clean * (1 + 0.01 * z), capped=[False] * len(f)
            ).ridge_interval_mhz
            if (lo, hi) == (f[0], f[-1]):
                continue
            hits += lo <= ridge <= hi
            trials += 1
    return hits / trials, trials


def test_the_calibrated_interval_holds_the_true_ridge_about_ninety_percent_held_out(monkeypatch):
    # seeds 5000.. were used neither to choose RIDGE_LR_QUANTILE (1000..1129) nor for the
    # bench's held-out lines (2000.., 3000..): the interval holds the truth in 84-96 % of
    # 96 fits (90 % ± 3 % standard error). With the nominal F(0.9) limit it held it in
    # fewer than 84 % of these fits (docs/calibration.md, Ridge interval coverage).
    share, trials = _coverage(range(5000, 5006), pw.RIDGE_LR_QUANTILE, monkeypatch)
    assert trials >= 90
    assert 0.84 <= share <= 0.96, f"coverage {share:.3f} of {trials}"
