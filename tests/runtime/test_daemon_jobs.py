"""Per-job authorization in the daemon: a client changes only the GPUs of its own Slurm job
(read from its cgroup and the prolog's record) or, off Slurm, those whose device nodes it can
open; admins change any. Two GPUs of the fake NVML driver under the real pynvml; the client's
/proc entries are a tree under tmp_path, since a test cannot put itself in a Slurm cgroup."""

from __future__ import annotations

import json
import os

import pytest
from daemon_helpers import config_text, short_socket_dir
from fakes.nvml import A100, T4

import governor.devices.nvml as backend
from governor.runtime.daemon.config import parse_config
from governor.runtime.daemon.jobs import slurm_job_of
from governor.runtime.daemon.server import DaemonServer

USER = 4242  # a client that is neither root nor the daemon's user
CGROUP_V2 = "0::/system.slice/slurmstepd.scope/job_{job}/step_0/user/task_0\n"
CGROUP_V1 = "11:devices:/slurm/uid_4242/job_{job}/step_batch\n4:cpu:/slurm/uid_4242/job_{job}\n"


@pytest.fixture
def daemon(fake_nvml, monkeypatch, tmp_path):
    monkeypatch.setattr(backend, "_is_root", lambda: True)
    records = tmp_path / "jobs"
    (records / "running").mkdir(parents=True)
    sock = short_socket_dir() / "gd.sock"
    text = config_text(
        sock,
        ['uri = "nvml:0"', 'uri = "nvml:1"'],
        f'test_mode = true\njob_records = "{records}"',
    )
    server = DaemonServer(parse_config(text, "test.toml")).start_in_thread()
    server.proc_tree = tmp_path / "proc"
    server.authority = type(server.authority)(
        admin_uids=server.authority.admin_uids,
        admin_gid=server.authority.admin_gid,
        job_records=records,
        proc_root=server.proc_tree,
    )
    server.records = records
    yield server
    server.stop()


def client(server, pid, cgroup, groups=(USER,)):
    entry = server.proc_tree / str(pid)
    entry.mkdir(parents=True, exist_ok=True)
    (entry / "cgroup").write_text(cgroup)
    (entry / "status").write_text("Name:\tpython\nGroups:\t" + " ".join(map(str, groups)) + "\n")
    return (pid, USER, USER)


def prolog_record(server, job, *uuids):
    doc = {"job_id": job, "gpus": [{"uuid": u, "key": f"nvml:{u}"} for u in uuids]}
    (server.records / "running" / f"{job}.json").write_text(json.dumps(doc))


def ask(server, peer, **doc):
    return server.handle_line((json.dumps(doc) + "\n").encode(), peer)


def test_the_job_is_read_from_the_cgroup_v1_or_v2(tmp_path):
    for pid, text in ((10, CGROUP_V2), (11, CGROUP_V1)):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "cgroup").write_text(text.format(job=77))
    (tmp_path / "12").mkdir()
    (tmp_path / "12" / "cgroup").write_text("0::/user.slice/user-4242.slice/session-3.scope\n")
    assert slurm_job_of(10, tmp_path) == "77" and slurm_job_of(11, tmp_path) == "77"
    assert slurm_job_of(12, tmp_path) is None and slurm_job_of(13, tmp_path) is None


def test_a_job_changes_its_own_gpu_and_is_refused_the_other(daemon, fake_nvml):
    prolog_record(daemon, "42", A100["uuid"])
    peer = client(daemon, 5000, CGROUP_V2.format(job=42))
    refused = ask(daemon, peer, action="lock", device="nvml:1", min_mhz=900)
    assert refused["ok"] is False and refused["code"] == "not-allowed"
    assert refused["error"] == (
        f"uid {USER} in Slurm job 42 may not change nvml:1: it may change nvml:0 "
        f"(from {daemon.records / 'running' / '42.json'})"
    )
    assert fake_nvml.gpu(1).gpu_locked is None and fake_nvml.gpu(1).writes == 0
    accepted = ask(daemon, peer, action="lock", device="nvml:0", min_mhz=900)
    assert accepted["ok"] is True, accepted
    assert fake_nvml.gpu(0).gpu_locked == (900, 900)
    status = ask(daemon, peer, action="status", device="nvml:0")
    assert status["result"]["devices"][0]["client_override"]["by_job"] == "42"
    assert ask(daemon, peer, action="reset", device="nvml:0")["ok"] is True
    assert fake_nvml.gpu(0).gpu_locked is None


def test_a_job_without_a_prolog_record_changes_nothing(daemon, fake_nvml):
    peer = client(daemon, 5001, CGROUP_V1.format(job=43))
    reply = ask(daemon, peer, action="apply", device="nvml:0", policy="max")
    assert reply["code"] == "not-allowed" and "may change no device here" in reply["error"]
    assert "no prolog record" in reply["error"]
    assert [g.writes for g in fake_nvml.state()] == [0, 0]


def test_admins_change_any_gpu_and_the_environment_does_not_count(daemon, fake_nvml, monkeypatch):
    prolog_record(daemon, "44", T4["uuid"])
    monkeypatch.setenv("SLURM_JOB_ID", "44")  # the environment is the user's to forge
    root = (os.getpid(), 0, 0)
    assert ask(daemon, root, action="lock", device="nvml:1", min_mhz=900)["ok"] is True
    assert fake_nvml.gpu(1).gpu_locked == (900, 900)
    assert ask(daemon, root, action="reset", device="nvml:1")["ok"] is True
    outsider = client(daemon, 5002, "0::/user.slice/user-4242.slice/session-3.scope\n")
    reply = ask(daemon, outsider, action="lock", device="nvml:1", min_mhz=900)
    # off Slurm, the device nodes decide; this machine has no /dev/nvidia1
    assert reply["code"] == "not-allowed" and "device nodes" in reply["error"]
    assert fake_nvml.gpu(1).gpu_locked is None
    assert ask(daemon, outsider, action="status")["ok"] is True  # reading is for everyone


def test_the_admin_group_changes_any_gpu(fake_nvml, monkeypatch, tmp_path):
    import grp

    monkeypatch.setattr(backend, "_is_root", lambda: True)
    group = grp.getgrgid(os.getgid())
    sock = short_socket_dir() / "gd.sock"
    text = config_text(
        sock, ['uri = "nvml:0"'], f'test_mode = true\nadmin_group = "{group.gr_name}"'
    )
    server = DaemonServer(parse_config(text, "test.toml")).start_in_thread()
    try:
        assert server.authority.admin_gid == group.gr_gid
        proc = tmp_path / "proc"
        server.authority = type(server.authority)(
            admin_uids=server.authority.admin_uids,
            admin_gid=group.gr_gid,
            proc_root=proc,
        )
        (proc / "6000").mkdir(parents=True)
        (proc / "6000" / "cgroup").write_text(CGROUP_V2.format(job=9))
        (proc / "6000" / "status").write_text(f"Groups:\t{USER} {group.gr_gid}\n")
        reply = ask(server, (6000, USER, USER), action="lock", device="nvml:0", min_mhz=900)
        assert reply["ok"] is True, reply
        assert fake_nvml.gpu(0).gpu_locked == (900, 900)
    finally:
        server.stop()
    assert fake_nvml.gpu(0).gpu_locked is None  # the daemon restores on the way out


def test_the_jobs_epilog_undoes_what_the_job_changed_through_the_daemon(daemon, fake_nvml):
    import subprocess
    import sys

    from daemon_helpers import REPO

    env = {
        "PYTHONPATH": str(REPO),
        "LD_LIBRARY_PATH": fake_nvml.env()["LD_LIBRARY_PATH"],
        "FAKE_NVML_CONFIG": str(fake_nvml.config_path),
        "FAKE_NVML_STATE": str(fake_nvml.state_path),
        "GOVERNOR_STATE_DIR": os.environ["GOVERNOR_STATE_DIR"],
        "GOVERNOR_DATA_DIR": os.environ["GOVERNOR_DATA_DIR"],
        "GOVERNOR_RECORD_DIR": str(daemon.records),
        "GOVERNOR_SLURM_CONF": str(daemon.records / "none.conf"),
        "GOVERNOR_SLURM_BIN": str(daemon.records),  # no scontrol here
        "GOVERNOR_SYSLOG": "0",
        "GOVERNOR_VIA": "daemon",
        "GOVERNOR_POLICY": "none",  # the prolog leaves the clocks; the job sets its own
        "GOVERNOR_DAEMON_SOCKET": str(daemon.socket_path),
        "SLURM_JOB_ID": "45",
        "SLURM_JOB_GPUS": "0",
    }

    def script(mode):
        done = subprocess.run(
            [sys.executable, "-m", "governor", "slurm", mode],
            env=dict(env, SLURM_SCRIPT_CONTEXT=f"{mode}_slurmd"),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done

    before = fake_nvml.gpu(0)
    script("prolog")
    peer = client(daemon, 5003, CGROUP_V2.format(job=45))
    assert ask(daemon, peer, action="lock", device="nvml:0", min_mhz=900)["ok"] is True
    assert ask(daemon, peer, action="lock", device="nvml:1", min_mhz=900)["ok"] is False
    assert fake_nvml.gpu(0).gpu_locked == (900, 900)
    script("epilog")
    after = fake_nvml.gpu(0)
    assert after.gpu_locked == before.gpu_locked is None
    assert after.power_limit_mw == before.power_limit_mw
    doc = json.loads((daemon.records / "45.json").read_text())
    assert doc["daemon_reset"] == ["nvml:0"]


def test_bad_authorization_settings_are_one_line_naming_the_key(fake_nvml):
    from governor.runtime.daemon.config import ConfigError

    sock = short_socket_dir() / "gd.sock"
    with pytest.raises(ConfigError, match=r"^test.toml: daemon.job_records: must be an absolute"):
        parse_config(config_text(sock, ['uri = "nvml:0"'], 'job_records = "jobs"'), "test.toml")
    text = config_text(sock, ['uri = "nvml:0"'], 'test_mode = true\nadmin_group = "no-such-grp"')
    with pytest.raises(ConfigError, match=r"^test.toml: daemon.admin_group: no group named"):
        DaemonServer(parse_config(text, "test.toml")).start()
    assert not sock.exists()


def test_slurm_is_asked_outside_the_devices_lock_and_once_per_process(daemon, tmp_path):
    """The client's Slurm job comes from ``scontrol pidinfo`` where its cgroup names none; a
    slow scontrol (without slurmd it waits on a DNS lookup of the controller: the 5-s stall of
    issue 47) must not hold the device's other requests, and is asked once per process."""
    import threading
    import time

    from governor.runtime.daemon import jobs

    jobs._pidinfo.clear()  # answers kept by earlier tests of this process
    calls, go = tmp_path / "scontrol-calls", tmp_path / "scontrol-go"
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(
        "#!/bin/sh\n"
        f"echo called >> {calls}\n"
        f"while [ ! -e {go} ]; do sleep 0.01; done\n"
        "echo 'Slurm job id 0 ends at UNLIMITED'\n"
    )
    scontrol.chmod(0o755)
    me = os.getpid()
    tree = daemon.proc_tree / str(me)
    tree.mkdir(parents=True, exist_ok=True)
    (tree / "cgroup").write_text("0::/user.slice/user-0.slice/session-1.scope\n")
    (tree / "stat").write_text(f"{me} (python) S " + " ".join(["1"] * 19) + " 4242 0\n")
    daemon.authority = type(daemon.authority)(
        admin_uids=daemon.authority.admin_uids,
        job_records=daemon.records,
        proc_root=daemon.proc_tree,
        scontrol=str(scontrol),
    )
    peer = (me, 0, 0)  # an admin: refused nothing, but its job is still recorded
    replies = {}

    def lock():
        line = json.dumps({"action": "lock", "device": "nvml:0", "min_mhz": 900}) + "\n"
        replies["lock"] = daemon.handle_line(line.encode(), peer)

    thread = threading.Thread(target=lock)
    thread.start()
    end = time.monotonic() + 60
    while not calls.exists() and time.monotonic() < end:
        time.sleep(0.01)
    assert calls.exists(), "scontrol was never asked"
    # scontrol is still running: the device's status is answered meanwhile
    answered = threading.Event()

    def status():
        replies["status"] = daemon.handle_line(b'{"action": "status", "device": "nvml:0"}\n', peer)
        answered.set()

    threading.Thread(target=status, daemon=True).start()
    try:
        assert answered.wait(30), "status waited for scontrol (asked under the device's lock)"
        assert replies["status"]["ok"] is True and thread.is_alive()
    finally:
        go.write_text("go")
    thread.join(60)
    assert replies["lock"]["ok"] is True
    again = daemon.handle_line(
        (json.dumps({"action": "lock", "device": "nvml:0", "min_mhz": 1005}) + "\n").encode(), peer
    )
    assert again["ok"] is True
    assert calls.read_text().count("called") == 1  # kept for the process
    assert daemon.handle_line(b'{"action": "reset", "device": "nvml:0"}\n', peer)["ok"]
