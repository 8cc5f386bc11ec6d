"""The governor node says in its diagnostics what the policy asks that the board cannot do
(WARN, the note, and a 'request not met' value), on a simulated Orin Nano in real time."""

from __future__ import annotations

from ros_helpers import wait_for

import governor
from governor.ros2 import telemetry


def test_a_cap_below_the_least_power_is_a_warning_in_the_diagnostics(ros, board):
    from governor.ros2 import GovernorNode

    node = ros.add(GovernorNode(board, {"policy": "power-cap", "cap_w": 0.1}, context=ros.context))
    probe = ros.probe()
    lowest = board.supported_clocks_mhz()[0]

    def warned():
        status = probe.last_status()
        return status if status is not None and status.level == b"\x01" else None

    status = wait_for(warned, what="a WARN status")
    assert "power cap 0.1 W is below what sim:orin-nano draws at its lowest clock" in (
        status.message
    )
    values = probe.values()
    assert "cannot be met" in values["request not met"]
    assert "cannot be met" in values["notes"]
    with node.lock:
        assert board.state().gpu_clocks_mhz == (lowest, lowest)  # the least it can do


def test_a_met_request_says_no_and_an_unmet_one_warns():
    dev = governor.open_device("sim:orin-nano")
    sample = dev.sample()
    ok = telemetry.device_status(dev, sample, policy="clock", status=telemetry.Governed(unmet=()))
    assert ok["level"] == telemetry.OK
    assert {"key": "request not met", "value": "no"} in ok["values"]
    said = "clock 5000 MHz is above sim:orin-nano's top clock: clamped to 624.75 MHz"
    warn = telemetry.device_status(
        dev, sample, policy="clock", status=telemetry.Governed(unmet=(said,))
    )
    assert warn["level"] == telemetry.WARN and warn["message"] == said
    assert {"key": "request not met", "value": said} in warn["values"]
    dev.close()


def test_a_budget_below_idle_is_a_warning_from_the_start(ros, board):
    """Issue 49: 1 Wh over 10 h is 0.1 W, below what the board draws idle: said when the
    node sets the policy, long before the budget runs out (about 20 minutes in)."""
    from governor.ros2 import GovernorNode

    spec = {"policy": "battery", "battery_wh": 1, "hours": 10}
    ros.add(GovernorNode(board, spec, context=ros.context))
    probe = ros.probe()

    def warned():
        status = probe.last_status()
        return status if status is not None and status.level == b"\x01" else None

    status = wait_for(warned, what="a WARN status")
    assert "0.1 W on average, below what the board draws idle" in status.message
    assert "draws idle" in probe.values()["request not met"]
