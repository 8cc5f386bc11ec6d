"""The Slurm prolog/epilog in a fake Slurm environment (env vars), on simulated boards.

They run in a subprocess exactly as slurmd would run them (a clean environment plus the job's
variables); governor is ``python -m governor``, and the device URI template names sim boards.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from governor.runtime.daemon.config import parse_config
from governor.runtime.daemon.server import DaemonServer

REPO = Path(__file__).resolve().parents[1]
SLURM = REPO / "deploy" / "slurm"
BASH = shutil.which("bash")
TEMPLATE = "sim:a100-pcie?seed={gpu}"

pytestmark = pytest.mark.skipif(BASH is None, reason="needs bash")


def run_script(name, job_env, conf_text="", tmp=None):
    """Run deploy/slurm/NAME with only the variables slurmd would give it, plus ``job_env``."""
    conf = Path(tmp or tempfile.mkdtemp()) / "slurm.conf"
    conf.write_text(conf_text)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(REPO),
        "GOVERNOR_SLURM_CONF": str(conf),
        "GOVERNOR_STATE_DIR": os.environ["GOVERNOR_STATE_DIR"],
        "GOVERNOR_DATA_DIR": os.environ["GOVERNOR_DATA_DIR"],
        "SLURM_JOB_ID": "4242",
        "GOVERNOR_CMD": f"{sys.executable} -m governor",
    }
    env.update(job_env)
    return subprocess.run(
        [BASH, str(SLURM / name)], env=env, capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def recorder(tmp_path):
    """A fake governor that records its arguments and answers like the real one."""
    log = tmp_path / "calls.jsonl"
    fake = tmp_path / "fake-governor"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "if os.environ.get('FAKE_FAIL'):\n"
        "    sys.stderr.write('governor: error: the device refused\\n'); sys.exit(1)\n"
        "print(json.dumps({'device': 'x', 'applied': {}, 'previous': {}}))\n"
    )
    fake.chmod(0o755)

    def calls():
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    return str(fake), calls


def test_prolog_and_epilog_call_governor_for_each_job_gpu(recorder, tmp_path):
    fake, calls = recorder
    job = {
        "GOVERNOR_CMD": fake,
        "SLURM_JOB_GPUS": "0,2-3,GPU-5f1c,,x;reboot",
        "GOVERNOR_DEVICE_TEMPLATE": TEMPLATE,
    }
    out = run_script("prolog.sh", job, tmp=tmp_path)
    assert out.returncode == 0, out.stderr
    uris = [f"sim:a100-pcie?seed={i}" for i in (0, 2, 3)]
    assert calls() == [["apply", "ppw", "--device", uri, "--json"] for uri in uris]
    assert (
        "skipping GPU entry 'GPU-5f1c'" in out.stderr
        and "skipping GPU entry 'x;reboot'" in out.stderr
    )
    out = run_script("epilog.sh", job, tmp=tmp_path)
    assert out.returncode == 0
    assert calls()[3:] == [["reset", "--device", uri, "--json"] for uri in uris]


def test_settings_come_from_the_conf_file_and_the_environment_wins(recorder, tmp_path):
    fake, calls = recorder
    conf = "# site\nGOVERNOR_POLICY=clock=900\nGOVERNOR_DEVICE_TEMPLATE=sim:t4\nGOVERNOR_VIA=daemon\nBOGUS=1\n"
    out = run_script(
        "prolog.sh", {"GOVERNOR_CMD": fake, "CUDA_VISIBLE_DEVICES": "0,1"}, conf, tmp_path
    )
    assert out.returncode == 0
    assert calls() == [
        ["daemon", "lock", "--min-mhz", "900", "--device", "sim:t4", "--json"]
    ]  # one URI
    assert "ignoring unknown setting 'BOGUS'" in out.stderr
    run_script(
        "prolog.sh",
        {"GOVERNOR_CMD": fake, "SLURM_JOB_GPUS": "1", "GOVERNOR_POLICY": "max"},
        conf,
        tmp_path,
    )
    assert calls()[-1] == ["daemon", "apply", "max", "--device", "sim:t4", "--json"]


@pytest.mark.parametrize(
    "job_env, message",
    [
        ({"GOVERNOR_POLICY": "ppw; touch /tmp/pwned"}, "GOVERNOR_POLICY must be"),
        ({"GOVERNOR_POLICY": "clock=9$(id)"}, "bad clock"),
        ({"GOVERNOR_DEVICE_TEMPLATE": "nvml:{gpu} $(reboot)"}, "unexpected characters"),
        ({"GOVERNOR_VIA": "ssh"}, "GOVERNOR_VIA must be"),
        (
            {"GOVERNOR_VIA": "daemon", "GOVERNOR_POLICY": "power-limit=200"},
            "does not set power limits",
        ),
    ],
)
def test_bad_settings_are_refused_before_anything_runs(recorder, tmp_path, job_env, message):
    fake, calls = recorder
    env = dict({"GOVERNOR_CMD": fake, "SLURM_JOB_GPUS": "0"}, **job_env)
    out = run_script("prolog.sh", env, tmp=tmp_path)
    assert out.returncode == 0 and message in out.stderr  # logged; the job still runs
    assert calls() == []
    strict = run_script("prolog.sh", dict(env, GOVERNOR_STRICT="1"), tmp=tmp_path)
    assert strict.returncode == 1


def test_failures_are_logged_and_only_strict_mode_fails_the_prolog(recorder, tmp_path):
    fake, calls = recorder
    env = {"GOVERNOR_CMD": fake, "SLURM_JOB_GPUS": "0", "FAKE_FAIL": "1"}
    out = run_script("prolog.sh", env, tmp=tmp_path)
    assert out.returncode == 0 and "failed: governor: error: the device refused" in out.stderr
    assert run_script("prolog.sh", dict(env, GOVERNOR_STRICT="1"), tmp=tmp_path).returncode == 1
    none = run_script("prolog.sh", {"GOVERNOR_CMD": fake}, tmp=tmp_path)
    assert none.returncode == 0 and "no GPUs allocated" in none.stderr


def test_through_the_daemon_on_simulated_boards(tmp_path):
    """Prolog applies PPW clocks to the job's GPUs (0 and 2 of 3), epilog resets them."""
    sockdir = Path(tempfile.mkdtemp(prefix="gvs-"))
    sock = sockdir / "governor.sock"
    devices = "\n".join(f'[[device]]\nuri = "sim:a100-pcie?seed={i}"' for i in range(3))
    cfg = parse_config(f'[daemon]\nsocket = "{sock}"\n{devices}\n', "site.toml")
    server = DaemonServer(cfg).start_in_thread()
    job = {
        "SLURM_JOB_GPUS": "0,2",
        "GOVERNOR_VIA": "daemon",
        "GOVERNOR_DEVICE_TEMPLATE": TEMPLATE,
        "GOVERNOR_DAEMON_SOCKET": str(sock),
    }

    def clocks():
        from governor.devices.daemon.client import request

        status = request("status", socket_path=sock)
        return [d["state"]["gpu_clocks_mhz"] for d in status["devices"]]

    try:
        out = run_script("prolog.sh", job, tmp=tmp_path)
        assert out.returncode == 0 and out.stderr.count(": ok") == 2, out.stderr
        assert clocks() == [[1005.0, 1005.0], None, [1005.0, 1005.0]]
        out = run_script("epilog.sh", job, tmp=tmp_path)
        assert out.returncode == 0 and out.stderr.count(": ok") == 2, out.stderr
        assert clocks() == [None, None, None]
    finally:
        server.stop()
        shutil.rmtree(sockdir, ignore_errors=True)


def _governor_has(command):
    out = subprocess.run(
        [sys.executable, "-m", "governor", command, "--help"],
        capture_output=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        timeout=60,
    )
    return out.returncode == 0


def test_direct_mode_runs_governor_apply_and_reset_on_a_simulated_board(tmp_path):
    if not (_governor_has("apply") and _governor_has("reset")):
        pytest.skip("governor apply/reset are not in this tree yet")
    job = {"SLURM_JOB_GPUS": "0", "GOVERNOR_DEVICE_TEMPLATE": "sim:a100-pcie"}
    out = run_script("prolog.sh", dict(job, GOVERNOR_STRICT="1"), tmp=tmp_path)
    assert out.returncode == 0 and "sim:a100-pcie: apply ppw: ok" in out.stderr, out.stderr
    out = run_script("epilog.sh", dict(job, GOVERNOR_STRICT="1"), tmp=tmp_path)
    assert out.returncode == 0 and "sim:a100-pcie: reset: ok" in out.stderr, out.stderr
