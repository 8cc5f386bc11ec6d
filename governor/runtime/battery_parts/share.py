"""What the load's power says about it when the app does not tick: how memory-bound it is,
and how far its power sits from the model's.

In the power model the dynamic part is ``activity · a·f·V²``, and an SM that waits on memory
draws less than one that computes: the measured dynamic power over the model's (made under a
compute-bound calibration load) estimates the share of time the SMs compute, ``u``. With the
time per unit split into a compute part that scales with the clock and a memory part that
does not, ``t(f) = t_rel(f) + k``, that share says ``k = t_rel(f)·(1/u − 1)``. A load heavier
than the calibration one (``u`` > 1) is taken as compute-bound with a power gain instead.

A phase that gains little from a higher clock (memory-bound) then runs where its marginal
work per joule equals the mission's mean load's at the plan (a Lagrange condition), leaving
the joules for a phase that gains more; the budget's feedback keeps the sum.

The joules a lighter phase leaves must be spent by the loads that gain more, and those are
only the share of the mission that is not like the phase now. The mission's mean share
``m`` is a mix of the phase now's ``k`` and the calibration load's 0 (the prior, standing
for the loads not seen yet): ``m/k`` of the busy time at the phase now's load. The
multiplier is where that mix, each load at its own level, draws what the mean load draws
at the plan. Matched to the mean load alone instead, a memory-bound mission with no other
load ran its first phase at the lowest clock for joules nothing came to spend (Xavier NX,
``memory:1,idle:1,memory:1``, no ticks: 0.68 of the best constant clock's work).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

from governor.runtime.battery_parts.tables import concave, gaps, match, slope_at, tabled
from governor.runtime.model import ClockModel

__all__ = ["PowerRatio", "ShareEstimator", "share_gaps", "share_power"]

SHARE_GAIN = 0.3  # per busy period, of the gap to the latest memory-share estimate
SHARE_SAME = 0.02  # memory shares this close to the mission's mean are the same load
OVER_TOP_POWER = 8.0  # how fast the threshold falls once the plan exceeds the top clock


@dataclass
class PowerRatio:
    """Busy GPU energy measured and what the model predicted for it, over the mission. A
    calibrated model starts both at ``prior_j`` (seconds of its own load: ratio 1), so a
    mission that opens on a light phase does not spend as if the whole mission were light."""

    measured_j: float
    model_j: float
    prior_j: float

    @classmethod
    def with_prior(cls, prior_j: float) -> PowerRatio:
        return cls(prior_j, prior_j, prior_j)

    def add(self, measured_j: float, model_j: float) -> None:
        self.measured_j += measured_j
        self.model_j += model_j

    def ratio(self, fallback: float) -> float:
        """Measured over modelled power while busy, prior included (the load's mean over the
        mission, not the latest phase's); ``fallback`` before any energy is counted."""
        if self.model_j > 0:
            return self.measured_j / self.model_j
        return fallback

    def own_ratio(self, fallback: float) -> float:
        """The same over the mission's measured periods only, without the prior."""
        seen_j = self.model_j - self.prior_j
        return (self.measured_j - self.prior_j) / seen_j if seen_j > 0 else fallback


def share_power(model: ClockModel, k: float, gain: float) -> List[float]:
    """The model's power at every table clock for a load of memory share ``k`` and power
    ``gain`` (``P_idle + (P − P_idle) · gain · t_rel/(t_rel + k)``)."""
    idle = model.idle_w
    return [
        idle + (p - idle) * gain * rel / (rel + k) for p, rel in zip(model.power_w, model.time_rel)
    ]


def share_gaps(model: ClockModel, k: float, gain: float) -> List[float]:
    """Marginal work per marginal joule between neighbouring clocks for a load of memory
    share ``k`` (work per second ``1/(t_rel + k)``, power ``P_idle + (P − P_idle) · gain ·
    t_rel/(t_rel + k)``): one value per gap of the table, falling with the clock where the
    load's work per joule is concave."""
    idle = model.idle_w
    work, power = [], []
    for p, rel in zip(model.power_w, model.time_rel):
        t = rel + k
        work.append(1.0 / t)
        power.append(idle + (p - idle) * gain * rel / t)
    return gaps(work, power)


class ShareEstimator:
    """The load's memory share ``k`` and power gain: the phase now (smoothed over a few busy
    periods) and the mission's busy-time mean (with ``prior_s`` seconds of the calibration
    load, share 0 and gain 1, in it)."""

    def __init__(self, model: ClockModel, prior_s: float) -> None:
        self.model = model
        self.k: Optional[float] = None
        self.gain = 1.0
        self.mission_k_s = 0.0
        self.mission_gain_s = prior_s
        self.mission_busy_s = prior_s

    def learn(self, power_w: float, i: int, dt_s: float) -> None:
        """One busy period of ``dt_s`` drawing ``power_w`` at table clock ``i`` (nothing
        learnt from an uncalibrated model, or a clock with too little dynamic power)."""
        model = self.model
        if not model.fitted:
            return
        dyn = model.power_w[i] - model.idle_w
        if dyn <= 0.2 * model.power_w[i] or not math.isfinite(power_w):
            # too little dynamic power to read the share here (a low clock): the period
            # still counts in the mission's mean at the phase's share as last read, so a
            # phase held at a low clock does not leave the mean where it was
            if self.k is not None:
                self._count(self.k, self.gain, dt_s)
            return
        r = min(3.0, max(0.05, (power_w - model.idle_w) / dyn))
        u, gain = (r, 1.0) if r <= 1.0 else (1.0, r)
        k = model.time_rel[i] * (1.0 / u - 1.0)
        if self.k is None:
            self.k, self.gain = k, gain
        else:
            self.k += SHARE_GAIN * (k - self.k)
            self.gain += SHARE_GAIN * (gain - self.gain)
        self._count(k, gain, dt_s)

    def _count(self, k: float, gain: float, dt_s: float) -> None:
        self.mission_k_s += k * dt_s
        self.mission_gain_s += gain * dt_s
        self.mission_busy_s += dt_s

    def phase_level(self, level: float, over_top: float) -> Optional[float]:
        """The level for the phase now, given the plan's ``level`` for the mission's mean
        load: where the phase's marginal work per joule equals the mean load's at ``level``;
        for a phase lighter than the mean, where it meets the multiplier at which the mean's
        two loads draw what the mean load draws at ``level`` (:func:`_split`). ``level`` itself with one load all along (or nothing learnt, or under three clocks).
        ``over_top`` is the plan's power over the mean load's at the top clock: above 1 the
        mean load cannot spend it, and the threshold falls so the phase now can. None where
        there is no marginal rate to match (either curve not concave, as on a model capped
        at its power limit, whose top clocks draw the same)."""
        model = self.model
        if self.k is None or self.mission_busy_s <= 0 or len(model.clocks_mhz) < 3:
            return level
        mean_k = self.mission_k_s / self.mission_busy_s
        mean_gain = self.mission_gain_s / self.mission_busy_s
        if abs(self.k - mean_k) <= SHARE_SAME * (1.0 + mean_k):
            return level
        mean = share_gaps(model, mean_k, mean_gain)
        phase = share_gaps(model, self.k, self.gain)
        if not (concave(mean) and concave(phase)):
            return None
        top = float(len(model.clocks_mhz) - 1)
        if self.k > mean_k > 0.0:
            loads = (self.k, self.gain, mean_k, mean_gain)
            return _split(model, loads, phase, level, top, max(over_top, 1.0))
        lam = slope_at(mean, level)
        if over_top > 1.0:
            lam /= over_top**OVER_TOP_POWER
        return match(phase, lam, top)


def _split(
    model: ClockModel,
    loads: Tuple[float, float, float, float],
    phase: List[float],
    level: float,
    top: float,
    over_top: float,
) -> Optional[float]:
    """The phase now's level when it is lighter than the mission's mean: ``loads`` is the
    phase now's share and gain ``(k, gain)`` then the mean's, ``k`` > ``mean_k``. The mean
    is ``x = mean_k/k`` of the phase now and ``1 − x`` of a compute-bound load (share 0,
    the gain that makes up the mean's); the multiplier is where the two, each at the level
    its gaps meet it, draw what the mean load draws at the plan's ``level`` (times
    ``over_top`` when the plan is beyond the top clock), found by bisection. None where the
    other load's work per joule is not concave."""
    k, gain, mean_k, mean_gain = loads
    x = mean_k / k
    other_gain = (mean_gain - x * gain) / (1.0 - x) if x < 1.0 else gain
    if x >= 1.0 or other_gain <= 0.0:
        return level
    other = share_gaps(model, 0.0, other_gain)
    if not concave(other):
        return None
    want_w = tabled(share_power(model, mean_k, mean_gain), level) * over_top
    phase_w = share_power(model, k, gain)
    other_w = share_power(model, 0.0, other_gain)

    def drawn(lam: float) -> float:
        return x * tabled(phase_w, match(phase, lam, top)) + (1.0 - x) * tabled(
            other_w, match(other, lam, top)
        )

    lo = min(phase[-1], other[-1])  # both at the top clock at or below it
    hi = max(phase[0], other[0])  # both at the lowest at or above it
    if drawn(lo) <= want_w:
        return top
    if drawn(hi) >= want_w:
        return 0.0
    for _ in range(40):  # the drawn power falls as the multiplier rises
        mid = 0.5 * (lo + hi)
        if drawn(mid) > want_w:
            lo = mid
        else:
            hi = mid
    return match(phase, 0.5 * (lo + hi), top)
