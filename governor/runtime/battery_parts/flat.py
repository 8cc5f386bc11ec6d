"""Spending ahead on a flat: where the load's work is linear in its power, run at the top.

Below a board's voltage floor the power and the work of a compute-bound load both rise in
proportion to the clock: the marginal work per joule is the same at every clock of that
stretch (the *flat*). On a flat the Lagrange condition is indifferent: any level on it does
the same work per joule, so the plan's level is one choice among many. The choices are not
equal once the future is uncertain. Joules spent now on the flat cost nothing if the load
runs on (the rest of it then runs lower on the same flat, for the same work), while joules
kept for later are lost when what comes cannot use them: a wait, which draws the least idle
power whatever is left, or a memory-bound load that gains nothing from a higher clock (a
compute phase run at the plan's clock low on its flat leaves joules that a later memory
phase cannot spend even at the top clock; docs/benchmarks/battery-controller.md).

So the level is raised to the top of the flat it lies on, as far as the rest of the forecast
busy time can still run on the flat: the plan for the rest may fall to the flat's bottom
(kept one clock above the table's lowest, so the budget's feedback has a clock below to
correct on), and no further. Only while another phase can still come: a load that has run
at least as long as the busy time left is forecast to run to the end (the forecast's rule,
:mod:`.forecast`), and spending ahead then only leaves the end of the mission at the flat's
bottom with no margin for the budget's feedback.
"""

from __future__ import annotations

import math
from typing import Sequence

from governor.runtime.battery_parts.tables import fractional_index

__all__ = ["FLAT_ELASTICITY", "flat_top"]

# a gap is on the flat with the one below it when it falls by at most this power of the
# clock step (ln g0/g1 <= FLAT_ELASTICITY * ln f1/f0). Below a voltage floor the power and
# the work are both linear in the clock: 0 in the model, under 0.45 on the catalog's boards
# with rounding; above it the power step grows with V^2 and the gap falls as f^-2 or faster
# (2.0-2.6). Halfway in between on a log scale.
FLAT_ELASTICITY = 1.0


def _same(gaps: Sequence[float], clocks_mhz: Sequence[float], j: int) -> bool:
    """Whether gap ``j`` is on one flat with gap ``j - 1``."""
    lo, hi = gaps[j - 1], gaps[j]
    if not (0.0 < lo < math.inf and 0.0 < hi < math.inf):
        return False
    step = math.log(clocks_mhz[j + 1] / clocks_mhz[j])
    return step > 0.0 and math.log(lo / hi) <= FLAT_ELASTICITY * step


def flat_top(
    gaps: Sequence[float],
    clocks_mhz: Sequence[float],
    power_w: Sequence[float],
    level: float,
    gpu_w: float,
    busy_left_s: float,
    dt_s: float,
    age_s: float,
) -> float:
    """The level to run at for the plan's ``level`` (GPU power ``gpu_w``): the top of the
    flat of ``gaps`` (the load's marginal work per joule between neighbouring clocks of
    ``clocks_mhz``, whose power is ``power_w``) that ``level`` lies on, limited to what
    leaves the plan for the rest of ``busy_left_s`` at the flat's bottom or above after this
    period of ``dt_s``. ``level`` itself off a flat, at the flat's top, or once the load,
    ``age_s`` busy seconds old, is forecast to run to the end (it has run at least as long
    as the busy time left: it is expected to run about as long again as it has), when no
    other phase is left to hedge for."""
    n = len(gaps)
    if n < 2 or dt_s <= 0.0 or busy_left_s <= max(age_s, dt_s) or not math.isfinite(gpu_w):
        return level
    at = min(max(int(math.ceil(level)) - 1, 0), n - 1)  # the gap just below the level
    top = at + 1  # the flat's top clock
    while top < n and _same(gaps, clocks_mhz, top):
        top += 1
    if top <= at + 1 or top <= level:  # one gap alone: the dithering is already linear
        return level
    bottom = at  # the flat's bottom clock
    while bottom > 0 and _same(gaps, clocks_mhz, bottom):
        bottom -= 1
    floor_w = power_w[max(bottom, 1)]
    if gpu_w <= floor_w:
        return level
    # spending p this period leaves the plan for the rest at
    # gpu_w - (p - gpu_w)*dt/(busy_left - dt): at floor_w when p is this
    most_w = gpu_w + (gpu_w - floor_w) * (busy_left_s - dt_s) / dt_s
    return max(level, min(float(top), fractional_index(power_w, most_w)))
