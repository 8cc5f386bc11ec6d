"""Every catalog board opens and reports telemetry in the right units and ranges."""

from __future__ import annotations

import math

import pytest

import governor
from governor.devices.base import SCOPES
from governor.devices.sim.catalog import DEFAULT_BOARD, load_catalog

BOARDS = sorted(load_catalog())
REQUIRED = [
    "nano",
    "tx2",
    "xavier-nx",
    "agx-xavier",
    "orin-nano",
    "orin-nx",
    "agx-orin",
    "a100-pcie",
    "h100-pcie",
    "h100-sxm",
    "v100",
    "t4",
    "rtx-a4000",
    "titan-x",
]
MEASURED = {"a100-pcie", "rtx-a4000", "titan-x"}


def test_catalog_has_the_required_boards_and_the_default():
    assert set(REQUIRED) <= set(BOARDS)
    assert DEFAULT_BOARD in BOARDS


@pytest.mark.parametrize("name", BOARDS)
def test_board_opens_and_reads_sane_telemetry(name):
    with governor.open_device(f"sim:{name}") as dev:
        board = dev.board
        clocks = dev.supported_clocks_mhz()
        assert clocks == tuple(sorted(clocks)) and len(clocks) >= 3
        idle = dev.sample()
        dev.run_workload("compute")
        dev.clock.sleep(5.0)
        busy = dev.sample()
        for s in (idle, busy):
            assert s.power_w is not None and 0 < s.power_w < 1.3 * board.power_limit_w
            assert s.power_scope in SCOPES
            assert all(r.scope in SCOPES and r.power_w >= 0 for r in s.rails)
            assert s.gpu_clock_mhz in board.clocks_mhz
            assert 0 < s.temperature_c < 110
            assert 0 <= s.utilisation_pct <= 100
        assert busy.power_w > idle.power_w
        assert busy.gpu_clock_mhz >= idle.gpu_clock_mhz
        assert busy.t_s == pytest.approx(idle.t_s + 5.0)
        assert "idle" in idle.throttle_reasons and "idle" not in busy.throttle_reasons
        if board.energy_counter:
            assert busy.energy_j > idle.energy_j >= 0
        else:
            assert busy.energy_j is None
        assert dev.identity.model == name and dev.identity.kind == "sim"


@pytest.mark.parametrize("name", BOARDS)
def test_board_says_where_its_numbers_come_from(name):
    board = load_catalog()[name]
    assert board.source
    if name not in MEASURED:
        assert board.inferred, f"{name}: derived boards must list their inferred values"
    assert {"cc", "sms"} <= set(board.facts)


def test_jetson_rails_carry_real_names_and_scopes():
    with governor.open_device("sim:agx-orin") as dev:
        s = dev.sample()
        names = {r.name: r.scope for r in s.rails}
        assert names["VDD_GPU_SOC"] == "gpu+soc" and names["VDD_CPU_CV"] == "cpu+cv"
        assert s.power_scope == "gpu+soc"
        # INA3221 reports integer mV and mA; power is their product
        for r in s.rails:
            assert r.voltage_v * 1000 == pytest.approx(round(r.voltage_v * 1000))
            assert r.current_a * 1000 == pytest.approx(round(r.current_a * 1000))
            assert r.power_w == pytest.approx(r.voltage_v * r.current_a)
    with governor.open_device("sim:nano") as dev:
        s = dev.sample()
        assert s.rail("POM_5V_IN").scope == "board input"
        assert s.power_scope == "gpu" and s.rail("POM_5V_GPU").power_w == s.power_w
        # the input rail sees every domain through the regulators: more than the GPU
        assert s.rail("POM_5V_IN").power_w > s.rail("POM_5V_GPU").power_w


def test_idle_jetson_power_matches_published_idle_figures():
    """Idle module power from tegrastats captures (boards.md): AGX Orin ~6.8 W, Nano ~0.9-1.0 W."""
    with governor.open_device("sim:agx-orin?noise=0") as dev:
        assert sum(
            r.power_w for r in dev.sample().rails if r.name != "VDDQ_VDD2_1V8AO"
        ) == pytest.approx(6.8, rel=0.1)
    with governor.open_device("sim:nano?noise=0") as dev:
        assert dev.sample().rail("POM_5V_IN").power_w == pytest.approx(0.95, rel=0.1)


def test_memory_bound_work_gains_little_from_clock_and_its_optimum_is_lower():
    for name in ("a100-pcie", "agx-orin", "t4"):
        board = load_catalog()[name]
        lo, hi = board.clocks_mhz[len(board.clocks_mhz) // 3], board.clocks_mhz[-1]
        mem, comp = board.workloads["memory"], board.workloads["compute"]
        speedup_mem = mem.time_per_unit_s(lo, board.default_mem_clock_mhz) / mem.time_per_unit_s(
            hi, board.default_mem_clock_mhz
        )
        speedup_comp = comp.time_per_unit_s(lo) / comp.time_per_unit_s(hi)
        assert speedup_mem < 1 + 0.5 * (speedup_comp - 1)

        def argmin(w, board=board):
            return min(board.clocks_mhz, key=lambda f: board.steady_energy_per_unit_j(f, w))

        assert argmin(mem) < argmin(comp)


def test_leakage_makes_hot_boards_draw_more():
    board = load_catalog()["a100-pcie"]
    w = board.workloads["compute"]
    assert board.gpu_power_w(1000, 80.0, w) > board.gpu_power_w(1000, 40.0, w)
    steady = board.steady_gpu_power_w(1000, w)
    # the closed-form fixed point satisfies P = P(T(P))
    assert steady == pytest.approx(
        board.gpu_power_w(1000, board.steady_temperature_c(steady), w), rel=1e-9
    )
    assert math.isfinite(steady)
