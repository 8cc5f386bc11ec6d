"""``governor run`` and ``governor apply`` say, once, what they cannot do as asked: on stderr,
in the JSON report's ``notes`` and ``unmet``; the exit code stays the job's (``run``) or 0
(``apply``: the change is made), and the device's measured clock shows what was held."""

from __future__ import annotations

import json

import pytest
from cli_helpers import run_cli

import governor
from governor.paths import state_dir

BOARD = "sim:agx-orin"


def _no_journals() -> bool:
    return not state_dir().exists() or not list(state_dir().glob("journal-*"))


def _clocks():
    with governor.open_device(BOARD) as dev:
        return dev.supported_clocks_mhz()


def _run(capsys, tmp_path, *options, job=("sleep", "0.6")):
    out = tmp_path / "report.json"
    code, _, err = run_cli(
        capsys, "run", "--device", BOARD, *options, "--json-out", out, "--", *job
    )
    return code, err, json.loads(out.read_text())


def _said_once(err, report, words):
    lines = [line for line in err.splitlines() if words in line]
    assert len(lines) == 1 and lines[0].startswith("governor: "), err
    assert [n for n in report["unmet"] if words in n] == [lines[0][len("governor: ") :]]
    assert [n for n in report["notes"] if words in n] == report["unmet"][-1:]
    return lines[0]


def test_a_budget_that_runs_out_is_said_with_when(capsys, tmp_path):
    code, err, report = _run(
        capsys, tmp_path, "--policy", "battery", "--battery-wh", "0.001", "--hours", "1"
    )
    assert code == 0  # information, not a failure: the job's exit code
    line = _said_once(err, report, "ran out")
    assert "energy budget of 3.6 J (0.001 Wh) ran out" in line and "3600 s mission" in line
    assert report["board_energy_j"] > 3.6  # the board did spend more than the budget
    assert _no_journals()


def test_a_budget_that_runs_out_in_a_job_shorter_than_a_period_is_said(capsys, tmp_path):
    code, err, report = _run(
        capsys,
        tmp_path,
        "--policy",
        "battery",
        "--battery-wh",
        "0.000001",
        "--hours",
        "1",
        job=("sleep", "0.05"),
    )
    assert code == 0
    line = _said_once(err, report, "ran out")
    assert "energy budget of 0.0036 J (1e-06 Wh) ran out" in line
    assert report["board_energy_j"] > 0.0036
    assert _no_journals()


def test_a_cap_below_the_least_power_is_said_and_the_lowest_clock_held(capsys, tmp_path):
    lowest = _clocks()[0]
    code, err, report = _run(
        capsys,
        tmp_path,
        "--policy",
        "power-cap",
        "--cap-w",
        "0.5",
        job=("sh", "-c", "sleep 0.6; exit 3"),
    )
    assert code == 3 and report["exit_code"] == 3  # still the job's
    line = _said_once(err, report, "cannot be met")
    assert (
        f"power cap 0.5 W is below what {BOARD} draws at its lowest clock ({lowest:g} MHz" in line
    )
    assert report["mean_clock_mhz"] == pytest.approx(lowest)  # measured on the device
    assert report["mean_power_w"] > 0.5
    assert _no_journals()


def test_a_clock_above_the_top_is_clamped_and_said(capsys, tmp_path):
    top = _clocks()[-1]
    code, err, report = _run(capsys, tmp_path, "--policy", "clock", "--clock", "5000")
    assert code == 0  # (99999 is a unit slip, refused: tests/runtime/test_feasibility.py)
    line = _said_once(err, report, "clamped")
    assert f"clock 5000 MHz is above {BOARD}'s top clock: clamped to {top:g} MHz" in line
    assert report["mean_clock_mhz"] == pytest.approx(top)


def test_a_request_the_board_meets_says_nothing_unmet(capsys, tmp_path):
    code, err, report = _run(capsys, tmp_path, "--policy", "clock", "--clock", str(_clocks()[3]))
    assert code == 0 and report["unmet"] == []
    assert report["mean_clock_mhz"] == pytest.approx(_clocks()[3])


def test_apply_ppw_without_a_profile_says_it_is_a_guess_and_how_to_calibrate(capsys):
    code, out, err = run_cli(capsys, "apply", "ppw", "--device", BOARD)
    assert code == 0
    assert "(ppw, a guess: no calibrated profile)" in out
    assert f"calibrate it once with 'governor calibrate --device {BOARD}'" in err
    code, out, err = run_cli(capsys, "apply", "ppw", "--device", BOARD, "--json")
    doc = json.loads(out)
    clocks = _clocks()
    guess = min(clocks, key=lambda c: abs(c - 0.75 * clocks[-1]))
    assert doc["guessed"] is True and doc["applied"]["gpu_clocks_mhz"] == [guess, guess]
    assert "governor calibrate" in doc["notes"][0]


def test_apply_ppw_with_a_profile_is_no_guess(capsys):
    code, out, err = run_cli(capsys, "apply", "ppw", "--device", "sim:a100-pcie", "--json")
    assert code == 0 and json.loads(out)["guessed"] is False and "calibrate" not in err


def test_apply_clock_says_when_it_snapped(capsys):
    clocks = _clocks()
    asked = clocks[2] + (clocks[3] - clocks[2]) * 0.3
    code, out, err = run_cli(capsys, "apply", "--clock", asked, "--device", BOARD, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["applied"]["gpu_clocks_mhz"] == [clocks[2], clocks[2]]
    assert f"snapped to the nearest, {clocks[2]:g} MHz" in err and err.count("\n") == 1
    assert doc["notes"] == [err.strip()[len("governor: ") :]]


def test_apply_and_reset_on_a_simulated_board_do_not_offer_an_undo(capsys):
    code, out, err = run_cli(capsys, "apply", "max", "--device", BOARD)
    assert code == 0 and "reset" in out and "undo with" not in out
    assert "for this command only" in out and "nothing outlives it" in out
    code, out, err = run_cli(capsys, "reset", "--device", BOARD)
    assert code == 0 and "keeps nothing between commands" in out
    assert _no_journals()


def test_apply_on_a_real_driver_offers_the_undo_and_says_the_snap(capsys, fake_nvml):
    with governor.open_device("nvml:0") as dev:
        clocks = dev.supported_clocks_mhz()
        uri = dev.uri
    asked = clocks[1] + (clocks[2] - clocks[1]) * 0.3
    code, out, err = run_cli(capsys, "apply", "--clock", asked, "--device", "nvml:0")
    assert code == 0 and f"undo with 'governor reset --device {uri}'" in out
    assert f"snapped to the nearest, {clocks[1]:g} MHz" in err
    assert fake_nvml.gpu(0).gpu_locked == (clocks[1], clocks[1])  # the driver holds it
    code, out, err = run_cli(capsys, "reset", "--device", "nvml:0")
    assert code == 0 and fake_nvml.gpu(0).gpu_locked is None
