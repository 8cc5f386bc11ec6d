"""The parts of governor.ros2 that need no ROS: parameters, message contents, the shipped
definitions, and that nothing loads rclpy before the node is used."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import governor
from governor.devices.base import Rail
from governor.errors import InvalidRequestError
from governor.ros2 import params, telemetry
from governor.ros2.interfaces import HERE, schema_text
from governor.runtime import policies

# -- parameters ------------------------------------------------------------------------------


def test_numbers_take_ints_and_floats_and_zero_means_not_set():
    assert params.check_value("cap_w", 12) == 12.0
    assert params.check_value("cap_w", 12.5) == 12.5
    assert params.check_value("cap_w", 0) == 0.0
    for bad in (-1, True, "12", float("nan"), float("inf"), 1e9):
        with pytest.raises(InvalidRequestError) as err:
            params.check_value("cap_w", bad)
        assert "\n" not in str(err.value) and "cap_w" in str(err.value)
    with pytest.raises(InvalidRequestError, match="policy must be one of"):
        params.check_value("policy", "warp")


def test_unused_numbers_are_kept_and_ignored():
    values = dict(params.DEFAULTS, policy="power-cap", cap_w=10, rate_hz=30, clock_mhz=500)
    policy, notes = params.make_policy(values)
    assert policy == policies.PowerCap(cap_w=10) and notes == []
    assert params.make_policy(dict(values, policy="none")) == (None, [])
    with pytest.raises(InvalidRequestError, match="the battery policy needs hours"):
        params.make_policy(dict(params.DEFAULTS, policy="battery", battery_wh=5))


def test_scope_is_passed_to_the_battery_policy_and_noted_as_unused_elsewhere():
    values = dict(params.DEFAULTS, policy="ppw", scope="board")
    policy, notes = params.make_policy(values)
    assert isinstance(policy, policies.MaxEfficiency)
    assert len(notes) == 1 and "not used" in notes[0]  # kept, said, ignored
    values = dict(params.DEFAULTS, policy="battery", battery_wh=10.0, hours=1.0, scope="gpu")
    policy, notes = params.make_policy(values)
    assert isinstance(policy, policies.Battery) and policy.scope == "gpu" and notes == []


def test_from_policy_round_trips():
    assert params.from_policy(policies.Battery(energy_j=7200, duration_s=1800))["battery_wh"] == 2
    values = params.from_policy({"policy": "power-cap", "cap_w": None})  # overrides may add it
    assert values["policy"] == "power-cap" and values["cap_w"] == 0.0
    assert params.from_policy(None)["policy"] == "none"


# -- messages --------------------------------------------------------------------------------


@pytest.fixture
def board():
    dev = governor.open_device("sim:orin-nano")
    dev.run_workload("compute")
    yield dev
    dev.close()


def test_status_levels(board):
    sample = board.sample()
    ok = telemetry.device_status(
        board, sample, policy="ppw", status=telemetry.Governed(power_w=5.0)
    )
    assert ok["level"] == telemetry.OK and ok["message"] == "governing: ppw"
    keys = {kv["key"]: kv["value"] for kv in ok["values"]}
    assert keys["power (W)"] == "5.000" and keys["power scope"] == "cpu+gpu+cv"
    assert keys["VDD_IN voltage (V)"] == "5.000"
    hold = telemetry.device_status(
        board,
        sample,
        status=telemetry.Governed(safe_hold=True, safe_hold_reason="power sensor stuck"),
    )
    assert hold["level"] == telemetry.WARN and "power sensor stuck" in hold["message"]
    throttled = replace(sample, throttle_reasons=frozenset({"sw_thermal", "clocks_setting"}))
    warn = telemetry.device_status(board, throttled)
    assert warn["level"] == telemetry.WARN and warn["message"] == "throttled: sw_thermal"
    failed = telemetry.device_status(board, None, error="telemetry failed: i2c timeout")
    assert failed["level"] == telemetry.ERROR and failed["message"].endswith("i2c timeout")
    assert {kv["key"]: kv["value"] for kv in failed["values"]}["gpu clock (MHz)"] == "n/a"


def test_budget_as_a_battery_and_without_a_voltage(board):
    sample = board.sample()
    assert telemetry.input_voltage_v(sample) == 5.0
    doc = telemetry.battery_from_budget(
        10**9, budget_j=7200.0, remaining_j=3600.0, power_w=10.0, voltage_v=5.0
    )
    assert doc["capacity"] == pytest.approx(0.4) and doc["charge"] == pytest.approx(0.2)
    assert doc["percentage"] == 0.5 and doc["current"] == pytest.approx(-2.0)
    assert doc["header"]["stamp"] == {"sec": 1, "nanosec": 0}
    bare = telemetry.battery_from_budget(
        0, budget_j=100.0, remaining_j=-5.0, power_w=None, voltage_v=None
    )
    assert bare["percentage"] == 0.0 and math.isnan(bare["charge"]) and bare["present"]
    no_input = replace(sample, rails=(Rail("GPU", 5.0, "gpu"),))
    assert telemetry.input_voltage_v(no_input) is None


def test_a_real_battery_from_sysfs(tmp_path):
    bat = tmp_path / "BAT0"
    bat.mkdir()
    files = {
        "type": "Battery",
        "status": "Discharging",
        "voltage_now": "14800000",
        "current_now": "1500000",
        "charge_now": "2000000",
        "charge_full": "4000000",
        "charge_full_design": "5000000",
        "capacity": "50",
        "temp": "315",
        "technology": "Li-ion",
        "health": "Good",
        "present": "1",
        "serial_number": "A123",
    }
    for name, text in files.items():
        (bat / name).write_text(text + "\n")
    doc = telemetry.battery_from_sysfs(5, bat)
    assert doc["voltage"] == pytest.approx(14.8) and doc["current"] == pytest.approx(-1.5)
    assert doc["charge"] == pytest.approx(2.0) and doc["capacity"] == pytest.approx(4.0)
    assert doc["design_capacity"] == pytest.approx(5.0) and doc["percentage"] == 0.5
    assert doc["temperature"] == pytest.approx(31.5) and doc["present"] is True
    assert (doc["power_supply_status"], doc["power_supply_health"]) == (2, 1)
    assert doc["power_supply_technology"] == 2 and doc["serial_number"] == "A123"
    for name in ("charge_now", "charge_full", "charge_full_design", "capacity"):
        (bat / name).unlink()
    (bat / "energy_now").write_text("29600000\n")  # 29.6 Wh at 14.8 V = 2 Ah
    (bat / "energy_full").write_text("59200000\n")
    doc = telemetry.battery_from_sysfs(5, bat)
    assert doc["charge"] == pytest.approx(2.0) and doc["percentage"] == pytest.approx(0.5)


# -- shipped definitions ---------------------------------------------------------------------


def _fields(text: str):
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out.append(re.sub(r"\s+", " ", re.sub(r"\s*=\s*", "=", line)))
    return out


def _installed_definition(package: str, name: str):
    """The installed ROS 2 definition: the ament index (a sourced ROS), else the wheels'
    share folder in this environment; None when neither has it."""
    candidates = [Path(sys.prefix) / "share" / package / "msg" / name]
    try:
        from ament_index_python.packages import get_package_share_directory

        candidates.insert(0, Path(get_package_share_directory(package)) / "msg" / name)
    except Exception:
        pass
    return next((c for c in candidates if c.is_file()), None)


@pytest.mark.parametrize("path", sorted(HERE.glob("*/msg/*.msg")), ids=lambda p: p.stem)
def test_shipped_definitions_match_an_installed_ros(path):
    installed = _installed_definition(path.parent.parent.name, path.name)
    if installed is None:
        if sys.version_info >= (3, 10):  # the dev extra installs the ROS 2 wheels here
            raise AssertionError(f"no installed {path.parent.parent.name}/{path.name}")
        pytest.skip("no ROS 2 installed to compare with")
    assert _fields(path.read_text()) == _fields(installed.read_text())


def test_schemas_encode_and_decode_every_message(tmp_path):
    from governor.ros2.recording import Recorder, read_messages

    assert schema_text("diagnostic_msgs/msg/DiagnosticArray").count("MSG: ") == 4
    dev = governor.open_device("sim:orin-nano")
    sample = dev.sample()
    status = telemetry.device_status(dev, sample)
    with Recorder(tmp_path / "x.mcap") as rec:
        rec.write(
            "/diagnostics", telemetry.DIAGNOSTIC_ARRAY, telemetry.diagnostic_array(1, [status]), 1
        )
        rec.write("/b", telemetry.BATTERY_STATE, telemetry.no_battery(2), 2)
        rec.write("/p", telemetry.FLOAT64, telemetry.power_message(3.5), 3)
    rows = list(read_messages(tmp_path / "x.mcap"))
    assert [r[2] for r in rows] == [1, 2, 3]
    assert rows[0][3].status[0].values[0].key == "policy"
    assert rows[1][3].present is False and rows[2][3].data == 3.5
    dev.close()


# -- lazy imports ----------------------------------------------------------------------------


def test_rclpy_and_mcap_load_only_when_used():
    code = (
        "import governor, governor.ros2, governor.ros2.telemetry, governor.ros2.recording, "
        "governor.ros2.params\n"
        "from governor.cli.app import build_app; build_app()\n"
        "import sys, json; print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    loaded = set(json.loads(out.splitlines()[-1]))
    assert not {"rclpy", "mcap", "mcap_ros2", "std_msgs", "diagnostic_msgs"} & loaded
