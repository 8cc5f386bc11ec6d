"""Calibration in two dimensions (governor/calibrate/pairs.py and ``governor calibrate`` on
simulated boards): the pair search against brute force over known tables, the JSON keys,
and a board with one memory clock unchanged."""

from __future__ import annotations

import json

import pytest
from cli_helpers import run_cli

from governor.calibrate.pairs import MAX_PAIR_PROBES, search_pairs
from governor.devices.sim.catalog import get_board
from governor.models.memory import fit_pairs, mem_time_s, pair_time_s


def _bowl(f0: float, m0: float):
    """A convex energy table with its minimum at (f0, m0); records every probe."""
    seen = []

    def probe(f: float, m: float):
        seen.append((f, m))
        return 1.0 + ((f - f0) / 500.0) ** 2 + ((m - m0) / 2000.0) ** 2, 1.0

    return probe, seen


@pytest.mark.parametrize("m0", [204.0, 665.6, 2133.0, 3199.0])
def test_the_search_finds_a_bowls_bottom_within_the_budget(m0):
    clocks = [306.0 + 102.0 * i for i in range(10)]
    probe, seen = _bowl(510.0, m0)
    pair = search_pairs(probe, clocks, [204.0, 665.6, 2133.0, 3199.0], 714.0, 3199.0)
    assert (pair.clock_mhz, pair.mem_clock_mhz) == (510.0, m0)
    assert len(seen) == len(set(seen)) == len(pair.probes) <= MAX_PAIR_PROBES


def test_a_long_memory_table_is_searched_not_swept():
    mems = [100.0 * (i + 1) for i in range(12)]
    probe, seen = _bowl(600.0, 300.0)
    pair = search_pairs(probe, [500.0, 600.0, 700.0], mems, 600.0, 1200.0, max_probes=10)
    assert pair.mem_clock_mhz == 300.0 and len(seen) <= 10


def test_a_tie_keeps_the_default_memory_clock():
    pair = search_pairs(lambda f, m: (1.0, 1.0), [500.0, 600.0], [810.0, 3505.0], 600.0, 3505.0)
    assert pair.mem_clock_mhz == 3505.0 and pair.saving_rel == 0.0


def test_the_memory_time_is_latency_plus_bandwidth():
    assert mem_time_s(0.05, 3199.0, 3199.0, 0.15) == 0.05  # exact at the top rate
    assert mem_time_s(0.05, 1599.5, 3199.0, 0.15) == pytest.approx(0.05 * (0.15 + 0.85 * 2))
    assert pair_time_s(1000.0, 3199.0, 10.0, 0.0, 3199.0, 0.15, 1.0) == pytest.approx(0.01)


def test_fit_pairs_recovers_a_known_load():
    import itertools

    from governor.models.memory import PairModel

    true = PairModel(20.0, 0.01, 0.2, 3.0, 3505.0, 30.0, 0.05, 900.0, 5e-4, 40.0, 0.3, 10.0)
    grid = list(itertools.product([600.0, 700.0, 800.0, 900.0, 1000.0, 1100.0], [810.0, 3505.0]))
    model = fit_pairs(
        [f for f, _ in grid],
        [m for _, m in grid],
        [true.power_w(f, m) for f, m in grid],
        [true.time_s(f, m) for f, m in grid],
    )
    for f, m in grid:
        assert model.time_s(f, m) == pytest.approx(true.time_s(f, m), rel=0.01)
        assert model.energy_j(f, m) == pytest.approx(true.energy_j(f, m), rel=0.03)


def test_calibrate_json_names_the_pair_on_a_board_with_an_emc_axis(capsys):
    code, out, err = run_cli(capsys, "calibrate", "--device", "sim:orin-nano", "--json")
    assert code == 0, err
    doc = json.loads(out)
    board = get_board("orin-nano")
    assert doc["supported_mem_clocks_mhz"] == list(board.mem_clocks_mhz)
    assert doc["ppw_optimal_mem_clock_mhz"] in board.mem_clocks_mhz
    assert doc["ppw_optimal_clock_mhz"] in board.clocks_mhz
    search = doc["pair_search"]
    assert search["power_scope"] == "board"  # the board's input rail, not the GPU's
    assert 0 < len(search["probes"]) <= MAX_PAIR_PROBES
    assert (doc["ppw_optimal_clock_mhz"], doc["ppw_optimal_mem_clock_mhz"]) == (
        search["clock_mhz"],
        search["mem_clock_mhz"],
    )
    best = min(p["power_w"] * p["time_s"] for p in search["probes"])
    assert search["energy_per_unit_j"] == best
    # the profile file keeps the pair beside the core calibration the policies use
    saved = json.loads(open(doc["profile_path"]).read())
    (kept,) = saved["tuning"]["ppw-pair"].values()
    assert (kept["clock_mhz"], kept["mem_clock_mhz"]) == (
        search["clock_mhz"],
        search["mem_clock_mhz"],
    )
    assert saved["ppw_optimal_clock_mhz"] == doc["ppw_optimal_clock_at_default_mem_mhz"]


def test_calibrate_on_a_board_with_one_memory_clock_has_no_pair(capsys):
    code, out, err = run_cli(capsys, "calibrate", "--device", "sim:a100-pcie", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["ppw_optimal_mem_clock_mhz"] is None and doc["pair_search"] is None
    assert doc["ppw_optimal_clock_mhz"] == doc["ppw_optimal_clock_at_default_mem_mhz"]
