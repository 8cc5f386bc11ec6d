"""A real slurmd (Debian's 22.05) whose gres.conf lists the GPU device files out of order,
``File=<dir>/dev/gpu[1,0]``: slurmd numbers them as written, so the job's GRES index 0 is
``gpu1``, the fake driver's T4 (minor 1), and the prolog must set the T4, not the A100.
Skipped, saying why, without root or without Slurm (as test_real_services.py)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from fakes.nvml import T4, FakeNvml
from fleet_services import SLURM_PROGRAMS, missing, start_slurm, wait_for

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="real Slurm needs root (slurmd runs the prolog as root); run the suite as root",
)


@pytest.fixture(scope="module")
def fake(fake_nvml_lib, tmp_path_factory):
    mp = pytest.MonkeyPatch()
    driver = FakeNvml(fake_nvml_lib, tmp_path_factory.mktemp("gres-order-nvml"), mp)
    yield driver
    driver.close()
    mp.undo()


@pytest.fixture(scope="module")
def cluster(fake):
    gone = missing(SLURM_PROGRAMS)
    if gone:
        pytest.skip("real Slurm is not installed (missing " + ", ".join(gone) + ")")
    work = Path(tempfile.mkdtemp(prefix="governor-gres-order-"))
    stack = start_slurm(
        work,
        fake.env(),
        accounting=False,
        gres=("gpu:2", "NodeName=node1 Name=gpu File={w}/dev/gpu[1,0]\n"),
    )
    try:
        yield stack
    finally:
        stack.stop()
        if not os.environ.get("GOVERNOR_KEEP_TEST_DIRS"):
            shutil.rmtree(work, ignore_errors=True)


def _locked(fake, index):
    """GPU ``index``'s locked clocks, None also before the driver's first use (no state)."""
    state = fake.state()
    return state[index].gpu_locked if len(state) > index else None


def test_gres_index_0_is_the_first_file_of_gres_conf(cluster, fake):
    out = cluster.run(
        "sbatch", "--parsable", "-o", "/dev/null", "--gres=gpu:1", "--wrap", "sleep 3"
    )
    job = out.strip().split(";")[0]
    detail = wait_for(
        "job running",
        lambda: (lambda t: t if "JobState=RUNNING" in t else "")(
            cluster.run("scontrol", "show", "job", "-d", job, check=False)
        ),
        30,
        0.25,
    )
    assert "(IDX:0)" in detail  # Slurm gave the job GRES index 0...
    # ...which is dev/gpu1: the T4 (NVML GPU 1, minor 1) is locked, the A100 is not
    locked = wait_for("T4 locked", lambda: _locked(fake, 1), 15, 0.1)
    assert locked[0] == locked[1] and _locked(fake, 0) is None
    path = cluster.w / "jobs" / f"{job}.json"
    wait_for("job record", path.exists, 60, 0.25)
    (gpu,) = json.loads(path.read_text())["gpus"]
    assert (gpu["gres_index"], gpu["uuid"]) == (0, T4["uuid"])
    assert _locked(fake, 1) is None  # the epilog restored it
    log = (cluster.w / "jobs" / "slurm.log").read_text()
    assert "GRES order from" in log and "dev/gpu1, " in log
