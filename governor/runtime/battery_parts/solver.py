"""The Lagrange multiplier of the forecast mix: the marginal work per joule at which the
mix's loads, each at the level where its own gaps fall to it, draw the plan's GPU power on
average (weighted by their seconds).

The mean power is piecewise linear in the multiplier ``λ`` (levels interpolate between the
gaps, power between clocks) and falls as ``λ`` rises. The search starts from the last
period's multiplier (it moves little): kept where it still draws the plan, else Newton steps
on the linear piece, else a bracket within 1 % of it; failing those, a bracket from the
table's extreme gaps. False position (Illinois) then lands on the root once both ends share
a piece, in a few evaluations; bisection in log ``λ`` to 0.01 % bounds the rest.
"""

from __future__ import annotations

import bisect
import math
from typing import Callable, Optional, Sequence, Tuple, Union

from governor.runtime.battery_parts.forecast import MixLoad

__all__ = ["mix_lambda"]

NEWTON_STEPS = 4  # from the last multiplier, before the bracketed search
ILLINOIS_STEPS = 60  # at most, false position or bisection (0.01 % width ends it first)

#: the mix's mean power at λ over the plan's, and its slope in λ there
Excess = Callable[[float], Tuple[float, float]]
#: (lo, hi, excess at lo, excess at hi) with the root between
Bracket = Tuple[float, float, float, float]


def mix_lambda(
    mix: Sequence[MixLoad],
    gpu_w: float,
    line: Tuple[float, float],
    dyn: Sequence[float],
    last: Optional[float],
) -> float:
    """The multiplier at which ``mix`` draws ``gpu_w``. The phase now's power (a load with
    no power table) is its fitted line ``line`` = ``(a, b)``: ``a + b·dyn`` at the clocks
    below the cap, ``dyn`` their model dynamic power. ``last``: the last multiplier."""
    excess = _excess(mix, gpu_w, line, dyn)
    tol = 1e-9 * max(gpu_w, 1e-9)
    found = _from_last(excess, last, tol) if last is not None else None
    if found is None:
        found = _from_slopes(excess, mix)
    if not isinstance(found, tuple):  # a root, or an end beyond which the root lies
        return found
    return _illinois(excess, found, tol)


def _excess(
    mix: Sequence[MixLoad], gpu_w: float, line: Tuple[float, float], dyn: Sequence[float]
) -> Excess:
    """The mix's mean power at ``λ`` over ``gpu_w`` and its slope there, as a function."""
    a, b = line
    n_dyn = len(dyn)
    rows = []
    total = 0.0  # (the seconds' sum, in the mix's order)
    for load in mix:
        power = load.power_w
        total += load.secs
        n = len(power) if power is not None else n_dyn
        band = load.band
        lo_x, hi_x = (float(band[0]), float(band[1])) if band else (0.0, float(n))
        rows.append((load.secs, load.neg, power, n - 2, lo_x, hi_x, len(load.neg)))
    bisect_left = bisect.bisect_left

    def excess(lam: float) -> Tuple[float, float]:
        out = slope = 0.0
        for secs, neg, power, last, lo_x, hi_x, n in rows:
            # the load's level at lam (tables.level_neg, written out), and its rate in lam
            k = bisect_left(neg, -lam)  # the gaps above lam: the first k
            dx = 0.0
            if k == 0:
                x = 0.0
            elif k >= n:
                x = float(n)
            else:
                g0, g1 = -neg[k - 1], -neg[k]
                if g0 > g1:
                    x = k - 0.5 + (g0 - lam) / (g0 - g1)
                    dx = -1.0 / (g0 - g1)
                else:
                    x = k - 0.5
            # a past phase's fit is local too: its forecast level stays in its band
            if lo_x > x:
                x, dx = lo_x, 0.0
            if hi_x < x:
                x, dx = hi_x, 0.0
            i = int(x)
            if i > last:
                i = last
            if power is None:  # the phase now's line
                p0 = a + b * dyn[i]
                step = a + b * dyn[i + 1] - p0
            else:
                p0 = power[i]
                step = power[i + 1] - p0
            out += secs * (p0 + (x - i) * step)
            slope += secs * step * dx
        return out / total - gpu_w, slope / total

    return excess


def _from_last(excess: Excess, last: float, tol: float) -> Union[float, Bracket, None]:
    """From the last multiplier: the root (a float) where it, or a Newton step from it
    (the root on the same linear piece, a step or two more across a breakpoint), draws the
    plan; else a bracket within 1 % of it; None when neither holds (where the mean power is
    flat in λ, no load's level moving with it there)."""
    x, slope = last, -1.0
    for _ in range(NEWTON_STEPS):
        fx, slope = excess(x)
        if abs(fx) <= tol:
            return x
        if not slope < 0.0:
            break
        x -= fx / slope
        if not x > 0.0:
            break
    if slope < 0.0:
        lo, hi = last / 1.01, last * 1.01
        f_lo, f_hi = excess(lo)[0], excess(hi)[0]
        if f_lo > 0.0 >= f_hi:
            return (lo, hi, f_lo, f_hi)
    return None


def _from_slopes(excess: Excess, mix: Sequence[MixLoad]) -> Union[float, Bracket]:
    """A bracket from the loads' extreme gaps (half the least, twice the greatest); an end
    itself (a float) when the root lies beyond it."""
    slopes = [-g for load in mix for g in (load.neg[0], load.neg[-1])]
    lo, hi = max(min(slopes), 1e-12) * 0.5, max(slopes) * 2.0
    f_lo, f_hi = excess(lo)[0], excess(hi)[0]
    if f_hi >= 0.0:
        return hi
    if f_lo <= 0.0:
        return lo
    return (lo, hi, f_lo, f_hi)


def _illinois(excess: Excess, bracket: Bracket, tol: float) -> float:
    """The root within ``bracket`` by false position (Illinois: an end kept twice has its
    value halved), bisecting in log λ when the step leaves the bracket, until the bracket
    is 0.01 % wide (its geometric mean then)."""
    lo, hi, f_lo, f_hi = bracket
    side = 0
    for _ in range(ILLINOIS_STEPS):
        if hi <= lo * 1.0001:
            break
        x = hi - f_hi * (hi - lo) / (f_hi - f_lo)
        if not lo < x < hi:
            x = math.sqrt(lo * hi)
        fx = excess(x)[0]
        if abs(fx) <= tol:
            return x
        if fx > 0.0:
            lo, f_lo = x, fx
            if side == -1:
                f_hi *= 0.5
            side = -1
        else:
            hi, f_hi = x, fx
            if side == 1:
                f_lo *= 0.5
            side = 1
    return math.sqrt(lo * hi)
