"""Power and time of a load at a (core clock, memory clock) pair: the one place they are written.

Power (W), the GPU's dynamic CMOS power of :mod:`formulas` plus the memory's::

    P(f, m) = P_idle + α·f·V(f)²·a(f, m)                     core: formulas.cmos_power_w
            + P_mem·(s + (1 − s)·m/m_top)                     memory background
            + W_traffic·t(f, m_top)/t(f, m)                   memory traffic

The memory background is the CMOS law C·m·V_m² with the memory voltage held (no public EMC
voltage table says otherwise) and a share ``s`` that does not scale with the clock (refresh,
PHY bias): linear in ``m``. The traffic term is a constant energy per byte moved: its power
follows the rate the load moves bytes, 1/t. Source: the ridge-point core model of
Schoonhoven et al. ("Going green", the core part, :mod:`formulas`) and the memory split of
Guerreiro et al. (HPCA'18, "GPGPU power modeling for multi-domain voltage-frequency
scaling": the memory domain's power linear in its clock at fixed voltage).

Time per unit of work (s), the smooth roofline of :mod:`formulas` with the memory part
split into latency and bandwidth::

    t_mem(m) = t_mem_top·(λ + (1 − λ)·m_top/m)                λ: the share of memory time that
                                                              is latency, not bandwidth
    t(f, m)  = (t_mem(m)^k + (c/f)^k)^(1/k)

``k`` = 1 adds the parts (no overlap), large ``k`` is the max of the two (a roofline).
:func:`fit_pairs` fits (c, t_mem_top, λ, k) and the power terms of one load to rows
measured at several (f, m) pairs; ``scripts/bench_mem_model.py`` reports its held-out error
on the Titan X applications (two memory clocks) and the simulated boards use the same
formulas (``scripts/make_sim_catalog.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

from governor.models import formulas

__all__ = [
    "PairModel",
    "best_pair",
    "fit_pairs",
    "mem_background_w",
    "mem_time_s",
    "pair_power_w",
    "pair_time_s",
    "relative_errors",
]


def mem_background_w(
    mem_clock_mhz: float, p_mem_top_w: float, mem_top_mhz: float, fixed_share: float
) -> float:
    """The memory's background power (W) at ``mem_clock_mhz``: P_mem·(s + (1 − s)·m/m_top)."""
    return p_mem_top_w * (fixed_share + (1.0 - fixed_share) * mem_clock_mhz / mem_top_mhz)


def mem_time_s(
    t_mem_top_s: float, mem_clock_mhz: float, mem_top_mhz: float, latency_share: float
) -> float:
    """The memory part (s) at ``mem_clock_mhz``: t_mem_top·(λ + (1 − λ)·m_top/m)."""
    if t_mem_top_s == 0 or mem_clock_mhz == mem_top_mhz:
        return t_mem_top_s
    return t_mem_top_s * (latency_share + (1.0 - latency_share) * mem_top_mhz / mem_clock_mhz)


def pair_time_s(
    clock_mhz: float,
    mem_clock_mhz: float,
    c_s_mhz: float,
    t_mem_top_s: float,
    mem_top_mhz: float,
    latency_share: float,
    k: float,
) -> float:
    """t(f, m): the roofline of the compute part c/f and the memory part t_mem(m)."""
    return formulas.roofline_time_s(
        c_s_mhz / clock_mhz, mem_time_s(t_mem_top_s, mem_clock_mhz, mem_top_mhz, latency_share), k
    )


@dataclass(frozen=True)
class PairModel:
    """One load's fitted P(f, m) and t(f, m) (units: MHz, W, s, s·MHz)."""

    c_s_mhz: float
    t_mem_top_s: float
    latency_share: float
    k: float
    mem_top_mhz: float
    p_idle_w: float
    alpha_w_per_mhz: float
    ridge_mhz: float
    beta_per_mhz: float
    p_mem_top_w: float
    fixed_share: float
    traffic_w: float

    def time_s(self, clock_mhz: float, mem_clock_mhz: float) -> float:
        return pair_time_s(
            clock_mhz,
            mem_clock_mhz,
            self.c_s_mhz,
            self.t_mem_top_s,
            self.mem_top_mhz,
            self.latency_share,
            self.k,
        )

    def power_w(self, clock_mhz: float, mem_clock_mhz: float) -> float:
        return pair_power_w(self, clock_mhz, mem_clock_mhz)

    def energy_j(self, clock_mhz: float, mem_clock_mhz: float) -> float:
        return self.power_w(clock_mhz, mem_clock_mhz) * self.time_s(clock_mhz, mem_clock_mhz)


def pair_power_w(model: PairModel, clock_mhz: float, mem_clock_mhz: float) -> float:
    """P(f, m) of the module docstring for ``model``."""
    t = model.time_s(clock_mhz, mem_clock_mhz)
    busy = min(1.0, (model.c_s_mhz / clock_mhz) / t) if t > 0 else 1.0
    core = formulas.cmos_power_w(
        clock_mhz, model.alpha_w_per_mhz, model.ridge_mhz, model.beta_per_mhz
    ) * (0.5 + 0.5 * busy)
    t_top = model.time_s(clock_mhz, model.mem_top_mhz)
    traffic = model.traffic_w * (t_top / t if t > 0 else 1.0)
    background = mem_background_w(
        mem_clock_mhz, model.p_mem_top_w, model.mem_top_mhz, model.fixed_share
    )
    return model.p_idle_w + core + background + traffic


def fit_pairs(
    clocks_mhz: Sequence[float],
    mem_clocks_mhz: Sequence[float],
    power_w: Sequence[float],
    time_s: Sequence[float],
    *,
    p_mem_share: Tuple[float, float] = (0.0, 1.0),
) -> PairModel:
    """Fit a :class:`PairModel` to rows measured at (core, memory) pairs (least squares on
    the relative errors of time and power; numpy and scipy, imported here).

    Raises:
        ValueError: fewer than 6 rows, or fewer than two memory clocks.
    """
    import numpy as np
    from scipy.optimize import least_squares

    f = np.asarray(clocks_mhz, dtype=float)
    m = np.asarray(mem_clocks_mhz, dtype=float)
    p = np.asarray(power_w, dtype=float)
    t = np.asarray(time_s, dtype=float)
    if len(f) < 6 or len(set(m.tolist())) < 2:
        raise ValueError("fit_pairs needs at least 6 rows at two or more memory clocks")
    m_top = float(m.max())
    f_top = float(f.max())
    t_top = float(t[(m == m_top)].min())

    def t_model(x: np.ndarray) -> np.ndarray:
        c, tm, lam, logk = x
        mem = tm * (lam + (1 - lam) * m_top / m)
        return formulas.roofline_time_s(c / f, mem, math.exp(logk))

    x0 = [0.5 * t_top * f_top, 0.5 * t_top, 0.1, math.log(2.0)]
    tf = least_squares(
        lambda x: t_model(x) / t - 1.0,
        x0,
        bounds=([0, 0, 0, 0], [np.inf, np.inf, 0.95, math.log(50.0)]),
    )
    c, tm, lam, logk = (float(v) for v in tf.x)
    times = t_model(tf.x)
    busy = np.minimum(1.0, (c / f) / times)
    t_at_top = formulas.roofline_time_s(c / f, tm, math.exp(logk))
    ridge0 = float(np.median(f))

    def p_model(x: np.ndarray) -> np.ndarray:
        p_idle, alpha, ridge, beta, pm, s, w = x
        core = formulas.cmos_power_w(f, alpha, ridge, beta) * (0.5 + 0.5 * busy)
        return p_idle + core + pm * (s + (1 - s) * m / m_top) + w * t_at_top / times

    p_top = float(p.max())
    x0p = [0.2 * p_top, 0.3 * p_top / f_top, ridge0, 1e-4, 0.2 * p_top, 0.3, 0.05 * p_top]
    pf = least_squares(
        lambda x: p_model(x) / p - 1.0,
        x0p,
        bounds=(
            [0, 0, float(f.min()), 0, 0, p_mem_share[0], 0],
            [np.inf, np.inf, f_top, 0.01, np.inf, p_mem_share[1], np.inf],
        ),
    )
    p_idle, alpha, ridge, beta, pm, s, w = (float(v) for v in pf.x)
    return PairModel(
        c_s_mhz=c,
        t_mem_top_s=tm,
        latency_share=lam,
        k=math.exp(logk),
        mem_top_mhz=m_top,
        p_idle_w=p_idle,
        alpha_w_per_mhz=alpha,
        ridge_mhz=ridge,
        beta_per_mhz=beta,
        p_mem_top_w=pm,
        fixed_share=s,
        traffic_w=w,
    )


def relative_errors(
    model: PairModel, rows: Sequence[Tuple[float, float, float, float]]
) -> Dict[str, float]:
    """Mean absolute relative error of time, power and energy over ``rows`` of (f, m, P, t)."""
    et = ep = ee = 0.0
    for f, m, p, t in rows:
        et += abs(model.time_s(f, m) / t - 1.0)
        ep += abs(model.power_w(f, m) / p - 1.0)
        ee += abs(model.energy_j(f, m) / (p * t) - 1.0)
    n = max(1, len(rows))
    return {"time": et / n, "power": ep / n, "energy": ee / n}


def best_pair(
    model: PairModel, clocks_mhz: Sequence[float], mem_clocks_mhz: Sequence[float]
) -> Optional[Tuple[float, float]]:
    """The (core, memory) pair of the tables with the least modelled energy per unit."""
    pairs = [(f, m) for f in clocks_mhz for m in mem_clocks_mhz]
    return min(pairs, key=lambda fm: model.energy_j(*fm)) if pairs else None
