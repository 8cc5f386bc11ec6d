"""scripts/bench_online_ppw.py: --policy ppw against the best fixed clock, with and without a
profile that is not the unit's own."""

from __future__ import annotations

import pytest
from script_helpers import script_module


@pytest.fixture(scope="module")
def bench():
    with script_module("bench_online_ppw") as mod:
        yield mod


def test_the_shipped_profiles_row_is_searched_and_within_one_percent(bench, capsys):
    assert bench.main(["--boards", "a100-pcie", "--duration-s", "120"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = {line.split()[2]: line.split() for line in out if line.startswith("a100-pcie ")}
    assert set(rows) == {"none", "shipped", "unit", "unit-10%", "unit+10%"}
    shipped = rows["shipped"]
    start, found, ratio, again = (
        float(shipped[3]),
        float(shipped[4]),
        float(shipped[7]),
        float(shipped[8]),
    )
    assert start == 1005 and found != start  # the reference's clock, moved on this unit
    assert ratio <= 1.01 and again <= 1.01
    assert out[-1].startswith("worst ratio") and out[-1].endswith(": met")


@pytest.mark.parametrize(
    "argv, says",
    [(["--boards", "nope"], "unknown board(s): nope"), (["--duration-s", "0"], "positive")],
)
def test_bad_arguments_say_so_in_one_line(bench, capsys, argv, says):
    assert bench.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1
