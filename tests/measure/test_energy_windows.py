"""Energy windows measured against the simulator's truth (and the fake NVML driver)."""

from __future__ import annotations

import pytest

import governor
from governor.errors import InvalidRequestError
from governor.measure.energy import EnergyMeter, measure_energy


def _loaded(uri):
    dev = governor.open_device(uri)
    dev.run_workload("compute")
    return dev


def test_counter_board_window_is_the_true_energy():
    dev = _loaded("sim:a100-pcie")
    truth0 = dev.true_energy_j()
    with measure_energy(dev, "step") as w:
        dev.clock.sleep(3.0)
        dev.lock_gpu_clocks(dev.supported_clocks_mhz()[0])  # the load changes mid-window
        dev.clock.sleep(2.0)
    truth = dev.true_energy_j() - truth0
    dev.close()
    assert w.method == "energy counter"
    assert w.duration_s == pytest.approx(5.0)
    assert w.energy_j == pytest.approx(truth, abs=0.002)  # the counter's 1 mJ resolution
    assert w.rails_j["gpu"] == pytest.approx(truth, abs=0.002)
    assert w.board_energy_j is None  # NVML reports no board-input figure here


def test_integrated_board_tracks_the_true_rails():
    dev = _loaded("sim:orin-nano?noise=0")
    board = dev.board
    meter = EnergyMeter(dev)
    e0, t0 = dev.true_energy_j(), dev.clock.now_s()
    meter.begin_window("w")
    for i in range(100):
        dev.clock.sleep(0.05)
        meter.poll()
        if i == 50:
            dev.lock_gpu_clocks(dev.supported_clocks_mhz()[0])
    w = meter.end_window("w")
    gpu_true = dev.true_energy_j() - e0
    dt = dev.clock.now_s() - t0
    dev.close()
    other = board.domains_w
    rail_truth = gpu_true + (other["cpu"] + other["cv"]) * dt  # VDD_CPU_GPU_CV
    board_truth = (gpu_true + sum(other.values()) * dt) / board.regulator_efficiency
    assert w.method == "integrated power"
    assert w.gpu_energy_j == pytest.approx(rail_truth, rel=0.01)
    assert w.rails_j["VDD_CPU_GPU_CV"] == pytest.approx(rail_truth, rel=0.01)
    assert w.board_energy_j == pytest.approx(board_truth, rel=0.01)
    assert w.per_device[0].gpu_scope == "cpu+gpu+cv"


def test_windows_nest_and_overlap():
    dev = _loaded("sim:h100-sxm")
    meter = EnergyMeter(dev)
    meter.begin_window("a")
    dev.clock.sleep(1)
    meter.begin_window("b")
    dev.clock.sleep(1)
    a = meter.end_window("a")  # b is still open: overlapping, not nested
    dev.clock.sleep(1)
    b = meter.end_window("b")
    meter.begin_window("c")
    meter.begin_window("d")
    dev.clock.sleep(0.5)
    d = meter.end_window("d")
    c = meter.end_window("c")
    dev.close()
    assert a.duration_s == pytest.approx(2.0) and b.duration_s == pytest.approx(2.0)
    assert c.energy_j == pytest.approx(d.energy_j, abs=0.002)
    assert a.energy_j == pytest.approx(b.energy_j, rel=0.02)  # same steady load
    assert meter.open_windows == ()


def test_errors_name_the_window():
    dev = _loaded("sim:t4")
    meter = EnergyMeter(dev)
    meter.begin_window("x")
    with pytest.raises(InvalidRequestError, match="'x' is already open"):
        meter.begin_window("x")
    with pytest.raises(InvalidRequestError, match="no energy window 'y'"):
        meter.end_window("y")
    meter.cancel_window("x")
    with pytest.raises(InvalidRequestError):
        meter.end_window("x")
    dev.close()


def test_decorator_measures_each_call_and_recursion():
    dev = _loaded("sim:l4")

    @governor.measure_energy(dev, "infer")
    def infer(depth):
        dev.clock.sleep(0.5)
        if depth:
            infer(depth - 1)

    infer(1)
    meter = governor.energy_meter(dev)
    inner, outer = list(meter.history)[-2:]
    dev.close()
    assert inner.name == outer.name == "infer"
    assert inner.duration_s == pytest.approx(0.5) and outer.duration_s == pytest.approx(1.0)
    assert outer.energy_j == pytest.approx(2 * inner.energy_j, rel=0.02)


def test_window_read_before_it_closes_says_so():
    dev = _loaded("sim:l4")
    with measure_energy(dev, "x") as w:
        with pytest.raises(AttributeError, match="still open"):
            w.energy_j  # noqa: B018
        dev.clock.sleep(1.0)
    assert w.energy_j > 0
    dev.close()


def test_several_gpus_in_one_window():
    a, b = _loaded("sim:a100-pcie"), _loaded("sim:a100-pcie?seed=1")
    b.clock = a.clock  # one clock for both, as two GPUs of one machine share the wall clock
    a0, b0 = a.true_energy_j(), b.true_energy_j()
    with measure_energy([a, b], "both") as w:
        a.clock.sleep(2.0)
    ta, tb = a.true_energy_j() - a0, b.true_energy_j() - b0
    a.close()
    b.close()
    assert [d.uri for d in w.per_device] == ["sim:a100-pcie", "sim:a100-pcie?seed=1"]
    assert w.per_device[0].gpu_energy_j == pytest.approx(ta, abs=0.002)
    assert w.per_device[1].gpu_energy_j == pytest.approx(tb, abs=0.002)
    assert w.energy_j == pytest.approx(ta + tb, abs=0.004)
    assert set(w.rails_j) == {"sim:a100-pcie/gpu", "sim:a100-pcie?seed=1/gpu"}


def test_wall_clock_board_is_sampled_by_a_thread():
    import time

    dev = _loaded("sim:orin-nano?realtime=1")
    meter = EnergyMeter(dev, poll_s=0.01)
    meter.begin_window("w")
    time.sleep(0.3)
    w = meter.end_window("w")
    meter.close()
    dev.close()
    assert meter._thread is None
    assert w.duration_s == pytest.approx(0.3, abs=0.1)
    assert w.mean_power_w == pytest.approx(
        dev.board.rail_powers_w(
            dev.board.gpu_power_w(dev._clock_mhz, dev._temperature_c, dev.workload)
        )["VDD_CPU_GPU_CV"],
        rel=0.1,
    )


def test_sampler_thread_stops_when_the_device_closes():
    dev = _loaded("sim:orin-nano?realtime=1")
    meter = governor.energy_meter(dev, poll_s=0.01)
    thread = meter._thread
    assert thread is not None and thread.is_alive()
    dev.close()
    thread.join(1.0)
    assert not thread.is_alive()


def test_window_over_a_stepped_governor_is_right_without_poll():
    """Issue 49: a window around a battery mission stepped by hand (background=False) read
    only at begin and end and under-counted by a quarter; the clock now feeds it."""
    from governor.runtime import Governor

    dev = _loaded("sim:xavier-nx?noise=0")
    board = dev.board
    spec = {"policy": "battery", "battery_wh": 15, "hours": 1}
    with Governor(dev, spec, background=False) as gov:
        e0, t0 = dev.true_energy_j(), dev.clock.now_s()
        with measure_energy(dev, "mission") as w:
            for _ in range(600):
                gov.step()
        gpu_true = dev.true_energy_j() - e0
        dt = dev.clock.now_s() - t0
        s = gov.status()
    dev.close()
    spent_j = s["budget_j"] - s["remaining_j"]
    board_truth = (gpu_true + sum(board.domains_w.values()) * dt) / board.regulator_efficiency
    assert s["scope"] == "board"
    assert w.board_energy_j == pytest.approx(board_truth, rel=0.01)
    assert w.board_energy_j == pytest.approx(spent_j, rel=0.01)
    assert w.readings >= 1000 and not w.sparse  # one per poll_s (0.05 s) of 60 s


def test_a_window_with_too_few_readings_says_so(caplog):
    dev = _loaded("sim:orin-nano?noise=0")
    meter = EnergyMeter(dev)
    meter.begin_window("w")
    dev.clock.sleep(1.0)
    sim_read = dev._read_sample

    def failing():  # the sensor stops answering: the integral carries the last power on
        raise governor.errors.TelemetryError("sensor gone")

    dev._read_sample = failing
    with caplog.at_level("WARNING", logger="governor.measure"):
        dev.clock.sleep(4.0)
        w = meter.end_window("w")
        meter.begin_window("again")
        dev.clock.sleep(4.0)
        again = meter.end_window("again")
    dev._read_sample = sim_read
    dev.close()
    assert w.readings == 20 and w.sparse  # 20 in the first second, none in the 4 after
    assert again.readings == 0 and again.sparse
    said = [r.getMessage() for r in caplog.records if "coarse estimate" in r.getMessage()]
    assert len(said) == 1 and "'w': 20 power readings over 5 s" in said[0]
    assert w.to_dict()["sparse"] is True


def test_a_counter_window_has_no_readings_to_count():
    dev = _loaded("sim:a100-pcie")
    with measure_energy(dev, "step") as w:
        dev.clock.sleep(2.0)
    dev.close()
    assert w.method == "energy counter" and w.readings is None and not w.sparse
