"""The cluster budget split: its guarantees on any input, its optimum against brute force, the
curves drawn from the simulated boards' physics and their online refinement."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governor.devices.sim.catalog import get_board
from governor.errors import GovernorError
from governor.fleet.allocate import (
    BudgetTooSmallError,
    CurveLearner,
    GpuDemand,
    concave_hull,
    least_budget_w,
    load_curve,
    split_budget,
    work_at,
    work_curve,
)


@st.composite
def demands(draw, most=6):
    n = draw(st.integers(1, most))
    out = []
    for k in range(n):
        lo = draw(st.floats(10, 300))
        hi = lo + draw(st.floats(0, 400))
        busy = draw(st.booleans())
        m = draw(st.integers(0, 6))
        caps = sorted(set(draw(st.lists(st.floats(0, 800), min_size=m, max_size=m))))
        works = draw(st.lists(st.floats(0, 50), min_size=len(caps), max_size=len(caps)))
        out.append(GpuDemand(f"n{k // 4}/{k % 4}", lo, hi, busy, tuple(zip(caps, works))))
    return out


@settings(max_examples=300, deadline=None)
@given(demands(), st.floats(0, 3000))
def test_the_split_honours_the_budget_the_ranges_and_idles_at_the_floor(ds, extra_w):
    budget = least_budget_w(ds) + extra_w
    caps = split_budget(ds, budget)
    assert set(caps) == {d.gpu_id for d in ds}
    assert sum(caps.values()) <= budget + 1e-6
    for d in ds:
        assert d.min_cap_w <= caps[d.gpu_id] <= d.max_cap_w
        if not d.busy:
            assert caps[d.gpu_id] == d.min_cap_w
    # nothing is held back while a busy GPU could still take it
    room = sum(d.max_cap_w - caps[d.gpu_id] for d in ds if d.busy)
    assert budget - sum(caps.values()) <= 1e-6 or room <= 1e-6


def _concave(draw, lo, hi):
    """A concave, rising curve over [lo, hi]: falling positive slopes."""
    n = draw(st.integers(1, 4))
    slopes = sorted(draw(st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n)), reverse=True)
    cuts = sorted(draw(st.lists(st.floats(lo, hi), min_size=n - 1, max_size=n - 1)))
    caps = [lo, *cuts, hi]
    work = [draw(st.floats(0, 10))]
    for (a, b), s in zip(zip(caps, caps[1:]), slopes):
        work.append(work[-1] + s * (b - a))
    pts = []
    for c, w in zip(caps, work):
        if not pts or c > pts[-1][0]:
            pts.append((c, w))
    return tuple(pts)


@st.composite
def concave_cases(draw):
    ds = []
    for k in range(draw(st.integers(1, 3))):
        lo = float(draw(st.integers(1, 10)) * 10)
        hi = lo + float(draw(st.integers(0, 8)) * 10)
        ds.append(GpuDemand(f"g{k}", lo, hi, True, _concave(draw, lo, hi)))
    return ds, least_budget_w(ds) + float(draw(st.integers(0, 25)) * 10)


@settings(max_examples=150, deadline=None)
@given(concave_cases())
def test_on_concave_curves_the_split_is_at_least_the_brute_force_best(case):
    ds, budget = case
    caps = split_budget(ds, budget)
    got = sum(work_at(d.work_at_cap, caps[d.gpu_id]) for d in ds)
    # every split on a 5 W grid (the caps are multiples of 10 W)
    grids = [range(int(d.min_cap_w), int(d.max_cap_w) + 1, 5) for d in ds]
    best = max(
        sum(work_at(d.work_at_cap, c) for d, c in zip(ds, combo))
        for combo in itertools.product(*grids)
        if sum(combo) <= budget
    )
    assert got >= best - 1e-6


def test_a_non_concave_curve_is_split_on_its_hull():
    # a GPU whose work only rises past 150 W (a step): the hull spreads it linearly
    step = GpuDemand("a/0", 100, 200, True, ((100, 0.0), (150, 0.0), (160, 10.0), (200, 10.0)))
    flat = GpuDemand("b/0", 100, 200, True, ((100, 0.0), (200, 5.0)))
    hull = concave_hull(step.work_at_cap, 100, 200)
    assert hull == ((100, 0.0), (160, 10.0), (200, 10.0))
    caps = split_budget([step, flat], 260)
    assert caps == {"a/0": 160.0, "b/0": 100.0}


def test_a_watt_goes_where_it_buys_the_most_work():
    steep = GpuDemand("a/0", 100, 300, True, ((100, 0.0), (300, 20.0)))  # 0.1 per W
    shallow = GpuDemand("a/1", 100, 300, True, ((100, 0.0), (300, 2.0)))  # 0.01 per W
    idle = GpuDemand("a/2", 100, 300, False, ((100, 0.0), (300, 50.0)))
    caps = split_budget([steep, shallow, idle], 450)
    assert caps == {"a/0": 250.0, "a/1": 100.0, "a/2": 100.0}
    # past the steep one's top, the shallow one; watts no curve wants: spread, never above top
    caps = split_budget([steep, shallow, idle], 900)
    assert caps == {"a/0": 300.0, "a/1": 300.0, "a/2": 100.0}


def test_a_budget_below_the_floors_is_refused_with_the_least_that_works():
    ds = [GpuDemand("a/0", 100, 400, True), GpuDemand("b/0", 60, 70, False)]
    assert least_budget_w(ds) == 160
    with pytest.raises(BudgetTooSmallError) as err:
        split_budget(ds, 159)
    assert isinstance(err.value, GovernorError) and isinstance(err.value, ValueError)
    assert err.value.least_budget_w == 160
    assert "least budget that works is 160 W" in str(err.value)
    assert "\n" not in str(err.value)
    with pytest.raises(BudgetTooSmallError):
        split_budget(ds, float("nan"))
    assert split_budget(ds, 160) == {"a/0": 100.0, "b/0": 60.0}


def test_bad_demands_are_refused():
    with pytest.raises(ValueError, match="cap range"):
        GpuDemand("a/0", 200, 100, True)
    with pytest.raises(ValueError, match="must rise"):
        GpuDemand("a/0", 100, 200, True, ((150, 1.0), (150, 2.0)))
    with pytest.raises(ValueError, match="once"):
        split_budget([GpuDemand("a/0", 1, 2, True), GpuDemand("a/0", 1, 2, True)], 10)


def test_board_curves_follow_the_physics():
    a100 = get_board("a100-sxm")
    compute, memory = work_curve(a100, "compute"), work_curve(a100, "memory")
    lo, hi = a100.power_limit_range_w
    for curve in (compute, memory):
        assert curve[0][0] == lo and curve[-1][0] == hi
        works = [w for _, w in curve]
        assert works == sorted(works)  # more watts never less work
    # the catalog's workloads do 20 units/s at the top clock; memory-bound work saturates
    # early: at 200 W it is nearly done, compute-bound work is not
    assert work_at(compute, hi) == pytest.approx(20.0, rel=1e-6)
    assert work_at(memory, 200) / work_at(memory, hi) > 0.97
    assert work_at(compute, 200) / work_at(compute, hi) < 0.8
    # a cap maps to the highest clock whose steady power fits: at that clock's power the
    # curve's work is the workload's rate there
    f = a100.clocks_mhz[40]
    w = a100.workloads["compute"]
    p = a100.steady_gpu_power_w(f, w, a100.default_mem_clock_mhz)
    rate = 1.0 / w.time_per_unit_s(f, a100.default_mem_clock_mhz)
    assert load_curve(a100, 0.0).work_per_s(p) == pytest.approx(rate, rel=1e-9)
    with pytest.raises(ValueError, match="unknown load"):
        work_curve(a100, "graphics")


@pytest.mark.parametrize("share,duty", [(0.0, 1.0), (1.0, 1.0), (0.1, 0.5)])
def test_the_learner_finds_a_job_from_what_it_measures(share, duty):
    board = get_board("a100-sxm")
    truth = load_curve(board, share)
    learner = CurveLearner(board)
    assert (learner.memory_share, learner.duty) == (0.5, 1.0)  # the prior: mixed
    for cap in (150.0, 220.0, 300.0, 180.0):
        power = duty * truth.power_w(cap) + (1 - duty) * truth.idle_w
        learner.observe(cap, power, duty * truth.work_per_s(cap))
    assert learner.memory_share == pytest.approx(share, abs=0.051)
    assert learner.duty == pytest.approx(duty, abs=0.05)
    for cap, work in learner.curve():
        assert work == pytest.approx(duty * truth.work_per_s(cap), rel=0.05, abs=0.2)
