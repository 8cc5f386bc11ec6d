"""How much work a higher clock buys the load running now, from the app's ticks.

The time a unit of the app's work takes splits into a part that scales with the GPU clock
and a part that does not (waiting on memory)::

    s(f) = A · t_rel(f) + B        (seconds per unit)

with ``t_rel`` the calibrated model's time at ``f`` relative to the top clock. Its power is
read as a line in the model's dynamic power, ``P(f) = a + b · (P_model(f) − P_idle)``: a
memory-bound load's power is the calibration load's scaled down plus a part the clock does
not drive (its memory traffic), so neither the slope nor the level alone says how it spends.

:class:`PhaseFit` keeps, for the load running now (a *phase*), the seconds, units and
energy seen at each clock, fits both lines by least squares over the clocks (weighted by
time), and says when recent periods stop fitting (the load changed: a new phase). Two clocks
far enough apart are needed; :meth:`PhaseFit.probe_pair` names them.

Power alone cannot tell these apart: on every simulated board the memory-bound load draws
about the compute-bound one's power at mid clocks (stalled SMs and memory traffic still
draw), so an estimate from power reads it as compute-bound. Work counted by the app can.
"""

from __future__ import annotations

import collections
from typing import Deque, Dict, Hashable, List, Optional, Tuple

from governor.runtime.model import ClockModel

__all__ = ["PhaseFit"]

#: one run as a fit sees it: (seconds, relative time, seconds per unit, model dynamic power W,
#: measured power W, units)
_Point = Tuple[float, float, float, float, float, float]


class PhaseFit:
    """Seconds per unit and power against the clock for the load running now.

    Periods are pooled by *run* (any key: the battery controller's
    :class:`~governor.runtime.battery_parts.probe.Run`): the two probe runs (a few seconds
    each at one clock) and the rest (the clocks the controller dithers between), each one point at its time-weighted relative time. Counting whole units per period at clocks
    that alternate every period or two would charge a unit to the clock it ended at; with
    work as regular as a simulated load's the error locks to the alternation and does not
    average out, while a pool's count is off by at most a unit per switch into or out of it.
    """

    MIN_UNITS = 20.0  # units in a run before its time per unit counts (±1 unit: 5 %)
    PROBE_UNITS = 40.0  # units a probe run aims for (±1 unit: 2.5 %), time allowing
    MIN_S = 0.5  # seconds in a run before it counts
    MIN_SPREAD = 0.08  # relative times of the runs must differ by this share of their mean
    RECENT = 40  # periods compared against the runs before them to see a new load
    RECENT_UNITS = 25.0  # units (seen or predicted) in them before the rate is judged
    RATE_CHANGE = 0.08  # observed units / predicted units off by more: a new load
    POWER_CHANGE = 0.15  # observed power / predicted off by more: a new load
    # (or both off by most of these: their fractions' squares summing past 1, see changed)

    def __init__(self, model: ClockModel) -> None:
        self.model = model
        self.reset()

    def reset(self) -> None:
        # per run: [seconds, units, energy J, Σ dt·t_rel, Σ dt·model power]
        self.runs: Dict[Hashable, List[float]] = {}
        self.busy_s = 0.0
        self.recent: Deque[Tuple[Hashable, Tuple[float, float, float, float, float]]] = (
            collections.deque()
        )
        # per run, the recent periods' sums (the layout of ``runs``), kept as periods come
        # and go so that :meth:`changed` does not sum RECENT periods every control step
        self.recent_sums: Dict[Hashable, List[float]] = {}
        self._fit: Optional[Tuple[float, float, float, float]] = None
        self._dirty = False

    def add(
        self, run: Hashable, clock_mhz: float, dt_s: float, units: float, power_w: float
    ) -> None:
        """One busy period of ``run`` at ``clock_mhz``: ``units`` done in ``dt_s`` at
        ``power_w``."""
        if not (dt_s > 0 and units >= 0 and power_w >= 0):
            return
        model = self.model
        i = model.index(clock_mhz)
        energy = power_w * dt_s
        rel_s = model.time_rel[i] * dt_s
        model_j = model.power_w[i] * dt_s
        point = (dt_s, units, energy, rel_s, model_j)
        # the five sums, written out (a control step adds one period: no helper calls)
        row = self.runs.get(run)
        if row is None:
            row = self.runs[run] = [0.0] * 5
        row[0] += dt_s
        row[1] += units
        row[2] += energy
        row[3] += rel_s
        row[4] += model_j
        self.busy_s += dt_s
        recent = self.recent
        sums = self.recent_sums
        if len(recent) >= self.RECENT:
            old_run, old = recent.popleft()
            row = sums[old_run]
            row[0] -= old[0]
            row[1] -= old[1]
            row[2] -= old[2]
            row[3] -= old[3]
            row[4] -= old[4]
        recent.append((run, point))
        row = sums.get(run)
        if row is None:
            row = sums[run] = [0.0] * 5
        row[0] += dt_s
        row[1] += units
        row[2] += energy
        row[3] += rel_s
        row[4] += model_j
        self._dirty = True

    def units_in(self, run: Hashable) -> Tuple[float, float]:
        """(seconds, units) pooled in ``run`` so far."""
        row = self.runs.get(run)
        return (row[0], row[1]) if row else (0.0, 0.0)

    def fit(self) -> Optional[Tuple[float, float, float, float]]:
        """``(A, B, a, b)``, or None until two runs far enough apart have enough units.

        Refitted only after :meth:`add`; the sums per run are kept as periods come, so a fit
        is two weighted least-squares lines through two or three points (one per run),
        written out in plain arithmetic over the runs, with no lists per fit (checked against a
        batch least-squares fit in tests/runtime/test_workrate_fit.py)."""
        if not self._dirty:
            return self._fit
        self._dirty = False
        self._fit = None
        points = self._points()
        if points is None:
            return None
        pts, sw, swx, swy, spx, spy = points
        mean_x, mean_y = swx / sw, swy / sw
        px, py = spx / sw, spy / sw
        A, B = _time_line(pts, sw, mean_x, mean_y)
        a, b = _power_line(pts, px, py)
        self._fit = (A, B, a, b)
        return self._fit

    def _points(
        self,
    ) -> Optional[Tuple[List[_Point], float, float, float, float, float]]:
        """The runs that count, as points, with their weighted sums ``(pts, Σw, Σw·x, Σw·y,
        Σw·m, Σw·p)``; None when fewer than two count or their relative times are too close.

        Per run: w (seconds), x (relative time), y (seconds per unit), m (the model's dynamic
        power), p (the power measured), and its units; each sum over the runs in one pass (the
        same sums, in the same order, as one pass per sum)."""
        min_units, min_s = self.MIN_UNITS, self.MIN_S
        idle = self.model.idle_w
        pts: List[_Point] = []
        sw = sx = swx = swy = spx = spy = 0.0
        x_lo = x_hi = 0.0
        for r in self.runs.values():
            w, units = r[0], r[1]
            if units < min_units or w < min_s:
                continue
            x = r[3] / w
            y = w / units
            m = r[4] / w - idle
            p = r[2] / w
            if not pts:
                x_lo = x_hi = x
            elif x < x_lo:
                x_lo = x
            elif x > x_hi:
                x_hi = x
            pts.append((w, x, y, m, p, units))
            sx += x
            sw += w
            swx += w * x
            swy += w * y
            spx += w * m
            spy += w * p
        n = len(pts)
        if n < 2:
            return None
        if x_hi - x_lo < self.MIN_SPREAD * sx / n:
            return None
        return pts, sw, swx, swy, spx, spy

    def curves(self) -> Optional[Tuple[List[float], List[float]]]:
        """Work rate (units/s) and power (W) at every table clock, from the fit."""
        fit = self.fit()
        if fit is None:
            return None
        A, B, a, b = fit
        idle = self.model.idle_w
        work = [1.0 / (A * r + B) for r in self.model.time_rel]
        power = [a + b * (p - idle) for p in self.model.power_w]
        return work, power

    def changed(self) -> bool:
        """Whether the recent periods no longer match what their runs measured before them
        (the load changed); a run's clocks may drift, which the fitted slopes allow for."""
        if len(self.recent) < self.RECENT:
            return False
        fit = self.fit()
        A = fit[0] if fit else 0.0
        b = fit[3] if fit else 1.0
        seen = predicted = energy = energy_pred = 0.0
        runs = self.runs
        min_s, min_units = self.MIN_S, self.RECENT_UNITS
        for run, (dt, units, e, xdt, mdt) in self.recent_sums.items():
            if dt < 1e-6:  # no recent period of this run (what is left is rounding)
                continue
            row = runs[run]  # what the run measured before the recent periods
            base_s, base_units = row[0] - dt, row[1] - units
            if base_s < min_s or base_units < min_units:
                continue
            s_unit = base_s / base_units + A * (xdt / dt - (row[3] - xdt) / base_s)
            if s_unit <= 0:
                continue
            seen += units
            predicted += dt / s_unit
            energy += e
            energy_pred += dt * ((row[2] - e) / base_s + b * (mdt / dt - (row[4] - mdt) / base_s))
        power_off = abs(energy / energy_pred - 1.0) / self.POWER_CHANGE if energy_pred > 0 else 0.0
        if power_off > 1.0:
            return True
        if max(seen, predicted) < self.RECENT_UNITS or predicted <= 0:
            return False  # too few units to tell a change from counting whole units
        # each off by most of its threshold is a change too: on a board at its power cap a
        # memory-bound load at a high clock does a few per cent fewer units at some 10 %
        # less power than the compute-bound one, neither alone past its threshold (the T4
        # step trace's compute phase ran on 20-26 s into the memory one)
        rate_off = abs(seen / predicted - 1.0) / self.RATE_CHANGE
        return rate_off * rate_off + power_off * power_off > 1.0

    def probe_pair(self, centre: int, top: Optional[int] = None) -> Tuple[int, int]:
        """Two table indices around ``centre`` whose relative times differ by about 20 %
        (or the table's ends, ``top`` the highest usable): far enough apart that tick
        counting tells their rates apart."""
        rel = self.model.time_rel
        top = len(rel) - 1 if top is None else top
        centre = min(centre, top)
        lo, hi = max(centre - 1, 0), min(centre + 1, top)
        while lo > 0 and rel[lo] < 1.1 * rel[centre]:
            lo -= 1
        while hi < top and rel[hi] > rel[centre] / 1.1:
            hi += 1
        if lo == centre:  # at the bottom: both spread upwards
            while hi < top and rel[hi] > rel[lo] / 1.2:
                hi += 1
        if hi == centre:
            while lo > 0 and rel[lo] < 1.2 * rel[hi]:
                lo -= 1
        return lo, hi


def _time_line(pts: List[_Point], sw: float, mean_x: float, mean_y: float) -> Tuple[float, float]:
    """``(A, B)`` of seconds per unit ``A · t_rel + B``, weighted by seconds, kept physical
    (``A > 0``, ``B >= 0``) and with a memory share ``B`` inside the counting error taken as 0."""
    sxx = sxy = 0.0
    for w, x, y, _, _, _ in pts:
        d = x - mean_x
        sxx += w * d * d
        sxy += w * d * (y - mean_y)
    if sxx > 0:  # (the runs are spread)
        A = sxy / sxx
        B = mean_y - A * mean_x
    else:
        A, B = 0.0, mean_y
    if A <= 0:  # no gain from the clock at all: nearly all memory time
        A = 1e-3 * mean_y / mean_x
        B = mean_y - A * mean_x
    elif B < 0:  # past a physical bound: all of it scales with the clock
        A, B = mean_y / mean_x, 0.0
    # whole units counted: each run's time per unit can be off by one unit in its
    # count, and two runs 20 % apart extrapolate that into B many times over (about
    # ±18 % of the time per unit after 40 units). A share of memory time within that
    # error is not measured: the load is taken as compute-bound (the line kept through
    # the runs' mean), so noise does not read a compute-bound load as memory-bound
    if B > 0:
        # each run's y off by y/units; its weight in B is w·(1/Σw − x̄·(x − x̄)/Sxx)
        var = 0.0
        for w, x, y, _, _, units in pts:
            e = w * (1.0 / sw - mean_x * (x - mean_x) / sxx) * y / units
            var += e * e
        if B * B <= var:
            A, B = mean_y / mean_x, 0.0
    return A, B


def _power_line(pts: List[_Point], px: float, py: float) -> Tuple[float, float]:
    """``(a, b)`` of power ``a + b · (model dynamic power)``, weighted by seconds, with a
    slope kept above 0."""
    pxx = pxy = 0.0
    for w, _, _, m, p, _ in pts:
        d = m - px
        pxx += w * d * d
        pxy += w * d * (p - py)
    if pxx > 0:
        b = pxy / pxx
        a = py - b * px
    else:  # every run at one model power: a flat line
        b, a = 0.0, py
    if not b > 0:  # power that does not rise with the clock: take it as barely rising
        b = 1e-3
        a = py - b * px
    return a, b
