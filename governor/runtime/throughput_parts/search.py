"""The local search on measured power among the clocks that keep the rate (energy counter).

The model's pick is where it starts; windows of measured power (:class:`MeasureWindow`,
priced at the long-run work per frame by :meth:`Pricing.rate_cost`) say which neighbour is
cheaper. A neighbour is measured between two windows of the held clock (a
:class:`Bracket`, the board's warming cancelled); one within the noise is ranked by the
model where the model's ratio is within that noise of the measured one too, else bracketed
again; at a local minimum next to a measured neighbour the step halves down to the table's.
A pick more than two search steps above the deadline's floor is first measured against the
floor (:class:`Duel`); when it is not clearly cheaper the floor is held wherever it moves
(:attr:`LocalSearch.at_floor`). A local minimum is held while its measured cost stays within
``DRIFT`` of what it was.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from governor.runtime.controller_base import Observation
from governor.runtime.model import ClockModel
from governor.runtime.throughput_parts.brackets import Bracket, PairBook, noise_band, verdict
from governor.runtime.throughput_parts.duel import Duel, Measured
from governor.runtime.throughput_parts.pricing import Pricing
from governor.runtime.throughput_parts.window import MeasureWindow, YoungWindow

__all__ = ["LocalSearch"]


class LocalSearch:
    """The search's state: the clock index it holds or measures (:attr:`target`), the
    costs measured lately (index -> :class:`Measured`), the bracket and duel in progress,
    and the local minimum it settled on (:attr:`settled_cost`)."""

    SETTLE_S = 0.3  # after a change, then measure
    MEASURE_S = 2.0  # a window's measured time
    DUEL_S = 0.5  # a window of the duel between the model's far pick and the floor
    STALE_S = 20.0  # a neighbour's measured cost is trusted this long
    PROBE_WITHIN = 0.01  # a neighbour the model prices more than this dearer is not probed
    RESEED_S = 1.0  # the model's pick this long away from the search's start: start there
    NOISE = 0.003  # a window measured cheaper by less is not taken to be cheaper
    DRIFT = 0.02  # a settled clock's measured cost moved this much: search again
    FIT_PERIODS = 10  # a window's periods needed to fit its power's rise with busy share

    def __init__(self, model: ClockModel, pricing: Pricing) -> None:
        self.model = model
        self.pricing = pricing
        self.started = False
        self.target = 0
        self.seed_idx = 0  # the model's pick the search started from
        self.away_s = 0.0  # how long the model's pick has been away from it
        self.costs: Dict[int, Measured] = {}
        self.step = max(1, int(round(0.02 * len(model.clocks_mhz))))
        self.span = self.step  # the neighbours' distance now: halved at a minimum
        self.window = MeasureWindow()
        self.settled_cost: Optional[float] = None  # the local minimum's measured cost
        self.duel: Optional[Duel] = None
        self.at_floor = False  # holding the deadline's floor, wherever it moves
        self.bracket: Optional[Bracket] = None
        self.pairs = PairBook(self.STALE_S)
        self.young: Optional[YoungWindow] = None  # the young frames' window

    @property
    def measuring(self) -> bool:
        """Whether the search is still measuring (neither settled nor holding the floor)."""
        return self.settled_cost is None and not self.at_floor

    def meter_young(self, obs: Observation, busy_s: float) -> None:
        """Meter the young frames' clock (they follow the model's pick): past ``SETTLE_S``
        at one clock, the energy, time and busy time there (:attr:`young`)."""
        if obs.power_w is None or obs.dt_s <= 0:
            return
        young = self.young
        if young is None or young.clock_mhz != obs.applied_mhz:
            young = self.young = YoungWindow(obs.applied_mhz)
        young.add(obs.power_w, obs.dt_s, busy_s, self.SETTLE_S)

    def decide(
        self, obs: Observation, seed: int, floor: int, busy_s: float, current_mhz: float
    ) -> Tuple[float, bool]:
        """The clock for the next period and whether it is urgent, from the model's pick
        ``seed`` (an index), the deadline's floor ``floor`` and the period's busy seconds."""
        clocks = self.model.clocks_mhz
        self._reseed(seed, obs, floor)
        if self.at_floor and self.target != floor:  # the floor moved: so does the clock
            self.target, self.bracket = floor, None
            self.window.reset()
        if self.target < floor:  # the deadline, not the search, decides: up at once
            return self._raise_to_floor(floor), True
        if obs.power_w is not None and obs.applied_mhz == clocks[self.target]:
            cost = self._measure(obs, busy_s)
            if cost is not None:
                return self._after_window(cost, obs.t_s, seed, floor, current_mhz)
        target = clocks[self.target]
        return target, target > current_mhz

    def _reseed(self, seed: int, obs: Observation, floor: int) -> None:
        """Start at the model's pick, or again there when it moved away and stayed (its idle
        power and work per frame are still being learnt), unless the clock held now was
        measured cheaper than that pick lately."""
        now = obs.t_s
        away = abs(seed - self.seed_idx) > 2 * self.step
        self.away_s = self.away_s + obs.dt_s if away else 0.0
        if not self.started:
            self.costs.clear()
            self.start(seed, now, floor)
        elif self.away_s >= self.RESEED_S:
            there, here = self.costs.get(seed), self.costs.get(self.target)
            if (
                there is None
                or here is None
                or now - there.when_s > self.STALE_S
                or now - here.when_s > self.STALE_S
                or here.cost_w > there.cost_w
            ):
                self.start(seed, now, floor)
            else:
                self.seed_idx, self.away_s = seed, 0.0

    def _raise_to_floor(self, floor: int) -> float:
        """The floor rose above the target: the floor at once. A duel's window at the floor
        goes on at the floor risen (the first seconds' frames raise it a step or two as
        their slowest one grows), rather than starting again, settle and all, at each rise;
        the pick's window in a duel stands."""
        duel = self.duel
        in_duel_floor = duel is not None and self.target != duel.pick
        self.target, self.bracket = floor, None
        if not in_duel_floor:
            self.window.reset()
        pick_cost = self.costs.get(duel.pick) if duel is not None else None
        self.costs.clear()
        self.settled_cost = None
        if duel is not None and duel.pick <= floor + 2 * self.step:
            self.duel = None  # the floor rose to the pick: nothing to measure against
        elif duel is not None and pick_cost is not None:
            self.costs[duel.pick] = pick_cost  # the floor's is measured again
        return self.model.clocks_mhz[floor]

    def _measure(self, obs: Observation, busy_s: float) -> Optional[float]:
        """One period at the target into the window; the window's cost at the rate when
        it is complete (the window then starts again), else None."""
        window = self.window
        assert obs.power_w is not None  # the caller measures only with a power
        time_rel = self.model.time_rel[self.target]
        window.add(obs.power_w, obs.dt_s, busy_s, time_rel, self.SETTLE_S)
        if window.measured_s < (self.MEASURE_S if self.duel is None else self.DUEL_S):
            return None
        cost = self.pricing.rate_cost(
            self.target,
            window.energy_j / window.measured_s,
            window.busy_s / window.measured_s,
            window.slope_w(self.FIT_PERIODS),
            window.rel_s / window.measured_s,
        )
        window.reset()
        return cost

    def _after_window(
        self, cost: float, now: float, seed: int, floor: int, current_mhz: float
    ) -> Tuple[float, bool]:
        """After a complete window at the target: go on with the bracket or the duel in
        progress, stay at a settled minimum whose cost held, settle at the floor, or look
        at the neighbours. Returns the clock to hold next and whether it is urgent."""
        self.costs[self.target] = Measured(cost, now)
        if self.bracket is not None:
            moved = self._bracket(cost, now)
            if moved is not None:
                return moved, moved > current_mhz
        if self.duel is not None:
            self._duel(floor, cost)
        elif self._holds(cost, now, seed, floor):
            return self.model.clocks_mhz[self.target], False  # a steady load: no probing
        target = self.model.clocks_mhz[self.target]
        return target, target > current_mhz

    def _holds(self, cost: float, now: float, seed: int, floor: int) -> bool:
        """After a window (its cost ``cost``) outside a bracket and a duel: True when a
        settled minimum's cost held within ``DRIFT`` (stay); else settle at the floor (or
        start again from the model's pick ``seed``), or look at the neighbours."""
        settled = self.settled_cost
        if settled is not None and abs(cost - settled) <= self.DRIFT * settled:
            return True
        if self.at_floor:  # the first window at the floor, or its cost moved
            pick = self.costs.get(seed)
            if settled is None or (pick is not None and now - pick.when_s <= self.STALE_S):
                # a warming board moves the cost too: the pick measured dearer lately is not
                # measured again for it
                self.settled_cost = cost
            else:
                self.start(seed, now, floor)
            return False
        self.settled_cost = None  # not settled yet, or the load changed: search
        self._neighbours(cost, now, floor)
        return False

    def _bracketed(self, near: List[int], now: float) -> Tuple[Dict[int, float], Dict[int, int]]:
        """The neighbours in ``near`` compared with the target lately by brackets (a window
        measured apart is off by the warming in between): their mean cost over the target's,
        and how many brackets each mean holds."""
        rel: Dict[int, float] = {}
        counts: Dict[int, int] = {}
        for i in near:
            pair = self.pairs.recent(i, self.target, now)
            if pair is not None:
                rel[i], counts[i] = pair.ratio, pair.brackets
        return rel, counts

    def _verdicts(
        self, rel: Dict[int, float], counts: Dict[int, int], here_w: float
    ) -> Dict[int, int]:
        """Each bracketed neighbour's :func:`verdict`; one not told apart yet is ranked by
        the model (with the measured idle power) where the model's ratio is within the
        brackets' noise of their mean too (else the model is off here, and the neighbour is
        bracketed again)."""
        verdicts = {i: verdict(rel[i], counts[i]) for i in rel}
        for i in rel:
            if verdicts[i] == 0:
                model_ratio = self.pricing.predicted_w(i) / here_w
                band = noise_band(counts[i])
                if abs(model_ratio - rel[i]) <= band and model_ratio != 1.0:
                    verdicts[i] = 1 if model_ratio > 1.0 else -1
        return verdicts

    def _neighbours(self, cost: float, now: float, floor: int) -> None:
        """After a window at the target (its cost ``cost``), not in a bracket or a duel:
        descend to a neighbour measured cheaper, probe one not measured yet (the window just
        taken is the bracket's first at home), halve the step at a local minimum next to a
        measured neighbour and go on with the nearer neighbours at once, bracket again a
        neighbour not told apart yet, or hold a local minimum (:attr:`settled_cost`). A side
        the model prices clearly dearer (``PROBE_WITHIN``) is not probed: a probe there
        costs more than the model's error it could find."""
        top = len(self.model.clocks_mhz) - 1
        predicted_w = self.pricing.predicted_w
        while True:
            step = self.span
            near = [i for i in (self.target - step, self.target + step) if floor <= i <= top]
            rel, counts = self._bracketed(near, now)
            here = predicted_w(self.target)
            unknown = [
                i
                for i in near
                if i not in rel and predicted_w(i) <= here * (1.0 + self.PROBE_WITHIN)
            ]
            verdicts = self._verdicts(rel, counts, here)
            cheaper = [i for i in rel if verdicts[i] < 0]
            alike = [i for i in rel if verdicts[i] == 0]
            if cheaper:  # descend
                self.target = min(cheaper, key=lambda i: rel[i])
            elif unknown:  # look on the side not seen yet, then back (_bracket)
                probe = min(unknown, key=predicted_w)  # the likelier first
                self.bracket = Bracket(self.target, cost, probe)
                self.target = probe
            elif self.span > 1 and rel:
                # a local minimum next to a measured neighbour: the cheapest clock may lie
                # between (bisection), its neighbours looked at now
                self.span //= 2
                continue
            elif alike:  # measured again, the one read cheaper first
                probe = min(alike, key=lambda i: rel[i])
                self.bracket = Bracket(self.target, cost, probe)
                self.target = probe
            else:  # a local minimum: stay while its cost holds
                self.settled_cost = cost
            return

    def _bracket(self, cost: float, now: float) -> Optional[float]:
        """After a window (its cost ``cost``) of a probe from the bracket's home or of
        home's window after it: the clock to hold next, or None when the search decides as
        usual from the costs. A probe measured clearly cheaper than home's window before it
        is taken at once (a warming board works against it); else home is measured again and
        its cost is the mean of its windows either side of the probe."""
        bracket = self.bracket
        assert bracket is not None
        if self.target != bracket.home:  # the probe's window
            if cost < bracket.home_w * (1.0 - self.NOISE):
                # cheaper than home's window before it, warming against it: decided
                self.bracket = None
                self.pairs.add(bracket.home, self.target, bracket.home_w / cost, now)
                return None
            bracket.probe_w = cost
            bracket.probe = self.target
            self.target = bracket.home
            self.costs[bracket.probe] = Measured(cost, now)
            return self.model.clocks_mhz[bracket.home]
        self.bracket = None
        home_w = 0.5 * (bracket.home_w + cost)
        self.costs[bracket.home] = Measured(home_w, now)
        self.pairs.add(bracket.probe, bracket.home, bracket.probe_w / home_w, now)
        return None

    def _duel(self, floor: int, cost: float) -> None:
        """After a duel's window (its cost ``cost``): :meth:`Duel.after_window`'s step."""
        duel = self.duel
        assert duel is not None
        step = duel.after_window(self.target, floor, cost, self.costs, self.NOISE)
        self.target = step.target
        if step.over:
            self.duel = None
        if step.hold_floor:
            self.at_floor = True
            self.settled_cost = cost

    def start(self, seed: int, now: float, floor: int) -> None:
        """Start the search at clock index ``seed`` (the model's pick); when that pick is
        more than two search steps above the deadline's floor ``floor``, it is first
        measured against the floor (:class:`Duel`), the young frames' window at the pick, if
        they ran there, being the duel's first (measured on at the pick when shorter than
        ``DUEL_S``)."""
        self.started = True
        self.target, self.seed_idx, self.away_s = seed, seed, 0.0
        self.window.reset()
        self.settled_cost = None
        self.span = self.step
        self.duel = Duel(seed) if seed > floor + 2 * self.step else None
        self.bracket = None
        self.at_floor = seed <= floor
        if self.duel is not None:
            self.target = floor
            young = self.young
            if young is not None and young.clock_mhz == self.model.clocks_mhz[seed]:
                if young.seconds >= self.DUEL_S:
                    cost = self.pricing.rate_cost(
                        seed, young.energy_j / young.seconds, young.busy_s / young.seconds
                    )
                    self.duel.pick_w = cost
                    self.costs[seed] = Measured(cost, now)
                else:  # too short yet: it goes on there, then the floor's (see Duel)
                    self.target = seed
                    self.window.resume(young, self.model.time_rel[seed])
        self.young = None
