"""An edge of the power fit that the mutation runs found untested (docs/mutation.md): the
ridge interval of a fit with a single degree of freedom left."""

import numpy as np

from governor.models import formulas
from governor.models.power import fit_power_model


def _sweep(clocks_mhz, ridge_mhz, beta_per_mhz=0.002, idle_w=20.0, alpha=0.1):
    f = np.asarray(clocks_mhz, dtype=float)
    return f, formulas.power_w(f, idle_w, alpha, ridge_mhz, beta_per_mhz)


def test_five_probes_leave_one_degree_of_freedom_and_still_give_a_ridge_interval():
    """Four parameters, five probes: one degree of freedom, enough for an F-based
    interval. With a clear kink at 900 MHz and 0.3 % noise the interval is narrower than
    the probed range and holds the true ridge; only with no degree left (four probes) is
    the whole probed range the answer."""
    f, p = _sweep([500.0, 700.0, 900.0, 1100.0, 1300.0], ridge_mhz=900.0, beta_per_mhz=0.003)
    rng = np.random.default_rng(3)
    noisy = p * (1.0 + 0.003 * rng.standard_normal(len(p)))
    lo, hi = fit_power_model(f, noisy).ridge_interval_mhz
    assert lo <= 900.0 <= hi
    assert hi - lo < 0.9 * (f[-1] - f[0])
