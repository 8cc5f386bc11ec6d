"""What a request asks that the board's model says at once it cannot do, or never needs to.

Said when the policy is set (not when it fails), from the clock model the governor already
has: its idle power and its power at the top clock (the GPU figure), plus the rest of the
board read once at the start where a budget is metered on the board's input. Without a
calibrated model (the generic shape knows no watts) the GPU's idle power counts as 0 (the rest
of the board alone is a floor) and its top draw is the device's highest power limit where it
has one; what cannot be told is not said.

- an energy budget whose mean over the mission is below what the board draws idle: it cannot
  last, whatever the clock (unmet);
- an energy budget above what the board spends at its top clock for the whole mission: the
  rest is left over (a note, not unmet);
- a power cap above what the board draws at its top clock: it never binds (a note).

These only read the policy and the model; they never change a decision.
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional

from governor.runtime.model import ClockModel
from governor.runtime.policies import Policy

__all__ = ["Finding", "request_findings"]


class Finding(NamedTuple):
    key: str  # one finding per key per policy
    text: str
    unmet: bool  # the request cannot be met (else: a note)


def request_findings(
    policy: Policy,
    model: ClockModel,
    board: str,
    rest_w: Optional[float] = None,
    limit_max_w: Optional[float] = None,
) -> List[Finding]:
    """What to say of ``policy`` on ``board`` before it runs. ``rest_w`` is the rest of the
    board (board input − GPU figure, W) read at the start, for budgets metered on the board
    (None: not known, the GPU figure alone is compared); ``limit_max_w`` the device's highest
    power limit (None: it has none), the top draw when the model is not calibrated."""
    out: List[Finding] = []
    if model.fitted:
        top_w: Optional[float] = max(model.power_w) if model.power_w else None
        gpu_idle_w, about = model.idle_w, "about "
    else:
        top_w, gpu_idle_w, about = limit_max_w, 0.0, "at least "
    cap = policy.cap_limit
    if cap is not None and top_w is not None and cap[0] > top_w:
        out.append(
            Finding(
                "cap-above-top",
                f"the power cap {cap[0]:g} W is above what {board} draws at its top clock "
                f"({'about' if model.fitted else 'at most'} {top_w:.3g} W): it never binds, the policy runs uncapped",
                False,
            )
        )
    budget_j, mission_s = policy.budget_j, policy.target_s
    if budget_j is None or not mission_s or mission_s <= 0:
        return out
    on_board = (policy.budget_scope or "board") == "board"
    extra_w = rest_w if on_board and rest_w is not None else 0.0
    where = "the board" if on_board and rest_w is not None else "its GPU"
    target_w = budget_j / mission_s
    idle_w = gpu_idle_w + extra_w
    budget = f"the energy budget of {budget_j:.4g} J ({budget_j / 3600.0:.3g} Wh)"
    mission = f"the {mission_s:.4g} s mission"
    if target_w < idle_w and idle_w > 0:
        out.append(
            Finding(
                "budget-below-idle",
                f"{budget} over {mission} is {target_w:.3g} W on average, below what "
                f"{where} draws idle ({about}{idle_w:.3g} W): it cannot last the "
                f"mission at any clock; it runs out about {budget_j / idle_w:.4g} s in, or "
                "sooner under load",
                True,
            )
        )
    elif top_w is not None and budget_j > (top_w + extra_w) * mission_s:
        most_j = (top_w + extra_w) * mission_s
        out.append(
            Finding(
                "budget-above-top",
                f"{budget} is more than {mission} can spend: {where} at its top clock uses "
                f"{'about' if model.fitted else 'at most'} {most_j:.4g} J "
                f"({most_j / 3600.0:.3g} Wh); the rest is left over",
                False,
            )
        )
    return out
