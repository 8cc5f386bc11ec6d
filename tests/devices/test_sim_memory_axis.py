"""The simulated Jetsons' memory clock axis: the default EMC rate changes nothing, a lower
one costs a memory-bound load time and saves the board power, and the CLI pins it."""

from __future__ import annotations

import json

import pytest
from cli_helpers import run_cli

import governor
from governor.devices.sim.catalog import get_board, load_catalog

JETSONS = [n for n, b in load_catalog().items() if b.kind == "jetson"]


@pytest.mark.parametrize("name", JETSONS)
def test_every_jetson_has_an_emc_table_with_nothing_added_at_its_default(name):
    board = get_board(name)
    assert len(board.mem_clocks_mhz) > 1 and board.default_mem_clock_mhz == board.mem_clocks_mhz[-1]
    memory = board.workloads["memory"]
    for f in board.clocks_mhz:
        assert board.mem_background_w(board.default_mem_clock_mhz) == 0.0
        assert memory.time_per_unit_s(f, board.default_mem_clock_mhz) == memory.time_per_unit_s(f)
        for load in (None, memory, board.workloads["compute"]):
            assert board.gpu_power_w(
                f, 40.0, load, board.default_mem_clock_mhz
            ) == board.gpu_power_w(f, 40.0, load, None)


def test_a_lower_emc_rate_slows_memory_and_saves_board_power():
    board = get_board("agx-orin")
    memory, compute = board.workloads["memory"], board.workloads["compute"]
    low, top = board.mem_clocks_mhz[0], board.mem_clocks_mhz[-1]
    assert memory.time_per_unit_s(918.0, low) > 5 * memory.time_per_unit_s(918.0, top)
    assert compute.time_per_unit_s(918.0, low) == compute.time_per_unit_s(918.0, top)
    for load in (compute, memory, None):
        assert board.board_power_w(board.gpu_power_w(918.0, 40.0, load, low)) < board.board_power_w(
            board.gpu_power_w(918.0, 40.0, load, top)
        )


def test_the_simulated_device_locks_and_reports_the_emc_rate():
    with governor.open_device("sim:agx-orin") as dev:
        assert dev.supported_mem_clocks_mhz() == (204.0, 665.6, 2133.0, 3199.0)
        assert dev.sample().mem_clock_mhz == 3199.0
        assert dev.lock_mem_clock(600) == 665.6
        assert dev.sample().mem_clock_mhz == 665.6
    assert dev.sample().mem_clock_mhz == 3199.0  # restored on close


def test_simulate_pins_the_memory_clock_and_reports_it(capsys):
    args = ["simulate", "--board", "agx-orin", "--policy", "max", "--trace", "memory"]
    code, out, _ = run_cli(capsys, *args, "--duration-s", "10", "--json")
    assert code == 0
    top = json.loads(out)
    code, out, err = run_cli(capsys, *args, "--duration-s", "10", "--mem-clock", "700", "--json")
    assert code == 0
    low = json.loads(out)
    assert top["mem_clock_mhz"] == 3199.0 and low["mem_clock_mhz"] == 665.6
    assert "snapped to 665.6 MHz" in err and low["board"] == "agx-orin"
    assert low["work_done"] < top["work_done"] and low["board_energy_j"] < top["board_energy_j"]


def test_simulate_refuses_a_memory_clock_on_a_board_with_one(capsys):
    code, _, err = run_cli(capsys, "simulate", "--board", "a100-pcie", "--mem-clock", "1215")
    assert code == 1 and "one memory clock" in err and err.count("\n") == 1


def test_devices_simulated_json_lists_memory_clocks(capsys):
    code, out, _ = run_cli(capsys, "devices", "--simulated", "--json")
    assert code == 0
    rows = {r["uri"]: r for r in json.loads(out)["devices"]}
    assert rows["sim:agx-orin"]["supported_mem_clocks_mhz"] == [204.0, 665.6, 2133.0, 3199.0]
    assert rows["sim:titan-x"]["supported_mem_clocks_mhz"] == [810.0, 3505.0]
    assert rows["sim:a100-pcie"]["supported_mem_clocks_mhz"] == [1215.0]  # one: no knob
