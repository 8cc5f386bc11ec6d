"""What the Governor cannot meet is said once, in ``status()["notes"]`` and ``["unmet"]``:
a clock clamped or snapped, a cap below the board's least power, a budget run out. Checked
against the simulated board's own state (its locked clocks, its true energy)."""

from __future__ import annotations

import pytest

import governor
from governor.runtime import Governor, policies


@pytest.fixture
def nano(busy_sim):
    return busy_sim("orin-nano")


def _run(dev, spec, steps=30, **kwargs):
    """Govern ``dev`` with ``spec`` for ``steps`` periods; (status, the device's locked
    clocks while governed, the true mean GPU power over the run in W)."""
    gov = Governor(dev, spec, background=False, **kwargs)
    with gov:
        t0, e0 = dev.clock.now_s(), dev.true_energy_j()
        for _ in range(steps):
            gov.step()
        locked = dev.state().gpu_clocks_mhz
        true_w = (dev.true_energy_j() - e0) / (dev.clock.now_s() - t0)
        status = gov.status()
    return status, locked, true_w


def _once(status, words):
    """The one note that has ``words``, checked to be said once and to be in ``unmet``."""
    said = [n for n in status["notes"] if words in n]
    assert len(said) == 1, status["notes"]
    assert said == [n for n in status["unmet"] if words in n]
    return said[0]


def test_a_clock_above_the_top_is_clamped_and_said(nano):
    top = nano.supported_clocks_mhz()[-1]
    status, locked, _ = _run(nano, {"policy": "clock", "clock_mhz": 5000})
    assert locked == (top, top)
    note = _once(status, "clamped")
    assert "5000 MHz is above sim:orin-nano's top clock" in note and f"{top:g} MHz" in note


def test_a_clock_between_two_is_snapped_and_said(nano):
    clocks = nano.supported_clocks_mhz()
    asked = clocks[1] + (clocks[2] - clocks[1]) * 0.3  # nearer the lower one
    status, locked, _ = _run(nano, {"policy": "clock", "clock_mhz": asked}, steps=3)
    assert locked == (clocks[1], clocks[1])
    assert f"snapped to the nearest, {clocks[1]:g} MHz" in _once(status, "snapped")


def test_a_supported_clock_says_nothing(nano):
    clock = nano.supported_clocks_mhz()[2]
    status, locked, _ = _run(nano, {"policy": "clock", "clock_mhz": clock}, steps=3)
    assert locked == (clock, clock) and status["unmet"] == []


def test_a_cap_below_the_least_power_is_said_once_and_the_lowest_clock_held(nano):
    lowest = nano.supported_clocks_mhz()[0]
    status, locked, true_w = _run(nano, {"policy": "power-cap", "cap_w": 0.1}, steps=40)
    assert locked == (lowest, lowest) and true_w > 0.1  # the board cannot go lower
    note = _once(status, "cannot be met")
    assert "power cap 0.1 W is below what sim:orin-nano draws at its lowest clock" in note
    assert f"({lowest:g} MHz:" in note


def test_a_cap_the_board_can_keep_says_nothing(nano):
    status, _, true_w = _run(nano, {"policy": "power-cap", "cap_w": 5.0}, steps=40)
    assert status["unmet"] == [] and true_w < 5.0 * 1.05


def test_a_budget_that_runs_out_says_when(nano):
    spec = {"policy": "battery", "battery_wh": 0.001, "hours": 1}  # 3.6 J for an hour
    status, _, _ = _run(nano, spec, steps=30)
    at_s = status["exhausted_at_s"]
    assert at_s is not None and 0 < at_s < 3.0  # 3.6 J last about a second on this board
    note = _once(status, "ran out")
    assert note.startswith("the energy budget of 3.6 J (0.001 Wh)")
    assert f"ran out {at_s:.3g} s into the mission" in note and "3600 s mission" in note
    assert status["energy_j"] > 3.6 or status["remaining_j"] <= 0


def test_a_budget_that_lasts_says_nothing(nano):
    status, _, _ = _run(nano, {"policy": "battery", "battery_wh": 50, "hours": 1}, steps=30)
    assert status["exhausted_at_s"] is None and status["unmet"] == []


def test_a_battery_floor_that_runs_out_says_when(nano):
    spec = {"policy": "throughput", "rate_hz": 30, "battery_wh": 0.001, "duration_s": 60}
    gov = Governor(nano, spec, background=False)
    with gov:
        for _ in range(40):
            gov.tick(busy_s=0.01)
            gov.step()
        status = gov.status()
    assert "energy budget of 3.6 J" in _once(status, "ran out")
    # and before it ran: 3.6 J over 60 s is below what the board draws idle
    assert "0.06 W on average, below what the board draws idle" in _once(status, "draws idle")


def test_a_new_policy_is_judged_afresh(nano):
    gov = Governor(nano, {"policy": "clock", "clock_mhz": 5000}, background=False)
    with gov:
        gov.step()
        gov.set_policy({"policy": "power-cap", "cap_w": 0.1})
        for _ in range(20):
            gov.step()
        status = gov.status()
    assert len(status["unmet"]) == 2 and "clamped" in status["unmet"][0]
    assert "cannot be met" in status["unmet"][1]


def test_an_uncalibrated_board_names_the_command_that_calibrates(nano):
    gov = Governor(nano, policies.Performance(), profile=False, background=False)
    assert "governor calibrate --device sim:orin-nano" in gov.status()["notes"][0]


def test_notes_change_no_decision(nano, monkeypatch):
    """The watch only reads: with it silenced, the same clocks are asked for."""
    from governor.runtime import unmet

    def clocks(spec):
        dev = governor.open_device("sim:orin-nano")
        dev.run_workload("compute")
        asked = []
        real = dev.lock_gpu_clocks

        def lock(*args, **kwargs):
            asked.append(args[0])
            return real(*args, **kwargs)

        dev.lock_gpu_clocks = lock
        _run(dev, spec, steps=30)
        dev.close()
        return asked

    specs = [
        {"policy": "power-cap", "cap_w": 0.1},
        {"policy": "battery", "battery_wh": 0.001, "hours": 1},
    ]
    with_notes = [clocks(s) for s in specs]
    monkeypatch.setattr(unmet.UnmetWatch, "observe", lambda self, obs, controller: None)
    assert [clocks(s) for s in specs] == with_notes


def test_a_budget_that_runs_out_within_the_last_period_is_said_with_its_time(busy_sim):
    # a job shorter than one control period: no step is taken, the run's end closes it. The
    # T4 meters energy, so the metered crossing can be held to the board's true one
    dev = busy_sim("t4")
    budget_j = 5.0
    spec = {"policy": "battery", "energy_j": budget_j, "hours": 1, "scope": "gpu"}
    gov = Governor(dev, spec, background=False)
    with gov:
        t0, e0 = dev.clock.now_s(), dev.true_energy_j()
        dev.clock.sleep(0.5)
        true_w = (dev.true_energy_j() - e0) / (dev.clock.now_s() - t0)
    status = gov.status()
    assert true_w * 0.5 > budget_j  # it did run out, on the board's own meter
    note = _once(status, "ran out")
    at_s = status["exhausted_at_s"]
    assert f"ran out {at_s:.3g} s into the mission" in note
    assert at_s == pytest.approx(budget_j / true_w, rel=0.05)  # when the true energy crossed


def test_a_short_run_within_its_budget_says_nothing(nano):
    spec = {"policy": "battery", "energy_j": 50.0, "hours": 1, "scope": "gpu"}
    gov = Governor(nano, spec, background=False)
    with gov:
        nano.clock.sleep(0.5)
    assert gov.status()["unmet"] == [] and gov.status()["exhausted_at_s"] is None


def test_a_battery_floor_that_runs_out_within_the_last_period_is_said(busy_sim):
    dev = busy_sim("t4")
    spec = {"policy": "throughput", "rate_hz": 30, "energy_j": 5.0, "duration_s": 60}
    gov = Governor(dev, spec, background=False)
    with gov:
        e0 = dev.true_energy_j()
        dev.clock.sleep(0.5)  # no control step: the run's end closes the only period
        spent_j = dev.true_energy_j() - e0
    assert spent_j > 5.0  # the board did spend more than the floor's budget
    assert "energy budget of 5 J" in _once(gov.status(), "ran out")
