"""Policies: what the runtime governor aims for, as small frozen validated records.

=================  ==========================================================================
``ppw``            :class:`MaxEfficiency`: the profile's performance-per-watt optimal clock
                   (per workload when the profile calibrated that workload)
``max``            :class:`Performance`: the top clock, for comparison
``clock``          :class:`FixedClock`: one clock (``governor apply --clock``)
``power-cap``      :class:`PowerCap`: the highest clocks whose *measured* power fits ``cap_w``
``battery``        :class:`Battery`: spread ``battery_wh`` (or ``energy_j``) over ``hours``
``throughput``     :class:`Throughput`: keep the app's ``gov.tick()`` rate at ``rate_hz``
                   (optionally while a battery budget lasts a mission: a battery floor)
=================  ==========================================================================

:data:`POLICIES` is the one table of policies: each name with its dataclass and the
controller factory that governs it. The spec keys a policy takes are its dataclass's fields
(a field without a default is required), so :meth:`Policy.to_spec` and :func:`from_spec`
round-trip every field. :func:`from_spec` builds a policy from the plain dictionary the CLI,
the daemon and config files use; every constructor validates and raises
:class:`~governor.errors.InvalidRequestError` with a one-line message.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import (
    Any,
    Callable,
    ClassVar,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Tuple,
    Type,
    Union,
)

from governor.errors import InvalidRequestError
from governor.runtime import factories
from governor.runtime.controller_base import ControlContext, Controller
from governor.runtime.model import ClockModel

#: a controller factory: ``factory(policy, model, context)``; each takes its own policy's
#: dataclass, which the table pairs it with
ControllerFactory = Callable[[Any, ClockModel, ControlContext], Controller]

__all__ = [
    "LIMITS",
    "NAMES",
    "POLICIES",
    "SCOPES",
    "Battery",
    "FieldRule",
    "FixedClock",
    "MaxEfficiency",
    "Performance",
    "Policy",
    "PolicyKind",
    "PowerCap",
    "Throughput",
    "check_number",
    "from_spec",
    "make_controller",
    "seconds_until",
    "spec_problem",
]

#: where a battery budget is metered: the board's input rail, or the device's GPU figure
SCOPES = ("board", "gpu")

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
        shown = format(value, ".15g") if isinstance(value, float) else repr(value)
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


def _budget_j(energy_j: Optional[float], battery_wh: Optional[float]) -> Optional[float]:
    """An energy budget in J from ``energy_j`` or ``battery_wh`` (None: neither given)."""
    if energy_j is not None:
        return energy_j
    return float(battery_wh) * 3600.0 if battery_wh is not None else None


#: how a caller's user writes a spec key (``cap_w`` -> ``--cap-w``); None: they cannot give it
Spelling = Callable[[str], Optional[str]]


@dataclass(frozen=True)
class FieldRule:
    """Which of a policy's optional fields must be given together: exactly one of ``fields``
    (at most one with ``at_most``), checked only when one of ``when`` is given (always when
    ``when`` is empty). ``what`` names what needs them (default: the policy)."""

    fields: Tuple[str, ...]
    at_most: bool = False
    when: Tuple[str, ...] = ()
    what: str = ""

    def problem(self, policy: str, given: Iterable[str], spell: Spelling) -> Optional[str]:
        """Why the fields ``given`` break this rule, spelled by ``spell``; None if they keep it."""
        given = set(given)
        if self.when and not given.intersection(self.when):
            return None
        count = len(given.intersection(self.fields))
        if count == 1 or (self.at_most and count == 0):
            return None
        names = _listed(self.fields, spell, "or")
        who = self.what or f"the {policy} policy"
        if self.at_most:
            return f"{who} takes one of {names}, not both"
        if " or " not in names:  # the caller's user can give only one of them
            return f"{who} needs {names}"
        return f"{who} needs exactly one of {names}"


def _listed(fields: Iterable[str], spell: Spelling, word: str) -> str:
    """``fields`` as the user writes them ("--hours or --until"), each once; the field names
    where none can be written."""
    names: List[str] = []
    for field in fields:
        name = spell(field)
        if name is not None and name not in names:
            names.append(name)
    if not names:
        names = list(fields)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {word} {names[-1]}"


def _as_is(field: str) -> Optional[str]:
    return field


@dataclass(frozen=True)
class Policy:
    """Base of every policy (a frozen dataclass). ``name`` is the ``--policy`` spelling;
    ``rules`` say which optional fields go together (see :class:`FieldRule`)."""

    name = "policy"
    rules: ClassVar[Tuple[FieldRule, ...]] = ()

    def to_spec(self, *, defaults: bool = True) -> Dict[str, Any]:
        """The dictionary :func:`from_spec` turns back into this policy: every field that is
        not None; with ``defaults=False``, only those that differ from their default (what
        a shorter form, such as the ROS 2 node's parameters, must carry)."""
        out: Dict[str, Any] = {"policy": self.name}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is None or not field.init:
                continue
            if not defaults and field.default is not dataclasses.MISSING:
                if value == field.default and type(value) is type(field.default):
                    continue
            out[field.name] = value
        return out

    def describe(self) -> str:
        return self.name

    @property
    def budget_j(self) -> Optional[float]:
        """The policy's energy budget in J (None: none given)."""
        return None

    @property
    def budget_scope(self) -> Optional[str]:
        """Where the policy's energy budget is metered (``board``, ``gpu``) as given; None:
        not given, or no budget."""
        return None

    @property
    def target_s(self) -> Optional[float]:
        """How long the policy's mission lasts in s (None: it has no end)."""
        return None

    @property
    def model_workload(self) -> Optional[str]:
        """The profile's workload whose calibration the clock model is made from (None: the
        profile's own)."""
        return None

    @property
    def requested_clock_mhz(self) -> Optional[float]:
        """The one clock the policy asks for, as asked (None: it chooses)."""
        return None

    @property
    def cap_limit(self) -> Optional[Tuple[float, float]]:
        """(cap in W, the window its mean is kept over in s) of a power cap; None else."""
        return None


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

    @property
    def model_workload(self) -> Optional[str]:
        return self.workload


@dataclass(frozen=True)
class Performance(Policy):
    """The top supported clock (for comparison: what racing costs)."""

    name = "max"


@dataclass(frozen=True)
class FixedClock(Policy):
    """One GPU clock (MHz), snapped to the nearest supported clock."""

    clock_mhz: float
    name = "clock"

    def __post_init__(self) -> None:
        object.__setattr__(self, "clock_mhz", check_number("clock_mhz", self.clock_mhz))

    def describe(self) -> str:
        return f"clock {self.clock_mhz:g} MHz"

    @property
    def requested_clock_mhz(self) -> Optional[float]:
        return self.clock_mhz


@dataclass(frozen=True)
class PowerCap(Policy):
    """Keep the device's power figure at or below ``cap_w`` (W), as fast as that allows.

    ``margin`` is the share of the cap kept free for noise and load steps (default 3 %).
    The cap holds for power averaged over ``window_s`` (1 s, as power-limit firmware
    enforces it); ``dither`` alternates two neighbouring clocks so the mean power reaches
    the cap on coarse clock tables (turn it off to keep every control period under the cap).
    """

    cap_w: float
    margin: float = 0.03
    window_s: float = 1.0
    dither: bool = True
    name = "power-cap"

    def __post_init__(self) -> None:
        object.__setattr__(self, "cap_w", check_number("cap_w", self.cap_w))
        object.__setattr__(self, "margin", _fraction(self.margin, "margin", 0.0, 0.5))
        object.__setattr__(self, "window_s", check_number("window_s", self.window_s))
        if not isinstance(self.dither, bool):
            raise InvalidRequestError(f"dither must be true or false, not {self.dither!r}")

    def describe(self) -> str:
        return f"power-cap {self.cap_w:g} W"

    @property
    def cap_limit(self) -> Optional[Tuple[float, float]]:
        return self.cap_w, self.window_s


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
    rules = (
        FieldRule(("battery_wh", "energy_j"), at_most=True),
        FieldRule(("hours", "duration_s")),
    )

    def __post_init__(self) -> None:
        _check_rules(self)
        if self.scope not in SCOPES:
            raise InvalidRequestError(
                f"scope must be one of {', '.join(SCOPES)}, not {self.scope!r}"
            )
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
        return _budget_j(self.energy_j, self.battery_wh)

    @property
    def target_s(self) -> float:
        """The mission length in s."""
        if self.duration_s is not None:
            return self.duration_s
        return float(self.hours or 0.0) * 3600.0  # __post_init__ saw one of the two

    def describe(self) -> str:
        budget = self.budget_j
        what = "the battery" if budget is None else f"{budget / 3600.0:g} Wh"
        return f"battery {what} over {self.target_s / 3600.0:g} h ({self.scope})"

    @property
    def budget_scope(self) -> Optional[str]:
        return self.scope


def seconds_until(until: str, now: Optional[float] = None) -> float:
    """Seconds from ``now`` (default: the wall clock) to the next local ``HH:MM`` (or
    ``HH:MM:SS``); a time already past today means tomorrow.

    Raises:
        InvalidRequestError: not a time of day.
    """
    import time as _time

    parts = until.split(":") if isinstance(until, str) else []
    try:
        if len(parts) not in (2, 3):
            raise ValueError
        h, m = int(parts[0]), int(parts[1])
        sec = int(parts[2]) if len(parts) == 3 else 0
        if not (0 <= h < 24 and 0 <= m < 60 and 0 <= sec < 60):
            raise ValueError
    except ValueError:
        raise InvalidRequestError(
            f"until must be a local time of day HH:MM (e.g. 18:00), not {until!r}"
        ) from None
    t = _time.time() if now is None else now
    local = _time.localtime(t)
    today = _time.mktime(local[:3] + (h, m, sec) + local[6:8] + (-1,))
    target = today if today > t else _time.mktime(local[:2] + (local[2] + 1, h, m, sec, 0, 0, -1))
    return target - t


#: the fields of a throughput policy's battery floor: any of them asks for one
_FLOOR_KEYS = ("battery_wh", "energy_j", "hours", "duration_s", "until", "scope")


@dataclass(frozen=True)
class Throughput(Policy):
    """Keep the app's progress rate (``gov.tick()`` per frame or step) at ``rate_hz`` with
    the least energy.

    ``margin`` None (the default) learns the headroom from the frames' own spread (their
    ``busy_s``): a clock is chosen so that about 0.5 % of the frames at most would overrun
    their period, half of the 1 % a kept rate allows, and no fixed headroom is paid for.
    A number is the share of each frame period kept free at the slowest recent frame
    instead (``0.1``: every frame within 90 % of its period; no frame late), for an app whose
    frames must never be late or whose load changes faster than a few seconds.

    With a battery floor (``battery_wh`` or ``energy_j``, and ``hours``, ``duration_s`` or
    ``until`` — a local time of day, ``"18:00"``) the rate is kept as long as the budget lasts
    to the end of the mission; when it would not, the clock is held where the budget lasts
    and the rate degrades (frames late or dropped) instead of the battery running out early.
    The budget is metered on ``scope`` (``board`` by default, as for :class:`Battery`).
    """

    rate_hz: float
    margin: Optional[float] = None
    battery_wh: Optional[float] = None
    energy_j: Optional[float] = None
    hours: Optional[float] = None
    duration_s: Optional[float] = None
    until: Optional[str] = None
    scope: Optional[str] = None
    name = "throughput"
    rules = (
        FieldRule(("battery_wh", "energy_j"), when=_FLOOR_KEYS, what="a battery floor"),
        FieldRule(("hours", "duration_s", "until"), when=_FLOOR_KEYS, what="a battery floor"),
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "rate_hz", check_number("rate_hz", self.rate_hz))
        if self.margin is not None:
            object.__setattr__(self, "margin", _fraction(self.margin, "margin", 0.0, 0.9))
        _check_rules(self)
        if all(getattr(self, key) is None for key in _FLOOR_KEYS):
            return
        if self.until is not None:
            seconds_until(self.until)  # checks the spelling
        self.floor(now=0.0 if self.until is None else None)  # checks the numbers

    def floor(self, now: Optional[float] = None) -> Optional[Battery]:
        """The battery floor as a :class:`Battery` policy (None without one); ``until``
        becomes the seconds from ``now`` (the wall clock by default)."""
        if self.battery_wh is None and self.energy_j is None:
            return None
        duration = self.duration_s
        if self.until is not None:
            duration = max(1.0, seconds_until(self.until, now))
        return Battery(
            battery_wh=self.battery_wh,
            energy_j=self.energy_j,
            hours=self.hours,
            duration_s=duration,
            scope=self.scope or "board",
        )

    @property
    def budget_j(self) -> Optional[float]:
        """The battery floor's budget in J; None without one."""
        return _budget_j(self.energy_j, self.battery_wh)

    @property
    def target_s(self) -> Optional[float]:
        """The battery floor's mission length in s (from now, for ``until``)."""
        floor = self.floor()
        return floor.target_s if floor is not None else None

    @property
    def budget_scope(self) -> Optional[str]:
        """The battery floor's scope as given (None: not given, or no floor)."""
        return self.scope

    def describe(self) -> str:
        text = f"throughput {self.rate_hz:g} Hz"
        floor = self.floor() if self.budget_j is not None else None
        if self.budget_j is not None and floor is not None:
            end = f"until {self.until}" if self.until else f"for {floor.target_s / 3600.0:g} h"
            text += f" while {self.budget_j / 3600.0:g} Wh last {end}"
        return text


AnyPolicy = Union[MaxEfficiency, Performance, FixedClock, PowerCap, Battery, Throughput]


def spec_keys(cls: Type[Policy]) -> Tuple[str, ...]:
    """The spec keys ``cls`` takes: its dataclass fields, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)


def required_keys(cls: Type[Policy]) -> Tuple[str, ...]:
    """The spec keys ``cls`` cannot do without: its fields that have no default."""
    missing = dataclasses.MISSING
    return tuple(
        f.name
        for f in dataclasses.fields(cls)
        if f.init and f.default is missing and f.default_factory is missing
    )


@dataclass(frozen=True)
class PolicyKind:
    """One row of :data:`POLICIES`: a policy's dataclass, its controller factory and what
    the other places that take policies need to know of it.

    ``controller`` is called as ``controller(policy, model, context)`` and returns a
    :class:`~governor.runtime.controller_base.Controller` (the factories are in
    :mod:`governor.runtime.factories`; :func:`make_controller` calls them).
    ``numbers``: the numbers a node's configuration takes for it, all required (the node
    daemon's config, :mod:`governor.runtime.daemon.config`, and the ROS 2 node's parameters,
    :mod:`governor.ros2.params`; None: not configured there). ``ticks``: it
    needs the app's progress (``gov.tick()``), so it runs only from the Python API, not
    around a command (``governor run``). ``static``: it comes down to one clock lock that
    needs no control loop, so the daemon can enforce it without the runtime, and a client may
    ask for it when it takes no numbers (:data:`CLIENT_POLICIES`).
    """

    policy: Type[Policy]
    controller: ControllerFactory
    numbers: Optional[Tuple[str, ...]] = ()
    ticks: bool = False
    static: bool = False

    @property
    def has_mission(self) -> bool:
        """Whether it spends a budget over a mission that ``--until`` can end."""
        return "battery_wh" in self.keys

    @property
    def keys(self) -> Tuple[str, ...]:
        return spec_keys(self.policy)

    @property
    def required(self) -> Tuple[str, ...]:
        return required_keys(self.policy)


#: Every policy: ``--policy`` name -> its dataclass, controller factory and the numbers a
#: node's configuration takes. The one place a policy is registered; :data:`NAMES`, the spec keys, the
#: controllers, the daemon's config and the CLI's choices follow from it.
POLICIES: Dict[str, PolicyKind] = {
    kind.policy.name: kind
    for kind in (
        PolicyKind(MaxEfficiency, factories.ppw_controller, static=True),
        PolicyKind(Performance, factories.top_clock_controller, static=True),
        PolicyKind(PowerCap, factories.power_cap_controller, numbers=("cap_w",)),
        PolicyKind(Battery, factories.battery_controller, numbers=("battery_wh", "hours")),
        PolicyKind(Throughput, factories.throughput_controller, numbers=("rate_hz",), ticks=True),
        PolicyKind(
            FixedClock, factories.fixed_clock_controller, numbers=("clock_mhz",), static=True
        ),
    )
}

#: policy names accepted by :func:`from_spec` (and ``--policy``)
NAMES: Tuple[str, ...] = tuple(POLICIES)

#: the policies a node daemon's client may ask for with "apply" unless its configuration
#: says otherwise: the static ones that take no numbers (ppw, max)
CLIENT_POLICIES: Tuple[str, ...] = tuple(
    name for name, kind in POLICIES.items() if kind.static and not kind.numbers
)

_ALL_KEYS = frozenset(key for kind in POLICIES.values() for key in kind.keys) | {"policy"}


def from_spec(spec: Union[Mapping[str, Any], Policy]) -> Policy:
    """A policy from ``{"policy": NAME, ...options}`` (a Policy is returned as is).

    The options are the policy's dataclass fields: ``cap_w``, ``margin``, ``window_s``,
    ``dither`` (power-cap); ``battery_wh`` or ``energy_j`` with ``hours`` or ``duration_s``,
    ``reserve``, ``scope`` (battery); ``rate_hz``, ``margin`` and an optional battery floor:
    ``battery_wh`` or ``energy_j`` and ``hours``, ``duration_s`` or ``until``, ``scope``
    (throughput); ``clock_mhz`` (clock); ``workload`` (ppw). Options that are None are ignored;
    options that do not belong to the policy are refused.

    Raises:
        InvalidRequestError: unknown policy, unknown or missing option, bad value.
    """
    if isinstance(spec, Policy):
        return spec
    if not isinstance(spec, Mapping):
        raise InvalidRequestError(f"a policy spec must be a mapping, not {type(spec).__name__}")
    problem = spec_problem(spec)
    if problem is not None:
        raise InvalidRequestError(problem)
    given = {k: v for k, v in spec.items() if v is not None}
    return POLICIES[given.pop("policy")].policy(**given)


def spec_problem(spec: Mapping[str, Any], spell: Optional[Spelling] = None) -> Optional[str]:
    """Why ``spec`` cannot make a policy whatever its values: an unknown policy or option, an
    option of another policy, a required one missing, or a :class:`FieldRule` broken; None
    when the keys given (those not None) make one. The message writes each key as ``spell``
    does (the CLI: its options, ``cap_w`` -> ``--cap-w``; default: the key itself) and
    ``spell("policy")`` for the policy's own key."""
    say = spell or _as_is
    given = {str(k) for k, v in spec.items() if v is not None}
    unknown = sorted(given - _ALL_KEYS)
    if unknown:
        return f"unknown policy option(s) {_listed(unknown, say, 'and')}"
    name = spec.get("policy")
    kind = POLICIES.get(name) if isinstance(name, str) else None
    if kind is None:
        return f"unknown {say('policy') or 'policy'} {name!r}; choose one of {', '.join(NAMES)}"
    given.discard("policy")
    extra = sorted(given - set(kind.keys))
    if extra:
        verb = "does" if len(extra) == 1 else "do"
        owners = [n for n, k in POLICIES.items() if set(extra) <= set(k.keys)]
        where = ""
        if owners:
            pick = say("policy") or "policy"
            they = "it is" if len(extra) == 1 else "they are"
            where = f"; {they} for {pick} " + " or ".join(owners)
        return f"{_listed(extra, say, 'and')} {verb} not apply to the {name} policy{where}"
    missing = [key for key in kind.required if key not in given]
    if missing:
        return f"the {name} policy needs {_listed(missing, say, 'and')}"
    for rule in kind.policy.rules:
        problem = rule.problem(kind.policy.name, given, say)
        if problem is not None:
            return problem
    return None


def _check_rules(policy: Policy) -> None:
    """Raise when ``policy``'s fields break one of its :class:`FieldRule` s.

    Raises:
        InvalidRequestError: the first rule broken, in the fields' own names.
    """
    given = [f.name for f in dataclasses.fields(policy) if getattr(policy, f.name) is not None]
    for rule in policy.rules:
        problem = rule.problem(policy.name, given, _as_is)
        if problem is not None:
            raise InvalidRequestError(problem)


def make_controller(
    policy: Policy,
    model: ClockModel,
    *,
    interval_s: float,
    battery: Optional[Callable[[], float]] = None,
    energy_counter: bool = False,
    kept_ppw: Optional[Callable[[Optional[str]], Optional[Dict[str, Any]]]] = None,
    mem_clock_mhz: Optional[float] = None,
) -> Controller:
    """The controller of ``policy``, made by the factory its row of :data:`POLICIES` holds.
    ``energy_counter``: whether the device meters energy; ``battery``: a reader of the
    remaining energy; ``kept_ppw``: the PPW clocks earlier runs found; ``mem_clock_mhz``:
    the device's memory clock now (see
    :class:`~governor.runtime.controller_base.ControlContext`).

    Raises:
        TypeError: ``policy`` is not the dataclass its name registers.
    """
    kind = POLICIES.get(policy.name)
    if kind is None or not isinstance(policy, kind.policy):
        raise TypeError(f"no controller for {policy!r}")
    context = ControlContext(
        interval_s=interval_s,
        energy_counter=energy_counter,
        battery=battery,
        kept_ppw=kept_ppw,
        mem_clock_mhz=mem_clock_mhz,
    )
    return kind.controller(policy, model, context)
