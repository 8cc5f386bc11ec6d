"""scripts/bench_battery_patterns.py: the battery policy on held-out phase patterns."""

from __future__ import annotations

import pytest
from script_helpers import script_module


@pytest.fixture(scope="module")
def patterns():
    with script_module("bench_battery_patterns") as mod:
        yield mod


def test_a_pattern_is_run_against_its_own_best_constant_clock(patterns, capsys):
    # a short compute-then-memory mission on the Orin Nano, with ticks and without: one row,
    # each cell the policy's work over the best constant clock's on the pattern's budget
    patterns.main(
        ["--boards", "orin-nano", "--patterns", "compute:1,memory:1", "--duration-s", "60"]
    )
    out = capsys.readouterr().out.splitlines()
    row = next(line for line in out if line.startswith("| orin-nano |"))
    cells = [float(x) for x in row.strip("| ").split("|")[1:]]
    assert len(cells) == 2
    # the policy spends the same budget as the constant clock, so its work is near it
    assert all(0.8 < x < 1.2 for x in cells)
    assert any(line.startswith("- all: min ") for line in out)
    energy = float(out[-1].rsplit("max ", 1)[1])
    assert energy <= 1.01  # within the budget (the issue's + 1 %)


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--boards", "nope"], "unknown board 'nope'"),
        (["--patterns", "compute:1,bogus:1"], "bad phase 'bogus:1'"),
        (["--patterns", " ; "], "at least one phase list"),
        (["--duration-s", "1"], "--duration-s must be within"),
    ],
)
def test_bad_arguments_are_usage_errors(patterns, argv, says, capsys):
    with pytest.raises(SystemExit) as ended:
        patterns.main(argv)
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_missions_with_waits_are_summed_apart_from_those_ending_in_one(patterns, capsys):
    patterns.main(
        [
            "--boards",
            "orin-nano",
            "--patterns",
            "compute:1,memory:1;idle:1,compute:2;compute:2,idle:1",
            "--ticks",
            "no",
            "--duration-s",
            "60",
        ]
    )
    out = capsys.readouterr().out.splitlines()
    row = next(line for line in out if line.startswith("| orin-nano |"))
    cells = [float(x) for x in row.strip("| ").split("|")[1:]]
    assert len(cells) == 3

    def summary(name):
        line = next(x for x in out if x.startswith(f"- {name}: min "))
        return float(line.split("min ", 1)[1].split(",")[0])

    assert summary("compute and memory") == pytest.approx(cells[0], abs=1e-4)
    assert summary("with waits, not ending in one") == pytest.approx(cells[1], abs=1e-4)
    assert summary("ending in a wait") == pytest.approx(cells[2], abs=1e-4)
    # a wait then work: the wait's savings buy work, the budget is kept
    assert cells[1] >= 0.99
    assert float(out[-1].rsplit("max ", 1)[1]) <= 1.01


def test_as_a_new_user_a_wait_then_work_does_the_guessed_clocks_work(patterns, capsys):
    # no profile, the budget of the fixed clock the uncalibrated model guesses: the policy
    # does that clock's work on its energy (a wait first used to leave it 15-20 % short)
    patterns.main(
        [
            "--new-user",
            "--boards",
            "orin-nano",
            "--patterns",
            "idle:1,compute:2",
            "--ticks",
            "no",
            "--duration-s",
            "60",
        ]
    )
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("## Battery on phase patterns as a new user")
    row = next(line for line in out if line.startswith("| orin-nano |"))
    (cell,) = [float(x) for x in row.strip("| ").split("|")[1:]]
    assert cell >= 0.98  # a minute: the generic model is still being corrected
    assert float(out[-1].rsplit("max ", 1)[1]) <= 1.01
