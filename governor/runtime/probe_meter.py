"""One clock's cost as a probe measures it: settle, then meter busy time, energy and work.

Shared by the PPW searches over the core clock (:mod:`governor.runtime.ppw_local`) and over
the memory clock (:mod:`governor.runtime.ppw_mem_search`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ProbeMeter"]


@dataclass
class ProbeMeter:
    """The cost of holding one clock: settle for ``settle_s`` of busy time (power readings
    average over about a second), then meter ``measure_s`` of busy time. Idle periods and
    periods at another clock are not counted. With ``min_units`` (an app that counts whole
    units: the count errs by one unit), the probe goes on past ``measure_s`` until it has
    counted that many, up to ``max_s`` of busy time."""

    settle_s: float
    measure_s: float
    min_units: float = 0.0
    max_s: float = 0.0
    held_s: float = 0.0
    energy_j: float = 0.0
    busy_s: float = 0.0
    units: float = 0.0

    def reset(self) -> None:
        self.held_s = self.energy_j = self.busy_s = self.units = 0.0

    def add(self, power_w: float, dt_s: float, units: float) -> None:
        """One busy period at the probed clock."""
        self.held_s += dt_s
        if self.held_s <= self.settle_s + 1e-9:
            return
        self.energy_j += power_w * dt_s
        self.busy_s += dt_s
        self.units += units

    @property
    def done(self) -> bool:
        if self.busy_s < self.measure_s - 1e-9:
            return False
        if 0 < self.units < self.min_units and self.busy_s < self.max_s - 1e-9:
            return False
        return True

    def cost(self, clock_mhz: float) -> float:
        """Energy per unit of work (J) where the app reported work, else energy per cycle
        (J/MHz·s: a compute-bound load's energy per unit of work, up to a constant)."""
        if self.units > 0:
            return self.energy_j / self.units
        return self.energy_j / (self.busy_s * clock_mhz)
