"""Power-lag correction: undo a sensor's delay before integrating power into energy.

Power sensors answer late: NVML reports an average over up to a second, so when a short
kernel starts, the reading climbs after it. Lopes et al. correct each reading with the slope
around it::

    P̂(t_i) = P(t_i) + C · (P(t_{i+1}) − P(t_{i−1})) / (t_{i+1} − t_{i−1})

(one-sided differences at the ends), with C in seconds: 0.833 s on a Tesla K20c, 0.79 s on a
K40c. For a sensor that lags like a first-order system with time constant C this is exact.

C is fitted from a step response: hold one load, switch to another at ``t_step``, sample.
The ideal reading is the old level before the step and the new level after it; P̂ is linear
in C, so the C closest to the ideal (least squares) has a closed form. On a simulated board
:func:`step_response` produces the step by switching workloads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

from governor.devices.base import WorkloadDevice
from governor.errors import CalibrationError, InvalidRequestError, UnsupportedError

__all__ = [
    "K20C_LAG_S",
    "K40C_LAG_S",
    "LagFit",
    "corrected_energy_j",
    "fit_lag_constant",
    "integrate_energy_j",
    "lag_correct",
    "step_response",
]

K20C_LAG_S = 0.833
K40C_LAG_S = 0.79


def _check(times_s: Sequence[float], powers_w: Sequence[float]) -> None:
    if len(times_s) != len(powers_w):
        raise InvalidRequestError(f"{len(times_s)} times but {len(powers_w)} power readings")
    if any(b <= a for a, b in zip(times_s, times_s[1:])):
        raise InvalidRequestError("sample times must be strictly increasing")


def _slopes(times_s: Sequence[float], powers_w: Sequence[float]) -> List[float]:
    n = len(times_s)
    if n < 2:
        return [0.0] * n
    out = []
    for i in range(n):
        lo, hi = max(0, i - 1), min(n - 1, i + 1)
        out.append((powers_w[hi] - powers_w[lo]) / (times_s[hi] - times_s[lo]))
    return out


def lag_correct(times_s: Sequence[float], powers_w: Sequence[float], c_s: float) -> List[float]:
    """Corrected readings P̂ (W) for readings ``powers_w`` taken at ``times_s`` (s).

    Raises:
        InvalidRequestError: mismatched lengths, times not increasing, negative C.
    """
    _check(times_s, powers_w)
    if not c_s >= 0:
        raise InvalidRequestError(f"lag constant must be >= 0 s, not {c_s!r}")
    return [p + c_s * d for p, d in zip(powers_w, _slopes(times_s, powers_w))]


def integrate_energy_j(
    times_s: Sequence[float],
    powers_w: Sequence[float],
    t_start_s: Optional[float] = None,
    t_end_s: Optional[float] = None,
) -> float:
    """Energy (J) of piecewise-linear power over ``[t_start_s, t_end_s]`` (default: all)."""
    _check(times_s, powers_w)
    if len(times_s) < 2:
        return 0.0
    a = times_s[0] if t_start_s is None else t_start_s
    b = times_s[-1] if t_end_s is None else t_end_s
    total = 0.0
    for (t0, p0), (t1, p1) in zip(zip(times_s, powers_w), zip(times_s[1:], powers_w[1:])):
        lo, hi = max(t0, a), min(t1, b)
        if hi <= lo:
            continue
        slope = (p1 - p0) / (t1 - t0)
        q0, q1 = p0 + slope * (lo - t0), p0 + slope * (hi - t0)
        total += 0.5 * (q0 + q1) * (hi - lo)
    return total


def corrected_energy_j(
    times_s: Sequence[float],
    powers_w: Sequence[float],
    c_s: float,
    t_start_s: Optional[float] = None,
    t_end_s: Optional[float] = None,
) -> float:
    """Energy (J) over a run after lag correction with constant ``c_s``."""
    return integrate_energy_j(times_s, lag_correct(times_s, powers_w, c_s), t_start_s, t_end_s)


@dataclass(frozen=True)
class LagFit:
    """A fitted lag constant and the step it came from."""

    c_s: float
    t_step_s: float
    before_w: float
    after_w: float
    times_s: Tuple[float, ...]
    powers_w: Tuple[float, ...]

    def to_dict(self) -> dict:
        return {
            "c_s": self.c_s,
            "t_step_s": self.t_step_s,
            "before_w": self.before_w,
            "after_w": self.after_w,
            "samples": len(self.times_s),
        }


def fit_lag_constant(
    times_s: Sequence[float],
    powers_w: Sequence[float],
    t_step_s: float,
    before_w: Optional[float] = None,
    after_w: Optional[float] = None,
) -> LagFit:
    """The C (s) that makes the corrected readings closest to an ideal step at ``t_step_s``.

    ``before_w``/``after_w`` default to the mean reading before the step and over the last
    quarter of the record.

    Raises:
        CalibrationError: too few samples on either side, or no visible step.
    """
    _check(times_s, powers_w)
    before = [p for t, p in zip(times_s, powers_w) if t < t_step_s]
    after = [p for t, p in zip(times_s, powers_w) if t >= t_step_s]
    if len(before) < 2 or len(after) < 4:
        raise CalibrationError(
            "a lag fit needs samples before and after the step", data=list(powers_w)
        )
    lo = before_w if before_w is not None else sum(before) / len(before)
    tail = after[-max(2, len(after) // 4) :]
    hi = after_w if after_w is not None else sum(tail) / len(tail)
    if abs(hi - lo) < 1e-6 * max(1.0, abs(hi)):
        raise CalibrationError("no step visible in the power readings", data=list(powers_w))
    slopes = _slopes(times_s, powers_w)
    num = den = 0.0
    for t, p, d in zip(times_s, powers_w, slopes):
        ideal = lo if t < t_step_s else hi
        num += d * (ideal - p)
        den += d * d
    c = max(0.0, num / den) if den > 0 else 0.0
    return LagFit(c, t_step_s, lo, hi, tuple(times_s), tuple(powers_w))


def step_response(
    device: Any,
    workload: Any = "compute",
    before_s: float = 2.0,
    after_s: float = 4.0,
    interval_s: float = 0.05,
) -> LagFit:
    """Produce a power step on ``device`` (idle, then ``workload``), sample it, fit C.

    Works on devices that can run a load on demand (simulated boards: ``run_workload``).

    Raises:
        UnsupportedError: the device cannot produce a step by itself.
        CalibrationError: the step was not visible.
    """
    if not isinstance(device, WorkloadDevice):
        raise UnsupportedError(
            f"{device.uri} cannot produce a power step by itself; fit C from recorded samples"
        )
    if interval_s <= 0 or before_s <= 0 or after_s <= 0:
        raise InvalidRequestError("step response durations must be positive")
    clock = device.clock
    times: List[float] = []
    powers: List[float] = []

    def take(duration_s: float) -> None:
        end = clock.now_s() + duration_s
        while clock.now_s() < end - 1e-9:
            clock.sleep(interval_s)
            sample = device.sample()
            if sample.power_w is not None:
                times.append(sample.t_s)
                powers.append(sample.power_w)

    device.stop_workload()
    take(before_s)
    t_step = clock.now_s()
    device.run_workload(workload)
    try:
        take(after_s)
    finally:
        device.stop_workload()
    return fit_lag_constant(times, powers, t_step)
