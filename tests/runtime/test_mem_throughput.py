"""The throughput policy's second knob (issue 48 item 5): on a simulated board with a memory
axis the throughput policy tries the lower memory clock beside the core clock and keeps it
only where the frames' measured time per unit did not rise (compute-bound frames), goes back
to the default at once where it did (memory-bound frames), and leaves a pinned memory clock
alone. A frame loop in virtual time times each frame at the memory clock the simulated board
runs (its own state), with no background thread."""

from __future__ import annotations

import governor
from governor.runtime import Governor

BOARD = "orin-nano"  # memory clocks 204, 665.6 and 2133 MHz; no profile: one step down
DEFAULT_MEM = 2133.0
LOW_MEM = 665.6
RATE_HZ = 30.0


def _frames(workload, seconds=40.0, pin=None, load=0.45, profile=None):
    """Frames of ``workload`` at 30 Hz (``load`` of a period at the top clock and default
    memory clock) under the throughput policy; per frame the memory clock the board ran it
    at, late frames, and the board's memory clock and lock after the governor stopped."""
    dev = governor.open_device(f"sim:{BOARD}")
    if pin is not None:
        dev.lock_mem_clock(pin)
    work = dev.board.workloads[workload]
    top = dev.supported_clocks_mhz()[-1]
    units = load / RATE_HZ / work.time_per_unit_s(top, DEFAULT_MEM)
    gov = Governor(
        dev,
        {"policy": "throughput", "rate_hz": RATE_HZ},
        profile=profile,
        background=False,
        handle_signals=False,
    )
    gov.start()
    clock, period = dev.clock, 1.0 / RATE_HZ
    t0 = clock.now_s()
    seen, late, next_step = [], 0, t0 + gov.interval_s
    for k in range(int(seconds * RATE_HZ)):
        arrival = t0 + k * period
        while next_step <= max(arrival, clock.now_s()) + 1e-9:
            clock.sleep(max(0.0, next_step - clock.now_s()))
            gov.update()
            next_step += gov.interval_s
        clock.sleep(max(0.0, arrival - clock.now_s()))
        mem = dev.true_mem_clock_mhz()
        busy = units * work.time_per_unit_s(gov.applied_clock_mhz or top, mem)
        dev.run_workload(workload)
        clock.sleep(busy)
        dev.stop_workload()
        late += clock.now_s() > arrival + period + 1e-9
        seen.append(mem)
        gov.tick(1.0, busy_s=busy)
    gov.stop()
    after = (dev.true_mem_clock_mhz(), dev.state().mem_clock_mhz)
    if pin is not None:
        dev.restore()  # the test's own pin
    return seen, late, after


def test_compute_bound_frames_hold_the_lower_memory_clock():
    seen, late, after = _frames("compute")
    last = seen[len(seen) // 2 :]
    assert LOW_MEM in seen[:300]  # tried within the first 10 s
    assert sum(m == LOW_MEM for m in last) > 0.6 * len(last)  # and held
    assert set(seen) <= {LOW_MEM, DEFAULT_MEM}
    assert after == (DEFAULT_MEM, None)  # the lock restored when the governor let go


def test_memory_bound_frames_go_back_to_the_default_at_once():
    seen, late, after = _frames("memory")
    lows = [i for i, m in enumerate(seen) if m != DEFAULT_MEM]
    assert lows  # the lower memory clock was tried
    runs = [i for i in lows if i - 1 not in lows]
    assert all(i + 1 not in lows for i in lows)  # one frame each, the default back at once
    assert len(runs) <= 2  # and not tried again before the retest's wait
    assert late <= 2 * len(runs)
    assert after == (DEFAULT_MEM, None)


def test_a_pinned_memory_clock_is_left_alone():
    seen, _, after = _frames("compute", pin=DEFAULT_MEM)
    assert set(seen) == {DEFAULT_MEM}
    assert after == (DEFAULT_MEM, DEFAULT_MEM)  # the pin (a lock below the governor) kept


def test_compute_bound_frames_walk_down_to_the_pairs_memory_clock(profile_of):
    """With the profile's pair at the lowest memory clock, the knob gets there one table step
    per test (665.6 MHz first), and holds it."""
    from test_mem_knob import _with_pair

    doc = _with_pair(profile_of(BOARD), mem_mhz=204.0, name=BOARD, core_mhz=510.0)
    seen, late, after = _frames("compute", profile=doc)
    first_low = seen.index(204.0)
    assert LOW_MEM in seen[:first_low]  # the step between came first
    last = seen[len(seen) // 2 :]
    assert sum(m == 204.0 for m in last) > 0.6 * len(last)
    assert after == (DEFAULT_MEM, None)
