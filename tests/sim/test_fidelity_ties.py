"""scripts/bench_sim_fidelity.py (b): the clocks tied with the measured best within the sweep's
own noise, which tell a flat optimum's miss from a model error."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from governor.devices.replay_files import read_sweep

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location(
        "bench_sim_fidelity_under_test", ROOT / "scripts" / "bench_sim_fidelity.py"
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop(spec.name, None)


def _sweep(tmp_path, noise_rel):
    """Energy convex in the clock, lowest at 1000 MHz, 0.1 % higher one step either side and
    2.5 % at the ends, times ±``noise_rel`` alternating row to row (time 1 s: energy is the
    power)."""
    lines = ["clock_mhz,power_w,time_s"]
    for n, f in enumerate(range(500, 1600, 100)):
        smooth = 100.0 * (1.0 + 0.001 * ((f - 1000) / 100) ** 2)
        lines.append(f"{f},{smooth * (1 + noise_rel * (-1) ** n):.6f},1.0")
    path = tmp_path / f"sweep_{noise_rel}.csv"
    path.write_text("\n".join(lines) + "\n")
    return read_sweep(path)


def test_a_noisy_sweep_ties_its_flat_optimum_and_not_its_far_clocks(bench, tmp_path):
    def tied(sweep):
        band = bench.tie_band_pct(sweep)
        energy = sweep.energy_j()
        return band, [
            f for f, e in zip(sweep.clock_mhz, energy) if e <= min(energy) * (1 + band / 100)
        ]

    clean_band, clean_tied = tied(_sweep(tmp_path, 0.0))
    noisy_band, noisy_tied = tied(_sweep(tmp_path, 0.003))
    assert clean_band < 0.25  # the curvature alone: the line through two neighbours misses by 0.1 %
    assert noisy_band > 4 * clean_band  # ±0.3 % row to row
    assert len(clean_tied) <= 3 and 1000 in clean_tied
    assert len(noisy_tied) >= 3 and 1000 in noisy_tied
    assert 500 not in noisy_tied and 1500 not in noisy_tied  # 2.5 % above: outside the band
