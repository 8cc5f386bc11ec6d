"""A clock's mean power at the rate: predicted by the model, and measured by a window.

:meth:`Pricing.predicted_w` prices a clock with the model and the idle power learnt between
frames; :meth:`Pricing.rate_cost` turns a measured window's mean power into the clock's cost
at the long-run work per frame (the search compares clocks by it).
"""

from __future__ import annotations

from typing import Optional

from governor.runtime.model import ClockModel
from governor.runtime.throughput_parts.frames import FrameStats, IdlePower
from governor.runtime.throughput_parts.tables import cost_w

__all__ = ["Pricing"]


class Pricing:
    """Prices of the clocks of ``model`` at ``rate_hz``, from what ``frames`` and ``idle``
    have learnt so far."""

    MIN_FRAMES = 30  # frames in the long mean before a window's busy share is corrected
    MIN_BUSY = 0.05  # a window busy outside MIN_BUSY..MAX_BUSY is taken as measured
    MAX_BUSY = 0.95

    def __init__(
        self, model: ClockModel, rate_hz: float, frames: FrameStats, idle: IdlePower
    ) -> None:
        self.model = model
        self.rate_hz = rate_hz
        self.frames = frames
        self.idle = idle

    def predicted_w(self, i: int) -> float:
        """The model's mean power for clock index ``i`` at the rate (idle power measured
        where it is known)."""
        model = self.model
        frames = self.frames
        per_unit = frames.unit_mean if frames.units_seen else 0.0
        idle_w = self.idle.idle_w
        idle = idle_w if idle_w is not None else model.idle_w
        return cost_w(self.rate_hz * per_unit * model.time_rel[i], model.power_w[i], idle)

    def rate_cost(
        self,
        i: int,
        mean_w: float,
        busy: float,
        slope_w: Optional[float] = None,
        time_rel: Optional[float] = None,
    ) -> float:
        """The mean power clock index ``i`` costs at the long-run work per frame, from a
        window's measured mean power ``mean_w`` and busy share ``busy``.

        The frames' jitter moves the window's busy share by more than neighbouring clocks
        differ, so the window's power is moved along its rise with the busy share,
        ``slope_w`` (``P_busy − P_idle``), to the long mean's share. ``slope_w`` is the
        window's own fit of its periods (:meth:`MeasureWindow.slope_w`) where there is one,
        else ``(mean_w − P_idle)/busy`` with the learnt idle power, which carries the
        board's warming. ``time_rel`` is the mean relative time per unit of the clocks the
        window ran at (a duel's floor window goes on when the floor rises under it), ``i``'s
        by default: the long-run share is the one those clocks would have."""
        idle = self.idle.idle_w
        frames = self.frames
        if not (self.MIN_BUSY <= busy <= self.MAX_BUSY) or frames.units_seen < self.MIN_FRAMES:
            return mean_w
        if slope_w is None:
            if idle is None:
                return mean_w
            slope_w = (mean_w - idle) / busy
        if time_rel is None:
            time_rel = self.model.time_rel[i]
        share = self.rate_hz * frames.unit_mean * time_rel
        if share >= 1.0:  # busy all of the time: its busy power
            return mean_w + slope_w * (1.0 - busy)
        return mean_w + slope_w * (share - busy)
