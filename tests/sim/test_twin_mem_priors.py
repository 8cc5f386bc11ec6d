"""A twin at a lower memory clock than its main sweep's (governor/devices/sim/fit.py): the
overlap exponent, the activity's split and the voltage floor there are priors until enough
rows at that memory clock fit them. Expected values are read from the Titan X sweeps."""

from __future__ import annotations

from pathlib import Path

import pytest

from governor.devices.replay_files import read_sweep
from governor.devices.sim.fit import MEM_BUSY_SHARE, MEM_OVERLAP_K, TwinSweeps, twin_board
from governor.devices.sim.physics import Workload

PAIRS = Path(__file__).resolve().parents[1] / "data" / "gpuptx_titanx"


def _pair(app):
    return (
        read_sweep(PAIRS / f"titanx_{app}_mem3505.csv"),
        read_sweep(PAIRS / f"titanx_{app}_mem810.csv"),
    )


def _at_810(board, clock_mhz):
    w = board.workloads["compute"]
    return board.steady_gpu_power_w(clock_mhz, w, 810.0), w.time_per_unit_s(clock_mhz, 810.0)


def test_overlap_exponent_is_per_memory_clock():
    w = Workload("w", 1000.0, 1e-3, 8.0, mem_clock_mhz=3505.0, overlap_k_at={810.0: 2.0})
    w810 = Workload("w", 1000.0, 1e-3, 8.0, mem_clock_mhz=3505.0)
    # at the main memory clock (and one not listed) the workload's own k; at 810 its own
    assert w.time_per_unit_s(900.0, 3505.0) == w810.time_per_unit_s(900.0, 3505.0)
    assert w.time_per_unit_s(900.0, 1500.0) == w810.time_per_unit_s(900.0, 1500.0)
    c, tm = 1000.0 / 900.0, 1e-3 * 3505.0 / 810.0
    assert w.time_per_unit_s(900.0, 810.0) == pytest.approx((c**2 + tm**2) ** 0.5)
    with pytest.raises(ValueError):
        Workload("w", 1000.0, 1e-3, 8.0, overlap_k_at={810.0: 0.5})


def test_an_app_memory_bound_only_at_810_loses_power_there_as_its_SMs_wait():
    """blackscholes computes flat out at 3505 MHz and waits on memory at 810 MHz (its run
    time there is the same at every core clock): its power rises half as steeply with the
    core clock. One 810 MHz row and the busy share carry that; before the share was a prior
    the twin missed the ends of the sweep by 23-47 %."""
    hi, lo = _pair("blackscholes")
    j = len(lo) // 2
    board = twin_board(TwinSweeps(hi, 3505.0, {810.0: lo.rows({j})}))
    work = board.workloads["compute"]
    assert work.a_busy == pytest.approx(MEM_BUSY_SHARE)
    assert work.overlap_k_at == {810.0: MEM_OVERLAP_K}
    for f, p, t in zip(lo.clock_mhz, lo.power_w, lo.time_s):
        power, time = _at_810(board, f)
        assert power == pytest.approx(p, rel=0.10)
        assert time == pytest.approx(t, rel=0.03)


def test_three_rows_at_810_fit_its_overlap_exponent():
    """syrk's run time at 810 MHz falls with the core clock more gently than the prior
    exponent says; three rows there (lowest, middle, highest) fit a softer one, which
    predicts the rows between them better than the prior."""
    hi, lo = _pair("syrk")
    rows = {0, len(lo) // 2, len(lo) - 1}
    fitted = twin_board(TwinSweeps(hi, 3505.0, {810.0: lo.rows(rows)}))
    k = fitted.workloads["compute"].overlap_k_at[810.0]
    assert k < MEM_OVERLAP_K
    prior = twin_board(TwinSweeps(hi, 3505.0, {810.0: lo.rows({len(lo) // 2})}))

    def worst_time_error(board):
        return max(
            abs(_at_810(board, f)[1] / t - 1)
            for i, (f, t) in enumerate(zip(lo.clock_mhz, lo.time_s))
            if i not in rows
        )

    assert worst_time_error(fitted) < worst_time_error(prior)
