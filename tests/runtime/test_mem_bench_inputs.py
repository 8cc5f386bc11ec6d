"""The memory benches' board lists (``scripts/_membench.py``): a board the catalog does not
know, or a list without a board that has several memory clocks, is one line on stderr and
exit 1 from every memory bench, before anything is calibrated."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
BENCHES = (
    "bench_mem_battery",
    "bench_mem_cap",
    "bench_mem_throughput",
    "bench_ppw_pairs",
    "bench_online_ppw_pairs",
)


@pytest.mark.parametrize("bench", BENCHES)
@pytest.mark.parametrize(
    "boards, words",
    [
        ("t4", "none of these boards has more than one memory clock"),
        ("agx-orin,nope", "unknown boards: nope"),
    ],
)
def test_a_bad_board_list_is_one_line_and_exit_1(bench, boards, words):
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / f"{bench}.py"), "--boards", boards],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert done.stderr == f"{bench}: {words}\n"
    assert done.stdout == ""
