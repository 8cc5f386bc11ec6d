"""Energy of a control period from sampled power when the load alternates busy and idle.

Without an energy counter the governor knows power only at the instants it reads the
sensor. A frame loop running at a multiple of the control rate (a 30 Hz camera under a
10 Hz loop) puts every reading on the same phase of the frames, so the readings catch only
the gaps between frames (or only the frames), and a mean of readings is biased by the whole
busy share. Reading more often does not help when the sensor itself refreshes in step with
the loop (a 10 Hz NVML sensor).

When the app says how long each frame computed (``gov.tick(units, busy_s=...)``), the
period's energy is split instead of sampled (stratified)::

    E = Σ busy_s · P_busy(f) + (dt − Σ busy_s) · P_idle

with ``P_busy(f) = ρ · P_model(f)`` (the profile's power at the frame's clock, corrected by
``ρ``, the mean ratio of busy readings to the model) and ``P_idle`` the mean idle reading.
Each reading is filed by the GPU's state when it was read (utilisation), so aliasing only
decides which of the two estimates a reading improves, never the weights. The rest of the
board (board input − GPU figure) is estimated the same way, busy and idle apart. Busy time
reported beyond a period's length (a frame longer than the period) is taken off the idle
time of the next periods, so the sum over a run is right.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

from governor.runtime.controllers import Tick
from governor.runtime.model import ClockModel

__all__ = ["DutyMeter"]


class DutyMeter:
    """Stratified power of a period from classified readings and the app's busy time."""

    GAIN = 0.2  # per reading, of the gap to the latest one
    RATIO_RANGE = (0.25, 4.0)  # a busy reading this far off the model is not believed
    QUIET_S = 2.0  # no busy time reported for this long: back to the readings

    def __init__(self, model: ClockModel) -> None:
        self.model = model
        # per clock index, and over all clocks (for a clock not read yet): the busy
        # power's ratio to the model, the idle power, and the rest of the board in each state
        self.ratio_at: Dict[int, float] = {}
        self.idle_at: Dict[int, float] = {}
        self.busy_rest_at: Dict[int, float] = {}
        self.idle_rest_at: Dict[int, float] = {}
        self.ratio: Optional[float] = 1.0 if model.fitted else None
        self.idle_w: Optional[float] = None
        self.busy_rest_w: Optional[float] = None
        self.idle_rest_w: Optional[float] = None
        self.busy_readings = 0
        self.idle_readings = 0
        self.owed_s = 0.0  # busy time reported beyond the periods it ran in
        self.quiet_s = float("inf")  # time since the app last reported busy time
        self.last_reading_w: Optional[float] = None

    def _ema(self, table: Dict[int, float], i: int, new: float) -> None:
        old = table.get(i)
        table[i] = new if old is None else old + self.GAIN * (new - old)

    @staticmethod
    def _blend(old: Optional[float], new: float, gain: float) -> float:
        return new if old is None else old + gain * (new - old)

    def busy_w(self, i: int) -> Optional[float]:
        """Predicted busy power (W) at clock index ``i``."""
        ratio = self.ratio_at.get(i, self.ratio)
        return None if ratio is None else ratio * self.model.power_w[i]

    def idle_power_w(self, i: int) -> Optional[float]:
        return self.idle_at.get(i, self.idle_w)

    def reading(
        self, power_w: float, board_w: Optional[float], busy: bool, clock_mhz: float
    ) -> None:
        """File one sensor reading under the state the GPU was in when it was read."""
        self.last_reading_w = power_w
        rest = board_w - power_w if board_w is not None else None
        i = self.model.index(clock_mhz)
        model_w = self.model.power_w[i]
        busy_w = self.busy_w(i)
        idle = self.idle_power_w(i)
        idle_w = idle if idle is not None else self.model.idle_w
        # the state read with the power may not be the one the sensor saw (a frame that
        # started just after the sensor's refresh): a reading nearer the other state's
        # power is not filed
        if busy_w is not None and (idle is not None or self.model.fitted):
            if busy != (abs(power_w - busy_w) < abs(power_w - idle_w)):
                return
        if busy:
            if model_w <= 0:
                return
            r = power_w / model_w
            lo, hi = self.RATIO_RANGE
            if self.model.fitted and not (lo <= r <= hi):
                return
            self._ema(self.ratio_at, i, r)
            self.ratio = self._blend(self.ratio if self.busy_readings else None, r, self.GAIN)
            if rest is not None:
                self._ema(self.busy_rest_at, i, rest)
                self.busy_rest_w = self._blend(self.busy_rest_w, rest, self.GAIN)
            self.busy_readings += 1
        else:
            self._ema(self.idle_at, i, power_w)
            self.idle_w = self._blend(self.idle_w, power_w, self.GAIN)
            if rest is not None:
                self._ema(self.idle_rest_at, i, rest)
                self.idle_rest_w = self._blend(self.idle_rest_w, rest, self.GAIN)
            self.idle_readings += 1

    def period(
        self, dt_s: float, ticks: Sequence[Tick], applied_mhz: float
    ) -> Optional[Tuple[float, Optional[float]]]:
        """(GPU-figure J, board J or None) for a period of ``dt_s`` with these ticks, the
        GPU idling at ``applied_mhz`` between them; None when it cannot be split (no busy
        time reported lately; no idle or busy power known yet)."""
        if dt_s <= 0 or self.idle_w is None or self.ratio is None:
            return None
        busy_s = busy_j = busy_rest_j = 0.0
        reported = False
        for tick in ticks:
            if tick.busy_s is None:
                continue
            reported = True
            b = max(0.0, tick.busy_s)
            k = self.model.index(tick.applied_mhz)
            busy_s += b
            busy_j += b * (self.busy_w(k) or 0.0)
            rest = self.busy_rest_at.get(k, self.busy_rest_w)
            busy_rest_j += b * (rest if rest is not None else (self.idle_rest_w or 0.0))
        # an app that reports busy time and sends no tick in a period was idle in it (or
        # is inside a frame longer than the period: the frame's tick settles that)
        self.quiet_s = 0.0 if reported else self.quiet_s + dt_s
        if self.quiet_s > self.QUIET_S:
            self.owed_s = 0.0
            return None
        idle_s = dt_s - busy_s - self.owed_s
        if idle_s < 0:
            self.owed_s = -idle_s
            idle_s = 0.0
        else:
            self.owed_s = 0.0
        i = self.model.index(applied_mhz)
        gpu_j = busy_j + idle_s * (self.idle_power_w(i) or 0.0)
        board_j: Optional[float] = None
        if self.idle_rest_w is not None:
            idle_rest = self.idle_rest_at.get(i, self.idle_rest_w)
            board_j = gpu_j + busy_rest_j + idle_s * idle_rest
        return gpu_j, board_j
