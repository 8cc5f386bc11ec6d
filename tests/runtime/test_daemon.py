"""The daemon on a socket in a temporary directory, with simulated boards, talked to as an
unprivileged client would: allowed actions change the device, reset restores it, everything
malformed or off-list gets an error reply and the daemon keeps serving."""

from __future__ import annotations

import grp
import os
import shutil
import socket
import stat
import subprocess
import time

import pytest
from daemon_helpers import (
    REPO,
    ask,
    config_text,
    send,
    short_socket_dir,
    world_readable_source,
    world_runnable_python,
)

from governor.devices.daemon.client import (
    DaemonClient,
    DaemonDevice,
    daemon_available,
    daemon_serves,
    request,
)
from governor.devices.registry import open_device
from governor.errors import (
    DeviceBusyError,
    DevicePermissionError,
    GovernorError,
    InvalidRequestError,
)
from governor.runtime.daemon.config import parse_config
from governor.runtime.daemon.server import DaemonServer, bind_socket

A100 = 'uri = "sim:a100-pcie"\nmin_mhz = 600\nmax_mhz = 1200'  # profile ships: PPW 1005 MHz
ORIN = 'uri = "sim:agx-orin"'  # no profile in the isolated data dir


@pytest.fixture
def sockdir():
    path = short_socket_dir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def start(sockdir):
    """start(devices=..., daemon=..., policy=...) -> (server, socket path); always stopped."""
    servers = []

    def _start(devices=(A100, ORIN), daemon="", policy="", sock="run"):
        path = sockdir / sock / "governor.sock"
        cfg = parse_config(config_text(path, devices, daemon, policy), "test.toml")
        server = DaemonServer(cfg).start_in_thread()
        servers.append(server)
        return server, path

    yield _start
    for server in servers:
        server.stop()


def _state(path, device):
    return ask(path, action="status", device=device)["result"]["devices"][0]["state"]


def test_allowed_actions_change_the_device_and_reset_restores_it(start):
    server, path = start()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o660
    assert _state(path, "sim:a100-pcie")["gpu_clocks_mhz"] is None

    reply = ask(path, action="apply", policy="ppw", device="sim:a100-pcie", id="r1")
    assert reply["ok"] and reply["id"] == "r1" and reply["device"] == "sim:a100-pcie"
    assert reply["result"]["applied"]["gpu_clocks_mhz"] == [1005.0, 1005.0]
    assert reply["result"]["previous"]["gpu_clocks_mhz"] is None
    assert _state(path, "sim:a100-pcie")["gpu_clocks_mhz"] == [1005.0, 1005.0]

    reply = ask(path, action="apply", policy="max", device="sim:a100-pcie")
    assert reply["result"]["applied"]["gpu_clocks_mhz"] == [1200.0, 1200.0]  # the limit, not 1410

    reply = ask(path, action="lock", min_mhz=700, max_mhz=1100.2, device="sim:a100-pcie")
    assert reply["ok"], reply
    lo, hi = reply["result"]["applied"]["gpu_clocks_mhz"]
    assert 600 <= lo <= hi <= 1200
    status = ask(path, action="status", device="sim:a100-pcie")["result"]
    assert status["devices"][0]["client_override"]["by_uid"] == os.getuid()
    assert status["caller"] == {"uid": os.getuid(), "pid": os.getpid()}  # SO_PEERCRED

    reply = ask(path, action="reset", device="sim:a100-pcie")
    assert reply["ok"] and reply["result"]["restored"] == {"gpu_clocks": None}
    assert _state(path, "sim:a100-pcie")["gpu_clocks_mhz"] is None
    assert (
        ask(path, action="reset", device="sim:a100-pcie")["result"]["restored"] == {}
    )  # repeatable


@pytest.mark.parametrize(
    "payload, code",
    [
        (b"{oops\n", "bad-json"),
        (b"\x00\x01\x02\n", "bad-json"),
        (b'"status"\n', "bad-json"),
        (b'{"action": "shell", "cmd": "reboot"}\n', "unknown-action"),
        (b'{"action": "lock", "min_mhz": "fast", "device": "sim:a100-pcie"}\n', "bad-request"),
        (b'{"action": "lock", "min_mhz": [900], "device": "sim:a100-pcie"}\n', "bad-request"),
        (b'{"action": "lock", "min_mhz": 1300, "device": "sim:a100-pcie"}\n', "out-of-limits"),
        (
            b'{"action": "lock", "min_mhz": 300, "max_mhz": 900, "device": "sim:a100-pcie"}\n',
            "out-of-limits",
        ),
        (b'{"action": "apply", "policy": "battery", "device": "sim:a100-pcie"}\n', "bad-request"),
        (b'{"action": "apply", "policy": "ppw", "device": "nvml:7"}\n', "unknown-device"),
        (b'{"action": "apply", "policy": "ppw"}\n', "bad-request"),  # two devices: name one
        (
            b'{"action": "apply", "policy": "ppw", "device": "sim:agx-orin"}\n',
            "failed",
        ),  # no profile
        (b'{"action": "status", "pad": "' + b"x" * 5000 + b'"}\n', "too-large"),
        (b"x" * 6000, "too-large"),  # no newline at all
    ],
)
def test_bad_requests_get_error_replies_and_the_daemon_survives(start, payload, code):
    server, path = start()
    reply = send(path, payload)
    assert reply["ok"] is False and reply["code"] == code, reply
    assert reply["error"] and "\n" not in reply["error"]
    assert ask(path, action="status")["ok"]
    assert _state(path, "sim:a100-pcie")["gpu_clocks_mhz"] is None  # nothing changed


def test_several_requests_on_one_connection_and_a_last_line_without_newline(start):
    server, path = start(devices=(A100,))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(5)
        sock.connect(str(path))
        sock.sendall(
            b'{"action":"lock","min_mhz":900,"id":1}\n\n{"action":"nope","id":2}\n{"action":"reset","id":3}'
        )
        sock.shutdown(socket.SHUT_WR)
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    replies = [__import__("json").loads(line) for line in data.splitlines()]
    assert [(r["id"], r["ok"]) for r in replies] == [(1, True), (2, False), (3, True)]


def test_off_list_actions_and_policies_are_refused(start):
    server, path = start(
        devices=(A100,), daemon='allow = ["status", "apply"]\nallow_policies = ["ppw"]'
    )
    for doc in (
        {"action": "lock", "min_mhz": 900},
        {"action": "reset"},
        {"action": "apply", "policy": "max"},
    ):
        reply = ask(path, **doc)
        assert reply["code"] == "not-allowed", reply
    assert ask(path, action="apply", policy="ppw")["ok"]
    with pytest.raises(DevicePermissionError, match="not allowed"):
        request("reset", socket_path=path)
    server.stop()  # the daemon restores what was applied on the way out
    assert not server.socket_path.exists()


def test_a_full_house_drops_the_connection_that_waited_longest(start):
    """At max_connections a silent connection makes room for a new one (it gets busy)."""
    server, path = start(devices=(A100,), daemon="max_connections = 1")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as hog:
        hog.settimeout(5)
        hog.connect(str(path))
        time.sleep(0.2)
        assert send(path, b'{"action":"status"}\n')["ok"]
        data = hog.recv(65536)
        assert __import__("json").loads(data)["code"] == "busy"
        assert hog.recv(65536) == b""  # and closed


def test_the_configured_policy_is_enforced_paused_by_clients_and_resumed_on_reset(start):
    server, path = start(devices=(A100,), policy='policy = "ppw"')
    dev = ask(path, action="status")["result"]["devices"][0]
    assert dev["enforcing"]["policy"] == "ppw" and dev["policy_error"] is None
    if dev["enforcing"].get("by") == "static":
        assert dev["state"]["gpu_clocks_mhz"] == [1005.0, 1005.0]
    assert ask(path, action="lock", min_mhz=700)["ok"]
    assert ask(path, action="status")["result"]["devices"][0]["enforcing"] is None
    reply = ask(path, action="reset")
    assert reply["ok"] and reply["result"]["policy"] == "ppw"
    assert ask(path, action="status")["result"]["devices"][0]["enforcing"]["policy"] == "ppw"


def test_a_policy_that_cannot_be_enforced_is_reported_not_fatal(start, monkeypatch):
    from governor.runtime.daemon import server as server_module

    class Refusing:
        def __init__(self, *args, **kwargs):
            pass

        def start(self):
            raise GovernorError("the board is on fire")

    class Policies:
        @staticmethod
        def from_spec(spec):
            return spec

    monkeypatch.setattr(server_module, "_load_runtime", lambda: (Refusing, Policies))
    server, path = start(devices=(A100,), policy='policy = "power-cap"\ncap_w = 150')
    dev = ask(path, action="status")["result"]["devices"][0]
    assert dev["enforcing"] is None and dev["policy_error"] == "the board is on fire"
    assert ask(path, action="lock", min_mhz=900)["ok"]  # clients are still served
    assert ask(path, action="reset")["ok"]


def test_without_the_runtime_only_static_policies_are_enforced(start, monkeypatch):
    from governor.runtime.daemon import server as server_module

    monkeypatch.setattr(server_module, "_load_runtime", lambda: None)
    server, path = start(devices=(A100,), policy='policy = "power-cap"\ncap_w = 150')
    dev = ask(path, action="status")["result"]["devices"][0]
    assert "needs governor.runtime" in dev["policy_error"]
    server2, path2 = start(devices=(A100,), policy='policy = "clock"\nclock_mhz = 810', sock="b")
    dev = ask(path2, action="status")["result"]["devices"][0]
    assert dev["enforcing"]["by"] == "static" and dev["state"]["gpu_clocks_mhz"] == [810.0, 810.0]


def test_client_api_and_daemon_device(start):
    server, path = start(devices=(A100,))
    assert daemon_available(path) and daemon_serves("sim:a100-pcie", path)
    assert not daemon_serves("sim:t4", path)
    assert not daemon_available(path.parent / "nothing.sock")
    with pytest.raises(InvalidRequestError, match="outside the limits"):
        request("lock", socket_path=path, min_mhz=1400)
    with DaemonDevice(open_device("sim:a100-pcie"), path) as dev:
        assert dev.control_permitted()
        assert dev.lock_gpu_clocks(905) == (900.0, 900.0) or dev.changed
        assert dev.changed
        assert dev.daemon_status()["state"]["gpu_clocks_mhz"] == [dev.snap_clock_mhz(905)] * 2
        assert dev.apply_policy("ppw")["applied"]["gpu_clocks_mhz"] == [1005.0, 1005.0]
    # leaving the block asked the daemon to reset
    assert _state(path, "sim:a100-pcie")["gpu_clocks_mhz"] is None


def test_socket_group_and_stale_socket_handling(sockdir):
    group = grp.getgrgid(os.getgid()).gr_name
    path = sockdir / "sub" / "g.sock"
    listener = bind_socket(path, group=group)
    assert os.stat(path).st_gid == os.getgid()
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o755
    with pytest.raises(DeviceBusyError, match="already listening"):
        bind_socket(path)  # someone answers there
    listener.close()
    bind_socket(path).close()  # stale socket: removed and replaced
    with pytest.raises(GovernorError, match="no group named"):
        bind_socket(sockdir / "x.sock", group="no-such-group-governor")


def test_unsafe_socket_places_are_refused(sockdir):
    (sockdir / "file.sock").write_text("not a socket")
    with pytest.raises(GovernorError, match="not a socket"):
        bind_socket(sockdir / "file.sock")
    open_dir = sockdir / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    with pytest.raises(GovernorError, match="writable by others"):
        bind_socket(open_dir / "g.sock")
    (sockdir / "link").symlink_to(open_dir)
    with pytest.raises(GovernorError, match="symlink"):
        bind_socket(sockdir / "link" / "g.sock")


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to drop privileges"
)
def test_a_real_unprivileged_user_in_the_group_may_ask_and_others_may_not(start, sockdir):
    sockdir.chmod(0o755)
    server, path = start(devices=(A100,), daemon='socket_group = "65534"')
    code = (
        "import sys\n"
        "from governor.devices.daemon.client import request\n"
        "from governor.errors import GovernorError\n"
        "try:\n"
        "    print(request('lock', socket_path=sys.argv[1], min_mhz=900)['applied']['gpu_clocks_mhz'])\n"
        "except GovernorError as err:\n"
        "    print('ERR', err)\n"
    )

    def as_user(gid):
        def drop():
            os.setgroups([])
            os.setgid(gid)
            os.setuid(65534)

        python = world_runnable_python()
        if python is None:
            pytest.skip("no Python interpreter an unprivileged user may run")
        env = dict(os.environ, PYTHONPATH=world_readable_source(REPO))
        return subprocess.run(
            [python, "-c", code, str(path)],
            preexec_fn=drop,
            capture_output=True,
            text=True,
            env=env,
            timeout=20,
        ).stdout.strip()

    assert as_user(65534) == "[900.0, 900.0]"
    status = ask(path, action="status")["result"]["devices"][0]
    assert status["client_override"]["by_uid"] == 65534
    assert as_user(65533).startswith("ERR may not connect")
    assert ask(path, action="reset")["ok"]


def test_stop_restores_devices_and_removes_the_socket(start):
    server, path = start(devices=(A100,))
    assert ask(path, action="lock", min_mhz=900)["ok"]
    slot_device = server._slots["sim:a100-pcie"].device
    assert slot_device.changed
    server.stop()
    assert not slot_device.changed and not path.exists()
    with pytest.raises(GovernorError):
        DaemonClient(path, timeout_s=0.5).request("status")
