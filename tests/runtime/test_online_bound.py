"""scripts/bench_online_bound.py: the most a causal battery policy can do on the step trace
while keeping the best constant clock's work on the traces it cannot tell from it."""

from __future__ import annotations

import pytest
from script_helpers import script_module


@pytest.fixture(scope="module")
def bound():
    with script_module("bench_online_bound") as mod:
        yield mod


@pytest.mark.parametrize("board", ["agx-orin", "titan-x"])
def test_the_grid_finds_hindsight_and_the_siblings_only_lower_it(bound, board):
    r = bound.step_bound(board, grid=60)
    # unconstrained, the search over the first two thirds' powers is the bench's oracle
    # (a greedy over envelope slopes, computed another way)
    assert r["grid_oracle"] == pytest.approx(r["oracle"], rel=2e-4)
    # each promise kept on a sibling can only cost work on the step trace
    assert r["both"] <= r["memory"] <= r["grid_oracle"] * (1 + 1e-9)
    assert r["both"] >= 1.0 - 1e-9  # and a causal schedule keeps all three promises here


def test_memory_then_compute_is_what_binds_on_the_titan_x(bound):
    # its compute load's least power is above what the step trace's last memory third would
    # be left: hindsight's step plan would run a memory-compute mission out of budget
    r = bound.step_bound("titan-x", grid=60)
    assert r["memory"] > r["both"] + 0.03


def test_budget_rule_is_the_benchs(bound):
    from governor.devices.sim.catalog import get_board

    spec = get_board("nano")
    runs = bound._constant_runs(spec, bound._phases("step", 600.0))
    b = bound.budget_j(spec, "step", 600.0)
    assert runs[0][1] < b < runs[-1][1]
    assert (b - runs[0][1]) / (runs[-1][1] - runs[0][1]) == pytest.approx(0.6)
