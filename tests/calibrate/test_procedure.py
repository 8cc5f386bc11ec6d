"""The calibration procedure on replay files and on every simulated board."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import numpy as np
import pytest

import governor
from governor.calibrate.loads import CommandLoad, make_load
from governor.calibrate.procedure import (
    DeviceProber,
    ReplayProber,
    calibrate,
    choose_initial_clocks,
)
from governor.devices.sim.catalog import load_catalog
from governor.errors import CalibrationError, InvalidRequestError, UnsupportedError
from governor.measure.window import measure_window

REPLAY = Path(__file__).resolve().parents[1] / "data" / "replay"
KT = Path(__file__).resolve().parents[1] / "data" / "kernel_tuner"


ORIGINAL = ("a100_pcie", "rtxa4000", "titanx_")  # the sweeps the models were first made on


@functools.lru_cache(maxsize=None)
def _replay_loss(path: Path):
    """(energy above the best measured clock, probes, method) of a 6-probe calibration."""
    dev = governor.open_device(f"replay:{path}")
    result = calibrate(ReplayProber(dev), max_probes=6)
    energy = dict(zip(dev.sweep.requested_mhz, dev.sweep.energy_j()))
    assert len(result.probes) == dev.probe_count
    loss = energy[result.ppw_optimal_clock_mhz] / min(energy.values()) - 1
    return loss, dev.probe_count, result.method


@pytest.mark.parametrize(
    "path", sorted(REPLAY.glob("*.csv")) + sorted(KT.glob("synthetic_*.json")), ids=lambda p: p.stem
)
def test_replay_calibration_finds_a_near_optimal_clock_in_six_probes(path):
    """Every real sweep gets an answer in at most 6 probes: within 3 % of the best measured
    clock on the sweeps the models were made on, within 5 % on the ones they never saw (the
    A40 BLOOM forward sweep, flat and noisy, is the worst at +4.3 %; docs/calibration.md)."""
    loss, probes, _method = _replay_loss(path)
    assert probes <= 6
    assert loss <= (0.03 if path.stem.startswith(ORIGINAL) or path.suffix == ".json" else 0.05)


def test_replay_calibration_on_all_real_sweeps_in_aggregate():
    """Issue 37's targets as a floor: mean within 0.3 %, worst within 2 % (+0.29 % and
    +1.68 % measured; docs/benchmarks/calibration.md)."""
    losses = [_replay_loss(p)[0] for p in sorted(REPLAY.glob("*.csv"))]
    assert len(losses) == 28
    assert max(losses) <= 0.02
    assert float(np.mean(losses)) <= 0.003


@pytest.mark.parametrize("name", sorted(load_catalog()))
def test_every_simulated_board_calibrates_within_one_percent(name):
    dev = governor.open_device(f"sim:{name}")
    board = dev.board
    result = calibrate(DeviceProber(dev, make_load(dev, "builtin")), max_probes=6)
    truth = {
        c: board.steady_energy_per_unit_j(c, board.workloads["compute"])
        for c in dev.supported_clocks_mhz()
    }
    assert truth[result.ppw_optimal_clock_mhz] <= 1.01 * min(truth.values())
    assert result.device_time_s <= 30.0
    assert not dev.changed  # the prober restored the clocks


def test_memory_bound_load_gets_a_lower_clock_than_compute():
    dev = governor.open_device("sim:a100-pcie")
    comp = calibrate(DeviceProber(dev, make_load(dev, "builtin")))
    mem = calibrate(DeviceProber(dev, make_load(dev, "memory")))
    assert mem.ppw_optimal_clock_mhz < comp.ppw_optimal_clock_mhz
    board = dev.board
    truth = {
        c: board.steady_energy_per_unit_j(c, board.workloads["memory"])
        for c in dev.supported_clocks_mhz()
    }
    assert truth[mem.ppw_optimal_clock_mhz] <= 1.01 * min(truth.values())


def test_power_capped_probes_are_flagged_and_fit_p_max():
    dev = governor.open_device("sim:rtx-a4000")
    result = calibrate(DeviceProber(dev, make_load(dev, "builtin")))
    capped = [p for p in result.probes if p.throttled]
    assert capped and all("sw_power_cap" in p.throttle_reasons for p in capped)
    assert all(p.clock_mhz < p.requested_mhz for p in capped)
    assert result.power_model.p_max_w == pytest.approx(140.0, rel=0.03)
    assert any("power limit" in n for n in result.notes)


def test_initial_clocks_are_spread_and_distinct():
    clocks = (306.0, 408.0, 510.0, 624.75)
    assert choose_initial_clocks(clocks) == [306.0, 408.0, 510.0, 624.75]
    wide = tuple(210.0 + 15 * i for i in range(81))
    chosen = choose_initial_clocks(wide)
    assert chosen[0] == 210 and chosen[-1] == 1410 and len(set(chosen)) == 4


def test_probe_budget_and_tiny_tables_are_validated():
    dev = governor.open_device("sim:agx-orin")
    with pytest.raises(InvalidRequestError, match="at least 4"):
        calibrate(DeviceProber(dev, make_load(dev, "builtin")), max_probes=3)


def test_energy_from_counter_and_from_integrated_power_agree_with_the_truth():
    for uri, method in (("sim:a100-pcie", "energy counter"), ("sim:nano", "integrated power")):
        with governor.open_device(uri + "?noise=0") as dev:
            dev.run_workload("compute")
            dev.lock_gpu_clocks(dev.supported_clocks_mhz()[5])
            dev.clock.sleep(60)
            e0 = dev.true_energy_j()
            window = measure_window(dev, 3.0, work_done=dev.work_done)
            true = dev.true_energy_j() - e0
            assert window.method == method
            assert window.energy_j == pytest.approx(true, rel=0.01)
            assert window.time_per_unit_s == pytest.approx(
                dev.workload.time_per_unit_s(
                    dev.supported_clocks_mhz()[5], dev.board.default_mem_clock_mhz
                ),
                rel=0.01,
            )


def test_flaky_sensors_are_tolerated_and_counted():
    dev = governor.open_device("sim:a100-pcie?fail_rate=0.2&seed=5")
    result = calibrate(DeviceProber(dev, make_load(dev, "builtin")))
    assert result.ppw_optimal_clock_mhz > 0


def test_command_load_counts_runs_and_reports_failures():
    load = CommandLoad(f'{sys.executable} -c "import time; time.sleep(0.05)"')
    import time

    with load:
        time.sleep(0.6)
        done = load.work_done()
    assert 3 <= done <= 12
    bad = CommandLoad(f'{sys.executable} -c "import sys; sys.exit(3)"')
    with bad:
        time.sleep(0.3)
        with pytest.raises(CalibrationError, match="exited with 3"):
            bad.work_done()
    missing = CommandLoad("/no/such/program")
    with missing:
        time.sleep(0.1)
        with pytest.raises(CalibrationError, match="cannot run"):
            missing.check()
    with pytest.raises(InvalidRequestError):
        CommandLoad("   ")


def test_builtin_load_needs_a_known_kind_of_device():
    dev = governor.open_device(f"replay:{REPLAY / 'a100_pcie_fp32_10pt.csv'}")
    with pytest.raises(UnsupportedError, match="no built-in load"):
        make_load(dev, "builtin")
