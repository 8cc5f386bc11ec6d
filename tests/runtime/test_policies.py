"""Policies are small frozen records; from_spec validates with one-line messages."""

from __future__ import annotations

import dataclasses

import pytest

from governor.errors import InvalidRequestError
from governor.runtime import policies


def test_from_spec_builds_each_policy_and_round_trips():
    specs = [
        {"policy": "ppw"},
        {"policy": "ppw", "workload": "memory"},
        {"policy": "max"},
        {"policy": "clock", "clock_mhz": 918},
        {"policy": "power-cap", "cap_w": 25},
        {"policy": "battery", "battery_wh": 50, "hours": 2},
        {"policy": "battery", "energy_j": 9000, "duration_s": 600},
        {"policy": "throughput", "rate_hz": 30},
    ]
    for spec in specs:
        pol = policies.from_spec(spec)
        assert pol.name == spec["policy"]
        assert policies.from_spec(pol.to_spec()) == pol
    battery = policies.from_spec({"policy": "battery", "battery_wh": 50, "hours": 2})
    assert battery.budget_j == 50 * 3600 and battery.target_s == 7200


def test_unused_cli_options_are_ignored_when_none():
    pol = policies.from_spec(
        {"policy": "power-cap", "cap_w": 30, "battery_wh": None, "rate_hz": None}
    )
    assert pol == policies.PowerCap(cap_w=30.0)


@pytest.mark.parametrize(
    "spec, words",
    [
        ({"policy": "turbo"}, "unknown policy"),
        ({}, "unknown policy"),
        ({"policy": "power-cap"}, "needs cap_w"),
        ({"policy": "power-cap", "cap_w": -3}, "cap_w must be a finite number of W > 0"),
        ({"policy": "power-cap", "cap_w": "lots"}, "number"),
        ({"policy": "power-cap", "cap_w": float("nan")}, "> 0 and <= 100000, not nan"),
        ({"policy": "power-cap", "cap_w": True}, "number"),
        ({"policy": "battery", "hours": 2, "scope": "rail"}, "scope must be one of board, gpu"),
        ({"policy": "battery", "battery_wh": 10}, "hours"),
        ({"policy": "battery", "battery_wh": 10, "energy_j": 5, "hours": 1}, "not both"),
        ({"policy": "throughput", "rate_hz": 0}, "rate_hz must be a finite number of Hz > 0"),
        ({"policy": "max", "cap_w": 10}, "cap_w does not apply to the max policy"),
        ({"policy": "ppw", "colour": "red"}, "unknown policy option"),
        ("ppw", "mapping"),
    ],
)
def test_bad_specs_raise_one_line(spec, words):
    with pytest.raises(InvalidRequestError) as info:
        policies.from_spec(spec)
    message = str(info.value)
    assert words in message and "\n" not in message


def test_policies_are_frozen():
    pol = policies.PowerCap(cap_w=20)
    with pytest.raises(dataclasses.FrozenInstanceError):
        pol.cap_w = 30  # type: ignore[misc]


def test_dithering_reaches_the_target_when_the_load_is_not_shaped_like_the_model():
    """A coarse table (4 clocks) and a load whose power rises less steeply than the
    calibration load's: one correction factor for every clock would undershoot the target;
    per-clock factors make the mean of the two dithered clocks land on it."""
    from governor.runtime.controllers import PowerTracker
    from governor.runtime.model import ClockModel

    clocks = (306.0, 408.0, 510.0, 624.75)
    model = ClockModel(clocks, (3.0, 3.6, 4.2, 7.9), (2.0, 1.5, 1.2, 1.0), 2.0, 510.0, True, "test")
    true_w = {306.0: 3.3, 408.0: 3.65, 510.0: 3.95, 624.75: 6.2}  # memory-bound: flatter on top
    tracker = PowerTracker(model, dither=True)
    target, powers = 5.3, []
    clock = 510.0
    for _ in range(400):
        tracker.learn(true_w[clock], clock)
        clock = tracker.clock_for(target)
        powers.append(true_w[clock])
    mean = sum(powers[100:]) / len(powers[100:])
    assert 0.95 * target <= mean <= target
    assert set(powers[100:]) == {3.95, 6.2}  # it alternates between the two neighbours


def test_throughput_battery_floor_spec_round_trips_and_checks():
    from governor.runtime.policies import Throughput, from_spec, seconds_until

    pol = from_spec({"policy": "throughput", "rate_hz": 30, "battery_wh": 50, "hours": 2})
    assert isinstance(pol, Throughput) and pol.budget_j == 50 * 3600.0
    floor = pol.floor()
    assert floor.target_s == 7200.0 and floor.scope == "board" and floor.budget_j == 180000.0
    assert from_spec(pol.to_spec()) == pol
    assert "while 50 Wh last" in pol.describe()
    assert from_spec({"policy": "throughput", "rate_hz": 30}).floor() is None
    for bad, words in (
        ({"battery_wh": 50}, "exactly one of hours"),
        ({"hours": 2}, "exactly one of battery_wh"),
        ({"battery_wh": 50, "energy_j": 5, "hours": 2}, "exactly one of battery_wh"),
        ({"battery_wh": 50, "until": "7pm"}, "HH:MM"),
        ({"battery_wh": 50, "hours": 2, "until": "18:00"}, "exactly one of hours"),
    ):
        with pytest.raises(InvalidRequestError, match=words):
            from_spec(dict({"policy": "throughput", "rate_hz": 30}, **bad))
    # until: the seconds to the next such local time, tomorrow once past
    import time

    now = time.mktime((2026, 3, 10, 17, 0, 0, 0, 0, -1))
    assert seconds_until("18:00", now) == pytest.approx(3600.0)
    assert seconds_until("16:00", now) == pytest.approx(23 * 3600.0, abs=3600.0)
    timed = from_spec({"policy": "throughput", "rate_hz": 30, "energy_j": 1e5, "until": "18:00"})
    assert 0 < timed.floor().target_s <= 86400.0


def _frame_loop(ctl, *, idle_w, frame_j, seconds, frame_s=0.01, checks=()):
    """A 30 Hz app that asks ``ctl.admit()`` for every frame, metered on the GPU figure:
    ``idle_w`` between frames and ``frame_j`` more per frame taken. ``checks`` are called
    with the energy used so far at their period. Returns the energy used."""
    from governor.runtime.controllers import Observation, Tick

    f = ctl.initial_mhz()
    used = 0.0
    checks = dict(checks)
    for k in range(int(round(seconds * 10))):
        t = 0.1 * (k + 1)
        ticks = [Tick(t - 0.1 + i / 30, 1.0, frame_s, f) for i in range(3) if ctl.admit()]
        used += 0.1 * idle_w + frame_j * len(ticks)
        obs = Observation(t, 0.1, used / t, f, f, used, t, True)
        f, _ = ctl.decide(obs, ticks, f)
        if k in checks:
            checks[k](used)
    return used


def test_the_admitted_share_is_what_the_budget_affords_above_idle_power(profile_of):
    """Idle 10 W and 0.2 J a frame: every frame of 30 Hz costs 16 W, the budget affords
    13 W, so half the frames. The idle power is fitted from what was measured (the
    profile's says otherwise), and the budget holds."""
    from governor.devices.sim.catalog import get_board
    from governor.runtime.controllers import make_controller
    from governor.runtime.model import model_from_profile

    model = model_from_profile(get_board("agx-orin").clocks_mhz, profile_of("agx-orin"))
    assert abs(model.idle_w - 10.0) > 1.0
    policy = policies.Throughput(rate_hz=30, energy_j=13.0 * 120, duration_s=120, scope="gpu")
    ctl = make_controller(policy, model, interval_s=0.1)

    def halfway(used):
        status = ctl.status()
        assert status["idle_power_fit_w"] == pytest.approx(10.0, rel=0.02)
        assert status["admit_share"] == pytest.approx(0.5, abs=0.02)
        assert status["admitted_rate_hz"] == pytest.approx(15.0, abs=0.6)
        assert used <= 1.01 * 13.0 * 60

    used = _frame_loop(ctl, idle_w=10.0, frame_j=0.2, seconds=120, checks={599: halfway})
    assert used == pytest.approx(13.0 * 120, rel=0.01)
    assert ctl.status()["frames_admitted"] == pytest.approx(0.5 * 3600, rel=0.02)


def test_admission_spreads_the_frames_and_refuses_all_when_idle_power_alone_overspends(
    profile_of,
):
    from governor.devices.sim.catalog import get_board
    from governor.runtime.controllers import make_controller
    from governor.runtime.model import model_from_profile

    model = model_from_profile(get_board("agx-orin").clocks_mhz, profile_of("agx-orin"))
    policy = policies.Throughput(rate_hz=30, energy_j=8.0 * 60, duration_s=60, scope="gpu")
    ctl = make_controller(policy, model, interval_s=0.1)
    _frame_loop(ctl, idle_w=10.0, frame_j=0.2, seconds=20)
    assert ctl.status()["admit_share"] == 0.0  # 8 W affords no frames over 10 W idle
    assert ctl.status()["affordable_clock_mhz"] == model.clocks_mhz[0]  # the least idle power
    assert not any(ctl.admit() for _ in range(30))
    ctl.share = 0.6  # what a plan affording 60 % of the frames sets
    ctl.credit = 0.0
    taken = [ctl.admit() for _ in range(10)]
    assert taken == [False, True, False, True, True] * 2  # three in five, evenly


def test_throughput_margin_is_learnt_unless_given():
    learnt = policies.from_spec({"policy": "throughput", "rate_hz": 30})
    assert learnt.margin is None and "margin" not in learnt.to_spec()
    strict = policies.from_spec({"policy": "throughput", "rate_hz": 30, "margin": 0.1})
    assert strict.margin == 0.1 and policies.from_spec(strict.to_spec()) == strict
    for bad in (-0.1, 0.95, "wide", float("nan")):
        with pytest.raises(InvalidRequestError, match="margin must be") as err:
            policies.Throughput(rate_hz=30, margin=bad)
        assert "\n" not in str(err.value)


def _deadline_clock(profile, spread, margin=None):
    """The clock a throughput controller settles on for 30 Hz frames needing 45 % of the
    period at the top clock, their work spread evenly by ``±spread``."""
    from governor.devices.sim.catalog import get_board
    from governor.runtime.controllers import Observation, ThroughputController, Tick
    from governor.runtime.model import model_from_profile

    model = model_from_profile(get_board("agx-orin").clocks_mhz, profile)
    ctl = ThroughputController(model, policies.Throughput(rate_hz=30, margin=margin))
    f = ctl.initial_mhz()
    for k in range(300):
        t = 0.1 * (k + 1)
        ticks = []
        for i in range(3):
            work = 0.45 / 30 * (1.0 + spread * (((k * 3 + i) * 7919 % 101) / 50.0 - 1.0))
            ticks.append(Tick(t - 0.1 + i / 30, 1.0, work * model.time_rel_at(f), f))
        obs = Observation(t, 0.1, 10.0, f, f, 10.0 * t, t, True)
        f, _ = ctl.decide(obs, ticks, f)
    return ctl.base_mhz, ctl  # the clock chosen, not a period of the dither below it


def test_the_learnt_deadline_follows_the_frames_spread(profile_of):
    """A steady load gets no fixed headroom (a lower clock than a 10 % margin keeps), a
    jittery one gets the headroom its slowest frames need; either way the slowest frames
    of the window fit their period."""
    doc = profile_of("agx-orin")
    steady, ctl = _deadline_clock(doc, 0.01)
    jittery, _ = _deadline_clock(doc, 0.3)
    strict, _ = _deadline_clock(doc, 0.01, margin=0.1)
    assert steady < strict and steady < jittery
    rel = ctl.model.time_rel_at
    assert 0.45 / 30 * 1.01 * rel(steady) <= 1 / 30  # the slowest frame fits
    assert 0.45 / 30 * 1.3 * rel(jittery) <= 1 / 30 * 1.0001


def test_the_start_clock_is_left_as_the_first_frame_ends(orin, profile_of):
    """The governor does not wait for the next control period to leave its start: the
    model's PPW clock (a guess made before any frame is seen; the top clock until the
    throughput search's second pass, whose one frame cost 0.02-0.04 % of a minute)."""
    from governor.runtime import Governor

    top = orin.supported_clocks_mhz()[-1]
    spec = {"policy": "throughput", "rate_hz": 30}
    with Governor(orin, spec, profile=profile_of("agx-orin"), background=False) as gov:
        start = gov.applied_clock_mhz
        assert start == gov.model.ppw_clock_mhz < top
        orin.clock.sleep(0.015)
        gov.tick(1, busy_s=0.015)
        assert gov.applied_clock_mhz < start
