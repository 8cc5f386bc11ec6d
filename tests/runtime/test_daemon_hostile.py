"""The daemon under clients that do not play fair: slow trickles, silence, floods of
connections, peers outside the allowed group, and tricks at the socket's path. No timing is
asserted tightly: bounds are generous, and waits poll for what must happen."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time

import pytest
from daemon_helpers import (
    REPO,
    ask,
    config_text,
    short_socket_dir,
    world_readable_source,
    world_runnable_python,
)

from governor.devices.daemon.client import DaemonClient
from governor.errors import DeviceBusyError, GovernorError
from governor.runtime.daemon import server as server_module
from governor.runtime.daemon.config import parse_config
from governor.runtime.daemon.peers import PeerPolicy, peer_groups
from governor.runtime.daemon.server import DaemonServer, bind_socket

A100 = 'uri = "sim:a100-pcie"\nmin_mhz = 600\nmax_mhz = 1200'
STATUS = b'{"action": "status"}\n'
NOBODY = 65534
needs_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to drop privileges"
)


@pytest.fixture
def sockdir():
    path = short_socket_dir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def start(sockdir):
    """start(daemon=...) -> (server, socket path) serving the simulated A100; always stopped."""
    servers = []

    def _start(daemon=""):
        path = sockdir / "run" / "governor.sock"
        cfg = parse_config(config_text(path, [A100], daemon), "hostile.toml")
        server = DaemonServer(cfg).start_in_thread()
        servers.append(server)
        return server, path

    yield _start
    for server in servers:
        server.stop()


class Trickle:
    """Slow clients: each sends one byte of a status request every ``every_s``, and records
    what the daemon answered once it closes the connection."""

    def __init__(self, path, count, every_s=0.1):
        self.socks = []
        for _ in range(count):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(str(path))
            sock.setblocking(False)
            self.socks.append(sock)
        self.every_s = every_s
        self.replies = {}  # index -> bytes received up to the close
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        sent = 0
        while not self.stop.is_set() and len(self.replies) < len(self.socks):
            for i, sock in enumerate(self.socks):
                if i not in self.replies:
                    self._poll(i, sock, STATUS[sent % len(STATUS) : sent % len(STATUS) + 1])
            sent += 1
            self.stop.wait(self.every_s)

    def _poll(self, i, sock, byte):
        data = b""
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    self.replies[i] = data
                    return
                data += chunk
        except BlockingIOError:
            pass
        except OSError:
            self.replies[i] = data
            return
        if data:  # a reply: the daemon is closing; read to the end next time
            self.replies.setdefault(i, data)
            return
        try:
            sock.send(byte)
        except OSError:
            self.replies[i] = data

    def wait_all_closed(self, timeout_s):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and len(self.replies) < len(self.socks):
            time.sleep(0.05)
        return {i: json.loads(d) if d.strip() else None for i, d in self.replies.items()}

    def close(self):
        self.stop.set()
        self.thread.join(5)
        for sock in self.socks:
            sock.close()


@pytest.fixture
def trickle():
    made = []

    def _make(path, count, every_s=0.1):
        made.append(Trickle(path, count, every_s))
        return made[-1]

    yield _make
    for t in made:
        t.close()


def test_slow_clients_are_closed_at_the_request_deadline_and_others_are_served(start, trickle):
    """Each slow client sends a byte every 0.1 s, far inside any per-recv timeout, yet its
    whole request must arrive within request_timeout_s; normal clients are served meanwhile."""
    server, path = start(daemon="request_timeout_s = 0.5\nidle_timeout_s = 30")
    slow = trickle(path, 8)
    began = time.monotonic()
    assert DaemonClient(path, timeout_s=5).request("status")["devices"]
    replies = slow.wait_all_closed(timeout_s=20)
    assert len(replies) == 8, f"only {len(replies)} of 8 slow clients were closed"
    assert time.monotonic() - began < 20
    for reply in replies.values():
        assert reply["ok"] is False and reply["code"] == "timeout", reply
        assert "did not arrive within 0.5 s" in reply["error"]
    assert server._loop.counters["timed_out"] == 8
    assert ask(path, action="status")["ok"]


def test_slow_clients_cannot_hold_every_connection(start, trickle):
    """Twice as many slow clients as connections: a normal client still gets its reply."""
    server, path = start(daemon="max_connections = 4\nrequest_timeout_s = 30\nworkers = 1")
    slow = trickle(path, 8, every_s=0.5)
    for _ in range(3):
        reply = DaemonClient(path, timeout_s=5).call({"action": "status"})
        assert reply["ok"], reply
    replies = slow.wait_all_closed(timeout_s=2)
    assert replies and all(r["code"] == "busy" for r in replies.values() if r)
    assert server._loop.connection_count <= 4


def test_a_request_slower_than_the_deadline_gets_a_timeout_error_and_is_closed(start):
    server, path = start(daemon="request_timeout_s = 0.3")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(path))
        sock.sendall(b'{"action": "sta')  # and nothing more
        reply = json.loads(sock.recv(65536))
        assert reply == {
            "ok": False,
            "code": "timeout",
            "error": "the request line did not arrive within 0.3 s; closing the connection",
        }
        assert sock.recv(65536) == b""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:  # silent from the start
        sock.settimeout(10)
        sock.connect(str(path))
        assert json.loads(sock.recv(65536))["code"] == "timeout"


def test_a_connection_idle_between_requests_is_closed_quietly(start):
    server, path = start(daemon="request_timeout_s = 5\nidle_timeout_s = 0.3")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(path))
        sock.sendall(STATUS)
        data = b""
        while not data.endswith(b"\n"):
            data += sock.recv(65536)
        assert json.loads(data)["ok"]
        assert sock.recv(65536) == b""  # no error line: it asked nothing
    assert server._loop.counters["idle_closed"] == 1


def test_busy_only_when_every_connection_has_a_request_in_progress(start, monkeypatch):
    entered, release = threading.Event(), threading.Event()
    original = DaemonServer.handle_line

    def slow_handle(self, line, peer=(None, None, None)):
        entered.set()
        release.wait(10)
        return original(self, line, peer)

    monkeypatch.setattr(DaemonServer, "handle_line", slow_handle)
    server, path = start(daemon="max_connections = 1")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as first:
        first.settimeout(10)
        first.connect(str(path))
        first.sendall(STATUS)
        assert entered.wait(10)  # its request is with a worker
        with pytest.raises(DeviceBusyError, match="try again"):
            DaemonClient(path, timeout_s=5).request("status")
        release.set()
        assert json.loads(first.recv(65536))["ok"]


def test_a_client_that_never_reads_its_replies_is_closed(start):
    server, path = start(daemon="request_timeout_s = 0.3")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(str(path))
        sock.settimeout(0.05)
        closed = False
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not closed:
            try:
                sock.send(STATUS * 50)
            except socket.timeout:
                time.sleep(0.05)
            except OSError:
                closed = True
        assert closed or server._loop.counters["unread_reply"] == 1
    assert ask(path, action="status")["ok"]


def test_trouble_on_one_connection_closes_it_not_the_daemon(start, monkeypatch):
    from governor.runtime.daemon.connections import ConnectionLoop

    server, path = start()
    original = ConnectionLoop._next_line

    def explode(self, conn):
        if b"boom" in conn.inbuf:
            raise RuntimeError("a bug")
        return original(self, conn)

    monkeypatch.setattr(ConnectionLoop, "_next_line", explode)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(path))
        sock.sendall(b"boom\n")
        assert sock.recv(65536) == b""  # closed
    assert server._loop.counters["internal"] == 1
    assert ask(path, action="status")["ok"]


# -- who may connect --------------------------------------------------------------------------
def test_the_peer_policy_admits_root_itself_and_the_group():
    policy = PeerPolicy.for_daemon(2000, "governor", euid=1234)
    assert policy.refusal((1, 0, 0)) is None
    assert policy.refusal((1, 1234, 1234)) is None
    assert policy.refusal((1, 1000, 2000)) is None  # primary group
    assert policy.refusal((1, 1000, 1000), lambda: (27, 2000)) is None  # supplementary
    reason = policy.refusal((1, 1000, 1000), lambda: (27,))
    assert "uid 1000 may not use this daemon" in reason and "usermod -aG governor" in reason
    assert "cannot tell" in policy.refusal((None, None, None))
    alone = PeerPolicy.for_daemon(None, None, euid=0)
    assert "no daemon.socket_group" in alone.refusal((1, 1000, 2000), lambda: (2000,))


def test_the_kernel_reports_the_supplementary_groups_of_a_peer(sockdir):
    listener = bind_socket(sockdir / "g.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.connect(str(sockdir / "g.sock"))
        conn, _ = listener.accept()
        with conn:
            groups = peer_groups(conn)
    listener.close()
    assert groups is None or set(groups) == set(os.getgroups())


def _as_user(path, uid, gid, groups=()):
    """Run the real client as ``uid``/``gid`` (+ supplementary ``groups``); its output."""
    code = (
        "import sys\n"
        "from governor.devices.daemon.client import request\n"
        "from governor.errors import GovernorError\n"
        "try:\n"
        "    print(request('status', socket_path=sys.argv[1])['caller']['uid'])\n"
        "except GovernorError as err:\n"
        "    print('ERR', type(err).__name__, err)\n"
    )

    def drop():
        os.setgroups(list(groups))
        os.setgid(gid)
        os.setuid(uid)

    python = world_runnable_python()
    if python is None:
        pytest.skip("no Python interpreter an unprivileged user may run")
    return subprocess.run(
        [python, "-c", code, str(path)],
        preexec_fn=drop,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=world_readable_source(REPO)),
        timeout=30,
    ).stdout.strip()


@needs_root
def test_a_peer_outside_the_group_is_refused_even_when_the_socket_lets_it_in(
    start, sockdir, caplog
):
    """The socket's mode is the first gate; SO_PEERCRED/SO_PEERGROUPS is the second, checked
    here by widening the mode to 0666 (a mistake, a bind mount) and connecting as nobody."""
    sockdir.chmod(0o755)
    server, path = start(daemon='socket_group = "65534"')
    path.chmod(0o666)
    caplog.set_level("WARNING", logger="governor.daemon")
    out = _as_user(path, NOBODY, 65533)  # not in the group
    assert out.startswith("ERR DevicePermissionError governor daemon: uid 65534 may not use"), out
    assert "members of the group '65534'" in out
    assert "refused uid=65534 gid=65533" in caplog.text
    assert _as_user(path, NOBODY, 65533, groups=[NOBODY]) == str(NOBODY)  # supplementary
    assert _as_user(path, NOBODY, NOBODY) == str(NOBODY)  # primary group
    assert ask(path, action="status")["ok"]


@needs_root
def test_without_a_socket_group_only_root_and_the_daemons_user_are_admitted(start, sockdir):
    sockdir.chmod(0o755)
    server, path = start()
    path.chmod(0o666)
    out = _as_user(path, NOBODY, NOBODY, groups=[0])
    assert out.startswith("ERR DevicePermissionError") and "no daemon.socket_group" in out, out
    assert ask(path, action="status")["result"]["caller"]["uid"] == 0


# -- the socket's place -----------------------------------------------------------------------
def test_a_symlink_at_the_socket_path_is_never_followed(sockdir, tmp_path):
    target = sockdir / "elsewhere"
    target.write_text("precious")
    live = bind_socket(sockdir / "live.sock")
    try:
        for i, pointee in enumerate(
            (target, sockdir / "live.sock", sockdir / "nothing-here"), start=1
        ):
            link = sockdir / f"link{i}.sock"
            link.symlink_to(pointee)
            with pytest.raises(GovernorError, match="symbolic link; refusing to follow"):
                bind_socket(link)
            assert link.is_symlink() and os.readlink(link) == str(pointee)
        assert target.read_text() == "precious"
    finally:
        live.close()


def test_the_daemon_refuses_to_start_on_a_symlinked_socket_path(sockdir):
    path = sockdir / "run" / "governor.sock"
    path.parent.mkdir(mode=0o755)
    path.symlink_to(sockdir / "victim")
    cfg = parse_config(config_text(path, [A100]), "hostile.toml")
    with pytest.raises(GovernorError, match="symbolic link"):
        DaemonServer(cfg).start()
    assert path.is_symlink() and not (sockdir / "victim").exists()


def test_socket_directories_others_could_swap_are_refused(sockdir):
    shared = sockdir / "shared"
    shared.mkdir()
    shared.chmod(0o775)  # group-writable
    with pytest.raises(GovernorError, match="writable by others"):
        bind_socket(shared / "g.sock")
    shared.chmod(0o1777)  # sticky is not enough for the socket's own directory
    with pytest.raises(GovernorError, match="writable by others"):
        bind_socket(shared / "g.sock")
    (shared / "run").mkdir(mode=0o755)
    bind_socket(shared / "run" / "g.sock").close()  # sticky above: /tmp-like, fine
    shared.chmod(0o777)
    with pytest.raises(GovernorError, match="lies under .*shared, which is writable"):
        bind_socket(shared / "run" / "h.sock")


@needs_root
def test_a_socket_directory_owned_by_another_user_is_refused(sockdir):
    theirs = sockdir / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, NOBODY, NOBODY)
    with pytest.raises(GovernorError, match="belongs to uid 65534"):
        bind_socket(theirs / "g.sock")


def test_a_stale_socket_of_a_dead_daemon_is_replaced_by_a_new_daemon(start, sockdir):
    path = sockdir / "run" / "governor.sock"
    path.parent.mkdir(mode=0o755)
    bind_socket(path).close()  # a daemon that died without removing its socket
    server, started = start()
    assert started == path and ask(path, action="status")["ok"]


def test_server_module_reexports_the_peer_credentials():
    assert server_module.peer_credentials.__module__ == "governor.runtime.daemon.peers"
