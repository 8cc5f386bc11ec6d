"""The power-cap policy's controller: the highest clocks whose measured power fits the cap.

Each period the window's mean power is kept under the cap's limit: the next period may use
what the window leaves (its newest part, the oldest excess dropped), met by the power
tracker's corrected model (:class:`~governor.runtime.controller_base.PowerTracker`) with the
leftover dithered between neighbouring clocks, and a slow integral trim for what the
correction cannot see.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Deque, Optional, Sequence, Set, Tuple

from governor.runtime.controller_base import (
    Controller,
    Decision,
    Now,
    Observation,
    PowerTracker,
    Tick,
)
from governor.runtime.model import ClockModel
from governor.runtime.status import Correction

if TYPE_CHECKING:
    from governor.runtime.policies import PowerCap

__all__ = ["CapState", "PowerCapController"]


@dataclass(frozen=True)
class CapState:
    """The cap, the power aimed at under it (the cap less its margin) and the slow trim."""

    cap_w: float
    target_power_w: float
    trim_w: float


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

    def observe(self, obs: Observation, ticks: Sequence[Tick]) -> None:
        """The period into the model's correction, the clocks seen to fit, the window's
        running sums and the slow trim."""
        if obs.power_w is None:
            return
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

    def choose(self, now: Now) -> Decision:
        """The highest clock whose corrected power keeps the window's mean under the limit
        (the trimmed target, dithered, where the window leaves room for it)."""
        if now.obs.power_w is None:
            return Decision(now.current_mhz)
        # what the next period may use so the window average stays under the limit
        # (the newest `horizon` seconds of the window: all of it but its oldest excess)
        horizon = max(self.policy.window_s - self.interval_s, 0.0)
        used, covered = self._energy_j, self._span_s
        excess = self._span_s - horizon
        for dt, power in self.window:
            if excess <= 0:
                break
            drop = min(dt, excess)
            used -= power * drop
            covered -= drop
            excess -= drop
        allowed_w = (self.limit_w * (covered + self.interval_s) - used) / self.interval_s
        goal_w = self.target_w + self.trim_w
        if allowed_w < goal_w:
            clock = self.tracker.clock_for(allowed_w, carry=False)
        else:
            clock = self.tracker.clock_for(goal_w)
        return Decision(clock, clock < now.current_mhz)

    def safe_mhz(self, current_mhz: float) -> float:
        """The lowest clock seen to fit the cap (the table's lowest when none was)."""
        return min(self.fit_clocks) if self.fit_clocks else self.model.clocks_mhz[0]

    def shift_power(self, applied_mhz: float, power_w: float) -> None:
        """The memory clock's change of the draw into the correction at once (mem_knob.py):
        downward it would be learnt only over periods, upward only after a period over the
        cap."""
        self.tracker.shift(applied_mhz, power_w)

    def records(self) -> Tuple[Any, ...]:
        return (CapState(self.policy.cap_w, self.target_w, self.trim_w), Correction(self.tracker.r))
