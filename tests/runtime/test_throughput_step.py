"""The throughput step's choice of clock without a scan of the table: the deadline's floor by
bisection and the cheapest clock from the lower convex hull (``ClockTables.cheapest``) must
give what the whole-table scan (``scan``) gives, on calibrated models and on random ones, and a
controller using either must apply the same clocks."""

from __future__ import annotations

import random

import pytest
from frame_loop import RATE_HZ, drive

from governor.devices.sim.catalog import get_board
from governor.runtime.controllers import ThroughputController
from governor.runtime.model import ClockModel, fallback_model, model_from_profile
from governor.runtime.policies import Throughput
from governor.runtime.throughput_parts import tables as tc

# a few tables: short (Jetson), 81 clocks, and long ones whose hull drops clocks
BOARDS = ("nano", "agx-orin", "a100-sxm", "rtx-a4000", "t4", "v100")


def _random_model(rng: random.Random, n: int) -> ClockModel:
    """A table of ``n`` clocks with time strictly falling and power not falling, of an
    irregular shape (steps, flats, kinks), so that its hull leaves clocks out."""
    clocks = tuple(float(300 + 15 * i) for i in range(n))
    time_rel, power_w = [1.0], [rng.uniform(50, 400)]
    for _ in range(n - 1):
        time_rel.append(time_rel[-1] * rng.uniform(1.0005, 1.08))
        power_w.append(power_w[-1] - rng.choice((0.0, rng.uniform(0.0, 8.0))))
    return ClockModel(
        clocks_mhz=clocks,
        power_w=tuple(reversed(power_w)),
        time_rel=tuple(reversed(time_rel)),
        idle_w=rng.uniform(5, 60),
        ppw_clock_mhz=clocks[n // 2],
        fitted=True,
        source="random",
    )


def _queries(rng: random.Random, model: ClockModel, count: int):
    """(need, rate, mean, idle) spanning no clock fitting, every floor, frames busy all of
    the time below the rate's clock (mean above need), and idle powers across the table's
    slopes (negative to above the top power)."""
    slow = max(model.time_rel)
    for _ in range(count):
        rate = rng.choice((10.0, 20.0, 30.0, 60.0))
        need = rng.uniform(0.05, 1.3) / rate * (slow if rng.random() < 0.5 else 1.0)
        mean = need * rng.uniform(0.3, 1.6)
        idle = rng.uniform(-0.2, 1.2) * max(model.power_w)
        yield need, rate, mean, idle


def _check_against_scan(model: ClockModel, rng: random.Random, count: int) -> int:
    tables = tc.ClockTables(model)
    assert tables.fast
    found = 0
    for need, rate, mean, idle in _queries(rng, model, count):
        want = tc.scan(model, need, rate, mean, idle)
        assert tables.cheapest(need, rate, mean, idle) == want, (need, rate, mean, idle)
        found += want[0] is not None and want[1] != want[0]  # the cheapest above the floor
    return found


@pytest.mark.parametrize("board", BOARDS)
def test_the_hull_gives_the_scans_choice_on_calibrated_models(board, profile_of):
    model = model_from_profile(get_board(board).clocks_mhz, profile_of(board))
    found = _check_against_scan(model, random.Random(board), 3000)
    assert found > 60  # not only the floor: the hull's own answers were compared


def test_the_hull_gives_the_scans_choice_on_random_models():
    rng = random.Random(7)
    for n in (1, 2, 3, 5, 17, 81, 200):
        for _ in range(4):
            _check_against_scan(_random_model(rng, n), rng, 400)
    _check_against_scan(fallback_model(get_board("v100").clocks_mhz, "test"), rng, 2000)


def test_a_model_whose_shape_does_not_allow_the_hull_is_scanned():
    """Power falling somewhere along the table (a best-probe profile's interpolated probes
    may): the bisection's premise fails, the controller scans the whole table."""
    base = _random_model(random.Random(3), 40)
    power = list(base.power_w)
    power[20] = power[19] * 0.9  # a dip
    model = ClockModel(
        base.clocks_mhz, tuple(power), base.time_rel, base.idle_w, base.ppw_clock_mhz, True, "dip"
    )
    assert not tc.ClockTables(model).fast
    rng = random.Random(4)
    scanned = 0
    for need, rate, _, idle in _queries(rng, model, 300):
        # margin 0 and one frame seen: the frame's time is both the need and the mean
        ctl = ThroughputController(model, Throughput(rate_hz=rate, margin=0.0))
        ctl.per_unit_top.append(need)
        ctl.idle_w = idle
        floor, best = tc.scan(model, need, rate, need, idle)
        got = ctl._choose()
        if floor is None:
            assert got == model.top_mhz
        else:
            assert (ctl.floor_idx, got) == (floor, model.clocks_mhz[best])
            scanned += best != floor
    assert scanned > 30


@pytest.mark.parametrize("board,search", [("a100-sxm", True), ("rtx-a4000", True), ("t4", False)])
def test_a_controller_applies_the_same_clocks_with_the_hull_as_with_the_scan(
    board, search, profile_of, monkeypatch
):
    """The whole decision path (the search's seed kept within STICK, the floor, the dither)
    over a synthetic frame loop with a measured idle power below the model's."""
    model = model_from_profile(get_board(board).clocks_mhz, profile_of(board))
    idle_w = 0.8 * model.idle_w

    def power_of(clock, busy, t):
        return busy * model.power_at(clock) + (1.0 - busy) * idle_w

    def run():
        ctl = ThroughputController(model, Throughput(rate_hz=RATE_HZ), search=search)
        applied, energy_j = drive(ctl, power_of, 40.0, seed=2)
        return applied, energy_j

    fast = run()
    monkeypatch.setattr(tc.ClockTables, "cheapest", lambda self, *q: tc.scan(self.model, *q))
    assert run() == fast


def test_a_choice_prices_a_handful_of_clocks_whatever_the_table(profile_of, monkeypatch):
    """O(log n) per step: on the V100's 187 clocks a choice evaluates the cost of at most
    five clocks (the floor, the hull's vertex and its two neighbours, the held pick), not
    the whole table as the scan did."""
    model = model_from_profile(get_board("v100").clocks_mhz, profile_of("v100"))
    ctl = ThroughputController(model, Throughput(rate_hz=RATE_HZ), search=True)
    calls = {"n": 0}
    cost_w = tc.cost_w

    def counted(*args):
        calls["n"] += 1
        return cost_w(*args)

    monkeypatch.setattr(tc, "cost_w", counted)
    per_choice = []
    original = ctl._choose

    def choose():
        before = calls["n"]
        out = original()
        per_choice.append(calls["n"] - before)
        return out

    ctl._choose = choose
    drive(ctl, lambda clock, busy, t: busy * model.power_at(clock), 10.0)
    assert per_choice and max(per_choice) <= 5, max(per_choice)
