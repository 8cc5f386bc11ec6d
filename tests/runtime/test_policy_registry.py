"""One policy table: every field of every policy survives its spec (to_spec -> from_spec),
through JSON too, as the daemon, the ROS 2 node and set_policy pass it."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governor.errors import InvalidRequestError
from governor.runtime import policies


def _positive(key):
    hi = policies.LIMITS[key][1]
    return st.floats(min_value=1e-3, max_value=hi, allow_nan=False, allow_infinity=False)


def _fraction(hi):
    return st.floats(min_value=0.0, max_value=hi, allow_nan=False)


_TIME_OF_DAY = st.builds("{:02d}:{:02d}".format, st.integers(0, 23), st.integers(0, 59))


@st.composite
def _battery(draw):
    spec = {"policy": "battery", "scope": draw(st.sampled_from(policies.SCOPES))}
    budget = draw(st.sampled_from(["battery_wh", "energy_j", None]))
    if budget:
        spec[budget] = draw(_positive(budget))
    mission = draw(st.sampled_from(["hours", "duration_s"]))
    spec[mission] = draw(_positive(mission))
    spec["reserve"] = draw(st.none() | _fraction(0.5))
    return spec


@st.composite
def _throughput(draw):
    spec = {"policy": "throughput", "rate_hz": draw(_positive("rate_hz"))}
    spec["margin"] = draw(st.none() | _fraction(0.9))
    if draw(st.booleans()):  # a battery floor
        budget = draw(st.sampled_from(["battery_wh", "energy_j"]))
        spec[budget] = draw(_positive(budget))
        mission = draw(st.sampled_from(["hours", "duration_s", "until"]))
        spec[mission] = draw(_TIME_OF_DAY if mission == "until" else _positive(mission))
        spec["scope"] = draw(st.none() | st.sampled_from(policies.SCOPES))
    return spec


#: a valid spec of each policy; FIELDS below checks that every field is drawn
SPECS = {
    "ppw": st.fixed_dictionaries(
        {"policy": st.just("ppw"), "workload": st.none() | st.text(min_size=1, max_size=12)}
    ),
    "max": st.just({"policy": "max"}),
    "clock": st.fixed_dictionaries(
        {"policy": st.just("clock"), "clock_mhz": _positive("clock_mhz")}
    ),
    "power-cap": st.fixed_dictionaries(
        {
            "policy": st.just("power-cap"),
            "cap_w": _positive("cap_w"),
            "margin": _fraction(0.5),
            "window_s": _positive("window_s"),
            "dither": st.booleans(),
        }
    ),
    "battery": _battery(),
    "throughput": _throughput(),
}

#: the fields each strategy draws, by policy (a new field must be added here to be drawn)
FIELDS = {
    "ppw": {"workload"},
    "max": set(),
    "clock": {"clock_mhz"},
    "power-cap": {"cap_w", "margin", "window_s", "dither"},
    "battery": {"battery_wh", "energy_j", "hours", "duration_s", "reserve", "scope"},
    "throughput": {
        "rate_hz",
        "margin",
        "battery_wh",
        "energy_j",
        "hours",
        "duration_s",
        "until",
        "scope",
    },
}


def test_every_policy_field_is_drawn_by_the_round_trip_property():
    assert set(SPECS) == set(policies.NAMES) == set(FIELDS)
    for name, kind in policies.POLICIES.items():
        assert set(kind.keys) == FIELDS[name], name
        assert kind.policy.name == name


def _check_round_trip(spec):
    policy = policies.from_spec(spec)
    for key, value in spec.items():  # every option given is what the policy holds
        if key != "policy" and value is not None:
            assert getattr(policy, key) == value, key
    for doc in (
        policy.to_spec(),
        json.loads(json.dumps(policy.to_spec())),
        policy.to_spec(defaults=False),
        json.loads(json.dumps(policy.to_spec(defaults=False))),
    ):
        again = policies.from_spec(doc)
        assert again == policy
        assert type(again) is type(policy)


@pytest.mark.parametrize("name", sorted(SPECS))
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_every_field_of_every_policy_round_trips_through_its_spec(name, data):
    _check_round_trip(data.draw(SPECS[name]))


def test_the_options_the_old_spec_dropped_now_survive():
    cap = policies.PowerCap(cap_w=100, window_s=5, dither=False, margin=0.1)
    assert policies.from_spec(cap.to_spec()) == cap
    assert policies.from_spec(cap.to_spec()).window_s == 5.0
    battery = policies.Battery(energy_j=9000, duration_s=600, reserve=0.1)
    assert policies.from_spec(battery.to_spec()).reserve == 0.1


def test_required_keys_come_from_fields_without_a_default():
    required = {name: kind.required for name, kind in policies.POLICIES.items()}
    assert required == {
        "ppw": (),
        "max": (),
        "power-cap": ("cap_w",),
        "battery": (),
        "throughput": ("rate_hz",),
        "clock": ("clock_mhz",),
    }


@pytest.mark.parametrize(
    "spec, words",
    [
        ({"policy": "power-cap", "cap_w": 10, "dither": "yes"}, "dither must be true or false"),
        ({"policy": "power-cap", "cap_w": 10, "window_s": 0}, "window_s must be"),
        ({"policy": "battery", "hours": 1, "reserve": 0.9}, "reserve must be within"),
        ({"policy": "clock", "clock_mhz": 900, "reserve": 0.1}, "not apply to the clock"),
    ],
)
def test_the_new_spec_options_are_checked(spec, words):
    with pytest.raises(InvalidRequestError, match=words):
        policies.from_spec(spec)


def test_the_ros_node_refuses_an_option_it_cannot_carry_instead_of_dropping_it():
    from governor.ros2.params import from_policy, make_policy

    values = from_policy(policies.PowerCap(cap_w=12))
    assert make_policy(values)[0] == policies.PowerCap(cap_w=12)
    with pytest.raises(InvalidRequestError, match="takes no window_s"):
        from_policy(policies.PowerCap(cap_w=12, window_s=4))


# -- the table is the one place (issue 44) -------------------------------------------------


def test_each_row_makes_its_controller_with_the_callable_it_holds(monkeypatch):
    from governor.runtime.model import ClockModel

    clocks = (300.0, 600.0, 900.0)
    model = ClockModel(clocks, (20.0, 40.0, 80.0), (3.0, 1.5, 1.0), 10.0, 600.0, True, "t")
    made = []
    for name, kind in list(policies.POLICIES.items()):
        assert callable(kind.controller) and not isinstance(kind.controller, str), name

        def factory(policy, model, context, real=kind.controller):
            made.append((policy.name, context.interval_s))
            return real(policy, model, context)

        monkeypatch.setitem(policies.POLICIES, name, policies.PolicyKind(kind.policy, factory))
    for name, spec in (
        ("ppw", {}),
        ("max", {}),
        ("clock", {"clock_mhz": 600.0}),
        ("power-cap", {"cap_w": 50.0}),
        ("battery", {"energy_j": 1000.0, "duration_s": 60.0}),
        ("throughput", {"rate_hz": 30.0}),
    ):
        policy = policies.from_spec(dict(spec, policy=name))
        controller = policies.make_controller(policy, model, interval_s=0.25)
        assert controller.initial_mhz() in clocks
    assert made == [
        (name, 0.25) for name in ("ppw", "max", "clock", "power-cap", "battery", "throughput")
    ]


def test_the_daemon_takes_the_policies_and_keys_the_table_gives():
    from governor.runtime.daemon import config

    assert config.POLICIES == ("none",) + tuple(
        name for name, kind in policies.POLICIES.items() if kind.numbers is not None
    )
    assert set(config.POLICIES) == {"none"} | set(policies.NAMES)
    for name, kind in policies.POLICIES.items():
        assert set(kind.numbers or ()) <= set(kind.keys), name  # the policy's own fields
    doc = config.parse_config(
        '[policy]\npolicy = "battery"\nbattery_wh = 10\nhours = 1\n'
        '[[device]]\nuri = "sim:orin-nano"\n',
        "t.toml",
    )
    assert doc.devices[0].policy == {"policy": "battery", "battery_wh": 10.0, "hours": 1.0}
    with pytest.raises(config.ConfigError, match="the battery policy needs hours"):
        config.parse_config(
            '[policy]\npolicy = "battery"\nbattery_wh = 10\n[[device]]\nuri = "sim:orin-nano"\n',
            "t.toml",
        )
