"""The battery policy's second knob (issue 48 item 5): on a simulated board with a memory
axis the battery policy chooses the memory clock beside the core clock (the profile's pair's
memory clock in a compute-bound phase, the default in a memory-bound one, the lowest in a
wait), through the device's journaled lock, restored when the governor lets the device go;
a pinned memory clock (a lock held below the governor, as ``--mem-clock`` takes) leaves it
the core clock alone. Every assertion reads the simulated board's own memory clock and
state (what it runs at), in virtual time, with no background thread (but ``governor run``'s,
whose job runs in real time: its report's mean memory clock)."""

from __future__ import annotations

import copy
import json
import sys
import time

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


def test_the_report_gives_the_mean_memory_clock_the_board_ran_at(profile_of):
    """``Governor.report()["mean_mem_clock_mhz"]``: the time mean of the memory clock the
    board ran at, period by period (read from the simulated board itself after each step:
    the clock the next period runs at), while the knob moves it between the default and
    the pair's."""
    doc = _with_pair(profile_of(BOARD))
    spec = {"policy": "battery", "energy_j": 1e6, "duration_s": 30.0, "scope": "board"}
    dev = governor.open_device(f"sim:{BOARD}")
    try:
        gov = Governor(dev, spec, profile=doc, background=False, handle_signals=False)
        dev.run_workload("compute")
        gov.start()
        ran = [dev.true_mem_clock_mhz()]  # the first period's
        for _ in range(200):
            gov.step()
            ran.append(dev.true_mem_clock_mhz())
        gov.stop()  # no time since the last step: no period added
        report = gov.report()
    finally:
        dev.restore()
    periods = ran[:-1]  # the last step's clock ran no period
    assert {DEFAULT_MEM, PAIR_MEM} <= set(periods)  # the knob moved it
    assert report["mean_mem_clock_mhz"] == pytest.approx(sum(periods) / len(periods))


def test_run_json_out_reports_the_mean_memory_clock_not_the_start(
    profile_of, capsys, tmp_path, monkeypatch
):
    """``governor run --json-out``'s ``mem_clock_mhz`` on a simulated board whose memory
    clock the battery policy's knob moves during the job: the mean over the job (below the
    default it started at, above the pair's it ran at most of the time), to 0.1 MHz as
    ``simulate --json`` gives it. The job (real time) ends only once the board itself has
    run a second below its default memory clock, however slowly a busy machine runs it."""
    import threading

    from cli_helpers import run_cli

    from governor.devices import registry
    from governor.profiles.store import profile_paths, write_profile_file

    write_profile_file(profile_paths(BOARD)[0], _with_pair(profile_of(BOARD)))
    opened, lowered = [], tmp_path / "lowered"
    real_open = registry.open_device

    def open_and_keep(*args, **kwargs):
        dev = real_open(*args, **kwargs)
        opened.append(dev)
        return dev

    def watch():  # the board's own memory clock, not the governor's view of it
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not lowered.exists():
            if opened and opened[0].true_mem_clock_mhz() < DEFAULT_MEM:
                time.sleep(1.0)
                lowered.write_text("")
            time.sleep(0.02)

    monkeypatch.setattr(registry, "open_device", open_and_keep)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    out = tmp_path / "report.json"
    # 40 W over the hour: near the top core clock (43.5 W), where the knob tests the pair
    options = ("--policy", "battery", "--battery-wh", "40", "--hours", "1")
    wait = f"import os,time\nt=time.time()+120\nwhile not os.path.exists({str(lowered)!r}) and time.time()<t: time.sleep(0.05)"
    job = (sys.executable, "-c", wait)
    code, _, err = run_cli(
        capsys, "run", "--device", f"sim:{BOARD}", *options, "--json-out", out, "--", *job
    )
    watcher.join()
    assert code == 0, err
    assert lowered.exists(), "the board's memory clock never left its default"
    report = json.loads(out.read_text())
    assert PAIR_MEM < report["mem_clock_mhz"] < DEFAULT_MEM, report
    assert report["mem_clock_mhz"] == round(report["mem_clock_mhz"], 1)
