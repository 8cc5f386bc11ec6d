"""The Slurm prolog and epilog when a job's GPU falls off the bus (the fake NVML driver under
the real pynvml, the fault switched on between prolog and epilog): the epilog records the
job's energy as partial with why, keeps the journal for ``governor reset``, and drains the
node (fails) only in strict mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def slurm(fake_nvml, tmp_path):
    records = tmp_path / "jobs"
    empty = tmp_path / "no-slurm-bin"
    empty.mkdir()

    def run(mode, job_id, **variables):
        env = {
            "PYTHONPATH": str(REPO),
            "GOVERNOR_STATE_DIR": os.environ["GOVERNOR_STATE_DIR"],
            "GOVERNOR_DATA_DIR": os.environ["GOVERNOR_DATA_DIR"],
            "GOVERNOR_RECORD_DIR": str(records),
            "GOVERNOR_SLURM_CONF": str(tmp_path / "governor-slurm.conf"),
            "GOVERNOR_SLURM_BIN": str(empty),
            "GOVERNOR_SYSLOG": "0",
            "SLURM_JOB_ID": str(job_id),
            "SLURM_JOB_GPUS": "0,1",
            "SLURM_SCRIPT_CONTEXT": f"{mode}_slurmd",
        }
        env.update({k: str(v) for k, v in variables.items()})
        env = fake_nvml.env(env)
        return subprocess.run(
            [sys.executable, "-m", "governor", "slurm", mode],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    run.records = records
    return run


@pytest.mark.parametrize("strict", ["0", "1"])
def test_a_gpu_lost_during_the_job_makes_its_energy_partial(slurm, fake_nvml, capsys, strict):
    from cli_helpers import run_cli

    assert slurm("prolog", 31, GOVERNOR_POLICY="max").returncode == 0
    assert fake_nvml.gpu(0).gpu_locked is not None and fake_nvml.gpu(1).gpu_locked is not None
    fake_nvml.faults(lost=[0])  # the A100 falls off the bus while the job runs
    done = slurm("epilog", 31, GOVERNOR_STRICT=strict)
    assert done.returncode == (1 if strict == "1" else 0), done.stderr
    doc = json.loads((slurm.records / "31.json").read_text())
    assert doc["energy_j"] is None
    assert doc["energy_partial_j"] is not None and doc["energy_partial_j"] >= 0
    (why,) = doc["energy_partial_why"]
    assert "the GPU is lost" in why
    log = (slurm.records / "slurm.log").read_text()
    assert "energy of job 31 is partial (1 of 2 GPUs)" in log
    assert fake_nvml.gpu(1).gpu_locked is None  # the T4 was given back
    assert fake_nvml.gpu(0).gpu_locked is not None  # the lost A100 could not be
    fake_nvml.faults()  # it is back: reset restores it from the journal the prolog kept
    code, _, err = run_cli(capsys, "reset", "--device", "nvml:0")
    assert code == 0, err
    assert fake_nvml.gpu(0).gpu_locked is None


@pytest.mark.parametrize("strict", ["0", "1"])
def test_a_gpu_lost_before_the_job_is_logged_and_drains_only_when_strict(slurm, fake_nvml, strict):
    fake_nvml.faults(lost=[1])
    done = slurm("prolog", 32, GOVERNOR_POLICY="max", GOVERNOR_STRICT=strict)
    assert done.returncode == (1 if strict == "1" else 0), done.stderr
    log = (slurm.records / "slurm.log").read_text()
    assert "the GPU is lost" in log
    assert fake_nvml.gpu(0).gpu_locked is not None  # the job's other GPU is governed
    assert fake_nvml.gpu(1).writes == 0
    fake_nvml.faults()
    assert slurm("epilog", 32).returncode == 0
    assert fake_nvml.gpu(0).gpu_locked is None


DEADLINES = "read=0.5,write=0.5,open=0.5,close=0.5"  # GOVERNOR_DEVICE_DEADLINES of slurmd


def test_a_gpu_wedged_during_the_job_is_recorded_not_restored_and_the_other_is(slurm, fake_nvml):
    """The epilog ends (its own deadlines, not a hung driver's) and records the wedged GPU as
    not restored; the other GPU is given back; reset restores the first once it answers."""
    assert slurm("prolog", 33, GOVERNOR_POLICY="max").returncode == 0
    fake_nvml.hang(0)  # the A100's driver stops answering while the job runs
    try:
        done = slurm("epilog", 33, GOVERNOR_DEVICE_DEADLINES=DEADLINES)
        assert done.returncode == 0, done.stderr
        doc = json.loads((slurm.records / "33.json").read_text())
        wedged, served = doc["gpus"]
        assert wedged["restore_failed"] is True
        assert "not responding" in " ".join(wedged["errors"])
        assert served.get("restore_failed") is None and served["restored"]
        assert fake_nvml.gpu(1).gpu_locked is None  # the T4 was given back
        assert fake_nvml.gpu(0).gpu_locked is not None  # the A100 could not be
    finally:
        fake_nvml.unhang(0)
    reset = subprocess.run(
        [sys.executable, "-m", "governor", "reset", "--all"],
        env=fake_nvml.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert reset.returncode == 0, reset.stderr
    assert fake_nvml.gpu(0).gpu_locked is None


def test_a_gpu_wedged_before_the_job_does_not_hold_its_start(slurm, fake_nvml):
    fake_nvml.hang(1)
    try:
        done = slurm("prolog", 34, GOVERNOR_POLICY="max", GOVERNOR_DEVICE_DEADLINES=DEADLINES)
    finally:
        fake_nvml.unhang(1)
    assert done.returncode == 0, done.stderr  # not strict: the job starts
    record = json.loads((slurm.records / "running" / "34.json").read_text())
    assert fake_nvml.gpu(0).gpu_locked is not None  # the A100 got its policy
    assert "not responding" in json.dumps(record) or "not responding" in done.stderr
    assert slurm("epilog", 34, GOVERNOR_DEVICE_DEADLINES=DEADLINES).returncode == 0
    assert fake_nvml.gpu(0).gpu_locked is None
