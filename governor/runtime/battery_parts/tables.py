"""Arithmetic over a clock table: fractional levels, marginal work per joule, concavity.

A level is a fractional index into the table (a clock time-sharing its two neighbours). A gap
is the marginal work per marginal joule between two neighbouring clocks; gap ``i`` sits at
level ``i + 0.5``. Work per joule has falling returns (is concave) when its gaps are
positive, finite and falling.
"""

from __future__ import annotations

import bisect
import math
from typing import List, Sequence

__all__ = ["concave", "fractional_index", "gaps", "level_neg", "match", "slope_at", "tabled"]


def fractional_index(rising: Sequence[float], value: float) -> float:
    """Where ``value`` falls in the rising table, interpolated between its two entries
    around it; the table's ends beyond it (the level of a power, a clock time-sharing two)."""
    top = len(rising) - 1
    i = bisect.bisect_right(rising, value) - 1
    if i < 0:
        return 0.0
    if i >= top:
        return float(top)
    lo, hi = rising[i], rising[i + 1]
    return i + ((value - lo) / (hi - lo) if hi > lo else 0.0)


def tabled(values: Sequence[float], level: float) -> float:
    """The table's value at fractional ``level``, interpolated between its two neighbours
    (the ends beyond the table)."""
    top = len(values) - 1
    if level <= 0.0:
        return values[0]
    if level >= top:
        return values[top]
    i = int(math.floor(level))
    return values[i] + (level - i) * (values[i + 1] - values[i])


def level_neg(neg: Sequence[float], lam: float) -> float:
    """The fractional level where falling gaps pass ``lam``, interpolated between the two
    gaps around it; the table's ends beyond them. ``neg`` holds the gaps negated (rising), so
    the search is a C bisect."""
    n = len(neg)
    k = bisect.bisect_left(neg, -lam)  # the gaps above lam: the first k
    if k == 0:
        return 0.0
    if k >= n:
        return float(n)
    a, b = -neg[k - 1], -neg[k]
    return k - 0.5 + (a - lam) / (a - b) if a > b else k - 0.5


def gaps(work: Sequence[float], power: Sequence[float]) -> List[float]:
    """Marginal work per marginal joule between neighbouring clocks of the table (a flat
    power step: infinite where work rises across it, else 0)."""
    return [
        (w1 - w0) / (p1 - p0) if p1 - p0 > 1e-12 else (math.inf if w1 > w0 else 0.0)
        for w0, w1, p0, p1 in zip(work, work[1:], power, power[1:])
    ]


def concave(slopes: Sequence[float]) -> bool:
    """Whether work per joule has falling returns over the whole table: every gap positive,
    finite and no more than the one before it (within a relative 1e-9)."""
    prev = math.inf
    for x in slopes:
        if not (0.0 < x < math.inf) or x > prev * (1.0 + 1e-9):
            return False
        prev = x
    return True


def slope_at(slopes: Sequence[float], x: float) -> float:
    """The gap at fractional level ``x``, interpolated between the gaps around it (gap ``i``
    sits at ``i + 0.5``); next to an infinite gap, the nearer of the two."""
    if not slopes:
        return 0.0
    pos = min(max(x - 0.5, 0.0), len(slopes) - 1.0)
    i = int(math.floor(pos))
    if i >= len(slopes) - 1:
        return slopes[-1]
    frac = pos - i
    a, b = slopes[i], slopes[i + 1]
    if math.isinf(a) or math.isinf(b):
        return a if frac < 0.5 else b
    return a + frac * (b - a)


def match(slopes: Sequence[float], lam: float, top: float) -> float:
    """The fractional level in ``[0, top]`` where the interpolated gaps fall to ``lam``
    (bisection, 30 halvings); the ends when the gaps stay on one side of it."""
    if slope_at(slopes, 0.0) <= lam:
        return 0.0
    lo, hi = 0.0, top
    if slope_at(slopes, top) >= lam:
        return top
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        if slope_at(slopes, mid) > lam:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)
