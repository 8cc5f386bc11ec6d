"""The mission's energy budget: what there was, what is left, when it ran out, the plan.

One part for every policy that spends a budget (the battery policy, a throughput battery
floor): :class:`MissionBudget` holds the budget and its reserve, reads the meter (or the
battery) each period, keeps the accounting and the moment the budget ran out, and the
busy-power plan (:class:`.battery_parts.plan.MissionPlan`) that spreads what is left over
the time left. What it knows is one frozen :class:`BudgetState`, which the controllers'
``status()``, :mod:`governor.runtime.unmet`, the daemon and the ROS 2 node read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional, Tuple

from governor.errors import InvalidRequestError
from governor.runtime.battery_parts.plan import MissionPlan
from governor.runtime.controller_base import Observation

__all__ = ["BudgetState", "MissionBudget", "budget_and_reserve"]


@dataclass(frozen=True)
class BudgetState:
    """The budget as it stands (the field names are ``status()``'s keys).

    ``target_power_w``: the mean power the plan affords from now (None before the first plan
    or when unbounded); ``busy_power_target_w``: the same while the GPU computes;
    ``duty_cycle``: the busy share so far (None before any period); ``exhausted_at_s``: when
    the budget ran out, seconds into the mission (None while it lasts);
    ``battery_read_error``: why the last battery reading failed (None when it did not)."""

    budget_j: float
    scope: str
    remaining_j: float
    target_s: float
    target_power_w: Optional[float]
    busy_power_target_w: Optional[float]
    duty_cycle: Optional[float]
    exhausted_at_s: Optional[float]
    battery_read_error: Optional[str]


class MissionBudget:
    """The budget of one mission on ``scope`` (``"board"`` or ``"gpu"``), lasting
    ``target_s``: ``budget_j`` less the energy metered on the scope, or the battery's own
    reading (``reader``) when it says less; ``reserve_j`` is kept back by the plan.

    Each period: :meth:`observe` (the duty cycle, the idle power, the rest of the board),
    then :meth:`account` (what is left, the run-out moment, the plan for the period ahead).
    """

    def __init__(
        self,
        budget_j: float,
        reserve_j: float,
        target_s: float,
        scope: str,
        reader: Optional[Callable[[], float]] = None,
    ) -> None:
        self.budget_j = budget_j
        self.scope = scope
        self.board_scope = scope == "board"
        self.target_s = target_s
        self.reader = reader
        self.plan = MissionPlan(target_s, reserve_j)
        self.remaining_j: float = budget_j
        self.exhausted_at_s: Optional[float] = None
        self.read_error: Optional[str] = None
        self.target_w: Optional[float] = None  # the plan's mean power from now
        self.busy_target_w: Optional[float] = None  # the plan's busy power from now

    def start(self) -> float:
        """The first plan, before any period; its busy power target."""
        self.target_w, self.busy_target_w = self.plan.plan(self.budget_j, 0.0)
        return self.busy_target_w

    def scoped_w(self, obs: Observation) -> Optional[float]:
        """The period's mean power on the budget's scope."""
        return obs.board_power_w if self.board_scope else obs.power_w

    def observe(self, obs: Observation) -> bool:
        """Count the period into the plan (busy or idle, the idle power) and, on the board
        scope, the rest of the board while busy; whether the period was steady (in the same
        state as the one before)."""
        steady = self.plan.observe(obs.busy, obs.dt_s, self.scoped_w(obs))
        if (
            steady
            and obs.busy is not False
            and obs.power_w is not None
            and self.board_scope
            and obs.board_power_w is not None
        ):
            self.plan.learn_rest(obs.board_power_w - obs.power_w)
        return steady

    def account(self, obs: Observation) -> float:
        """What is left after ``obs`` and the plan for the period ahead; when the budget ran
        out during the period, the time it did (at the period's mean power on its scope)."""
        remaining = self._remaining_j(obs)
        if remaining <= 0 and self.exhausted_at_s is None:
            spent_j = self.remaining_j - remaining  # during this period
            late_s = obs.dt_s * min(1.0, -remaining / spent_j) if spent_j > 0 else 0.0
            self.exhausted_at_s = obs.elapsed_s - late_s
        self.remaining_j = remaining
        self.target_w, self.busy_target_w = self.plan.plan(remaining, obs.elapsed_s)
        return remaining

    def close(self, obs: Observation) -> None:
        """The last period, which ends with the run: what is left and the run-out moment."""
        self.account(obs)

    def _remaining_j(self, obs: Observation) -> float:
        """The budget less the energy used on its scope; the battery's own reading when it
        says less (a failed read keeps the metered figure and is reported)."""
        used = obs.board_energy_used_j if self.board_scope else obs.energy_used_j
        remaining = self.budget_j - (used if used is not None else obs.energy_used_j)
        if self.reader is not None:
            try:
                remaining = min(float(self.reader()), remaining)
                self.read_error = None
            except Exception as err:  # a user callable or a battery file: keep metering
                self.read_error = f"{type(err).__name__}: {err}"
        return remaining

    def gpu_target_w(self) -> float:
        """The GPU's share of the plan's busy power (the rest of the board taken off on the
        board scope); the plan must have been made (:meth:`start`)."""
        busy_w = self.busy_target_w if self.busy_target_w is not None else 0.0
        return self.plan.gpu_target(busy_w, self.board_scope)

    def state(self) -> BudgetState:
        plan = self.plan
        total = plan.busy_s + plan.idle_s
        return BudgetState(
            budget_j=self.budget_j,
            scope=self.scope,
            remaining_j=self.remaining_j,
            target_s=self.target_s,
            target_power_w=_finite(self.target_w),
            busy_power_target_w=_finite(self.busy_target_w),
            duty_cycle=plan.busy_s / total if total > 0 else None,
            exhausted_at_s=self.exhausted_at_s,
            battery_read_error=self.read_error,
        )


def budget_and_reserve(
    budget_j: Optional[float], reserve: Optional[float], reader: Optional[Callable[[], float]]
) -> Tuple[float, float]:
    """(the budget in J, the reserve in J): ``budget_j``, else the battery's reading; the
    reserve a share (``reserve``) of the battery's full capacity where it says (of the
    budget else), 1 % by default when a battery is read.

    Raises:
        InvalidRequestError: neither a budget nor a battery to read.
    """
    budget = budget_j
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
    share = reserve if reserve is not None else (0.01 if reader else 0.0)
    return budget, share * (capacity if capacity else budget)


def _finite(value: Optional[float]) -> Optional[float]:
    return value if value is not None and math.isfinite(value) else None
