"""governor apply / reset / run / simulate: the JSON keys of specs/cli-json.md, one-line
errors with exit 1 (2 for usage), and no device left changed."""

from __future__ import annotations

import json
import os
import sys

import pytest
from cli_helpers import run_cli

import governor
from governor.paths import state_dir

_run = run_cli


def no_journals() -> bool:
    return not state_dir().exists() or not list(state_dir().glob("journal-*"))


def test_simulate_json_keys(capsys):
    code, out, _ = _run(
        capsys,
        "simulate",
        "--board",
        "orin-nano",
        "--policy",
        "power-cap",
        "--cap-w",
        "6",
        "--trace",
        "bursty",
        "--duration-s",
        "30",
        "--json",
    )
    assert code == 0
    doc = json.loads(out)
    for key in (
        "duration_s",
        "energy_j",
        "mean_power_w",
        "max_power_w",
        "time_above_cap_s",
        "work_done",
        "deadline_misses",
    ):
        assert isinstance(doc[key], (int, float)), key
    assert doc["duration_s"] == pytest.approx(30.0)


def test_simulate_perception_counts_frames(capsys):
    code, out, _ = _run(
        capsys,
        "simulate",
        "--board",
        "agx-orin",
        "--policy",
        "throughput",
        "--rate-hz",
        "30",
        "--trace",
        "perception-30hz",
        "--duration-s",
        "5",
        "--json",
    )
    doc = json.loads(out)
    assert code == 0 and doc["frames"] == 150 and doc["deadline_misses"] <= 2


def test_simulate_text_output(capsys):
    code, out, _ = _run(
        capsys,
        "simulate",
        "--board",
        "agx-orin",
        "--policy",
        "battery",
        "--battery-wh",
        "0.2",
        "--duration-s",
        "60",
    )
    assert code == 0 and "budget lasted" in out and "energy" in out


def test_apply_on_a_simulated_board_says_nothing_persists(capsys):
    code, out, err = _run(capsys, "apply", "max", "--device", "sim:agx-orin", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["device"] == "sim:agx-orin"
    assert (
        doc["applied"]["gpu_clocks_mhz"] == [1300.5, 1300.5]
        and doc["previous"]["gpu_clocks_mhz"] is None
    )
    assert doc["simulated"] is True and doc["persists"] is False
    assert no_journals()  # a simulated board owns no hardware: nothing on disk
    code, out, _ = _run(capsys, "reset", "--device", "sim:agx-orin", "--json")
    assert code == 0 and json.loads(out)["devices"][0]["restored"] == {}


def test_apply_power_limit_on_a_datacenter_board(capsys):
    code, out, _ = _run(
        capsys, "apply", "--power-limit", "200", "--device", "sim:a100-pcie", "--json"
    )
    doc = json.loads(out)
    assert code == 0 and doc["applied"] == {"power_limit_w": 200.0}
    assert doc["previous"]["power_limit_w"] == 250.0


@pytest.mark.parametrize(
    "args, code, words",
    [
        (["apply", "--device", "sim:agx-orin"], 1, "nothing to apply"),
        (["apply", "turbo", "--device", "sim:agx-orin"], 1, "ppw or max"),
        (["apply", "--clock", "5000", "--device", "sim:agx-orin"], 1, "outside the range"),
        (["apply", "--power-limit", "900", "--device", "sim:a100-pcie"], 1, "outside 150-250 W"),
        (
            ["apply", "--power-limit", "20", "--device", "sim:agx-orin"],
            1,
            "no settable power limit",
        ),
        (["apply", "max", "--device", "sim:nope"], 1, "unknown simulated board"),
        (["apply", "max", "--device", "sim:agx-orin", "--frobnicate"], 2, "No such option"),
        (["simulate", "--policy", "power-cap"], 2, "needs --cap-w"),
        (["simulate", "--policy", "max", "--trace", "zigzag"], 1, "unknown trace"),
        (["simulate", "--policy", "max", "--duration-s", "-1"], 2, "--duration-s must be"),
        (
            [
                "run",
                "--device",
                "sim:agx-orin",
                "--policy",
                "throughput",
                "--rate-hz",
                "30",
                "--",
                "true",
            ],
            2,
            "gov.tick()",
        ),
        (
            ["run", "--device", "sim:agx-orin", "--policy", "power-cap", "--", "true"],
            2,
            "needs --cap-w",
        ),
    ],
)
def test_bad_input_is_one_line_and_leaves_nothing_changed(capsys, args, code, words):
    got, out, err = _run(capsys, *args, "--json") if "--" not in args else _run(capsys, *args)
    assert got == code
    assert words in err and err.count("\n") == 1 and "Traceback" not in err
    assert no_journals()


def test_run_reports_energy_and_exits_with_the_commands_code(capsys):
    code, out, err = _run(
        capsys,
        "run",
        "--device",
        "sim:agx-orin",
        "--policy",
        "ppw",
        "--json",
        "--stdout",
        os.devnull,
        "--",
        sys.executable,
        "-c",
        "import time; time.sleep(0.3); raise SystemExit(3)",
    )
    assert code == 3
    doc = json.loads(out)
    assert doc["exit_code"] == 3 and doc["policy"] == "ppw"
    assert doc["duration_s"] >= 0.3 and doc["energy_j"] > 0
    assert doc["mean_power_w"] == pytest.approx(doc["energy_j"] / doc["duration_s"])
    # no profile: the PPW clock is searched for online (the first probe is a table clock)
    assert "no calibrated model" in err and "finding the PPW clock online" in err
    assert doc["mean_clock_mhz"] in governor.open_device("sim:agx-orin").supported_clocks_mhz()
    assert no_journals()


def test_run_missing_command_exits_127(capsys):
    code, _, err = _run(
        capsys, "run", "--device", "sim:agx-orin", "--policy", "max", "--", "no-such-command-xyz"
    )
    assert code == 127 and "command not found: no-such-command-xyz" in err
    assert no_journals()


def test_run_on_the_default_simulated_board_runs_in_real_time_and_says_so(capsys, monkeypatch):
    monkeypatch.setattr("governor.devices.registry.discover_hardware", lambda: [])
    code, out, err = _run(
        capsys,
        "run",
        "--policy",
        "max",
        "--json",
        "--stdout",
        os.devnull,
        "--",
        sys.executable,
        "-c",
        "import time; time.sleep(0.3)",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["simulated"] is True and doc["device"] == "sim:agx-orin"
    assert doc["duration_s"] >= 0.3 and doc["energy_j"] > 0 and doc["mean_power_w"] > 0
    assert "no GPU found" in err


def test_tune_blocks_command_refuses_a_virtual_time_board(capsys):
    code, _, err = _run(
        capsys, "tune-blocks", "--device", "sim:a100-pcie", "--command", "true {block}"
    )
    assert code == 1 and "virtual time" in err and "realtime=1" in err
    assert err.count("\n") == 1


def _floor_sim(capsys, *extra):
    return _run(
        capsys,
        "simulate",
        "--board",
        "a100-pcie",
        "--policy",
        "throughput",
        "--rate-hz",
        "30",
        "--trace",
        "perception-30hz",
        "--duration-s",
        "20",
        *extra,
        "--json",
    )


def test_simulate_throughput_with_a_battery_floor_holds_the_budget_or_the_rate(capsys):
    code, out, _ = _floor_sim(capsys)
    alone = json.loads(out)
    assert code == 0 and alone["deadline_misses"] == 0
    alone_wh = alone["board_energy_j"] / 3600.0
    # ample: the rate holds and the floor costs nothing
    code, out, _ = _floor_sim(capsys, "--battery-wh", f"{1.2 * alone_wh:.6f}")
    ample = json.loads(out)
    assert code == 0 and ample["deadline_misses"] == 0 and not ample["rate_degraded_s"]
    assert ample["energy_j"] == pytest.approx(alone["energy_j"], rel=0.01)
    # short: the budget holds (within 1 %) and the rate degrades instead
    budget_wh = 0.8 * alone_wh
    code, out, _ = _floor_sim(capsys, "--battery-wh", f"{budget_wh:.6f}")
    short = json.loads(out)
    assert code == 0 and short["rate_degraded_s"] > 5
    assert short["board_energy_j"] <= 1.01 * budget_wh * 3600.0
    # the simulated app asks gov.admit(): frames skipped, those taken on time
    assert short["frames_skipped"] > 0 and short["deadline_misses"] <= 0.01 * short["frames"]
    # the rate admitted over the run is below the rate asked; the status's admitted_rate_hz
    # is the last period's (the share swings between none and all as the plan's power
    # crosses the rate's), so only its range is fixed
    assert (short["frames"] - short["frames_skipped"]) / 20 < 0.9 * 30
    assert 0 <= short["admitted_rate_hz"] <= 30
    # an app that does not ask runs every frame: the clock degrades, frames come late
    code, out, _ = _floor_sim(capsys, "--battery-wh", f"{budget_wh:.6f}", "--no-admit")
    ignores = json.loads(out)
    assert code == 0 and ignores["frames_skipped"] == 0 and ignores["deadline_misses"] > 0
    assert ignores["board_energy_j"] <= 1.01 * budget_wh * 3600.0


def test_until_is_a_time_of_day_and_only_for_a_mission(capsys):
    code, _, err = _floor_sim(capsys, "--battery-wh", "1", "--until", "25:00")
    assert code == 2 and "local time of day" in err and "Traceback" not in err
    code, _, err = _floor_sim(capsys, "--battery-wh", "1", "--until", "18:00", "--hours", "1")
    assert code == 2 and "not both" in err
    code, _, err = _run(capsys, "simulate", "--policy", "max", "--until", "18:00")
    assert code == 2 and "mission end" in err
    # a floor needs a budget and a mission end
    code, out, err = _floor_sim(capsys, "--hours", "1")
    assert code != 0 and "needs --battery-wh" in err and err.count("\n") == 1
