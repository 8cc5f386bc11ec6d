"""The simulator's load traces: what each runs, read from the simulated board's work."""

import pytest

from governor.runtime.simulate import simulate


def _work(trace, seconds=30.0):
    r = simulate("agx-orin", {"policy": "clock", "clock_mhz": 918}, trace, seconds, noise=False)
    return r["work_done"]


def test_memory_and_memory_compute_run_the_loads_they_name():
    compute, memory = _work("steady"), _work("memory")
    assert abs(memory - compute) > 0.1 * compute  # two loads, told apart by their work
    # a third memory-bound, then compute-bound to the end
    assert _work("memory-compute") == pytest.approx(memory / 3 + 2 * compute / 3, rel=2e-3)
    # the step trace shares its first two thirds with memory-compute, its last with memory
    assert _work("step") == pytest.approx(2 * memory / 3 + compute / 3, rel=2e-3)
