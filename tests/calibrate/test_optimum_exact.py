"""The optimum interval's rules, on probes made from the model's own forms in the test
(governor/models/optimum.py): which probes are held out, and the band they give."""

from __future__ import annotations

import dataclasses
import math
from statistics import NormalDist

import numpy as np
import pytest

from governor.models import formulas
from governor.models.optimum import (
    MIN_REL_ERROR,
    OptimumInterval,
    _held_out_errors,
    optimum_interval,
)
from governor.models.power import fit_power_model
from governor.models.time import fit_time_model

CLOCKS = np.array([500.0, 700.0, 900.0, 1100.0, 1300.0, 1500.0])


def probes(noise=None):
    p = formulas.power_w(CLOCKS, 20.0, 0.03, 1100.0, 0.0015)
    t = 0.01 + 12.0 / CLOCKS
    if noise is not None:
        p = p * (1.0 + np.asarray(noise))
    return p, t


def test_only_the_interior_probes_are_held_out():
    p, t = probes()
    errs = _held_out_errors(CLOCKS, p, t, np.zeros(6, dtype=bool), (1.0, 0.0))
    assert len(errs) == 4  # not the lowest nor the highest clock: no extrapolation
    # away from the ridge a left-out probe is predicted exactly; at the kink it may not be
    assert sorted(abs(e) for e in errs)[1] < 1e-3


def test_a_capped_probe_is_not_held_out():
    clocks = np.arange(500.0, 2000.0, 200.0)  # 500 .. 1900
    p = np.minimum(formulas.power_w(clocks, 20.0, 0.03, 1100.0, 0.0015), 150.0)
    t = 0.01 + 12.0 / clocks
    capped = p >= 150.0  # 1700 and 1900 MHz (204 W and 267 W uncapped)
    assert list(capped) == [False] * 6 + [True] * 2
    errs = _held_out_errors(clocks, p, t, capped, (1.0, 0.0))
    assert len(errs) == 5  # 700 .. 1500: the capped 1700 only tells P_max


def test_noise_free_probes_give_the_floor_band():
    p, t = probes()
    pm, tm = fit_power_model(CLOCKS, p), fit_time_model(CLOCKS, t)
    iv = optimum_interval(CLOCKS, CLOCKS, p, t, pm, tm)
    # band = z(0.9) * sqrt(2) * the 0.2 % floor, as the module documents
    assert iv.band_rel == pytest.approx(NormalDist().inv_cdf(0.9) * math.sqrt(2) * MIN_REL_ERROR)
    energy = formulas.power_w(CLOCKS, 20.0, 0.03, 1100.0, 0.0015) * (0.01 + 12.0 / CLOCKS)
    best = float(energy.min())
    inside = CLOCKS[energy <= best * (1 + iv.band_rel * 1.05)]
    assert iv.low_mhz <= inside.min() and iv.high_mhz >= inside.max()
    assert iv.low_mhz >= CLOCKS[energy <= best * (1 + iv.band_rel * 0.95)].min() - 1e-9


def test_the_chosen_clock_is_always_inside():
    p, t = probes()
    pm, tm = fit_power_model(CLOCKS, p), fit_time_model(CLOCKS, t)
    iv = optimum_interval(CLOCKS, CLOCKS, p, t, pm, tm, chosen_mhz=1500.0)
    assert iv.high_mhz == 1500.0


def test_the_interval_is_a_value():
    with pytest.raises(dataclasses.FrozenInstanceError):
        OptimumInterval(1.0, 2.0, 0.01, 0.02).low_mhz = 5.0  # type: ignore[misc]
