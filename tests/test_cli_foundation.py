"""The CLI skeleton: --version, devices, monitor, and one-line errors for bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cli_helpers import run_cli

from governor._version import __version__


def run(args, capsys):
    return run_cli(capsys, *args)


def test_version(capsys):
    code, out, _ = run(["--version"], capsys)
    assert code == 0 and out.strip() == f"governor {__version__}"


def test_devices_json_keys(capsys):
    code, out, _ = run(["devices", "--json", "--simulated"], capsys)
    doc = json.loads(out)
    assert code == 0
    assert "agx-orin" in doc["simulated_boards"]
    row = next(d for d in doc["devices"] if d["uri"] == "sim:a100-pcie")
    assert row["kind"] == "sim" and row["can_control"] is True
    assert row["supported_clocks_mhz"][0] == 210 and row["supported_clocks_mhz"][-1] == 1410
    assert (
        row["capabilities"]["energy_counter"] is True and row["capabilities"]["power_mode"] is False
    )


def test_devices_table_says_no_gpu_and_lists_boards(capsys):
    code, out, _ = run(["devices"], capsys)
    assert code == 0 and "No GPU found" in out and "agx-orin" in out


def test_monitor_json_lines(capsys):
    code, out, _ = run(
        [
            "monitor",
            "--device",
            "sim:agx-orin",
            "--count",
            "4",
            "--interval-s",
            "0.25",
            "--workload",
            "compute",
            "--json",
        ],
        capsys,
    )
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(lines) == 4
    for key in ("t_s", "gpu_clock_mhz", "rails", "power_w", "energy_j", "temperature_c"):
        assert key in lines[0]
    assert [round(x["t_s"], 2) for x in lines] == [0.0, 0.25, 0.5, 0.75]
    assert lines[0]["rails"]["VDD_GPU_SOC"]["scope"] == "gpu+soc"
    assert lines[-1]["gpu_clock_mhz"] == 1300.5


def test_monitor_auto_says_it_fell_back(capsys):
    code, out, err = run(["monitor", "--count", "1"], capsys)
    assert code == 0 and "no GPU found" in err and "AGX Orin" in out


@pytest.mark.parametrize(
    "args,needle",
    [
        (["monitor", "--device", "sim:nope", "--count", "1"], "unknown simulated board 'nope'"),
        (["monitor", "--device", "gpu9", "--count", "1"], "unknown device 'gpu9'"),
        (
            ["monitor", "--device", "sim:agx-orin", "--workload", "warp", "--count", "1"],
            "unknown workload 'warp'",
        ),
    ],
)
def test_bad_devices_are_one_line_errors(capsys, args, needle):
    code, out, err = run(args, capsys)
    assert code == 1
    assert needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    code, out, err = run(args + ["--json"], capsys)
    assert code == 1 and needle in json.loads(out)["error"]


def test_usage_errors_exit_2(capsys):
    code, _, err = run(["monitor", "--count", "0"], capsys)
    assert code == 2 and "--count" in err
    code, _, err = run(["frobnicate"], capsys)
    assert code == 2


def test_console_script_entry_point_runs():
    proc = subprocess.run(
        [sys.executable, "-m", "governor", "monitor", "-d", "sim:nano", "-n", "1", "--json"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and json.loads(proc.stdout)["rails"]["POM_5V_GPU"]["scope"] == "gpu"
