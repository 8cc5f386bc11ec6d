"""Online PPW's second axis: the memory clock at the core clock found (issue 48 item 5).

Without a calibrated model the PPW policy searches the core clock by measurement
(:class:`.ppw_local.OnlinePpwController`); on a board whose memory clock the governor may
set (:mod:`.mem_knob`), it then searches the memory axis at that core clock: a
golden-section search over the memory table's indices (every memory clock where there are
at most four), each probe metered as a core probe is (:class:`.probe_meter.ProbeMeter`), its
cost the energy per unit of work on the board's input where the device meters it (the power
that sees the memory; a GPU-rail figure would make a lower memory clock look free), else on
its power figure. Energy per unit is unimodal in the memory clock
(:mod:`governor.models.memory`: bandwidth-bound time falls as 1/m, background power rises
with m). Only with the app's work (``gov.tick``): energy per cycle, the core search's cost
without it, does not see a memory-bound load slow down at a lower memory clock.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

from governor.runtime.controller_base import Observation
from governor.runtime.probe_meter import ProbeMeter

__all__ = ["MEM_MEASURE_S", "MemAxisSearch"]

#: busy seconds each memory probe meters: a memory clock moves a load's energy per unit by a
#: few percent, so its probes measure longer than the core's (an app's count of whole units
#: errs by one unit in about 75 over 5 s at 15 units a second)
MEM_MEASURE_S = 5.0


class MemAxisSearch:
    """The memory clock with the least energy per unit of work at the held core clock."""

    def __init__(
        self, table_mhz: Sequence[float], settle_s: float, measure_s: float = MEM_MEASURE_S
    ) -> None:
        self.table_mhz = tuple(table_mhz)
        self.costs: Dict[int, float] = {}
        self.lo, self.hi = 0, len(self.table_mhz) - 1
        self.meter = ProbeMeter(settle_s, measure_s)
        self.best: Optional[int] = None
        self.probe = self._next()

    def _next(self) -> Optional[int]:
        costs = self.costs
        while self.hi - self.lo > 3:
            span = self.hi - self.lo
            m1 = self.lo + int(round(0.382 * span))
            m2 = max(m1 + 1, self.lo + int(round(0.618 * span)))
            for m in (m2, m1):  # the higher first: the default is the top
                if m not in costs:
                    return m
            if costs[m1] < costs[m2]:
                self.hi = m2
            else:
                self.lo = m1
        for m in range(self.hi, self.lo - 1, -1):
            if m not in costs:
                return m
        return None

    @property
    def wanted_mhz(self) -> float:
        """The memory clock to hold now: the probe's, or the one found."""
        i = self.probe if self.probe is not None else self.best
        return self.table_mhz[i if i is not None else -1]

    @property
    def done(self) -> bool:
        return self.best is not None

    def add(self, obs: Observation, units: float) -> None:
        """One period at the probe's memory clock (``units`` of work done in it)."""
        power = obs.board_power_w if obs.board_power_w is not None else obs.power_w
        if self.probe is None or obs.busy is False or power is None:
            return
        self.meter.add(power, obs.dt_s, units)
        if not self.meter.done:
            return
        meter = self.meter
        self.costs[self.probe] = meter.energy_j / meter.units if meter.units > 0 else float("inf")
        meter.reset()
        self.probe = self._next()
        if self.probe is None:  # ties go to the higher memory clock
            self.best = min(self.costs, key=lambda i: (self.costs[i], -i))
