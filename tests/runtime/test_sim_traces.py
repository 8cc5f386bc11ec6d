"""The simulator's load traces: what each runs, read from the simulated board's work."""

import pytest

from governor.runtime.simulate import simulate, trace_segments


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


def test_a_phase_list_runs_its_loads_for_their_shares():
    compute, memory = _work("steady"), _work("memory")
    # compute-bound for a quarter, idle for a quarter, memory-bound for the rest
    assert _work("compute:1,idle:1,memory:2") == pytest.approx(compute / 4 + memory / 2, rel=2e-3)
    # the order is the run's: the same shares in another order do the same work, and the
    # memory-compute trace written as a phase list is that trace
    assert _work("memory:2,compute:1,idle:1") == pytest.approx(compute / 4 + memory / 2, rel=2e-3)
    assert _work("memory:1,compute:2") == pytest.approx(_work("memory-compute"), rel=1e-9)
    assert _work(" memory : 1 , compute: 2") == pytest.approx(_work("memory-compute"), rel=1e-9)
    # (work at a fixed clock does not tell the order: the segments do)
    assert trace_segments("compute:1,idle:1,memory:2", 600.0) == [
        (0.0, "compute"),
        (150.0, None),
        (300.0, "memory"),
    ]


@pytest.mark.parametrize(
    "trace, says",
    [
        ("compute:1,bogus:2", "bad phase 'bogus:2'"),
        ("compute", "unknown trace 'compute'"),
        ("compute:0", "bad weight '0'"),
        ("compute:-1", "bad weight '-1'"),
        ("memory:nan", "bad weight 'nan'"),
        ("memory:inf", "bad weight 'inf'"),
        ("compute:1,", "bad phase ''"),
        ("memory:1e308,compute:1e308", "add up past a float's range"),
    ],
)
def test_a_bad_phase_list_gets_a_one_line_error(trace, says, capsys):
    from governor.cli import main

    with pytest.raises(SystemExit) as ended:
        main(["simulate", "--board", "nano", "--trace", trace, "--duration-s", "5"])
    assert ended.value.code != 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("governor: error: ") and says in err
    assert "\n" not in err and "Traceback" not in err
