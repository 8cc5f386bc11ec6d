"""The PPW clock found on this unit: over the whole table without a calibrated model
(:class:`OnlinePpwController`), or confirmed starting from a profile that is not its own.

A shipped reference profile, or a calibration made on another unit of the same model, puts
the PPW clock near this unit's but not on it: chips of one model differ in leakage and
voltage (on the simulated A100 PCIe the reference's 1005 MHz costs 2.6 % more energy per
unit of work than the unit's own optimum). :class:`PriorPpwController` starts at the prior's
clock and searches its neighbourhood by measurement (:class:`LocalSearch`, a compass search
on the clock table: step to the better neighbour, halve the step when neither is better), so
every clock it tries is near the prior and learning costs little. The clock found is
``result``, which the governor keeps in the board's own profile (``tuning.online_ppw``) so the
next run holds it at once.

Two parts: :class:`ProbeMeter` (one clock's cost: energy per unit of work, or per cycle when
the app reports none) and :class:`LocalSearch` (which clock to try next), each tested alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Sequence, Tuple

from governor.runtime.controller_base import (
    Controller,
    Decision,
    MemoryHints,
    Now,
    Observation,
    Tick,
)
from governor.runtime.model import ClockModel
from governor.runtime.probe_meter import ProbeMeter

__all__ = [
    "Handout",
    "LocalSearch",
    "OnlinePpwController",
    "PriorPpwController",
    "ProbeMeter",
    "SearchState",
]


#: with an app that counts whole units (frames, batches), a probe of the search over the
#: whole table goes on until it has counted this many (such a count errs by one unit at
#: each end), up to MAX_MEASURE_S of busy time
MIN_UNITS = 60.0
MAX_MEASURE_S = 10.0


@dataclass
class LocalSearch:
    """A compass search for the cheapest index of a clock table, from ``start``.

    Try ``start ± step``; move to a neighbour that is cheaper and keep going the same way;
    when neither neighbour is cheaper, halve the step; stop when a step of one index finds
    nothing cheaper, or after ``max_probes`` (then the cheapest tried). Energy per unit of
    work has one minimum over the clock, so on a smooth curve this ends on it or next to it.
    """

    n: int
    start: int
    step: int
    max_probes: int = 14
    costs: Dict[int, float] = field(default_factory=dict)
    center: int = -1
    direction: int = 0  # the way the last move went (+1 up, -1 down, 0 none yet)

    def __post_init__(self) -> None:
        self.start = min(max(self.start, 0), self.n - 1)
        self.center = self.start
        self.step = max(1, self.step)

    def record(self, index: int, cost: float) -> None:
        self.costs[index] = cost
        if index != self.center and self.center in self.costs and cost < self.costs[self.center]:
            self.direction = 1 if index > self.center else -1
            self.center = index

    def _candidates(self) -> Tuple[int, ...]:
        c, s = self.center, self.step
        d = self.direction or 1  # having moved, look further the same way first
        return tuple(i for i in (c + d * s, c - d * s) if 0 <= i < self.n)

    def next_probe(self) -> Optional[int]:
        """The next index to measure, or None when the search is over."""
        if len(self.costs) >= self.max_probes:
            return None
        if self.center not in self.costs:
            return self.center
        while True:
            for i in self._candidates():
                if i not in self.costs:
                    return i
            if self.step == 1:
                return None
            self.step //= 2

    @property
    def best(self) -> int:
        return min(self.costs, key=lambda i: (self.costs[i], i)) if self.costs else self.start


@dataclass(frozen=True)
class SearchState:
    """A PPW search: what it found (``result``: the clock and how it was found; None while
    it searches) and the probes done."""

    online_ppw: Optional[Dict[str, Any]]
    probes_done: int


class Handout:
    """Which clock a search last handed the governor: a probe's clock is urgent when it is
    a new probe (the search moved), the clock found when it is first handed out; after
    that the search holds what the governor holds."""

    def __init__(self, first: Optional[int]) -> None:
        self.handed = first  # the table index handed out last (the first probe's at start)

    def clock(
        self, clocks: Sequence[float], probe: Optional[int], found: Optional[int], now_mhz: float
    ) -> Decision:
        if probe is not None:
            urgent = probe != self.handed
            self.handed = probe
            return Decision(clocks[probe], urgent)
        if found is None or found == self.handed:
            return Decision(now_mhz)
        self.handed = found
        return Decision(clocks[found], True)


class PriorPpwController(Controller):
    """The PPW clock searched by measurement around the model's (a prior's) PPW clock.

    The first step is about ``step_share`` of the prior clock (at least one table step), so
    on a fine table (15 MHz, 81 clocks) the search covers a few percent either side in a few
    probes and on a Jetson table (5-15 clocks) it tries the adjacent clocks. With probes of
    ``settle_s`` + ``measure_s`` (2.3 s without an energy counter) it ends well within the
    first minute of busy time.
    """

    def __init__(
        self,
        model: ClockModel,
        *,
        settle_s: float = 1.3,
        measure_s: float = 1.0,
        step_share: float = 0.03,
    ) -> None:
        super().__init__(model)
        self.notes = (
            f"confirming the profile's PPW clock {model.ppw_clock_mhz:g} MHz on this "
            "unit: a few probes of the running load around it",
        )
        clocks = model.clocks_mhz
        start = model.index(model.ppw_clock_mhz)
        table_step = (clocks[-1] - clocks[0]) / max(1, len(clocks) - 1)
        step = int(round(step_share * clocks[start] / table_step)) if table_step > 0 else 1
        self.search = LocalSearch(n=len(clocks), start=start, step=max(1, step))
        self.meter = ProbeMeter(settle_s, measure_s)
        self.probe: Optional[int] = self.search.next_probe()
        self.result: Optional[Dict[str, Any]] = None
        self.handout = Handout(self.probe)
        self.elapsed_s = 0.0

    def initial_mhz(self) -> float:
        return self.model.clocks_mhz[self.search.start]

    def observe(self, obs: Observation, ticks: Sequence[Tick]) -> None:
        """Meter the probe's clock; a probe done, its cost recorded and the next chosen (the
        result once the search is over)."""
        self.elapsed_s = obs.elapsed_s + obs.dt_s
        clocks = self.model.clocks_mhz
        if self.probe is None:
            return
        here = clocks[self.probe]
        if obs.busy is False or obs.power_w is None or obs.applied_mhz != here:
            return
        self.meter.add(obs.power_w, obs.dt_s, sum(t.units for t in ticks))
        if not self.meter.done:
            return
        per_unit = self.meter.units > 0
        self.search.record(self.probe, self.meter.cost(here))
        self.meter.reset()
        self.probe = self.search.next_probe()
        if self.probe is not None:
            return
        best = self.search.best
        self.result = {
            "clock_mhz": clocks[best],
            "prior_clock_mhz": clocks[self.search.start],
            "probes": len(self.search.costs),
            "found_after_s": self.elapsed_s,
            "cost": "energy per unit of work" if per_unit else "energy per cycle",
        }

    def choose(self, now: Now) -> Decision:
        """The probe's clock, or the clock found; urgent when it is a new one."""
        found = self.search.best if self.result is not None else None
        return self.handout.clock(self.model.clocks_mhz, self.probe, found, now.current_mhz)

    def records(self) -> Tuple[Any, ...]:
        return (SearchState(self.result, len(self.search.costs)),)


class OnlinePpwController(Controller):
    """The PPW clock found during the job, for a device with no calibrated model.

    A golden-section search over the clock table: each probe holds one clock for
    ``settle_s`` (the power average settles, NVML's over ~1 s) and then measures energy over
    ``measure_s`` of busy time; idle periods pause the probe. The cost of a clock is the energy
    per unit of work where the app reports it (``gov.tick(units)``), else mean power / clock
    (energy per cycle: a compute-bound load's energy per unit of work). Energy per unit of work
    has one minimum over the clock (the ridge), so the search needs about ``log(n)/log(1.6)``
    probes: 11 on a 190-clock table, 5 on a 12-clock Jetson table. Then it holds the best
    clock; ``result`` is set for the governor to keep.
    """

    def __init__(self, model: ClockModel, *, settle_s: float = 1.3, measure_s: float = 1.0) -> None:
        super().__init__(model)
        self.notes = ("finding the PPW clock online: a few probes of the running load",)
        self.settle_s = settle_s
        self.measure_s = measure_s
        self.lo, self.hi = 0, len(model.clocks_mhz) - 1
        self.paired = False  # the memory clock is searched too (offer_mem_clocks)
        self.costs: Dict[int, float] = {}
        self.probe: Optional[int] = None
        self.held_s = 0.0
        self.energy_j = 0.0
        self.busy_s = 0.0
        self.units = 0.0
        self.result: Optional[Dict[str, Any]] = None
        self.elapsed_s = 0.0
        self.probe = self._next()
        self.best: Optional[int] = None  # the clock found (an index), once the search is over
        self.handout = Handout(self.probe)
        self.whole = True  # the app counts whole units (frames, batches) so far
        # the memory axis at the clock found, where the governor may set it (mem_knob.py)
        self.mem_table: Sequence[float] = ()
        self.mem_search: Optional[Any] = None  # a ppw_mem_search.MemAxisSearch once begun
        # the first probe of a paired search is measured at the top memory clock, whole
        self.first_at_top = False

    def _next(self) -> Optional[int]:
        costs = self.costs
        while self.hi - self.lo > 2:
            span = self.hi - self.lo
            m1 = self.lo + int(round(0.382 * span))
            m2 = self.lo + int(round(0.618 * span))
            if m2 <= m1:
                m2 = m1 + 1
            for m in (m2, m1) if self.paired else (m1, m2):
                if m not in costs:
                    return m
            if costs[m1] <= costs[m2]:
                self.hi = m2
            else:
                self.lo = m1
        for m in range(self.lo, self.hi + 1):
            if m not in costs:
                return m
        return None

    def initial_mhz(self) -> float:
        return self.model.clocks_mhz[self.probe if self.probe is not None else -1]

    def observe(self, obs: Observation, ticks: Sequence[Tick]) -> None:
        """Meter the probe's clock; a probe done, its cost recorded and the next chosen (the
        result once the search is over)."""
        self.elapsed_s = obs.elapsed_s + obs.dt_s
        clocks = self.model.clocks_mhz
        units = sum(t.units for t in ticks)
        if self.probe is None:
            if self.mem_search is not None and not self.mem_search.done:
                self._observe_mem(obs, units)
            return
        if units > 0 and len(self.mem_table) > 1 and not self.paired:
            # the core search learns for both knobs (the app counts its work): the upper
            # probe of each pair first (PPW clocks sit in the table's upper half), the lower
            # cut short when clearly worse; the first probe moves there if it has not
            # measured yet
            self.paired = True
            if not self.costs and self.busy_s == 0:
                self.held_s = 0.0
                self.probe = self._next()
                self.first_at_top = True
                return
        if obs.busy is False or obs.power_w is None or obs.applied_mhz != clocks[self.probe]:
            return
        self.held_s += obs.dt_s
        if self.held_s <= self.settle_s + 1e-9:
            return
        power = obs.power_w
        if self.paired and obs.board_power_w is not None:  # both knobs: the board's input
            power = obs.board_power_w
        self.energy_j += power * obs.dt_s
        self.busy_s += obs.dt_s
        self.units += units
        if self.busy_s < self.measure_s - 1e-9:
            return
        self.whole = self.whole and all(float(t.units).is_integer() for t in ticks)
        if self.whole and 0 < self.units < MIN_UNITS and self.busy_s < MAX_MEASURE_S - 1e-9:
            if not (self.paired and self._clearly_worse()):
                return  # a count of whole units errs by one: a probe counts enough of them
        self._probe_done(units)

    def _probe_done(self, units: float) -> None:
        """The probe under way has measured enough: its cost recorded, and the next probe
        chosen (the memory axis first where both knobs are searched), or the result."""
        clocks = self.model.clocks_mhz
        assert self.probe is not None
        if self.units > 0:
            cost = self.energy_j / self.units
        else:
            cost = self.energy_j / (self.busy_s * clocks[self.probe])
        self.costs[self.probe] = cost
        self.held_s = self.energy_j = self.busy_s = self.units = 0.0
        if self.paired and self.mem_search is None:
            # the memory axis first, at this core clock (the golden-section's upper one):
            # the rest of the core search then runs at the memory clock found, not at the
            # default one that costs several percent more on a compute-bound load
            from governor.runtime.ppw_mem_search import MemAxisSearch

            # the probe just done held the top memory clock (memory_hints): its cost is the
            # memory search's first pair, measured already
            self.mem_search = MemAxisSearch(
                self.mem_table, self.settle_s, top_cost=cost if self.first_at_top else None
            )
            self.probe = None
            return
        self.probe = self._next()
        if self.probe is None:
            self.best = min(self.costs, key=lambda i: (self.costs[i], i))
            found: Dict[str, Any] = {
                "clock_mhz": clocks[self.best],
                "probes": len(self.costs),
                "found_after_s": self.elapsed_s,
                "cost": "energy per unit of work" if units > 0 else "energy per cycle",
            }
            if self.paired:  # the memory clock was searched first
                assert self.mem_search is not None
                self.result = dict(
                    found,
                    mem_clock_mhz=self.mem_search.wanted_mhz,
                    probes=len(self.costs) + len(self.mem_search.costs),
                )
            elif len(self.mem_table) > 1 and units > 0:  # the memory axis next, by work
                from governor.runtime.ppw_mem_search import MemAxisSearch

                self.mem_search = MemAxisSearch(
                    self.mem_table, self.settle_s, core_mhz=clocks, core=self.best
                )
                self._found: Dict[str, Any] = found
            else:
                self.result = found

    def _clearly_worse(self) -> bool:
        """Whether the probe under way costs more than the cheapest clock measured even
        with its count one unit short and that clock's (counted to MIN_UNITS) one over: it
        is then cut short (searching both knobs, every probe at a poor clock is learning
        paid for)."""
        if not self.costs or self.units < 1:
            return False
        ref = min(self.costs.values())
        return self.energy_j / (self.units + 1.0) > ref * (1.0 + 1.0 / MIN_UNITS)

    def memory_hints(self) -> MemoryHints:
        """The memory clock the search holds (``wanted_mhz``; None: none searched, the
        core clock alone)."""
        if self.mem_search is not None:
            return MemoryHints(wanted_mhz=self.mem_search.wanted_mhz)
        if self.first_at_top:  # the first probe: its pair is the memory search's first
            return MemoryHints(wanted_mhz=self.mem_table[-1])
        return MemoryHints(wanted_mhz=None)

    def offer_mem_clocks(self, table_mhz: Sequence[float]) -> None:
        """The memory clocks the governor may set (:mod:`.mem_knob`; the first offer is
        kept), searched where the app reports its work: at the core search's first clock
        (the golden-section's upper one), the rest of the core search then at the memory
        clock found, every cost on the board's input (see :mod:`.ppw_mem_search`)."""
        if not self.mem_table:
            self.mem_table = tuple(table_mhz)

    def _observe_mem(self, obs: Observation, units: float) -> None:
        search = self.mem_search
        assert search is not None
        search.add(obs, units)
        if search.done and self.paired and self.best is None:
            # the core search goes on at the memory clock found, from its first clock's
            # cost there (both on the board's input where it is metered)
            first = next(iter(self.costs))
            assert search.best is not None
            self.costs = {first: search.costs[search.best]}
            self.probe = self._next()
            return
        if search.done:
            assert search.core is not None
            self.best = search.core
            self.result = dict(
                self._found,
                clock_mhz=self.model.clocks_mhz[search.core],
                mem_clock_mhz=search.wanted_mhz,
                probes=self._found["probes"] + len(search.costs) + len(search.core_costs) - 1,
                found_after_s=self.elapsed_s,
            )

    def choose(self, now: Now) -> Decision:
        """The probe's clock, or the clock found; urgent when it is a new one."""
        search = self.mem_search
        if search is not None and not search.done:  # the core clock again, at the memory's
            probe = search.core_probe
            return self.handout.clock(self.model.clocks_mhz, probe, search.core, now.current_mhz)
        return self.handout.clock(self.model.clocks_mhz, self.probe, self.best, now.current_mhz)

    def records(self) -> Tuple[Any, ...]:
        return (SearchState(self.result, len(self.costs)),)
