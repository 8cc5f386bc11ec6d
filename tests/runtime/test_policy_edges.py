"""Policies at the edges of what they take: the largest plausible numbers, the times of day a
mission may end at, and what a throughput policy's battery floor says about itself."""

from __future__ import annotations

import time

import pytest
from cli_helpers import run_cli

from governor.errors import InvalidRequestError
from governor.runtime.policies import (
    LIMITS,
    PowerCap,
    Throughput,
    check_number,
    from_spec,
    seconds_until,
)


@pytest.mark.parametrize("key", sorted(LIMITS))
def test_each_quantity_takes_its_limit_and_refuses_just_above_it(key):
    unit, hi = LIMITS[key]
    assert check_number(key, hi) == hi
    with pytest.raises(InvalidRequestError, match=f"must be a finite number of {unit} > 0 and "):
        check_number(key, hi * (1 + 1e-9))


def test_a_year_is_the_longest_mission_and_a_megahertz_the_fastest_rate():
    assert LIMITS["hours"] == ("hours", 8760)
    assert LIMITS["rate_hz"] == ("Hz", 1e6)


@pytest.mark.parametrize(
    "options, words",
    [
        (("--policy", "battery", "--battery-wh", "1", "--hours", "8761"), "<= 8760, not 8761"),
        (("--policy", "throughput", "--rate-hz", "1000001"), "<= 1000000, not 1000001"),
    ],
)
def test_the_cli_says_the_limit(capsys, options, words):
    code, _, err = run_cli(capsys, "run", "--device", "sim:agx-orin", *options, "--", "true")
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1


def _today(h, m, s=0):
    local = time.localtime()
    return time.mktime(local[:3] + (h, m, s) + local[6:8] + (-1,))


def test_a_time_of_day_counts_its_seconds():
    noon = _today(12, 0)
    assert seconds_until("12:00:30", now=noon) == pytest.approx(30.0)
    assert seconds_until("12:01", now=noon) == pytest.approx(60.0)
    # a time already past today is tomorrow's (a day, give or take a clock change)
    assert 82800 <= seconds_until("11:59:59", now=noon) <= 90000


@pytest.mark.parametrize(
    "until", ["24:00", "12:60", "12:00:60", "12:00:-1", "-1:00", "12", "1:2:3:4"]
)
def test_a_time_that_is_not_of_a_day_is_refused(until):
    with pytest.raises(InvalidRequestError, match="until must be a local time of day HH:MM"):
        seconds_until(until)


def test_a_throughput_floor_says_its_mission():
    policy = Throughput(rate_hz=30, battery_wh=10, hours=2)
    assert policy.target_s == 7200.0 and policy.budget_j == 36000.0
    assert policy.describe() == "throughput 30 Hz while 10 Wh last for 2 h"
    plain = Throughput(rate_hz=30)
    assert plain.target_s is None and plain.describe() == "throughput 30 Hz"


def test_a_policy_passed_as_one_is_kept_as_it_is():
    cap = PowerCap(cap_w=50)
    assert from_spec(cap) is cap


def test_a_battery_policy_says_its_budget_and_mission():
    from governor.runtime.policies import Battery

    assert Battery(battery_wh=10, hours=2).describe() == "battery 10 Wh over 2 h (board)"
    assert Battery(energy_j=1800, duration_s=900, scope="gpu").describe() == (
        "battery 0.5 Wh over 0.25 h (gpu)"
    )
