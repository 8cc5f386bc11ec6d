"""An independent reference for the ridge's profile SSE, shared by the power-model tests:
written from the model's definition in MHz and W, without the library's scan, grids or
scaling, so a test can check the library's ridge interval against it."""

from __future__ import annotations

import math

import numpy as np


def profile_sse_w2(f, p, ridge_mhz):
    """The least SSE (W²) of P = p0 + alpha·f·V² with the ridge held at ``ridge_mhz``, within
    the physical region: p0 >= 0 and alpha > 0 by linear least squares (on the boundary
    p0 = 0 when the free intercept is negative; no fit when the flat line does as well),
    beta >= 0 by a bounded search over log(beta)."""
    from scipy.optimize import minimize_scalar

    flat = float(np.sum((p - p.mean()) ** 2))

    def sse(beta):
        g = f * (1.0 + beta * np.maximum(0.0, f - ridge_mhz)) ** 2
        design = np.stack([np.ones_like(f), g], 1)
        coef, *_ = np.linalg.lstsq(design, p, rcond=None)
        if coef[0] >= 0:
            return float(np.sum((design @ coef - p) ** 2)) if coef[1] > 0 else math.inf
        through_origin = float(np.sum((g * (g @ p) / (g @ g) - p) ** 2))
        return through_origin if through_origin < flat else math.inf

    best = sse(0.0)
    for lo, hi in ((-9.0, -5.0), (-5.0, -3.0), (-3.0, -1.0)):
        found = minimize_scalar(
            lambda u: sse(10.0**u), bounds=(lo, hi), method="bounded", options={"xatol": 1e-6}
        )
        best = min(best, float(found.fun))
    return best
