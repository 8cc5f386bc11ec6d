"""The mission's past phases (with the app's ticks): each one's work and power curves at
every table clock, kept once it ends, and the typical phase length they give.

A past phase's curves do not change, so its gaps are computed once when it closes, not per
control period. Before the first phase is measured a prior stands for the loads not seen
yet: some seconds of a compute-bound load, its work scaled to the first phase's at the plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from governor.runtime.battery_parts.curves import ClockCurves

__all__ = ["PastPhase", "PhaseHistory"]

MAX_PHASES = 8  # past phases kept apart (with the prior); more merge


@dataclass
class PastPhase:
    """One past phase (or the prior) as the mix weighs it."""

    busy_s: float
    work: List[float]  # work units/s at every table clock
    power_w: Optional[List[float]]  # W at every table clock; None: the prior (model's power)
    neg_gaps: Optional[List[float]]  # its gaps below the cap, negated; None: not concave
    band: Optional[Tuple[int, int]]  # the table indices its fit is trusted within; None: all


class PhaseHistory:
    """The past phases, oldest first (the prior, once set, first of all); the busy seconds
    of the phases that ended and how many; the age (busy seconds) of the phase now."""

    def __init__(self, curves: ClockCurves) -> None:
        self.curves = curves
        self.past: List[PastPhase] = []
        self.has_prior = False
        self.closed_busy_s = 0.0
        self.closed_n = 0
        self.age_s = 0.0

    def add_prior(self, busy_s: float, s_per_unit_rel: float) -> None:
        """The prior: ``busy_s`` seconds of a compute-bound load taking ``s_per_unit_rel ·
        t_rel`` seconds a unit. Its gaps are against the model's power; the forecast divides
        them by the phase now's slope ``b`` (drawing as the load measured now), which keeps
        them concave or not."""
        model = self.curves.model
        work = [1.0 / (s_per_unit_rel * r) for r in model.time_rel]
        gaps = self.curves.past_gaps(work, model.power_w)
        self.past.insert(0, PastPhase(busy_s, work, None, gaps, None))
        self.has_prior = True

    def close(
        self, curves: Optional[Tuple[List[float], List[float]]], band: Tuple[int, int]
    ) -> None:
        """The phase now ended: keep its ``curves`` (work, power; None when too sparse to
        fit: not kept) with the ``band`` its fit is trusted within, and count it."""
        if curves is not None:
            work, power = curves
            gaps = self.curves.past_gaps(work, power)
            self.past.append(PastPhase(self.age_s, work, power, gaps, band))
            if len(self.past) > MAX_PHASES:
                self._merge_closest()
        self.closed_busy_s += self.age_s
        self.closed_n += 1
        self.age_s = 0.0

    def typical_s(self) -> float:
        """The mean busy length of the phases that ended (call with one ended at least)."""
        return self.closed_busy_s / self.closed_n

    def _merge_closest(self) -> None:
        """Merge the two measured past phases whose work curves (each over its top clock's
        work) are closest, weighted by their busy seconds."""
        rows = [r for r in self.past if r.power_w is not None]
        best = _closest_pair(rows)
        if best is None:
            return
        ra, rb = rows[best[0]], rows[best[1]]
        assert ra.power_w is not None and rb.power_w is not None
        assert ra.band is not None and rb.band is not None
        n = ra.busy_s + rb.busy_s
        ra.work = [(ra.busy_s * x + rb.busy_s * y) / n for x, y in zip(ra.work, rb.work)]
        ra.power_w = [(ra.busy_s * x + rb.busy_s * y) / n for x, y in zip(ra.power_w, rb.power_w)]
        ra.busy_s = n
        ra.neg_gaps = self.curves.past_gaps(ra.work, ra.power_w)
        ra.band = (min(ra.band[0], rb.band[0]), max(ra.band[1], rb.band[1]))
        self.past.remove(rb)


def _closest_pair(rows: Sequence[PastPhase]) -> Optional[Tuple[int, int]]:
    """Indices ``(a, b)``, ``a < b``, of the two rows whose work curves, each over its top
    clock's work, differ least in summed absolute difference (the first such pair)."""
    best: Optional[Tuple[float, int, int]] = None
    for a in range(len(rows)):
        for b in range(a + 1, len(rows)):
            wa, wb = rows[a].work, rows[b].work
            d = sum(abs(x / wa[-1] - y / wb[-1]) for x, y in zip(wa, wb))
            if best is None or d < best[0]:
                best = (d, a, b)
    return None if best is None else (best[1], best[2])
