"""A phase's work per joule against the clock, below the model's power cap.

With the app's ticks a phase's fit ``(A, B, a, b)`` says its work per second is
``1/(A·t_rel + B)`` and its power ``a + b·(P_model − P_idle)``. Its gaps (marginal work per
marginal joule between neighbouring clocks) are negated so that they rise and a C bisect
finds a multiplier among them; a curve whose gaps are not concave is left out.

A model capped at the power limit (T4, L4, RTX A4000) draws the same power at its top clocks
(the firmware throttles them), so every table here ends below the first capped clock.
"""

from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Tuple

from governor.runtime.battery_parts.tables import concave, fractional_index, gaps
from governor.runtime.model import ClockModel

__all__ = ["ClockCurves", "PhaseCurves"]

TRUST = 1.2  # how far past the probed clocks (in relative time) a phase's fit is used
BENDS = 4  # recent bends of the phase's curve checked first ...
BEND_TABLE = 24  # ... on tables of more clocks below the cap than this

#: a phase's gaps negated, its power line ``(a, b)`` and ``1/b``
PhaseCurves = Tuple[List[float], Tuple[float, float], float]


def capped_top(power_w: Sequence[float]) -> int:
    """The last clock below the model's power cap (the table's top when uncapped): the one
    below the first clock that draws the top clock's power."""
    capped = [i for i in range(len(power_w)) if power_w[i] >= power_w[-1] * (1 - 1e-9)]
    return max(capped[0] - 1, 0) if capped[0] < len(power_w) - 1 else capped[0]


class ClockCurves:
    """Per clock table (fixed for a mission): the relative times and the model's dynamic
    power (``P_model − P_idle``) below the cap, the inverse power steps; the bands a probe
    pair's fit is trusted within; the gaps where a phase's curve bent lately."""

    def __init__(self, model: ClockModel) -> None:
        self.model = model
        self.capped_top = capped_top(model.power_w)
        self.end = end = self.capped_top + 1
        self.rel_end = model.time_rel[:end]
        self.dyn_end = [p - model.idle_w for p in model.power_w[:end]]
        steps = [p1 - p0 for p0, p1 in zip(model.power_w[:end], model.power_w[1:end])]
        # 1 / the model's power steps; empty when one is flat (the general rule then)
        self.inv_dp = [1.0 / d for d in steps] if steps and min(steps) > 1e-12 else []
        self.bands: Dict[Tuple[int, int], Tuple[int, int]] = {}
        self.bends: List[int] = []

    def trusted(self, lo: int, hi: int) -> Tuple[int, int]:
        """The table indices a phase probed at ``lo`` and ``hi`` is fitted well enough
        for: within TRUST (relative time) of the probed clocks, below the cap."""
        band = self.bands.get((lo, hi))
        if band is not None:
            return band
        rel = self.model.time_rel
        end = self.end
        floor_i, ceil_i = lo, min(hi, end - 1)
        while floor_i > 0 and rel[floor_i - 1] <= rel[lo] * TRUST:
            floor_i -= 1
        while ceil_i < end - 1 and rel[ceil_i + 1] * TRUST >= rel[hi]:
            ceil_i += 1
        self.bands[(lo, hi)] = (floor_i, ceil_i)
        return floor_i, ceil_i

    def past_gaps(self, work: Sequence[float], power: Sequence[float]) -> Optional[List[float]]:
        """A past phase's gaps below the cap, negated (rising, for bisect), or None where
        not concave (it stays out of the mix)."""
        end = self.end
        found = gaps(work[:end], power[:end])
        return [-g for g in found] if concave(found) else None

    def own_level(self, line: Tuple[float, float], gpu_w: float) -> float:
        """The fractional level below the cap where the phase's power line ``(a, b)``
        draws ``gpu_w``; the table's ends beyond it."""
        a, b = line
        dyn = self.dyn_end
        return fractional_index(dyn, (gpu_w - a) / b if b > 0 else dyn[-1])

    def phase_curves(self, fit: Tuple[float, float, float, float]) -> Optional[PhaseCurves]:
        """For the phase's fit ``(A, B, a, b)``: its gaps below the cap, negated, its power
        line ``(a, b)`` and ``1/b``; None when its work per joule is not concave. Each gap
        is a work step over ``b`` times the model's power step (kept per table)."""
        A, B, a, b = fit
        inv_b = 1.0 / b
        if self.inv_dp and self.end > BEND_TABLE and self._bent_again(A, B, inv_b):
            return None
        work = [1.0 / (A * r + B) for r in self.rel_end]
        if self.inv_dp:
            # (w0 − w1)·k/b is the gap (w1 − w0)·k/b negated, bit for bit
            neg = [(w0 - w1) * k * inv_b for w0, w1, k in zip(work, work[1:], self.inv_dp)]
        else:  # a flat step in the model's power: the general rule
            line = [a + b * d for d in self.dyn_end]
            neg = [-g for g in gaps(work, line)]
        bend = _first_bend(neg)
        if bend is not None:
            if self.inv_dp:
                self._note_bend(bend)
            return None
        return neg, (a, b), inv_b

    def _bent_again(self, A: float, B: float, inv_b: float) -> bool:
        """Whether the curve bends at one of the gaps where it bent lately, from three
        clocks' work each. On a table whose power steps are equal (the A100's below 1 GHz)
        the gaps of a compute-bound load are equal but for rounding and bend somewhere
        every period: a bend there again settles it without the whole table's work. (On a
        short table the whole check costs less than this one: it is not taken.)"""
        rel, inv_dp = self.rel_end, self.inv_dp
        for j in self.bends:
            w0, w1 = 1.0 / (A * rel[j] + B), 1.0 / (A * rel[j + 1] + B)
            x = -((w0 - w1) * inv_dp[j] * inv_b)
            if not (0.0 < x < math.inf):
                return True
            if j:
                wp = 1.0 / (A * rel[j - 1] + B)
                prev = -((wp - w0) * inv_dp[j - 1] * inv_b)
                if x > prev * (1.0 + 1e-9):
                    return True
        return False

    def _note_bend(self, j: int) -> None:
        """Put gap ``j`` first among the recent bends (BENDS kept)."""
        bends = self.bends
        if j in bends:
            bends.remove(j)
        bends.insert(0, j)
        del bends[BENDS:]


def _first_bend(neg: Sequence[float]) -> Optional[int]:
    """The first gap where the negated gaps stop being concave (:func:`.tables.concave` on
    ``-y``: negative, finite, not falling; written on ``y`` itself, since ``-y > -q``
    exactly when ``y < q``), or None when they are concave."""
    neg_inf = -math.inf
    least = neg_inf  # the last y times 1 + 1e-9: the next may not lie below it
    for j, y in enumerate(neg):
        if not (neg_inf < y < 0.0) or y < least:
            return j
        least = y * (1.0 + 1e-9)
    return None
