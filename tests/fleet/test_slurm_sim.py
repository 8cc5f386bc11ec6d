"""The Slurm prolog and epilog refuse a simulated board: it lives in one process, and they are
two, so the epilog would record 0 J for the job and undo nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WHY = "sim:a100-pcie is a simulated board, which lives in one process"


@pytest.mark.parametrize("strict", ["0", "1"])
def test_a_simulated_board_is_refused_and_no_energy_is_recorded(tmp_path, strict):
    records = tmp_path / "jobs"
    env = {
        "PYTHONPATH": str(REPO),
        "PATH": os.environ.get("PATH", ""),
        "GOVERNOR_STATE_DIR": os.environ["GOVERNOR_STATE_DIR"],
        "GOVERNOR_DATA_DIR": os.environ["GOVERNOR_DATA_DIR"],
        "GOVERNOR_RECORD_DIR": str(records),
        "GOVERNOR_SLURM_CONF": str(tmp_path / "none.conf"),
        "GOVERNOR_SLURM_BIN": str(tmp_path),  # no scontrol or sacctmgr
        "GOVERNOR_SYSLOG": "0",
        "GOVERNOR_STRICT": strict,
        "GOVERNOR_DEVICE_TEMPLATE": "sim:a100-pcie",
        "SLURM_JOB_ID": "61",
        "SLURM_JOB_GPUS": "0",
    }

    def script(mode):
        return subprocess.run(
            [sys.executable, "-m", "governor", "slurm", mode],
            env=dict(env, SLURM_SCRIPT_CONTEXT=f"{mode}_slurmd"),
            capture_output=True,
            text=True,
            timeout=60,
        )

    prolog = script("prolog")
    assert prolog.returncode == int(strict)
    assert WHY in prolog.stderr and "GOVERNOR_DEVICE_TEMPLATE" in prolog.stderr
    assert "Traceback" not in prolog.stderr
    running = json.loads((records / "running" / "61.json").read_text())
    (gpu,) = running["gpus"]
    assert gpu["energy_j_start"] is None and gpu["clocks_mhz"] is None
    assert any(WHY in e for e in gpu["errors"])
    assert not list(Path(os.environ["GOVERNOR_STATE_DIR"]).rglob("*.json"))  # nothing journaled

    epilog = script("epilog")
    assert epilog.returncode == 0 and "Traceback" not in epilog.stderr
    doc = json.loads((records / "61.json").read_text())
    assert doc["energy_j"] is None and doc["gpus"][0]["energy_j"] is None
    assert WHY in doc["energy_partial_why"][0]
