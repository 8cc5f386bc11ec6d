"""The battery plan: a busy-power target from what is left, the time left and the duty cycle.

Each period::

    usable  = remaining − reserve
    P_busy  = (usable − P_idle · idle_left) / busy_left

with ``busy_left`` the busy time forecast for the time left (:class:`.BurstStats`: the duty
cycle's share, or a burst's residual life and a gap) and ``P_idle`` the measured idle power
on the budget's scope. Spending slack only while the GPU computes is what buys work: a plan
that assumed the rest of the mission busy under-spends on bursty loads.

A wait (an idle run past :meth:`.BurstStats.wait_threshold_s`: a robot at a dock, waiting
for a goal) is a phase, not part of a duty cycle, and its time is left out of the duty
cycle: the joules it saves are spread over the time left as if busy. Counted, a wait at
the start of a mission forecast the rest as mostly idle, the budget went at the top clock
in the first minutes of work and the end ran short; a plan that under-spends makes it up
in the busy time after, one that over-spends can strand the mission.

The even spread bets on the mission's *twin*, the one in which no wait comes: a wait that
does come (a robot reaching its goal) strands the joules kept for the busy time it took.
The plan hedges (issue 46): with the lowest clock's busy power ``P_floor`` known (set by the
controller from its model), the slack above it is spent ``1/(1 − HEDGE · left/target)``
times as fast as the even spread, ahead of it early and evenly at the end, never under the
floor (what is left always lasts the lowest clock). ``HEDGE`` is small: spending ahead costs
the missions without a wait (the concave work curve; a memory phase spends ahead where a
joule buys least), and the bench's three traces keep their mean.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional, Tuple

from governor.runtime.battery_parts.bursts import BurstStats

__all__ = ["MissionPlan", "smoothed"]

# the hedge against a wait to come: the share of the slack above the least busy power that is
# spent ahead of an even spread, at the start (it fades to none at the end)
HEDGE = 0.1
PRIOR_BUSY_S = 5.0  # a new mission counts as busy until idle periods are seen
SMOOTHING = 0.2  # share of the gap to the latest reading taken per period (idle, rest power)


def smoothed(old: float, new: float) -> float:
    """``old`` moved SMOOTHING of the way to the latest reading ``new``."""
    return old + SMOOTHING * (new - old)


@dataclass
class MissionPlan:
    """The duty cycle and idle power measured so far, and the plan they give.

    ``target_s``: the mission's length; ``reserve_j``: the energy kept back. ``idle_w`` is on
    the budget's scope; ``rest_w`` (board scope) is the rest of the board while busy (board −
    GPU figure), taken off a busy target to give the GPU's.
    """

    target_s: float
    reserve_j: float
    busy_s: float = 0.0
    idle_s: float = 0.0
    wait_s: float = 0.0  # the idle time in waits (left out of the duty cycle)
    run_wait_s: float = 0.0  # the idle run under way's time counted in wait_s
    idle_w: Optional[float] = None
    rest_w: Optional[float] = None
    busy_left_s: float = 0.0  # the last plan's busy time left
    was_busy: Optional[bool] = None
    bursts: BurstStats = field(default_factory=BurstStats)
    floor_w: Optional[float] = None  # the least busy power on the scope (the lowest clock's)
    hedge: float = field(default_factory=lambda: HEDGE)  # read when the plan is made

    def observe(self, busy: Optional[bool], dt_s: float, scoped_w: Optional[float]) -> bool:
        """Count a period (busy, idle or unknown, which counts as busy) and learn the idle
        power from an idle one; whether the period was steady (in the same state as the one
        before: a period that straddles a change mixes both)."""
        steady = busy == self.was_busy
        self.was_busy = busy
        self.bursts.note(busy, dt_s)
        if busy is False:
            self.idle_s += dt_s
            if self.bursts.waiting():  # the run so far, once it is known to be a wait
                self.wait_s += self.bursts.run_s - self.run_wait_s
                self.run_wait_s = self.bursts.run_s
            if scoped_w is not None and steady:
                self.idle_w = scoped_w if self.idle_w is None else smoothed(self.idle_w, scoped_w)
        else:
            self.busy_s += dt_s
            if busy:
                self.run_wait_s = 0.0
        return steady

    def learn_rest(self, rest_w: float) -> None:
        """One busy period's board power beyond the GPU figure, smoothed."""
        self.rest_w = rest_w if self.rest_w is None else smoothed(self.rest_w, rest_w)

    def gpu_target(self, busy_w: float, board_scope: bool) -> float:
        """The GPU's share of a busy target on the budget's scope."""
        if board_scope:
            return busy_w - (self.rest_w or 0.0)
        return busy_w

    def duty(self) -> float:
        """The busy share of the mission so far, waits left out, with PRIOR_BUSY_S busy
        seconds in it."""
        idle_s = self.idle_s - self.wait_s
        return (self.busy_s + PRIOR_BUSY_S) / (self.busy_s + idle_s + PRIOR_BUSY_S)

    def plan(self, remaining_j: float, elapsed_s: float) -> Tuple[float, float]:
        """(mean power target, busy power target) on the budget's scope, for the period
        ahead: ``elapsed_s`` is now (the end of the period just measured), and the time
        left counts from it (counted from the end of the period ahead, the budget would be
        spent one period early). Past the end: unbounded while energy is left, else 0."""
        left_s = self.target_s - elapsed_s
        usable = max(0.0, remaining_j - self.reserve_j)
        if left_s <= 0:
            return (math.inf, math.inf) if usable > 0 else (0.0, 0.0)
        mean_w = usable / left_s
        idle_w = self.idle_w if self.idle_w is not None else 0.0
        busy_left = self.bursts.expected_busy_s(left_s, self.duty())
        self.busy_left_s = busy_left
        busy_w = (usable - idle_w * (left_s - busy_left)) / busy_left
        return mean_w, max(self.hedged(busy_w, left_s), 0.0)

    def hedged(self, busy_w: float, left_s: float) -> float:
        """The even spread's busy power ``busy_w`` with the slack above :attr:`floor_w`
        spent ``1/(1 − hedge · left_s / target_s)`` times as fast: ahead of the even
        spread while much of the mission is left, evenly at its end. Never under the
        floor, so what is left always lasts the lowest clock."""
        if self.floor_w is None or self.hedge <= 0.0 or busy_w <= self.floor_w:
            return busy_w
        k = 1.0 - self.hedge * min(1.0, left_s / self.target_s)
        return self.floor_w + (busy_w - self.floor_w) / k
