"""Issue 49 item 2: what a request asks that the board's model says at once it cannot do, or
never needs to, is said when the policy is set (status notes, unmet, ``governor run``'s
stderr and report), not when it fails; a clock off by orders of magnitude is refused the
same way by ``run`` and ``apply``; and an option of another policy says the default policy.
Decisions do not change (scripts/check_decisions.py, check_battery_decisions.py)."""

from __future__ import annotations

import json

import pytest
from cli_helpers import run_cli

import governor
from governor.paths import state_dir
from governor.profiles.store import profile_paths
from governor.runtime import Governor
from governor.runtime.feasibility import request_findings
from governor.runtime.model import fallback_model

BOARD = "sim:agx-orin"


@pytest.fixture
def calibrated(profile_of):
    """The simulated Orin's calibrated profile, where ``governor run`` looks it up."""
    path = profile_paths("agx-orin")[0]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(profile_of("agx-orin")))
    return profile_of("agx-orin")


def _no_journals() -> bool:
    return not state_dir().exists() or not list(state_dir().glob("journal-*"))


def _run(capsys, tmp_path, *options):
    out = tmp_path / "report.json"
    code, _, err = run_cli(
        capsys, "run", "--device", BOARD, *options, "--json-out", out, "--", "sleep", "0.3"
    )
    return code, err, json.loads(out.read_text()) if out.exists() else None


def _said_once(err, words):
    lines = [line for line in err.splitlines() if words in line]
    assert len(lines) == 1 and lines[0].startswith("governor: "), err
    return lines[0][len("governor: ") :]


# -- the API: said at once, before a single step ---------------------------------------------


def test_a_throughput_floor_below_idle_is_unmet_before_it_runs(calibrated):
    """The issue's case: 12 Wh over 13 h is 0.92 W, far below the board's idle draw."""
    dev = governor.open_device(BOARD)
    spec = {"policy": "throughput", "rate_hz": 30, "battery_wh": 12, "hours": 13}
    gov = Governor(dev, spec, profile=calibrated, background=False)
    s = gov.status()  # before start(), before any frame
    dev.close()
    said = [n for n in s["unmet"] if "below what the board draws idle" in n]
    assert len(said) == 1 and said == [n for n in s["notes"] if "draws idle" in n]
    assert "12 Wh) over the 4.68e+04 s mission is 0.923 W on average" in said[0]
    idle_w = float(said[0].split("idle (about ")[1].split(" W")[0])
    assert 5.0 < idle_w < 10.0  # the GPU's fitted idle plus the rest of the board


def test_a_budget_the_mission_cannot_spend_is_a_note_not_unmet(calibrated):
    dev = governor.open_device(BOARD)
    spec = {"policy": "battery", "battery_wh": 500, "hours": 1}
    with Governor(dev, spec, profile=calibrated, background=False) as gov:
        for _ in range(3):
            gov.step()
        s = gov.status()
    dev.close()
    said = [n for n in s["notes"] if "more than the 3600 s mission can spend" in n]
    assert len(said) == 1 and "500 Wh" in said[0] and "the rest is left over" in said[0]
    assert s["unmet"] == []


def test_a_cap_above_the_top_draw_is_a_note_and_the_top_clock_runs(calibrated):
    dev = governor.open_device(BOARD)
    top = dev.supported_clocks_mhz()[-1]
    dev.run_workload("compute")
    with Governor(
        dev, {"policy": "power-cap", "cap_w": 25000}, profile=calibrated, background=False
    ) as gov:
        for _ in range(20):
            gov.step()
        s = gov.status()
        held = dev.state().gpu_clocks_mhz  # the device's own settings
    dev.close()
    said = [n for n in s["notes"] if "25000 W is above what" in n]
    assert len(said) == 1 and "never binds" in said[0]
    assert s["unmet"] == []
    assert held == (top, top)


def test_a_request_the_board_can_meet_says_nothing(calibrated):
    dev = governor.open_device(BOARD)
    for spec in (
        {"policy": "battery", "battery_wh": 15, "hours": 1},
        {"policy": "power-cap", "cap_w": 20},
    ):
        gov = Governor(dev, spec, profile=calibrated, background=False)
        assert gov.status()["unmet"] == []
        assert not [n for n in gov.status()["notes"] if "never binds" in n or "left over" in n]
    dev.close()


def test_a_new_policy_is_judged_when_it_is_set(calibrated):
    dev = governor.open_device(BOARD)
    with Governor(dev, {"policy": "ppw"}, profile=calibrated, background=False) as gov:
        gov.step()
        gov.set_policy({"policy": "battery", "battery_wh": 0.5, "hours": 1})
        s = gov.status()
    dev.close()
    assert len([n for n in s["unmet"] if "draws idle" in n]) == 1


def test_without_a_calibration_only_what_can_be_told_is_said():
    """The generic shape knows no watts: the rest of the board is the idle floor, and a cap
    is not judged where the device has no power limit to judge it by."""
    model = fallback_model([306.0, 1300.5], "none")
    low = request_findings(
        governor.runtime.policies.from_spec({"policy": "battery", "battery_wh": 1, "hours": 1}),
        model,
        "b",
        rest_w=4.0,
    )
    assert [(f.key, f.unmet) for f in low] == [("budget-below-idle", True)]
    assert "at least 4 W" in low[0].text
    cap = governor.runtime.policies.from_spec({"policy": "power-cap", "cap_w": 25000})
    assert request_findings(cap, model, "b") == []
    said = request_findings(cap, model, "b", limit_max_w=300.0)
    assert [f.key for f in said] == ["cap-above-top"] and "at most 300 W" in said[0].text


# -- governor run: on stderr and in the report, device restored -----------------------------


def test_run_says_a_budget_below_idle_at_the_start(capsys, tmp_path, calibrated):
    code, err, report = _run(
        capsys, tmp_path, "--policy", "battery", "--battery-wh", "0.5", "--hours", "1"
    )
    assert code == 0  # the job's exit code: information, not a failure
    line = _said_once(err, "draws idle")
    assert "0.5 Wh) over the 3600 s mission is 0.5 W on average" in line
    assert line in report["unmet"] and line in report["notes"]
    assert report["exit_code"] == 0 and _no_journals()  # restored, nothing left journaled


def test_run_says_a_cap_above_the_top_draw(capsys, tmp_path, calibrated):
    code, err, report = _run(capsys, tmp_path, "--policy", "power-cap", "--cap-w", "25000")
    assert code == 0
    line = _said_once(err, "never binds")
    assert "the power cap 25000 W is above what sim:agx-orin draws at its top clock" in line
    assert line in report["notes"] and report["unmet"] == []
    assert report["mean_clock_mhz"] == 1300.5  # the device ran uncapped, at its top clock
    assert report["restore_failed"] is None and _no_journals()


def test_run_says_a_budget_the_mission_cannot_spend(capsys, tmp_path, calibrated):
    code, err, report = _run(
        capsys, tmp_path, "--policy", "battery", "--battery-wh", "500", "--hours", "1"
    )
    assert code == 0
    line = _said_once(err, "left over")
    assert "500 Wh) is more than the 3600 s mission can spend" in line
    assert line in report["notes"] and report["unmet"] == []
    assert _no_journals()


# -- a unit slip: run and apply refuse it alike ------------------------------------------------


@pytest.mark.parametrize("command", ["run", "apply"])
def test_a_clock_in_ghz_is_refused_by_run_and_apply_alike(capsys, tmp_path, command):
    if command == "run":
        args = ["run", "--device", BOARD, "--policy", "clock", "--clock", "1.3", "--", "true"]
    else:
        args = ["apply", "--device", BOARD, "--clock", "1.3"]
    code, out, err = run_cli(capsys, *args)
    assert code == 2
    assert err.strip().splitlines() == [
        "governor: error: --clock 1.3 MHz: did you mean GHz? --clock takes MHz "
        "(1300 MHz; sim:agx-orin's clocks: 306-1300.5 MHz)"
    ]
    assert _no_journals()  # refused before the device was taken


@pytest.mark.parametrize("command", ["run", "apply"])
def test_a_clock_off_by_orders_of_magnitude_is_refused_naming_the_unit(capsys, command):
    if command == "run":
        args = ["run", "--device", BOARD, "--policy", "clock", "--clock", "20000", "--", "true"]
    else:
        args = ["apply", "--device", BOARD, "--clock", "20000"]
    code, _, err = run_cli(capsys, *args)
    assert code == 2
    assert "--clock 20000 MHz is off the board's range by orders of magnitude" in err
    assert "--clock takes MHz" in err and _no_journals()


def test_a_clock_just_outside_the_range_is_still_clamped_by_run(capsys, tmp_path):
    code, err, report = _run(capsys, tmp_path, "--policy", "clock", "--clock", "200")
    assert code == 0
    assert "clock 200 MHz is below sim:agx-orin's lowest clock: clamped to 306 MHz" in err


def test_an_option_of_another_policy_names_the_default_and_how_to_pick(capsys):
    code, _, err = run_cli(capsys, "run", "--device", BOARD, "--cap-w", "20", "--", "true")
    assert code == 2
    assert err.strip() == (
        "governor: error: --cap-w does not apply to the ppw policy; it is for --policy "
        "power-cap (the default policy is ppw; pick one with --policy)"
    )
    code, _, err = run_cli(
        capsys, "run", "--device", BOARD, "--policy", "max", "--cap-w", "20", "--", "true"
    )
    assert code == 2 and "default" not in err
    assert "--cap-w does not apply to the max policy; it is for --policy power-cap" in err
    assert _no_journals()


# -- an uncalibrated Jetson: the board's rated power is the estimate -------------------------


def test_run_on_an_uncalibrated_jetson_says_a_cap_above_its_rated_power(capsys, tmp_path):
    """No profile and no power limit on a Jetson: the catalog's module rating (AGX Orin 64GB:
    60 W) is the top draw, said as an estimate; the device runs uncapped and is restored."""
    code, err, report = _run(capsys, tmp_path, "--policy", "power-cap", "--cap-w", "25000")
    assert code == 0
    line = _said_once(err, "never binds")
    assert line == (
        "the power cap 25000 W is above what sim:agx-orin draws at its top clock (at most 60 W, "
        "its rated power: an estimate, the board is not calibrated): it never binds, the "
        "policy runs uncapped"
    )
    assert line in report["notes"] and report["unmet"] == []
    assert report["restore_failed"] is None and _no_journals()


def test_an_uncalibrated_jetson_says_a_budget_above_what_its_rating_can_spend():
    dev = governor.open_device("sim:nano")
    gov = Governor(dev, {"policy": "battery", "battery_wh": 50, "hours": 1}, background=False)
    s = gov.status()
    clocks = dev.state().gpu_clocks_mhz  # nothing set by making the governor
    dev.close()
    said = [n for n in s["notes"] if "left over" in n]
    assert said == [
        "the energy budget of 1.8e+05 J (50 Wh) is more than the 3600 s mission can spend: "
        "the board at its top clock uses at most 3.6e+04 J (10 Wh) (at most 10 W, its rated "
        "power: an estimate, the board is not calibrated); the rest is left over"
    ]
    assert s["unmet"] == [] and clocks is None
    # within the rating nothing is said: an estimate cannot tell more
    dev = governor.open_device("sim:nano")
    gov = Governor(dev, {"policy": "battery", "battery_wh": 5, "hours": 1}, background=False)
    assert not [n for n in gov.status()["notes"] if "left over" in n or "never binds" in n]
    dev.close()


# -- the unit slip: simulate and the API refuse it as run and apply do ------------------------


def test_simulate_refuses_a_clock_in_ghz_as_run_does(capsys):
    code, out, err = run_cli(
        capsys, "simulate", "--board", "sim:agx-orin", "--policy", "clock", "--clock", "1.3"
    )
    assert (code, out) == (2, "")
    assert err.strip().splitlines() == [
        "governor: error: --clock 1.3 MHz: did you mean GHz? --clock takes MHz "
        "(1300 MHz; sim:agx-orin's clocks: 306-1300.5 MHz)"
    ]


def test_the_api_refuses_a_clock_in_ghz_before_the_device_is_touched():
    dev = governor.open_device(BOARD)
    with pytest.raises(governor.InvalidRequestError) as info:
        Governor(dev, {"policy": "clock", "clock_mhz": 1.3}, background=False)
    assert str(info.value) == (
        "clock_mhz 1.3 MHz: did you mean GHz? clock_mhz takes MHz "
        "(1300 MHz; sim:agx-orin's clocks: 306-1300.5 MHz)"
    )
    assert dev.state().gpu_clocks_mhz is None and _no_journals()
    with Governor(dev, {"policy": "max"}, background=False) as gov:
        gov.step()
        held = dev.state().gpu_clocks_mhz
        with pytest.raises(governor.InvalidRequestError, match="1.3 MHz: did you mean GHz"):
            gov.set_policy({"policy": "clock", "clock_mhz": 1.3})
        gov.step()
        assert gov.status()["policy"] == "max"  # the running one is kept
        assert dev.state().gpu_clocks_mhz == held == (1300.5, 1300.5)
    dev.close()
