"""The battery policy's controller: make a budget last the mission doing the most work.

Each period the mission budget (:mod:`governor.runtime.budget`) accounts what was spent and
recomputes the busy-power plan from what is left (:mod:`.battery_parts.plan`);
with the app's ticks the load's work and power against the clock are measured
(:mod:`governor.runtime.workrate`) and the clock follows the Lagrange condition over a
forecast of the rest of the mission (:mod:`.battery_parts.forecast`, :mod:`.battery_parts.solver`);
without them the load's memory share, read off its power, moves the clock the same way
(:mod:`.battery_parts.share`). ``governor.runtime.controllers.BatteryController`` still
names it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Sequence, Tuple

from governor.runtime.battery_parts import plan as plan_parts
from governor.runtime.battery_parts.curves import ClockCurves
from governor.runtime.battery_parts.flat import flat_top
from governor.runtime.battery_parts.forecast import MixLoad, forecast_mix
from governor.runtime.battery_parts.history import PhaseHistory
from governor.runtime.battery_parts.probe import ProbeRuns, Run
from governor.runtime.battery_parts.share import (
    SHARE_SAME,
    PowerRatio,
    ShareEstimator,
    share_gaps,
)
from governor.runtime.battery_parts.solver import mix_lambda
from governor.runtime.battery_parts.tables import fractional_index, level_neg
from governor.runtime.budget import BudgetState, MissionBudget, budget_and_reserve
from governor.runtime.controller_base import (
    Controller,
    Decision,
    MemoryHints,
    Now,
    Observation,
    PowerTracker,
    Tick,
)
from governor.runtime.model import ClockModel
from governor.runtime.status import Correction
from governor.runtime.workrate import PhaseFit

if TYPE_CHECKING:
    from governor.runtime.policies import Battery

__all__ = ["BatteryController"]


class BatteryController(Controller):
    """Make the budget last the mission doing the most work: a busy-power target planned from
    what is left, the time left and the load's duty cycle as it unfolds.

    The budget is metered on the policy's scope: the board input (``scope="board"``, the
    rail a robot's battery feeds) or the GPU figure. Each period :class:`.MissionPlan` gives
    the busy power target. It is met like a cap (per-clock corrected model, error diffusion
    between neighbouring clocks); on the board scope the rest of the board (measured board −
    GPU figure) is taken off the target first, so the GPU model is corrected on the GPU
    figure and the budget is held on the board. Below the PPW clock a joule buys less work,
    but the mission must last, so the plan may go there.

    Parts: ``budget`` (:class:`.MissionBudget`: the budget, its accounting and run-out
    moment, and its ``plan``: duty cycle, idle power, bursts), ``ratio`` (measured over modelled busy
    power), ``share`` (memory share from power), ``curves`` (the table below the power cap),
    ``history`` (past phases), ``probes`` (a phase's probe runs and trusted band), and
    ``work`` (the phase's fit from the app's ticks).
    """

    PRIOR_RATIO_S = 100.0  # seconds of the calibration load a calibrated model starts with
    # periods per solve of the phase's fit and the mix's multiplier (the slow outer loop):
    # between solves the level found last is held within the trusted band of the plan now
    SOLVE_EVERY = 3

    def __init__(
        self, model: ClockModel, policy: Battery, reader: Optional[Callable[[], float]] = None
    ) -> None:
        super().__init__(model)
        self.policy = policy
        budget_j, reserve_j = budget_and_reserve(policy.budget_j, policy.reserve, reader)
        self.budget = MissionBudget(budget_j, reserve_j, policy.target_s, policy.scope, reader)
        self.plan = self.budget.plan
        self.board_scope = self.budget.board_scope
        self.tracker = PowerTracker(model, dither=True)
        prior_s = self.PRIOR_RATIO_S if model.fitted else 0.0
        prior_j = prior_s * model.power_at(model.ppw_clock_mhz) if model.fitted else 0.0
        self.ratio = PowerRatio.with_prior(prior_j)
        self.share = ShareEstimator(model, prior_s)
        self.curves = ClockCurves(model)
        self.history = PhaseHistory(self.curves)
        self.probes = ProbeRuns(self.curves.capped_top)
        self.work = PhaseFit(model) if model.fitted else None
        # the decision's state: the plan's level and the phase's (fractional table
        # indices), the dithering carry, and with ticks the solve's answer and schedule
        self.level: Optional[float] = None
        self.phase_level: Optional[float] = None
        self.carry = 0.0
        self.ticked = False
        self.cal_gaps: Optional[List[float]] = None  # the calibration load's gaps
        # with ticks, the phase's gaps and power below the cap at the last solve (None: no
        # fit, or not concave)
        self.phase_flat: Optional[Tuple[List[float], List[float]]] = None
        self.last_lam: Optional[float] = None  # the mix's multiplier the last solve
        self.want: Optional[float] = None  # the phase's level at it (None: no fit then)
        self.solve_in = 0  # periods until the next solve

    def initial_mhz(self) -> float:
        self.budget.start()
        if not self.model.fitted:
            return self.model.clocks_mhz[0]
        return self.tracker.clock_for(self.budget.gpu_target_w(), carry=False)

    def observe(self, obs: Observation, ticks: Sequence[Tick]) -> None:
        """The budget's accounting and plan; on a steady busy period with a power reading,
        the model's correction, the power ratio, the memory share and the phase's work."""
        steady = self.budget.observe(obs)
        if obs.busy is not False and obs.power_w is not None and steady:
            self._learn_busy(obs, obs.power_w, ticks)
        if self.model.fitted:  # the lowest clock's busy power on the budget's scope
            gpu_w = self.ratio.ratio(self.tracker.scale) * self.model.power_w[0]
            rest_w = (self.plan.rest_w or 0.0) if self.board_scope else 0.0
            self.plan.floor_w = gpu_w + rest_w
            # the hedge spends ahead only on a load that gains from the clock as the
            # calibration load does: spent ahead on a memory-bound phase, a joule buys least
            k = self.share.k
            self.plan.hedge = plan_parts.HEDGE if k is not None and k <= SHARE_SAME else 0.0
        self.budget.account(obs)

    def choose(self, now: Now) -> Decision:
        """The clock for the plan's GPU power: idle, the next burst's (or the lowest in a
        wait); busy, by the phase's measured curves with ticks, else by power."""
        obs = now.obs
        if obs.busy is False:
            return Decision(self._idle_mhz(now.current_mhz))
        gpu_w = self.budget.gpu_target_w()
        ratio = self.ratio.ratio(self.tracker.scale)
        self.level = self._level(gpu_w, ratio)
        top_w = ratio * self.model.power_w[-1]
        over_top = gpu_w / top_w if top_w > 0 else 1.0
        if self.ticked and self.work is not None:
            clock = self._by_ticks(self.work, self.level, gpu_w, obs.dt_s)
            if clock is not None:
                return Decision(clock)
        flat_w = gpu_w / max(self.tracker.scale, 1e-9)  # the load now: its own ratio
        level = self._phase_level(self.level, gpu_w, over_top)
        self.phase_level = self._flat(level, flat_w, obs.dt_s)
        return Decision(self._pick(self.phase_level))

    def _flat(self, level: float, flat_w: float, dt_s: float) -> float:
        """Without ticks, ``level`` raised to the top of the flat it lies on
        (:func:`.flat.flat_top`) for a load the memory share reads as the calibration
        load's (the curve the model was fitted on; a memory-bound load's flat in the share
        model is not measured), once the mission has had a wait, with the plan's GPU power
        over the load's own measured/model ratio (the mission's mean, diluted by a lighter
        phase, would let the load now spend more than the flat leaves for the rest) and the
        busy time the plan forecasts. Read from power, a mildly memory-bound load can pass
        for the calibration load, so the hedge is taken only against what power can tell
        apart: waits, once one has come. ``flat_w``: the plan's GPU power in model watts
        this period; ``dt_s``: the period just ended."""
        model = self.model
        k = self.share.k
        if not model.fitted or k is None or k > SHARE_SAME:
            return level
        if self.plan.wait_s <= 0.0:
            return level
        if self.cal_gaps is None:  # the calibration load's gaps: fixed for the mission
            self.cal_gaps = share_gaps(model, 0.0, 1.0)
        left_s = self.plan.busy_left_s
        cal = self.cal_gaps
        age_s = self.plan.busy_s  # no phase is seen without ticks: the mission's busy time
        return flat_top(cal, model.clocks_mhz, model.power_w, level, flat_w, left_s, dt_s, age_s)

    def _idle_mhz(self, current_mhz: float) -> float:
        """The clock while idle: in a gap between bursts, the one the next burst starts at;
        in a wait (:meth:`.BurstStats.waiting`), the lowest, whose idle power is the least
        the board can idle at, so the wait banks the rest for the busy time left."""
        if self.plan.bursts.waiting():
            return self.model.clocks_mhz[0]
        return current_mhz

    def _learn_busy(self, obs: Observation, power_w: float, ticks: Sequence[Tick]) -> None:
        """A steady busy period with a power reading: the model's correction, the power
        ratio, the memory share, the phase's work (with ticks) and the rest of the board."""
        dt_s = obs.dt_s
        self.tracker.learn(power_w, obs.applied_mhz)
        i = self.model.index(obs.applied_mhz)
        self.ratio.add(power_w * dt_s, self.model.power_w[i] * dt_s)
        self.share.learn(power_w, i, dt_s)
        if ticks:
            self.ticked = True
        if self.ticked and self.work is not None:
            units = sum([t.units for t in ticks])
            self.work.add(self.probes.run, obs.applied_mhz, dt_s, units, power_w)
            self.history.age_s += dt_s

    def close(self, obs: Observation) -> None:
        self.budget.close(obs)

    def safe_mhz(self, current_mhz: float) -> float:
        level = self.phase_level if self.phase_level is not None else self.level
        if level is None:
            return self.model.clocks_mhz[0]
        return self.model.clocks_mhz[int(math.floor(level))]

    def _level(self, gpu_w: float, ratio: Optional[float] = None) -> float:
        """Fractional index into the clock table whose corrected power is ``gpu_w``
        (``ratio``: the measured-over-model power ratio, when the caller has it)."""
        if ratio is None:
            ratio = self.ratio.ratio(self.tracker.scale)
        want = gpu_w / max(ratio, 1e-9)
        return fractional_index(self.model.power_w, want)

    def _pick(self, level: float) -> float:
        """One clock of the two around ``level``, the upper one as often as its fraction
        (error diffusion over busy periods): the mean clock is the plan's."""
        clocks = self.model.clocks_mhz
        i = int(math.floor(level))
        frac = level - i
        if i >= len(clocks) - 1:
            return clocks[-1]
        self.carry += frac
        if self.carry >= 1.0 - 1e-9:
            self.carry -= 1.0
            return clocks[i + 1]
        return clocks[i]

    def _phase_level(self, level: float, gpu_w: float, over_top: float = 1.0) -> float:
        """The level for the load running now without ticks (see
        :meth:`.ShareEstimator.phase_level`). Where there is no marginal rate to match, the
        phase's power still says which way to go: the GPU target is scaled by the phase's
        measured/model power over the mission's own (its measured periods, the prior left
        out), so a load drawing less per clock than the mission's mean (SMs stalled on
        memory, which gain less from the clock) runs lower, one drawing more runs higher,
        and the budget's feedback moves the joules between them."""
        found = self.share.phase_level(level, over_top)
        if found is not None:
            return found
        now = self.tracker.scale
        return self._level(gpu_w * now / self.ratio.own_ratio(now))

    # -- with the app's ticks: probe, forecast, solve ------------------------------------

    def _by_ticks(self, work: PhaseFit, level: float, gpu_w: float, dt_s: float) -> Optional[float]:
        """The clock for the phase now from its measured work and power curves: probed
        first (:class:`.ProbeRuns`), then solved every SOLVE_EVERY periods, the level found
        held between. None when the ticks are too sparse to fit: the power estimate
        decides then. ``gpu_w``: the plan's GPU power; ``dt_s``: the period just ended."""
        if self.probes.run is Run.MIX and self.solve_in > 0:
            self.solve_in -= 1
            if self.want is None:
                return None
            return self._hold(work, self.want, level, gpu_w, dt_s)
        if work.changed():
            self._close_phase(work)
        self.probes.advance(work)
        at = self.phase_level if self.phase_level is not None else level
        probe_i = self.probes.probe_index(work, at)
        if probe_i is not None:
            return self.model.clocks_mhz[probe_i]
        self.solve_in = self.SOLVE_EVERY - 1
        self.want = None
        self.phase_flat = None
        want = self._solve(work, level, gpu_w)
        if want is None:
            return None
        self.want = want
        return self._hold(work, want, level, gpu_w, dt_s)

    def _solve(self, work: PhaseFit, level: float, gpu_w: float) -> Optional[float]:
        """The phase's level from its fit: where its marginal work per joule meets the
        multiplier at which the forecast mix draws ``gpu_w``, or, when the phase now is
        all the forecast holds, where its own power line draws ``gpu_w`` (by the
        multiplier, a compute-bound load on a table of equal power steps, whose gaps are
        flat but for rounding, would land anywhere on the flat). None without a fit, a
        concave curve, or three clocks below the power cap."""
        fit = work.fit()
        if fit is None:
            return None
        if not self.history.has_prior:  # the first phase measured sets the prior's scale
            A, B = fit[0], fit[1]
            rel = self.model.time_rel
            at = int(round(level))
            self.history.add_prior(self.PRIOR_RATIO_S, (A * rel[at] + B) / rel[at])
        if self.curves.end < 3:  # too few clocks below the cap to weigh loads apart
            return None
        found = self.curves.phase_curves(fit)
        if found is None:
            return None
        phase_neg, line, inv_b = found
        a, b = line
        self.phase_flat = ([-g for g in phase_neg], [a + b * d for d in self.curves.dyn_end])
        mix = forecast_mix(self.history, phase_neg, inv_b, self.plan.busy_left_s)
        if mix is None:
            return self.curves.own_level(line, gpu_w)
        lam = self.last_lam = self._mix_lambda(mix, gpu_w, line)
        return level_neg(phase_neg, lam)

    def _mix_lambda(self, mix: List[MixLoad], gpu_w: float, line: Tuple[float, float]) -> float:
        """The mix's multiplier (:func:`.solver.mix_lambda`), from the last one."""
        return mix_lambda(mix, gpu_w, line, self.curves.dyn_end, self.last_lam)

    def _hold(self, work: PhaseFit, want: float, level: float, gpu_w: float, dt_s: float) -> float:
        """The clock for the phase's level ``want``, kept within the band its probes are
        trusted for (widened to the plan's ``level`` this period); held at the band's edge
        long enough, the phase is measured again around it."""
        band = self.curves.trusted(*self.probes.probed())
        if self.phase_flat is not None:  # the top of the flat of the phase's own curves
            gaps_now, power_now = self.phase_flat
            clocks = self.model.clocks_mhz
            left_s = self.plan.busy_left_s
            age_s = self.history.age_s
            want = flat_top(gaps_now, clocks, power_now, want, gpu_w, left_s, dt_s, age_s)
        self.phase_level, edge = self.probes.hold(want, level, band, dt_s)
        if edge:
            work.reset()
            self.probes.probe_again(
                work.probe_pair(int(round(self.phase_level)), self.probes.capped_top)
            )
        return self._pick(self.phase_level)

    def _close_phase(self, work: PhaseFit) -> None:
        """The load changed: fold the phase's curves into the mission's and start anew."""
        band = self.curves.trusted(*self.probes.probed())
        self.history.close(work.curves(), band)
        work.reset()
        self.probes.restart()

    def budget_state(self) -> BudgetState:
        return self.budget.state()

    def memory_hints(self) -> MemoryHints:
        """The load's memory share as read from power, and whether the plan reads the idle
        run under way as a wait (mem_knob.py)."""
        return MemoryHints(memory_share=self.share.k, waiting=self.plan.bursts.waiting())

    def records(self) -> Tuple[Any, ...]:
        return (self.budget.state(), Correction(self.tracker.r))
