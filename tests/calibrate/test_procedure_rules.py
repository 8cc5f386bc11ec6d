"""Rules of the calibration procedure that a wrong operator would break unnoticed
(scripts/mutation.py found them): argument checks, the probe budget under a power limit,
probe records round-tripping, the result's time model."""

from __future__ import annotations

import pytest

import governor
from governor.calibrate.loads import make_load
from governor.calibrate.procedure import DeviceProber, Probe, calibrate
from governor.errors import InvalidRequestError


@pytest.fixture
def nano():
    with governor.open_device("sim:nano") as dev:
        yield dev


@pytest.mark.parametrize(
    "kwargs",
    [
        {"window_s": 0.0},
        {"min_settle_s": -0.1},
        {"min_settle_s": 3.0, "max_settle_s": 2.0},
        {"idle_s": -1.0},
    ],
)
def test_bad_windows_are_refused(nano, kwargs):
    with pytest.raises(InvalidRequestError, match="calibration windows must be positive"):
        DeviceProber(nano, make_load(nano, "builtin"), **kwargs)


def test_edge_windows_are_accepted(nano):
    # zero settle and zero idle are allowed; max == min is allowed
    DeviceProber(nano, make_load(nano, "builtin"), min_settle_s=0.0, max_settle_s=0.0, idle_s=0.0)


def test_a_probe_record_round_trips_with_its_throttle_reasons():
    probe = Probe(1410.0, 1350.0, 300.0, 0.5, 71.0, ("sw_power_cap",), "throttled", 1.5, "energy")
    again = Probe.from_dict(probe.to_dict())
    assert again == probe and again.throttled and again.throttle_reasons == ("sw_power_cap",)


@pytest.mark.parametrize("budget", [4, 5, 6])
def test_the_probe_budget_holds_on_a_power_limited_board(budget):
    """The simulated T4 runs into its 70 W limit at its top clocks: the procedure looks for
    unthrottled clocks below the cap, but never past the budget."""
    with governor.open_device("sim:t4") as dev:
        result = calibrate(DeviceProber(dev, make_load(dev, "builtin")), max_probes=budget)
    assert any(p.throttled for p in result.probes)
    assert len(result.probes) == budget
    assert sum(not p.throttled for p in result.probes) >= 3


def test_the_result_s_time_is_its_time_model_s(nano):
    result = calibrate(DeviceProber(nano, make_load(nano, "builtin")))
    for clock in nano.supported_clocks_mhz():
        assert result.time_per_unit_s(clock) == result.time_model.time_s(clock)
        assert result.energy_per_unit_j(clock) == pytest.approx(
            result.power_model.power_w(clock) * result.time_model.time_s(clock)
        )


def test_budget_left_after_the_optimum_is_pinned_measures_the_runner_up():
    """Jetson Nano, Inception v3 at concurrency 8 (LoudVA): the model's optimum 614.4 MHz
    is pinned by its probed neighbours after five probes; the sixth goes to the unprobed
    clock the model ranks next, 768 MHz, which measured the least energy of the sweep
    (1.1 % below 614.4 MHz), and it is chosen."""
    from pathlib import Path

    from governor.calibrate.procedure import ReplayProber

    path = Path(__file__).resolve().parents[1] / "data" / "replay"
    dev = governor.open_device(f"replay:{path / 'jetsonnano_inceptionv3-triton-c8.csv'}")
    result = calibrate(ReplayProber(dev), max_probes=6)
    energy = dict(zip(dev.sweep.requested_mhz, dev.sweep.energy_j()))
    probed = [p.requested_mhz for p in result.probes]
    assert dev.probe_count == 6 and len(set(probed)) == 6
    assert 768.0 in probed and result.predicted_optimum_mhz != 768.0
    assert result.ppw_optimal_clock_mhz == min(energy, key=energy.get) == 768.0


def test_a_runner_up_competes_on_measured_energy_only():
    from governor.calibrate import procedure as pr

    def probe(mhz, energy_j):
        return Probe(requested_mhz=mhz, clock_mhz=mhz, power_w=energy_j, time_per_unit_s=1.0)

    probes = [probe(300, 2.0), probe(400, 1.2), probe(500, 1.0), probe(600, 1.1), probe(800, 0.9)]
    # 800 is no neighbour of the optimum: it counts only as a runner-up
    assert pr._choose(probes, 500.0, lambda c: 0.0) == 500.0
    assert pr._choose(probes, 500.0, lambda c: 0.0, runners_up=[800.0]) == 800.0
    probes[-1] = probe(800, 1.05)
    assert pr._choose(probes, 500.0, lambda c: 0.0, runners_up=[800.0]) == 500.0
    # the runner-up is the unprobed clock with the least predicted energy
    by_clock = {p.requested_mhz: p for p in probes}
    clocks = [300.0, 400.0, 500.0, 600.0, 700.0, 800.0, 900.0]
    assert pr._runner_up(clocks, by_clock, lambda c: abs(c - 880)) == 900.0
    assert pr._runner_up(clocks, by_clock, lambda c: abs(c - 640)) == 700.0
    assert pr._runner_up(list(by_clock), by_clock, lambda c: c) is None
