"""What a request asks that the board's model says at once it cannot do, or never needs to.

Said when the policy is set (not when it fails), from the clock model the governor already
has: its idle power and its power at the top clock (the GPU figure), plus the rest of the
board read once at the start where a budget is metered on the board's input. Without a
calibrated model (the generic shape knows no watts) the GPU's idle power counts as 0 (the rest
of the board alone is a floor) and its top draw is the device's highest power limit where it
has one, else the board's rated power from the catalog (a Jetson module's rating: an upper
bound of the whole board, said as an estimate); what cannot be told is not said.

- an energy budget whose mean over the mission is below what the board draws idle: it cannot
  last, whatever the clock (unmet);
- an energy budget above what the board spends at its top clock for the whole mission: the
  rest is left over (a note, not unmet);
- a power cap above what the board draws at its top clock: it never binds (a note).

These only read the policy and the model; they never change a decision.
"""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence

from governor.runtime.model import ClockModel
from governor.runtime.policies import Policy

__all__ = ["Finding", "clock_unit_slip", "request_findings"]


class Finding(NamedTuple):
    key: str  # one finding per key per policy
    text: str
    unmet: bool  # the request cannot be met (else: a note)


class _Top(NamedTuple):
    """What the board draws, as far as it can be told before it runs."""

    top_w: Optional[float]  # at its top clock (None: not known)
    gpu_idle_w: float  # the GPU figure idle (0 when not known)
    about: str  # how the idle figure is said ("about ", "at least ")
    top_text: str  # how the top figure is said (a format of top_w)
    whole_board: bool  # the top draw bounds the whole board, not the GPU figure alone


def _top(model: ClockModel, limit_max_w: Optional[float], rated_w: Optional[float]) -> _Top:
    if model.fitted:
        top_w = max(model.power_w) if model.power_w else None
        return _Top(top_w, model.idle_w, "about ", "about {:.3g} W", False)
    if limit_max_w is not None:
        return _Top(limit_max_w, 0.0, "at least ", "at most {:.3g} W", False)
    text = "at most {:.3g} W, its rated power: an estimate, the board is not calibrated"
    return _Top(rated_w, 0.0, "at least ", text, True)


def request_findings(
    policy: Policy,
    model: ClockModel,
    board: str,
    rest_w: Optional[float] = None,
    limit_max_w: Optional[float] = None,
    rated_w: Optional[float] = None,
) -> List[Finding]:
    """What to say of ``policy`` on ``board`` before it runs. ``rest_w`` is the rest of the
    board (board input − GPU figure, W) read at the start, for budgets metered on the board
    (None: not known, the GPU figure alone is compared); ``limit_max_w`` the device's highest
    power limit (None: it has none), the top draw when the model is not calibrated;
    ``rated_w`` the board's rated power (the catalog's), the top draw of the whole board when
    the model is not calibrated and the device has no power limit."""
    out: List[Finding] = []
    top = _top(model, limit_max_w, rated_w)
    cap = policy.cap_limit
    if cap is not None and top.top_w is not None and cap[0] > top.top_w:
        out.append(
            Finding(
                "cap-above-top",
                f"the power cap {cap[0]:g} W is above what {board} draws at its top clock "
                f"({top.top_text.format(top.top_w)}): it never binds, the policy runs uncapped",
                False,
            )
        )
    return out + _budget_findings(policy, model, top, rest_w)


def _budget_findings(
    policy: Policy, model: ClockModel, top: _Top, rest_w: Optional[float]
) -> List[Finding]:
    """An energy budget below what the board draws idle over the mission, or above what it
    can spend at its top clock."""
    out: List[Finding] = []
    budget_j, mission_s = policy.budget_j, policy.target_s
    if budget_j is None or not mission_s or mission_s <= 0:
        return out
    on_board = (policy.budget_scope or "board") == "board"
    extra_w = rest_w if on_board and rest_w is not None else 0.0
    where = "the board" if on_board and rest_w is not None else "its GPU"
    target_w = budget_j / mission_s
    idle_w = top.gpu_idle_w + extra_w
    budget = f"the energy budget of {budget_j:.4g} J ({budget_j / 3600.0:.3g} Wh)"
    mission = f"the {mission_s:.4g} s mission"
    if target_w < idle_w and idle_w > 0:
        out.append(
            Finding(
                "budget-below-idle",
                f"{budget} over {mission} is {target_w:.3g} W on average, below what "
                f"{where} draws idle ({top.about}{idle_w:.3g} W): it cannot last the "
                f"mission at any clock; it runs out about {budget_j / idle_w:.4g} s in, or "
                "sooner under load",
                True,
            )
        )
        return out
    if top.top_w is None:
        return out
    most_j = (top.top_w + (0.0 if top.whole_board else extra_w)) * mission_s
    if budget_j > most_j:
        how = "about" if model.fitted else "at most"
        rated = f" ({top.top_text.format(top.top_w)})" if top.whole_board else ""
        out.append(
            Finding(
                "budget-above-top",
                f"{budget} is more than {mission} can spend: "
                f"{'the board' if top.whole_board else where} at its top clock uses "
                f"{how} {most_j:.4g} J ({most_j / 3600.0:.3g} Wh){rated}; the rest is left over",
                False,
            )
        )
    return out


def clock_unit_slip(
    clock_mhz: float, clocks_mhz: Sequence[float], board: str, what: str = "clock_mhz"
) -> Optional[str]:
    """Why ``clock_mhz`` is off ``board``'s range by an order of magnitude or more (a unit
    slip: 1.3 for 1.3 GHz), naming the unit it probably was; None when it is not (a clock
    merely outside the range is clamped, with a note). ``what`` names the option or key in the
    message. The CLI (``run``, ``apply``, ``simulate``: exit 2) and the :class:`Governor`
    (InvalidRequestError) refuse it with this one text."""
    if not clocks_mhz:
        return None
    lo, hi = min(clocks_mhz), max(clocks_mhz)
    if lo / 10.0 <= clock_mhz <= hi * 10.0:
        return None
    span = f"{board}'s clocks: {lo:g}-{hi:g} MHz"
    for unit, factor in (("GHz", 1000.0), ("kHz", 0.001), ("Hz", 1e-6)):
        if lo * 0.5 <= clock_mhz * factor <= hi * 2.0:
            return (
                f"{what} {clock_mhz:g} MHz: did you mean {unit}? {what} takes MHz "
                f"({clock_mhz * factor:g} MHz; {span})"
            )
    return (
        f"{what} {clock_mhz:g} MHz is off the board's range by orders of magnitude ({span}); "
        f"{what} takes MHz"
    )
