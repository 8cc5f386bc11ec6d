"""The daemon's ``cap`` action (issue 45): a power limit with a lease from the cluster budget
service, on the fake NVML driver under the real pynvml. What is checked is the fake driver's
state file (the power limit it holds), never the daemon's own account of it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

import governor.devices.nvml as backend
from governor.devices.daemon.client import DaemonClient
from governor.runtime.daemon.config import parse_config
from governor.runtime.daemon.lease import LeaseKeeper
from governor.runtime.daemon.server import DaemonServer

REPO = Path(__file__).resolve().parents[2]
USER = 4242  # a client that is neither root nor the daemon's user


@pytest.fixture
def daemon(fake_nvml, monkeypatch):
    monkeypatch.setattr(backend, "_is_root", lambda: True)
    sock = Path(tempfile.mkdtemp(prefix="gvl-")) / "gd.sock"
    text = (
        f'[daemon]\nsocket = "{sock}"\ntest_mode = true\n'
        '[[device]]\nuri = "nvml:0"\n[[device]]\nuri = "nvml:1"\n'
    )
    server = DaemonServer(parse_config(text, "test.toml")).start_in_thread()
    now = [0.0]
    server.leases.stop()
    server.leases = LeaseKeeper(clock=lambda: now[0])
    server.leases.attach(lambda: list(server._slots.values()))
    server.now = now
    yield server
    server.stop()
    shutil.rmtree(sock.parent, ignore_errors=True)


def ask(server, peer=(None, None, None), **doc):
    return server.handle_line((json.dumps(doc) + "\n").encode(), peer)


def limit_w(fake_nvml, index):
    return fake_nvml.gpu(index).power_limit_mw / 1000


def test_a_cap_is_set_renewed_and_falls_back_to_the_safe_share_when_its_lease_runs_out(
    daemon, fake_nvml
):
    assert limit_w(fake_nvml, 0) == 400
    reply = ask(
        daemon, action="cap", device="nvml:0", power_w=250, lease_s=3, fallback_w=150, holder="t"
    )
    assert reply["ok"], reply
    assert limit_w(fake_nvml, 0) == 250
    daemon.now[0] = 2.0
    daemon.leases.tick()
    assert limit_w(fake_nvml, 0) == 250  # within the lease
    assert ask(daemon, action="cap", device="nvml:0", power_w=300, lease_s=3, fallback_w=150)["ok"]
    daemon.now[0] = 4.5
    daemon.leases.tick()
    assert limit_w(fake_nvml, 0) == 300  # renewed at 2.0: runs to 5.0
    daemon.now[0] = 5.0
    daemon.leases.tick()
    assert limit_w(fake_nvml, 0) == 150  # ran out: the safe share
    (dev,) = ask(daemon, action="status", device="nvml:0")["result"]["devices"]
    lease = dev["cluster"]["lease"]
    assert lease["expired"] is True and lease["cap_w"] == 150
    # the cap integral: 250 W for 2 s, 300 W for 3 s, then 150 W
    daemon.now[0] = 7.0
    (dev,) = ask(daemon, action="status", device="nvml:0")["result"]["devices"]
    assert dev["cluster"]["cap_ws"] == pytest.approx(250 * 2 + 300 * 3 + 150 * 2)
    assert dev["cluster"]["power_limit_w"] == 150


def test_the_safe_share_is_never_above_the_last_cap(daemon, fake_nvml):
    assert ask(daemon, action="cap", device="nvml:0", power_w=120, lease_s=1, fallback_w=300)["ok"]
    daemon.now[0] = 1.0
    daemon.leases.tick()
    assert limit_w(fake_nvml, 0) == 120


def test_a_client_that_is_not_an_admin_cannot_cap_and_its_reset_keeps_the_cap(daemon, fake_nvml):
    assert ask(daemon, action="cap", device="nvml:1", power_w=65, lease_s=60, fallback_w=60)["ok"]
    refused = ask(
        daemon,
        (None, USER, USER),
        action="cap",
        device="nvml:1",
        power_w=70,
        lease_s=60,
        fallback_w=70,
    )
    assert refused["ok"] is False and refused["code"] == "not-allowed"
    assert "may not set power caps" in refused["error"]
    assert limit_w(fake_nvml, 1) == 65
    # an admin's lock then reset: the clock comes back, the cap stays
    assert ask(daemon, action="lock", device="nvml:1", min_mhz=900)["ok"]
    assert fake_nvml.gpu(1).gpu_locked == (900, 900)
    assert ask(daemon, action="reset", device="nvml:1")["ok"]
    assert fake_nvml.gpu(1).gpu_locked is None
    assert limit_w(fake_nvml, 1) == 65


def test_bad_caps_are_refused_in_one_line_and_change_nothing(daemon, fake_nvml):
    for doc, code in (
        (dict(power_w=50, lease_s=3, fallback_w=50), "bad-request"),  # below the T4's 60 W
        (dict(power_w=65, lease_s=0.1, fallback_w=60), "bad-request"),
        (dict(power_w=-1, lease_s=3, fallback_w=60), "bad-request"),
        (dict(power_w=65, lease_s=3), "bad-request"),
        (dict(power_w=True, lease_s=3, fallback_w=60), "bad-request"),
    ):
        reply = ask(daemon, action="cap", device="nvml:1", **doc)
        assert reply["ok"] is False and reply["code"] == code, (doc, reply)
        assert "\n" not in reply["error"]
    assert limit_w(fake_nvml, 1) == 70 and fake_nvml.gpu(1).writes == 0


def test_stopping_the_daemon_puts_the_original_limit_back(fake_nvml, monkeypatch):
    monkeypatch.setattr(backend, "_is_root", lambda: True)
    sock = Path(tempfile.mkdtemp(prefix="gvl-")) / "gd.sock"
    text = f'[daemon]\nsocket = "{sock}"\ntest_mode = true\n[[device]]\nuri = "nvml:0"\n'
    server = DaemonServer(parse_config(text, "test.toml")).start_in_thread()
    try:
        assert ask(server, action="cap", power_w=200, lease_s=60, fallback_w=100)["ok"]
        assert limit_w(fake_nvml, 0) == 200
    finally:
        server.stop()
        shutil.rmtree(sock.parent, ignore_errors=True)
    assert limit_w(fake_nvml, 0) == 400


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="a daemon subprocess on the fake NVML driver changes limits as root only",
)
def test_a_daemon_killed_and_started_again_holds_the_safe_share_not_the_original(fake_nvml):
    """kill -9 of the daemon holding a cap, then a new daemon: the dead one's journal would
    put back the original 400 W; the lease kept on disk makes it min(safe share, cap), and the
    original goes into the new daemon's journal (a clean stop puts it back)."""
    work = Path(tempfile.mkdtemp(prefix="gvl-"))
    sock = work / "gd.sock"
    config = work / "daemon.toml"
    config.write_text(
        f'[daemon]\nsocket = "{sock}"\ntest_mode = true\n[[device]]\nuri = "nvml:0"\n'
    )
    env = fake_nvml.env(
        dict(os.environ, PYTHONPATH=str(REPO), GOVERNOR_STATE_DIR=str(work / "state"))
    )

    def start():
        proc = subprocess.Popen(
            [sys.executable, "-m", "governor", "daemon", "--config", str(config)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(work / "daemon.log", "ab"),
        )
        deadline = time.monotonic() + 30
        while not sock.exists():
            assert proc.poll() is None, (work / "daemon.log").read_text()
            assert time.monotonic() < deadline, "the daemon did not start"
            time.sleep(0.05)
        return proc

    highest = [0.0]
    stop = threading.Event()

    def sample():
        while not stop.wait(0.002):
            states = fake_nvml.state()
            if states:
                highest[0] = max(highest[0], states[0].power_limit_mw / 1000)

    first = start()
    try:
        client = DaemonClient(sock)
        client.request("cap", device="nvml:0", power_w=250, lease_s=60, fallback_w=150)
        assert limit_w(fake_nvml, 0) == 250
        first.kill()
        first.wait(10)
        sock.unlink()  # what a SIGKILL leaves
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        second = start()
        try:
            (dev,) = DaemonClient(sock).request("status", device="nvml:0")["devices"]
            assert limit_w(fake_nvml, 0) == 150
            assert dev["cluster"]["lease"]["expired"] is True
            assert dev["cluster"]["lease"]["cap_w"] == 150
        finally:
            stop.set()
            sampler.join(5)
            second.terminate()
            second.wait(20)
    finally:
        if first.poll() is None:
            first.kill()
    assert highest[0] == 250  # never the original 400 W while the new daemon took the GPU
    assert limit_w(fake_nvml, 0) == 400  # the clean stop put the original back
    log = (work / "daemon.log").read_text()
    shutil.rmtree(work, ignore_errors=True)
    assert "holding the safe share 150 W" in log
