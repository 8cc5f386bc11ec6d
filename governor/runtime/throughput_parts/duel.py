"""The duel between the model's far pick and the deadline's floor.

The model's pick hinges on the idle power between frames, which a cold board's warming
biases low for its first seconds; where the pick lies more than two search steps above the
floor, the energy counter settles it. The floor, the pick, the floor again, one window each:
the pick against the mean of the floor's two windows, so the board's warming in between
cancels. A window that already favours the side the warming works against decides at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, NamedTuple, Optional

__all__ = ["Duel", "DuelStep", "Measured"]


class Measured(NamedTuple):
    """A clock's cost at the rate as a window measured it (W), and when (s)."""

    cost_w: float
    when_s: float


class DuelStep(NamedTuple):
    """What a duel's window leads to: the clock index to measure or hold next, whether the
    duel is over, and whether the floor is held (then at the window's cost, wherever the
    floor moves)."""

    target: int
    over: bool
    hold_floor: bool


@dataclass
class Duel:
    """A duel in progress: the model's pick (a clock index), the floor's windows so far,
    and the pick's window measured before the floor's first (the young frames'), if any."""

    pick: int
    floor_w: List[float] = field(default_factory=list)
    pick_w: Optional[float] = None

    def after_window(
        self, target: int, floor: int, cost: float, costs: Dict[int, Measured], noise: float
    ) -> DuelStep:
        """After a window at ``target`` (the pick or the floor ``floor``) of cost ``cost``:
        the next step. ``costs`` holds the pick's latest window; ``noise`` is the share by
        which one window must be cheaper than another to be taken as cheaper."""
        pick = self.pick
        if target == pick and not self.floor_w:
            # the young frames' window at the pick, finished: the pick's before the floor's
            self.pick_w = cost
            return DuelStep(floor, False, False)
        if target == pick:
            if cost < self.floor_w[0] * (1.0 - noise):
                # cheaper than the floor measured before it, warming against it: decided
                return DuelStep(target, True, False)
            return DuelStep(floor, False, False)  # the floor's second window next
        self.floor_w.append(cost)
        if len(self.floor_w) == 1:  # the floor's first window: the pick's next
            if self.pick_w is not None and cost < self.pick_w * (1.0 - noise):
                # cheaper than the pick measured before it (the young frames' window),
                # warming against it: decided, the floor held
                return DuelStep(target, True, True)
            return DuelStep(pick, False, False)
        floor_w = 0.5 * (self.floor_w[0] + self.floor_w[1])
        there = costs.get(pick)
        if there is not None and there.cost_w < floor_w * (1.0 - noise):
            return DuelStep(pick, True, False)  # the search goes on from the pick
        return DuelStep(target, True, True)  # the floor held, and followed
