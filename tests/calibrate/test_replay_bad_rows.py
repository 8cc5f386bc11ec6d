"""A replay file or Kernel Tuner cache with a value no GPU produces is a bad row: one line
naming the file, the line and the field, exit 1, and no profile written (calibrate) or chosen
(tune-blocks)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cli_helpers import run_cli

DATA = Path(__file__).resolve().parents[1] / "data"
CSV = DATA / "replay" / "a100_pcie_fp32_10pt.csv"
CACHE = DATA / "kernel_tuner" / "synthetic_fp32_cache_NVIDIA_A100-PCIE-40GB.json"
BLOCKS = DATA / "kernel_tuner" / "blocksize_energy_cache_RTX4000Ada.json"


def _profiles() -> list:
    folder = Path(os.environ["GOVERNOR_DATA_DIR"]) / "profiles"
    return sorted(folder.iterdir()) if folder.is_dir() else []


def _calibrate_fails(capsys, path: Path, expected: str) -> None:
    code, out, err = run_cli(capsys, "calibrate", "--device", f"replay:{path}")
    assert (code, out) == (1, ""), err
    assert err == f"governor: error: {path}: {expected}\n"
    assert _profiles() == []


@pytest.mark.parametrize(
    "column, value, expected",
    [
        (1, "1e308", "power_w: 1e+308 W is more than any GPU draws (at most 5000 W)"),
        (1, "6000", "power_w: 6000 W is more than any GPU draws (at most 5000 W)"),
        (1, "-42", "power_w: -42 must be positive"),
        (1, "nan", "power_w: nan is not a finite number"),
        (2, "0", "time_s: 0 must be positive"),
        (2, "inf", "time_s: inf is not a finite number"),
        (0, "1e6", "clock_mhz: 1e+06 MHz is above any GPU's clock (at most 10000 MHz)"),
    ],
)
def test_a_replay_row_no_gpu_produces_is_refused(capsys, tmp_path, column, value, expected):
    lines = CSV.read_text().splitlines()
    number = next(i for i, line in enumerate(lines) if line[:1].isdigit()) + 3  # a middle row
    cells = lines[number].split(",")
    cells[column] = value
    lines[number] = ",".join(cells)
    path = tmp_path / "bad.csv"
    path.write_text("\n".join(lines) + "\n")
    _calibrate_fails(capsys, path, f"line {number + 1} {expected}")


def test_the_unchanged_replay_file_still_calibrates(capsys):
    code, _, err = run_cli(capsys, "calibrate", "--device", f"replay:{CSV}")
    assert code == 0, err
    assert [p.name for p in _profiles()] == ["replay-a100-pcie-fp32-10pt.json"]


def _bad_cache(source: Path, tmp_path: Path, field: str, value) -> tuple:
    doc = json.loads(source.read_text())
    key = sorted(doc["cache"])[len(doc["cache"]) // 2]
    doc["cache"][key][field] = value
    path = tmp_path / source.name
    path.write_text(json.dumps(doc, indent=1))
    (line,) = [
        n
        for n, text in enumerate(path.read_text().splitlines(), 1)
        if text.strip() == f'"{key}": {{'
    ]
    return path, f"line {line} entry {key!r}"


@pytest.mark.parametrize(
    "field, value, expected",
    [
        ("nvml_power", 1e308, "nvml_power: 1e+308 W is more than any GPU draws (at most 5000 W)"),
        ("nvml_power", -3.0, "nvml_power: -3 must be positive"),
        ("time", 0.0, "time: 0 must be positive"),
        ("time", float("nan"), "time: nan is not a finite number"),
    ],
)
def test_a_kernel_tuner_entry_no_gpu_produces_is_refused(capsys, tmp_path, field, value, expected):
    path, where = _bad_cache(CACHE, tmp_path, field, value)
    _calibrate_fails(capsys, path, f"{where} {expected}")


def test_tune_blocks_refuses_a_recorded_entry_no_gpu_produces(capsys, tmp_path):
    path, where = _bad_cache(BLOCKS, tmp_path, "nvml_power", 1e308)
    code, out, err = run_cli(capsys, "tune-blocks", "--recorded", path, "--json")
    assert code == 1
    line = f"{path}: {where} nvml_power: 1e+308 W is more than any GPU draws (at most 5000 W)"
    assert err == f"governor: error: {line}\n"
    assert json.loads(out) == {"error": line}
    assert _profiles() == []
