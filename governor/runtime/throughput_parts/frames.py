"""What the app's ticks say: each frame's work, the deadline a clock must fit, the tick rate,
and the power between frames.

:class:`FrameStats` keeps the frames' top-clock time per unit (the last ``WINDOW`` for the
deadline, the last ``LONG_FRAMES`` sorted for the learnt deadline and the long mean), which
of them ran late, the units ticked over the last 2 s and, for an app without ``busy_s``,
the rate the top clock would run flat out. :class:`IdlePower` learns the power between
frames.
"""

from __future__ import annotations

import bisect
import collections
import math
from typing import Deque, List, Optional, Sequence

from governor.runtime.controller_base import Observation, Tick
from governor.runtime.throughput_parts.tables import ClockTables

__all__ = ["LATE_ALLOWANCE", "FrameStats", "IdlePower", "busy_seconds"]

#: The share of the frames the throughput policy lets run late: what its dither aims at
#: (:class:`~governor.runtime.throughput_parts.dither.Dither`), and what the bench's
#: hindsight yardstick (the cheapest constant clock, ``scripts/bench_runtime.py``) is
#: allowed, so that the two are compared at the same late-frame rate.
LATE_ALLOWANCE = 0.0075


class FrameStats:
    """The frames seen lately, in top-clock seconds per unit (a frame's ``busy_s`` over its
    units, divided by the time model's ``t_rel`` at the clock it ran at)."""

    WINDOW = 90  # frames remembered for the deadline with an explicit margin
    #: frames in the learnt deadline and the long mean of the work per frame (and the late
    #: frames the dither's stop counts): 600 left the deadline, the fourth-slowest of them,
    #: a table step up one window in several at heavy frames (issue 46: docs/benchmarks/
    #: throughput.md)
    LONG_FRAMES = 1200
    #: frames whose lateness the dither's stop counts: the stop is a share of them, and over
    #: LONG_FRAMES a run of late frames (a late frame delays the next) built up for longer
    #: before it stopped the dither (Jetson Nano at load 0.4: 1.11 % missed)
    LATE_FRAMES = 600
    LATE_SHARE = 0.005  # of the frames the learnt deadline may let run late
    MIN_FRAMES = 30  # frames before their spread is trusted
    #: over the slowest frame with one frame seen; / sqrt(frames) (0.25 held a table step
    #: up for the first second at heavy frames: 0.4 % of a minute on the Orin Nano)
    YOUNG_HEADROOM = 0.1
    FLAT_MARGIN = 0.1  # headroom without busy_s (no spread known), unless margin is given
    RATE_SPAN_S = 2.0  # the tick rate is the units ticked over this span
    CAPACITY_GAIN = 0.3  # per period, of the gap to the latest flat-out sample

    def __init__(self) -> None:
        self.per_unit_top: Deque[float] = collections.deque(maxlen=self.WINDOW)
        self.capacity_top: Optional[float] = None  # units/s at the top clock when flat out
        # the ticks of the last RATE_SPAN_S: when, and the units done (apart: summed in C)
        self.rate_times: Deque[float] = collections.deque()
        self.rate_units: Deque[float] = collections.deque()
        self.rate_hz: Optional[float] = None
        self.units_seen = 0  # frames in the long mean (at most LONG_FRAMES)
        self.unit_mean = 0.0  # busy s per unit at the top clock, over the last frames
        # the last LONG_FRAMES frames' top-clock time per unit, in arrival order and sorted
        self.recent: Deque[float] = collections.deque(maxlen=self.LONG_FRAMES)
        self.ranked: List[float] = []
        # whether each of the last LATE_FRAMES frames ran past its period, and how many did
        self.late: Deque[bool] = collections.deque(maxlen=self.LATE_FRAMES)
        self.late_count = 0

    @property
    def young(self) -> bool:
        """Frames with ``busy_s`` seen, but fewer than ``MIN_FRAMES``: their spread is not
        trusted yet."""
        return bool(self.per_unit_top) and len(self.ranked) < self.MIN_FRAMES

    def learn(
        self, obs: Observation, ticks: Sequence[Tick], tables: ClockTables, rate_hz: float
    ) -> float:
        """Take in one period's ticks (``rate_hz``: the policy's target, a frame's deadline
        being one period of it per unit). Returns the period's busy seconds."""
        flat = 0.0
        for tick in ticks:
            self.rate_times.append(tick.t_s)
            self.rate_units.append(tick.units)
            rel = tables.time_rel_at(tick.applied_mhz)
            if tick.busy_s is not None and tick.units > 0:
                if not tick.mem_slowed:  # (a frame the memory clock slowed: not the load's)
                    self._add_frame(tick.busy_s, tick.units, rel, rate_hz)
            else:
                flat += tick.units * rel
        times, since = self.rate_times, obs.t_s - self.RATE_SPAN_S
        while times and times[0] < since:
            times.popleft()
            self.rate_units.popleft()
        span = min(self.RATE_SPAN_S, obs.elapsed_s + obs.dt_s)
        self.rate_hz = sum(self.rate_units) / span if span > 0 else None
        if flat > 0 and obs.dt_s > 0:
            sample = flat / obs.dt_s  # units per second the top clock would do
            self.capacity_top = (
                sample
                if self.capacity_top is None
                else self.capacity_top + self.CAPACITY_GAIN * (sample - self.capacity_top)
            )
        return busy_seconds(ticks)

    def _add_frame(self, busy_s: float, units: float, rel: float, rate_hz: float) -> None:
        """One frame that took ``busy_s`` for ``units`` at a clock of relative time ``rel``."""
        per_unit = busy_s / units / rel
        self.per_unit_top.append(per_unit)
        recent, ranked = self.recent, self.ranked
        if len(recent) == self.LONG_FRAMES:
            del ranked[bisect.bisect_left(ranked, recent[0])]
        recent.append(per_unit)
        bisect.insort(ranked, per_unit)
        self.units_seen = min(self.units_seen + 1, self.LONG_FRAMES)
        self.unit_mean += (per_unit - self.unit_mean) / self.units_seen
        late = busy_s * rate_hz > units
        if len(self.late) == self.LATE_FRAMES:
            self.late_count -= self.late[0]
        self.late.append(late)
        self.late_count += late

    def need_s(self, margin: Optional[float]) -> Optional[float]:
        """Top-clock seconds per unit that a clock, scaled by its time model, must fit into a
        unit's period; None before any progress is seen. An explicit ``margin`` keeps that
        share of the period free at the slowest of the last ``WINDOW`` frames; without one,
        the frame exceeded by only ``LATE_SHARE`` of the last frames (until ``MIN_FRAMES``
        are seen, the slowest one with a headroom shrinking as frames come); an app without
        ``busy_s`` runs flat out and its rate scaled to the top clock says the work."""
        if self.per_unit_top:
            if margin is not None:
                return max(self.per_unit_top) / (1.0 - margin)
            n = len(self.ranked)
            if n < self.MIN_FRAMES:
                return max(self.per_unit_top) * (1.0 + self.YOUNG_HEADROOM / math.sqrt(n))
            return self.ranked[min(n - 1, int(n * (1.0 - self.LATE_SHARE)))]
        if self.capacity_top:
            return (
                1.0 / self.capacity_top / (1.0 - (self.FLAT_MARGIN if margin is None else margin))
            )
        return None

    def mean_s(self) -> float:
        """The work per unit the choice prices, in top-clock seconds: the mean of the last
        ``WINDOW`` frames, or the flat-out rate's. Only once :meth:`need_s` has an answer."""
        if self.per_unit_top:
            return sum(self.per_unit_top) / len(self.per_unit_top)
        assert self.capacity_top is not None  # need_s answered: one of the two is known
        return 1.0 / self.capacity_top

    def late_share(self, limit_s: float) -> float:
        """The share of the last frames whose top-clock time per unit exceeds ``limit_s``
        (those that would run late at a clock where a period holds ``limit_s``)."""
        n = len(self.ranked)
        return (n - bisect.bisect_right(self.ranked, limit_s)) / n


class IdlePower:
    """The power between frames (W). With an energy counter (``metered``), from the period's
    mean power and busy share: ``P = b·P_busy + (1 − b)·P_idle`` with ``P_busy`` the model's
    at the clock, smoothed by ``GAIN``; else the readings the governor filed as idle. The
    profile's idle power is the power model's intercept, which holds what a busy GPU draws
    at any clock (memory traffic) and so overstates the gaps: a wrong idle power moves the
    cheapest clock."""

    GAIN = 0.05  # per period, of the gap to the latest estimate
    MIN_BUSY = 0.1  # a period's busy share outside MIN_BUSY..MAX_BUSY says too little
    MAX_BUSY = 0.9

    def __init__(self, metered: bool) -> None:
        self.metered = metered
        self.idle_w: Optional[float] = None

    def learn(self, obs: Observation, busy_s: float, tables: ClockTables) -> None:
        """Take in one period whose frames were busy ``busy_s`` seconds."""
        if not self.metered:
            if obs.idle_power_w is not None:  # readings between frames (no counter)
                self.idle_w = obs.idle_power_w
            return
        if obs.power_w is None or obs.dt_s <= 0:
            return
        b = busy_s / obs.dt_s
        if not (self.MIN_BUSY <= b <= self.MAX_BUSY):
            return
        busy_w = tables.power_at(obs.applied_mhz)
        sample = (obs.power_w - b * busy_w) / (1.0 - b)
        if not (0.0 < sample < busy_w):
            return
        if self.idle_w is None:
            self.idle_w = sample
        else:
            self.idle_w += self.GAIN * (sample - self.idle_w)


def busy_seconds(ticks: Sequence[Tick]) -> float:
    """The seconds the ticks' frames took, as they report it (0 for a tick without)."""
    busy_s = 0.0
    for tick in ticks:
        busy_s += tick.busy_s or 0.0
    return busy_s
