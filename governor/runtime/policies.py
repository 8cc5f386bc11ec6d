"""Policies: what the runtime governor aims for, as small frozen validated records.

=================  ==========================================================================
``ppw``            :class:`MaxEfficiency`: the profile's performance-per-watt optimal clock
                   (per workload when the profile calibrated that workload)
``max``            :class:`Performance`: the top clock, for comparison
``clock``          :class:`FixedClock`: one clock (``governor apply --clock``)
``power-cap``      :class:`PowerCap`: the highest clocks whose *measured* power fits ``cap_w``
``battery``        :class:`Battery`: spread ``battery_wh`` (or ``energy_j``) over ``hours``
``throughput``     :class:`Throughput`: keep the app's ``gov.tick()`` rate at ``rate_hz``
=================  ==========================================================================

:func:`from_spec` builds one from the plain dictionary the CLI, the daemon and config files
use; every constructor validates and raises :class:`~governor.errors.InvalidRequestError`
with a one-line message.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from governor.errors import InvalidRequestError

__all__ = [
    "LIMITS",
    "NAMES",
    "SCOPES",
    "Battery",
    "FixedClock",
    "MaxEfficiency",
    "Performance",
    "Policy",
    "PowerCap",
    "Throughput",
    "check_number",
    "from_spec",
]

#: where a battery budget is metered: the board's input rail, or the device's GPU figure
SCOPES = ("board", "gpu")

#: the battery keys a throughput policy takes for its battery floor
_FLOOR_KEYS = {"battery_wh", "energy_j", "hours", "duration_s", "scope"}

#: policy names accepted by :func:`from_spec` (and ``--policy``)
NAMES = ("ppw", "max", "power-cap", "battery", "throughput", "clock")

_SPEC_KEYS = {
    "policy",
    "cap_w",
    "battery_wh",
    "energy_j",
    "hours",
    "duration_s",
    "rate_hz",
    "clock_mhz",
    "workload",
    "margin",
    "scope",
}


#: Each positive number a policy takes: its unit and the largest plausible value. The CLI
#: checks the options that carry these quantities against this table (governor.cli.values).
LIMITS: Dict[str, Tuple[str, float]] = {
    "clock_mhz": ("MHz", 1e5),
    "cap_w": ("W", 1e5),
    "battery_wh": ("Wh", 1e6),
    "energy_j": ("J", 3.6e9),
    "hours": ("hours", 24 * 365),
    "duration_s": ("seconds", 3.2e7),
    "rate_hz": ("Hz", 1e6),
    "window_s": ("seconds", 3600),
}


def check_number(key: str, value: Any, what: Optional[str] = None) -> float:
    """``value`` as a float, if it is a plausible ``key`` of :data:`LIMITS` (finite, > 0, at
    most the limit). ``what`` names it in the message (default: ``key``).

    Raises:
        InvalidRequestError: not a number, not finite, not positive, or above the limit.
    """
    unit, hi = LIMITS[key]
    name = what or key
    if isinstance(value, bool):
        raise InvalidRequestError(f"{name} must be a number of {unit}, not {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidRequestError(f"{name} must be a number of {unit}, not {value!r}") from None
    if not (math.isfinite(number) and 0 < number <= hi):
        shown = format(value, "g") if isinstance(value, float) else repr(value)
        raise InvalidRequestError(
            f"{name} must be a finite number of {unit} > 0 and <= {int(hi)}, not {shown}"
        )
    return number


def _fraction(value: Any, what: str, lo: float, hi: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidRequestError(f"{what} must be a number, not {value!r}") from None
    if not (lo <= number <= hi):
        raise InvalidRequestError(f"{what} must be within {lo:g}..{hi:g}, not {value!r}")
    return number


class Policy:
    """Base of every policy. ``name`` is the ``--policy`` spelling."""

    name = "policy"

    def to_spec(self) -> Dict[str, Any]:
        """The dictionary :func:`from_spec` turns back into this policy."""
        out: Dict[str, Any] = {"policy": self.name}
        for key, value in vars(self).items():
            if value is not None and key in _SPEC_KEYS:
                out[key] = value
        return out

    def describe(self) -> str:
        return self.name


@dataclass(frozen=True)
class MaxEfficiency(Policy):
    """The most work per joule: the profile's PPW-optimal clock.

    ``workload`` picks a calibration kept under the profile's ``workloads`` (``builtin``,
    ``memory``, ``command:...``); None uses the top-level (built-in load) optimum.
    """

    workload: Optional[str] = None
    name = "ppw"

    def __post_init__(self) -> None:
        if self.workload is not None and (not isinstance(self.workload, str) or not self.workload):
            raise InvalidRequestError(f"workload must be a non-empty name, not {self.workload!r}")

    def describe(self) -> str:
        return "ppw" + (f" ({self.workload})" if self.workload else "")


@dataclass(frozen=True)
class Performance(Policy):
    """The top supported clock (for comparison: what racing costs)."""

    name = "max"


@dataclass(frozen=True)
class FixedClock(Policy):
    """One GPU clock (MHz), snapped to the nearest supported clock."""

    clock_mhz: float = 0.0
    name = "clock"

    def __post_init__(self) -> None:
        object.__setattr__(self, "clock_mhz", check_number("clock_mhz", self.clock_mhz))

    def describe(self) -> str:
        return f"clock {self.clock_mhz:g} MHz"


@dataclass(frozen=True)
class PowerCap(Policy):
    """Keep the device's power figure at or below ``cap_w`` (W), as fast as that allows.

    ``margin`` is the share of the cap kept free for noise and load steps (default 3 %).
    The cap holds for power averaged over ``window_s`` (1 s, as power-limit firmware
    enforces it); ``dither`` alternates two neighbouring clocks so the mean power reaches
    the cap on coarse clock tables (turn it off to keep every control period under the cap).
    """

    cap_w: float = 0.0
    margin: float = 0.03
    window_s: float = 1.0
    dither: bool = True
    name = "power-cap"

    def __post_init__(self) -> None:
        object.__setattr__(self, "cap_w", check_number("cap_w", self.cap_w))
        object.__setattr__(self, "margin", _fraction(self.margin, "margin", 0.0, 0.5))
        object.__setattr__(self, "window_s", check_number("window_s", self.window_s))

    def describe(self) -> str:
        return f"power-cap {self.cap_w:g} W"


@dataclass(frozen=True)
class Battery(Policy):
    """Make an energy budget last ``hours`` (or ``duration_s``) doing as much work as possible.

    The budget is ``battery_wh`` (Wh) or ``energy_j`` (J), metered on ``scope``: ``"board"``
    (the default: the board's input, which is what a robot's battery feeds) or ``"gpu"`` (the
    device's GPU figure). With neither, the governor needs a battery reader (a callable
    returning the remaining J, or :class:`governor.runtime.battery.SysfsBattery`, which the
    CLI uses when ``/sys/class/power_supply`` has a battery) and the budget is what it holds.
    ``reserve`` is the share kept back so the mission surely lasts: of the battery's full
    capacity when a battery is read (default 1 %), else of the budget (default none: the
    budget is what may be spent, and the governor meters it itself).
    """

    battery_wh: Optional[float] = None
    hours: Optional[float] = None
    energy_j: Optional[float] = None
    duration_s: Optional[float] = None
    reserve: Optional[float] = None
    scope: str = "board"
    name = "battery"

    def __post_init__(self) -> None:
        if self.battery_wh is not None and self.energy_j is not None:
            raise InvalidRequestError(
                "the battery policy takes exactly one of battery_wh (Wh) or energy_j (J), not both"
            )
        if self.scope not in SCOPES:
            raise InvalidRequestError(
                f"scope must be one of {', '.join(SCOPES)}, not {self.scope!r}"
            )
        if (self.hours is None) == (self.duration_s is None):
            raise InvalidRequestError("the battery policy needs exactly one of hours or duration_s")
        if self.battery_wh is not None:
            object.__setattr__(self, "battery_wh", check_number("battery_wh", self.battery_wh))
        if self.energy_j is not None:
            object.__setattr__(self, "energy_j", check_number("energy_j", self.energy_j))
        if self.hours is not None:
            object.__setattr__(self, "hours", check_number("hours", self.hours))
        if self.duration_s is not None:
            object.__setattr__(self, "duration_s", check_number("duration_s", self.duration_s))
        if self.reserve is not None:
            object.__setattr__(self, "reserve", _fraction(self.reserve, "reserve", 0.0, 0.5))

    @property
    def budget_j(self) -> Optional[float]:
        """The energy budget in J; None when the battery itself is the budget."""
        if self.energy_j is not None:
            return self.energy_j
        return float(self.battery_wh) * 3600.0 if self.battery_wh is not None else None

    @property
    def target_s(self) -> float:
        """The mission length in s."""
        return self.duration_s if self.duration_s is not None else float(self.hours) * 3600.0  # type: ignore[arg-type]

    def describe(self) -> str:
        budget = self.budget_j
        what = "the battery" if budget is None else f"{budget / 3600.0:g} Wh"
        return f"battery {what} over {self.target_s / 3600.0:g} h ({self.scope})"


@dataclass(frozen=True)
class Throughput(Policy):
    """Keep the app's progress rate (``gov.tick()`` per frame or step) at ``rate_hz`` with
    the least energy. ``margin`` is the share of each frame period kept free (default 10 %).

    ``floor``, a :class:`Battery`, adds a battery floor: the rate is kept while the budget
    allows it to last the mission; when it does not, the clock never goes above what the
    battery plan allows, so the mission lasts and the rate degrades gradually ("keep 30 Hz
    as long as the battery lasts until 18:00"). Spec: the battery keys beside ``rate_hz``.
    """

    rate_hz: float = 0.0
    margin: float = 0.10
    floor: Optional[Battery] = None
    name = "throughput"

    def __post_init__(self) -> None:
        object.__setattr__(self, "rate_hz", check_number("rate_hz", self.rate_hz))
        object.__setattr__(self, "margin", _fraction(self.margin, "margin", 0.0, 0.9))
        if self.floor is not None and not isinstance(self.floor, Battery):
            raise InvalidRequestError("a throughput policy's floor must be a Battery policy")

    @property
    def scope(self) -> Optional[str]:
        """Where the battery floor meters its budget (None without a floor)."""
        return self.floor.scope if self.floor is not None else None

    def to_spec(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"policy": self.name, "rate_hz": self.rate_hz, "margin": self.margin}
        if self.floor is not None:
            out.update({k: v for k, v in self.floor.to_spec().items() if k != "policy"})
        return out

    def describe(self) -> str:
        text = f"throughput {self.rate_hz:g} Hz"
        if self.floor is not None:
            text += " with a floor of " + self.floor.describe()
        return text


AnyPolicy = Union[MaxEfficiency, Performance, FixedClock, PowerCap, Battery, Throughput]


def from_spec(spec: Union[Mapping[str, Any], Policy]) -> Policy:
    """A policy from ``{"policy": NAME, ...options}`` (a Policy is returned as is).

    Options: ``cap_w`` (power-cap), ``battery_wh`` or ``energy_j`` with ``hours`` or
    ``duration_s`` (battery), ``rate_hz`` (throughput; with the battery keys, a battery
    floor), ``clock_mhz`` (clock), ``workload`` (ppw), ``margin`` (power-cap, throughput). Options that are None are ignored; options
    that do not belong to the policy are refused.

    Raises:
        InvalidRequestError: unknown policy, unknown or missing option, bad value.
    """
    if isinstance(spec, Policy):
        return spec
    if not isinstance(spec, Mapping):
        raise InvalidRequestError(f"a policy spec must be a mapping, not {type(spec).__name__}")
    given = {k: v for k, v in spec.items() if v is not None}
    unknown = sorted(set(given) - _SPEC_KEYS)
    if unknown:
        raise InvalidRequestError(f"unknown policy option(s) {', '.join(unknown)}")
    name = given.pop("policy", None)
    if name not in NAMES:
        raise InvalidRequestError(f"unknown policy {name!r}; choose one of {', '.join(NAMES)}")
    allowed = {
        "ppw": {"workload"},
        "max": set(),
        "clock": {"clock_mhz"},
        "power-cap": {"cap_w", "margin"},
        "battery": {"battery_wh", "energy_j", "hours", "duration_s", "scope"},
        "throughput": {"rate_hz", "margin"} | _FLOOR_KEYS,
    }[name]
    extra = sorted(set(given) - allowed)
    if extra:
        raise InvalidRequestError(f"option(s) {', '.join(extra)} do not apply to the {name} policy")
    required = {"clock": "clock_mhz", "power-cap": "cap_w", "throughput": "rate_hz"}.get(name)
    if required and required not in given:
        raise InvalidRequestError(f"the {name} policy needs {required}")
    if name == "ppw":
        return MaxEfficiency(**given)
    if name == "max":
        return Performance()
    if name == "clock":
        return FixedClock(**given)
    if name == "power-cap":
        return PowerCap(**given)
    if name == "battery":
        return Battery(**given)
    floor = {k: given.pop(k) for k in _FLOOR_KEYS if k in given}
    if floor:
        if set(floor) == {"scope"}:
            raise InvalidRequestError(
                "scope applies to the throughput policy's battery floor: give hours (or "
                "duration_s) and battery_wh (or energy_j) with it"
            )
        try:
            given["floor"] = Battery(**floor)
        except InvalidRequestError as err:
            raise InvalidRequestError(f"battery floor: {err}") from None
    return Throughput(**given)
