"""The daemon when one of its GPUs falls off the bus (the fake NVML driver under the real
pynvml, the fault switched on while the daemon serves): a request on the lost GPU fails in one
line, the other GPU is served as before, and the lost one works again once it is back."""

from __future__ import annotations

import json

import pytest
from daemon_helpers import config_text, short_socket_dir

import governor.devices.nvml as backend
from governor.runtime.daemon.config import parse_config
from governor.runtime.daemon.server import DaemonServer


@pytest.fixture
def daemon(fake_nvml, monkeypatch):
    monkeypatch.setattr(backend, "_is_root", lambda: True)
    sock = short_socket_dir() / "gd.sock"
    text = config_text(sock, ['uri = "nvml:0"', 'uri = "nvml:1"'], "test_mode = true")
    server = DaemonServer(parse_config(text, "test.toml")).start_in_thread()
    yield server
    server.stop()


def ask(server, **doc):
    return server.handle_line((json.dumps(doc) + "\n").encode())


def test_a_lost_gpu_fails_its_requests_and_the_other_is_served(daemon, fake_nvml):
    assert ask(daemon, action="lock", device="nvml:0", min_mhz=900)["ok"] is True
    fake_nvml.faults(lost=[0])
    reply = ask(daemon, action="lock", device="nvml:0", min_mhz=1005)
    assert reply["ok"] is False and reply["code"] == "failed"
    assert reply["error"].startswith("nvml:0: the GPU is lost") and "\n" not in reply["error"]
    assert fake_nvml.gpu(0).gpu_locked == (900, 900)
    assert ask(daemon, action="lock", device="nvml:1", min_mhz=900)["ok"] is True
    assert fake_nvml.gpu(1).gpu_locked == (900, 900)
    status = ask(daemon, action="status")
    assert status["ok"] is True
    lost, served = status["result"]["devices"]
    assert "the GPU is lost" in lost["state_error"] and served["state"] is not None
    fake_nvml.faults()  # back on the bus
    assert ask(daemon, action="reset", device="nvml:0")["ok"] is True
    assert fake_nvml.gpu(0).gpu_locked is None
    assert ask(daemon, action="reset", device="nvml:1")["ok"] is True
    assert fake_nvml.gpu(1).gpu_locked is None


def test_a_gpu_lost_before_the_daemon_starts_is_one_line(fake_nvml, monkeypatch):
    from governor.errors import DeviceLostError

    monkeypatch.setattr(backend, "_is_root", lambda: True)
    fake_nvml.faults(lost=[1])
    sock = short_socket_dir() / "gd.sock"
    text = config_text(sock, ['uri = "nvml:0"', 'uri = "nvml:1"'], "test_mode = true")
    with pytest.raises(DeviceLostError, match=r"^nvml:1: the GPU is lost") as info:
        DaemonServer(parse_config(text, "test.toml")).start()
    assert "\n" not in str(info.value)
    assert not sock.exists()  # nothing half-started is left
    assert [g.writes for g in fake_nvml.state()] == [0, 0]


def test_a_wedged_gpu_fails_its_requests_and_holds_no_other_client(fake_nvml, monkeypatch, caplog):
    """While GPU 0's driver blocks every call (its hang file), a request on it fails with one
    line once its 0.5-s deadline passes (and at once after that), another client's request
    on GPU 1 is served meanwhile, status shows which device does not respond, the daemon's
    log (the system journal under systemd) says so once and says once that it answers again,
    and GPU 0 is served again once it answers."""
    import logging
    import threading

    caplog.set_level(logging.INFO, logger="governor.devices")

    monkeypatch.setattr(backend, "_is_root", lambda: True)
    monkeypatch.setenv("GOVERNOR_DEVICE_DEADLINES", "read=0.5,write=0.5,open=0.5,close=0.5")
    sock = short_socket_dir() / "gd.sock"
    text = config_text(sock, ['uri = "nvml:0"', 'uri = "nvml:1"'], "test_mode = true")
    server = DaemonServer(parse_config(text, "test.toml")).start_in_thread()
    try:
        assert ask(server, action="lock", device="nvml:0", min_mhz=900)["ok"] is True
        fake_nvml.hang(0)
        replies = {}

        def wedged_client():
            replies["nvml:0"] = ask(server, action="lock", device="nvml:0", min_mhz=1005)

        thread = threading.Thread(target=wedged_client)
        thread.start()
        # the other client's request does not wait for the wedged one
        assert ask(server, action="lock", device="nvml:1", min_mhz=900)["ok"] is True
        thread.join(60)
        reply = replies["nvml:0"]
        assert reply["ok"] is False and reply["code"] == "failed"
        assert "nvml:0: not responding" in reply["error"] and "\n" not in reply["error"]
        assert fake_nvml.gpu(1).gpu_locked == (900, 900)
        status = ask(server, action="status")
        assert status["ok"] is True
        wedged, served = status["result"]["devices"]
        assert wedged["responding"] is False and "not responding" in wedged["not_responding"]
        assert served["responding"] is True and served["state"] is not None
        came_back = threading.Event()
        server._slots["nvml:0"].device.on_responding(lambda up, why: up and came_back.set())
        fake_nvml.unhang(0)
        assert came_back.wait(60)
        said = [r.getMessage() for r in caplog.records if r.name == "governor.devices"]
        down = [m for m in said if m.startswith("nvml:0: not responding: the driver stopped")]
        assert len(down) == 1, said
        assert said.count("nvml:0: answers again; governor uses it again") == 1, said
        assert ask(server, action="reset", device="nvml:0")["ok"] is True
        assert fake_nvml.gpu(0).gpu_locked is None
        assert ask(server, action="reset", device="nvml:1")["ok"] is True
    finally:
        fake_nvml.unhang(0)
        server.stop()
