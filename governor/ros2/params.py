"""The node's ROS parameters and the policy they make (plain Python: no ROS needed).

=============  ========  ==================================================================
parameter      unit      meaning
=============  ========  ==================================================================
``policy``               ``ppw``, ``max``, ``power-cap``, ``battery``, ``throughput``,
                         ``clock``, or ``none`` (hold the device at its own settings)
``cap_w``      W         power-cap: the cap
``battery_wh`` Wh        battery: the energy budget (throughput: its battery floor's)
``hours``      h         battery: how long it must last (throughput: its battery floor's)
``rate_hz``    Hz        throughput: the frame rate to keep
``clock_mhz``  MHz       clock: the GPU clock
``scope``                which power figure to govern (passed to the runtime where it takes it)
=============  ========  ==================================================================

Numbers accept integers and floats; 0 means "not set". A number the policy does not use is
kept and ignored. :func:`make_policy` turns the full set into a policy or one line saying
why not.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Tuple

from governor.errors import InvalidRequestError
from governor.runtime import policies

__all__ = ["DEFAULTS", "NUMBERS", "POLICIES", "USES", "check_value", "make_policy", "from_policy"]

#: ``policy`` values: the runtime's policies, and ``none``
POLICIES = tuple(policies.NAMES) + ("none",)

#: number parameters and their units
NUMBERS = {"cap_w": "W", "battery_wh": "Wh", "hours": "hours", "rate_hz": "Hz", "clock_mhz": "MHz"}

#: which numbers each policy uses
USES: Dict[str, Tuple[str, ...]] = {
    name: kind.numbers or () for name, kind in policies.POLICIES.items()
}
USES["none"] = ()

#: numbers a policy takes when they are set: the throughput policy's battery floor
OPTIONAL: Dict[str, Tuple[str, ...]] = {"throughput": ("battery_wh", "hours")}

DEFAULTS: Dict[str, Any] = {
    "policy": "ppw",
    "cap_w": 0.0,
    "battery_wh": 0.0,
    "hours": 0.0,
    "rate_hz": 0.0,
    "clock_mhz": 0.0,
    "scope": "",
}


def check_value(name: str, value: Any) -> Any:
    """``value`` for parameter ``name``, normalised (numbers as float, 0 for not set).

    Raises:
        InvalidRequestError: wrong type or an implausible number (one line).
    """
    if name == "policy":
        if not isinstance(value, str) or value not in POLICIES:
            raise InvalidRequestError(f"policy must be one of {', '.join(POLICIES)}, not {value!r}")
        return value
    if name == "scope":
        if not isinstance(value, str):
            raise InvalidRequestError(f"scope must be a string, not {value!r}")
        return value.strip()
    if name in NUMBERS:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidRequestError(
                f"{name} must be a number of {NUMBERS[name]} (0 for not set), not {value!r}"
            )
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidRequestError(f"{name} must be a finite number of {NUMBERS[name]}")
        if value == 0:
            return 0.0
        return policies.check_number(name, value)
    raise InvalidRequestError(f"unknown parameter {name!r}")


def from_policy(policy: Any) -> Dict[str, Any]:
    """The parameter values that describe ``policy`` (a Policy, a spec dict, a name or None).

    Not validated here: ROS parameter overrides may still complete it (``--policy power-cap
    --ros-args -p cap_w:=12``); :func:`make_policy` checks the result.
    """
    values = dict(DEFAULTS)
    if policy is None:
        policy = "none"
    if isinstance(policy, str):
        policy = {"policy": policy}
    # a policy's defaults need no parameter; any other option the node cannot carry is an
    # error below, never dropped (the node would run another policy)
    if isinstance(policy, policies.Policy):
        spec = policy.to_spec(defaults=False)
    else:
        spec = dict(policy)
    values["policy"] = spec.pop("policy", DEFAULTS["policy"])
    for key, value in spec.items():
        if value is None:
            continue
        if key in NUMBERS:
            values[key] = value
        elif key == "energy_j":
            values["battery_wh"] = float(value) / 3600.0
        elif key == "duration_s":
            values["hours"] = float(value) / 3600.0
        elif key == "scope":
            values["scope"] = value
        else:
            raise InvalidRequestError(f"the ROS node takes no {key} option")
    return values


def make_policy(values: Mapping[str, Any]) -> Tuple[Optional[policies.Policy], List[str]]:
    """The policy the parameters ask for (None for ``none``) and notes on what was ignored.

    ``scope`` is passed to the runtime when it takes a ``scope`` option; otherwise it is kept
    and noted as not supported yet (or as not used by this policy).

    Raises:
        InvalidRequestError: a bad value, or a policy missing a number it needs (one line).
    """
    merged = dict(DEFAULTS)
    merged.update(values)
    for key in list(merged):
        if key in DEFAULTS:
            merged[key] = check_value(key, merged[key])
    name = merged["policy"]
    if name == "none":
        return None, []
    spec: Dict[str, Any] = {"policy": name}
    for key in USES[name]:
        if merged[key]:
            spec[key] = merged[key]
    for key in OPTIONAL.get(name, ()):
        if merged[key]:
            spec[key] = merged[key]
    missing = [key for key in USES[name] if not merged[key]]
    if missing:
        raise InvalidRequestError(f"the {name} policy needs {' and '.join(missing)}")
    notes: List[str] = []
    scope = merged["scope"]
    if scope:
        try:
            return policies.from_spec(dict(spec, scope=scope)), notes
        except InvalidRequestError as err:
            text = str(err)
            if "unknown policy option" in text and "scope" in text:
                notes.append(f"scope {scope!r} is kept but not supported by this runtime yet")
            elif ("not apply" in text or "battery floor" in text) and "scope" in text:
                notes.append(f"scope {scope!r} is kept but not used by the {name} policy")
            else:
                raise
    return policies.from_spec(spec), notes
