"""Online PPW's second axis: the memory clock at the core clock found (issue 48 item 5).

Without a calibrated model the PPW policy searches the core clock by measurement
(:class:`.ppw_local.OnlinePpwController`); on a board whose memory clock the governor may
set (:mod:`.mem_knob`) and the app reports its work, it searches the memory axis at the
core search's first clock (the golden-section's upper one: PPW clocks sit in the table's
upper half) and then goes on with the core search at the memory clock found, its probes
on the board's input too (so the core search is not paid for at the default memory clock,
several percent dearer on a compute-bound load; the upper clock of each golden-section
pair is probed first and a probe clearly worse than the cheapest is cut short). The
core search's first probe holds the top memory clock, so the memory search starts with that
pair's cost and searches down from it (:meth:`MemAxisSearch._descend`); without it (the
fallback below), it is a golden-section search over the memory table's indices (every memory clock where there are
at most four), each probe metered as a core probe is (:class:`.probe_meter.ProbeMeter`), its
cost the energy per unit of work on the board's input where the device meters it (the power
that sees the memory; a GPU-rail figure would make a lower memory clock look free), else on
its power figure. Energy per unit is unimodal in the memory clock
(:mod:`governor.models.memory`: bandwidth-bound time falls as 1/m, background power rises
with m). Only with the app's work (``gov.tick``): energy per cycle, the core search's cost
without it, does not see a memory-bound load slow down at a lower memory clock.

Where the memory axis is searched only after the core search (``core`` given: a core
search that ended without pairing, kept as a fallback; the governor pairs from the first
ticks), the core clock found at the default memory clock is searched again around
it at the memory clock found, one table step at a time (a compass search: to the cheaper
neighbour while one is cheaper): a lower memory clock draws less, which can move the core
clock's optimum.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

from governor.runtime.controller_base import Observation
from governor.runtime.probe_meter import ProbeMeter

__all__ = ["MEM_MEASURE_S", "MEM_MIN_UNITS", "MemAxisSearch"]

#: busy seconds each memory probe meters at least: a memory clock moves a load's energy per
#: unit by a few percent, so its probes measure longer than the core's
MEM_MEASURE_S = 3.0
#: whole units a probe of the pair search counts (the count errs by one at each end), up to
#: MEM_MAX_S of busy time
MEM_MIN_UNITS = 80.0
MEM_MAX_S = 12.0
#: busy seconds a probe measures before it may be cut short as clearly worse
CUT_S = 1.0


class MemAxisSearch:
    """The memory clock with the least energy per unit of work at the held core clock, then
    the core clock again at that memory clock (indices of ``core_mhz`` from ``core``)."""

    def __init__(
        self,
        table_mhz: Sequence[float],
        settle_s: float,
        measure_s: float = MEM_MEASURE_S,
        core_mhz: Sequence[float] = (),
        core: Optional[int] = None,
        top_cost: Optional[float] = None,
    ) -> None:
        self.table_mhz = tuple(table_mhz)
        self.costs: Dict[int, float] = {}
        # the top memory clock's cost at the held core clock, where measured already (the
        # core search's first probe): reused, and searched down from (see _descend)
        self.step = 0
        if top_cost is not None:
            top = len(self.table_mhz) - 1
            self.costs[top] = top_cost
            self.step = max(1, top - int(round(0.618 * top)))
        self.lo, self.hi = 0, len(self.table_mhz) - 1
        self.meter = ProbeMeter(settle_s, measure_s, MEM_MIN_UNITS, MEM_MAX_S)
        self.best: Optional[int] = None
        self.core_mhz = tuple(core_mhz)
        self.core = core  # the core clock held (an index of core_mhz; None: not searched)
        self.core_costs: Dict[int, float] = {}  # at the memory clock found
        self.core_probe: Optional[int] = None
        self.core_dir = 0
        self.finished = False
        self.probe = self._next()

    def _next(self) -> Optional[int]:
        if self.step:
            return self._descend()
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

    def _descend(self) -> Optional[int]:
        """The next probe of a compass search down from the top memory clock, whose cost the
        core search's first probe measured: first the golden-section's upper point of the
        table (as the search without it), a reference to cut it short from the start (a
        memory-bound load, dearest at the low end, then ends after that probe and one next
        to the top, both cut short); after each move down, a step of the golden share of
        the clocks left below (a compute-bound load, cheapest at the low end, gets there in
        few probes: the golden section probed four or five clocks of a 5- or 9-clock table
        in full, each cheaper than the last, the dearer ones first); a step that finds
        nothing cheaper is halved, and the search ends when one table step on either side
        of the cheapest clock is dearer (energy per unit being unimodal in the memory
        clock, that clock is the minimum)."""
        costs = self.costs
        c = min(costs, key=lambda i: (costs[i], -i))
        while True:
            for i in (c - self.step, c + self.step):
                if 0 <= i < len(self.table_mhz) and i not in costs:
                    return i
            if self.step == 1:
                return None
            self.step = max(1, self.step // 2)

    def _moved(self, probe: int, before: int) -> None:
        """After a probe of the descent: a move down takes the next step of the golden share
        of the clocks left below."""
        costs = self.costs
        if probe < before and costs[probe] < costs[before]:
            self.step = max(1, int(round(0.618 * probe)))

    def _next_core(self) -> Optional[int]:
        """The next core clock to try at the memory clock found: the neighbour of the
        cheapest so far, the way the last move went first; None when neither is cheaper."""
        c = self.core
        assert c is not None
        ways = (self.core_dir,) if self.core_dir else (1, -1)
        for d in ways:
            i = c + d
            if 0 <= i < len(self.core_mhz) and i not in self.core_costs:
                return i
        return None

    def _clearly_worse(self) -> bool:
        """Whether the probe under way, after ``CUT_S`` of measuring, costs more than the
        cheapest pair of its axis measured so far even with its count one unit short and
        that pair's one over: cut short (a probe at a poor pair is learning paid for)."""
        meter = self.meter
        ref = self.costs if self.probe is not None else self.core_costs
        if not ref or meter.busy_s < CUT_S - 1e-9 or meter.units < 1:
            return False
        return meter.energy_j / (meter.units + 1.0) > min(ref.values()) * (
            1.0 + 1.0 / MEM_MIN_UNITS
        )

    @property
    def wanted_mhz(self) -> float:
        """The memory clock to hold now: the probe's, or the one found."""
        i = self.probe if self.probe is not None else self.best
        return self.table_mhz[i if i is not None else -1]

    @property
    def wanted_core(self) -> Optional[int]:
        """The core clock to hold now (an index): a probe's of the second core search, or
        the one found (None: not searched)."""
        return self.core_probe if self.core_probe is not None else self.core

    @property
    def done(self) -> bool:
        return self.finished

    def add(self, obs: Observation, units: float) -> None:
        """One period at the probe's pair (``units`` of work done in it)."""
        power = obs.board_power_w if obs.board_power_w is not None else obs.power_w
        if self.finished or obs.busy is False or power is None:
            return
        if self.core_mhz and self.wanted_core is not None:
            if obs.applied_mhz != self.core_mhz[self.wanted_core]:
                return
        self.meter.add(power, obs.dt_s, units)
        if not (self.meter.done or self._clearly_worse()):
            return
        meter = self.meter
        cost = meter.energy_j / meter.units if meter.units > 0 else float("inf")
        meter.reset()
        if self.probe is not None:
            if self.step:
                before = min(self.costs, key=lambda i: (self.costs[i], -i))
                self.costs[self.probe] = cost
                self._moved(self.probe, before)
            self.costs[self.probe] = cost
            self.probe = self._next()
            if self.probe is None:  # ties go to the higher memory clock
                self.best = min(self.costs, key=lambda i: (self.costs[i], -i))
                if self.core is None or not self.core_mhz:
                    self.finished = True
                    return
                self.core_costs[self.core] = self.costs[self.best]
                self.core_probe = self._next_core()
                self.finished = self.core_probe is None
            return
        assert self.core_probe is not None and self.core is not None
        probe = self.core_probe
        self.core_costs[probe] = cost
        if cost < self.core_costs[self.core]:
            self.core_dir = probe - self.core
            self.core = probe
        else:
            self.core_dir = 0  # (the way back is where it came from: known)
        self.core_probe = self._next_core()
        self.finished = self.core_probe is None
