"""The calibration procedure's helpers on hand-built probes and clock tables.

Written to kill the mutants scripts/mutation.py reports (docs/mutation.md): every expected
clock below is worked out in the comment beside it from the helper's rule.
"""

import math
import types
from pathlib import Path

import numpy as np
import pytest

import governor
from governor.calibrate import procedure as pr
from governor.calibrate.loads import make_load
from governor.errors import InvalidRequestError

CLOCKS = [100.0 * i for i in range(1, 11)]  # 100 ... 1000, indices 0 ... 9


def _p(mhz, energy_j=1.0, status="ok", clock_mhz=None):
    # power 10 W, time energy / 10 s: energy_per_unit_j = energy_j
    return pr.Probe(
        mhz, mhz if clock_mhz is None else clock_mhz, 10.0, energy_j / 10.0, status=status
    )


def test_probe_energy_flags_and_dict_round_trip():
    p = pr.Probe(900.0, 897.0, 50.0, 0.02, 61.0, ("sw_power_cap",), "throttled", 1.5, "counter")
    assert p.energy_per_unit_j == pytest.approx(1.0, rel=1e-12)  # 50 W * 0.02 s
    assert p.throttled and not _p(100).throttled and not _p(100, status="unsteady").throttled
    d = p.to_dict()
    assert d["energy_per_unit_j"] == pytest.approx(1.0, rel=1e-12)
    assert d["throttle_reasons"] == ["sw_power_cap"] and d["temperature_c"] == 61.0
    assert pr.Probe.from_dict(d) == p
    bare = pr.Probe.from_dict(
        {"requested_mhz": 5, "clock_mhz": 5, "power_w": 1, "time_per_unit_s": 2}
    )
    assert bare == pr.Probe(5.0, 5.0, 1.0, 2.0, None, (), "ok", 0.0, "")


def test_finite_seconds():
    assert pr._finite_seconds(1.5) and pr._finite_seconds(0) and pr._finite_seconds("2")
    for bad in (True, False, None, "x", math.inf, math.nan, [1]):
        assert not pr._finite_seconds(bad)


def test_device_prober_window_checks():
    dev = governor.open_device("sim:agx-orin")
    load = make_load(dev, "builtin")
    ok = pr.DeviceProber(dev, load, window_s=0.1, min_settle_s=0.0, max_settle_s=0.0, idle_s=0)
    assert ok.idle_power_w() is None  # idle_s 0: no idle reading
    assert ok.device_time_s == 0.0
    for kwargs, match in [
        (dict(window_s=0), "window_s > 0"),
        (dict(min_settle_s=-0.1), "0 <= min_settle_s"),
        (dict(min_settle_s=3.0, max_settle_s=2.0), "min_settle_s <= max_settle_s"),
        (dict(idle_s=-1), "idle_s >= 0"),
        (dict(window_s=math.nan), "window_s must be a finite number"),
        (dict(idle_s=True), "idle_s must be a finite number"),
    ]:
        with pytest.raises(InvalidRequestError, match=match):
            pr.DeviceProber(dev, load, **kwargs)
    with pytest.raises(InvalidRequestError, match="not a replay device"):
        pr.ReplayProber(dev)


def test_choose_initial_clocks_nearest_to_the_fractions():
    # targets 100, 100 + .45 * 900 = 505, 100 + .75 * 900 = 775, 1000 -> 500, 800
    assert pr.choose_initial_clocks(CLOCKS) == [100.0, 500.0, 800.0, 1000.0]
    # repeats are skipped: targets 208 and 190 are both nearest 200; the second takes the
    # next nearest to 190, 100 (90 away; 300 is 110 away)
    assert pr.choose_initial_clocks(CLOCKS, (0.12, 0.1)) == [100.0, 200.0]


def test_interpolate_between_probes_and_flat_beyond():
    probes = [_p(200, 3.0), _p(100, 1.0)]
    e = lambda p: p.energy_per_unit_j  # noqa: E731
    assert pr._interpolate(probes, 150.0, e) == pytest.approx(2.0, rel=1e-12)
    assert pr._interpolate(probes, 500.0, e) == pytest.approx(3.0, rel=1e-12)
    assert pr._interpolate(probes, 50.0, e) == pytest.approx(1.0, rel=1e-12)
    arr = pr._interpolate(probes, np.array([125.0, 175.0]), e)
    assert isinstance(arr, np.ndarray) and arr.tolist() == pytest.approx([1.5, 2.5])


def test_below_the_cap():
    assert pr._below_the_cap(CLOCKS, [_p(100), _p(400)]) is None
    # throttled at 1000 held 900: ceiling 0.97 * 900 = 873; above the best unthrottled 400:
    # 500 ... 800 unprobed, highest 800
    probes = [_p(100), _p(400), _p(1000, status="throttled", clock_mhz=900.0)]
    assert pr._below_the_cap(CLOCKS, probes) == 800.0
    # a lower throttled probe held at 800: ceiling 776 -> 700
    probes.append(_p(800, status="throttled"))
    assert pr._below_the_cap(CLOCKS, probes) == 700.0
    # held 825: ceiling 800.25 still admits 800 exactly
    assert pr._below_the_cap(CLOCKS, [_p(900, status="throttled", clock_mhz=825.0)]) == 800.0
    # requested below the held clock counts: min(700, 950) * 0.97 = 679 -> 600
    assert pr._below_the_cap(CLOCKS, [_p(700, status="throttled", clock_mhz=950.0)]) == 600.0
    # nothing between the best unthrottled probe and the ceiling
    assert pr._below_the_cap(CLOCKS, [_p(800), _p(900, status="throttled")]) is None


def test_next_clock():
    far_from = lambda target: lambda c: abs(c - target)  # noqa: E731
    assert pr._next_clock(CLOCKS, [100.0, 1000.0], 500.0, far_from(0)) == 500.0
    # optimum 500 (index 4) probed, neighbours 100 (0) and 1000 (9): candidates index
    # (4 + 0) // 2 = 2 -> 300 and (4 + 9 + 1) // 2 = 7 -> 800; the lower energy wins
    probed = [100.0, 500.0, 1000.0]
    assert pr._next_clock(CLOCKS, probed, 500.0, far_from(700)) == 800.0
    assert pr._next_clock(CLOCKS, probed, 500.0, far_from(200)) == 300.0
    # nothing probed left of it: edge index 0 -> 300; nothing right: edge 9 -> 800
    assert pr._next_clock(CLOCKS, [500.0, 1000.0], 500.0, far_from(0)) == 300.0
    assert pr._next_clock(CLOCKS, [100.0, 500.0], 500.0, far_from(1000)) == 800.0
    # both table neighbours probed: done
    assert pr._next_clock(CLOCKS, [400.0, 500.0, 600.0], 500.0, far_from(0)) is None
    # only one side left: (4 + 3) // 2 = 3 is probed, (4 + 6 + 1) // 2 = 5 -> 600
    assert pr._next_clock(CLOCKS, [400.0, 500.0, 700.0], 500.0, far_from(0)) == 600.0


def test_split_gap_golden_step_next_to_a_probe_in_a_wide_gap():
    fine = [855.0 + 15.0 * i for i in range(60)]  # 855 ... 1740 MHz, 15 MHz apart
    # probes at 855 (index 0) and 1260 (27): gap 27 steps; the optimum 885 (index 2) is 2 steps
    # from 855, under 0.25 * 27 = 6.75: golden step into the longer right side,
    # 2 + round(0.382 * 25) = 2 + 10 = 12 -> 1035 MHz
    assert pr._split_gap(fine, [855.0, 1260.0, 1515.0], 885.0) == 1035.0
    # mirrored: 1230 (index 25) is 2 steps below 1260: 25 - round(0.382 * 25) = 15 -> 1080
    assert pr._split_gap(fine, [855.0, 1260.0, 1515.0], 1230.0) == 1080.0
    # 7 steps from 855 (index 7) is not under 6.75: the optimum itself
    assert pr._split_gap(fine, [855.0, 1260.0], 960.0) == 960.0
    # 6 steps (index 6) is: 6 + round(0.382 * 21) = 6 + 8 = 14 -> 1065
    assert pr._split_gap(fine, [855.0, 1260.0], 945.0) == 1065.0
    # an optimum beyond the last probe has no gap to split
    assert pr._split_gap(fine, [855.0, 1260.0], 1275.0) == 1275.0
    assert pr._split_gap(fine, [1260.0, 1515.0], 1245.0) == 1245.0
    # gap of exactly 8 steps (100 and 900, indices 0 and 8): 200 is 1 step from 100, under
    # 0.25 * 8 = 2: 1 + round(0.382 * 7) = 1 + 3 = 4 -> 500; 300 (2 steps, not under 2) stays
    assert pr._split_gap(CLOCKS, [100.0, 900.0], 200.0) == 500.0
    assert pr._split_gap(CLOCKS, [100.0, 900.0], 300.0) == 300.0
    assert pr._split_gap(CLOCKS, [100.0, 900.0], 800.0) == 500.0  # 7 - 3 = 4
    # a gap of 7 steps is too coarse to split: a neighbour there is a large step
    assert pr._split_gap(CLOCKS, [100.0, 800.0], 200.0) == 200.0
    # gaps that do not start at index 0: 870 (index 1) and 1260 (27), gap 26 steps, near < 6.5
    # 960 (index 7) is 6 steps from 870: 7 + round(0.382 * 20) = 7 + 8 = 15 -> 1080
    assert pr._split_gap(fine, [870.0, 1260.0], 960.0) == 1080.0
    # 1230 (index 25) is 2 below 1260; the longer side is 24 steps: 25 - round(0.382 * 24) =
    # 25 - 9 = 16 -> 1095
    assert pr._split_gap(fine, [870.0, 1260.0], 1230.0) == 1095.0
    # 1155 (20) and 1455 (40): 1170 (21) is 1 step from 1155: 21 + round(0.382 * 19) = 28 -> 1275
    assert pr._split_gap(fine, [1155.0, 1455.0], 1170.0) == 1275.0
    # 200 (index 1) and 900 (8): 7 steps, too coarse, though 300 is 1 step from 200
    assert pr._split_gap(CLOCKS, [200.0, 900.0], 300.0) == 300.0
    # _next_clock routes an unprobed optimum through it
    far_from = lambda target: lambda c: abs(c - target)  # noqa: E731
    assert pr._next_clock(CLOCKS, [100.0, 900.0], 200.0, far_from(200)) == 500.0
    assert pr._next_clock(fine, [855.0, 1260.0], 885.0, far_from(885)) == 1035.0


def test_next_to_best():
    # best 500 (index 4); neighbours 100 (energy 5) and 1000 (energy 3): the side of the
    # lower-energy neighbour first: (4 + 9 + 1) // 2 = 7 -> 800
    probes = [_p(100, 5.0), _p(500, 1.0), _p(1000, 3.0)]
    assert pr._next_to_best(CLOCKS, probes) == 800.0
    probes = [_p(100, 3.0), _p(500, 1.0), _p(1000, 5.0)]
    assert pr._next_to_best(CLOCKS, probes) == 300.0  # (4 + 0) // 2 = 2
    # a throttled probe is not the best even with less energy: best stays 500, whose left
    # neighbour is now 200 (index 1, energy 0.1): (4 + 1) // 2 = 2 -> 300 (were 200 the best:
    # 400)
    probes = [_p(100, 3.0), _p(500, 1.0), _p(1000, 5.0), _p(200, 0.1, "throttled")]
    assert pr._next_to_best(CLOCKS, probes) == 300.0
    assert pr._next_to_best(CLOCKS, [_p(400, 2.0), _p(500, 1.0), _p(600, 2.0)]) is None
    assert pr._next_to_best(CLOCKS, [_p(450, 1.0), _p(100, 2.0)]) is None  # not a table clock
    # no probed neighbour on the left: edge 0 has no energy (inf), so the right side first
    assert pr._next_to_best(CLOCKS, [_p(500, 1.0), _p(1000, 9.0)]) == 800.0


def test_choose_trusts_probes_near_the_optimum():
    probes = [_p(300, 0.5), _p(400, 2.0), _p(500, 1.5), _p(600, 1.8)]
    # optimum 500 probed: among 400, 500, 600 (not 300, further away) the least energy
    assert pr._choose(probes, 500.0, lambda c: 0.0) == 500.0
    probes[1] = _p(400, 1.0)
    assert pr._choose(probes, 500.0, lambda c: 0.0) == 400.0
    probes[3] = _p(600, 0.9)
    assert pr._choose(probes, 500.0, lambda c: 0.0) == 600.0
    # unprobed optimum 550: stands only if the model promises less than the best probe (0.5)
    assert pr._choose(probes, 550.0, lambda c: 0.4) == 550.0
    assert pr._choose(probes, 550.0, lambda c: 0.5) == 300.0
    # a throttled probe does not win
    assert pr._choose([_p(500, 1.0), _p(600, 0.1, "throttled")], 500.0, lambda c: 0.0) == 500.0


class _TableProber(pr.Prober):
    """Probes a clock table whose energy is a parabola with its minimum at ``best``."""

    def __init__(self, clocks):
        self.device = types.SimpleNamespace(uri="table:x", supported_clocks_mhz=lambda: clocks)
        self.asked = []

    def probe(self, clock_mhz):
        self.asked.append(clock_mhz)
        return _p(clock_mhz)


def test_calibrate_refuses_small_budgets_and_tables():
    for bad in (3, 0, "6", 6.0):
        with pytest.raises(InvalidRequestError, match="--max-probes must be at least 4"):
            pr.calibrate(_TableProber(CLOCKS), max_probes=bad)
    with pytest.raises(InvalidRequestError, match="supports only 2 clock"):
        pr.calibrate(_TableProber([100.0, 200.0]))
    prober = _TableProber([100.0, 200.0, 300.0])
    assert prober.idle_power_w() is None and prober.device_time_s == 0.0
    assert prober.supported_clocks_mhz() == [100.0, 200.0, 300.0]


def test_device_prober_idle_reading_and_loaded_time():
    dev = governor.open_device("sim:agx-orin")
    prober = pr.DeviceProber(
        dev,
        make_load(dev, "builtin"),
        window_s=0.5,
        min_settle_s=0.5,
        max_settle_s=1.0,
        idle_s=0.5,
    )
    idle = prober.idle_power_w()  # 0.5 s is enough to ask for a reading
    assert idle is not None and idle > 0
    clock = dev.supported_clocks_mhz()[-1]
    probe = prober.probe(clock)
    # settle at least 0.5 s, then a 0.5 s window: at least 1 s of loaded device time, at most
    # the 1 s settle limit + the window + a few sampling periods
    assert 1.0 <= prober.device_time_s <= 2.0
    assert probe.requested_mhz == clock and probe.power_w > idle
    prober.probe(dev.supported_clocks_mhz()[0])
    assert 2.0 <= prober.device_time_s <= 4.0  # adds up
    prober.finish()
    assert pr._finite_seconds("x") is False and pr._finite_seconds(True) is False


def test_replay_prober_returns_the_recorded_row():
    path = Path(__file__).resolve().parents[1] / "data" / "replay" / "a100_pcie_fp32_10pt.csv"
    dev = governor.open_device(f"replay:{path}")
    # the file's second row: 330,47.0260,0.834078
    probe = pr.ReplayProber(dev).probe(330.0)
    assert probe == pr.Probe(330.0, 330.0, 47.026, 0.834078, status="ok", method="replay")


def test_result_energy_and_time_modelled_or_interpolated():
    from governor.models.power import PowerModel
    from governor.models.time import TimeModel

    probes = [_p(200, 3.0), _p(100, 1.0)]  # time per unit = energy / 10 W
    common = dict(
        device_uri="x",
        idle_power_w=None,
        probes=probes,
        ridge_clock_mhz=math.nan,
        ppw_optimal_clock_mhz=100.0,
        predicted_optimum_mhz=math.nan,
        supported_clocks_mhz=(100.0, 200.0),
        device_time_s=0.0,
    )
    # below the ridge: P = 10 + 0.05 * 100 = 15 W; t = 0.1 + 20 / 100 = 0.3 s -> 4.5 J
    modelled = pr.CalibrationResult(
        power_model=PowerModel(10.0, 0.05, 500.0, 0.001),
        time_model=TimeModel(0.1, 20.0),
        **common,
    )
    assert modelled.modelled and modelled.probe_clocks_mhz == [200.0, 100.0]
    assert modelled.energy_per_unit_j(100.0) == pytest.approx(4.5)
    assert modelled.time_per_unit_s(100.0) == pytest.approx(0.3)
    best = pr.CalibrationResult(power_model=None, time_model=None, method="best-probe", **common)
    assert not best.modelled
    assert best.energy_per_unit_j(150.0) == pytest.approx(2.0)  # halfway between 1 and 3 J
    assert best.time_per_unit_s(150.0) == pytest.approx(0.2)  # halfway between 0.1 and 0.3 s
    no_model = pr.CalibrationResult(power_model=None, time_model=None, **common)
    assert not no_model.modelled  # method "model" but nothing fitted


def test_helper_edges():
    # ceiling exactly on a table clock is allowed: held at 100 -> 0.97 * 100 = 97
    assert pr._below_the_cap([90.0, 97.0, 100.0], [_p(100, status="throttled")]) == 97.0
    # no probe right of the optimum at index 3: edge is the last index 9, (3 + 9 + 1) // 2 = 6
    assert pr._next_clock(CLOCKS, [100.0, 400.0], 400.0, lambda c: -c) == 700.0
    # every probe throttled, optimum unprobed and no better: the best throttled probe
    assert pr._choose([_p(500, 1.0, "throttled")], 600.0, lambda c: 2.0) == 500.0


class _FlatPowerProber(_TableProber):
    """Power never rises with the clock, so no power model fits: calibration answers with
    the best measured probe. Energy per unit = |f - 660| / 100 + 1; 800 MHz is throttled
    with the least energy of all."""

    def probe(self, clock_mhz):
        self.asked.append(clock_mhz)
        if clock_mhz == 800.0:
            return _p(clock_mhz, 0.01, "throttled")
        return _p(clock_mhz, abs(clock_mhz - 660.0) / 100.0 + 1.0)


def test_best_probe_answer_skips_throttled_probes_and_uses_the_budget():
    prober = _FlatPowerProber(CLOCKS)
    result = pr.calibrate(prober, max_probes=4, measure_idle=False)  # 4 is the minimum
    assert result.method == "best-probe" and len(result.probes) == 4
    prober = _FlatPowerProber(CLOCKS)
    result = pr.calibrate(prober, max_probes=7, measure_idle=False)
    # initial 100, 500, 800 (throttled), 1000. Best unthrottled: 500 (index 4), probed
    # neighbours 100 (index 0, 6.6 J) and 800 (index 7, 0.01 J): the 800 side first,
    # (4 + 7 + 1) // 2 = 6 -> 700 (1.4 J). Best 700: left neighbour 500 -> (6 + 4) // 2 = 5
    # -> 600 (1.6 J); right (6 + 7 + 1) // 2 = 7 is probed. Then 700's neighbours 600 and 800
    # are both probed: done, 6 probes, answer 700 (not the throttled 800)
    assert prober.asked == [100.0, 500.0, 800.0, 1000.0, 700.0, 600.0]
    assert result.ppw_optimal_clock_mhz == 700.0
    best = result.probes[4]
    assert (
        f"answering with the best measured probe, {best.requested_mhz:g} MHz"
        in (result.warnings[0])
    )


def test_model_calibration_refines_past_the_initial_probes():
    path = Path(__file__).resolve().parents[1] / "data" / "replay" / "a100_pcie_fp32_10pt.csv"
    dev = governor.open_device(f"replay:{path}")
    result = pr.calibrate(pr.ReplayProber(dev), max_probes=6)
    assert result.method == "model"
    assert 4 < len(result.probes) <= 6  # refined after the 4 initial clocks


def test_next_clock_with_nothing_probed_below_halves_towards_the_table_end():
    # optimum 400 (index 3) probed, nothing probed below it: the left candidate is halfway
    # to the table's first clock, (3 + 0) // 2 = 1 -> 200; the right one halfway to the
    # probed 1000 (index 9), (3 + 9 + 1) // 2 = 6 -> 700. The energy prefers 200
    assert pr._next_clock(CLOCKS, [400.0, 1000.0], 400.0, lambda c: abs(c - 200.0)) == 200.0


def test_next_to_best_with_nothing_probed_below_halves_towards_the_table_end():
    # best 400 (index 3), its right neighbour 500 probed, nothing below: the only side left
    # is halfway to the table's first clock, (3 + 0) // 2 = 1 -> 200
    probes = [_p(400.0, energy_j=1.0), _p(500.0, energy_j=2.0)]
    assert pr._next_to_best(CLOCKS, probes) == 200.0


class _IdleTableProber(_FlatPowerProber):
    """The flat-power table, with an idle reading that counts how often it is asked."""

    def __init__(self, clocks):
        super().__init__(clocks)
        self.idle_asked = 0

    def idle_power_w(self):
        self.idle_asked += 1
        return 3.0


def test_calibrate_reads_idle_power_unless_told_not_to():
    prober = _IdleTableProber(CLOCKS)
    result = pr.calibrate(prober, max_probes=4)  # the default measures idle
    assert prober.idle_asked == 1 and result.idle_power_w == 3.0
    prober = _IdleTableProber(CLOCKS)
    result = pr.calibrate(prober, max_probes=4, measure_idle=False)
    assert prober.idle_asked == 0 and result.idle_power_w is None


def test_three_clocks_are_enough_to_calibrate():
    prober = _FlatPowerProber([100.0, 200.0, 300.0])
    result = pr.calibrate(prober, max_probes=4, measure_idle=False)
    assert result.ppw_optimal_clock_mhz in (100.0, 200.0, 300.0)
    assert set(prober.asked) <= {100.0, 200.0, 300.0}


def test_the_note_says_when_a_probe_beats_the_models_optimum(monkeypatch):
    path = Path(__file__).resolve().parents[1] / "data" / "replay" / "a100_pcie_fp32_10pt.csv"
    wins = "is not better than the probe at"

    def run():
        dev = governor.open_device(f"replay:{path}")
        return pr.calibrate(pr.ReplayProber(dev), max_probes=6)

    result = run()
    assert result.method == "model"
    optimum = result.predicted_optimum_mhz
    # the probes' choice is the model's optimum: no note that a probe won
    monkeypatch.setattr(pr, "_choose", lambda probes, opt, energy, spare=(): opt)
    kept = run()
    assert kept.ppw_optimal_clock_mhz == kept.predicted_optimum_mhz == optimum
    assert not any(wins in n for n in kept.notes)
    # another probed clock chosen: the note names both
    other = next(c for c in result.probe_clocks_mhz if c != optimum)
    monkeypatch.setattr(pr, "_choose", lambda probes, opt, energy, spare=(): other)
    beaten = run()
    assert beaten.ppw_optimal_clock_mhz == other
    assert any(f"optimum {optimum:g} MHz {wins} {other:g} MHz" in n for n in beaten.notes)


def test_an_idle_reading_between_probes_restarts_the_load_for_the_next_probe():
    dev = governor.open_device("sim:agx-orin")
    prober = pr.DeviceProber(
        dev, make_load(dev, "builtin"), window_s=0.5, min_settle_s=0.5, max_settle_s=1.0, idle_s=0.5
    )
    top = dev.supported_clocks_mhz()[-1]
    loaded = prober.probe(top)
    idle = prober.idle_power_w()  # stops the load to read the idle board
    again = prober.probe(top)
    assert idle < 0.6 * loaded.power_w  # the idle reading was idle
    assert again.power_w == pytest.approx(loaded.power_w, rel=0.1)  # and the load ran again
    prober.finish()
