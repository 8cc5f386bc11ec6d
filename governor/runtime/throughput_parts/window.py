"""The search's measurement windows on an energy counter.

:class:`MeasureWindow` sums one clock's periods once it has settled there (energy, time,
busy time, and what the fit of power on busy share needs); :class:`YoungWindow` does the
same for the clock the young frames (before the search starts) ran at, so the search can
take it as its first window there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

__all__ = ["MeasureWindow", "YoungWindow"]


@dataclass
class YoungWindow:
    """The young frames' clock and, past the settling time there, its energy, time and busy
    time; ``held_s`` counts from the first period at the clock."""

    clock_mhz: float
    energy_j: float = 0.0
    seconds: float = 0.0
    busy_s: float = 0.0
    held_s: float = 0.0

    def add(self, power_w: float, dt_s: float, busy_s: float, settle_s: float) -> None:
        """One period of ``dt_s`` at the clock, its mean power ``power_w``, its frames busy
        ``busy_s``; counted once the clock has been held more than ``settle_s``."""
        self.held_s += dt_s
        if self.held_s > settle_s:
            self.energy_j = self.energy_j + power_w * dt_s
            self.seconds = self.seconds + dt_s
            self.busy_s = self.busy_s + busy_s


@dataclass
class MeasureWindow:
    """One window at the search's target: the time held there, and past the settling time
    the energy, time, busy time and relative time per unit summed over its periods, with the
    sums a least-squares fit of each period's power on its busy share ``b`` needs
    (``Σ b·busy_s`` and ``Σ P·busy_s``: ``b·dt`` weighted)."""

    held_s: float = 0.0
    energy_j: float = 0.0
    measured_s: float = 0.0
    busy_s: float = 0.0
    b2_s: float = 0.0
    bp_j: float = 0.0
    rel_s: float = 0.0
    periods: int = 0

    def reset(self) -> None:
        """Start again: nothing held or measured."""
        self.held_s = self.energy_j = self.measured_s = self.busy_s = 0.0
        self.b2_s = self.bp_j = self.rel_s = 0.0
        self.periods = 0

    def add(
        self, power_w: float, dt_s: float, busy_s: float, time_rel: float, settle_s: float
    ) -> None:
        """One period of ``dt_s`` at a clock of relative time ``time_rel``, its mean power
        ``power_w``, its frames busy ``busy_s``; measured once held more than ``settle_s``."""
        self.held_s += dt_s
        if self.held_s > settle_s:
            self.energy_j += power_w * dt_s
            self.measured_s += dt_s
            self.busy_s += busy_s
            self.rel_s += time_rel * dt_s
            if dt_s > 0:
                b = busy_s / dt_s
                self.b2_s += b * busy_s
                self.bp_j += power_w * busy_s
                self.periods += 1

    def resume(self, young: YoungWindow, time_rel: float) -> None:
        """Go on from the young frames' window (at a clock of relative time ``time_rel``):
        its sums kept, none of its periods (so no fit of the power on the busy share)."""
        self.held_s = young.held_s
        self.energy_j, self.measured_s, self.busy_s = young.energy_j, young.seconds, young.busy_s
        self.b2_s = self.bp_j = math.nan  # no periods kept: no slope
        self.rel_s = time_rel * young.seconds

    def slope_w(self, fit_periods: int) -> Optional[float]:
        """The window's mean power per unit of busy share, fitted over its periods (least
        squares of each period's power on its busy share): ``P_busy − P_idle`` at the
        window's clock and temperature. None for a window of fewer than ``fit_periods``
        periods, where the periods' shares do not spread enough to fit, or where the fit is
        not a rise."""
        t = self.measured_s
        if self.periods < fit_periods or t <= 0 or not math.isfinite(self.b2_s):
            return None
        b = self.busy_s / t
        var = self.b2_s / t - b * b
        if var < 1e-6 * max(b * b, 1e-12):  # shares that do not spread: no slope
            return None
        slope = (self.bp_j / t - b * self.energy_j / t) / var
        return slope if slope > 0.0 else None
