"""The ridge-point power model and its fit (Schoonhoven et al., "Going green").

    P(f) = min(P_max, P_idle + alpha * f * V(f)^2)
    V(f) = 1 below the ridge clock, 1 + beta * (f - f_ridge) above it

Clocks in MHz, power in W; ``alpha`` in W/MHz, ``beta`` in 1/MHz.

The fit works on any clock range (a Jetson Nano's 77-922 MHz to an H100's 210-1980 MHz)
without hand-set bounds: clocks and powers are normalised by their largest values, the kink
is located on a grid over (ridge, slope) with the two linear parameters solved exactly at
each grid point, and the best point is then refined by non-linear least squares, whose
Jacobian gives the uncertainties. Power-capped points (measured at the limit) are not
explained by the CMOS law; they set ``P_max`` instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from governor.errors import CalibrationError
from governor.models import formulas

__all__ = ["PowerModel", "fit_power_model"]

#: a fit whose worst point misses by more than this (relative), or that explains less than
#: MIN_R2 of the variation, does not explain its data. Memory-bound loads stray from the CMOS
#: law at low clocks (their activity falls as the clock rises), hence not tighter.
MAX_REL_RESIDUAL = 0.10
MIN_R2 = 0.9
#: every point this close to the fit (relative) explains the data whatever the R²
CLOSE_ENOUGH = 0.03
#: the confidence level of the ridge interval
RIDGE_INTERVAL_LEVEL = 0.9
#: the F quantile whose likelihood-ratio limit gives that level. F(1, dof) is exact for a
#: linear parameter; a kink's likelihood ratio has a heavier tail, and its 0.9 quantile held
#: the simulator's true ridge in only 82-84 % of fits. The 0.95 quantile was chosen on one
#: setting (10 clocks, 1 % noise: 90 %) and checked on four others (6, 7 and 16 clocks; 0.5
#: and 3 % noise: 85-92.5 %); `scripts/bench_calibration.py` prints the coverage.
RIDGE_LR_QUANTILE = 0.95


@dataclass(frozen=True)
class PowerModel:
    p_idle_w: float
    alpha_w_per_mhz: float
    ridge_clock_mhz: float
    beta_per_mhz: float
    p_max_w: float = math.inf
    uncertainty: Dict[str, float] = field(default_factory=dict)  # one standard deviation
    residual_rms_w: float = 0.0
    max_rel_residual: float = 0.0
    n_points: int = 0
    n_capped: int = 0
    ridge_reached: bool = True  # False when no point lies above the fitted ridge
    #: 90 % profile-likelihood interval of the ridge clock (MHz); see ridge_interval()
    ridge_interval_mhz: Tuple[float, float] = (math.nan, math.nan)

    def volts(self, clock_mhz):
        return formulas.volts(
            np.asarray(clock_mhz, dtype=float), self.ridge_clock_mhz, self.beta_per_mhz
        )

    def power_w(self, clock_mhz):
        """Predicted power (W) at ``clock_mhz`` (scalar or array) under the calibration load."""
        f = np.asarray(clock_mhz, dtype=float)
        p = np.asarray(
            formulas.power_w(
                f,
                self.p_idle_w,
                self.alpha_w_per_mhz,
                self.ridge_clock_mhz,
                self.beta_per_mhz,
                self.p_max_w,
            )
        )
        return float(p) if p.ndim == 0 else p

    def to_dict(self) -> Dict[str, object]:
        return {
            "form": "P = min(p_max_w, p_idle_w + alpha_w_per_mhz * f * V(f)^2); V = 1 + beta_per_mhz * max(0, f - ridge_clock_mhz)",
            "p_idle_w": self.p_idle_w,
            "alpha_w_per_mhz": self.alpha_w_per_mhz,
            "ridge_clock_mhz": self.ridge_clock_mhz,
            "beta_per_mhz": self.beta_per_mhz,
            "p_max_w": None if math.isinf(self.p_max_w) else self.p_max_w,
            "uncertainty": dict(self.uncertainty),
            "residual_rms_w": self.residual_rms_w,
            "max_rel_residual": self.max_rel_residual,
            "n_points": self.n_points,
            "n_capped": self.n_capped,
            "ridge_reached": self.ridge_reached,
            "ridge_interval_mhz": [None if math.isnan(v) else v for v in self.ridge_interval_mhz],
            "interval_level": RIDGE_INTERVAL_LEVEL,
        }

    @classmethod
    def from_dict(cls, doc: Dict[str, object]) -> PowerModel:
        p_max = doc.get("p_max_w")
        return cls(
            p_idle_w=float(doc["p_idle_w"]),  # type: ignore[arg-type]
            alpha_w_per_mhz=float(doc["alpha_w_per_mhz"]),  # type: ignore[arg-type]
            ridge_clock_mhz=float(doc["ridge_clock_mhz"]),  # type: ignore[arg-type]
            beta_per_mhz=float(doc["beta_per_mhz"]),  # type: ignore[arg-type]
            p_max_w=math.inf if p_max is None else float(p_max),  # type: ignore[arg-type]
            uncertainty={
                str(k): float(v)
                for k, v in dict(doc.get("uncertainty") or {}).items()
                if v is not None
            },  # type: ignore[arg-type]
            residual_rms_w=float(doc.get("residual_rms_w", 0.0)),  # type: ignore[arg-type]
            max_rel_residual=float(doc.get("max_rel_residual", 0.0)),  # type: ignore[arg-type]
            n_points=int(doc.get("n_points", 0)),  # type: ignore[arg-type]
            n_capped=int(doc.get("n_capped", 0)),  # type: ignore[arg-type]
            ridge_reached=bool(doc.get("ridge_reached", True)),
            ridge_interval_mhz=tuple(  # type: ignore[arg-type]
                math.nan if v is None else float(v)
                for v in (doc.get("ridge_interval_mhz") or (None, None))  # type: ignore[union-attr]
            ),
        )


#: the least voltage rise (relative, at the highest probe) that counts as a ridge: V² then
#: adds 0.1 % to the power there. A straight line fits with a vanishing rise (b ~ 1e-13) whose
#: kink may land anywhere, just below the top clock included: that is no ridge.
RIDGE_MIN_RISE = 5e-4


def _ridge_reached(x: np.ndarray, r: float, b: float) -> bool:
    """Whether some probe lies above the fitted ridge by a rise in voltage that matters
    (``x`` and ``r`` in the same normalised clock units, ``b`` per that unit)."""
    if len(x) == 0 or not b > 0:
        return False
    return bool(b * (float(np.max(x)) - r) > RIDGE_MIN_RISE)


def _detect_capped(f: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Points on a power plateau at the top: walking down from the highest clock, a point is
    capped while the power rose into it far less steeply than the sweep's typical slope and
    it sits within 1.5 % of the maximum (firmware holding the limit)."""
    capped = np.zeros(len(p), dtype=bool)
    order = np.argsort(f)
    fs, ps = f[order], p[order]
    slopes = np.diff(ps) / np.maximum(np.diff(fs), 1e-9)
    rising = slopes[slopes > 0]
    if len(rising) == 0:
        return capped
    typical = float(np.median(rising))
    k = len(fs) - 1
    # no bound on k needed: the walk stops by k = 1, since every slope below a quarter of the
    # median rising slope would put every rising slope below a quarter of its own median
    while slopes[k - 1] < 0.25 * typical and ps[k] >= 0.985 * ps.max():
        capped[order[k]] = True
        k -= 1
    return capped


def _linear(x: np.ndarray, y: np.ndarray, r: float, b: float):
    """Best (y0, a) for y = y0 + a·x·V² at fixed ridge r and slope b (normalised units)."""
    g = formulas.cmos_power_w(x, 1.0, r, b)
    design = np.stack([np.ones_like(x), g], 1)
    (c0, a), *_ = np.linalg.lstsq(design, y, rcond=None)
    return float(c0), float(a)


def fit_power_model(
    clock_mhz: Sequence[float],
    power_w: Sequence[float],
    *,
    capped: Optional[Sequence[bool]] = None,
    p_idle_w: Optional[float] = None,
) -> PowerModel:
    """Fit the ridge-point model to measured (clock, power) points.

    ``capped`` flags points measured at the power limit (throttled); when not given, a top
    plateau is detected. ``p_idle_w`` (measured idle power) is kept for reference only.

    Raises:
        CalibrationError: too few points, non-finite data, or a fit that does not explain
            the data (``err.data`` keeps the points).
    """
    from scipy.optimize import least_squares

    f = np.asarray(clock_mhz, dtype=float)
    p = np.asarray(power_w, dtype=float)
    raw = {"clock_mhz": f.tolist(), "power_w": p.tolist()}
    if f.shape != p.shape or f.ndim != 1:
        raise CalibrationError("clocks and powers must be equal-length lists", raw)
    if not (np.all(np.isfinite(f)) and np.all(np.isfinite(p))) or np.any(f <= 0) or np.any(p <= 0):
        raise CalibrationError(
            "power model: clocks and powers must be positive finite numbers", raw
        )
    if len(np.unique(f)) < 3:
        raise CalibrationError(
            f"power model needs at least 3 distinct clocks, got {len(np.unique(f))}", raw
        )
    cap = np.asarray(capped, dtype=bool) if capped is not None else _detect_capped(f, p)
    free = ~cap
    if free.sum() < 3:
        cap = np.zeros_like(cap)
        free = ~cap
    p_max = float(np.mean(p[cap])) if cap.any() else math.inf

    f_scale, p_scale = float(f.max()), float(p.max())
    x, y = f[free] / f_scale, p[free] / p_scale
    # The constant term is fitted, not fixed to measured idle power: under load it includes the
    # load's own floor (memory traffic, stalled SMs), which idle power does not.
    n_par = 4

    # 1. grid over the kink; the linear parameters are exact at each grid point
    best = None
    grid = [(float(x.max()), 0.0)]  # no slope: the ridge is irrelevant, try it once
    grid += [
        (r, b) for r in np.linspace(x.min(), x.max(), 41) for b in np.geomspace(0.05, 30.0, 40)
    ]
    for r, b in grid:
        c0, a = _linear(x, y, r, b)
        if a <= 0:
            continue
        sse = float(np.sum((formulas.power_w(x, c0, a, r, b) - y) ** 2))
        if best is None or sse < best[0] - 1e-15:
            best = (sse, c0, a, r, b)
    if best is None:
        raise CalibrationError("power does not rise with clock: no CMOS power model fits", raw)
    _, c0, a, r, b = best

    # 2. refine all parameters together
    def model(params, xs):
        c, aa, rr, bb = params
        return formulas.power_w(xs, c, aa, rr, bb)

    start = [c0, a, r, b]
    lower = [-np.inf, 0.0, x.min() - 1.0, 0.0]
    upper = [np.inf, np.inf, 1.0, np.inf]
    start = [
        min(max(s, lo + 1e-12), hi - 1e-12) if np.isfinite(hi) else max(s, lo + 1e-12)
        for s, lo, hi in zip(start, lower, upper)
    ]
    sol = least_squares(lambda q: model(q, x) - y, start, bounds=(lower, upper), method="trf")
    params = sol.x if sol.cost <= best[0] / 2 + 1e-15 else np.array(start)
    c0, a, r, b = (float(v) for v in params)

    # 3. uncertainties from the Jacobian (normalised -> physical units)
    resid = model(params, x) - y
    dof = len(x) - n_par
    unc: Dict[str, float] = {}
    if dof > 0:
        jac = sol.jac if params is sol.x else _numeric_jacobian(lambda q: model(q, x), params)
        s2 = float(np.sum(resid**2)) / dof
        try:
            cov = np.linalg.inv(jac.T @ jac) * s2
            sd = np.sqrt(np.clip(np.diag(cov), 0, None))
            names = ["p_idle_w", "alpha_w_per_mhz", "ridge_clock_mhz", "beta_per_mhz"]
            scales = {
                "p_idle_w": p_scale,
                "alpha_w_per_mhz": p_scale / f_scale,
                "ridge_clock_mhz": f_scale,
                "beta_per_mhz": 1.0 / f_scale,
            }
            unc = {n: float(v * scales[n]) for n, v in zip(names, sd)}
        except np.linalg.LinAlgError:
            unc = {}
    lo_r, hi_r = _ridge_interval(x, y, float(np.sum(resid**2)), n_par)
    lo_r, hi_r = min(lo_r, r), max(hi_r, r)  # the grid may step over the fitted kink
    if dof > 0 and math.isfinite(lo_r):
        # the Jacobian's SD of a kink is far too small (the SSE is not quadratic in it): report
        # the profile interval's half-width as the equivalent SD instead
        unc["ridge_clock_mhz"] = float((hi_r - lo_r) / 2 / 1.645 * f_scale)
    pred = np.minimum(p_max, formulas.power_w(f / f_scale, c0, a, r, b) * p_scale)
    rel = np.abs(pred / p - 1.0)
    result = PowerModel(
        p_idle_w=c0 * p_scale,
        alpha_w_per_mhz=a * p_scale / f_scale,
        ridge_clock_mhz=r * f_scale,
        beta_per_mhz=b / f_scale,
        p_max_w=p_max,
        uncertainty=unc,
        residual_rms_w=float(np.sqrt(np.mean((pred - p) ** 2))),
        max_rel_residual=float(rel.max()),
        n_points=int(len(f)),
        n_capped=int(cap.sum()),
        ridge_reached=_ridge_reached(f[free] / f_scale, r, b),
        ridge_interval_mhz=(lo_r * f_scale, hi_r * f_scale),
    )
    sst = float(np.sum((p[free] - p[free].mean()) ** 2))
    r2 = 1.0 - float(np.sum((pred[free] - p[free]) ** 2)) / sst if sst > 0 else 1.0
    # R² judges only sweeps whose points stray: a nearly flat power curve (memory-bound
    # work) has little variation to explain, and a low R² there means nothing when every
    # point is within CLOSE_ENOUGH of the fit.
    if result.max_rel_residual > MAX_REL_RESIDUAL or (
        r2 < MIN_R2 and result.max_rel_residual > CLOSE_ENOUGH
    ):
        worst = int(np.argmax(rel))
        raise CalibrationError(
            f"the power model does not explain the measurements: off by {100 * rel[worst]:.0f} % "
            f"at {f[worst]:g} MHz (limit {100 * MAX_REL_RESIDUAL:.0f} %), R² {r2:.2f}; raw points kept",
            dict(raw, model=result.to_dict()),
        )
    return result


def _ridge_interval(x: np.ndarray, y: np.ndarray, sse_fit: float, n_par: int):
    """Profile-likelihood interval of the ridge (normalised units): every ridge r whose best
    fit (the other parameters re-fitted) has SSE(r) <= SSE_min·(1 + F(1, dof; level)/dof).
    Without residual degrees of freedom, or where the data cannot place the kink, the interval
    spans the probed range (NaN: no points)."""
    from scipy.stats import f as f_dist

    dof = len(x) - n_par
    if len(x) == 0:
        return math.nan, math.nan
    coarse = np.linspace(float(x.min()), float(x.max()), 161)
    if dof <= 0:
        return float(coarse[0]), float(coarse[-1])
    bs = np.concatenate([[0.0], np.geomspace(0.01, 100.0, 120)])

    yc = y - y.mean()
    syy = float(np.sum(yc * yc))

    def sse_of(rs: np.ndarray, b: np.ndarray) -> np.ndarray:
        # y = c0 + a·g with g = x·V², least squares in closed form; b broadcasts against rs
        g = formulas.cmos_power_w(x, 1.0, rs[..., None], b[..., None])
        gc = g - g.mean(axis=-1, keepdims=True)
        sgg = np.sum(gc * gc, axis=-1)
        sgy = np.sum(gc * yc, axis=-1)
        # sgg == 0 (g constant) also makes sgy exactly 0: a is NaN there, and no fit
        with np.errstate(divide="ignore", invalid="ignore"):
            a = sgy / sgg
        return np.where(a > 0, np.maximum(syy - a * sgy, 0.0), np.inf)

    def profile(rs: np.ndarray) -> np.ndarray:
        # every (r, b) on the slope grid, then each ridge's slope refined between the grid's
        # neighbours of its best (golden section): the grid alone, 8 % apart, leaves the SSE
        # above the exact profile's and the interval too narrow (docs/mutation.md, Findings)
        grid = sse_of(rs[:, None], np.broadcast_to(bs, (len(rs), len(bs))))
        j = np.argmin(grid, axis=1)
        best = grid[np.arange(len(rs)), j]
        lo = bs[np.maximum(j - 1, 0)]
        hi = bs[np.minimum(j + 1, len(bs) - 1)]
        ratio = (math.sqrt(5.0) - 1.0) / 2.0
        for _ in range(48):
            m1 = hi - ratio * (hi - lo)
            m2 = lo + ratio * (hi - lo)
            left = sse_of(rs, m1) <= sse_of(rs, m2)
            hi = np.where(left, m2, hi)
            lo = np.where(left, lo, m1)
        return np.minimum(best, sse_of(rs, (lo + hi) / 2.0))

    prof_c = profile(coarse)
    centre = float(coarse[int(np.argmin(prof_c))])
    span = 0.08 * float(x.max() - x.min())
    fine = np.linspace(max(float(x.min()), centre - span), min(float(x.max()), centre + span), 161)
    rs = np.concatenate([coarse, fine])
    prof = np.concatenate([prof_c, profile(fine)])
    sse_min = min(float(prof.min()), sse_fit)
    limit = sse_min * (1.0 + float(f_dist.ppf(RIDGE_LR_QUANTILE, 1, dof)) / dof)
    inside = rs[prof <= max(limit, 1e-30)]
    if len(inside) == 0:
        return float(coarse[0]), float(coarse[-1])
    return float(inside.min()), float(inside.max())


def _numeric_jacobian(fun, params, eps: float = 1e-7) -> np.ndarray:
    base = fun(params)
    cols = []
    for i in range(len(params)):
        step = np.array(params, dtype=float)
        h = eps * max(1.0, abs(step[i]))
        step[i] += h
        cols.append((fun(step) - base) / h)
    return np.stack(cols, 1)
