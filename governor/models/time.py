"""Time per unit of work as a function of the GPU clock.

    t(f) = (t_mem^k + (c/f)^k)^(1/k)        t_mem >= 0 (s), c >= 0 (s·MHz), k >= 1

k = 1 is the two-term model t_mem + c/f, the simplest that captures memory-bound work; a
larger k (a smooth roofline) fits work whose time saturates more sharply. The form is chosen
by the data: k = 1 unless a larger k misses the points by clearly less.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, Sequence

import numpy as np

from governor.errors import CalibrationError

__all__ = ["TimeModel", "fit_time_model"]

_KS = (1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0)
MAX_REL_RESIDUAL = 0.08


@dataclass(frozen=True)
class TimeModel:
    t_mem_s: float
    c_s_mhz: float
    k: float = 1.0
    uncertainty: Dict[str, float] = field(default_factory=dict)
    max_rel_residual: float = 0.0

    def time_s(self, clock_mhz):
        """Seconds per unit of work at ``clock_mhz`` (scalar or array)."""
        f = np.asarray(clock_mhz, dtype=float)
        t = _t(f, self.t_mem_s, self.c_s_mhz, self.k)
        return float(t) if t.ndim == 0 else t

    @property
    def memory_bound_share(self) -> float:
        """How much of the time at the clock where both parts are equal is memory (0-1)."""
        return self.t_mem_s / (
            self.t_mem_s
            + 1e-300
            + self.c_s_mhz / max(self.c_s_mhz / max(self.t_mem_s, 1e-300), 1e-300)
        )

    def to_dict(self) -> Dict[str, object]:
        return {
            "form": "t = (t_mem_s^k + (c_s_mhz / f)^k)^(1/k)",
            "t_mem_s": self.t_mem_s,
            "c_s_mhz": self.c_s_mhz,
            "k": self.k,
            "uncertainty": dict(self.uncertainty),
            "max_rel_residual": self.max_rel_residual,
        }

    @classmethod
    def from_dict(cls, doc: Dict[str, object]) -> TimeModel:
        return cls(
            t_mem_s=float(doc["t_mem_s"]),  # type: ignore[arg-type]
            c_s_mhz=float(doc["c_s_mhz"]),  # type: ignore[arg-type]
            k=float(doc.get("k", 1.0)),  # type: ignore[arg-type]
            uncertainty={str(k): float(v) for k, v in dict(doc.get("uncertainty") or {}).items()},  # type: ignore[arg-type]
            max_rel_residual=float(doc.get("max_rel_residual", 0.0)),  # type: ignore[arg-type]
        )


def _t(f, tm, c, k):
    tc = c / f
    if k == 1.0:
        return tm + tc
    top = np.maximum(np.maximum(tm, tc), 1e-300)
    return top * ((tm / top) ** k + (tc / top) ** k) ** (1.0 / k)


def fit_time_model(clock_mhz: Sequence[float], time_s: Sequence[float]) -> TimeModel:
    """Fit t(f) to measured time per unit of work.

    Raises:
        CalibrationError: fewer than 2 clocks, bad values, or no form explains the data.
    """
    from scipy.optimize import least_squares, nnls

    f = np.asarray(clock_mhz, dtype=float)
    t = np.asarray(time_s, dtype=float)
    raw = {"clock_mhz": f.tolist(), "time_s": t.tolist()}
    if not (np.all(np.isfinite(t)) and np.all(t > 0) and np.all(f > 0)):
        raise CalibrationError("time model: times must be positive finite numbers", raw)
    if len(np.unique(f)) < 2:
        raise CalibrationError("time model needs at least 2 distinct clocks", raw)
    # k = 1: linear in (t_mem, c); relative errors weight every point alike
    design = np.stack([np.ones_like(f), 1.0 / f], 1) / t[:, None]
    (tm, c), _ = nnls(design, np.ones_like(t))
    best = (float(np.max(np.abs(_t(f, tm, c, 1.0) / t - 1))), 1.0, float(tm), float(c))
    if best[0] > 0.01 and len(f) >= 4:
        for k in _KS:
            for tm0 in (t.min() * 0.9, t.min() * 0.5):
                c0 = max(t[np.argmin(f)] * f.min(), 1e-12)
                sol = least_squares(
                    lambda q, k=k: _t(f, math.exp(q[0]), math.exp(q[1]), k) / t - 1.0,
                    [math.log(tm0), math.log(c0)],
                )
                err = float(np.max(np.abs(sol.fun)))
                if (
                    err < 0.75 * best[0] and err < best[0] - 0.002
                ):  # clearly better, not just wigglier
                    best = (err, k, math.exp(sol.x[0]), math.exp(sol.x[1]))
    err, k, tm, c = best
    model = TimeModel(t_mem_s=tm, c_s_mhz=c, k=k, max_rel_residual=err)
    if err > MAX_REL_RESIDUAL:
        raise CalibrationError(
            f"the time model does not explain the measurements (off by {100 * err:.0f} %); raw points kept",
            dict(raw, model=model.to_dict()),
        )
    return model
