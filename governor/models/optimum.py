"""How far the energy-optimal clock can be trusted: an interval from held-out error.

The fitted models put the optimum at one clock, but near a minimum the energy curve is flat:
every clock whose predicted energy per unit lies within what the models can tell apart from
the minimum may be the true optimum. What the models can tell apart is measured, not assumed:
each interior probe is left out in turn, the models refitted on the rest (same forms), and
the relative error of the predicted energy at the left-out clock recorded. With σ their robust
spread (median absolute error / 0.6745, so that the one probe that alone places the ridge does
not decide it), two predictions differ by more than noise when their gap exceeds
``z(level) · √2 · σ`` (a one-sided test on the difference of two independent errors).

    interval = { f in the clock table : E(f) <= E_min · (1 + z·√2·σ) }

reported as its lowest and highest clock. End probes are not left out: leaving the lowest
or highest clock out measures extrapolation, which the question "which clock in between is
best" does not ask (unless the optimum is at an end, where the interval then reaches the end).

Energy in J per unit of work, clocks in MHz. Pure functions of measured points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Optional, Sequence, Tuple

__all__ = ["OptimumInterval", "noise_band_rel", "optimum_interval"]

#: confidence level of the optimum interval
OPTIMUM_INTERVAL_LEVEL = 0.9
#: the held-out error never counts for less than this (relative): sensors and run-to-run
#: variation are about this large on every GPU we have data from
MIN_REL_ERROR = 0.002


@dataclass(frozen=True)
class OptimumInterval:
    """The clocks that may be the energy optimum (MHz), with the error that decided it."""

    low_mhz: float
    high_mhz: float
    #: robust spread (median |error| / 0.6745) of the predicted energy's relative error at the
    #: left-out probes (NaN: none could be left out)
    held_out_rel_error: float
    #: the energy band (relative to the minimum) inside which clocks count as optimal
    band_rel: float
    level: float = OPTIMUM_INTERVAL_LEVEL

    def to_dict(self):
        return {
            "low_mhz": self.low_mhz,
            "high_mhz": self.high_mhz,
            "held_out_rel_error": None
            if math.isnan(self.held_out_rel_error)
            else self.held_out_rel_error,
            "band_rel": self.band_rel,
            "level": self.level,
        }


def noise_band_rel(spread_rel: float, level: float = OPTIMUM_INTERVAL_LEVEL) -> float:
    """How far apart (relative) two energies must be to differ by more than noise, for
    measurements whose relative error has the robust spread ``spread_rel`` (never counted
    below ``MIN_REL_ERROR``): ``z(level) · √2 · spread``, a one-sided test on the difference
    of two independent errors."""
    spread = max(spread_rel, MIN_REL_ERROR) if math.isfinite(spread_rel) else MIN_REL_ERROR
    return NormalDist().inv_cdf(level) * math.sqrt(2.0) * spread


def _held_out_errors(f, p, t, capped, time_form) -> list:
    """Relative energy errors at each interior probe, predicted by models fitted without it."""
    import numpy as np

    from governor.errors import CalibrationError
    from governor.models.power import fit_power_model
    from governor.models.time import fit_time_model

    order = np.argsort(f)
    errs = []
    for i in order[1:-1]:
        if capped[i]:
            continue
        keep = np.arange(len(f)) != i
        try:
            pm = fit_power_model(
                f[keep], p[keep], capped=list(capped[keep]) if capped.any() else None
            )
            tm = fit_time_model(f[keep], t[keep], forms=[time_form])
        except CalibrationError:
            continue  # too few points left to fit: this probe cannot be held out
        predicted = float(pm.power_w(f[i])) * float(tm.time_s(f[i]))
        errs.append(predicted / (p[i] * t[i]) - 1.0)
    return errs


def optimum_interval(
    clocks_mhz: Sequence[float],
    probe_clock_mhz: Sequence[float],
    probe_power_w: Sequence[float],
    probe_time_s: Sequence[float],
    power_model,
    time_model,
    *,
    capped: Optional[Sequence[bool]] = None,
    chosen_mhz: Optional[float] = None,
    level: float = OPTIMUM_INTERVAL_LEVEL,
) -> OptimumInterval:
    """The interval of table clocks that may be the energy optimum (see module docstring).

    ``power_model``/``time_model`` are the fits on all probes; ``chosen_mhz`` (the clock the
    calibration chose, which may be a probe that beat the model) is always inside.
    """
    import numpy as np

    f = np.asarray(probe_clock_mhz, dtype=float)
    p = np.asarray(probe_power_w, dtype=float)
    t = np.asarray(probe_time_s, dtype=float)
    cap = np.zeros(len(f), dtype=bool) if capped is None else np.asarray(capped, dtype=bool)
    form: Tuple[float, float] = (float(time_model.k), float(time_model.low_exp))
    errs = _held_out_errors(f, p, t, cap, form)
    sigma = float(np.median(np.abs(errs))) / 0.6745 if errs else math.nan
    band = noise_band_rel(sigma if errs else time_model.max_rel_residual, level)
    table = np.asarray(sorted(clocks_mhz), dtype=float)
    energy = np.asarray(power_model.power_w(table), dtype=float) * np.asarray(
        time_model.time_s(table), dtype=float
    )
    inside = table[energy <= float(energy.min()) * (1.0 + band)]
    low, high = float(inside.min()), float(inside.max())
    if chosen_mhz is not None and math.isfinite(chosen_mhz):
        low, high = min(low, float(chosen_mhz)), max(high, float(chosen_mhz))
    return OptimumInterval(low, high, sigma, band, level)
