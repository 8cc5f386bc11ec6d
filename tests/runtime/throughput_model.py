"""A small hand-made clock table for the throughput parts' unit tests: six clocks whose
time per unit falls as 1/f and whose busy power rises with f², so every figure a test
expects can be worked out by hand."""

from __future__ import annotations

from governor.runtime.model import ClockModel

CLOCKS_MHZ = (500.0, 600.0, 700.0, 800.0, 900.0, 1000.0)
IDLE_W = 10.0


def busy_w(clock_mhz: float) -> float:
    """The busy power at a clock (W): 10 W plus 40 W at the top clock, rising with f²."""
    return IDLE_W + 40.0 * (clock_mhz / 1000.0) ** 2


def small_model(ppw_mhz: float = 700.0) -> ClockModel:
    return ClockModel(
        clocks_mhz=CLOCKS_MHZ,
        power_w=tuple(busy_w(f) for f in CLOCKS_MHZ),
        time_rel=tuple(1000.0 / f for f in CLOCKS_MHZ),
        idle_w=IDLE_W,
        ppw_clock_mhz=ppw_mhz,
        fitted=True,
        source="test",
    )
