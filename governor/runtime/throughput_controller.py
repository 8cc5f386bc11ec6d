"""The throughput policy's controller: the cheapest clock that keeps the app's tick rate.

Split from :mod:`governor.runtime.controllers` (which re-exports it) because it is the
largest of the controllers: the deadline learnt from the ticks, the measured search on an
energy counter, the duel against the deadline's floor and the dither below it.
"""

from __future__ import annotations

import bisect
import collections
import math
from typing import Any, Deque, Dict, List, Optional, Sequence, Tuple

from governor.runtime.controller_base import Controller, Observation, Tick
from governor.runtime.model import ClockModel
from governor.runtime.policies import Throughput

__all__ = ["ThroughputController"]


def _cost_w(busy: float, power_w: float, idle_w: float) -> float:
    """A clock's mean power at the rate: busy (at most all of the time) at its power, idle
    between frames. ``busy`` is ``rate · work per unit · t_rel`` (the one formula of the
    throughput policy's price of a clock)."""
    if busy > 1.0:
        busy = 1.0
    return busy * power_w + (1.0 - busy) * idle_w


def _scan(
    model: ClockModel, need: float, rate: float, mean: float, idle_w: float
) -> Tuple[Optional[int], Optional[int]]:
    """The deadline's floor (the lowest clock index whose ``need`` fits a period) and the
    cheapest index from it up (:func:`_cost_w`; the lowest of equal ones), by a scan of the
    whole table: (None, None) when no clock keeps up. The reference :class:`_Tables` answers
    in O(log n) where the model's shape allows; kept for the tables where it does not."""
    floor: Optional[int] = None
    best: Optional[int] = None
    best_cost = math.inf
    time_rel, power_w = model.time_rel, model.power_w
    for i in range(len(time_rel)):
        rel = time_rel[i]
        if need * rel * rate > 1.0:
            continue
        if floor is None:
            floor = i
        cost = _cost_w(rate * mean * rel, power_w[i], idle_w)
        if best is None or cost < best_cost - 1e-12:
            best_cost, best = cost, i
    return floor, best


class _Tables:
    """Look-ups of one :class:`ClockModel` for the throughput step, built once per model.

    ``index_of``: a table clock's index. ``fast``: whether :meth:`cheapest` may answer for
    :func:`_scan`: the time per unit strictly falls and the power does not fall with the
    clock (every calibrated and generic model; a best-probe model's interpolated probes may
    not). Then a clock's cost while it is busy less than all of the time is
    ``idle + rate·mean·(t_rel·P − idle·t_rel)``, so the cheapest of those is the point of
    ``(t_rel, t_rel·P)`` that minimises ``y − idle·x``: a vertex of the points' lower convex
    hull, found by bisection on the hull's edge slopes whatever the work per frame. The
    clocks busy all of the time (where the mean frame exceeds its period; the deadline's
    floor may be one when the recent frames' mean exceeds the learnt deadline) cost their
    power, the least at the floor: the hull over all the clocks from the floor up answers
    for them too, with the floor priced as well (a vertex among them minimises the line
    below every clock busy less than all of the time, and then the floor is the cheapest:
    its power is at most that vertex's, which costs at most its line's value there when its
    power is above the idle power, and at most any clock above it otherwise). The hull of
    each suffix of the table (the clocks from the floor up) is built when first asked for
    (O(n)) and kept."""

    def __init__(self, model: ClockModel) -> None:
        self.model = model
        clocks, time_rel, power_w = model.clocks_mhz, model.time_rel, model.power_w
        self.index_of: Dict[float, int] = {f: i for i, f in enumerate(clocks)}
        n = len(clocks)
        self.fast = n > 0 and all(
            time_rel[i + 1] < time_rel[i] and power_w[i + 1] >= power_w[i] for i in range(n - 1)
        )
        self.energy = tuple(rel * p for rel, p in zip(time_rel, power_w))  # per unit, relative
        self.hulls: Dict[int, Tuple[List[int], List[float]]] = {}

    def _hull(self, start: int) -> Tuple[List[int], List[float]]:
        """The lower convex hull of ``(t_rel, t_rel·P)`` over indices ``start..n-1``, in
        rising ``t_rel`` (falling index), and its edges' slopes (rising)."""
        hull = self.hulls.get(start)
        if hull is not None:
            return hull
        xs, ys = self.model.time_rel, self.energy
        idx: List[int] = []
        for i in range(len(xs) - 1, start - 1, -1):  # x rises as the index falls
            while len(idx) >= 2:
                o, a = idx[-2], idx[-1]
                if (xs[a] - xs[o]) * (ys[i] - ys[o]) - (ys[a] - ys[o]) * (xs[i] - xs[o]) > 0:
                    break
                idx.pop()  # a is not below the chord from o to i
            idx.append(i)
        slopes = [(ys[b] - ys[a]) / (xs[b] - xs[a]) for a, b in zip(idx, idx[1:])]
        hull = self.hulls[start] = (idx, slopes)
        return hull

    def cheapest(
        self, need: float, rate: float, mean: float, idle_w: float
    ) -> Tuple[Optional[int], Optional[int]]:
        """What :func:`_scan` answers, in O(log n) (see the class docstring): the floor by
        bisection on the same deadline test, the cheapest by the hull; the floor, the hull's
        vertex and its two neighbours on the hull are priced with :func:`_cost_w` and ranked
        as the scan ranks them, so a near tie goes the scan's way."""
        time_rel, power_w = self.model.time_rel, self.model.power_w
        n = len(time_rel)
        lo, hi = 0, n
        while lo < hi:  # the first index whose need fits a period (the test rises with i)
            mid = (lo + hi) // 2
            if need * time_rel[mid] * rate > 1.0:
                lo = mid + 1
            else:
                hi = mid
        floor = lo
        if floor == n:
            return None, None
        busy_per_rel = rate * mean
        idx, slopes = self._hull(floor)
        t = bisect.bisect_right(slopes, idle_w)  # the vertex minimising y - idle·x
        best, best_cost = floor, _cost_w(busy_per_rel * time_rel[floor], power_w[floor], idle_w)
        for j in (t + 1, t, t - 1):  # rising index, as the scan goes
            if 0 <= j < len(idx) and idx[j] != floor:
                i = idx[j]
                cost = _cost_w(busy_per_rel * time_rel[i], power_w[i], idle_w)
                if cost < best_cost - 1e-12:
                    best_cost, best = cost, i
        return floor, best


class ThroughputController(Controller):
    """The cheapest clock that keeps the tick rate, from the app's ticks.

    With ``busy_s`` on the ticks (the time each frame took), a frame must fit its period
    (``1/rate_hz`` per unit): a deadline per frame. By default (``margin`` None) the work a
    clock must fit is learnt from the frames' spread: the frame exceeded by only
    ``LATE_SHARE`` of the last ``LONG_FRAMES`` frames (their top-clock time per unit), so
    about that share may run late and no fixed headroom is paid for; until ``MIN_FRAMES``
    frames are seen, the slowest one with a headroom that shrinks as frames come. An
    explicit ``margin`` keeps that share of the period free at the slowest frame of the
    last ``WINDOW`` (no frame late). Without ``busy_s`` the app is taken to run flat out and
    its rate, scaled by the time model, says how fast each clock would go. Among the clocks
    that keep up, the one with the least predicted energy per second (busy power plus idle
    power) wins; lowering is delayed by ``hold_down_s`` (hysteresis) once the spread is
    learnt, raising is immediate. The first frame runs at the model's PPW clock (the top
    clock with an explicit margin), which is left as that frame ends (:attr:`eager`), not
    at the first control period.

    With an energy counter (``search``) a local search on measured power moves from the
    model's pick and holds the local minimum it finds while its measured cost holds
    (``DRIFT``). A neighbour is measured between two windows of the held clock
    (:meth:`_bracket`, the board's warming cancelled); a neighbour within ``BRACKET_NOISE``
    (narrowing as more brackets are averaged) is ranked by the model where the model's ratio
    is within that noise of the measured one too, else bracketed again up to ``BRACKETS``
    times and the brackets' mean decides; at a local minimum next to a measured neighbour
    the step halves down to the table's (the cheapest clock may lie between). A
    pick more than two search steps above the deadline's floor is first measured against
    the floor (:meth:`_duel`; the young frames' window at the pick is its first); when it
    is not clearly cheaper the floor is held wherever it moves (:attr:`at_floor`). At the deadline's floor the clock below is time-shared in
    (:meth:`_dither`) up to ``DITHER_SHARE`` of the frames late, where it costs less.
    """

    WINDOW = 90  # frames remembered for the deadline check
    HOLD_DOWN_S = 1.0
    SETTLE_S = 0.3  # local search (energy counter only): after a change, then measure
    MEASURE_S = 2.0
    STALE_S = 20.0  # a neighbour's measured power is trusted this long
    PROBE_WITHIN = 0.01  # a neighbour the model prices more than this dearer is not probed
    LONG_FRAMES = 600  # frames in the long mean of the work per frame (the search's cost)
    IDLE_GAIN = 0.05  # per period, of the gap to the latest idle-power estimate
    LATE_SHARE = 0.005  # of the frames the learnt deadline may let run late
    MIN_FRAMES = 30  # frames before their spread is trusted
    YOUNG_HEADROOM = 0.25  # over the slowest frame with one frame seen; / sqrt(frames)
    FLAT_MARGIN = 0.1  # headroom without busy_s (no spread known), unless margin is given
    RESEED_S = 1.0  # the model's pick this long away from the search's start: start there
    DITHER_SHARE = 0.0075  # of the frames the dither with the clock below may let run late
    STICK = 0.002  # (search) the model's pick is left for one priced cheaper by more than this
    NOISE = 0.003  # a neighbour measured cheaper by less is not taken to be cheaper
    DRIFT = 0.02  # a settled clock's measured cost moved this much: search again
    FIT_PERIODS = 10  # (search) a window's periods needed to fit its power's rise with busy
    DUEL_S = 0.5  # (search) a window of the duel between the model's far pick and the floor
    BRACKET_NOISE = 0.001  # a neighbour bracketed once by this clock's windows: cheaper beyond
    BRACKETS = 4  # a neighbour within the noise is bracketed again, up to this many times

    def __init__(self, model: ClockModel, policy: Throughput, search: bool = False) -> None:
        super().__init__(model)
        self.policy = policy
        self.per_unit_top: Deque[float] = collections.deque(maxlen=self.WINDOW)
        self.capacity_top: Optional[float] = None  # units/s at the top clock when flat out
        # the ticks of the last 2 s: when, and the units done (apart: summed in C)
        self.rate_times: Deque[float] = collections.deque()
        self.rate_units: Deque[float] = collections.deque()
        self.below_since_s: Optional[float] = None
        self.settled = False  # whether a choice from measured frames was applied yet
        self.choice_mhz: Optional[float] = None
        self.rate_hz: Optional[float] = None
        self.search = search
        self.metered = search  # an energy counter: the period's mean power is measured
        self.idle_w: Optional[float] = None  # measured between frames (see _learn_idle)
        self.floor_idx = 0
        self.target: Optional[int] = None
        self.seed_idx = 0  # the model's pick the search started from
        self.away_s = 0.0  # how long the model's pick has been away from it
        self.costs: Dict[int, Tuple[float, float]] = {}  # index -> (mean power W, when)
        self.held_s = self.energy_j = self.measured_s = 0.0
        self.step = max(1, int(round(0.02 * len(model.clocks_mhz))))
        self.span = self.step  # (search) the neighbours' distance now: halved at a minimum
        self.period_busy_s = self.window_busy_s = 0.0
        # (search) the window's periods: sums of b·dt, b²·dt and b·P·dt (b the period's busy
        # share, P its mean power), for the slope of power on the busy share (_rate_cost)
        self.window_b2 = self.window_bp = self.window_rel_s = 0.0
        self.window_periods = 0
        self.units_seen = 0
        self.unit_mean = 0.0  # busy s per unit at the top clock, over the last frames
        # the last LONG_FRAMES frames' top-clock time per unit, in arrival order and sorted
        self.recent: Deque[float] = collections.deque(maxlen=self.LONG_FRAMES)
        self.ranked: List[float] = []
        # whether each of the last LONG_FRAMES frames ran past its period, and how many did
        self.late: Deque[bool] = collections.deque(maxlen=self.LONG_FRAMES)
        self.late_count = 0
        self.base_mhz: Optional[float] = None  # the clock chosen before the dither
        self.carry = 0.0  # error diffusion of the dither's share
        self.dither_mhz: Optional[float] = None  # the clock below, while dithering
        self.settled_cost: Optional[float] = None  # the search's local minimum, measured
        self.duel: Optional[int] = None  # the model's far pick, measured against the floor
        self.duel_floor_w: List[float] = []  # the floor's windows in the duel
        self.at_floor = False  # (search) holding the deadline's floor, wherever it moves
        # (search) a neighbour being probed from ``home``, and home's window before it
        self.home: Optional[int] = None
        self.home_w = 0.0
        self.probe_w = 0.0
        self.probe: Optional[int] = None
        # (search) (probe, home) -> (probe's cost over home's, when, brackets): the mean of
        # the bracketed comparisons made lately
        self.pairs: Dict[Tuple[int, int], Tuple[float, float, int]] = {}
        # (search) the young frames' clock and, past SETTLE_S there, its energy J, s, busy s
        self.young: Optional[Tuple[float, float, float, float]] = None
        self.young_held_s = 0.0
        self.duel_pick_w: Optional[float] = None  # the duel's pick measured before the floor
        self._tables_cache: Optional[_Tables] = None

    @property
    def eager(self) -> bool:
        """Whether a control step as a frame ends would make the first choice from measured
        frames (the governor then steps at once instead of at the next period)."""
        return self.choice_mhz is None

    def initial_mhz(self) -> float:
        """The first frame's clock, before any frame is seen: the model's PPW clock (the
        cheapest per cycle flat out; a frame needing more than ``1/t_rel(PPW)`` of its period
        at the top clock, 62-85 % on the simulated boards, runs late, once: the first control
        step raises the clock as it ends), or the top clock when an explicit margin asks for
        no frame late."""
        model = self.model
        if self.policy.margin is not None:
            return model.top_mhz
        return model.clocks_mhz[model.index(model.ppw_clock_mhz)]

    def _learn(self, obs: Observation, ticks: Sequence[Tick]) -> None:
        units = 0.0
        flat = 0.0
        busy_s = 0.0
        index_of = self._tables().index_of
        time_rel = self.model.time_rel
        rate_hz, long_frames = self.policy.rate_hz, self.LONG_FRAMES
        recent, ranked, late_frames = self.recent, self.ranked, self.late
        for tick in ticks:
            units += tick.units
            busy_s += tick.busy_s or 0.0
            self.rate_times.append(tick.t_s)
            self.rate_units.append(tick.units)
            i = index_of.get(tick.applied_mhz)
            rel = time_rel[i] if i is not None else self.model.time_rel_at(tick.applied_mhz)
            if tick.busy_s is not None and tick.units > 0:
                per_unit = tick.busy_s / tick.units / rel
                self.per_unit_top.append(per_unit)
                if len(recent) == long_frames:
                    del ranked[bisect.bisect_left(ranked, recent[0])]
                recent.append(per_unit)
                bisect.insort(ranked, per_unit)
                self.units_seen = min(self.units_seen + 1, long_frames)
                self.unit_mean += (per_unit - self.unit_mean) / self.units_seen
                late = tick.busy_s * rate_hz > tick.units
                if len(late_frames) == long_frames:
                    self.late_count -= late_frames[0]
                late_frames.append(late)
                self.late_count += late
            else:
                flat += tick.units * rel
        times, since = self.rate_times, obs.t_s - 2.0
        while times and times[0] < since:
            times.popleft()
            self.rate_units.popleft()
        self.period_busy_s = busy_s
        self._learn_idle(obs, busy_s)
        span = min(2.0, obs.elapsed_s + obs.dt_s)
        self.rate_hz = sum(self.rate_units) / span if span > 0 else None
        if flat > 0 and obs.dt_s > 0:
            sample = flat / obs.dt_s  # units per second the top clock would do
            self.capacity_top = (
                sample
                if self.capacity_top is None
                else self.capacity_top + 0.3 * (sample - self.capacity_top)
            )

    def _learn_idle(self, obs: Observation, busy_s: float) -> None:
        """The power between frames, from the period's mean power (an energy counter's)
        and its busy share (the frames' ``busy_s``): ``P = b·P_busy + (1 − b)·P_idle``.
        The profile's idle power is the power model's intercept, which holds what a busy
        GPU draws at any clock (memory traffic) and so overstates the gaps: a wrong idle
        power moves the cheapest clock."""
        if not self.metered:
            if obs.idle_power_w is not None:  # readings between frames (no counter)
                self.idle_w = obs.idle_power_w
            return
        if obs.power_w is None or obs.dt_s <= 0:
            return
        b = busy_s / obs.dt_s
        if not (0.1 <= b <= 0.9):
            return
        i = self._tables().index_of.get(obs.applied_mhz)
        busy_w = self.model.power_w[i] if i is not None else self.model.power_at(obs.applied_mhz)
        sample = (obs.power_w - b * busy_w) / (1.0 - b)
        if not (0.0 < sample < busy_w):
            return
        if self.idle_w is None:
            self.idle_w = sample
        else:
            self.idle_w += self.IDLE_GAIN * (sample - self.idle_w)

    def need_s(self) -> Optional[float]:
        """Top-clock seconds per unit that a clock, scaled by its time model, must fit into a
        unit's period (see the class docstring); None before any progress is seen."""
        margin = self.policy.margin
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

    def _tables(self) -> _Tables:
        """The per-model look-ups (built once per model; see :class:`_Tables`)."""
        tables = self._tables_cache
        if tables is None or tables.model is not self.model:
            tables = self._tables_cache = _Tables(self.model)
        return tables

    def _index(self, clock_mhz: float) -> int:
        """:meth:`ClockModel.index`, by a dict look-up for a table clock."""
        i = self._tables().index_of.get(clock_mhz)
        return i if i is not None else self.model.index(clock_mhz)

    def _choose(self) -> Optional[float]:
        """The cheapest clock that keeps the rate, by the model with the idle power
        measured where known (see :func:`_cost_w`); sets :attr:`floor_idx`. With the search,
        the last pick is kept while the model prices it within ``STICK`` of the cheapest."""
        model = self.model
        rate = self.policy.rate_hz
        need = self.need_s()
        if need is None:
            return None
        if self.per_unit_top:
            mean = sum(self.per_unit_top) / len(self.per_unit_top)
        else:
            mean = 1.0 / self.capacity_top  # type: ignore[operator]
        idle_w = self.idle_w if self.idle_w is not None else model.idle_w
        tables = self._tables()
        if tables.fast:
            floor, best = tables.cheapest(need, rate, mean, idle_w)
        else:
            floor, best = _scan(model, need, rate, mean, idle_w)
        if floor is None:
            self.floor_idx = len(model.clocks_mhz) - 1
            return model.top_mhz
        self.floor_idx = floor
        chosen = self.choice_mhz
        if self.search and chosen is not None:
            i = tables.index_of.get(chosen)
            if i is not None and i >= floor and need * model.time_rel[i] * rate <= 1.0:
                # the search's seed: a pick the model prices within 0.2 % of the cheapest
                # is kept, else the idle power still being learnt flips it between far
                # clocks on a flat curve and every flip starts the search again
                held = _cost_w(rate * mean * model.time_rel[i], model.power_w[i], idle_w)
                if held <= _cost_w(
                    rate * mean * model.time_rel[best], model.power_w[best], idle_w
                ) * (1.0 + self.STICK):
                    return chosen
        return model.clocks_mhz[best]

    def _search(self, obs: Observation, choice: float, current_mhz: float) -> Tuple[float, bool]:
        """Local search on measured power among the clocks that keep the rate: the model's
        pick is where it starts, the energy counter says which neighbour is cheaper. A local
        minimum is held while its measured cost stays within ``DRIFT`` of what it was (no
        periodic probing of neighbours on a steady load)."""
        clocks = self.model.clocks_mhz
        top = len(clocks) - 1
        floor = self.floor_idx
        seed = self._index(choice)
        now = obs.t_s
        away = abs(seed - self.seed_idx) > 2 * self.step
        self.away_s = self.away_s + obs.dt_s if away else 0.0
        if self.target is None:
            self.costs.clear()
            self._start(seed, now)
        elif self.away_s >= self.RESEED_S:
            # the model's pick moved away and stayed (its idle power and work per frame are
            # still being learnt): start again from the new pick, unless the clock held now
            # was measured cheaper than that pick lately
            there, here = self.costs.get(seed), self.costs.get(self.target)
            if (
                there is None
                or here is None
                or now - there[1] > self.STALE_S
                or now - here[1] > self.STALE_S
                or here[0] > there[0]
            ):
                self._start(seed, now)
            else:
                self.seed_idx, self.away_s = seed, 0.0
        if self.at_floor and self.target != floor:  # the floor moved: so does the clock
            self.target, self.home = floor, None
            self._new_window()
        if self.target < floor:  # the deadline, not the search, decides: up at once
            # a duel's window at the floor goes on at the floor risen (its first seconds'
            # frames raise it a step or two as their slowest one grows): neighbouring floors
            # differ by 0.1-0.2 %, the duel's clocks by 1-3 %, and starting the window again
            # (settle and all) at a floor 2.4 % dearer than the pick cost A100 PCIe 0.04 %
            # of a minute's energy (seed 1: 675, 690 then 705 MHz, 1.4 s at the floor)
            in_duel_floor = self.duel is not None and self.target != self.duel
            self.target, self.home = floor, None
            if not in_duel_floor:
                self._new_window()
            duel = self.costs.get(self.duel) if self.duel is not None else None
            self.costs.clear()
            self.settled_cost = None
            if self.duel is not None and self.duel <= floor + 2 * self.step:
                self.duel = None  # the floor rose to the pick: nothing to measure against
            elif duel is not None:  # the pick's window stands: the floor's is measured again
                self.costs[self.duel] = duel  # type: ignore[index]
            return clocks[floor], True
        if obs.power_w is not None and obs.applied_mhz == clocks[self.target]:
            self.held_s += obs.dt_s
            if self.held_s > self.SETTLE_S:
                self.energy_j += obs.power_w * obs.dt_s
                self.measured_s += obs.dt_s
                self.window_busy_s += self.period_busy_s
                self.window_rel_s += self.model.time_rel[self.target] * obs.dt_s
                if obs.dt_s > 0:
                    b = self.period_busy_s / obs.dt_s
                    self.window_b2 += b * self.period_busy_s
                    self.window_bp += obs.power_w * self.period_busy_s
                    self.window_periods += 1
            if self.measured_s >= (self.MEASURE_S if self.duel is None else self.DUEL_S):
                cost = self._rate_cost(
                    self.target,
                    self.energy_j / self.measured_s,
                    self.window_busy_s / self.measured_s,
                    self._window_slope_w(),
                    self.window_rel_s / self.measured_s,
                )
                self._new_window()
                self.costs[self.target] = (cost, now)
                if self.home is not None:
                    ab = self._bracket(cost, now)
                    if ab is not None:
                        return ab, ab > current_mhz
                if self.duel is not None:
                    self._duel(floor, cost)
                    target = clocks[self.target]
                    return target, target > current_mhz
                settled = self.settled_cost
                if settled is not None and abs(cost - settled) <= self.DRIFT * settled:
                    return clocks[self.target], False  # a steady load: stay, no probing
                if self.at_floor:  # the first window at the floor, or its cost moved
                    pick = self.costs.get(seed)
                    if settled is None or (pick is not None and now - pick[1] <= self.STALE_S):
                        # a warming board moves the cost too (4-10 % in its first minute):
                        # the pick measured dearer lately is not measured again for it
                        self.settled_cost = cost
                    else:
                        self._start(seed, now)
                    target = clocks[self.target]
                    return target, target > current_mhz
                self.settled_cost = None  # not settled yet, or the load changed: search
                self._neighbours(cost, now, floor, top)
        target = clocks[self.target]
        return target, target > current_mhz

    def _neighbours(self, cost: float, now: float, floor: int, top: int) -> None:
        """(search) After a window at the target (its cost ``cost``), not in a bracket or
        a duel: descend to a neighbour measured cheaper, probe one not measured yet (the
        window just taken is the bracket's first at home), halve the step at a local
        minimum next to a measured neighbour and go on with the nearer neighbours at once,
        bracket again a neighbour not told apart yet, or hold a local minimum
        (:attr:`settled_cost`)."""
        while True:
            step = self.span
            near = [i for i in (self.target - step, self.target + step) if floor <= i <= top]
            # a neighbour's cost over this clock's, measured between this clock's windows
            # (_bracket: the board's warming cancelled) lately; a window measured apart
            # is off by the warming in between (0.1-0.5 % over a few seconds)
            rel: Dict[int, float] = {}
            counts: Dict[int, int] = {}
            for i in near:
                pair = self.pairs.get((i, self.target))
                if pair is not None and now - pair[1] <= self.STALE_S:
                    rel[i], counts[i] = pair[0], pair[2]
            known = list(rel)
            # a side the model (with the measured idle power) prices clearly dearer is
            # not probed: a probe there costs more than the model's error it could find
            here = self._predicted_w(self.target)
            unknown = [
                i
                for i in near
                if i not in rel and self._predicted_w(i) <= here * (1.0 + self.PROBE_WITHIN)
            ]
            verdict = {i: self._verdict(rel[i], counts[i]) for i in known}
            for i in known:
                if verdict[i] == 0:
                    # within the noise (one bracket reads a difference with 0.02-0.045 % of
                    # noise, neighbours can differ by as little): where the model's ratio
                    # (with the measured idle power) is within that noise of the brackets'
                    # mean too, the model decides; else the model is off here (a knee one
                    # step from the calibrated one) and the neighbour is bracketed again,
                    # the brackets' mean deciding
                    model_ratio = self._predicted_w(i) / here
                    band = self.BRACKET_NOISE / math.sqrt(counts[i])
                    if abs(model_ratio - rel[i]) <= band and model_ratio != 1.0:
                        verdict[i] = 1 if model_ratio > 1.0 else -1
            cheaper = [i for i in known if verdict[i] < 0]
            alike = [i for i in known if verdict[i] == 0]
            if cheaper:  # descend
                self.target = min(cheaper, key=lambda i: rel[i])
            elif unknown:  # look on the side not seen yet, then back (_bracket)
                self.home, self.home_w = self.target, cost
                self.target = min(unknown, key=self._predicted_w)  # the likelier first
            elif self.span > 1 and known:
                # a local minimum next to a measured neighbour (alike or dearer; the other
                # side measured too or priced clearly dearer by the model): the cheapest
                # clock may lie between (bisection), its neighbours looked at now
                self.span //= 2
                continue
            elif alike:  # measured again, the one read cheaper first
                self.home, self.home_w = self.target, cost
                self.target = min(alike, key=lambda i: rel[i])
            else:  # a local minimum: stay while its cost holds
                self.settled_cost = cost
            return

    def _verdict(self, ratio: float, brackets: int) -> int:
        """A neighbour's mean bracketed cost over this clock's, ``ratio``, after ``brackets``
        comparisons: -1 cheaper, 1 dearer, 0 not told apart yet. The noise band
        ``BRACKET_NOISE`` narrows as the square root of the brackets (their noise is
        independent: the warming cancels in each); after ``BRACKETS`` the mean's side
        decides (the two are then within the mean's noise of each other, and holding either
        costs at most that)."""
        band = self.BRACKET_NOISE / math.sqrt(brackets)
        if ratio < 1.0 - band:
            return -1
        if ratio > 1.0 + band:
            return 1
        if brackets >= self.BRACKETS:
            return -1 if ratio < 1.0 else 1
        return 0

    def _pair(self, probe: int, home: int, ratio: float, now: float) -> None:
        """Add a bracketed comparison (``probe``'s cost over ``home``'s) to the mean kept
        for the pair, both ways round; one older than ``STALE_S`` starts it again."""
        for key, value in (((probe, home), ratio), ((home, probe), 1.0 / ratio)):
            old = self.pairs.get(key)
            if old is None or now - old[1] > self.STALE_S:
                self.pairs[key] = (value, now, 1)
            else:
                n = old[2] + 1
                self.pairs[key] = (old[0] + (value - old[0]) / n, now, n)

    def _bracket(self, cost: float, now: float) -> Optional[float]:
        """After a window (its cost ``cost``) of a probe from :attr:`home` or of home's
        window after it: the clock to hold next, or None when the search decides as usual
        from the costs. A probe measured clearly cheaper than home's window before it is
        taken at once (a warming board works against it); else home is measured again and
        its cost is the mean of its windows either side of the probe, so that the board's
        warming in between (about 0.1 % of a 2-s window) cancels and neighbours are compared
        at one temperature, as the duel does with the floor."""
        home = self.home
        if self.target != home:  # the probe's window
            if cost < self.home_w * (1.0 - self.NOISE):
                # cheaper than home's window before it, warming against it: decided
                self.home = None
                self._pair(home, self.target, self.home_w / cost, now)  # type: ignore[arg-type]
                return None
            self.probe_w = cost
            probe = self.probe = self.target
            self.target = home  # type: ignore[assignment]
            self.costs[probe] = (cost, now)  # type: ignore[index]
            return self.model.clocks_mhz[home]  # type: ignore[index]
        self.home = None
        home_w = 0.5 * (self.home_w + cost)
        self.costs[home] = (home_w, now)  # type: ignore[index]
        probe = self.probe
        self._pair(probe, home, self.probe_w / home_w, now)  # type: ignore[arg-type]
        return None

    def _start(self, seed: int, now: float) -> None:
        """Start the search at clock index ``seed`` (the model's pick); when that pick is
        more than two search steps above the deadline's floor, it is first measured against
        the floor (:meth:`_duel`), the young frames' window at the pick, if they ran there,
        being the duel's first (finished at the pick when shorter than ``DUEL_S``)."""
        self.target, self.seed_idx, self.away_s = seed, seed, 0.0
        self._new_window()
        self.settled_cost = None
        self.span = self.step
        self.duel = seed if seed > self.floor_idx + 2 * self.step else None
        self.duel_floor_w = []
        self.home = None
        self.at_floor = seed <= self.floor_idx
        self.duel_pick_w = None
        if self.duel is not None:
            self.target = self.floor_idx
            young = self.young
            if young is not None and young[0] == self.model.clocks_mhz[seed]:
                # the young frames ran at this pick: their window is the duel's first
                energy_j, seconds, busy_s = young[1:]
                if seconds >= self.DUEL_S:
                    cost = self._rate_cost(seed, energy_j / seconds, busy_s / seconds)
                    self.duel_pick_w = cost
                    self.costs[seed] = (cost, now)
                else:  # too short yet: it goes on there, then the floor's (see _duel)
                    self.target, self.held_s = seed, self.young_held_s
                    self.energy_j, self.measured_s, self.window_busy_s = energy_j, seconds, busy_s
                    self.window_b2 = self.window_bp = math.nan  # no periods kept: no slope
                    self.window_rel_s = self.model.time_rel[seed] * seconds
        self.young = None

    def _young_window(self, obs: Observation) -> None:
        """(search) Meter the young frames' clock (they follow the model's pick): past
        ``SETTLE_S`` at one clock, the energy, time and busy time there (:attr:`young`)."""
        if obs.power_w is None or obs.dt_s <= 0:
            return
        young = self.young
        if young is None or young[0] != obs.applied_mhz:
            self.young, self.young_held_s = (obs.applied_mhz, 0.0, 0.0, 0.0), 0.0
            young = self.young
        self.young_held_s += obs.dt_s
        if self.young_held_s > self.SETTLE_S:
            self.young = (
                young[0],
                young[1] + obs.power_w * obs.dt_s,
                young[2] + obs.dt_s,
                young[3] + self.period_busy_s,
            )

    def _duel(self, floor: int, cost: float) -> None:
        """After a window (its cost ``cost``) of the duel between the model's far pick and
        the floor: the next clock. The model's pick hinges on the idle power between frames
        (5 % lower moves it from the floor to the voltage knee on every counter board),
        which a cold board's warming biases low for 10-20 s; the counter settles it. The
        floor, the pick, the floor again, each for ``DUEL_S`` (the two differ by 1-3 % where
        the model is wrong, not 0.03 % as neighbours do): the pick against the mean of the
        floor's two windows, so the board's warming in between (early on 0.2-0.6 % of the
        power per second) cancels; a pick measured cheaper than the floor's first window
        wins at once (the warming only works against it). When the young frames ran at the
        pick (:meth:`_young_window`), their window is the pick's before the floor's first
        (one shorter than ``DUEL_S``, the pick having moved late in the young second, is
        measured on at the pick until it is long enough, rather than left for the floor and
        taken again whole after it), and a floor measured cheaper than it by more than
        ``NOISE`` wins at once (the
        warming works against the floor); else the duel goes on as above, so a pick never
        wins on a window measured before the floor's. The floor is kept unless
        measured dearer than the pick by more than ``NOISE``, then held wherever it moves
        (:attr:`at_floor`)."""
        pick = self.duel
        if self.target == pick and not self.duel_floor_w:
            # the young frames' window at the pick, finished: the pick's before the floor's
            self.duel_pick_w = cost
            self.target = floor
            return
        if self.target == pick:
            if cost < self.duel_floor_w[0] * (1.0 - self.NOISE):
                # cheaper than the floor measured before it, warming against it: decided
                self.duel, self.duel_floor_w = None, []
                return
            self.target = floor  # the floor's second window next
            return
        self.duel_floor_w.append(cost)
        if len(self.duel_floor_w) == 1:  # the floor's first window: the pick's next
            if self.duel_pick_w is not None and cost < self.duel_pick_w * (1.0 - self.NOISE):
                # cheaper than the pick measured before it (the young frames' window),
                # warming against it: decided, the floor held
                self.duel, self.duel_floor_w = None, []
                self.at_floor = True
                self.settled_cost = cost
                return
            self.target = pick  # type: ignore[assignment]
            return
        floor_w = 0.5 * (self.duel_floor_w[0] + self.duel_floor_w[1])
        self.duel, self.duel_floor_w = None, []
        there = self.costs.get(pick)  # type: ignore[arg-type]
        if there is not None and there[0] < floor_w * (1.0 - self.NOISE):
            self.target = pick  # type: ignore[assignment]  # the search goes on from there
        else:  # the floor held, and followed, while its cost holds
            self.at_floor = True
            self.settled_cost = cost

    def _predicted_w(self, i: int) -> float:
        """The model's mean power for clock index ``i`` at the rate (idle power measured
        where it is known)."""
        model = self.model
        per_unit = self.unit_mean if self.units_seen else 0.0
        idle = self.idle_w if self.idle_w is not None else model.idle_w
        return _cost_w(self.policy.rate_hz * per_unit * model.time_rel[i], model.power_w[i], idle)

    def _new_window(self) -> None:
        """(search) Start a window at the target: nothing held or measured yet."""
        self.held_s = self.energy_j = self.measured_s = self.window_busy_s = 0.0
        self.window_b2 = self.window_bp = self.window_rel_s = 0.0
        self.window_periods = 0

    def _window_slope_w(self) -> Optional[float]:
        """(search) The window's mean power per unit of busy share, fitted over its periods
        (least squares of each period's power on its busy share): ``P_busy − P_idle`` at the
        window's clock and temperature. None for a window of fewer than ``FIT_PERIODS``
        periods (a duel's: the clocks it compares differ by 1-3 %, the learnt idle power
        does for them), where the periods' shares do not spread enough to fit (their
        jitter: three frames a period) or the fit is not a rise."""
        t = self.measured_s
        if self.window_periods < self.FIT_PERIODS or t <= 0 or not math.isfinite(self.window_b2):
            return None
        b = self.window_busy_s / t
        var = self.window_b2 / t - b * b
        if var < 1e-6 * max(b * b, 1e-12):  # shares that do not spread: no slope
            return None
        slope = (self.window_bp / t - b * self.energy_j / t) / var
        return slope if slope > 0.0 else None

    def _rate_cost(
        self,
        i: int,
        mean_w: float,
        busy: float,
        slope_w: Optional[float] = None,
        time_rel: Optional[float] = None,
    ) -> float:
        """The mean power a clock costs at the long-run work per frame, from a window's
        measured mean power ``mean_w`` and busy share ``busy``: the frames' jitter moves the
        window's busy share by more than neighbouring clocks differ, so the window's power
        is moved along its rise with the busy share, ``slope_w`` (``P_busy − P_idle``), to
        the long mean's share. ``slope_w`` is the window's own fit of its periods
        (:meth:`_window_slope_w`) where there is one, else ``(mean_w − P_idle)/busy`` with
        the learnt idle power, which carries the board's warming (a few W on the counter
        boards; one bracket's comparison of two neighbours, the simulated RTX A4000, A100
        PCIe and SXM, scatters by 0.03-0.06 % with it, 0.02-0.045 % with the fit).
        ``time_rel`` is the mean relative time per unit of the clocks the window ran at
        (a duel's floor window goes on when the floor rises under it), ``i``'s by default:
        the long-run share is the one those clocks would have, not ``i``'s alone."""
        idle = self.idle_w
        if not (0.05 <= busy <= 0.95) or self.units_seen < 30:
            return mean_w
        if slope_w is None:
            if idle is None:
                return mean_w
            slope_w = (mean_w - idle) / busy
        if time_rel is None:
            time_rel = self.model.time_rel[i]
        share = self.policy.rate_hz * self.unit_mean * time_rel
        if share >= 1.0:  # busy all of the time: its busy power
            return mean_w + slope_w * (1.0 - busy)
        return mean_w + slope_w * (share - busy)

    def decide(self, obs, ticks, current_mhz):
        self._learn(obs, ticks)
        choice = self._choose()
        self.choice_mhz = choice
        if choice is None:
            return current_mhz, False
        # the clock chosen before the dither's periods at the clock below
        base_now = self.base_mhz if self.base_mhz is not None else current_mhz
        young = bool(self.per_unit_top) and len(self.ranked) < self.MIN_FRAMES
        if self.search and not young:  # the search starts from a choice of learnt frames
            base, urgent = self._search(obs, choice, base_now)
        else:
            if self.search:
                self._young_window(obs)
            base, urgent = self._follow(obs, choice, base_now)
        self.base_mhz = base
        low = self._dither(self._index(base))
        if low is not None:
            return low, False
        return base, urgent or base > current_mhz

    def _follow(self, obs: Observation, choice: float, current_mhz: float) -> Tuple[float, bool]:
        """The model's pick, raised at once and lowered after the hold-down."""
        if choice > current_mhz:
            self.below_since_s = None
            self.settled = True
            return choice, True
        if choice < current_mhz:
            # the start's top clock, and a spread still being learnt (the headroom shrinks
            # as frames come): no hysteresis to wait out
            if not self.settled or (self.per_unit_top and len(self.ranked) < self.MIN_FRAMES):
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

    def _late_share(self, i: int) -> float:
        """The share of the last frames that would run past their period at clock index
        ``i`` (their top-clock time per unit scaled by the time model)."""
        n = len(self.ranked)
        limit = 1.0 / (self.policy.rate_hz * self.model.time_rel[i])
        return (n - bisect.bisect_right(self.ranked, limit)) / n

    def _dither_shares(self, i: int) -> Optional[Tuple[float, float]]:
        """The late shares (at ``i``, at the clock below) when clock index ``i`` may be
        time-shared with the one below (see :meth:`_dither`), else None: the floor, learnt
        frames, a search not measuring, few frames seen late, frames that would not queue
        below, the clock below cheaper (the model with the measured idle power) and with
        more late frames, ``i``'s own under the share."""
        if (
            i != self.floor_idx
            or (self.search and self.settled_cost is None and not self.at_floor)  # measuring
            or i == 0
            or self.policy.margin is not None
            or len(self.ranked) < self.MIN_FRAMES
            or self.late_count >= self.DITHER_SHARE * len(self.late)
            or self.policy.rate_hz * self.unit_mean * self.model.time_rel[i - 1] >= 1.0
        ):
            return None
        here, below = self._late_share(i), self._late_share(i - 1)
        if below <= here or here >= self.DITHER_SHARE:
            return None
        if self._predicted_w(i - 1) >= self._predicted_w(i):
            return None
        return here, below

    def _dither(self, i: int) -> Optional[float]:
        """The clock below the deadline's floor for this period, or None (hold ``i``).

        The floor keeps all but ``LATE_SHARE`` of the frames on time, the clock below misses
        more: time-shared so that the mix's expected late share is ``DITHER_SHARE`` (error
        diffusion over periods), it uses the late share a kept rate allows, which a constant
        clock on a coarse table cannot. Only where the clock below costs less (by the model,
        with the measured idle power), its frames do not queue (mean busy share under 1),
        and the frames seen late lately (``busy_s`` over the period) are under the share."""
        self.dither_mhz = None
        shares = self._dither_shares(i)
        if shares is None:
            self.carry = 0.0
            return None
        here, below = shares
        self.carry += min(1.0, (self.DITHER_SHARE - here) / (below - here))
        if self.carry < 1.0:
            return None
        self.carry -= 1.0
        self.dither_mhz = self.model.clocks_mhz[i - 1]
        return self.dither_mhz

    def status(self) -> Dict[str, Any]:
        return {
            "rate_target_hz": self.policy.rate_hz,
            "rate_hz": self.rate_hz,
            "choice_mhz": self.choice_mhz,
        }
