"""The mix of loads the rest of the mission is forecast to run (with the app's ticks).

The rest of the mission mixes the loads as it has so far: the phase now by the time it has
run, each past one by its own (before a second load is seen, the prior stands for the loads
not seen yet). Once a phase has ended the phases' length is known: the phase now lasts the
rest of a typical phase, another load then runs a typical phase, and only the time after
that mixes the loads as so far (so a last phase is forecast to end the mission). Whether the
phases go on changing at that length is not known from a few, so the phase now may instead
run on to the end, at odds of one in the number of phases seen. A phase that has outlived
the typical length is forecast to run as long again as it has.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

from governor.runtime.battery_parts.history import PastPhase, PhaseHistory

__all__ = ["MixLoad", "forecast_mix"]


@dataclass
class MixLoad:
    """One load of the forecast mix: its weight in seconds, its gaps below the cap negated,
    its power at every table clock (None: the phase now, drawn by its fitted line) and the
    table indices its level is kept within (None: the whole table)."""

    secs: float
    neg: List[float]
    power_w: Optional[List[float]]
    band: Optional[Tuple[int, int]]


def forecast_mix(
    history: PhaseHistory, phase_neg: List[float], inv_b: float, busy_left_s: float
) -> Optional[List[MixLoad]]:
    """The phase now (gaps ``phase_neg``, power slope ``1/inv_b``) and the past phases that
    the busy time left, ``busy_left_s``, is forecast to mix; None when the phase now is all
    it holds (forecast to end the mission, or no other load can be weighed)."""
    others = _others(history.past, inv_b)
    others_s = 0.0
    for load in others:
        others_s += load.secs
    age = max(history.age_s, 1e-9)
    now_w, others_scale = age, 1.0
    if history.closed_n and others_s > 0 and busy_left_s > 0:
        now_w, others_scale = _weights(age, others_s, history, busy_left_s)
    if others_scale <= 0.0 or not others:
        return None
    mix = [MixLoad(now_w, phase_neg, None, None)]
    mix += [MixLoad(o.secs * others_scale, o.neg, o.power_w, o.band) for o in others]
    return mix


def _others(past: List[PastPhase], inv_b: float) -> List[MixLoad]:
    """The past phases that can be weighed (concave), at their own seconds: the prior alone
    until a phase has ended, then the measured ones. The prior draws as the load measured
    now (the calibrated model's shape can be off: L4's measured slope is 1.45 times its
    model's): its gaps against the model's power divided by the phase's slope ``b``."""
    out = []
    for phase in past if len(past) == 1 else past[1:]:
        neg = phase.neg_gaps
        if neg is None:
            continue
        if phase.power_w is None:
            neg = [g * inv_b for g in neg]
        out.append(MixLoad(phase.busy_s, neg, phase.power_w, phase.band))
    return out


def _weights(
    age: float, others_s: float, history: PhaseHistory, left: float
) -> Tuple[float, float]:
    """(the phase now's weight in seconds, the factor on the others' seconds) once a phase
    has ended: the phase now's rest, another load's typical phase, then the tail mixed as
    so far."""
    typical = history.typical_s()
    if age <= typical:
        runs_on = 1.0 / (history.closed_n + 1)
        now_s = min(typical - age + runs_on * (left - typical + age), left)
    else:
        now_s = min(age, left)
    next_s = min(typical, left - now_s)
    tail_s = left - now_s - next_s
    share = age / (age + others_s)
    now_w = max(now_s + tail_s * share, 1e-9)
    return now_w, (next_s + tail_s * (1.0 - share)) / others_s
