"""The Governor on simulated boards in deterministic stepping: clocks, restore, status,
fallbacks, safe hold, lock, cached tuning choices."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

import governor
from governor.devices.lock import DeviceLock
from governor.errors import DeviceBusyError, GovernorError, InvalidRequestError, UnsupportedError
from governor.runtime import Governor, policies


def test_ppw_applies_the_profiles_clock_and_restores(orin, profile_of):
    doc = profile_of("agx-orin")
    gov = Governor(orin, {"policy": "ppw"}, profile=doc, background=False)
    with gov:
        assert orin.state().gpu_clocks_mhz == (doc["ppw_optimal_clock_mhz"],) * 2
        assert orin.changed and orin.journal.originals() == {"gpu_clocks": None}
        gov.step()
        status = gov.status()
        assert status["clock_mhz"] == doc["ppw_optimal_clock_mhz"]
        assert status["model"]["fitted"] and not status["safe_hold"] and status["notes"] == []
    assert orin.state().gpu_clocks_mhz is None and not orin.changed and not orin.owned


def test_ppw_uses_the_workloads_own_optimum(orin, profile_of):
    doc = dict(profile_of("agx-orin"))
    mem = dict(doc["workloads"]["builtin"], ppw_optimal_clock_mhz=612.0)
    doc["workloads"] = dict(doc["workloads"], memory=mem)
    with Governor(orin, {"policy": "ppw", "workload": "memory"}, profile=doc, background=False):
        assert orin.state().gpu_clocks_mhz == (612.0, 612.0)
    with Governor(
        orin, {"policy": "ppw", "workload": "video"}, profile=doc, background=False
    ) as gov:
        assert orin.state().gpu_clocks_mhz[0] == doc["ppw_optimal_clock_mhz"]
        assert "no calibration of workload 'video'" in gov.status()["notes"][0]


def test_missing_profile_falls_back_and_says_so(orin):
    with Governor(orin, policies.MaxEfficiency(), background=False) as gov:
        status = gov.status()
        assert not status["model"]["fitted"]
        assert "no profile for agx-orin" in status["notes"][0]
        assert "guessed at 75%" in status["notes"][0]
        # the PPW clock is then searched for online, starting at the golden-section probe
        assert "finding the PPW clock online" in status["notes"][1]
        assert status["clock_mhz"] in orin.supported_clocks_mhz()
    assert not orin.changed


def test_profile_found_by_lookup(orin, profile_of):
    from governor.profiles.store import profile_paths, write_profile_file

    path = write_profile_file(profile_paths("agx-orin")[0], profile_of("agx-orin"))
    with Governor(orin, {"policy": "ppw"}, background=False) as gov:
        assert gov.status()["profile_path"] == str(path)


def test_max_and_clock_policies(orin):
    with Governor(orin, {"policy": "max"}, background=False):
        assert orin.state().gpu_clocks_mhz == (1300.5, 1300.5)
    with Governor(orin, {"policy": "clock", "clock_mhz": 700}, background=False):
        assert orin.state().gpu_clocks_mhz == (714.0, 714.0)


def test_restores_when_the_app_raises(orin):
    with pytest.raises(RuntimeError, match="boom"):
        with Governor(orin, {"policy": "max"}, background=False) as gov:
            gov.step()
            raise RuntimeError("boom")
    assert orin.state().gpu_clocks_mhz is None and not orin.changed


def test_restores_on_keyboard_interrupt(orin):
    with pytest.raises(KeyboardInterrupt):
        with Governor(orin, {"policy": "max"}, background=False):
            raise KeyboardInterrupt
    assert not orin.changed


def test_stop_is_safe_to_repeat_and_step_needs_start(orin):
    gov = Governor(orin, {"policy": "max"}, background=False)
    with pytest.raises(GovernorError):
        gov.step()
    gov.start()
    assert gov.stop() == {"gpu_clocks": None}
    assert gov.stop() == {}
    assert not orin.changed


def test_background_thread_controls_a_real_time_board():
    dev = governor.open_device("sim:agx-orin?realtime=1")
    dev.run_workload("compute")
    gov = Governor(dev, {"policy": "power-cap", "cap_w": 25}, interval_s=0.02)
    gov.start()
    try:
        with pytest.raises(GovernorError):
            gov.step()  # the thread owns the loop
        deadline = time.monotonic() + 30.0
        while gov.status()["steps"] < 10 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert gov.status()["steps"] >= 10
        assert dev.state().gpu_clocks_mhz is not None  # it took control
    finally:
        gov.stop()
    assert not dev.changed
    dev.close()


def test_a_background_governor_on_virtual_time_raises_instead_of_idling(orin):
    with pytest.raises(InvalidRequestError, match="virtual time"):
        Governor(orin, {"policy": "max"}).start()
    assert not orin.changed and not orin.owned


def test_stale_lock_of_a_dead_process_is_taken_over(tmp_path):
    code = (
        "import os, sys, time\n"
        "from governor.devices.lock import DeviceLock\n"
        "DeviceLock('test:gpu').acquire(); print('held', flush=True); time.sleep(60)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        with pytest.raises(DeviceBusyError, match=f"pid {child.pid}"):
            DeviceLock("test:gpu").acquire()
    finally:
        child.kill()
        child.wait()
    with DeviceLock("test:gpu") as lock:  # the kernel dropped the dead holder's lock
        assert lock.holder()["pid"] == __import__("os").getpid()


def test_device_without_clock_control_is_refused():
    dev = governor.open_device("sim:agx-orin")
    dev.capabilities = type(dev.capabilities)(power=True)
    with pytest.raises(UnsupportedError, match="cannot lock its GPU clock"):
        Governor(dev, {"policy": "max"}, background=False).start()


def test_failing_telemetry_holds_the_lowest_clock_known_to_fit():
    dev = governor.open_device("sim:agx-orin?fail_rate=0")
    dev.run_workload("compute")
    with Governor(dev, {"policy": "power-cap", "cap_w": 25}, background=False) as gov:
        for _ in range(50):
            gov.step()
        fit = gov.controller.safe_mhz(0)
        assert fit < 1300.5
        dev._fail_rate = 1.0  # every read fails from now on
        for _ in range(5):
            gov.step()
        status = gov.status()
        assert status["safe_hold"] and "telemetry failed" in status["safe_hold_reason"]
        assert status["clock_mhz"] == fit
        dev._fail_rate = 0.0
        for _ in range(5):
            gov.step()
        assert not gov.status()["safe_hold"]
    assert not dev.changed


def test_stuck_power_sensor_is_detected():
    dev = governor.open_device("sim:agx-orin?stuck_after_s=5")
    dev.run_workload("compute")
    with Governor(dev, {"policy": "power-cap", "cap_w": 25}, background=False) as gov:
        for _ in range(100):
            gov.step()
        status = gov.status()
        assert status["safe_hold"] and "stuck" in status["safe_hold_reason"]


def test_upward_changes_are_rate_limited_downward_ones_are_not(orin):
    orin.run_workload("compute")
    gov = Governor(orin, {"policy": "power-cap", "cap_w": 25}, background=False, min_dwell_s=1.0)
    with gov:
        clocks = []
        for _ in range(100):
            gov.step()
            clocks.append(gov.applied_clock_mhz)
    ups = [i for i in range(1, len(clocks)) if clocks[i] > clocks[i - 1]]
    assert all(b - a >= 10 for a, b in zip(ups, ups[1:]))  # at most one rise per 1 s
    assert any(clocks[i] < clocks[i - 1] for i in range(1, len(clocks)))


def test_cached_tiles_and_block_sizes(orin):
    from governor.profiles.store import put_tuning

    with Governor(orin, {"policy": "max"}, background=False) as gov:
        tiles, why = gov.tiles("gemm")
        assert tiles is None and "no tiles cached for gemm/double on agx-orin" in why
        assert not gov.block_size("vector-add")
        put_tuning("agx-orin", "tiles", "gemm/double", {"tiles": {"i": 32, "j": 64}})
        put_tuning(
            "agx-orin", "blocks", "vector-add@energy", {"blocks": [[256, 1, 1]], "clock_mhz": 918.0}
        )
        assert gov.tiles("gemm").value == {"i": 32, "j": 64}
        block = gov.block_size("vector-add")
        assert block.value == (256, 1, 1) and "918 MHz" in block.reason


def test_tick_drives_status_rate(orin):
    with Governor(orin, {"policy": "throughput", "rate_hz": 30}, background=False) as gov:
        for _ in range(30):
            for _ in range(3):
                gov.tick()
            gov.step()
        assert gov.status()["rate_hz"] == pytest.approx(30, rel=0.05)


def test_set_policy_changes_the_running_policy_without_a_restore(orin, profile_of):
    doc = profile_of("agx-orin")
    orin.run_workload("compute")
    gov = Governor(orin, {"policy": "max"}, profile=doc, background=False)
    with gov:
        for _ in range(20):
            gov.step()
        top = orin.supported_clocks_mhz()[-1]
        assert orin.state().gpu_clocks_mhz == (top, top)
        energy_before = gov.report()["energy_j"]
        releases = []
        real_release = orin.release
        orin.release = lambda: releases.append(1) or real_release()  # type: ignore[method-assign]
        gov.set_policy({"policy": "ppw"})
        # applied at once, not at the next step, and the device was never let go
        assert orin.state().gpu_clocks_mhz == (doc["ppw_optimal_clock_mhz"],) * 2
        assert releases == [] and orin.owned and gov.running
        assert gov.status()["policy"] == "ppw"
        for _ in range(20):
            gov.step()
        assert gov.report()["energy_j"] > energy_before  # one meter across both policies
        with pytest.raises(InvalidRequestError):
            gov.set_policy({"policy": "power-cap"})  # no cap: refused, the old policy stays
        assert gov.policy.name == "ppw"
        assert orin.state().gpu_clocks_mhz == (doc["ppw_optimal_clock_mhz"],) * 2
    assert len(releases) == 1 and not orin.changed


def test_a_battery_policy_set_mid_run_budgets_from_then_on(orin, profile_of):
    """The budget counts energy from set_policy(), not what the earlier policy used."""
    doc = profile_of("agx-orin")
    orin.run_workload("compute")
    gov = Governor(orin, {"policy": "max"}, profile=doc, background=False)
    with gov:
        for _ in range(100):  # 10 s at the top clock
            gov.step()
        used_before = gov.report()["energy_j"]
        budget = 0.5 * used_before  # less than what was used before the change
        gov.set_policy({"policy": "battery", "energy_j": budget, "duration_s": 10, "scope": "gpu"})
        for _ in range(100):
            gov.step()
        status = gov.status()
        used_after = gov.report()["energy_j"] - used_before
    # not exhausted by the earlier policy's joules: spent by the end of its own 10 s
    assert status["exhausted_at_s"] is None or status["exhausted_at_s"] >= 9.5
    assert used_after == pytest.approx(budget, rel=0.05)
    assert status["remaining_j"] == pytest.approx(budget - used_after, abs=0.02 * budget)


def test_set_policy_from_another_thread_while_the_loop_runs(profile_of):
    from governor.timebase import WallClock

    dev = governor.open_device("sim:agx-orin", clock=WallClock())
    dev.run_workload("compute")
    gov = Governor(dev, {"policy": "max"}, profile=profile_of("agx-orin"), interval_s=0.01)
    with gov:
        time.sleep(0.1)
        for spec in ({"policy": "ppw"}, {"policy": "clock", "clock_mhz": 612}, {"policy": "max"}):
            gov.set_policy(spec)
            time.sleep(0.05)
        gov.set_policy({"policy": "clock", "clock_mhz": 612})
        time.sleep(0.05)
        assert dev.state().gpu_clocks_mhz == (612.0, 612.0)
        assert gov.status()["errors"] == []
    dev.close()


def test_admit_takes_every_frame_without_a_battery_floor(orin):
    gov = Governor(orin, {"policy": "throughput", "rate_hz": 30}, background=False)
    assert gov.admit()  # not running: nothing to hold back
    with gov:
        assert all(gov.admit() for _ in range(100))
        assert "admitted_rate_hz" not in gov.status()


def test_admit_reports_the_admitted_rate_with_a_battery_floor(orin):
    spec = {"policy": "throughput", "rate_hz": 30, "energy_j": 1e6, "hours": 1}
    with Governor(orin, spec, background=False) as gov:
        assert gov.admit()
        gov.tick(1, busy_s=0.01)
        status = gov.step()
        assert status["admitted_rate_hz"] == 30.0 and status["admitting"]
