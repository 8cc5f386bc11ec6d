"""The throughput policy with a battery floor: the rate as long as the budget lasts.

Split from :mod:`governor.runtime.controllers` (which re-exports it). It holds a
:class:`~governor.runtime.throughput_controller.ThroughputController` for the rate and a
:class:`~governor.runtime.budget.MissionBudget` for the budget: the budget's plan says what
the rest of the mission affords, and when the rate costs more, the rate degrades.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, Tuple

from governor.runtime.battery_parts.plan import smoothed
from governor.runtime.budget import BudgetState, MissionBudget, budget_and_reserve
from governor.runtime.controller_base import Controller, Decision, Now, Observation, Tick
from governor.runtime.model import ClockModel
from governor.runtime.throughput_controller import ThroughputController

if TYPE_CHECKING:
    from governor.runtime.policies import Battery, Throughput

__all__ = ["FloorState", "FloorThroughputController"]


@dataclass(frozen=True)
class FloorState:
    """How the rate degrades for the budget: whether it does now and for how long it has,
    the clock the plan affords, and with admission (the app asks ``gov.admit()``) the share
    of frames admitted, the frames offered and taken, and the fitted power at no frames and
    at the full rate (None before the fit)."""

    rate_degraded: bool
    rate_degraded_s: float
    affordable_clock_mhz: Optional[float]
    admitting: bool
    admit_share: float
    admitted_rate_hz: float
    frames_offered: int
    frames_admitted: int
    idle_power_fit_w: Optional[float]
    rate_power_fit_w: Optional[float]


class FloorThroughputController(Controller):
    """Throughput with a battery floor: the cheapest clock that keeps the rate (as
    :class:`ThroughputController`) unless the battery plan affords less.

    The plan is the :class:`.MissionBudget`'s mean power, what is left over the time left,
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
        self.rate_hz = policy.rate_hz
        self.rate = ThroughputController(model, policy, search=search)
        budget_j, reserve_j = budget_and_reserve(floor.budget_j, floor.reserve, reader)
        self.budget = MissionBudget(budget_j, reserve_j, floor.target_s, floor.scope, reader)
        self.board = self.budget.board_scope
        self.rest_w = 0.0  # the rest of the board (board − GPU figure), every period
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
        self.budget.start()  # the plan's first figures
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
        x = self.win_units / (self.win_s * self.rate_hz)
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

    def observe(self, obs: Observation, ticks: Sequence[Tick]) -> None:
        """The rate's frames, the budget's accounting and plan, the rest of the board and
        the power-vs-share fit."""
        self.rate.observe(obs, ticks)
        self.budget.observe(obs)
        self.budget.account(obs)
        if obs.power_w is not None:
            if self.board and obs.board_power_w is not None:
                self.rest_w = smoothed(self.rest_w, obs.board_power_w - obs.power_w)
        self._learn_share(obs, ticks)

    def choose(self, now: Now) -> Decision:
        """The rate's clock while the plan affords it; else the share of frames admitted
        (the app asks) or the rate's clock time-shared with the lowest."""
        current_mhz = now.current_mhz
        decision = self.rate.choose(now)
        want, urgent = decision.clock_mhz, decision.urgent
        held = self.rate.undithered_mhz
        if self.degraded and held is not None:
            # the rate's dither below its floor spends late frames for energy; a degraded
            # rate skips or delays frames already, and the power-vs-share fit wants one
            # clock per share: hold the floor
            want = held
            urgent = want > current_mhz
        target = self.budget.target_w  # the plan for the period ahead, from now
        if target is None or not math.isfinite(target):
            self.degraded = False
            self.share = 1.0
            return Decision(want, urgent)
        if self.admitting:
            return self._admission(now.obs, target, want, urgent)
        return self._time_share(now, want, urgent, target)

    def _time_share(self, now: Now, want: float, urgent: bool, target_w: float) -> Decision:
        """The app does not ask: the rate's clock ``want`` while the plan's ``target_w``
        affords it, else time-shared with the lowest clock so the mean power is the plan's:
        frames in the rate's periods are on time, the others late (rather than every frame
        late at a clock in between)."""
        costs = self.rate.mean_power_by_clock()
        gpu_w = target_w - (self.rest_w if self.board else 0.0)
        clocks = self.model.clocks_mhz
        i_want = self.model.index(want)
        self.degraded = costs[i_want] > gpu_w
        if not self.degraded:
            self.afford_mhz = want
            self.carry = 0.0
            return Decision(want, urgent)
        self.degraded_s += now.obs.dt_s
        low, high = costs[0], costs[i_want]
        share = (gpu_w - low) / (high - low) if high > low else 0.0
        self.afford_mhz = clocks[0]
        self.carry += min(1.0, max(0.0, share))
        if self.carry >= 1.0:
            self.carry -= 1.0
            return Decision(want, want > now.current_mhz)
        return Decision(clocks[0])

    def close(self, obs: Observation) -> None:
        self.budget.close(obs)

    def _admission(self, obs: Observation, target_w: float, want: float, urgent: bool) -> Decision:
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
            return Decision(self.afford_mhz)
        self.afford_mhz = want
        return Decision(want, urgent)

    def safe_mhz(self, current_mhz: float) -> float:
        safe = self.rate.safe_mhz(current_mhz)
        return min(safe, self.afford_mhz) if self.afford_mhz is not None else safe

    def budget_state(self) -> BudgetState:
        return self.budget.state()

    def records(self) -> Tuple[Any, ...]:
        floor = FloorState(
            rate_degraded=self.degraded,
            rate_degraded_s=self.degraded_s,
            affordable_clock_mhz=self.afford_mhz,
            admitting=self.admitting,
            admit_share=self.share,
            admitted_rate_hz=self.share * self.rate_hz,
            frames_offered=self.offered,
            frames_admitted=self.admitted,
            idle_power_fit_w=self.idle_fit_w,
            rate_power_fit_w=self.rate_fit_w,
        )
        return (self.budget.state(), *self.rate.records(), floor)
