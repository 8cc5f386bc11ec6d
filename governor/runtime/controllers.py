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
import math
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Set, Tuple

from governor.runtime.battery_controller import BatteryController
from governor.runtime.controller_base import (
    ControlContext,
    Controller,
    Observation,
    PowerTracker,
    StaticController,
    Tick,
)
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


class FloorThroughputController(Controller):
    """Throughput with a battery floor: the cheapest clock that keeps the rate (as
    :class:`ThroughputController`) unless the battery plan affords less.

    The plan is :class:`BatteryController`'s mean power, what is left over the time left,
    every period (the time left counted from now). When the rate costs more than the plan
    affords, the rate degrades
    one of two ways:

    - **the app asks** (:meth:`admit`, ``gov.admit()`` before each frame): the clock stays
      the rate's (the cheapest energy per frame that meets a frame's deadline) and the share
      of frames admitted is what the plan affords, ``(P_plan − P_idle) / (P_rate − P_idle)``,
      spread evenly (error diffusion: at 0.6 three frames in five). ``P_idle`` (no frames)
      and ``P_rate`` (every frame) on the budget's scope are a line fitted to windows of
      measured mean power against the share of the rate the app ran in them (a weighted
      least-squares fit, older windows forgotten; the measured GPU idle power plus the rest
      of the board stands in for the windows at share 0 until the share varies);
    - **the app does not ask**: the rate's clock is time-shared with the lowest one (error
      diffusion) so the modelled mean power is the plan's; frames in the low periods are late
      or dropped.
    """

    WINDOW_S = 0.0  # periods pooled into one point of the power-vs-share fit
    FORGET = 0.99  # weight an older window keeps per new window
    PRIOR_WEIGHT = 0.2  # the idle-power estimate's weight in the fit, in windows

    def __init__(
        self,
        model: ClockModel,
        policy: Throughput,
        floor: Battery,
        reader: Optional[Callable[[], float]] = None,
        search: bool = False,
    ) -> None:
        super().__init__(model)
        self.rate = ThroughputController(model, policy, search=search)
        self.battery = BatteryController(model, floor, reader)
        self.board = floor.scope == "board"
        self.rest_w = 0.0
        self.carry = 0.0
        self.degraded_s = 0.0
        self.degraded = False
        self.afford_mhz: Optional[float] = None
        # admission (the app consults admit())
        self.admitting = False
        self.share = 1.0  # of the rate's frames to admit
        self.credit = 0.0
        self.offered = self.admitted = 0
        self.win_s = self.win_j = self.win_units = 0.0
        self.used_last: Optional[float] = None
        self.fit = [0.0] * 5  # forgotten sums: weight, Σx, Σy, Σxx, Σxy
        self.idle_fit_w: Optional[float] = None
        self.rate_fit_w: Optional[float] = None

    def initial_mhz(self) -> float:
        self.battery.initial_mhz()  # its plan's first figures
        # the top clock, not the rate's PPW start: the first frames measure the rate's cost
        # at a known clock, which keeps short budgets from overrunning (see
        # docs/benchmarks/throughput.md, "Battery floor: the first clock")
        return self.model.top_mhz

    @property
    def eager(self) -> bool:
        return self.rate.eager

    def admit(self) -> bool:
        """Whether the app should take the frame in hand (False: skip it). Spreads the
        admitted share evenly over the frames offered."""
        self.admitting = True
        self.offered += 1
        self.credit += self.share
        if self.credit >= 1.0 - 1e-9:
            self.credit -= 1.0
            self.admitted += 1
            return True
        return False

    def _mean_costs(self) -> List[float]:
        model = self.model
        per_unit = self.rate.per_unit_top
        mean = sum(per_unit) / len(per_unit) if per_unit else None
        out = []
        for p, rel in zip(model.power_w, model.time_rel):
            busy = 1.0 if mean is None else min(1.0, self.rate.policy.rate_hz * mean * rel)
            out.append(busy * p + (1.0 - busy) * model.idle_w)
        return out

    def _learn_share(self, obs: Observation, ticks: Sequence[Tick]) -> None:
        """One more period into the window; a full window into the power-vs-share fit."""
        used = obs.board_energy_used_j if self.board else None
        if used is None:
            used = obs.energy_used_j
        last, self.used_last = self.used_last, used
        if last is None or obs.dt_s <= 0:
            return
        self.win_s += obs.dt_s
        self.win_j += used - last
        self.win_units += sum(t.units for t in ticks)
        if self.win_s < self.WINDOW_S:
            return
        x = self.win_units / (self.win_s * self.rate.policy.rate_hz)
        y = self.win_j / self.win_s
        self.win_s = self.win_j = self.win_units = 0.0
        f = self.fit
        k = self.FORGET
        for i, v in enumerate((1.0, x, y, x * x, x * y)):
            f[i] = k * f[i] + v

    def _idle_prior_w(self) -> float:
        idle = self.rate.idle_w if self.rate.idle_w is not None else self.model.idle_w
        if self.board:
            idle += self.rest_w
        return idle

    def _solve(self) -> Optional[Tuple[float, float]]:
        """(P at no frames, P at the full rate) on the budget's scope, from the fit."""
        w, sx, sy, sxx, sxy = self.fit
        if w <= 0:
            return None
        p0 = self.PRIOR_WEIGHT
        y0 = self._idle_prior_w()
        w, sy = w + p0, sy + p0 * y0  # the prior: a window at share 0
        det = w * sxx - sx * sx
        if det <= 1e-12 * w * w:
            return None
        slope = (w * sxy - sx * sy) / det
        icept = (sy - slope * sx) / w
        if slope <= 0:
            return None
        return icept, icept + slope

    def decide(
        self, obs: Observation, ticks: Sequence[Tick], current_mhz: float
    ) -> Tuple[float, bool]:
        want, urgent = self.rate.decide(obs, ticks, current_mhz)
        if self.degraded and self.rate.base_mhz is not None:
            # the rate's dither below its floor spends late frames for energy; a degraded
            # rate skips or delays frames already, and the power-vs-share fit wants one
            # clock per share: hold the floor
            want = self.rate.base_mhz
            urgent = want > current_mhz
        self.battery.decide(obs, ticks, current_mhz)  # the plan's bookkeeping
        if obs.power_w is not None:
            if self.board and obs.board_power_w is not None:
                self.rest_w += 0.2 * (obs.board_power_w - obs.power_w - self.rest_w)
        self._learn_share(obs, ticks)
        target = self.battery.target_w  # its plan for the period ahead, from now
        if target is None or not math.isfinite(target):
            self.degraded = False
            self.share = 1.0
            return want, urgent
        if self.admitting:
            return self._admission(obs, target, want, urgent)
        costs = self._mean_costs()
        gpu_w = target - (self.rest_w if self.board else 0.0)
        clocks = self.model.clocks_mhz
        i_want = self.model.index(want)
        self.degraded = costs[i_want] > gpu_w
        if not self.degraded:
            self.afford_mhz = want
            self.carry = 0.0
            return want, urgent
        self.degraded_s += obs.dt_s
        # time-share the rate's clock with the lowest one so the mean power is the plan's:
        # frames in the rate's periods are on time, the others late (rather than every
        # frame late at a clock in between)
        low, high = costs[0], costs[i_want]
        share = (gpu_w - low) / (high - low) if high > low else 0.0
        self.afford_mhz = clocks[0]
        self.carry += min(1.0, max(0.0, share))
        if self.carry >= 1.0:
            self.carry -= 1.0
            return want, want > current_mhz
        return clocks[0], False

    def close(self, obs: Observation) -> None:
        self.battery.close(obs)

    def _admission(
        self, obs: Observation, target_w: float, want: float, urgent: bool
    ) -> Tuple[float, bool]:
        """The app skips frames: the share of the rate the plan affords, the rate's clock."""
        fit = self._solve()
        if fit is None:
            self.share = 1.0
        else:
            idle_w, rate_w = fit
            self.idle_fit_w, self.rate_fit_w = idle_w, rate_w
            if target_w >= rate_w:
                self.share = 1.0
            else:
                share = (target_w - idle_w) / (rate_w - idle_w)
                self.share = min(1.0, max(0.0, share))
        self.degraded = self.share < 1.0
        if self.degraded:
            self.degraded_s += obs.dt_s
        self.carry = 0.0
        if self.share <= 0.0:  # no frame affordable: idle at the lowest clock's idle power
            self.afford_mhz = self.model.clocks_mhz[0]
            return self.afford_mhz, False
        self.afford_mhz = want
        return want, urgent

    def safe_mhz(self, current_mhz: float) -> float:
        safe = self.rate.safe_mhz(current_mhz)
        return min(safe, self.afford_mhz) if self.afford_mhz is not None else safe

    def status(self) -> Dict[str, Any]:
        doc = dict(self.battery.status())
        doc.update(self.rate.status())
        doc["rate_degraded"] = self.degraded
        doc["rate_degraded_s"] = self.degraded_s
        doc["affordable_clock_mhz"] = self.afford_mhz
        doc["admitting"] = self.admitting
        doc["admit_share"] = self.share
        doc["admitted_rate_hz"] = self.share * self.rate.policy.rate_hz
        doc["frames_offered"] = self.offered
        doc["frames_admitted"] = self.admitted
        doc["idle_power_fit_w"] = self.idle_fit_w
        doc["rate_power_fit_w"] = self.rate_fit_w
        return doc


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
