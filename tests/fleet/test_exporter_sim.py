"""``governor exporter`` on a simulated board: in real time its energy counter advances between
scrapes; on virtual time (where nothing advances it) it is refused with the URI that works."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from cli_helpers import run_cli

REPO = Path(__file__).resolve().parents[2]


def _energy_j(url: str) -> float:
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    (line,) = [x for x in text.splitlines() if x.startswith("governor_energy_joules_total{")]
    return float(line.rsplit(" ", 1)[1])


def test_a_realtime_simulated_board_counts_energy_between_scrapes():
    pytest.importorskip("prometheus_client", reason="pip install 'gpu-governor[metrics]'")
    proc = subprocess.Popen(
        [sys.executable, "-m", "governor", "exporter", "-d", "sim:a100-pcie?realtime=1"]
        + ["--listen", "127.0.0.1:0", "--json"],
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = json.loads(proc.stdout.readline())["url"]
        first = _energy_j(url)
        time.sleep(1.0)
        second = _energy_j(url)
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    assert proc.returncode == 0
    assert second - first > 10.0  # an idle A100 draws tens of watts for the second slept


@pytest.mark.parametrize(
    "uri, fix",
    [
        ("sim:a100-pcie", "use sim:a100-pcie?realtime=1"),
        ("sim:t4?seed=2&realtime=0", "use sim:t4?seed=2&realtime=1"),
        ("sim:t4,sim:a100-pcie?realtime=1", "sim:t4 runs on virtual time"),
    ],
)
def test_a_virtual_time_board_is_refused_with_the_uri_that_works(capsys, uri, fix):
    pytest.importorskip("prometheus_client", reason="pip install 'gpu-governor[metrics]'")
    code, out, err = run_cli(capsys, "exporter", "--device", uri, "--listen", "127.0.0.1:0")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and fix in err and "--device" in err
