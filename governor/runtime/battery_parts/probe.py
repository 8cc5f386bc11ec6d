"""The runs of a phase with the app's ticks: two probe runs, then the run the mix decides.

A new phase is first probed: one run at each of two clocks about 20 % apart in relative time
around the plan (a few seconds each; the budget's feedback absorbs the difference), so that
its work and power against the clock can be fitted. The fitted lines are local (a
memory-bound load turns compute-bound at low clocks): the level the mix asks for is held
within the band the probes are trusted for, and a phase that keeps pressing on that band's
edge is probed again around it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional, Tuple

from governor.runtime.workrate import PhaseFit

__all__ = ["ProbeRuns", "Run"]

PROBE_S = 6.0  # longest probe run (busy seconds) at each of the two clocks
EDGE_S = 15.0  # busy seconds held at the edge of the trusted band before probing there


class Run(enum.Enum):
    """A run of a phase: the probe at the lower clock, the one at the higher, then the
    clocks the mix decides. The phase's fit (:class:`.PhaseFit`) pools its periods by run."""

    LO = "lo"
    HI = "hi"
    MIX = "run"


@dataclass
class ProbeRuns:
    """The run under way (:class:`Run`), the probed pair of table indices, and the busy
    seconds the level has been held at the trusted band's edge. ``capped_top``: the highest
    table index below the model's power cap."""

    capped_top: int
    run: Run = Run.LO
    pair: Optional[Tuple[int, int]] = None
    edge_s: float = 0.0

    def advance(self, work: PhaseFit) -> None:
        """End a probe run once it has PROBE_UNITS units in MIN_S seconds, or PROBE_S
        seconds."""
        if self.run is not Run.MIX:
            secs, units = work.units_in(self.run)
            if units >= work.PROBE_UNITS and secs >= work.MIN_S or secs >= PROBE_S:
                self.run = Run.HI if self.run is Run.LO else Run.MIX

    def probe_index(self, work: PhaseFit, at_level: float) -> Optional[int]:
        """The table index this period probes at (the pair chosen around ``at_level`` when
        the phase's probes begin); None once both probe runs are done."""
        if self.run is Run.MIX:
            return None
        if self.pair is None:
            self.pair = work.probe_pair(int(round(at_level)), self.capped_top)
        return self.pair[1 if self.run is Run.HI else 0]

    def probed(self) -> Tuple[int, int]:
        """The probed pair; the whole table below the cap before any probe."""
        return self.pair or (0, self.capped_top)

    def hold(
        self, want: float, level: float, band: Tuple[int, int], dt_s: float
    ) -> Tuple[float, bool]:
        """(the level ``want`` kept within the trusted ``band``, widened to the plan's own
        ``level`` (the budget's feedback is followed as it is); whether it has been held at
        the band's edge for EDGE_S busy seconds, so the phase should be measured again
        around the edge: :meth:`probe_again`)."""
        floor_i, ceil_i = band
        level_now = min(max(want, min(float(floor_i), level)), max(float(ceil_i), level))
        if level_now == want:
            self.edge_s = 0.0
            return level_now, False
        self.edge_s += dt_s
        if self.edge_s < EDGE_S:
            return level_now, False
        self.edge_s = 0.0
        return level_now, True

    def probe_again(self, pair: Tuple[int, int]) -> None:
        """Probe the phase anew at ``pair`` (around the band's edge; its fit reset)."""
        self.run = Run.LO
        self.pair = pair

    def restart(self) -> None:
        """A new phase: probe it from the start."""
        self.pair = None
        self.run = Run.LO
        self.edge_s = 0.0
