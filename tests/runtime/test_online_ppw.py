"""--policy ppw with no profile finds the PPW clock during the job (the simulator's truth)."""

from __future__ import annotations

import pytest

import governor
from governor.devices.sim.catalog import get_board
from governor.runtime import Governor
from governor.runtime.simulate import simulate


@pytest.mark.parametrize("board", ["orin-nano", "agx-orin", "rtx-a4000", "titan-x"])
def test_finds_a_clock_within_2_percent_of_the_true_optimum_within_60_s(board, profile_of):
    spec = get_board(board)
    load = spec.workloads["compute"]
    out = simulate(board, {"policy": "ppw"}, "steady", 60, profile=False)
    found = out["online_ppw"]
    assert found is not None and found["found_after_s"] <= 60
    best = min(spec.clocks_mhz, key=lambda f: spec.steady_energy_per_unit_j(f, load))
    energy = spec.steady_energy_per_unit_j(found["clock_mhz"], load)
    assert energy <= 1.02 * spec.steady_energy_per_unit_j(best, load)
    calibrated = profile_of(board)["ppw_optimal_clock_mhz"]
    assert energy <= 1.02 * spec.steady_energy_per_unit_j(calibrated, load)
    assert any("found online" in n for n in out["notes"])


def test_the_clock_found_is_kept_for_the_next_run():
    from governor.profiles.store import profile_paths, read_profile_file

    first = simulate("agx-orin", {"policy": "ppw"}, "steady", 30, profile=False)
    clock = first["online_ppw"]["clock_mhz"]
    # kept in the board's (user) profile, which passes the schema and is no calibration
    path = profile_paths("agx-orin")[0]
    kept = read_profile_file(path)["tuning"]["online_ppw"]["builtin"]
    assert kept["clock_mhz"] == clock and kept["probes"] == first["online_ppw"]["probes"]
    assert any(str(path) in n for n in first["notes"])
    with governor.open_device("sim:agx-orin") as dev:
        dev.run_workload("compute")
        gov = Governor(dev, {"policy": "ppw"}, profile=False, background=False)
        assert any(
            f"PPW clock {clock:g} MHz found online by an earlier run" in n for n in gov.notes
        )
        with gov:
            for _ in range(5):
                gov.step()
            assert dev.sample().gpu_clock_mhz == clock  # no probing this time
        dev.stop_workload()


def test_probes_pause_while_the_gpu_idles():
    with governor.open_device("sim:orin-nano") as dev:
        gov = Governor(dev, {"policy": "ppw"}, profile=False, background=False)
        with gov:
            for _ in range(100):  # 10 s idle: nothing measured
                gov.step()
            assert gov.status()["probes_done"] == 0
            dev.run_workload("compute")
            for _ in range(300):
                gov.step()
            assert gov.status()["online_ppw"] is not None
            dev.stop_workload()


def test_with_ticks_the_cost_is_energy_per_unit_of_work():
    with governor.open_device("sim:l4") as dev:
        dev.run_workload("compute")
        gov = Governor(dev, {"policy": "ppw"}, profile=False, background=False)
        with gov:
            done = dev.work_done()
            for _ in range(600):
                gov.step()
                now = dev.work_done()
                gov.tick(now - done)
                done = now
            result = gov.status()["online_ppw"]
        dev.stop_workload()
    spec = get_board("l4")
    load = spec.workloads["compute"]
    best = min(spec.clocks_mhz, key=lambda f: spec.steady_energy_per_unit_j(f, load))
    assert result["cost"] == "energy per unit of work"
    assert spec.steady_energy_per_unit_j(result["clock_mhz"], load) <= 1.02 * (
        spec.steady_energy_per_unit_j(best, load)
    )


def test_a_malformed_online_ppw_entry_in_a_profile_is_refused_by_the_schema(tmp_path):
    from governor.errors import ProfileError
    from governor.profiles.store import read_profile_file

    bad = tmp_path / "agx-orin.json"
    bad.write_text(
        '{"schema_version": 1, "board": "agx-orin", '
        '"tuning": {"online_ppw": {"builtin": {"clock_mhz": -5}}}}'
    )
    with pytest.raises(ProfileError, match="tuning.online_ppw.builtin.clock_mhz"):
        read_profile_file(bad)
