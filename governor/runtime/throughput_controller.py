"""The throughput policy's controller: the cheapest clock that keeps the app's tick rate.

Split from :mod:`governor.runtime.controllers` (which re-exports it) because it is the
largest of the controllers. Its parts live in :mod:`governor.runtime.throughput_parts`: the
frames learnt from the ticks, the clock tables, the measured search on an energy counter
(with its brackets and the duel against the deadline's floor) and the dither below it; this
class wires them. What was tried on the way, with the figures, is in
docs/benchmarks/throughput.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Deque, List, Optional, Sequence, Tuple

from governor.runtime.controller_base import (
    Controller,
    Decision,
    MemoryHints,
    Now,
    Observation,
    Tick,
)
from governor.runtime.model import ClockModel
from governor.runtime.throughput_parts.dither import Dither
from governor.runtime.throughput_parts.frames import FrameStats, IdlePower, busy_seconds
from governor.runtime.throughput_parts.pricing import Pricing
from governor.runtime.throughput_parts.search import LocalSearch
from governor.runtime.throughput_parts.tables import ClockTables, keeps_pick

if TYPE_CHECKING:
    from governor.runtime.policies import Throughput

__all__ = ["RateState", "ThroughputController"]


@dataclass(frozen=True)
class RateState:
    """The rate asked for, the app's rate over the last 2 s (None before the first period)
    and the clock chosen for it (None before the first choice)."""

    rate_target_hz: float
    rate_hz: Optional[float]
    choice_mhz: Optional[float]


class ThroughputController(Controller):
    """The cheapest clock that keeps the tick rate, from the app's ticks.

    With ``busy_s`` on the ticks (the time each frame took), a frame must fit its period
    (``1/rate_hz`` per unit): a deadline per frame. By default (``margin`` None) the work a
    clock must fit is learnt from the frames' spread (:meth:`FrameStats.need_s`): about
    ``LATE_SHARE`` of the frames may run late and no fixed headroom is paid for. An explicit
    ``margin`` keeps that share of the period free at the slowest recent frame (no frame
    late). Without ``busy_s`` the app is taken to run flat out and its rate, scaled by the
    time model, says how fast each clock would go. Among the clocks that keep up, the one
    with the least predicted energy per second (busy power plus idle power,
    :class:`ClockTables`) wins; lowering is delayed by ``HOLD_DOWN_S`` (hysteresis) once the
    spread is learnt, raising is immediate. The first frame runs at the model's PPW clock
    (the top clock with an explicit margin), which is left as that frame ends
    (:attr:`eager`), not at the first control period.

    With an energy counter (``search``) a local search on measured power
    (:class:`LocalSearch`) moves from the model's pick, which is kept while the model prices
    it within ``STICK`` of the cheapest. At the deadline's floor the clock below is
    time-shared in (:class:`Dither`) where it costs less.
    """

    HOLD_DOWN_S = 1.0
    STICK = 0.002  # (search) the model's pick is left for one priced cheaper by more than this

    def __init__(self, model: ClockModel, policy: Throughput, search: bool = False) -> None:
        super().__init__(model)
        self.policy = policy
        self.search = search
        self.tables = ClockTables(model)
        self.frames = FrameStats()
        self.idle = IdlePower(metered=search)  # an energy counter: the mean power is measured
        self.pricing = Pricing(model, policy.rate_hz, self.frames, self.idle)
        self.local_search = LocalSearch(model, self.pricing)
        self.dither = Dither(model, policy.rate_hz, self.frames, self.pricing)
        self.below_since_s: Optional[float] = None
        self.settled = False  # whether a choice from measured frames was applied yet
        self.learnt = False  # whether a choice from the frames' learnt spread was made yet
        self.choice_mhz: Optional[float] = None
        self.floor_idx = 0  # the deadline's floor: the lowest clock index that keeps it
        self.base_mhz: Optional[float] = None  # the clock chosen before the dither

    @property
    def per_unit_top(self) -> Deque[float]:
        """The last frames' top-clock time per unit (s), oldest first."""
        return self.frames.per_unit_top

    @property
    def idle_w(self) -> Optional[float]:
        """The power between frames learnt so far (W), None before any."""
        return self.idle.idle_w

    @idle_w.setter
    def idle_w(self, value: Optional[float]) -> None:
        self.idle.idle_w = value

    @property
    def rate_hz(self) -> Optional[float]:
        """The app's tick rate over the last 2 s (units/s), None before the first period."""
        return self.frames.rate_hz

    @property
    def undithered_mhz(self) -> Optional[float]:
        """The clock chosen before the dither's periods at the clock below (None before the
        first choice)."""
        return self.base_mhz

    def mean_power_by_clock(self) -> List[float]:
        """The mean power (W) at each table clock for the rate, by the model: busy for the
        share of the time the last frames' mean work takes there (every period where no
        frame was measured yet), idle at the model's idle power the rest."""
        model = self.model
        per_unit = self.frames.per_unit_top
        mean = sum(per_unit) / len(per_unit) if per_unit else None
        out = []
        for p, rel in zip(model.power_w, model.time_rel):
            busy = 1.0 if mean is None else min(1.0, self.policy.rate_hz * mean * rel)
            out.append(busy * p + (1.0 - busy) * model.idle_w)
        return out

    @property
    def eager(self) -> bool:
        """Whether a control step as a frame ends would make the first choice from measured
        frames (the governor then steps at once instead of at the next period)."""
        return self.choice_mhz is None

    def initial_mhz(self) -> float:
        """The first frame's clock, before any frame is seen: the model's PPW clock (the
        cheapest per cycle flat out; a frame needing more than ``1/t_rel(PPW)`` of its period
        at the top clock runs late, once: the first control step raises the clock as it
        ends), or the top clock when an explicit margin asks for no frame late."""
        model = self.model
        if self.policy.margin is not None:
            return model.top_mhz
        return model.clocks_mhz[model.index(model.ppw_clock_mhz)]

    def _choose(self) -> Optional[float]:
        """The cheapest clock that keeps the rate, by the model with the idle power
        measured where known; sets :attr:`floor_idx`. With the search, the last pick is
        kept while the model prices it within ``STICK`` of the cheapest."""
        model = self.model
        rate = self.policy.rate_hz
        need = self.frames.need_s(self.policy.margin)
        if need is None:
            return None
        mean = self.frames.mean_s()
        idle_w = self.idle.idle_w if self.idle.idle_w is not None else model.idle_w
        floor, best = self.tables.pick(need, rate, mean, idle_w)
        if floor is None or best is None:
            self.floor_idx = len(model.clocks_mhz) - 1
            return model.top_mhz
        self.floor_idx = floor
        chosen = self.choice_mhz
        if self.search and chosen is not None:
            i = self.tables.index_of.get(chosen)
            if (
                i is not None
                and i >= floor
                and keeps_pick(model, i, best, need, rate, mean, idle_w, self.STICK)
            ):
                return chosen
        return model.clocks_mhz[best]

    def observe(self, obs: Observation, ticks: Sequence[Tick]) -> None:
        """The frames (their time per unit, the rate) and the power between them."""
        busy_s = self.frames.learn(obs, ticks, self.tables, self.policy.rate_hz)
        self.idle.learn(obs, busy_s, self.tables)

    def choose(self, now: Now) -> Decision:
        """The cheapest clock that keeps the rate by the model, followed with hysteresis, or
        moved by the measured search; then the dither below the deadline's floor."""
        obs = now.obs
        choice = self._choose()
        self.choice_mhz = choice
        if choice is None:
            return Decision(now.current_mhz)
        # the clock chosen before the dither's periods at the clock below
        base_now = self.base_mhz if self.base_mhz is not None else now.current_mhz
        search = self.local_search
        busy_s = busy_seconds(now.ticks)
        if self.search and not self.frames.young:  # the search starts from learnt frames
            seed = self.tables.index(choice)
            base, urgent = search.decide(obs, seed, self.floor_idx, busy_s, base_now)
        else:
            if self.search:
                search.meter_young(obs, busy_s)
            base, urgent = self._follow(obs, choice, base_now)
        self.base_mhz = base
        allowed = self.policy.margin is None and not (self.search and search.measuring)
        low = self.dither.step(self.tables.index(base), self.floor_idx, allowed)
        if low is not None:
            return Decision(low)
        return Decision(base, urgent or base > now.current_mhz)

    def _follow(self, obs: Observation, choice: float, current_mhz: float) -> Tuple[float, bool]:
        """The model's pick, raised at once and lowered after the hold-down."""
        young = self.frames.young
        first = not young and not self.learnt  # the first choice from the learnt spread
        self.learnt = self.learnt or not young
        if choice > current_mhz:
            self.below_since_s = None
            self.settled = True
            return choice, True
        if choice < current_mhz:
            # the start's clock, a spread still being learnt (the headroom shrinks as frames
            # come) and the first choice from the learnt spread (the young frames' headroom
            # was a guess, not a measured need): no hysteresis to wait out
            if not self.settled or young or first:
                self.settled = True
                return choice, False
            if self.below_since_s is None:
                self.below_since_s = obs.t_s
            if obs.t_s - self.below_since_s >= self.HOLD_DOWN_S:
                self.below_since_s = None
                return choice, False
            return current_mhz, False
        self.below_since_s = None
        return current_mhz, False

    def memory_hints(self) -> MemoryHints:
        """A frame's deadline per unit, for the memory knob's test (:mod:`.mem_frames`)."""
        return MemoryHints(unit_deadline_s=1.0 / self.policy.rate_hz)

    def records(self) -> Tuple[Any, ...]:
        return (RateState(self.policy.rate_hz, self.rate_hz, self.choice_mhz),)
