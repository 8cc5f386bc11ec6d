"""Time per unit of work as a function of the GPU clock.

    t(f) = (t_mem^k + (c/f)^k)^(1/k) + t_low·(f_low/f)^n

(evaluated by :func:`governor.models.formulas.time_s`). ``t_mem >= 0`` (s) is the memory
part, ``c >= 0`` (s·MHz) the compute part, ``k >= 1`` how sharply they overlap (1: they add
up, the two-term model; larger: a smooth roofline). The last term, zero unless the data asks
for it, is run time rising faster than 1/f at low clocks: real V100 sweeps rise up to 4x
faster than 1/f below ~700 MHz (clock-domain crossings and latency-bound phases that the
roofline has no word for). ``f_low`` is the lowest fitted clock, ``n`` a fixed exponent.

The form is chosen by held-out error (leave-one-out: each point predicted by a fit to the
others), not by in-sample fit, so a form with more freedom wins only when it predicts better.
Every fit is robust (soft-L1 loss on relative residuals, scipy's ``least_squares``): one
outlier row (a run disturbed by something else) barely moves it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from governor.documents import DocReader
from governor.errors import CalibrationError
from governor.models import formulas

__all__ = ["TimeModel", "fit_time_model"]

#: roofline sharpness tried beyond k = 1, softest first (of equals, the first tried wins)
_KS = (1.5, 2.0, 3.0, 4.0, 8.0, 16.0)
#: exponents of the low-clock term tried, gentlest first
_LOW_EXPS = (2.0, 3.0, 4.0, 6.0)
#: a point missed by more than this (relative) is not explained
MAX_REL_RESIDUAL = 0.08
#: soft-L1 scale: relative residuals well below it count as squares, above it as |r|
ROBUST_SCALE = 0.02


@dataclass(frozen=True)
class TimeModel:
    t_mem_s: float
    c_s_mhz: float
    k: float = 1.0
    uncertainty: Dict[str, float] = field(default_factory=dict)
    max_rel_residual: float = 0.0
    low_s: float = 0.0
    low_ref_mhz: float = 1.0
    low_exp: float = 0.0
    #: mean leave-one-out relative error of the chosen form (NaN: fewer than 4 points, or a
    #: single form offered, so nothing was chosen)
    loo_rel_error: float = math.nan
    #: the highest clock the model was fitted on (MHz); memory_bound_share is taken there
    top_clock_mhz: float = math.nan
    form: str = "roofline"

    def time_s(self, clock_mhz):
        """Seconds per unit of work at ``clock_mhz`` (scalar or array)."""
        f = np.asarray(clock_mhz, dtype=float)
        t = np.asarray(
            formulas.time_s(
                f, self.t_mem_s, self.c_s_mhz, self.k, self.low_s, self.low_ref_mhz, self.low_exp
            )
        )
        return float(t) if t.ndim == 0 else t

    def memory_share(self, clock_mhz: float) -> float:
        """The memory part's share of the time at ``clock_mhz`` (0: compute-bound, 1: memory)."""
        return float(min(1.0, self.t_mem_s / self.time_s(clock_mhz)))

    @property
    def memory_bound_share(self) -> float:
        """The memory part's share of the time at the highest fitted clock (0-1)."""
        top = self.top_clock_mhz
        if not math.isfinite(top):
            if self.t_mem_s <= 0:
                return 0.0  # no memory part: none of the time is memory's, at any clock
            top = self.c_s_mhz / self.t_mem_s
        return self.memory_share(top)

    def to_dict(self) -> Dict[str, object]:
        return {
            "form": "t = (t_mem_s^k + (c_s_mhz / f)^k)^(1/k) + low_s * (low_ref_mhz / f)^low_exp",
            "kind": self.form,
            "t_mem_s": self.t_mem_s,
            "c_s_mhz": self.c_s_mhz,
            "k": self.k,
            "low_s": self.low_s,
            "low_ref_mhz": self.low_ref_mhz,
            "low_exp": self.low_exp,
            "uncertainty": dict(self.uncertainty),
            "max_rel_residual": self.max_rel_residual,
            "loo_rel_error": None if math.isnan(self.loo_rel_error) else self.loo_rel_error,
            "top_clock_mhz": None if math.isnan(self.top_clock_mhz) else self.top_clock_mhz,
            "memory_bound_share": self.memory_bound_share,
        }

    @classmethod
    def from_dict(
        cls, doc: Mapping[str, object], where: str = "time_model", path: object = None
    ) -> TimeModel:
        """The model of :meth:`to_dict`'s object (a profile's ``time_model`` at ``where`` in
        the file ``path``); a field that is null or missing takes the dataclass's default.

        Raises:
            ProfileError: a field missing or of the wrong type (names the file and the field).
        """
        r = DocReader.of(doc, where, path)
        return cls(
            t_mem_s=r.float("t_mem_s"),
            c_s_mhz=r.float("c_s_mhz"),
            k=r.float("k", 1.0),
            uncertainty=r.float_map("uncertainty"),
            max_rel_residual=r.float("max_rel_residual", 0.0),
            low_s=r.float("low_s", 0.0),
            low_ref_mhz=r.float("low_ref_mhz", 1.0),
            low_exp=r.float("low_exp", 0.0),
            loo_rel_error=r.float("loo_rel_error", math.nan),
            top_clock_mhz=r.float("top_clock_mhz", math.nan),
            form=r.str("kind", "roofline"),
        )


# A form is (k, low_exp); low_exp 0 means no low-clock term.
_Form = Tuple[float, float]


def _forms(n: int) -> List[_Form]:
    forms: List[_Form] = [(1.0, 0.0)]
    if n >= 4:
        forms += [(k, 0.0) for k in _KS]
        forms += [(1.0, e) for e in _LOW_EXPS]
    return forms


def _fit_form(f: np.ndarray, t: np.ndarray, form: _Form, f_low: float):
    """Robust fit of one form; returns (t_mem, c, low_s) in seconds and s·MHz."""
    from scipy.optimize import least_squares, nnls

    k, e = form
    cols = [np.ones_like(f), 1.0 / f] + ([(f_low / f) ** e] if e else [])
    design = np.stack(cols, 1) / t[:, None]
    start, _ = nnls(design, np.ones_like(t))  # exact for k = 1 without outliers
    scale = np.array([max(float(t.min()), 1e-300), max(float(t.min() * f.min()), 1e-300)])
    if e:
        scale = np.append(scale, max(float(t.min()), 1e-300))

    def resid(q):
        tm, c = q[0] * scale[0], q[1] * scale[1]
        low = q[2] * scale[2] if e else 0.0
        return formulas.time_s(f, tm, c, k, low, f_low, e) / t - 1.0

    x0 = np.maximum(start / scale, 1e-9)
    if k != 1.0:  # the linear start is for k = 1: a sharper roofline needs a larger t_mem
        x0[0] = max(x0[0], 0.9 * float(t.min()) / scale[0])
    sol = least_squares(
        resid, x0, bounds=(0.0, np.inf), loss="soft_l1", f_scale=ROBUST_SCALE, method="trf"
    )
    q = sol.x * scale
    return float(q[0]), float(q[1]), float(q[2]) if e else 0.0


def _predict(f, params, form: _Form, f_low: float):
    tm, c, low = params
    return formulas.time_s(np.asarray(f, dtype=float), tm, c, form[0], low, f_low, form[1])


def _loo(f: np.ndarray, t: np.ndarray, form: _Form, f_low: float) -> float:
    """Mean held-out relative error, each point capped at 25 % so one outlier row weighs on
    every form alike instead of deciding the choice."""
    errs = []
    for i in range(len(f)):
        keep = np.arange(len(f)) != i
        params = _fit_form(f[keep], t[keep], form, f_low)
        errs.append(min(0.25, abs(float(_predict(f[i], params, form, f_low)) / t[i] - 1.0)))
    return float(np.mean(errs))


def fit_time_model(
    clock_mhz: Sequence[float], time_s: Sequence[float], *, forms: Optional[List[_Form]] = None
) -> TimeModel:
    """Fit t(f) to measured time per unit of work; the form is chosen by leave-one-out error.

    Raises:
        CalibrationError: fewer than 2 clocks, bad values, or no form explains the data.
    """
    f = np.asarray(clock_mhz, dtype=float)
    t = np.asarray(time_s, dtype=float)
    raw = {"clock_mhz": f.tolist(), "time_s": t.tolist()}
    if f.shape != t.shape or f.ndim != 1:
        raise CalibrationError("clocks and times must be equal-length lists", raw)
    if not (np.all(np.isfinite(t)) and np.all(t > 0) and np.all(f > 0) and np.all(np.isfinite(f))):
        raise CalibrationError("time model: times must be positive finite numbers", raw)
    if len(np.unique(f)) < 2:
        raise CalibrationError("time model needs at least 2 distinct clocks", raw)
    f_low = float(f.min())
    candidates = forms if forms is not None else _forms(len(f))
    if len(f) >= 4 and len(candidates) > 1:
        scored = []
        for form in candidates:
            n_par = 2 + (1 if form[0] != 1.0 else 0) + (1 if form[1] else 0)
            if len(f) - 1 < n_par:
                continue
            scored.append((_loo(f, t, form, f_low), n_par, form))
        # the simplest form within 0.2 % of the best held-out error
        best_err = min(s[0] for s in scored)
        loo_err, _, form = min((s for s in scored if s[0] <= best_err + 0.002), key=lambda s: s[1])
    else:
        form, loo_err = candidates[0], math.nan
    tm, c, low = _fit_form(f, t, form, f_low)
    rel = np.abs(_predict(f, (tm, c, low), form, f_low) / t - 1.0)
    # robust: with 6+ points one outlier row may miss; the rest must be explained (there are
    # always more points than that: at least 2)
    allowed = 1 if len(f) >= 6 else 0
    err = float(np.sort(rel)[::-1][allowed])
    model = TimeModel(
        t_mem_s=tm,
        c_s_mhz=c,
        k=form[0],
        max_rel_residual=float(rel.max()),
        low_s=low,
        low_ref_mhz=f_low if form[1] else 1.0,
        low_exp=form[1],
        loo_rel_error=loo_err,
        top_clock_mhz=float(f.max()),
        form=("two-term" if form[0] == 1.0 else "roofline")
        + (f" + low-clock (f_low/f)^{form[1]:g}" if form[1] else ""),
    )
    if err > MAX_REL_RESIDUAL:
        raise CalibrationError(
            f"the time model does not explain the measurements (off by {100 * err:.0f} %); raw points kept",
            dict(raw, model=model.to_dict()),
        )
    return model
