"""The battery policy's controller: make a budget last the mission doing the most work.

Each period the busy-power plan is recomputed from what is left (see
:class:`BatteryController`); with the app's ticks the load's work and power against the
clock are measured (:mod:`governor.runtime.workrate`) and the clock follows the Lagrange
condition over a forecast of the rest of the mission. Split out of ``controllers.py``;
``governor.runtime.controllers.BatteryController`` still names it.
"""

from __future__ import annotations

import bisect
import math
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from governor.errors import InvalidRequestError
from governor.runtime.controller_base import Controller, PowerTracker
from governor.runtime.model import ClockModel
from governor.runtime.policies import Battery
from governor.runtime.workrate import PhaseFit

__all__ = ["BatteryController"]


class BatteryController(Controller):
    """Make the budget last the mission doing the most work: a busy-power target planned from
    what is left, the time left and the load's duty cycle as it unfolds.

    The budget is metered on the policy's scope: the board input (``scope="board"``, the
    rail a robot's battery feeds) or the GPU figure. Each period the plan is::

        usable  = remaining − reserve
        P_busy  = (usable − P_idle · idle_left) / busy_left

    with ``busy_left = d · time_left`` for the share ``d`` of time the GPU has computed so far
    (idle periods are measured, not assumed), and ``P_idle`` the measured idle power. Spending
    slack only while the GPU computes is what buys work: a plan that assumed the rest of the
    mission busy under-spends on bursty loads. The busy target is met like a cap (per-clock
    corrected model, error diffusion between neighbouring clocks); on the board scope the
    rest of the board (measured board − GPU figure) is taken off the target first, so the
    GPU model is corrected on the GPU figure and the budget is held on the board. Below the
    PPW clock a joule buys less work, but the mission must last, so the plan may go there.
    """

    PRIOR_BUSY_S = 5.0  # a new mission counts as busy until idle periods are seen
    PRIOR_RATIO_S = 100.0
    SHARE_GAIN = 0.3  # per busy period, of the gap to the latest memory-share estimate
    SHARE_SAME = 0.02  # memory shares this close to the mission's mean are the same load
    OVER_TOP_POWER = 8.0  # how fast the threshold falls once the plan exceeds the top clock

    def __init__(
        self, model: ClockModel, policy: Battery, reader: Optional[Callable[[], float]] = None
    ) -> None:
        super().__init__(model)
        self.policy = policy
        self.reader = reader
        # the policy is frozen: its mission length and scope, read once (each period's plan
        # asks for them)
        self.target_s = policy.target_s
        self.board_scope = policy.scope == "board"
        budget = policy.budget_j
        capacity: Optional[float] = None
        if reader is not None:
            full = getattr(reader, "capacity_j", None)
            capacity = float(full()) if callable(full) else None
            if budget is None:
                budget = float(reader())
        if budget is None:
            raise InvalidRequestError(
                "the battery policy needs battery_wh (Wh) or energy_j (J) when no battery is read"
            )
        self.budget_j = budget
        self.tracker = PowerTracker(model, dither=True)
        self.target_w: Optional[float] = None
        self.busy_target_w: Optional[float] = None
        self.remaining_j: float = budget
        self.exhausted_at_s: Optional[float] = None
        self.read_error: Optional[str] = None
        self.busy_s = 0.0
        self.idle_s = 0.0
        self.idle_w: Optional[float] = None  # on the budget's scope
        self.rest_w: Optional[float] = None  # board − GPU figure while busy (board scope)
        share = policy.reserve if policy.reserve is not None else (0.01 if reader else 0.0)
        self.reserve_j = share * (capacity if capacity else budget)
        # busy GPU energy measured, and what the model predicted for it; a calibrated model
        # starts with PRIOR_RATIO_S seconds of its own load (ratio 1), so a mission that
        # opens on a light phase does not spend as if the whole mission were light
        prior = self.PRIOR_RATIO_S * model.power_at(model.ppw_clock_mhz) if model.fitted else 0.0
        self.measured_j = prior
        self.model_j = prior
        self.prior_j = prior  # (the phase rule of a capped model leaves it out)
        self.level: Optional[float] = None  # the planned clock, a fractional table index
        # the load's memory-bound share, from its power (see _phase_level): the phase now
        # (smoothed over a few periods) and the mission's busy-time mean (with a prior of
        # PRIOR_RATIO_S seconds of the calibration load, share 0)
        self.mem_k: Optional[float] = None
        self.mem_gain = 1.0
        self.mission_k_s = 0.0
        self.mission_gain_s = self.PRIOR_RATIO_S if model.fitted else 0.0
        self.mission_busy_s = self.PRIOR_RATIO_S if model.fitted else 0.0
        self.phase_level: Optional[float] = None
        self.carry = 0.0
        self.was_busy: Optional[bool] = None
        # with the app's ticks, the load's work and power against the clock are measured
        # (see workrate.py) instead of inferred from power: the phase now, and the busy-time
        # sums of the past phases' curves (work units/s, W) at every table clock
        self.work = PhaseFit(model) if model.fitted else None
        self.ticked = False
        self.run = "lo"  # the run of the period under way: "lo", "hi" (probes) or "run"
        self.probe_pair: Optional[Tuple[int, int]] = None
        # [busy s, work units/s, power W (None: the model's, scaled), the gaps over the
        # clocks below the cap, negated, when concave (else None; see _past_gaps), the
        # table indices its fit is trusted within (None: the prior)] per past phase: its
        # curves do not change, so its gaps are computed once, not per step
        self.past: List[List[Any]] = []
        self.phases = 0
        self.phase_age_s = 0.0
        self.closed_busy_s = 0.0  # busy seconds of the phases that ended, and how many
        self.closed_n = 0
        self.busy_left_s = 0.0  # the plan's busy time left
        # bursts and gaps: the state now and for how long, the lengths of the bursts seen
        # (sorted; burst_tail_s[k] sums those from k on) and the gaps' total
        self.run_busy: Optional[bool] = None
        self.run_started = False
        self.run_s = 0.0
        self.burst_lengths_s: List[float] = []
        self.burst_tail_s: List[float] = [0.0]
        self.gaps_s = 0.0
        self.gaps_n = 0
        # the last clock below the model's power cap (the table's top when uncapped)
        model_w = model.power_w
        capped = [i for i in range(len(model_w)) if model_w[i] >= model_w[-1] * (1 - 1e-9)]
        self.capped_top = max(capped[0] - 1, 0) if capped[0] < len(model_w) - 1 else capped[0]
        self.edge_s = 0.0
        self.dt_s = 0.0  # the period just ended
        self.prior_s_per_unit: Optional[float] = None
        self.last_lam: Optional[float] = None  # the mix's multiplier the last solve
        self.want: Optional[float] = None  # the phase's level at it (None: no fit then)
        self.solve_in = 0  # periods until the next solve
        self._inv_dp: Optional[List[float]] = None  # 1 / the model's power steps below the cap
        # per clock table (they do not change in a mission): below the cap, the relative
        # times and the model's dynamic power (P_model − P_idle); the bands a probe pair's
        # fit is trusted within
        end = self.capped_top + 1
        self._rel_end = model.time_rel[:end]
        self._dyn_end = [p - model.idle_w for p in model.power_w[:end]]
        self._bands: Dict[Tuple[int, int], Tuple[int, int]] = {}
        self._bends: List[int] = []  # gap indices where the phase's curve bent lately

    def _plan(self, remaining_j: float, elapsed_s: float) -> Tuple[float, float]:
        """(mean power target, busy power target) on the budget's scope, for the period
        ahead: ``elapsed_s`` is now (the end of the period just measured), and the time
        left counts from it. (Counted from the end of the period ahead, the plan spent the
        budget one period early and paid the mission's last period on top.)"""
        left_s = self.target_s - elapsed_s
        usable = max(0.0, remaining_j - self.reserve_j)
        if left_s <= 0:
            return (math.inf, math.inf) if usable > 0 else (0.0, 0.0)
        mean_w = usable / left_s
        duty = (self.busy_s + self.PRIOR_BUSY_S) / (self.busy_s + self.idle_s + self.PRIOR_BUSY_S)
        idle_w = self.idle_w if self.idle_w is not None else 0.0
        busy_left = self._busy_left_s(left_s, duty)
        self.busy_left_s = busy_left
        busy_w = (usable - idle_w * (left_s - busy_left)) / busy_left
        return mean_w, max(busy_w, 0.0)

    MIN_BURSTS = 8  # bursts (and gaps) seen before their lengths shape the plan's busy time

    def _busy_left_s(self, left_s: float, duty: float) -> float:
        """Busy seconds expected in the ``left_s`` left: the duty cycle's share, except that
        a burst under way is expected to run on for its residual life (the mean excess of
        the bursts seen that lasted longer than its age), then a mean gap: so a mission
        whose last burst ends before a gap spends the budget in that burst instead of
        keeping it for the gap. With no gaps (a steady load) or too few bursts seen, the
        duty cycle's share."""
        share = duty * left_s
        lengths = self.burst_lengths_s
        if not (self.run_busy and len(lengths) >= self.MIN_BURSTS and self.gaps_n):
            return share
        age = self.run_s
        k = bisect.bisect_right(lengths, age)
        longer = len(lengths) - k
        residual = (self.burst_tail_s[k] - age * longer) / longer if longer else 0.0
        now_s = min(residual, left_s)
        gap_s = self.gaps_s / self.gaps_n
        return max(now_s + duty * max(0.0, left_s - now_s - gap_s), 1e-3)

    def _note_run(self, busy: Optional[bool], dt_s: float) -> None:
        """Keep the lengths of the bursts and gaps that began and ended in the mission."""
        if busy is None:
            return
        if busy != self.run_busy:
            if self.run_started:
                if self.run_busy:
                    bisect.insort(self.burst_lengths_s, self.run_s)
                    if len(self.burst_lengths_s) > self.MAX_BURSTS:  # keep a bounded sample
                        self.burst_lengths_s.pop(len(self.burst_lengths_s) // 2)
                    tail = [0.0]  # sums of the longest j lengths, read from the end
                    for x in reversed(self.burst_lengths_s):
                        tail.append(tail[-1] + x)
                    self.burst_tail_s = tail[::-1]
                elif self.run_busy is False:
                    self.gaps_s += self.run_s
                    self.gaps_n += 1
            self.run_started = self.run_busy is not None
            self.run_busy, self.run_s = busy, 0.0
        self.run_s += dt_s

    MAX_BURSTS = 512

    def _gpu_target(self, busy_w: float) -> float:
        if self.board_scope:
            return busy_w - (self.rest_w or 0.0)
        return busy_w

    def _ratio(self) -> float:
        """Measured over modelled GPU power while busy, over the whole mission so far: the
        load's mean, not the latest phase's (the plan is for the rest of the mission)."""
        if self.model_j > 0:
            return self.measured_j / self.model_j
        return self.tracker.scale

    def _level(self, gpu_w: float, ratio: Optional[float] = None) -> float:
        """Fractional index into the clock table whose corrected power is ``gpu_w``
        (``ratio``: :meth:`_ratio`, when the caller has it)."""
        want = gpu_w / max(self._ratio() if ratio is None else ratio, 1e-9)
        return _fractional_index(self.model.power_w, want)

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

    def initial_mhz(self) -> float:
        self.target_w, self.busy_target_w = self._plan(self.budget_j, 0.0)
        if not self.model.fitted:
            return self.model.clocks_mhz[0]
        return self.tracker.clock_for(self._gpu_target(self.busy_target_w), carry=False)

    def decide(self, obs, ticks, current_mhz):
        board = self.board_scope
        scoped_w = obs.board_power_w if board else obs.power_w
        steady = obs.busy == self.was_busy  # a period that straddles a change mixes both
        self.was_busy = obs.busy
        self._note_run(obs.busy, obs.dt_s)
        if obs.busy is False:
            self.idle_s += obs.dt_s
            if scoped_w is not None and steady:
                self.idle_w = (
                    scoped_w
                    if self.idle_w is None
                    else self.idle_w + 0.2 * (scoped_w - self.idle_w)
                )
        else:
            self.busy_s += obs.dt_s
            if obs.power_w is not None and steady:
                self.tracker.learn(obs.power_w, obs.applied_mhz)
                self.measured_j += obs.power_w * obs.dt_s
                i = self.model.index(obs.applied_mhz)
                self.model_j += self.model.power_w[i] * obs.dt_s
                self._learn_share(obs.power_w, i, obs.dt_s)
                if ticks:
                    self.ticked = True
                if self.ticked and self.work is not None:
                    units = sum([t.units for t in ticks])
                    self.work.add(self.run, obs.applied_mhz, obs.dt_s, units, obs.power_w)
                    self.phase_age_s += obs.dt_s
                if board and obs.board_power_w is not None:
                    rest = obs.board_power_w - obs.power_w
                    self.rest_w = (
                        rest if self.rest_w is None else self.rest_w + 0.2 * (rest - self.rest_w)
                    )
        used = obs.board_energy_used_j if board else obs.energy_used_j
        remaining = self.budget_j - (used if used is not None else obs.energy_used_j)
        if self.reader is not None:
            try:
                remaining = min(float(self.reader()), remaining)
                self.read_error = None
            except Exception as err:  # a user callable or a battery file: keep metering
                self.read_error = f"{type(err).__name__}: {err}"
        self.remaining_j = remaining
        if remaining <= 0 and self.exhausted_at_s is None:
            self.exhausted_at_s = obs.elapsed_s
        self.target_w, self.busy_target_w = self._plan(remaining, obs.elapsed_s)
        if obs.busy is False:  # idle: keep the clock the next burst starts at
            return current_mhz, False
        gpu_w = self._gpu_target(self.busy_target_w)
        ratio = self._ratio()
        self.level = self._level(gpu_w, ratio)
        top_w = ratio * self.model.power_w[-1]
        over_top = gpu_w / top_w if top_w > 0 else 1.0
        if self.ticked and self.work is not None:
            self.dt_s = obs.dt_s
            clock = self._by_ticks(self.level, gpu_w)
            if clock is not None:
                return clock, False
        self.phase_level = self._phase_level(self.level, gpu_w, over_top)
        return self._pick(self.phase_level), False

    def safe_mhz(self, current_mhz: float) -> float:
        level = self.phase_level if self.phase_level is not None else self.level
        if level is None:
            return self.model.clocks_mhz[0]
        return self.model.clocks_mhz[int(math.floor(level))]

    # -- spending where it buys work -----------------------------------------------------
    PROBE_S = 6.0  # longest probe run (busy seconds) at each of the two clocks
    # periods per solve of the phase's fit and the mix's multiplier (the slow outer loop):
    # between solves the level found last is held within the trusted band of the plan now
    SOLVE_EVERY = 3
    TRUST = 1.2  # how far past the probed clocks (in relative time) a phase's fit is used
    EDGE_S = 15.0  # busy seconds held at the edge of that range before probing there

    def _by_ticks(self, level: float, gpu_w: float) -> Optional[float]:
        """The clock for the phase now from its measured work and power curves (the app
        ticks): the Lagrange condition over the mission's mix of loads (see
        :meth:`_mix_lambda`). A new phase is first probed: one run at each of two clocks
        about 20 % apart around the plan (a few seconds each; the budget feedback absorbs
        the difference). None when the ticks are too sparse to fit: the power estimate
        decides then."""
        work = self.work
        assert work is not None
        if self.run == "run" and self.solve_in > 0:
            # between solves: the level the last solve found for the plan of its period,
            # kept within the trusted band (widened to the plan's level now, as below)
            self.solve_in -= 1
            if self.want is None:
                return None
            return self._hold(self.want, level)
        if work.changed():
            self._close_phase()
        if self.run in ("lo", "hi"):
            secs, units = work.units_in(self.run)
            if units >= work.PROBE_UNITS and secs >= work.MIN_S or secs >= self.PROBE_S:
                self.run = "hi" if self.run == "lo" else "run"
        if self.run != "run":
            if self.probe_pair is None:
                at = self.phase_level if self.phase_level is not None else level
                self.probe_pair = work.probe_pair(int(round(at)), self.capped_top)
            return self.model.clocks_mhz[self.probe_pair[self.run == "hi"]]
        self.solve_in = self.SOLVE_EVERY - 1
        self.want = None
        fit = work.fit()
        if fit is None:
            return None
        A, B = fit[0], fit[1]
        rel = self.model.time_rel
        if self.prior_s_per_unit is None:  # the first phase measured sets the prior's scale
            at = int(round(level))
            self.prior_s_per_unit = (A * rel[at] + B) / rel[at]
            # the prior: PRIOR_RATIO_S seconds of a compute-bound load (its work scaled to
            # the first phase's at the plan), as the power estimate's has
            prior_work = [1.0 / (self.prior_s_per_unit * r) for r in rel]
            # its gaps against the model's power: drawing as the load measured now (power
            # a + b·(P_model − P_idle)) divides them by b, which keeps them concave or not
            self.past.insert(
                0,
                [
                    self.PRIOR_RATIO_S,
                    prior_work,
                    None,
                    self._past_gaps(prior_work, self.model.power_w),
                    None,
                ],
            )
        # a model capped at the power limit (T4, L4, RTX A4000) draws the same power at its
        # top clocks: the firmware throttles them, so the table ends below the first one
        end = self.capped_top + 1
        if end < 3:  # too few clocks below the cap to weigh one load against another
            return None
        curves = self._phase_curves(fit, end)
        if curves is None:
            return None
        phase_neg, line, inv_b = curves
        # the rest of the mission mixes the loads as it has so far: the phase now by the
        # time it has run, each past one by its own (before a second load is seen, the
        # calibration load stands for the ones not seen yet, PRIOR_RATIO_S seconds)
        age = max(self.phase_age_s, 1e-9)
        others: List[
            Tuple[float, List[float], Optional[List[float]], Optional[Tuple[int, int]]]
        ] = []
        others_s = 0.0
        past = self.past
        for secs, _work, pp, neg, band in past if len(past) == 1 else past[1:]:
            if neg is None:
                continue
            if pp is None:  # the prior draws as the load measured now (the calibrated
                # model's shape can be off: L4's measured slope is 1.45 times its model's):
                # its gaps against the model's power divided by the phase's slope b
                neg = [g * inv_b for g in neg]
            others.append((secs, neg, pp, band))
            others_s += secs
        now_w, others_scale = age, 1.0
        left = self.busy_left_s
        if self.closed_n and others_s > 0 and left > 0:
            # once a phase has ended the phases' length is known: the phase now lasts its
            # rest of a typical phase, then another load runs a typical phase, and only the
            # time after that mixes the loads as so far (so a last phase is forecast to end
            # the mission). Whether the phases go on changing at that length is not known
            # from a few: the phase now may run on to the end instead, at odds of one in
            # the number of phases seen (its rest is the two lengths weighed by those odds).
            # Forecast to give way at the typical length for certain, a compute phase after
            # one memory phase spent for a memory phase that never came (memory-compute,
            # Titan X: 1128 MHz, then 663 once it had outlived the memory phase). A phase
            # that has outlived the typical length is forecast to run as long again as it
            # has.
            typical = self.closed_busy_s / self.closed_n
            if age <= typical:
                runs_on = 1.0 / (self.closed_n + 1)
                now_s = min(typical - age + runs_on * (left - typical + age), left)
            else:
                now_s = min(age, left)
            next_s = min(typical, left - now_s)
            tail_s = left - now_s - next_s
            share = age / (age + others_s)
            now_w = max(now_s + tail_s * share, 1e-9)
            others_scale = (next_s + tail_s * (1.0 - share)) / others_s
        mix = [(now_w, phase_neg, None, None)]
        mix += [(secs * others_scale, neg, pp, band) for secs, neg, pp, band in others]
        if others_scale <= 0.0 or not others:
            # the phase now is all the forecast holds (it is forecast to end the mission, or
            # no other load can be weighed): its level is where its own power line draws the
            # plan (by the multiplier, a compute-bound load on a table of equal power steps,
            # whose gaps are flat but for rounding, landed anywhere on the flat: H100 PCIe
            # 1275 MHz where the plan was 990)
            want = self.want = self._own_level(line, gpu_w)
            return self._hold(want, level)
        lam = self.last_lam = self._mix_lambda(mix, gpu_w, line)
        want = self.want = _level_neg(phase_neg, lam)
        return self._hold(want, level)

    def _own_level(self, line: Tuple[float, float], gpu_w: float) -> float:
        """The fractional level below the cap where the phase's power line ``(a, b)``
        (``a + b·(P_model − P_idle)``) draws ``gpu_w``; the table's ends beyond it."""
        a, b = line
        dyn = self._dyn_end
        return _fractional_index(dyn, (gpu_w - a) / b if b > 0 else dyn[-1])

    def _hold(self, want: float, level: float) -> float:
        """The clock for the phase's level ``want`` (the mix's answer), the plan's ``level``
        this period."""
        work = self.work
        assert work is not None
        end = self.capped_top + 1
        # the fitted lines are local (a memory-bound load turns compute-bound at low
        # clocks): the level stays within TRUST of the probed clocks' relative times, and
        # a phase that keeps pressing on that edge is probed again around it
        floor_i, ceil_i = self._trusted(*(self.probe_pair or (0, end - 1)))
        # (never past the plan's own level: the budget's feedback is followed as it is)
        level_now = min(max(want, min(float(floor_i), level)), max(float(ceil_i), level))
        if level_now != want:
            self.edge_s += self.dt_s
            if self.edge_s >= self.EDGE_S:  # measure again around the edge
                work.reset()
                self.run = "lo"
                self.probe_pair = work.probe_pair(int(round(level_now)), self.capped_top)
                self.edge_s = 0.0
        else:
            self.edge_s = 0.0
        self.phase_level = level_now
        return self._pick(level_now)

    BENDS = 4  # recent bends of the phase's curve checked first ...
    BEND_TABLE = 24  # ... on tables of more clocks below the cap than this

    def _phase_curves(
        self, fit: Tuple[float, float, float, float], end: int
    ) -> Optional[Tuple[List[float], Tuple[float, float], float]]:
        """For the phase's fit ``(A, B, a, b)``: its gaps over the clocks below the cap,
        negated (rising, for bisect), its power line ``(a, b)`` (power ``a + b·(P_model −
        P_idle)``, evaluated where the mix needs it) and ``1/b``; None when its work per
        joule is not concave. Work is ``1/(A·t_rel + B)``, so each gap is a work step over
        ``b`` times the model's power step (kept per table). (Reusing them while the fit
        moves by under 0.1 % was tried: the fit moves more than that every period, whole
        units landing in dithered periods.)"""
        A, B, a, b = fit
        inv_b = 1.0 / b
        if self._inv_dp is None:
            model_w = self.model.power_w
            steps = [p1 - p0 for p0, p1 in zip(model_w[:end], model_w[1:end])]
            self._inv_dp = [1.0 / d for d in steps] if min(steps) > 1e-12 else []
        inv_dp = self._inv_dp
        rel = self._rel_end
        if inv_dp and end > self.BEND_TABLE:
            # where the curve was not concave lately (on a table whose power steps are
            # equal, as the A100's below 1 GHz, the gaps of a compute-bound load are equal
            # but for rounding, and bend somewhere every period): a bend there again settles
            # it from three clocks' work instead of the whole table's (on a short table the
            # whole check costs less than three clocks' work per bend: it is not taken)
            for j in self._bends:
                w0, w1 = 1.0 / (A * rel[j] + B), 1.0 / (A * rel[j + 1] + B)
                x = -((w0 - w1) * inv_dp[j] * inv_b)
                if not (0.0 < x < math.inf):
                    return None
                if j:
                    wp = 1.0 / (A * rel[j - 1] + B)
                    prev = -((wp - w0) * inv_dp[j - 1] * inv_b)
                    if x > prev * (1.0 + 1e-9):
                        return None
        work = [1.0 / (A * r + B) for r in rel]
        if inv_dp:
            # (w0 − w1)·k/b is the gap (w1 − w0)·k/b negated, bit for bit
            neg = [(w0 - w1) * k * inv_b for w0, w1, k in zip(work, work[1:], inv_dp)]
        else:  # a flat step in the model's power: the general rule
            line = [a + b * d for d in self._dyn_end]
            neg = [-g for g in self._gaps(work, line)]
        # concave (see _concave) on the gaps negated: -y positive, finite, not rising;
        # written on y itself (-y > -q exactly when y < q: negation is exact)
        neg_inf = -math.inf
        least = neg_inf  # the last y times 1 + 1e-9: the next may not lie below it
        for j, y in enumerate(neg):
            if not (neg_inf < y < 0.0) or y < least:
                if inv_dp:
                    bends = self._bends
                    if j in bends:
                        bends.remove(j)
                    bends.insert(0, j)
                    del bends[self.BENDS :]
                return None
            least = y * (1.0 + 1e-9)
        return neg, (a, b), inv_b

    def _trusted(self, lo: int, hi: int) -> Tuple[int, int]:
        """The table indices a phase probed at ``lo`` and ``hi`` is fitted well enough
        for: within TRUST (relative time) of the probed clocks, below the cap."""
        band = self._bands.get((lo, hi))
        if band is not None:
            return band
        rel = self.model.time_rel
        end = self.capped_top + 1
        floor_i, ceil_i = lo, min(hi, end - 1)
        while floor_i > 0 and rel[floor_i - 1] <= rel[lo] * self.TRUST:
            floor_i -= 1
        while ceil_i < end - 1 and rel[ceil_i + 1] * self.TRUST >= rel[hi]:
            ceil_i += 1
        self._bands[(lo, hi)] = (floor_i, ceil_i)
        return floor_i, ceil_i

    NEWTON_STEPS = 4  # from the last multiplier, before the bracketed search

    def _mix_lambda(
        self,
        mix: Sequence[Tuple[float, List[float], Optional[List[float]], Optional[Tuple[int, int]]]],
        gpu_w: float,
        line: Tuple[float, float],
    ) -> float:
        """The marginal work per joule at which the mission's mix of loads, each at the
        clock where its own marginal rate falls to it (the Lagrange condition), draws
        ``gpu_w`` on average: the future taken to mix the loads as the mission so far has.
        ``mix``: (seconds, gaps negated, power at every clock or None for the phase now's
        fitted line ``line`` = ``(a, b)``, power ``a + b·(P_model − P_idle)`` at the clocks
        below the cap, the table indices the load's level is kept within or None)."""
        a, b = line
        dyn = self._dyn_end
        n_dyn = len(dyn)
        rows = []
        total = 0.0  # (the seconds' sum, in the mix's order)
        for secs, neg, power, band in mix:
            total += secs
            n = len(power) if power is not None else n_dyn
            lo_x, hi_x = (float(band[0]), float(band[1])) if band else (0.0, float(n))
            rows.append((secs, neg, power, n - 2, lo_x, hi_x, len(neg)))
        bisect_left = bisect.bisect_left

        def excess(lam: float) -> Tuple[float, float]:
            """The mix's mean power at ``lam`` over ``gpu_w`` (falls as ``lam`` rises), and
            its slope there (the mean power is linear in ``lam`` between breakpoints)."""
            out = slope = 0.0
            for secs, neg, power, last, lo_x, hi_x, n in rows:
                # the load's level at lam (_level_neg, written out), and its rate in lam
                k = bisect_left(neg, -lam)  # the gaps above lam: the first k
                dx = 0.0
                if k == 0:
                    x = 0.0
                elif k >= n:
                    x = float(n)
                else:
                    g0, g1 = -neg[k - 1], -neg[k]
                    if g0 > g1:
                        x = k - 0.5 + (g0 - lam) / (g0 - g1)
                        dx = -1.0 / (g0 - g1)
                    else:
                        x = k - 0.5
                # a past phase's fit is local too: its forecast level stays in its band
                if lo_x > x:
                    x, dx = lo_x, 0.0
                if hi_x < x:
                    x, dx = hi_x, 0.0
                i = int(x)
                if i > last:
                    i = last
                if power is None:  # the phase now's line
                    p0 = a + b * dyn[i]
                    step = a + b * dyn[i + 1] - p0
                else:
                    p0 = power[i]
                    step = power[i + 1] - p0
                out += secs * (p0 + (x - i) * step)
                slope += secs * step * dx
            return out / total - gpu_w, slope / total

        tol = 1e-9 * max(gpu_w, 1e-9)
        lo = hi = 0.0
        f_lo = f_hi = 0.0
        last = self.last_lam
        if last is not None:  # the multiplier moves little from one period to the next:
            # where the last one still draws gpu_w it is the answer; else a Newton step
            # from it lands on the root when the root lies on the same linear piece (a
            # step or two more when it crossed a breakpoint)
            x, slope = last, -1.0
            for _ in range(self.NEWTON_STEPS):
                fx, slope = excess(x)
                if abs(fx) <= tol:
                    return x
                if not slope < 0.0:
                    break
                x -= fx / slope
                if not x > 0.0:
                    break
            if slope < 0.0:  # else bracket it within 1 % of the last one (where the
                # mean power is flat in λ, no load's level moving with it there, the
                # search from the table's slopes below settles it)
                lo, hi = last / 1.01, last * 1.01
                f_lo, f_hi = excess(lo)[0], excess(hi)[0]
                if not (f_lo > 0.0 >= f_hi):
                    lo = hi = 0.0
        if hi <= 0.0:
            slopes = [-g for _, neg, _, _ in mix for g in (neg[0], neg[-1])]
            lo, hi = max(min(slopes), 1e-12) * 0.5, max(slopes) * 2.0
            f_lo, f_hi = excess(lo)[0], excess(hi)[0]
            if f_hi >= 0.0:
                return hi
            if f_lo <= 0.0:
                return lo
        # the mean power is piecewise linear in λ (levels interpolate between the gaps, power
        # between clocks): false position (Illinois) lands on the root once both ends share
        # a piece, in a few evaluations; bisection in log λ to 0.01 % bounds the rest
        side = 0
        for _ in range(60):
            if hi <= lo * 1.0001:
                break
            x = hi - f_hi * (hi - lo) / (f_hi - f_lo)
            if not lo < x < hi:
                x = math.sqrt(lo * hi)
            fx = excess(x)[0]
            if abs(fx) <= tol:
                return x
            if fx > 0.0:
                lo, f_lo = x, fx
                if side == -1:
                    f_hi *= 0.5
                side = -1
            else:
                hi, f_hi = x, fx
                if side == 1:
                    f_lo *= 0.5
                side = 1
        return math.sqrt(lo * hi)

    @staticmethod
    def _level_for(gaps: Sequence[float], lam: float) -> float:
        """The fractional level where falling gap slopes (gap ``i`` at ``i + 0.5``) pass
        ``lam``, interpolated; the table's ends beyond them."""
        n = len(gaps)
        if gaps[0] <= lam:
            return 0.0
        if gaps[-1] >= lam:
            return float(n)
        lo, hi = 0, n - 1  # gaps[lo] > lam >= gaps[hi]
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if gaps[mid] > lam:
                lo = mid
            else:
                hi = mid
        a, b = gaps[lo], gaps[hi]
        return lo + 0.5 + (a - lam) / (a - b) * (hi - lo) if a > b else lo + 0.5

    MAX_PHASES = 8  # past phases kept apart (with the prior); more merge

    def _merge_phases(self) -> None:
        """Merge the two measured past phases whose work per joule curves are closest."""
        rows = [r for r in self.past if r[2] is not None]
        best: Optional[Tuple[float, int, int]] = None
        for a in range(len(rows)):
            for b in range(a + 1, len(rows)):
                wa, wb = rows[a][1], rows[b][1]
                d = sum(abs(x / wa[-1] - y / wb[-1]) for x, y in zip(wa, wb))
                if best is None or d < best[0]:
                    best = (d, a, b)
        if best is None:
            return
        ra, rb = rows[best[1]], rows[best[2]]
        n = ra[0] + rb[0]
        ra[1] = [(ra[0] * x + rb[0] * y) / n for x, y in zip(ra[1], rb[1])]
        ra[2] = [(ra[0] * x + rb[0] * y) / n for x, y in zip(ra[2], rb[2])]
        ra[0] = n
        ra[3] = self._past_gaps(ra[1], ra[2])
        ra[4] = (min(ra[4][0], rb[4][0]), max(ra[4][1], rb[4][1]))
        self.past.remove(rb)

    def _past_gaps(self, work: List[float], power: List[float]) -> Optional[List[float]]:
        """A past phase's gaps over the clocks below the cap, negated (rising, for bisect),
        or None where not concave (it stays out of the mix)."""
        end = self.capped_top + 1
        gaps = self._gaps(work[:end], power[:end])
        return [-g for g in gaps] if self._concave(gaps) else None

    def _close_phase(self) -> None:
        """The load changed: fold the phase's curves into the mission's and start anew."""
        work = self.work
        assert work is not None
        curves = work.curves()
        if curves is not None:
            gaps = self._past_gaps(curves[0], curves[1])
            band = self._trusted(*(self.probe_pair or (0, self.capped_top)))
            self.past.append([self.phase_age_s, curves[0], curves[1], gaps, band])
            if len(self.past) > self.MAX_PHASES:  # the two most alike measured phases merge
                self._merge_phases()
        work.reset()
        self.probe_pair = None
        self.run = "lo"
        self.phases += 1
        self.closed_busy_s += self.phase_age_s
        self.closed_n += 1
        self.phase_age_s = 0.0
        self.edge_s = 0.0

    def _learn_share(self, power_w: float, i: int, dt_s: float) -> None:
        """The load's memory-bound share from its power at the clock that ran.

        In the power model the dynamic part is ``activity · a·f·V²``, and an SM that waits on
        memory draws less than one that computes: the measured dynamic power over the model's
        (made under a compute-bound calibration load) estimates the share of time the SMs
        compute, ``u``. With the time per unit split into a compute part that scales with the
        clock and a memory part that does not, ``t(f) = t_rel(f) + k``, that share says
        ``k = t_rel(f)·(1/u − 1)``. A load heavier than the calibration one (``u`` > 1) is
        taken as compute-bound with a power gain instead.
        """
        model = self.model
        if not model.fitted:
            return
        dyn = model.power_w[i] - model.idle_w
        if dyn <= 0.2 * model.power_w[i] or not math.isfinite(power_w):
            return  # too little dynamic power at this clock to tell the load's share
        r = min(3.0, max(0.05, (power_w - model.idle_w) / dyn))
        u, gain = (r, 1.0) if r <= 1.0 else (1.0, r)
        k = model.time_rel[i] * (1.0 / u - 1.0)
        if self.mem_k is None:
            self.mem_k, self.mem_gain = k, gain
        else:
            self.mem_k += self.SHARE_GAIN * (k - self.mem_k)
            self.mem_gain += self.SHARE_GAIN * (gain - self.mem_gain)
        self.mission_k_s += k * dt_s
        self.mission_gain_s += gain * dt_s
        self.mission_busy_s += dt_s

    def _slopes(self, k: float, gain: float) -> List[float]:
        """Marginal work per marginal joule between neighbouring clocks for a load of
        memory share ``k`` (work per second ``1/(t_rel + k)``, power ``P_idle + (P − P_idle)
        · gain · t_rel/(t_rel + k)``): one value per gap of the table, falling with the clock
        where the load's work per joule is concave."""
        model = self.model
        idle = model.idle_w
        work, power = [], []
        for p, rel in zip(model.power_w, model.time_rel):
            t = rel + k
            work.append(1.0 / t)
            power.append(idle + (p - idle) * gain * rel / t)
        return self._gaps(work, power)

    @staticmethod
    def _gaps(work: Sequence[float], power: Sequence[float]) -> List[float]:
        """Marginal work per marginal joule between neighbouring clocks of the table."""
        return [
            (w1 - w0) / (p1 - p0) if p1 - p0 > 1e-12 else (math.inf if w1 > w0 else 0.0)
            for w0, w1, p0, p1 in zip(work, work[1:], power, power[1:])
        ]

    @staticmethod
    def _concave(slopes: Sequence[float]) -> bool:
        """Whether work per joule has falling returns over the whole table."""
        prev = math.inf
        for x in slopes:  # one pass: positive, finite, falling
            if not (0.0 < x < math.inf) or x > prev * (1.0 + 1e-9):
                return False
            prev = x
        return True

    @staticmethod
    def _slope_at(slopes: Sequence[float], x: float) -> float:
        """The slope at fractional index ``x`` (gap ``i`` sits at ``i + 0.5``)."""
        if not slopes:
            return 0.0
        pos = min(max(x - 0.5, 0.0), len(slopes) - 1.0)
        i = int(math.floor(pos))
        if i >= len(slopes) - 1:
            return slopes[-1]
        frac = pos - i
        a, b = slopes[i], slopes[i + 1]
        if math.isinf(a) or math.isinf(b):
            return a if frac < 0.5 else b
        return a + frac * (b - a)

    def _phase_level(self, level: float, gpu_w: float, over_top: float = 1.0) -> float:
        """The clock for the load running now, given the plan's ``level`` for the mission's
        mean load: the same marginal work per joule (a Lagrange condition), so a phase that
        gains little from a higher clock (memory-bound) runs lower and leaves the joules for
        one that gains more; the budget feedback (the plan from what is left) keeps the sum.
        With one load all along the phase is the mean and the level is the plan's.
        ``over_top`` is the plan's power over the mean load's at the top clock: above 1 the
        mean load cannot spend it, and the threshold falls so the phase now can.

        Where there is no marginal rate to match (a model capped at its power limit: its
        top clocks draw the same), the phase's power still says which way to go: the GPU
        target ``gpu_w`` is scaled by the phase's measured/model power over the mission's
        (its measured periods only: with the prior's calibration load in it, a mission of
        one load drawing off the model was scaled too, L4's bursty 1.0002 -> 0.9995 held
        out), so a load drawing less per clock than the mission's mean (SMs stalled on
        memory, which gain less from the clock) runs lower, one drawing more runs higher,
        and the budget's feedback moves the joules between them. Mapping the plan through the
        mission's ratio alone ran the T4's memory phases above its compute phase (their
        power under the mean's leaves the budget under-spent, and the plan rises)."""
        if self.mem_k is None or self.mission_busy_s <= 0 or len(self.model.clocks_mhz) < 3:
            return level
        mean_k = self.mission_k_s / self.mission_busy_s
        mean_gain = self.mission_gain_s / self.mission_busy_s
        if abs(self.mem_k - mean_k) <= self.SHARE_SAME * (1.0 + mean_k):
            return level
        mean = self._slopes(mean_k, mean_gain)
        phase = self._slopes(self.mem_k, self.mem_gain)
        if not (self._concave(mean) and self._concave(phase)):
            # e.g. a model capped at its power limit: no marginal rate to match
            now = self.tracker.scale
            seen_j = self.model_j - self.prior_j  # the mission's own, without the prior
            mission = (self.measured_j - self.prior_j) / seen_j if seen_j > 0 else now
            return self._level(gpu_w * now / mission)
        lam = self._slope_at(mean, level)
        if over_top > 1.0:
            lam /= over_top**self.OVER_TOP_POWER
        return self._match(phase, lam)

    def _match(self, phase: Sequence[float], lam: float) -> float:
        """The fractional level where the phase's marginal work per joule falls to ``lam``."""
        top = float(len(self.model.clocks_mhz) - 1)
        # the first gap (from the bottom) whose slope falls below lam: the level sits there
        if self._slope_at(phase, 0.0) <= lam:
            return 0.0
        lo, hi = 0.0, top
        if self._slope_at(phase, top) >= lam:
            return top
        for _ in range(30):  # bisection on the interpolated slope
            mid = 0.5 * (lo + hi)
            if self._slope_at(phase, mid) > lam:
                lo = mid
            else:
                hi = mid
        return 0.5 * (lo + hi)

    def status(self) -> Dict[str, Any]:
        total = self.busy_s + self.idle_s
        return {
            "budget_j": self.budget_j,
            "scope": self.policy.scope,
            "remaining_j": self.remaining_j,
            "target_s": self.policy.target_s,
            "target_power_w": self.target_w
            if self.target_w is not None and math.isfinite(self.target_w)
            else None,
            "busy_power_target_w": self.busy_target_w
            if self.busy_target_w is not None and math.isfinite(self.busy_target_w)
            else None,
            "duty_cycle": self.busy_s / total if total > 0 else None,
            "exhausted_at_s": self.exhausted_at_s,
            "battery_read_error": self.read_error,
            "model_correction": self.tracker.r,
        }


def _fractional_index(rising: Sequence[float], value: float) -> float:
    """Where ``value`` falls in the rising table, interpolated between its two entries
    around it; the table's ends beyond it (the level of a power, a clock time-sharing two)."""
    top = len(rising) - 1
    i = bisect.bisect_right(rising, value) - 1
    if i < 0:
        return 0.0
    if i >= top:
        return float(top)
    lo, hi = rising[i], rising[i + 1]
    return i + ((value - lo) / (hi - lo) if hi > lo else 0.0)


def _level_neg(neg: Sequence[float], lam: float) -> float:
    """:meth:`BatteryController._level_for` on the gaps negated (rising): a C bisect."""
    n = len(neg)
    k = bisect.bisect_left(neg, -lam)  # the gaps above lam: the first k
    if k == 0:
        return 0.0
    if k >= n:
        return float(n)
    a, b = -neg[k - 1], -neg[k]
    return k - 0.5 + (a - lam) / (a - b) if a > b else k - 0.5
