"""The power and time formulas, written once; every layer evaluates these.

Power (the ridge-point model, Schoonhoven et al., "Going green")::

    V(f) = 1 + beta·max(0, f − f_ridge)                    normalised core voltage
    P(f) = min(P_max, P_idle + alpha·f·V(f)²)

Time per unit of work (a smooth roofline of a compute and a memory part, plus a term for
run time rising faster than 1/f at low clocks)::

    t(f) = (t_mem^k + (c/f)^k)^(1/k) + t_low·(f_low/f)^n

``t_mem`` scales inversely with the memory clock where one is known. Units: MHz, W, s;
``alpha`` in W/MHz, ``beta`` in 1/MHz, ``c`` in s·MHz.

Pure Python for scalars (the runtime imports this without numpy); numpy arrays work too
(numpy is imported only when one is passed). The simulator (``devices/sim/physics.py``), the
fits (``power.py``, ``time.py``), the runtime clock model and tuning all call these.
"""

from __future__ import annotations

import math

__all__ = [
    "cmos_power_w",
    "mem_time_s",
    "power_w",
    "roofline_time_s",
    "time_s",
    "volts",
]

_SCALARS = (int, float)


def _max(a, b):
    if isinstance(a, _SCALARS) and isinstance(b, _SCALARS):
        return max(a, b)
    import numpy as np

    return np.maximum(a, b)


def _min(a, b):
    if isinstance(a, _SCALARS) and isinstance(b, _SCALARS):
        return min(a, b)
    import numpy as np

    return np.minimum(a, b)


def volts(clock_mhz, ridge_mhz: float, beta_per_mhz: float):
    """Normalised core voltage: 1 up to the ridge clock, rising by ``beta`` per MHz above."""
    return 1.0 + beta_per_mhz * _max(0.0, clock_mhz - ridge_mhz)


def cmos_power_w(clock_mhz, alpha_w_per_mhz: float, ridge_mhz: float, beta_per_mhz: float):
    """Dynamic CMOS power alpha·f·V(f)² (W)."""
    return alpha_w_per_mhz * clock_mhz * volts(clock_mhz, ridge_mhz, beta_per_mhz) ** 2


def power_w(
    clock_mhz,
    p_idle_w: float,
    alpha_w_per_mhz: float,
    ridge_mhz: float,
    beta_per_mhz: float,
    p_max_w: float = math.inf,
):
    """P(f) = min(P_max, P_idle + alpha·f·V(f)²) in W (``p_max_w`` inf or None: no cap)."""
    p = p_idle_w + cmos_power_w(clock_mhz, alpha_w_per_mhz, ridge_mhz, beta_per_mhz)
    if p_max_w is None or math.isinf(p_max_w):
        return p
    return _min(p_max_w, p)


def mem_time_s(t_mem_s: float, mem_clock_mhz=None, ref_mem_clock_mhz=None) -> float:
    """The memory part at ``mem_clock_mhz`` when it was ``t_mem_s`` at ``ref_mem_clock_mhz``."""
    if t_mem_s == 0 or not mem_clock_mhz or not ref_mem_clock_mhz:
        return t_mem_s
    return t_mem_s * ref_mem_clock_mhz / mem_clock_mhz


def roofline_time_s(compute_s, t_mem_s, k: float = 1.0):
    """(t_mem^k + t_c^k)^(1/k): the two parts add up (k = 1) or overlap (large k)."""
    if isinstance(t_mem_s, _SCALARS) and isinstance(compute_s, _SCALARS):
        if t_mem_s == 0:
            return compute_s
        if compute_s == 0:
            return t_mem_s
    top = _max(_max(compute_s, t_mem_s), 1e-300)  # scaled: no overflow for large k
    return top * ((compute_s / top) ** k + (t_mem_s / top) ** k) ** (1.0 / k)


def time_s(
    clock_mhz,
    t_mem_s: float,
    c_s_mhz: float,
    k: float = 1.0,
    low_s: float = 0.0,
    low_ref_mhz: float = 1.0,
    low_exp: float = 0.0,
):
    """t(f) in s per unit of work: the roofline plus the low-clock term (zero by default)."""
    t = roofline_time_s(c_s_mhz / clock_mhz, t_mem_s, k)
    if low_s:
        t = t + low_s * (low_ref_mhz / clock_mhz) ** low_exp
    return t
