"""What every controller shares: the period it sees, the app's ticks, the interface, and the
power tracker the power-type controllers (cap, battery) use.

:class:`PowerTracker`: the measured power over the period divided by the model's prediction
for the clock that ran gives a correction ``r`` (fast to rise, slow to fall), and the next
clock is the highest whose corrected prediction fits the target. With ``dither`` the leftover
between the target and that clock's power is carried to the next period (error diffusion), so
the *mean* power reaches the target even on a table of four clocks.

Kept apart from :mod:`governor.runtime.controllers` so that the battery controller's module
and the other controllers both build on it without importing each other.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

from governor.runtime.model import ClockModel
from governor.runtime.status import status_doc

if TYPE_CHECKING:
    from governor.runtime.budget import BudgetState

__all__ = [
    "ControlContext",
    "Controller",
    "Decision",
    "MemoryHints",
    "Now",
    "Observation",
    "PowerTracker",
    "StaticController",
    "Tick",
]


@dataclass(frozen=True)
class Observation:
    """One control period as measured. ``power_w`` is the mean over the period when the
    device has an energy counter, else the latest reading; None when telemetry failed."""

    t_s: float
    dt_s: float
    power_w: Optional[float]
    clock_mhz: Optional[float]
    applied_mhz: float
    energy_used_j: float
    elapsed_s: float
    #: whether the GPU computed during the period (utilisation); None when unknown
    busy: Optional[bool] = None
    #: mean whole-board power over the period (W), where the device meters the board
    board_power_w: Optional[float] = None
    #: whole-board energy used since the start (J), where metered
    board_energy_used_j: Optional[float] = None
    #: the GPU figure's power between frames (W), measured from readings filed as idle
    #: where there is no energy counter (see metering.py); None when not known
    idle_power_w: Optional[float] = None


@dataclass(frozen=True)
class Tick:
    """App progress: ``units`` done at ``t_s``; ``busy_s`` the time they took, when known.
    ``mem_slowed``: the memory knob found the frame slowed by a lower memory clock (a test
    that failed, :mod:`.mem_frames`): its time says nothing of the load at the default
    memory clock the knob went back to, and the throughput controller does not learn it."""

    t_s: float
    units: float
    busy_s: Optional[float]
    applied_mhz: float
    mem_slowed: bool = False


@dataclass(frozen=True)
class Now:
    """What a choice is made at: the period just observed, its ticks, and the clock the
    governor holds (``current_mhz``)."""

    obs: Observation
    ticks: Sequence[Tick]
    current_mhz: float


@dataclass(frozen=True)
class Decision:
    """A controller's choice: the clock for the next period and whether the change is
    urgent (never delayed by the governor's rate limit)."""

    clock_mhz: float
    urgent: bool = False


@dataclass(frozen=True)
class MemoryHints:
    """What a controller tells the memory knob (:mod:`.mem_knob`) of the load now: all the
    knob reads of it (:meth:`Controller.memory_hints`).

    ``memory_share``: how memory-bound the controller reads the load (the battery
    controller's share of power that does not scale with the core clock,
    :class:`.ShareEstimator`; None: no estimate). ``waiting``: the idle run under way is a
    wait, not a gap between bursts (the battery plan's :meth:`.BurstStats.waiting`).
    ``wanted_mhz``: the memory clock a controller that searches the memory axis itself
    holds (online PPW; None: none searched, the knob keeps the memory clock where it is).
    ``unit_deadline_s``: the seconds a unit of work may take (the throughput policy's frame
    deadline, one period of its rate; None: no deadline), what the throughput knob
    (:mod:`.mem_frames`) holds a frame at the lower memory clock to.
    """

    memory_share: Optional[float] = None
    waiting: bool = False
    wanted_mhz: Optional[float] = None
    unit_deadline_s: Optional[float] = None


@dataclass(frozen=True)
class ControlContext:
    """What a controller is made with besides its policy and the clock model.

    ``energy_counter``: the device meters energy, so a period's mean power is exact and a
    probe settles in ``settle_s`` = 0.3 s (else 1.3 s: NVML's and the INA3221's readings
    average over about a second); it also lets the throughput policy search clocks by
    measurement. ``battery``: a reader of the remaining energy (J) for a battery budget.
    """

    interval_s: float
    energy_counter: bool = False
    battery: Optional[Callable[[], float]] = None
    #: the PPW clock an earlier run found online for this board, by workload (None: none
    #: kept); the PPW policy holds it instead of searching again
    kept_ppw: Optional[Callable[[Optional[str]], Optional[Dict[str, Any]]]] = None
    #: the device's memory clock when the controller is made (MHz; None: not read): the PPW
    #: policy holds the profile's pair's core clock while the memory clock is the pair's
    mem_clock_mhz: Optional[float] = None

    @property
    def settle_s(self) -> float:
        return 0.3 if self.energy_counter else 1.3


class Controller:
    """What the governor may ask of a controller; every member has a default.

    Each control period the governor calls :meth:`observe` (learn from the period just
    measured and the app's ticks) and then :meth:`choose` (the clock for the next period);
    while telemetry fails it observes and holds :meth:`safe_mhz` instead of choosing, and
    :meth:`close` takes the last period before the device is restored (bookkeeping only).
    :meth:`decide` does both for a caller that wants the clock of one period (tests,
    benches). ``initial_mhz`` is the clock before the first observation, ``status`` the
    public dictionary for ``Governor.status()``, :meth:`budget_state` the mission budget
    spent (a typed record: what other parts read). ``eager``: take a control step as soon
    as the app reports a measured frame. ``admit``: whether the app should take the next
    frame (``gov.admit()``). ``result``: a finding the governor keeps for the next run (the
    online PPW clock), None until there is one.
    """

    #: a finding to keep (see the class docstring); set by the controllers that find one
    result: Optional[Dict[str, Any]] = None
    #: whether that finding is kept already (a clock an earlier run found, held again)
    result_kept: bool = False
    #: what the governor says when it starts with this controller (a search under way)
    notes: Tuple[str, ...] = ()

    def __init__(self, model: ClockModel) -> None:
        self.model = model

    @property
    def eager(self) -> bool:
        return False

    def initial_mhz(self) -> float:  # pragma: no cover - interface
        raise NotImplementedError

    def observe(self, obs: Observation, ticks: Sequence[Tick]) -> None:
        """Learn from one period as measured and the app's ticks in it; chooses nothing."""

    def choose(self, now: Now) -> Decision:
        """The clock for the next period, after :meth:`observe` saw ``now.obs``."""
        return Decision(now.current_mhz)

    def decide(
        self, obs: Observation, ticks: Sequence[Tick], current_mhz: float
    ) -> Tuple[float, bool]:
        """:meth:`observe` then :meth:`choose`: the clock for the next period and whether
        the change is urgent."""
        self.observe(obs, ticks)
        decision = self.choose(Now(obs, tuple(ticks), current_mhz))
        return decision.clock_mhz, decision.urgent

    def safe_mhz(self, current_mhz: float) -> float:
        """The clock to hold while telemetry fails."""
        return current_mhz

    def admit(self) -> bool:
        """Whether the app should take the next frame; every frame unless rationed."""
        return True

    def close(self, obs: Observation) -> None:
        """Account for the last period, which ends with the run: no clock follows it."""

    def budget_state(self) -> Optional[BudgetState]:
        """The mission budget this controller spends (None: it spends none)."""
        return None

    def records(self) -> Tuple[Any, ...]:
        """The controller's state as typed records (frozen dataclasses; see
        :mod:`governor.runtime.status`), what :meth:`status` is made of."""
        return ()

    def status(self) -> Dict[str, Any]:
        """The public dictionary of :meth:`records`."""
        return status_doc(*self.records())

    # -- what the memory knob (mem_knob.py) asks; a controller that ignores it keeps these
    def memory_hints(self) -> MemoryHints:
        """What the memory knob may read of the load now (:class:`MemoryHints`)."""
        return MemoryHints()

    def offer_mem_clocks(self, table_mhz: Sequence[float]) -> None:
        """The memory clocks the governor may set, for a controller that searches the
        memory axis itself (online PPW); the others ignore them."""

    def shift_power(self, applied_mhz: float, power_w: float) -> None:
        """The board's draw moved by ``power_w`` (W) at every core clock (the memory clock
        changed; ``applied_mhz`` the core clock that ran): a controller that corrects its
        model by measured power (the power cap's) moves its correction at once, which it
        would learn only over periods; the others ignore it."""


class StaticController(Controller):
    """One clock for the whole run (ppw, max, clock)."""

    def __init__(self, model: ClockModel, clock_mhz: float, notes: Tuple[str, ...] = ()) -> None:
        super().__init__(model)
        self.clock_mhz = model.clocks_mhz[model.index(clock_mhz)]
        self.notes = notes

    def initial_mhz(self) -> float:
        return self.clock_mhz

    def choose(self, now: Now) -> Decision:
        return Decision(self.clock_mhz)

    def safe_mhz(self, current_mhz: float) -> float:
        return self.clock_mhz


class PowerTracker:
    """Measured-power correction of the model and the clock that fits a power target.

    The correction is kept per clock: a load's power does not scale with the calibration
    load's by one factor at every clock (a memory-bound load's share of dynamic power falls
    as the clock rises), and dithering between two clocks reaches its target only if both
    levels are right. A clock not measured yet borrows the nearest measured clock's factor.
    """

    RISE = 1.0  # share of an upward correction taken at once (power above prediction)
    FALL = 0.3  # share of a downward correction per period

    def __init__(self, model: ClockModel, dither: bool) -> None:
        self.model = model
        self.dither = dither
        self.r: Optional[float] = None  # the latest factor, at whichever clock ran
        self.r_by_clock: Dict[float, float] = {}
        self._measured: List[float] = []  # clocks with a factor, ascending
        self.carry_w = 0.0

    def learn(self, power_w: float, applied_mhz: float) -> None:
        predicted = self.model.power_at(applied_mhz)
        if predicted <= 0 or not math.isfinite(power_w) or power_w < 0:
            return
        r_inst = power_w / predicted
        r_old = self.r_by_clock.get(applied_mhz, self.r)
        if r_old is None or r_inst > r_old:
            r_new = r_old + self.RISE * (r_inst - r_old) if r_old is not None else r_inst
        else:
            r_new = r_old + self.FALL * (r_inst - r_old)
        if self.r is not None and r_inst > self.r * 1.2:  # the load grew: old factors are stale
            self.r_by_clock = {c: max(v, r_new) for c, v in self.r_by_clock.items()}
        if applied_mhz not in self.r_by_clock:
            bisect.insort(self._measured, applied_mhz)
        self.r_by_clock[applied_mhz] = r_new
        self.r = r_new

    @property
    def scale(self) -> float:
        return self.r if self.r is not None else 1.0

    def scale_at(self, clock_mhz: float) -> float:
        factors = self.r_by_clock
        if clock_mhz in factors:
            return factors[clock_mhz]
        measured = self._measured
        if not measured:
            return self.scale
        i = bisect.bisect_left(measured, clock_mhz)
        near = [measured[j] for j in (i - 1, i) if 0 <= j < len(measured)]
        return factors[min(near, key=lambda c: abs(c - clock_mhz))]

    def shift(self, applied_mhz: float, power_w: float) -> None:
        """Move the corrected power at every clock measured, and the latest factor (taken
        at ``applied_mhz``), by ``power_w`` (W); no factor below 0.05."""
        for clock_mhz, factor in self.r_by_clock.items():
            base = self.model.power_at(clock_mhz)
            if base > 0:
                self.r_by_clock[clock_mhz] = max(0.05, factor + power_w / base)
        base = self.model.power_at(applied_mhz)
        if self.r is not None and base > 0:
            self.r = max(0.05, self.r + power_w / base)

    def predicted_w(self, clock_mhz: float) -> float:
        return self.scale_at(clock_mhz) * self.model.power_at(clock_mhz)

    def clock_for(self, target_w: float, *, carry: bool = True) -> float:
        """The highest clock whose corrected power fits ``target_w`` (plus the carried
        leftover when dithering); the lowest clock when none does."""
        clocks, model_w = self.model.clocks_mhz, self.model.power_w
        top = len(clocks) - 1
        want = target_w + (self.carry_w if (carry and self.dither) else 0.0)

        def level(i: int) -> float:
            return self.scale_at(clocks[i]) * model_w[i]

        # the model's power rises with the clock: bisect with one factor, then step with
        # each clock's own factor (a control step must stay cheap on 190-clock tables)
        idx = min(max(bisect.bisect_right(model_w, want / self.scale) - 1, 0), top)
        while idx < top and level(idx + 1) <= want:
            idx += 1
        while idx > 0 and level(idx) > want:
            idx -= 1
        if carry and self.dither and idx < top and level(idx) <= want:
            self.carry_w = want - level(idx)
        else:
            # at the top clock the leftover is dropped, not carried: no windup when demand,
            # not the target, limits (it costs a little mean power when the top clock is one
            # of the two being dithered)
            self.carry_w = 0.0
        return clocks[idx]
