"""Kernel configurations per clock: the table, its lookup, and a governor that follows it."""

from __future__ import annotations

import json
import sys

import pytest
from cli_helpers import run_cli

import governor
from governor.errors import ProfileError
from governor.kernels.operating_points import ConfigTable, KernelConfig, load_table, save_table
from governor.runtime import Governor

A = KernelConfig({"i": 16, "j": 240}, (16, 16, 1), 39, 0, kernel="jacobi-2d")
B = KernelConfig({"i": 32, "j": 32}, (32, 8, 1), 39, 0, kernel="jacobi-2d")


def _table(board: str = "a100-sxm") -> ConfigTable:
    return ConfigTable(
        "jacobi-2d", board, "double", (210.0, 495.0, 510.0, 1410.0), (A, B), (0, 0, 1, 1)
    )


def test_lookup_is_exact_on_table_clocks_and_takes_the_clock_below_otherwise():
    t = _table()
    assert t.at(495.0) is A and t.at(510.0) is B
    assert t.at(500.0) is A and t.at(100.0) is A and t.at(5000.0) is B
    assert [(lo, hi) for lo, hi, _ in t.bands()] == [(210.0, 495.0), (510.0, 1410.0)]


def test_round_trip_through_the_profile():
    save_table(_table())
    assert load_table("a100-sxm", "jacobi-2d") == _table()
    assert load_table("a100-sxm", "gemm") is None


@pytest.mark.parametrize(
    "change, needle",
    [
        (lambda d: d.update(index=[0, 0, 2, 1]), "index out of range"),
        (lambda d: d.update(clocks_mhz=[510.0, 210.0, 495.0, 1410.0]), "ascend"),
        (lambda d: d["configs"][0].update(thread_block=[16, 16]), "3 dimensions"),
        (lambda d: d.pop("index"), "index"),
    ],
)
def test_a_damaged_table_is_a_profile_error(change, needle):
    doc = _table().to_dict()
    change(doc)
    with pytest.raises(ProfileError, match=needle):
        ConfigTable.from_dict(doc)


def _capped(gov, cap_w: float, steps: int = 100) -> None:
    gov.set_policy({"policy": "power-cap", "cap_w": cap_w})
    for _ in range(steps):
        gov.step()


def test_the_governor_follows_a_power_cap_across_a_configuration_boundary():
    save_table(_table())
    dev = governor.open_device("sim:a100-sxm")
    dev.run_workload("compute")
    seen = []
    try:
        with Governor(dev, {"policy": "power-cap", "cap_w": 400}, background=False) as gov:
            none, why = gov.kernel_config("gemm")
            assert none is None and "no configuration table for gemm/double" in why
            for _ in range(40):
                gov.step()
            assert gov.kernel_config("jacobi-2d").value == B
            gov.on_kernel_config_change(lambda kernel, config: seen.append((kernel, config)))
            start = gov.kernel_config_generation
            _capped(gov, 100.0)
            clock = gov.applied_clock_mhz
            assert clock is not None and clock < 500.0
            assert gov.kernel_config("jacobi-2d").value == A
            assert gov.kernel_config_generation > start
            assert seen and seen[-1] == ("jacobi-2d", A)
            _capped(gov, 400.0, 200)
            assert gov.applied_clock_mhz >= 510.0
            assert gov.kernel_config("jacobi-2d").value == B and seen[-1] == ("jacobi-2d", B)
    finally:
        dev.stop_workload()


def test_a_failing_callback_does_not_stop_the_governor():
    save_table(_table())
    dev = governor.open_device("sim:a100-sxm")
    dev.run_workload("compute")
    try:
        with Governor(dev, {"policy": "power-cap", "cap_w": 400}, background=False) as gov:
            for _ in range(20):
                gov.step()
            gov.kernel_config("jacobi-2d")
            gov.on_kernel_config_change(lambda kernel, config: 1 / 0)
            _capped(gov, 100.0)
            assert gov.kernel_config("jacobi-2d").value == A
    finally:
        dev.stop_workload()


def test_the_table_command_saves_what_the_governor_reads(capsys):
    pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC not installed (extra nvrtc)")
    code, out, _ = run_cli(
        capsys, "kernels", "table", "jacobi-2d", "--board", "a100-sxm", "--save", "--json"
    )
    doc = json.loads(out)
    assert code == 0 and len(doc["clocks_mhz"]) == len(doc["index"]) > 1
    assert "mem_clocks_mhz" not in doc and "mem_bands" not in doc  # one memory clock: no axis
    table = load_table("a100-sxm", "jacobi-2d")
    assert table is not None and table.to_dict()["configs"] == doc["configs"]
    for band in doc["bands"]:
        assert band["threads_per_block"] <= 1024


def test_ppw_for_a_kernel_runs_its_tables_least_energy_clock(capsys, tmp_path):
    table = ConfigTable(
        "jacobi-2d",
        "a100-sxm",
        "double",
        (210.0, 495.0, 510.0, 1410.0),
        (A, B),
        (0, 0, 1, 1),
        energy_j=(3.0, 2.0, 1.5, 2.5),  # least at 510 MHz, far from the board's 75 % guess
    )
    save_table(table)
    report = tmp_path / "r.json"
    code, _, err = run_cli(
        capsys,
        "run",
        "--device",
        "sim:a100-sxm",
        "--policy",
        "ppw",
        "--kernel",
        "jacobi-2d",
        "--json-out",
        report,
        "--",
        sys.executable,
        "-c",
        "import time; time.sleep(0.3)",
    )
    assert code == 0, err
    assert "PPW clock of jacobi-2d at its tuned configuration" in err and "510 MHz" in err
    assert json.loads(report.read_text())["mean_clock_mhz"] == pytest.approx(510.0)


def test_ppw_for_a_kernel_without_a_table_is_the_boards(capsys):
    code, _, err = run_cli(
        capsys,
        "run",
        "--device",
        "sim:a100-sxm",
        "--policy",
        "ppw",
        "--kernel",
        "gemm",
        "--",
        sys.executable,
        "-c",
        "pass",
    )
    assert code == 0 and "no configuration table for gemm/double on a100-sxm" in err


def test_kernel_goes_with_ppw_only(capsys):
    code, out, err = run_cli(
        capsys,
        "run",
        "--device",
        "sim:a100-sxm",
        "--policy",
        "max",
        "--kernel",
        "gemm",
        "--",
        "true",
    )
    assert code == 2 and "--kernel goes with --policy ppw" in err


@pytest.mark.parametrize(
    "change, needle",
    [
        (lambda d: d.update(index=[0, 0, 2, 1]), "index must give one configuration per clock"),
        (lambda d: d.update(clocks_mhz=[510.0, 210.0, 495.0, 1410.0]), "ascending"),
        (lambda d: d["configs"][1].update(thread_block=[64, 32, 1]), "at most 1024 threads"),
        (lambda d: d["configs"][0]["tile"].update(i=0), "configs[0].tile.i"),
    ],
)
def test_the_profile_schema_checks_a_stored_table(change, needle, tmp_path):
    from governor.profiles.store import read_profile_file, write_profile_file

    doc = _table().to_dict()
    change(doc)
    path = tmp_path / "a100-sxm.json"
    path.write_text(
        json.dumps({"schema_version": 1, "tuning": {"kernel_configs": {"jacobi-2d@double": doc}}})
    )
    with pytest.raises(ProfileError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        read_profile_file(path)
    write_profile_file(
        tmp_path / "ok.json", {"tuning": {"kernel_configs": {"k": _table().to_dict()}}}
    )
    assert read_profile_file(tmp_path / "ok.json")["tuning"]["kernel_configs"]["k"]["index"]
