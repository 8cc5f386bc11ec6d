"""The power-cap policy's second knob (issue 48 item 5): on a simulated board with a memory
axis and the profile's (core, memory) pair, a compute-bound phase runs the pair's lower
memory clock and the watts it saves go to the core clock, so the board does more work than
with the memory clock pinned (the core-only baseline) under the same cap, and the cap still
holds; a memory-bound phase keeps the default memory clock; the governor's memory-clock
lock is undone when it stops. Every assertion reads the simulated board's own memory clock,
lock, power figure and work, in virtual time, with no background thread."""

from __future__ import annotations

import pytest
from test_mem_knob import DEFAULT_MEM, PAIR_MEM, _with_pair

import governor
from governor.runtime import Governor
from governor.runtime.simulate import simulate, trace_segments

BOARD = "agx-orin"
SHARE = 0.8  # the cap: this share of the top clock's power figure on the compute load


def _cap_w(name=BOARD):
    return SHARE * simulate(name, {"policy": "max"}, "steady", 10.0)["mean_power_w"]


def _capped(doc, trace, cap_w, duration_s=40.0, pin=None, name=BOARD, dither=True, margin=0.03):
    """Run the power-cap policy at ``cap_w`` over ``trace`` on sim:NAME: per period (load,
    memory clock and power figure the board ran at), the board's memory clock and lock after
    the governor stopped, and the work it did."""
    dev = governor.open_device(f"sim:{name}")
    if pin is not None:
        dev.lock_mem_clock(pin)
    seen = []
    try:
        spec = {"policy": "power-cap", "cap_w": cap_w, "dither": dither, "margin": margin}
        gov = Governor(dev, spec, profile=doc, background=False, handle_signals=False)
        segments = trace_segments(trace, duration_s)
        gov.start()
        current = "unset"
        for k in range(int(round(duration_s / gov.interval_s))):
            t = k * gov.interval_s
            load = [w for start, w in segments if start <= t + 1e-9][-1]
            if load != current:
                dev.run_workload(load) if load else dev.stop_workload()
                current = load
            gov.step()
            sample = dev.sample()
            seen.append((load, sample.mem_clock_mhz, sample.power_w))
        gov.stop()
        after = (dev.sample().mem_clock_mhz, dev.state().mem_clock_mhz)
        work = dev.work_done()
    finally:
        dev.restore()
    return seen, after, work


def _held(seen, cap_w):
    """The power figure's mean over every 1 s window (10 periods) after the first second."""
    power = [p for _, _, p in seen]
    return max(sum(power[i - 10 : i]) / 10 for i in range(20, len(power) + 1)) <= cap_w


def test_compute_phase_runs_the_pairs_memory_clock_and_does_more_work_under_the_cap(
    profile_of,
):
    doc, cap = _with_pair(profile_of(BOARD)), _cap_w()
    seen, after, two = _capped(doc, "steady", cap)
    pinned, pinned_after, one = _capped(doc, "steady", cap, pin=DEFAULT_MEM)
    mems = [m for _, m, _ in seen]
    assert mems[0] == DEFAULT_MEM  # the load is not known yet: the default
    assert mems.count(PAIR_MEM) > 0.7 * len(mems)
    assert two > 1.005 * one  # the watts the memory saved went to the core clock
    assert _held(seen, cap) and _held(pinned, cap)
    assert after == (DEFAULT_MEM, None)  # the governor's lock undone with its layer
    assert {m for _, m, _ in pinned} == {DEFAULT_MEM}  # pinned: the core clock alone
    assert pinned_after == (DEFAULT_MEM, DEFAULT_MEM)  # the lock below the governor stays


def test_memory_bound_phase_keeps_the_default_memory_clock_under_the_cap(profile_of):
    doc, cap = _with_pair(profile_of(BOARD)), _cap_w()
    seen, after, _ = _capped(doc, "memory", cap)
    mems = [m for _, m, _ in seen]
    assert mems.count(DEFAULT_MEM) >= len(mems) - 3  # a test now and then, one period each
    assert _held(seen, cap)
    assert after == (DEFAULT_MEM, None)


def test_compute_then_memory_under_the_cap_each_phase_at_its_memory_clock(profile_of):
    doc, cap = _with_pair(profile_of(BOARD)), _cap_w()
    seen, after, _ = _capped(doc, "compute:1,memory:1", cap)
    compute = [m for load, m, _ in seen if load == "compute"]
    memory = [m for load, m, _ in seen if load == "memory"]
    assert compute.count(PAIR_MEM) > 0.6 * len(compute)
    assert memory.count(DEFAULT_MEM) >= len(memory) - 3
    assert _held(seen, cap)
    assert after == (DEFAULT_MEM, None)


@pytest.mark.parametrize("with_pair", [False, True])
def test_without_a_tested_pair_the_cap_governs_the_core_clock_alone(profile_of, with_pair):
    """No pair, or a pair written by hand without its probes (no drop to test against)."""
    doc = _with_pair(profile_of(BOARD), probes=False) if with_pair else profile_of(BOARD)
    cap = _cap_w()
    seen, after, _ = _capped(doc, "steady", cap, duration_s=10.0)
    assert {m for _, m, _ in seen} == {DEFAULT_MEM}
    assert after == (DEFAULT_MEM, None)


def _figure_w(core_mhz, mem_mhz):
    """The board's power figure running the compute load at (core, memory), steady."""
    dev = governor.open_device(f"sim:{BOARD}")
    try:
        dev.run_workload("compute")
        dev.lock_mem_clock(mem_mhz)
        dev.lock_gpu_clocks(core_mhz, core_mhz)
        dev.clock.sleep(30.0)
        return dev.sample().power_w
    finally:
        dev.restore()


def test_without_dither_every_period_stays_under_the_cap_across_memory_clock_changes(
    profile_of,
):
    """Without dither the cap holds period by period. The cap lies between 1122 MHz's power
    at the pair's memory clock and at the default (margin 0.5 %): the pair's lower memory clock lets the
    core clock run at 1122 MHz, and each return to the default memory clock (a check every
    2 s) comes with the lower core clock it needs, never a period over the cap."""
    core = 1122.0
    low_w, default_w = _figure_w(core, PAIR_MEM), _figure_w(core, DEFAULT_MEM)
    cap = (low_w + 0.5) / 0.995  # the cap less its margin: 0.5 W above the pair's power
    assert cap < default_w  # 1122 MHz at the default memory clock would go over it
    doc = _with_pair(profile_of(BOARD))
    seen, _, two = _capped(doc, "steady", cap, dither=False, margin=0.005)
    _, _, one = _capped(doc, "steady", cap, dither=False, margin=0.005, pin=DEFAULT_MEM)
    moves = sum(1 for a, b in zip(seen, seen[1:]) if a[1] != b[1])
    assert moves > 10  # the memory clock moved (the checks), and
    assert max(p for _, _, p in seen[20:]) <= cap  # no period went over the cap
    assert two > 1.05 * one  # 1122 MHz at the pair's memory clock, not the step below


def test_another_policy_puts_the_default_memory_clock_back(profile_of):
    """Leaving the power-cap policy while the pair's memory clock runs: the default memory
    clock again at once (the governor's lock kept until it stops, then undone)."""
    dev = governor.open_device(f"sim:{BOARD}")
    try:
        spec = {"policy": "power-cap", "cap_w": _cap_w()}
        doc = _with_pair(profile_of(BOARD))
        gov = Governor(dev, spec, profile=doc, background=False, handle_signals=False)
        dev.run_workload("compute")
        gov.start()
        for _ in range(50):
            gov.step()
        assert dev.sample().mem_clock_mhz == PAIR_MEM
        gov.set_policy({"policy": "max"})
        assert dev.sample().mem_clock_mhz == DEFAULT_MEM
        for _ in range(30):
            gov.step()
        assert dev.sample().mem_clock_mhz == DEFAULT_MEM
        gov.stop()
        assert dev.state().mem_clock_mhz is None
    finally:
        dev.restore()


def _battery_spec(duration_s=60.0):
    budget = 0.75 * simulate(BOARD, {"policy": "max"}, "steady", duration_s)["board_energy_j"]
    return {"policy": "battery", "energy_j": budget, "duration_s": duration_s, "scope": "board"}


@pytest.mark.parametrize("first", ["battery", "power-cap"])
def test_switching_between_battery_and_power_cap_keeps_governing_the_memory_clock(
    profile_of, first
):
    """A running governor switched between the battery and the power-cap policy (both
    govern the memory clock with a pair): the old policy's memory clock is put back at the
    default at once, and the new policy's knob lowers it to the pair's on the compute-bound
    load, without a restart; the governor's lock is undone when it stops."""
    specs = {"battery": _battery_spec(), "power-cap": {"policy": "power-cap", "cap_w": _cap_w()}}
    second = "power-cap" if first == "battery" else "battery"
    dev = governor.open_device(f"sim:{BOARD}")
    try:
        doc = _with_pair(profile_of(BOARD))
        gov = Governor(dev, specs[first], profile=doc, background=False, handle_signals=False)
        dev.run_workload("compute")
        gov.start()
        for _ in range(50):
            gov.step()
        assert dev.sample().mem_clock_mhz == PAIR_MEM  # the first policy's knob
        gov.set_policy(specs[second])
        assert dev.sample().mem_clock_mhz == DEFAULT_MEM  # put back at the switch
        assert gov.applied_mem_clock_mhz == DEFAULT_MEM
        mems = []
        for _ in range(80):
            gov.step()
            mems.append(dev.sample().mem_clock_mhz)
        assert mems.count(PAIR_MEM) > 0.5 * len(mems), mems  # the second policy's knob
        gov.set_policy(specs[first])  # and back again
        for _ in range(80):
            gov.step()
        assert dev.sample().mem_clock_mhz == PAIR_MEM
        gov.stop()
        assert dev.state().mem_clock_mhz is None
        assert dev.sample().mem_clock_mhz == DEFAULT_MEM
    finally:
        dev.restore()
