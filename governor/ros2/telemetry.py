"""Telemetry as ROS 2 messages, built as plain dictionaries so nothing here needs ROS.

The node turns these into rclpy messages; the MCAP recorder encodes them as they are. Field
names and types follow the shipped definitions (``governor/ros2/interfaces``):

=========================  ======================================  ===========================
topic                      type                                    what
=========================  ======================================  ===========================
``/diagnostics``           ``diagnostic_msgs/msg/DiagnosticArray`` one status per device, 1 Hz
``~/battery``              ``sensor_msgs/msg/BatteryState``        a real battery, or the
                                                                   energy budget as one, 1 Hz
``~/power``                ``std_msgs/msg/Float64``                the governed power (W)
=========================  ======================================  ===========================

Units: power W, clocks MHz, temperature °C, energy J; a battery in V, A and Ah as
``BatteryState`` has them, ``percentage`` 0-1, NaN where nothing was measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Tuple

if TYPE_CHECKING:
    from governor.runtime.governor import Governor

__all__ = [
    "BATTERY_STATE",
    "DIAGNOSTIC_ARRAY",
    "ERROR",
    "FLOAT64",
    "OK",
    "THROTTLING",
    "WARN",
    "Governed",
    "battery_from_budget",
    "battery_from_sysfs",
    "device_status",
    "diagnostic_array",
    "governed",
    "input_voltage_v",
    "no_battery",
    "power_message",
    "stamp",
]

DIAGNOSTIC_ARRAY = "diagnostic_msgs/msg/DiagnosticArray"
BATTERY_STATE = "sensor_msgs/msg/BatteryState"
FLOAT64 = "std_msgs/msg/Float64"

#: diagnostic_msgs/DiagnosticStatus levels
OK, WARN, ERROR = 0, 1, 2

#: throttle reasons that mean the GPU runs slower than it was set to (``idle`` and
#: ``clocks_setting`` are the governor's own doing, not throttling)
THROTTLING = frozenset(
    {"sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake"}
)

# sensor_msgs/BatteryState constants
_STATUS = {"unknown": 0, "charging": 1, "discharging": 2, "not charging": 3, "full": 4}
_HEALTH = {
    "unknown": 0,
    "good": 1,
    "overheat": 2,
    "dead": 3,
    "over voltage": 4,
    "overvoltage": 4,
    "unspecified failure": 5,
    "cold": 6,
    "watchdog timer expire": 7,
    "safety timer expire": 8,
}
_TECHNOLOGY = {"unknown": 0, "nimh": 1, "li-ion": 2, "li-poly": 3, "life": 4, "nicd": 5, "limn": 6}
_DISCHARGING = 2
NAN = float("nan")


def stamp(time_ns: int) -> Dict[str, int]:
    """A ``builtin_interfaces/Time`` from nanoseconds since the epoch."""
    time_ns = int(time_ns)
    return {"sec": time_ns // 1_000_000_000, "nanosec": time_ns % 1_000_000_000}


def _header(time_ns: int, frame_id: str = "") -> Dict[str, Any]:
    return {"stamp": stamp(time_ns), "frame_id": frame_id}


def _fmt(value: Optional[float], spec: str) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return format(value, spec)


def hardware_id(device: Any) -> str:
    """The board's or GPU's own id: its UUID, else its serial, else its identity key."""
    ident = device.identity
    return str(ident.uuid or ident.serial or ident.key or ident.uri)


@dataclass(frozen=True)
class Governed:
    """What the diagnostics say of a running governor: its power figure and the clock it
    set, the budget left, the energy used, the safe hold and what of the policy the board
    cannot meet. Made from the governor's typed records by :func:`governed`."""

    power_w: Optional[float] = None
    clock_mhz: Optional[float] = None
    remaining_j: Optional[float] = None
    energy_j: Optional[float] = None
    safe_hold: bool = False
    safe_hold_reason: Optional[str] = None
    unmet: Tuple[str, ...] = ()


def governed(gov: Governor) -> Governed:
    """The :class:`Governed` of a :class:`~governor.runtime.governor.Governor`."""
    state = gov.state()
    budget = gov.controller.budget_state()
    return Governed(
        power_w=state.power_w,
        clock_mhz=state.clock_mhz,
        remaining_j=budget.remaining_j if budget is not None else None,
        energy_j=gov.totals().energy_j,
        safe_hold=state.safe_hold,
        safe_hold_reason=state.safe_hold_reason,
        unmet=tuple(state.unmet),
    )


def device_status(
    device: Any,
    sample: Any = None,
    *,
    policy: str = "none",
    status: Optional[Governed] = None,
    error: Optional[str] = None,
    extra: Iterable[Tuple[str, str]] = (),
) -> Dict[str, Any]:
    """One ``diagnostic_msgs/DiagnosticStatus`` for ``device``.

    ``sample`` is a fresh :class:`~governor.devices.base.Sample` (None when reading failed,
    then ``error`` says why); ``status`` the governor's (:func:`governed`) when one runs;
    ``policy`` its description. Level: ERROR when the device failed, WARN in safe hold,
    throttled or when the governor cannot meet the policy (``status.unmet``: a cap below the
    board's least power, a budget run out, a clock clamped), else OK.
    """
    status = status or Governed()
    values: List[Tuple[str, str]] = [("policy", policy)]
    power_w = status.power_w
    if power_w is None and sample is not None:
        power_w = sample.power_w
    values.append(("power (W)", _fmt(power_w, ".3f")))
    values.append(("power scope", (sample.power_scope if sample is not None else None) or "n/a"))
    if sample is not None:
        for rail in sample.rails:
            values.append((f"{rail.name} power (W)", _fmt(rail.power_w, ".3f")))
            if rail.voltage_v is not None:
                values.append((f"{rail.name} voltage (V)", _fmt(rail.voltage_v, ".3f")))
    values.append(
        ("gpu clock (MHz)", _fmt(sample.gpu_clock_mhz if sample is not None else None, "g"))
    )
    values.append(("gpu clock set (MHz)", _fmt(status.clock_mhz, "g")))
    if sample is not None and sample.mem_clock_mhz is not None:
        values.append(("memory clock (MHz)", _fmt(sample.mem_clock_mhz, "g")))
    values.append(
        ("gpu temperature (°C)", _fmt(sample.temperature_c if sample is not None else None, ".1f"))
    )
    reasons = sorted(sample.throttle_reasons) if sample is not None else []
    values.append(("throttle reasons", ", ".join(reasons) or "none"))
    values.append(("budget left (J)", _fmt(status.remaining_j, ".1f")))
    values.append(("energy used (J)", _fmt(status.energy_j, ".1f")))
    hold = status.safe_hold
    reason = status.safe_hold_reason or "telemetry failed"
    values.append(("safe hold", f"yes: {reason}" if hold else "no"))
    unmet = list(status.unmet)
    values.append(("request not met", "; ".join(unmet) or "no"))
    values.extend(extra)

    throttled = sorted(set(reasons) & THROTTLING)
    if error:
        level, message = ERROR, error
    elif hold:
        level, message = WARN, f"safe hold: {reason}"
    elif throttled:
        level, message = WARN, f"throttled: {', '.join(throttled)}"
    elif unmet:
        level, message = WARN, unmet[-1]
    else:
        level, message = OK, (f"governing: {policy}" if policy != "none" else "not governing")
    return {
        "level": level,
        "name": f"governor: {device.uri}",
        "message": " ".join(str(message).split()),
        "hardware_id": hardware_id(device),
        "values": [{"key": k, "value": v} for k, v in values],
    }


def diagnostic_array(time_ns: int, statuses: Iterable[Mapping[str, Any]]) -> Dict[str, Any]:
    """A ``diagnostic_msgs/DiagnosticArray`` of ``statuses`` stamped ``time_ns``."""
    return {"header": _header(time_ns), "status": [dict(s) for s in statuses]}


def power_message(power_w: float) -> Dict[str, float]:
    """A ``std_msgs/Float64`` of the governed power (W)."""
    return {"data": float(power_w)}


def input_voltage_v(sample: Any) -> Optional[float]:
    """The board input rail's voltage (V) in ``sample``, None when none is read."""
    if sample is None:
        return None
    for rail in sample.rails:
        if rail.scope == "board input" and rail.voltage_v:
            return float(rail.voltage_v)
    return None


def _battery(time_ns: int, **fields: Any) -> Dict[str, Any]:
    doc: Dict[str, Any] = {
        "header": _header(time_ns),
        "voltage": NAN,
        "temperature": NAN,
        "current": NAN,
        "charge": NAN,
        "capacity": NAN,
        "design_capacity": NAN,
        "percentage": NAN,
        "power_supply_status": 0,
        "power_supply_health": 0,
        "power_supply_technology": 0,
        "present": False,
        "cell_voltage": [],
        "cell_temperature": [],
        "location": "",
        "serial_number": "",
    }
    doc.update(fields)
    return doc


def no_battery(time_ns: int) -> Dict[str, Any]:
    """A ``BatteryState`` saying there is nothing to report (``present`` False, NaNs)."""
    return _battery(time_ns, location="none: no battery read and no energy budget")


def battery_from_budget(
    time_ns: int,
    *,
    budget_j: float,
    remaining_j: float,
    power_w: Optional[float],
    voltage_v: Optional[float],
) -> Dict[str, Any]:
    """The battery policy's energy budget as a ``BatteryState``.

    Energy becomes charge at the board input's voltage ``voltage_v`` (stated in ``voltage``
    and ``location``): ``charge = remaining_j / 3600 / V`` Ah, ``capacity`` the whole
    budget, ``current = -power_w / V`` A. Without a voltage those stay NaN and only
    ``percentage`` (remaining / budget, 0-1) is given.
    """
    budget_j = float(budget_j)
    remaining = max(0.0, float(remaining_j))
    percentage = min(1.0, remaining / budget_j) if budget_j > 0 else NAN
    fields: Dict[str, Any] = {
        "percentage": percentage,
        "power_supply_status": _DISCHARGING,
        "present": True,
    }
    if voltage_v and voltage_v > 0:
        volts = float(voltage_v)
        fields.update(
            voltage=volts,
            charge=remaining / 3600.0 / volts,
            capacity=budget_j / 3600.0 / volts,
            design_capacity=budget_j / 3600.0 / volts,
            current=-float(power_w) / volts if power_w is not None else NAN,
            location=f"governor energy budget, in Ah at the board input's {volts:.3f} V",
        )
    else:
        fields["location"] = "governor energy budget (no board input voltage read: no Ah)"
    return _battery(time_ns, **fields)


def _read(path: Path, name: str) -> Optional[str]:
    try:
        return (path / name).read_text().strip()
    except OSError:
        return None


def _number(path: Path, name: str, scale: float) -> Optional[float]:
    text = _read(path, name)
    try:
        return float(text) * scale if text is not None else None
    except ValueError:
        return None


def battery_from_sysfs(time_ns: int, path: Path) -> Dict[str, Any]:
    """A real battery's ``BatteryState`` from its ``/sys/class/power_supply/NAME`` folder.

    Kernel units are µV, µA, µAh, µWh, tenths of °C and percent; energy-only gauges are
    converted to Ah at ``voltage_now``. The current is made negative while discharging
    (gauges differ in sign).
    """
    path = Path(path)
    volts = _number(path, "voltage_now", 1e-6)
    amps = _number(path, "current_now", 1e-6)
    charge = _number(path, "charge_now", 1e-6)
    full = _number(path, "charge_full", 1e-6)
    design = _number(path, "charge_full_design", 1e-6)
    if charge is None and volts:
        energy = _number(path, "energy_now", 1e-6)  # Wh
        charge = energy / volts if energy is not None else None
        e_full = _number(path, "energy_full", 1e-6)
        full = e_full / volts if e_full is not None else full
        e_design = _number(path, "energy_full_design", 1e-6)
        design = e_design / volts if e_design is not None else design
    status_text = (_read(path, "status") or "unknown").lower()
    status = _STATUS.get(status_text, 0)
    if amps is not None and status == _DISCHARGING:
        amps = -abs(amps)
    capacity_pct = _number(path, "capacity", 0.01)
    if capacity_pct is not None:
        percentage: float = capacity_pct
    elif charge is not None and full:
        percentage = charge / full
    else:
        percentage = NAN
    temperature = _number(path, "temp", 0.1)
    present = _read(path, "present")

    def nan(value: Optional[float]) -> float:
        return NAN if value is None else float(value)

    return _battery(
        time_ns,
        voltage=nan(volts),
        current=nan(amps),
        charge=nan(charge),
        capacity=nan(full),
        design_capacity=nan(design),
        percentage=percentage,
        temperature=nan(temperature),
        power_supply_status=status,
        power_supply_health=_HEALTH.get((_read(path, "health") or "unknown").lower(), 0),
        power_supply_technology=_TECHNOLOGY.get(
            (_read(path, "technology") or "unknown").lower(), 0
        ),
        present=present != "0",
        location=f"sysfs:{path.name}",
        serial_number=_read(path, "serial_number") or "",
    )
