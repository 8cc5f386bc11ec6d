"""The bursts and gaps of a bursty load, and the busy time they forecast for the time left."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import List, Optional

__all__ = ["BurstStats"]

MIN_BURSTS = 8  # bursts (and gaps) seen before their lengths shape the forecast busy time
# an idle run longer than this (and than twice a cyclic load's mean gap) is a wait: long
# enough that the idle power it saves at the lowest clock outweighs the next burst's first
# period at that clock (about P_busy / (P_idle(f) - P_idle(lowest)) periods, 5 s on the
# catalog's boards)
WAIT_S = 10.0
MAX_BURSTS = 512  # burst lengths kept (a bounded sample: the middle one makes way)


@dataclass
class BurstStats:
    """The run under way (busy or not, and for how long), the lengths of the bursts that
    began and ended in the mission (sorted; ``tail_s[k]`` sums those from ``k`` on) and the
    gaps' count and total."""

    busy: Optional[bool] = None  # the run under way: busy, idle, or not known yet
    started: bool = False  # whether the run under way began in the mission (is whole)
    run_s: float = 0.0
    lengths_s: List[float] = field(default_factory=list)
    tail_s: List[float] = field(default_factory=lambda: [0.0])
    gaps_s: float = 0.0
    gaps_n: int = 0

    def note(self, busy: Optional[bool], dt_s: float) -> None:
        """Count a period of ``dt_s``; a change of state closes the run under way (the
        first run, begun before the mission was seen, is not kept). ``busy`` None: unknown,
        not counted."""
        if busy is None:
            return
        if busy != self.busy:
            if self.started:
                if self.busy:
                    self._keep_burst(self.run_s)
                elif self.busy is False:
                    self.gaps_s += self.run_s
                    self.gaps_n += 1
            self.started = self.busy is not None
            self.busy, self.run_s = busy, 0.0
        self.run_s += dt_s

    def _keep_burst(self, length_s: float) -> None:
        lengths = self.lengths_s
        bisect.insort(lengths, length_s)
        if len(lengths) > MAX_BURSTS:
            lengths.pop(len(lengths) // 2)
        tail = [0.0]  # sums of the longest j lengths, read from the end
        for x in reversed(lengths):
            tail.append(tail[-1] + x)
        self.tail_s = tail[::-1]

    def cyclic(self) -> bool:
        """Whether the load has shown a duty cycle: MIN_BURSTS bursts and gaps, each begun
        and ended in the mission, so its mean gap says how long a gap between bursts is."""
        return len(self.lengths_s) >= MIN_BURSTS and self.gaps_n >= MIN_BURSTS

    def wait_threshold_s(self) -> float:
        """How long an idle run lasts before it is a wait rather than a gap between bursts:
        WAIT_S, or on a cyclic load twice its mean gap if that is longer."""
        if self.cyclic():
            return max(WAIT_S, 2.0 * self.gaps_s / self.gaps_n)
        return WAIT_S

    def waiting(self) -> bool:
        """Whether the idle run under way is a wait (:meth:`wait_threshold_s`)."""
        return self.busy is False and self.run_s > self.wait_threshold_s()

    def expected_busy_s(self, left_s: float, duty: float) -> float:
        """Busy seconds expected in the ``left_s`` left: the duty cycle's share, except that
        a burst under way is expected to run on for its residual life (the mean excess of
        the bursts seen that lasted longer than its age), then a mean gap: so a mission
        whose last burst ends before a gap spends the budget in that burst instead of
        keeping it for the gap. With no gaps (a steady load) or too few bursts seen, the
        duty cycle's share."""
        share = duty * left_s
        lengths = self.lengths_s
        if not (self.busy and len(lengths) >= MIN_BURSTS and self.gaps_n):
            return share
        age = self.run_s
        k = bisect.bisect_right(lengths, age)
        longer = len(lengths) - k
        residual = (self.tail_s[k] - age * longer) / longer if longer else 0.0
        now_s = min(residual, left_s)
        gap_s = self.gaps_s / self.gaps_n
        return max(now_s + duty * max(0.0, left_s - now_s - gap_s), 1e-3)
