"""Rules of the calibration procedure that a wrong operator would break unnoticed
(scripts/mutation.py found them): argument checks, the probe budget under a power limit,
probe records round-tripping, the result's time model."""

from __future__ import annotations

import pytest

import governor
from governor.calibrate.loads import make_load
from governor.calibrate.procedure import DeviceProber, Probe, calibrate
from governor.errors import InvalidRequestError


@pytest.fixture
def nano():
    with governor.open_device("sim:nano") as dev:
        yield dev


@pytest.mark.parametrize(
    "kwargs",
    [
        {"window_s": 0.0},
        {"min_settle_s": -0.1},
        {"min_settle_s": 3.0, "max_settle_s": 2.0},
        {"idle_s": -1.0},
    ],
)
def test_bad_windows_are_refused(nano, kwargs):
    with pytest.raises(InvalidRequestError, match="calibration windows must be positive"):
        DeviceProber(nano, make_load(nano, "builtin"), **kwargs)


def test_edge_windows_are_accepted(nano):
    # zero settle and zero idle are allowed; max == min is allowed
    DeviceProber(nano, make_load(nano, "builtin"), min_settle_s=0.0, max_settle_s=0.0, idle_s=0.0)


def test_a_probe_record_round_trips_with_its_throttle_reasons():
    probe = Probe(1410.0, 1350.0, 300.0, 0.5, 71.0, ("sw_power_cap",), "throttled", 1.5, "energy")
    again = Probe.from_dict(probe.to_dict())
    assert again == probe and again.throttled and again.throttle_reasons == ("sw_power_cap",)


@pytest.mark.parametrize("budget", [4, 5, 6])
def test_the_probe_budget_holds_on_a_power_limited_board(budget):
    """The simulated T4 runs into its 70 W limit at its top clocks: the procedure looks for
    unthrottled clocks below the cap, but never past the budget."""
    with governor.open_device("sim:t4") as dev:
        result = calibrate(DeviceProber(dev, make_load(dev, "builtin")), max_probes=budget)
    assert any(p.throttled for p in result.probes)
    assert len(result.probes) == budget
    assert sum(not p.throttled for p in result.probes) >= 3


def test_the_result_s_time_is_its_time_model_s(nano):
    result = calibrate(DeviceProber(nano, make_load(nano, "builtin")))
    for clock in nano.supported_clocks_mhz():
        assert result.time_per_unit_s(clock) == result.time_model.time_s(clock)
        assert result.energy_per_unit_j(clock) == pytest.approx(
            result.power_model.power_w(clock) * result.time_model.time_s(clock)
        )
