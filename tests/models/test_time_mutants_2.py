"""Tests written against survivors of the 2026-11-25 (session 27) mutation runs of
governor/models/time.py (docs/mutation.md, "Re-measured on the current code")."""

import numpy as np
import pytest

from governor.models import formulas
from governor.models.time import fit_time_model

CLOCKS_MHZ = np.linspace(300.0, 1500.0, 9)


@pytest.mark.parametrize(
    "k, t_mem_s, c_s_mhz",
    [
        (2.0, 0.2, 200.0),  # the crossover (1000 MHz) inside the sweep
        (2.0, 2.0, 3000.0),  # the crossover (1500 MHz) at the top clock
        (8.0, 0.5, 200.0),  # memory-bound above 400 MHz: compute shows at the lowest clocks
    ],
)
def test_a_sharp_roofline_with_its_form_given_is_fitted_exactly_on_exact_data(k, t_mem_s, c_s_mhz):
    # Noise-free times made by the model's own form must give back its parameters: the
    # robust loss is zero there. (Kills :140, the compute part's optimiser scale t·f -> t/f:
    # with the scale off by f² the trust-region fit stops early, 0.07 % off at k = 2, and at
    # k = 8 it settles on c 75 % low.)
    time_s = formulas.time_s(CLOCKS_MHZ, t_mem_s, c_s_mhz, k, 0.0, 1.0, 0.0)
    model = fit_time_model(CLOCKS_MHZ, time_s, forms=[(k, 0.0)])
    assert model.k == k
    assert model.t_mem_s == pytest.approx(t_mem_s, rel=1e-5)
    assert model.c_s_mhz == pytest.approx(c_s_mhz, rel=1e-5)
    assert model.max_rel_residual < 1e-6
