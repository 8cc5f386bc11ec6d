"""Time-sharing the deadline's floor with the clock below it.

The floor keeps all but ``LATE_SHARE`` of the frames on time (:class:`FrameStats`); the
clock below misses more. Time-shared so that the mix's expected late share is ``SHARE``
(error diffusion over periods), it uses the late share a kept rate allows, which a constant
clock on a coarse table cannot.
"""

from __future__ import annotations

from typing import Optional, Tuple

from governor.runtime.model import ClockModel
from governor.runtime.throughput_parts.frames import LATE_ALLOWANCE, FrameStats
from governor.runtime.throughput_parts.pricing import Pricing

__all__ = ["Dither"]


class Dither:
    """Which periods run at the clock below the floor: :meth:`step` once a period."""

    SHARE = LATE_ALLOWANCE  # of the frames the dither with the clock below may let run late
    #: the late frames seen lately stop the dither at this share (the most a kept rate
    #: allows), not at ``SHARE``: the dither aims at ``SHARE``, so stopping there halted it
    #: about half the time, and where the floor's estimate had risen a step (one more slow
    #: frame among the last 600) the floor was then held, 15-20 % dearer on a coarse table
    STOP_SHARE = 0.01

    def __init__(
        self, model: ClockModel, rate_hz: float, frames: FrameStats, pricing: Pricing
    ) -> None:
        self.model = model
        self.rate_hz = rate_hz
        self.frames = frames
        self.pricing = pricing
        self.carry = 0.0  # error diffusion of the share of periods below
        self.dither_mhz: Optional[float] = None  # the clock below, while dithering

    def _late_share(self, i: int) -> float:
        """The share of the last frames that would run past their period at clock index
        ``i`` (their top-clock time per unit scaled by the time model)."""
        return self.frames.late_share(1.0 / (self.rate_hz * self.model.time_rel[i]))

    def shares(self, i: int, floor: int, allowed: bool) -> Optional[Tuple[float, float]]:
        """The late shares (at ``i``, at the clock below) when clock index ``i`` may be
        time-shared with the one below, else None. It may where ``allowed`` (no explicit
        margin, a search not measuring), ``i`` is the floor ``floor`` with a clock below,
        the frames' spread is learnt, the frames seen late lately are under ``STOP_SHARE``,
        the frames would not queue below, and the clock below misses more frames than ``i``,
        ``i``'s own under the share, and costs less (the model with the measured idle
        power)."""
        frames = self.frames
        if (
            i != floor
            or not allowed
            or i == 0
            or len(frames.ranked) < frames.MIN_FRAMES
            or frames.late_count >= self.STOP_SHARE * len(frames.late)
            or self.rate_hz * frames.unit_mean * self.model.time_rel[i - 1] >= 1.0
        ):
            return None
        here, below = self._late_share(i), self._late_share(i - 1)
        if below <= here or here >= self.SHARE:
            return None
        if self.pricing.predicted_w(i - 1) >= self.pricing.predicted_w(i):
            return None
        return here, below

    def step(self, i: int, floor: int, allowed: bool) -> Optional[float]:
        """The clock below the floor for this period, or None (hold clock index ``i``);
        see :meth:`shares` for where it may."""
        self.dither_mhz = None
        shares = self.shares(i, floor, allowed)
        if shares is None:
            self.carry = 0.0
            return None
        here, below = shares
        self.carry += min(1.0, (self.SHARE - here) / (below - here))
        if self.carry < 1.0:
            return None
        self.carry -= 1.0
        self.dither_mhz = self.model.clocks_mhz[i - 1]
        return self.dither_mhz
