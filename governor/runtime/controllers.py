"""The decision each policy makes once per control period: which GPU clock to hold next.

A controller sees an :class:`Observation` (the power measured over the period just ended,
the clock it ran at) and the app's ticks, and returns the next clock and whether the change
is urgent (lowering power under a cap, raising the clock for a missed rate: never delayed by
the rate limiter). Controllers are plain state machines with no threads and no device, so the
same code runs in the background thread, in deterministic stepping and in tests.

The shared pieces (:class:`Observation`, :class:`Tick`, :class:`Controller`,
:class:`PowerTracker`) live in :mod:`governor.runtime.controller_base`; the battery controller
in :mod:`governor.runtime.battery_controller`, the throughput controller in
:mod:`governor.runtime.throughput_controller`. All are re-exported here.
"""

from __future__ import annotations

import collections
import importlib
from typing import Any, Callable, Deque, Dict, Optional, Sequence, Set, Tuple

from governor.runtime.battery_controller import BatteryController
from governor.runtime.controller_base import (
    ControlContext,
    Controller,
    Observation,
    PowerTracker,
    StaticController,
    Tick,
)
from governor.runtime.floor_controller import FloorThroughputController
from governor.runtime.model import ClockModel
from governor.runtime.policies import (
    POLICIES,
    Battery,
    FixedClock,
    MaxEfficiency,
    Performance,
    Policy,
    PowerCap,
    Throughput,
)
from governor.runtime.ppw_local import PriorPpwController
from governor.runtime.throughput_controller import ThroughputController

__all__ = [
    "BatteryController",
    "ControlContext",
    "Controller",
    "FloorThroughputController",
    "Observation",
    "PowerTracker",
    "PriorPpwController",
    "StaticController",
    "Tick",
    "ThroughputController",
    "make_controller",
]


class PowerCapController(Controller):
    """Highest clocks whose measured power fits the cap (see module docstring)."""

    TRIM_GAIN = 0.05  # per period, of the gap between the target and the window's mean

    def __init__(self, model: ClockModel, policy: PowerCap, interval_s: float) -> None:
        super().__init__(model)
        self.policy = policy
        self.tracker = PowerTracker(model, policy.dither)
        self.interval_s = interval_s
        self.window: Deque[Tuple[float, float]] = collections.deque()  # (dt_s, power_w)
        self._span_s = 0.0  # running sums over the window: its length and energy
        self._energy_j = 0.0
        self.fit_clocks: Set[float] = set()
        self.target_w = policy.cap_w * (1.0 - policy.margin)
        self.limit_w = policy.cap_w * (1.0 - policy.margin / 3.0)
        self.last_power_w: Optional[float] = None
        self.trim_w = 0.0
        self.trim_max_w = (self.limit_w - self.target_w) / 2.0

    def initial_mhz(self) -> float:
        if not self.model.fitted:  # no absolute scale yet: start low and climb once measured
            return self.model.clocks_mhz[0]
        return self.tracker.clock_for(self.target_w, carry=False)

    def decide(
        self, obs: Observation, ticks: Sequence[Tick], current_mhz: float
    ) -> Tuple[float, bool]:
        if obs.power_w is None:
            return current_mhz, False
        self.last_power_w = obs.power_w
        self.tracker.learn(obs.power_w, obs.applied_mhz)
        if obs.power_w <= self.policy.cap_w:
            self.fit_clocks.add(obs.applied_mhz)
        window = self.window
        window.append((obs.dt_s, obs.power_w))
        self._span_s += obs.dt_s
        self._energy_j += obs.dt_s * obs.power_w
        while window and self._span_s - window[0][0] >= self.policy.window_s:
            dt_old, p_old = window.popleft()
            self._span_s -= dt_old
            self._energy_j -= dt_old * p_old
        if not window or len(window) == 1:  # no drift from the running sums: start afresh
            self._span_s = sum(dt for dt, _ in window)
            self._energy_j = sum(dt * p for dt, p in window)
        span = self._span_s
        # what the next period may use so the window average stays under the limit
        # (the newest `horizon` seconds of the window: all of it but its oldest excess)
        horizon = max(self.policy.window_s - self.interval_s, 0.0)
        used, covered = self._energy_j, span
        excess = span - horizon
        for dt, power in window:
            if excess <= 0:
                break
            drop = min(dt, excess)
            used -= power * drop
            covered -= drop
            excess -= drop
        allowed_w = (self.limit_w * (covered + self.interval_s) - used) / self.interval_s
        # slow integral trim for what the correction cannot see (the model's shape between
        # two dithered clocks); frozen while demand, not the cap, limits (anti-windup)
        mean_w = self._energy_j / span if span > 0 else obs.power_w
        limited = obs.applied_mhz < self.model.top_mhz or mean_w > self.target_w
        if limited and span >= 0.99 * self.policy.window_s:
            cap = self.policy.cap_w
            self.trim_w = min(
                self.trim_max_w,
                max(-0.2 * cap, self.trim_w + self.TRIM_GAIN * (self.target_w - mean_w)),
            )
        goal_w = self.target_w + self.trim_w
        if allowed_w < goal_w:
            clock = self.tracker.clock_for(allowed_w, carry=False)
        else:
            clock = self.tracker.clock_for(goal_w)
        return clock, clock < current_mhz

    def safe_mhz(self, current_mhz: float) -> float:
        """The lowest clock seen to fit the cap (the table's lowest when none was)."""
        return min(self.fit_clocks) if self.fit_clocks else self.model.clocks_mhz[0]

    def status(self) -> Dict[str, Any]:
        return {
            "cap_w": self.policy.cap_w,
            "target_power_w": self.target_w,
            "trim_w": self.trim_w,
            "model_correction": self.tracker.r,
        }


class OnlinePpwController(Controller):
    """The PPW clock found during the job, for a device with no calibrated model.

    A golden-section search over the clock table: each probe holds one clock for
    ``settle_s`` (the power average settles, NVML's over ~1 s) and then measures energy over
    ``measure_s`` of busy time; idle periods pause the probe. The cost of a clock is the energy
    per unit of work where the app reports it (``gov.tick(units)``), else mean power / clock
    (energy per cycle: a compute-bound load's energy per unit of work). Energy per unit of work
    has one minimum over the clock (the ridge), so the search needs about ``log(n)/log(1.6)``
    probes: 11 on a 190-clock table, 5 on a 12-clock Jetson table. Then it holds the best
    clock; ``result`` is set for the governor to keep.
    """

    def __init__(self, model: ClockModel, *, settle_s: float = 1.3, measure_s: float = 1.0) -> None:
        super().__init__(model)
        self.settle_s = settle_s
        self.measure_s = measure_s
        self.lo, self.hi = 0, len(model.clocks_mhz) - 1
        self.costs: Dict[int, float] = {}
        self.probe: Optional[int] = None
        self.held_s = 0.0
        self.energy_j = 0.0
        self.busy_s = 0.0
        self.units = 0.0
        self.result: Optional[Dict[str, Any]] = None
        self.elapsed_s = 0.0
        self.probe = self._next()

    def _next(self) -> Optional[int]:
        costs = self.costs
        while self.hi - self.lo > 2:
            span = self.hi - self.lo
            m1 = self.lo + int(round(0.382 * span))
            m2 = self.lo + int(round(0.618 * span))
            if m2 <= m1:
                m2 = m1 + 1
            for m in (m1, m2):
                if m not in costs:
                    return m
            if costs[m1] <= costs[m2]:
                self.hi = m2
            else:
                self.lo = m1
        for m in range(self.lo, self.hi + 1):
            if m not in costs:
                return m
        return None

    def initial_mhz(self) -> float:
        return self.model.clocks_mhz[self.probe if self.probe is not None else -1]

    def decide(
        self, obs: Observation, ticks: Sequence[Tick], current_mhz: float
    ) -> Tuple[float, bool]:
        self.elapsed_s = obs.elapsed_s + obs.dt_s
        clocks = self.model.clocks_mhz
        if self.probe is None:
            return current_mhz, False
        units = sum(t.units for t in ticks)
        if obs.busy is False or obs.power_w is None or obs.applied_mhz != clocks[self.probe]:
            return clocks[self.probe], False
        self.held_s += obs.dt_s
        if self.held_s <= self.settle_s + 1e-9:
            return clocks[self.probe], False
        self.energy_j += obs.power_w * obs.dt_s
        self.busy_s += obs.dt_s
        self.units += units
        if self.busy_s < self.measure_s - 1e-9:
            return clocks[self.probe], False
        if self.units > 0:
            cost = self.energy_j / self.units
        else:
            cost = self.energy_j / (self.busy_s * clocks[self.probe])
        self.costs[self.probe] = cost
        self.held_s = self.energy_j = self.busy_s = self.units = 0.0
        self.probe = self._next()
        if self.probe is None:
            best = min(self.costs, key=lambda i: (self.costs[i], i))
            self.result = {
                "clock_mhz": clocks[best],
                "probes": len(self.costs),
                "found_after_s": self.elapsed_s,
                "cost": "energy per unit of work" if units > 0 else "energy per cycle",
            }
            return clocks[best], True
        return clocks[self.probe], True

    def status(self) -> Dict[str, Any]:
        return {"online_ppw": self.result, "probes_done": len(self.costs)}


# -- the controller factories :data:`governor.runtime.policies.POLICIES` names -------------


def ppw_controller(policy: MaxEfficiency, model: ClockModel, context: ControlContext) -> Controller:
    """The calibrated PPW clock; searched online over the whole table when the model has
    none, and around the profile's clock when the profile is not this unit's own."""
    if not model.fitted:
        return OnlinePpwController(model, settle_s=context.settle_s)
    if model.prior:
        return PriorPpwController(model, settle_s=context.settle_s)
    return StaticController(model, model.ppw_clock_mhz)


def top_clock_controller(
    policy: Performance, model: ClockModel, context: ControlContext
) -> Controller:
    return StaticController(model, model.top_mhz)


def fixed_clock_controller(
    policy: FixedClock, model: ClockModel, context: ControlContext
) -> Controller:
    return StaticController(model, policy.clock_mhz)


def power_cap_controller(
    policy: PowerCap, model: ClockModel, context: ControlContext
) -> Controller:
    return PowerCapController(model, policy, context.interval_s)


def battery_controller(policy: Battery, model: ClockModel, context: ControlContext) -> Controller:
    return BatteryController(model, policy, context.battery)


def throughput_controller(
    policy: Throughput, model: ClockModel, context: ControlContext
) -> Controller:
    """The rate's controller; with a battery floor, the rate as long as the budget lasts.
    Clocks are searched by measurement where the device meters energy."""
    search = context.energy_counter
    floor = policy.floor()
    if floor is not None:
        return FloorThroughputController(model, policy, floor, context.battery, search=search)
    return ThroughputController(model, policy, search=search)


def make_controller(
    policy: Policy,
    model: ClockModel,
    *,
    interval_s: float,
    battery: Optional[Callable[[], float]] = None,
    energy_counter: bool = False,
) -> Controller:
    """The controller of ``policy``, made by the factory its row of
    :data:`~governor.runtime.policies.POLICIES` names. ``energy_counter``: whether the device
    meters energy (see :class:`ControlContext`)."""
    kind = POLICIES.get(policy.name)
    if kind is None or not isinstance(policy, kind.policy):
        raise TypeError(f"no controller for {policy!r}")
    module_name, function = kind.controller.split(":")
    factory: Callable[[Any, ClockModel, ControlContext], Controller] = getattr(
        importlib.import_module(module_name), function
    )
    context = ControlContext(interval_s=interval_s, energy_counter=energy_counter, battery=battery)
    return factory(policy, model, context)
