"""The ridge-point power model and its fit (Schoonhoven et al., "Going green").

    P(f) = min(P_max, P_idle + alpha * f * V(f)^2)
    V(f) = 1 below the ridge clock, 1 + beta * (f - f_ridge) above it

Clocks in MHz, power in W; ``alpha`` in W/MHz, ``beta`` in 1/MHz.

The fit works on any clock range (a Jetson Nano's 77-922 MHz to an H100's 210-1980 MHz)
without hand-set bounds: clocks and powers are normalised by their largest values, the kink
is located on a grid over (ridge, slope) with the two linear parameters solved exactly at
each grid point, and the best point is then refined by non-linear least squares, whose
Jacobian gives the uncertainties. The ridge's 90 % interval is the exact profile-likelihood
interval, its ends solved where the profile crosses the limit. Power-capped points
(measured at the limit) are not explained by the CMOS law; they set ``P_max`` instead.

The fit stays in the physical region by bounds, not by a clamp after it: idle power >= 0 and
alpha >= 0 (alpha = 0 is no CMOS law: refused), the ridge within the probed clocks, ``P_max``
at least the highest unclipped point; the ridge's profile is taken under the same bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from governor.documents import DocReader
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
#: linear parameter under constant noise; a kink's likelihood ratio under relative noise has a
#: heavier tail, and its 0.9 quantile held the simulator's true ridge in only 81 % of fits.
#: Chosen on 1040 fits (9 of the 17 catalog boards, noise seeds 1000..1129, 10 clocks, 1 %
#: relative noise: 90.3 %), reported on draws it was not chosen on (the other 8 boards, other
#: seeds, other clock counts and noise): `python scripts/bench_calibration.py --coverage`,
#: docs/calibration.md "Ridge interval coverage". (0.95 before, chosen on 204 fits: 91 % there,
#: 85 % held out, 88.6 % on the 1040.)
RIDGE_LR_QUANTILE = 0.96


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
    def from_dict(
        cls, doc: Mapping[str, object], where: str = "power_model", path: object = None
    ) -> PowerModel:
        """The model of :meth:`to_dict`'s object (a profile's ``power_model`` at ``where`` in
        the file ``path``).

        Raises:
            ProfileError: a field missing or of the wrong type (names the file and the field).
        """
        r = DocReader.of(doc, where, path)
        p_max = r.optional_float("p_max_w")
        bounds = r.list_of_optional_floats("ridge_interval_mhz", (None, None))
        if len(bounds) != 2:
            raise r.error("ridge_interval_mhz", "must be [low, high]")
        low, high = (math.nan if v is None else v for v in bounds)
        return cls(
            p_idle_w=r.float("p_idle_w"),
            alpha_w_per_mhz=r.float("alpha_w_per_mhz"),
            ridge_clock_mhz=r.float("ridge_clock_mhz"),
            beta_per_mhz=r.float("beta_per_mhz"),
            p_max_w=math.inf if p_max is None else p_max,
            uncertainty=r.float_map("uncertainty", skip_null=True),
            residual_rms_w=r.float("residual_rms_w", 0.0),
            max_rel_residual=r.float("max_rel_residual", 0.0),
            n_points=r.int("n_points", 0),
            n_capped=r.int("n_capped", 0),
            ridge_reached=r.bool("ridge_reached", True),
            ridge_interval_mhz=(low, high),
        )


#: the least voltage rise (relative, at the highest probe) that counts as a ridge: V² then
#: adds 0.1 % to the power there. A straight line fits with a vanishing rise (b ~ 1e-13) whose
#: kink may land anywhere, just below the top clock included: that is no ridge.
RIDGE_MIN_RISE = 5e-4
#: ridges scanned evenly over the probed range (with every probe and the fitted ridge) to
#: find the ridge interval's ends; those are then solved to RIDGE_XTOL
#: (normalised clock: 1e-9 of the top clock)
RIDGE_SCAN = 161
RIDGE_XTOL = 1e-9


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
    """Best (y0, a) for y = y0 + a·x·V² at fixed ridge r and slope b (normalised units) with
    y0 >= 0 and a >= 0. The problem is convex in (y0, a): its minimum is the least-squares
    pair when that is feasible, else on a face: y0 = 0 (the best a through the origin) or
    a = 0 (the flat line, no CMOS law: the caller refuses a <= 0), whichever fits better."""
    g = formulas.cmos_power_w(x, 1.0, r, b)
    design = np.stack([np.ones_like(x), g], 1)
    (c0, a), *_ = np.linalg.lstsq(design, y, rcond=None)
    if c0 >= 0 and a > 0:
        return float(c0), float(a)
    a0 = float(g @ y) / float(g @ g)
    flat = float(np.mean(y))
    if a0 > 0 and np.sum((a0 * g - y) ** 2) < np.sum((y - flat) ** 2):
        return 0.0, a0
    return flat, 0.0


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
    # P_max is the least-squares constant of the capped points, bounded below by the highest
    # unclipped point (a cap under a point measured without it would clip that point): the
    # bounded estimate of a constant is the unbounded one moved onto the bound
    p_max = max(float(np.mean(p[cap])), float(np.max(p[free]))) if cap.any() else math.inf

    f_scale, p_scale = float(f.max()), float(p.max())
    x, y = f[free] / f_scale, p[free] / p_scale
    # The constant term is fitted, not fixed to measured idle power: under load it includes the
    # load's own floor (memory traffic, stalled SMs), which idle power does not.
    n_par = 4

    # 1. grid over the kink; the linear parameters are exact at each grid point. (Starting
    # from the scan's exact best slope per ridge instead finds lower-SSE fits but moved the
    # simulated V100's optimum one step, +1.18 %: docs/mutation.md, Tried and not kept.)
    best = None
    grid = [(float(x.max()), 0.0)]  # no slope: the ridge is irrelevant, try it once
    grid += [
        (r, b) for r in np.linspace(x.min(), x.max(), 41) for b in np.geomspace(0.05, 30.0, 40)
    ]
    for r, b in grid:
        c0, a = _linear(x, y, r, b)
        if a <= 0:
            continue
        sse_rb = float(np.sum((formulas.power_w(x, c0, a, r, b) - y) ** 2))
        if best is None or sse_rb < best[0] - 1e-15:
            best = (sse_rb, c0, a, r, b)
    if best is None:
        raise CalibrationError("power does not rise with clock: no CMOS power model fits", raw)
    _, c0, a, r, b = best

    # 2. refine all parameters together, within the physical region: idle power >= 0,
    # alpha >= 0 (0 is no CMOS law: refused below), the ridge within the probed clocks. A
    # ridge below the lowest probe is no ridge the data can tell from the lowest probe itself
    # (V = 1 + b·(f - r) is then c·(1 + b/c·(f - f_min)) at every probe, and c² goes into
    # alpha), so the lowest probe bounds it.
    def model(params, xs):
        c, aa, rr, bb = params
        return formulas.power_w(xs, c, aa, rr, bb)

    def sse(params) -> float:
        return float(np.sum((model(params, x) - y) ** 2))

    lower = [0.0, 0.0, float(x.min()), 0.0]
    upper = [np.inf, np.inf, 1.0, np.inf]
    start = np.clip([c0, a, r, b], lower, upper)
    sol = least_squares(lambda q: model(q, x) - y, start, bounds=(lower, upper), method="trf")
    # TRF does not end above its start in practice; keep whichever is better all the same
    params = min((sol.x, start), key=sse)
    c0, a, r, b = (float(v) for v in params)
    if not a > 0:
        raise CalibrationError("power does not rise with clock: no CMOS power model fits", raw)

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
    lo_r, hi_r = _ridge_interval(x, y, float(np.sum(resid**2)), n_par, r)
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


def _ridge_scan(x: np.ndarray, *extra: float) -> np.ndarray:
    """The ridges (normalised) on which the interval is scanned: RIDGE_SCAN
    points evenly over the probed range, every probe, and ``extra`` (sorted, distinct)."""
    grid = np.linspace(float(x.min()), float(x.max()), RIDGE_SCAN)
    return np.unique(np.concatenate([grid, x, np.asarray(extra, dtype=float)]))


def _slope_candidates(x: np.ndarray, y: np.ndarray, r: float):
    """(SSE, slope) of every candidate for the best fit of y = c0 + a·x·V² with the ridge held
    at ``r`` (normalised units), c0 >= 0, a > 0 and slope b >= 0, the linear c0 and a solved
    exactly.

    The best fit has c0 > 0 (then it is a stationary point of the fit with c0 free) or c0 = 0
    (a stationary point of the fit through the origin), so the candidates are those of both
    families (:func:`_ratio_candidates`): the free family's where its c0 >= 0, the origin
    family's where it fits better than the flat line (otherwise the best fit at that slope
    is a = 0, no CMOS law; that family is only needed when the free family's best has
    c0 < 0). Every candidate is a feasible fit, so the least of them is the least SSE.
    None: no fit (no candidates)."""
    d = np.maximum(0.0, x - r)
    basis = np.stack([x, 2.0 * x * d, x * d * d])  # g = basis[0] + b·basis[1] + b²·basis[2]
    mean_g = basis.mean(axis=1)
    y_mean = float(y.mean())
    syy = float(np.sum((y - y_mean) ** 2))
    free = _ratio_candidates(basis - mean_g[:, None], y - y_mean, mean_g)
    found = [(sse, b) for sse, b, a_mean_g in free if y_mean - a_mean_g >= 0.0]  # c0 >= 0
    if found and min(c[0] for c in found) <= min(c[0] for c in free):
        return found  # the free family's best has c0 >= 0: no bounded fit does better
    found += [(sse, b) for sse, b, _ in _ratio_candidates(basis, y, None) if sse < syy]
    return found


def _ratio_candidates(basis: np.ndarray, y: np.ndarray, mean_g: Optional[np.ndarray]):
    """(SSE, slope, a·mean(g)) of every stationary slope of the one-term fit y ≈ a·g(b), with
    g = basis[0] + b·basis[1] + b²·basis[2] (centred sums when ``mean_g`` is given: the fit
    with an intercept; raw sums without: the fit through the origin), a > 0, b >= 0.

    Its explained sum of squares is N(b)²/D(b), N = S(g·y) quadratic and D = S(g·g) quartic
    in b. Its maximum over b >= 0 lies at b = 0, at a real positive root of the quintic
    2·N'·D - N·D' = 0, or at b -> inf (slope ``math.inf``). Only candidates with N > 0 (a > 0)
    count. ``a·mean(g)`` (0 without ``mean_g``) gives the intercept c0 = mean(y) - a·mean(g)."""
    from numpy.polynomial import polynomial as poly

    syy = float(y @ y)
    num = basis @ y  # N(b) = num[0] + num[1]·b + num[2]·b²
    gg = basis @ basis.T
    power = np.arange(len(num))  # D(b) = sum of gg[i, j]·b^(i + j)
    den = np.bincount(np.add.outer(power, power).ravel(), weights=gg.ravel())
    stationary = poly.polysub(
        2.0 * poly.polymul(poly.polyder(num), den), poly.polymul(num, poly.polyder(den))
    )
    slopes = [0.0]
    if np.any(stationary != 0.0):
        # every root's real part, clipped to b >= 0: a complex pair's is a feasible slope too,
        # whose SSE cannot undercut the true minimum (at b = 0 or at a real root)
        roots = poly.polyroots(poly.polytrim(stationary))
        slopes += [max(0.0, float(z.real)) for z in roots]
    found = []
    for b in slopes:
        n_b = float(poly.polyval(b, num))
        if n_b > 0:  # then D(b) > 0 too (Cauchy-Schwarz: N² <= D·S(y·y))
            d_b = float(poly.polyval(b, den))
            a_mean_g = 0.0 if mean_g is None else n_b / d_b * float(poly.polyval(b, mean_g))
            found.append((max(syy - n_b * n_b / d_b, 0.0), b, a_mean_g))
    if num[2] > 0:  # b -> inf: N/b² -> S(x·d²·y), D/b⁴ -> S((x·d²)²), a·b² -> N/D·b²
        a_mean_g = 0.0 if mean_g is None else num[2] / den[4] * float(mean_g[2])
        found.append((max(syy - num[2] * num[2] / den[4], 0.0), math.inf, a_mean_g))
    return found


def _profile_sse(x: np.ndarray, y: np.ndarray, r: float) -> float:
    """The profile SSE at ridge ``r``: the least SSE over slope and linear parameters (the
    infimum, so b -> inf counts); inf when no slope gives a > 0."""
    return min((c[0] for c in _slope_candidates(x, y, r)), default=math.inf)


def _ridge_interval(x: np.ndarray, y: np.ndarray, sse_fit: float, n_par: int, r_fit: float):
    """Profile-likelihood interval of the ridge (normalised units): every ridge r whose best
    fit (the other parameters re-fitted) has SSE(r) <= SSE_min·(1 + F(1, dof; q)/dof), with
    q = RIDGE_LR_QUANTILE and SSE_min the least of the fit's and the scan's. Its ends are the
    outermost scanned ridges under that limit, moved out to where the profile crosses it
    (Brent's method, to RIDGE_XTOL); it always holds the fitted ridge ``r_fit``. Without
    residual degrees of freedom it spans the probed range (NaN: no points)."""
    dof = len(x) - n_par
    if len(x) == 0:
        return math.nan, math.nan
    if dof <= 0:
        return float(x.min()), float(x.max())
    return _ridge_ends(_RidgeProfile.scan(x, y, sse_fit, dof, r_fit), RIDGE_LR_QUANTILE)


@dataclass(frozen=True)
class _RidgeProfile:
    """The profile SSE of the ridge scanned once (``rs``, ``prof``), for the interval's ends
    at any quantile (`_ridge_ends`); ``floor``: the least limit (the profile at the fitted
    ridge, and the profile's rounding)."""

    x: np.ndarray
    y: np.ndarray
    dof: int
    rs: np.ndarray
    prof: np.ndarray
    sse_min: float
    floor: float

    @classmethod
    def scan(cls, x: np.ndarray, y: np.ndarray, sse_fit: float, dof: int, r_fit: float):
        rs = _ridge_scan(x, r_fit)
        prof = np.array([_profile_sse(x, y, float(r)) for r in rs])
        sse_min = min(float(prof.min()), sse_fit)
        # never under the profile at the fitted ridge (which the interval holds), nor under
        # the profile's rounding: syy - N²/D cancels to about eps·syy, so on exact data a
        # profile that is flat at zero (a straight line: no kink to place) is not split by
        # its noise
        syy = float(np.sum((y - y.mean()) ** 2))
        at_fit = float(prof[np.searchsorted(rs, r_fit)])
        floor = max(at_fit, len(x) * np.finfo(float).eps * syy)
        return cls(x, y, dof, rs, prof, sse_min, floor)


def _ridge_ends(scan: _RidgeProfile, quantile: float) -> Tuple[float, float]:
    """The interval's ends at the limit SSE_min·(1 + F(1, dof; ``quantile``)/dof)."""
    from scipy.optimize import brentq
    from scipy.stats import f as f_dist

    x, y, rs, prof = scan.x, scan.y, scan.rs, scan.prof
    limit = scan.sse_min * (1.0 + float(f_dist.ppf(quantile, 1, scan.dof)) / scan.dof)
    limit = max(limit, scan.floor)
    inside = np.nonzero(prof <= limit)[0]
    first, last = int(inside.min()), int(inside.max())

    def over(r: float) -> float:
        return _profile_sse(x, y, r) - limit

    def crossing(i_in: int, i_out: int) -> float:
        return float(brentq(over, rs[i_in], rs[i_out], xtol=RIDGE_XTOL))

    lo = crossing(first, first - 1) if first > 0 else float(rs[0])
    hi = crossing(last, last + 1) if last < len(rs) - 1 else float(rs[-1])
    return lo, hi


def _numeric_jacobian(fun, params, eps: float = 1e-7) -> np.ndarray:
    base = fun(params)
    cols = []
    for i in range(len(params)):
        step = np.array(params, dtype=float)
        h = eps * max(1.0, abs(step[i]))
        step[i] += h
        cols.append((fun(step) - base) / h)
    return np.stack(cols, 1)
