"""DOACROSS time model: wavefront geometry, rounds, constraints, calibration, search."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governor.errors import InvalidRequestError
from governor.tuning.analytic import catalog
from governor.tuning.analytic.calibrate import SyntheticDoacrossGpu, calibrate_doacross
from governor.tuning.analytic.doacross import (
    DoacrossConstants,
    default_constants,
    doacross_search,
    enumerate_layouts,
    occupancy_blocks,
    rounds_time_s,
    tile_features,
    total_time_s,
    wavefront_profile,
)
from governor.tuning.analytic.energy import PowerModel

C1060 = catalog.doacross_gpu("c1060")


def _brute_tiles(m, size, steps):
    """Every non-empty tile of the skewed domain, by walking every point."""
    tiles = set()
    for t in range(steps):
        for point in np.ndindex(*size):
            tiles.add((t // m[0],) + tuple((p + t) // mk for p, mk in zip(point, m[1:])))
    return tiles


@pytest.mark.parametrize(
    "m,size,steps",
    [((3, 4), (17,), 11), ((2, 5), (9,), 7), ((2, 3, 4), (5, 7), 5), ((1, 2, 2, 3), (3, 4, 3), 3)],
)
def test_wavefront_profile_matches_brute_force(m, size, steps):
    every, full = wavefront_profile(np.array([m]), size, steps)
    tiles = _brute_tiles(m, size, steps)
    ref = np.zeros(every.shape[1], dtype=int)
    for tile in tiles:
        ref[sum(tile)] += 1
    assert np.array_equal(every[0], ref)
    assert np.all(full[0] <= every[0]) and np.all(full[0] >= 0)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 3000), b=st.integers(1, 8), p=st.integers(1, 60))
def test_rounds_sum_equals_ceil_identity(n, b, p):
    assert float(rounds_time_s(n, b, p, 1.0)) == -(-n // p)


def test_tile_features_closed_form_equals_profile():
    m2 = np.array([[5, 70], [64, 64], [1, 100], [33, 31]])
    f = tile_features(m2)
    for row, sw in zip(m2, f["sum_warps"]):
        h = np.array(
            [sum(1 for i in range(row[0]) if 0 <= e - i < row[1]) for e in range(row.sum() - 1)]
        )
        assert sw == np.sum(-(-h // 32))
    assert list(f["iterations"]) == [350, 4096, 100, 1023]
    assert list(f["mem_words"]) == [2 * (5 + 70), 256, 202, 128]


@pytest.mark.parametrize("name,size,steps", [("sor1d", (3000,), 2000), ("sor2d", (96, 96), 64)])
def test_search_respects_constraints(name, size, steps):
    nest = catalog.nest(name)
    res = doacross_search(nest, C1060, size, steps, caps=[1300] * 2 if name == "sor1d" else None)
    m = np.array([list(res.tiles.values())])
    f = tile_features(m)
    assert f["iterations"][0] / f["mem_words"][0] >= nest.reuse_threshold
    assert f["shared_words"][0] * 4 <= C1060.shared_per_sm_bytes
    assert res.threads % 32 == 0 and res.threads <= f["max_width"][0]
    assert res.blocks_per_sm == occupancy_blocks(C1060, res.threads, f["shared_words"])[0] >= 1
    assert res.grid == res.blocks_per_sm * C1060.n_sm
    assert res.layouts_searched > 1000
    # the argmin: the model's own time of the chosen layout, and no runner-up below it
    t = total_time_s(default_constants(C1060), C1060, m, size, steps, res.threads)
    assert float(t[0]) == pytest.approx(res.time_s)
    assert all(r["time_s"] >= res.time_s for r in res.runners_up)


def test_search_beats_random_layouts():
    nest = catalog.nest("sor3d")
    res = doacross_search(nest, C1060, (24, 24, 24), 24)
    lay = enumerate_layouts(nest, C1060, (24, 24, 24), 24)
    rng = np.random.default_rng(0)
    pick = lay.tiles[rng.choice(len(lay), 200)]
    t = total_time_s(default_constants(C1060), C1060, pick, (24, 24, 24), 24, 64)
    assert res.time_s <= t.min()


def test_least_squares_recovers_the_six_constants():
    nest = catalog.nest("sor2d")
    truth = default_constants(C1060)
    sim = SyntheticDoacrossGpu(C1060, truth, noise=0.01, seed=7)
    fit = calibrate_doacross(sim, C1060, nest, thread_counts=[32, 128, 256, 512])
    assert fit.source == "calibrated"
    assert fit.sigma_ker_s == pytest.approx(truth.sigma_ker_s, rel=0.03)
    for grid, value in fit.sigma_blk_s.items():
        assert value == pytest.approx(float(truth.sigma_blk_at(grid)), rel=0.05)
    for threads, org in fit.per_threads.items():
        ref = truth.per_threads[threads]
        assert org.sigma_thd_s == pytest.approx(ref.sigma_thd_s, rel=0.05)
        assert org.alpha_s == pytest.approx(ref.alpha_s, rel=0.10)
        assert org.beta_s == pytest.approx(ref.beta_s, rel=0.15)
        assert org.gamma_s == pytest.approx(ref.gamma_s, rel=0.10)
        assert min(org.alpha_s, org.beta_s, org.gamma_s, org.sigma_thd_s) >= 0


def test_calibrated_constants_drive_the_search_and_round_trip():
    nest = catalog.nest("sor3d")
    truth = default_constants(C1060)
    fit = calibrate_doacross(SyntheticDoacrossGpu(C1060, truth, 0.0, 1), C1060, nest, [64, 128])
    again = DoacrossConstants.from_dict(fit.to_dict())
    assert again == fit
    res = doacross_search(nest, C1060, (16, 16, 16), 16, constants=fit)
    assert res.threads in (64, 128) and res.constants_source == "calibrated"


def test_energy_objective_picks_a_clock():
    pm = PowerModel(30.0, 0.08, 1100.0, 0.002, 200.0, (600, 900, 1100, 1300))
    res = doacross_search(
        catalog.nest("sor2d"), C1060, (64, 64), 32, objective="energy", power_model=pm
    )
    assert res.clock_mhz in pm.supported_clocks_mhz
    assert res.energy_j == pytest.approx(res.time_s * float(pm.power_w(res.clock_mhz)))


def test_bad_requests():
    with pytest.raises(InvalidRequestError, match="needs 2 space sizes"):
        doacross_search(catalog.nest("sor2d"), C1060, (64,), 32)
    with pytest.raises(InvalidRequestError, match="reuse"):
        doacross_search(catalog.nest("sor1d"), C1060, (100,), 100)  # tiles too small for 300
    with pytest.raises(InvalidRequestError, match="governor calibrate"):
        doacross_search(catalog.nest("sor3d"), C1060, (8, 8, 8), 8, objective="energy")
    with pytest.raises(InvalidRequestError, match=">= 0"):
        DoacrossConstants({32: default_constants(C1060).per_threads[32]}, {30: -1.0}, 1e-6)
