"""The daemon's per-job authorization on a real single-node Slurm (Debian's packages, as in
test_real_services.py), GPUs served by the fake NVML driver under the real nvidia-ml-py.

A job allocated GPU 0 (the A100), running as ``nobody``, asks the node's daemon over its
socket to lock GPU 1 and is refused, then GPU 0 and is accepted; after the job, its epilog
(``GOVERNOR_VIA=daemon``) has the daemon put GPU 0 back to what it was before the job. The
daemon knows the job from slurmd itself (``scontrol pidinfo``: this cluster tracks processes
with ``proctrack/linuxproc``, without cgroups), and its GPUs from the prolog's record.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from fakes.nvml import A100
from fleet_services import SLURM_PROGRAMS, missing, start_slurm, wait_for

import governor.devices.nvml as backend
from governor.runtime.daemon.config import parse_config
from governor.runtime.daemon.server import DaemonServer

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="real Slurm needs root (slurmd runs the prolog as root); run the suite as root",
)

CLIENT = """\
import json, socket, sys
path, device = sys.argv[1], sys.argv[2]
with socket.socket(socket.AF_UNIX) as s:
    s.connect(path)
    s.sendall((json.dumps({"action": "lock", "device": device, "min_mhz": 900}) + "\\n").encode())
    print(json.dumps({"device": device, "reply": json.loads(s.makefile().readline())}), flush=True)
"""


def _job_state(stack, job):
    out = stack.run("scontrol", "show", "job", job, check=False)
    for word in out.split():
        if word.startswith("JobState="):
            return word.split("=", 1)[1]
    return ""


def test_a_job_may_lock_its_own_gpu_through_the_daemon_and_not_the_other(fake_nvml, monkeypatch):
    gone = missing(SLURM_PROGRAMS)
    if gone:
        pytest.skip("real Slurm is not installed (missing " + ", ".join(gone) + ")")
    if not Path("/usr/bin/python3").exists():
        pytest.skip("the job's client runs as nobody under /usr/bin/python3")
    monkeypatch.setattr(backend, "_is_root", lambda: True)
    work = Path(tempfile.mkdtemp(prefix="governor-slurm-"))
    sockdir = Path(tempfile.mkdtemp(prefix="gvj-"))
    sockdir.chmod(0o755)
    sock = sockdir / "gd.sock"
    out_dir = work / "out"
    try:
        stack = start_slurm(
            work,
            fake_nvml.env(),
            accounting=False,
            extra_conf=(
                "GOVERNOR_VIA=daemon\nGOVERNOR_POLICY=none\nGOVERNOR_STRICT=0\n"
                f"GOVERNOR_DAEMON_SOCKET={sock}\n"
            ),
        )
        out_dir.mkdir()
        out_dir.chmod(0o777)
        client = work / "client.py"
        client.write_text(CLIENT)
        client.chmod(0o644)
        monkeypatch.setenv("SLURM_CONF", stack.env["SLURM_CONF"])  # for scontrol pidinfo
        monkeypatch.setenv("PATH", stack.env["PATH"])
        text = "\n".join(
            [
                "[daemon]",
                f'socket = "{sock}"',
                'socket_group = "nogroup"',
                "test_mode = true",
                f'job_records = "{work / "jobs"}"',
                '[[device]]\nuri = "nvml:0"',
                '[[device]]\nuri = "nvml:1"',
            ]
        )
        daemon = DaemonServer(parse_config(text + "\n", "daemon.toml")).start_in_thread()
        try:
            before = [fake_nvml.gpu(i) for i in (0, 1)]
            py = "/usr/bin/python3"
            job = stack.run(
                "sbatch", "--parsable", "--uid=nobody", "--gid=nogroup", "--chdir=/tmp",
                "-o", f"{out_dir}/job-%j.out", "--gres=gpu:a100:1", "--wrap",
                f"{py} {client} {sock} nvml:1; {py} {client} {sock} nvml:0; sleep 3",
            ).strip().split(";")[0]  # fmt: skip
            wait_for(
                "GPU 0 locked by the job", lambda: fake_nvml.gpu(0).gpu_locked == (900, 900), 60
            )
            (status,) = daemon.handle_line(b'{"action": "status", "device": "nvml:0"}\n')["result"][
                "devices"
            ]
            assert status["client_override"]["by_job"] == job
            assert fake_nvml.gpu(1).gpu_locked is None and fake_nvml.gpu(1).writes == 0
            wait_for(
                "the job ended",
                lambda: _job_state(stack, job) not in ("", "PENDING", "RUNNING", "COMPLETING"),
                60,
            )
            record = work / "jobs" / f"{job}.json"
            wait_for("the epilog's record", record.exists, 60)
            doc = json.loads(record.read_text())
            after = fake_nvml.gpu(0)  # before the daemon stops (which restores all it holds)
            replies = {
                r["device"]: r["reply"]
                for r in map(json.loads, (out_dir / f"job-{job}.out").read_text().splitlines())
            }
        finally:
            daemon.stop()
    finally:
        stack_obj = locals().get("stack")
        if stack_obj is not None:
            stack_obj.stop()
        if not os.environ.get("GOVERNOR_KEEP_TEST_DIRS"):
            shutil.rmtree(work, ignore_errors=True)
            shutil.rmtree(sockdir, ignore_errors=True)
    refused, accepted = replies["nvml:1"], replies["nvml:0"]
    assert refused["ok"] is False and refused["code"] == "not-allowed"
    assert f"in Slurm job {job} may not change nvml:1: it may change nvml:0" in refused["error"]
    assert accepted["ok"] is True, accepted
    assert doc["gpus"][0]["uuid"] == A100["uuid"] and doc["daemon_reset"] == ["nvml:0"]
    # the epilog had the daemon put GPU 0 back to what it was before the job
    assert after.gpu_locked == before[0].gpu_locked is None
    assert after.power_limit_mw == before[0].power_limit_mw
