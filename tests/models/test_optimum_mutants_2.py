"""Tests written against survivors of the 2026-11-25 (session 27) mutation runs of
governor/models/optimum.py (docs/mutation.md, "Re-measured on the current code")."""

import numpy as np

from governor.models import formulas
from governor.models.optimum import optimum_interval
from governor.models.power import PowerModel
from governor.models.time import TimeModel

PROBE_CLOCKS_MHZ = np.array([500.0, 700.0, 900.0, 1100.0, 1300.0, 1500.0])
TABLE_MHZ = [100.0 * i for i in range(5, 16)]  # 500 ... 1500 MHz


def test_at_the_median_level_the_interval_is_the_predicted_optimum_alone():
    # Kills :120 (`energy <= min * (1 + band)` -> `<`). At level 0.5 the normal quantile is
    # 0, so the band is 0 and only the clock with the least predicted energy is inside; the
    # mutant leaves no clock inside (and fails on the empty table).
    power = PowerModel(20.0, 0.03, 1100.0, 0.0015)
    time = TimeModel(0.01, 12.0)
    p = formulas.power_w(PROBE_CLOCKS_MHZ, 20.0, 0.03, 1100.0, 0.0015)
    t = 0.01 + 12.0 / PROBE_CLOCKS_MHZ
    energy_j = [power.power_w(c) * time.time_s(c) for c in TABLE_MHZ]
    best_mhz = TABLE_MHZ[int(np.argmin(energy_j))]
    interval = optimum_interval(TABLE_MHZ, PROBE_CLOCKS_MHZ, p, t, power, time, level=0.5)
    assert interval.band_rel == 0.0
    assert interval.low_mhz == interval.high_mhz == best_mhz
    # at the default level (0.9) the band is positive and the interval holds the optimum
    wide = optimum_interval(TABLE_MHZ, PROBE_CLOCKS_MHZ, p, t, power, time)
    assert wide.band_rel > 0.0 and wide.low_mhz <= best_mhz <= wide.high_mhz
