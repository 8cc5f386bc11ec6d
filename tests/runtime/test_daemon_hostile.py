"""Where the daemon's socket may be created: never through a symlink, never in a directory
others could swap, and a dead daemon's stale socket is replaced."""

from __future__ import annotations

import os
import shutil

import pytest
from daemon_helpers import ask, config_text, short_socket_dir

from governor.errors import GovernorError
from governor.runtime.daemon.config import parse_config
from governor.runtime.daemon.server import DaemonServer, bind_socket

A100 = 'uri = "sim:a100-pcie"\nmin_mhz = 600\nmax_mhz = 1200'
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
