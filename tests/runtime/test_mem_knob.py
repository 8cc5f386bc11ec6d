"""The battery policy's second knob (issue 48 item 5): on a simulated board with a memory
axis the battery policy chooses the memory clock beside the core clock (the profile's pair's
memory clock in a compute-bound phase, the default in a memory-bound one, the lowest in a
wait), through the device's journaled lock, restored when the governor lets the device go;
a pinned memory clock (a lock held below the governor, as ``--mem-clock`` takes) leaves it
the core clock alone. Every assertion reads the simulated board's own memory clock and
state (what it runs at), in virtual time, with no background thread."""

from __future__ import annotations

import copy

import pytest

import governor
from governor.runtime import Governor
from governor.runtime.simulate import simulate, trace_segments

BOARD = "agx-orin"
DEFAULT_MEM = 3199.0
PAIR_MEM = 204.0


def _with_pair(doc, mem_mhz=PAIR_MEM, probes=True, name=BOARD, core_mhz=918.0):
    """``doc`` with the pair ``governor calibrate`` keeps (``tuning.ppw-pair``): its probes
    at 918 MHz on the default and the pair's memory clock, board power from the simulated
    board's physics (``probes=False``: a pair written by hand, without them)."""
    from governor.devices.sim.catalog import get_board

    board = get_board(name)
    default = board.default_mem_clock_mhz
    load = board.workloads["compute"]
    rows = [
        {
            "clock_mhz": core_mhz,
            "mem_clock_mhz": m,
            "power_w": board.board_power_w(board.steady_gpu_power_w(core_mhz, load, m)),
            "time_s": load.time_per_unit_s(core_mhz, m),
        }
        for m in (default, mem_mhz)
    ]
    entry = {"clock_mhz": core_mhz, "mem_clock_mhz": mem_mhz, "default_mem_clock_mhz": default}
    if probes:
        entry["probes"] = rows
    out = copy.deepcopy(doc)
    out.setdefault("tuning", {})["ppw-pair"] = {out["load"]["name"]: entry}
    return out


def _mission(doc, trace, duration_s=60.0, pin=None, name=BOARD):
    """Run the battery policy over ``trace`` on sim:NAME (agx-orin); per period (load, memory clock
    the board ran at), and the board's memory clock and lock after the governor stopped."""
    budget = 0.75 * simulate(name, {"policy": "max"}, trace, duration_s)["board_energy_j"]
    spec = {"policy": "battery", "energy_j": budget, "duration_s": duration_s, "scope": "board"}
    dev = governor.open_device(f"sim:{name}")
    if pin is not None:
        dev.lock_mem_clock(pin)
    seen = []
    try:
        gov = Governor(dev, spec, profile=doc, background=False, handle_signals=False)
        segments = trace_segments(trace, duration_s)
        gov.start()
        steps = int(round(duration_s / gov.interval_s))
        current = "unset"
        for k in range(steps):
            t = k * gov.interval_s
            load = [w for start, w in segments if start <= t + 1e-9][-1]
            if load != current:
                dev.run_workload(load) if load else dev.stop_workload()
                current = load
            gov.step()
            seen.append((load, dev.sample().mem_clock_mhz))
        gov.stop()
        after = (dev.sample().mem_clock_mhz, dev.state().mem_clock_mhz)
        work = dev.work_done()
    finally:
        dev.restore()
    return seen, after, work


def test_compute_phase_runs_the_pairs_memory_clock_and_stop_restores(profile_of):
    seen, after, _ = _mission(_with_pair(profile_of(BOARD)), "steady")
    mems = [m for _, m in seen]
    assert mems[0] == DEFAULT_MEM  # the load is not known yet: the default
    # compute-bound: the pair's memory clock, but for a period at the default every 2 s
    assert mems.count(PAIR_MEM) > 0.8 * len(mems)
    assert after == (DEFAULT_MEM, None)  # the governor's lock undone with its layer


def test_a_pair_without_probes_is_not_tested_so_not_used_while_busy(profile_of):
    seen, _, _ = _mission(_with_pair(profile_of(BOARD), probes=False), "steady")
    assert {m for _, m in seen} == {DEFAULT_MEM}


def test_nano_compute_then_memory_runs_each_phase_at_its_memory_clock(profile_of):
    """nano's memory-bound load draws about as much as its compute-bound one, so its power
    alone does not tell them apart; at the pair's 204 MHz it runs seven times slower.
    The compute half runs at the pair's memory clock, the memory half at the default."""
    doc = _with_pair(profile_of("nano"), name="nano", core_mhz=614.4)
    seen, after, _ = _mission(doc, "compute:1,memory:1", name="nano")
    compute = [m for load, m in seen if load == "compute"]
    memory = [m for load, m in seen if load == "memory"]
    assert compute.count(204.0) > 0.8 * len(compute)
    assert memory.count(1600.0) >= len(memory) - 3
    assert after == (1600.0, None)


def test_memory_bound_phase_keeps_the_default_memory_clock(profile_of):
    seen, after, _ = _mission(_with_pair(profile_of(BOARD)), "memory")
    assert {m for _, m in seen} == {DEFAULT_MEM}
    assert after == (DEFAULT_MEM, None)


def test_step_mission_follows_the_phases(profile_of):
    seen, _, _ = _mission(_with_pair(profile_of(BOARD)), "step", 90.0)
    compute = [m for load, m in seen if load == "compute"]
    memory = [m for load, m in seen[len(seen) // 3 * 2 + 30 :] if load == "memory"]
    assert compute.count(PAIR_MEM) > 0.5 * len(compute)
    assert memory and set(memory) == {DEFAULT_MEM}  # back to the default after the step


def test_a_wait_runs_the_lowest_memory_clock(profile_of):
    seen, after, _ = _mission(_with_pair(profile_of(BOARD), 2133.0), "idle:3,compute:1")
    idle = [m for load, m in seen if load is None]
    assert idle.count(204.0) > 0.5 * len(idle)  # the table's lowest, not the pair's
    assert after == (DEFAULT_MEM, None)


def test_a_pinned_memory_clock_leaves_the_core_clock_alone(profile_of):
    seen, after, _ = _mission(_with_pair(profile_of(BOARD)), "idle:1,compute:1", pin=DEFAULT_MEM)
    assert {m for _, m in seen} == {DEFAULT_MEM}
    assert after == (DEFAULT_MEM, DEFAULT_MEM)  # the lock below the governor stays


def test_without_a_pair_only_waits_move_the_memory_clock(profile_of):
    seen, _, _ = _mission(profile_of(BOARD), "steady")
    assert {m for _, m in seen} == {DEFAULT_MEM}


@pytest.mark.parametrize("trace", ["steady", "idle:3,compute:1"])
def test_two_knobs_do_more_work_than_the_core_clock_alone(profile_of, trace):
    doc = _with_pair(profile_of(BOARD))
    _, _, two = _mission(doc, trace)
    _, _, one = _mission(doc, trace, pin=DEFAULT_MEM)
    assert two > 1.005 * one


def test_the_kernel_configurations_follow_the_memory_clock_the_knob_sets(profile_of):
    """Each memory clock the knob writes is the one ``kernel_config`` answers for: after
    every step, ``applied_mem_clock_mhz`` is the board's own memory clock, and the memory
    clock's moves alone reach the kernel follower (its callbacks see both clocks)."""
    doc = _with_pair(profile_of(BOARD))
    budget = 0.75 * simulate(BOARD, {"policy": "max"}, "idle:1,compute:1", 30.0)["board_energy_j"]
    spec = {"policy": "battery", "energy_j": budget, "duration_s": 30.0, "scope": "board"}
    dev = governor.open_device(f"sim:{BOARD}")
    moves = []
    try:
        gov = Governor(dev, spec, profile=doc, background=False, handle_signals=False)
        follower = gov._follower()
        real = follower.clock_changed
        follower.clock_changed = lambda core, mem: moves.append(mem) or real(core, mem)
        gov.start()
        for k in range(300):
            dev.stop_workload() if k < 150 else dev.run_workload("compute")
            gov.step()
            assert gov.applied_mem_clock_mhz == dev.sample().mem_clock_mhz
        gov.stop()
        assert gov.applied_mem_clock_mhz is None  # let go: the board's default again
    finally:
        dev.restore()
    assert {204.0, DEFAULT_MEM} <= set(moves)  # the wait's lowest, the default, the pair's
