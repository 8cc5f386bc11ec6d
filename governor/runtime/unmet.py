"""Requests the device cannot meet, each said once.

A governor that cannot do what it was asked still governs (the nearest it can), and says so:

- a fixed clock outside the board's range is clamped to its end, one between two supported
  clocks is snapped to the nearer: said as soon as the policy is set;
- an energy budget whose mean over its mission is below the board's idle power: said as soon
  as the policy is set (:mod:`governor.runtime.feasibility`, which also notes, without
  counting them unmet, a cap above the board's top draw and a budget the mission cannot
  spend);
- a power cap below what the board draws at its lowest clock: said once the lowest clock has
  been measured above the cap for the cap's window (at most three control periods);
- an energy budget (the battery policy, a throughput battery floor) that ran out before the
  mission's end: said when it did, with the time into the mission.

:class:`UnmetWatch` only reads (the policy, the model, the observations, the controller's
``status()``); it never changes a decision. What it says goes through the governor's note
(``status()["notes"]``, the log, ``governor run``'s stderr and report) and stays in
:attr:`UnmetWatch.unmet` (``status()["unmet"]``, the ROS 2 node's diagnostics).
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional

from governor.runtime.controller_base import Controller, Observation
from governor.runtime.feasibility import request_findings
from governor.runtime.model import ClockModel
from governor.runtime.policies import Policy

__all__ = ["UnmetWatch", "clock_note"]

#: within this of a supported clock, a requested clock is that clock (as Device snaps)
CLOCK_TOLERANCE_MHZ = 0.5


def clock_note(requested_mhz: float, clocks_mhz: Any, board: str) -> Optional[str]:
    """What becomes of a requested GPU clock on a board whose supported clocks are
    ``clocks_mhz`` (ascending): clamped to the top or the lowest, or snapped to the nearest;
    None when it is one of them."""
    clocks = list(clocks_mhz)
    lo, hi = clocks[0], clocks[-1]
    if requested_mhz > hi + CLOCK_TOLERANCE_MHZ:
        return f"clock {requested_mhz:g} MHz is above {board}'s top clock: clamped to {hi:g} MHz"
    if requested_mhz < lo - CLOCK_TOLERANCE_MHZ:
        return f"clock {requested_mhz:g} MHz is below {board}'s lowest clock: clamped to {lo:g} MHz"
    nearest = min(clocks, key=lambda c: abs(c - requested_mhz))
    if abs(nearest - requested_mhz) > CLOCK_TOLERANCE_MHZ:
        return (
            f"clock {requested_mhz:g} MHz is not one {board} supports: "
            f"snapped to the nearest, {nearest:g} MHz"
        )
    return None


class UnmetWatch:
    """Says, once each, what of the policy the device cannot meet (see the module docstring).

    ``say`` records a note (the governor's); ``board`` names the device in the notes.
    """

    def __init__(self, board: str, say: Callable[[str], None]) -> None:
        self.board = board
        self._say = say
        #: the notes said for the policy in force (all of them since the governor was made)
        self.unmet: List[str] = []
        self._policy: Optional[Policy] = None
        self._model: Optional[ClockModel] = None
        self._said: set = set()  # what was said under the policy in force
        self._over_s = 0.0  # time at the lowest clock above the cap, and its energy
        self._over_j = 0.0

    def new_policy(
        self,
        policy: Policy,
        model: ClockModel,
        rest_w: Optional[float] = None,
        limit_max_w: Optional[float] = None,
        rated_w: Optional[float] = None,
    ) -> None:
        """Watch ``policy`` from now on; what it asks that cannot be met at all, or never
        needs to be (:mod:`.feasibility`), is said now. ``rest_w``: the rest of the board
        (W) read at the start, for a budget metered on the board; ``limit_max_w``: the device's
        highest power limit (W), the top draw an uncalibrated model cannot tell; ``rated_w``:
        the board's rated power (W), the estimate where the device has no power limit."""
        self._policy, self._model = policy, model
        self._said = set()
        self._over_s = self._over_j = 0.0
        if policy.requested_clock_mhz is not None:
            text = clock_note(policy.requested_clock_mhz, model.clocks_mhz, self.board)
            if text is not None:
                self._tell("clock", text)
        for finding in request_findings(policy, model, self.board, rest_w, limit_max_w, rated_w):
            if finding.unmet:
                self._tell(finding.key, finding.text)
            elif finding.key not in self._said:
                self._said.add(finding.key)
                self._say(finding.text)

    def observe(self, obs: Optional[Observation], controller: Controller) -> None:
        """After a control period: a cap that the lowest clock exceeds, a budget run out."""
        policy = self._policy
        if obs is None or policy is None:
            return
        if policy.cap_limit is not None:
            self._watch_cap(*policy.cap_limit, obs)
        self._watch_budget(controller)

    def _tell(self, key: str, text: str) -> None:
        if key in self._said:
            return
        self._said.add(key)
        self.unmet.append(text)
        self._say(text)

    def _watch_cap(self, cap_w: float, window_s: float, obs: Observation) -> None:
        if "cap" in self._said or self._model is None:
            return
        lowest = self._model.clocks_mhz[0]
        if obs.power_w is None or obs.applied_mhz != lowest or obs.power_w <= cap_w:
            self._over_s = self._over_j = 0.0
            return
        self._over_s += obs.dt_s
        self._over_j += obs.dt_s * obs.power_w
        if self._over_s < min(window_s, 3.0 * obs.dt_s) - 1e-9:
            return
        mean_w = self._over_j / self._over_s if self._over_s > 0 else obs.power_w
        self._tell(
            "cap",
            f"the power cap {cap_w:g} W is below what {self.board} draws at its lowest "
            f"clock ({lowest:g} MHz: {mean_w:.3g} W measured): it cannot be met; the lowest "
            "clock is held",
        )

    def _watch_budget(self, controller: Controller) -> None:
        if "budget" in self._said:
            return
        budget = controller.budget_state()
        if budget is None or budget.exhausted_at_s is None:
            return
        what = f"the energy budget of {budget.budget_j:.4g} J ({budget.budget_j / 3600.0:.3g} Wh)"
        mission = f" of the {budget.target_s:.4g} s mission"
        where = ", metered on the board" if budget.scope == "board" else ""
        self._tell(
            "budget",
            f"{what} ran out {budget.exhausted_at_s:.3g} s into the mission{where}: it cannot "
            f"last the rest{mission}",
        )
