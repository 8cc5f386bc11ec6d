"""--policy ppw with a profile that is not the unit's own (a shipped reference, another unit's
calibration): its PPW clock is where a search starts, confirmed or moved by measurement and
kept in the board's own profile (the simulator's truth)."""

from __future__ import annotations

import copy

import pytest

import governor
from governor.devices.sim.catalog import get_board
from governor.runtime import Governor
from governor.runtime.ppw_local import LocalSearch, ProbeMeter
from governor.runtime.simulate import simulate


def _per_unit(out):
    return out["energy_j"] / out["work_done"]


def _best_fixed_per_unit(board, duration_s):
    spec = get_board(board)
    load = spec.workloads["compute"]
    ranked = sorted(spec.clocks_mhz, key=lambda f: spec.steady_energy_per_unit_j(f, load))
    return min(
        _per_unit(simulate(board, {"policy": "clock", "clock_mhz": f}, "steady", duration_s))
        for f in ranked[:3]
    )


@pytest.mark.parametrize("start", [0, 7, 12, 19])
def test_local_search_ends_on_the_minimum_of_a_convex_table(start):
    costs = [(i - 12) ** 2 + 5.0 for i in range(20)]
    search = LocalSearch(n=20, start=start, step=3)
    while (i := search.next_probe()) is not None:
        search.record(i, costs[i])
    assert search.best == 12
    assert len(search.costs) <= 12  # a search of the neighbourhood, not of the table


def test_local_search_stops_at_its_probe_budget_on_the_cheapest_tried():
    search = LocalSearch(n=200, start=0, step=1, max_probes=5)
    while (i := search.next_probe()) is not None:
        search.record(i, 100.0 - i)  # cheaper all the way up
    assert len(search.costs) == 5 and search.best == max(search.costs)


def test_probe_meter_leaves_out_the_settling_time():
    meter = ProbeMeter(settle_s=0.3, measure_s=1.0)
    for _ in range(3):
        meter.add(1000.0, 0.1, 0.0)  # settling: not counted, however high
    for _ in range(10):
        assert not meter.done
        meter.add(50.0, 0.1, 2.0)
    assert meter.done
    assert meter.cost(1000.0) == pytest.approx(50.0 / 20.0)  # J per unit: 50 J over 20 units
    meter.units = 0.0
    assert meter.cost(1000.0) == pytest.approx(50.0 / 1000.0)  # J per (MHz·s)


def test_shipped_reference_profile_is_a_prior_moved_to_this_units_optimum_and_kept():
    from governor.profiles.store import profile_paths, read_profile_file

    board, duration = "a100-pcie", 300
    first = simulate(board, {"policy": "ppw"}, "steady", duration)
    found = first["online_ppw"]
    assert found is not None and found["found_after_s"] <= 60
    assert found["prior_clock_mhz"] == first["model"]["ppw_clock_mhz"]
    assert first["model"]["prior"] is True
    best = _best_fixed_per_unit(board, duration)
    assert _per_unit(first) <= 1.01 * best
    # the reference's own clock, held for the whole run, costs more than that
    held = simulate(
        board, {"policy": "clock", "clock_mhz": found["prior_clock_mhz"]}, "steady", duration
    )
    assert _per_unit(held) > _per_unit(first)
    kept = read_profile_file(profile_paths(board)[0])["tuning"]["online_ppw"]["builtin"]
    assert kept["clock_mhz"] == found["clock_mhz"]
    with governor.open_device(f"sim:{board}") as dev:
        dev.run_workload("compute")
        gov = Governor(dev, {"policy": "ppw"}, background=False)
        with gov:
            for _ in range(100):  # held from the first period on, not searched again
                gov.step()
                assert dev.sample().gpu_clock_mhz == found["clock_mhz"]
        dev.stop_workload()


def test_another_units_calibration_is_searched_around_and_the_units_own_is_held(profile_of):
    board = "agx-orin"
    own = profile_of(board)  # calibrated on sim:agx-orin (seed 0: this unit's serial)
    other = copy.deepcopy(own)
    other["fingerprint"]["serial"] = "SIM-agx-orin-7"  # made on another unit
    clocks = get_board(board).clocks_mhz
    other["ppw_optimal_clock_mhz"] = clocks[clocks.index(own["ppw_optimal_clock_mhz"]) - 2]

    searched = simulate(board, {"policy": "ppw"}, "steady", 60, profile=other)
    assert searched["online_ppw"]["prior_clock_mhz"] == other["ppw_optimal_clock_mhz"]
    load = get_board(board).workloads["compute"]
    spec = get_board(board)
    energy = spec.steady_energy_per_unit_j(searched["online_ppw"]["clock_mhz"], load)
    assert energy <= 1.005 * min(spec.steady_energy_per_unit_j(f, load) for f in clocks)

    held = simulate(board, {"policy": "ppw"}, "steady", 60, profile=own)
    assert held["online_ppw"] is None and held["model"]["prior"] is False
    assert held["clock_changes"] <= 1  # the calibrated clock from the first period on


def test_the_search_around_a_prior_pauses_while_the_gpu_idles():
    with governor.open_device("sim:a100-pcie") as dev:
        gov = Governor(dev, {"policy": "ppw"}, background=False)  # the shipped reference
        with gov:
            for _ in range(100):  # 10 s idle: nothing measured, the prior's clock held
                gov.step()
            assert gov.status()["probes_done"] == 0
            assert dev.sample().gpu_clock_mhz == gov.model.ppw_clock_mhz
            dev.run_workload("compute")
            for _ in range(600):
                gov.step()
            found = gov.status()["online_ppw"]
            dev.stop_workload()
    assert found is not None and found["probes"] >= 3
    assert found["prior_clock_mhz"] == gov.model.ppw_clock_mhz
