"""The price of a clock at the rate, and the cheapest clock that keeps it.

:func:`cost_w` is the throughput policy's one formula for a clock's mean power at the rate.
:func:`scan` finds the deadline's floor and the cheapest clock by a scan of the whole table;
:class:`ClockTables` answers the same in O(log n) where the model's shape allows (the lower
convex hull of the clocks' energy per unit against their time per unit).
"""

from __future__ import annotations

import bisect
import math
from typing import Dict, List, Optional, Tuple

from governor.runtime.model import ClockModel

__all__ = ["ClockTables", "cost_w", "keeps_pick", "scan"]

#: two prices closer than this are a tie: the lower clock (the scan's first) wins
TIE_W = 1e-12


def cost_w(busy: float, power_w: float, idle_w: float) -> float:
    """A clock's mean power at the rate: busy (at most all of the time) at its power, idle
    between frames. ``busy`` is ``rate · work per unit · t_rel``."""
    if busy > 1.0:
        busy = 1.0
    return busy * power_w + (1.0 - busy) * idle_w


def scan(
    model: ClockModel, need: float, rate: float, mean: float, idle_w: float
) -> Tuple[Optional[int], Optional[int]]:
    """The deadline's floor (the lowest clock index whose ``need`` fits a period) and the
    cheapest index from it up (:func:`cost_w`; the lowest of equal ones), by a scan of the
    whole table: (None, None) when no clock keeps up. For the tables whose shape the hull of
    :class:`ClockTables` cannot answer for."""
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
        cost = cost_w(rate * mean * rel, power_w[i], idle_w)
        if best is None or cost < best_cost - TIE_W:
            best_cost, best = cost, i
    return floor, best


class ClockTables:
    """Look-ups of one :class:`ClockModel` for the throughput step, built once per model.

    ``index_of``: a table clock's index. ``fast``: whether :meth:`cheapest` may answer for
    :func:`scan`: the time per unit strictly falls and the power does not fall with the
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

    def index(self, clock_mhz: float) -> int:
        """:meth:`ClockModel.index`, by a dict look-up for a table clock."""
        i = self.index_of.get(clock_mhz)
        return i if i is not None else self.model.index(clock_mhz)

    def time_rel_at(self, clock_mhz: float) -> float:
        """The relative time per unit at ``clock_mhz``, by a look-up for a table clock."""
        i = self.index_of.get(clock_mhz)
        return self.model.time_rel[i] if i is not None else self.model.time_rel_at(clock_mhz)

    def power_at(self, clock_mhz: float) -> float:
        """The model's power at ``clock_mhz``, by a look-up for a table clock."""
        i = self.index_of.get(clock_mhz)
        return self.model.power_w[i] if i is not None else self.model.power_at(clock_mhz)

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
        """What :func:`scan` answers, in O(log n) (see the class docstring): the floor by
        bisection on the same deadline test, the cheapest by the hull; the floor, the hull's
        vertex and its two neighbours on the hull are priced with :func:`cost_w` and ranked
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
        best, best_cost = floor, cost_w(busy_per_rel * time_rel[floor], power_w[floor], idle_w)
        for j in (t + 1, t, t - 1):  # rising index, as the scan goes
            if 0 <= j < len(idx) and idx[j] != floor:
                i = idx[j]
                cost = cost_w(busy_per_rel * time_rel[i], power_w[i], idle_w)
                if cost < best_cost - TIE_W:
                    best_cost, best = cost, i
        return floor, best

    def pick(
        self, need: float, rate: float, mean: float, idle_w: float
    ) -> Tuple[Optional[int], Optional[int]]:
        """:meth:`cheapest` where the model's shape allows it, else :func:`scan`."""
        if self.fast:
            return self.cheapest(need, rate, mean, idle_w)
        return scan(self.model, need, rate, mean, idle_w)


def keeps_pick(
    model: ClockModel,
    held: int,
    best: int,
    need: float,
    rate: float,
    mean: float,
    idle_w: float,
    stick: float,
) -> bool:
    """Whether clock index ``held`` (a search's seed, at or above the floor) still keeps the
    rate and is priced within ``stick`` of the cheapest, ``best``: the idle power still
    being learnt would otherwise flip the pick between far clocks on a flat curve, and every
    flip starts the search again."""
    if not need * model.time_rel[held] * rate <= 1.0:
        return False
    held_w = cost_w(rate * mean * model.time_rel[held], model.power_w[held], idle_w)
    return held_w <= cost_w(rate * mean * model.time_rel[best], model.power_w[best], idle_w) * (
        1.0 + stick
    )
