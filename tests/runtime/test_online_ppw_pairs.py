"""Online PPW over both knobs (issue 48 item 5): with no profile and the app reporting its
work, the PPW policy searches the memory clock at the core search's first clock and the core
clock at the memory clock found, through the device's journaled lock; without the work, or
with the memory clock pinned, the core clock alone. Assertions read the simulated board's
own clocks, in virtual time."""

from __future__ import annotations

import math

import governor
from governor.devices.sim.catalog import get_board
from governor.runtime import Governor

_PAIRS: list = []  # the (core, memory) clocks the board ran at, per period of the last run


def _run(ticks: bool, pin=None, seconds=120.0):
    """Per period the memory clock sim:agx-orin ran at, the search's result, the board's
    memory clock and lock after the governor stopped."""
    dev = governor.open_device("sim:agx-orin")
    try:
        if pin is not None:
            dev.lock_mem_clock(pin)
        dev.run_workload("compute")
        gov = Governor(dev, {"policy": "ppw"}, profile=False, background=False)
        seen = []
        pairs = _PAIRS
        pairs.clear()
        with gov:
            done = 0
            for _ in range(int(seconds / gov.interval_s)):
                if ticks:  # whole units, as an app counts frames
                    now = math.floor(dev.work_done())
                    if now > done:
                        gov.tick(float(now - done))
                    done = now
                gov.step()
                seen.append(dev.true_mem_clock_mhz())
                pairs.append((dev.sample().gpu_clock_mhz, dev.true_mem_clock_mhz()))
            result = gov.status()["online_ppw"]
        after = (dev.true_mem_clock_mhz(), dev.state().mem_clock_mhz)
        dev.stop_workload()
    finally:
        dev.restore()
    return seen, result, after


def test_with_the_apps_work_both_knobs_are_searched_and_the_pair_held():
    seen, result, after = _run(ticks=True)
    table = get_board("agx-orin").mem_clocks_mhz
    assert result is not None and result["mem_clock_mhz"] in table
    assert len(set(seen)) >= 3  # the memory axis was probed
    assert seen[-1] == result["mem_clock_mhz"] < 3199.0  # compute-bound: a lower one held
    assert after == (3199.0, None)  # the governor's lock undone when it stopped


def test_without_the_apps_work_the_memory_clock_is_not_searched():
    seen, result, _ = _run(ticks=False)
    assert result is not None and "mem_clock_mhz" not in result
    assert set(seen) == {3199.0}


def test_a_pinned_memory_clock_is_searched_around_not_moved():
    seen, result, after = _run(ticks=True, pin=3199.0)
    assert result is not None and "mem_clock_mhz" not in result
    assert set(seen) == {3199.0} and after == (3199.0, 3199.0)


def test_the_core_clock_is_searched_at_the_memory_clock_found():
    # sim:agx-orin's compute load: 1020 MHz is the cheapest core clock at the default memory
    # clock (3199 MHz); at 204 MHz 918 and 1020 MHz cost the same within 0.1 % (the
    # simulator's steady state). The memory axis is searched at the core search's first
    # clock, and the core search goes on at the memory clock found: several core clocks
    # run at 204 MHz, and the pair held is one of them
    _, result, _ = _run(ticks=True, seconds=150.0)
    assert result is not None and result["mem_clock_mhz"] == 204.0
    at_found = [core for core, mem in _PAIRS if mem == 204.0]
    assert {918.0, 1020.0} <= set(at_found) and len(set(at_found)) >= 3
    assert result["clock_mhz"] in (918.0, 1020.0)
    assert _PAIRS[-1] == (result["clock_mhz"], 204.0)
