"""The daemon on a fake AGX Orin sysfs tree (GOVERNOR_SYSFS_ROOT): clients' locks reach the
devfreq files, reset and SIGTERM/SIGINT put them back, and a crashed daemon's journal is
restored by the next one."""

from __future__ import annotations

import shutil
import signal
import sys
from pathlib import Path

import pytest
from daemon_helpers import (
    ask,
    config_text,
    short_socket_dir,
    start_daemon_process,
    stop_process,
    wait_for_socket,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hardware"))
from hw_trees import build_agx_orin  # noqa: E402

from governor.devices.daemon.client import DaemonDevice  # noqa: E402
from governor.devices.journal import Journal, Layer, write_journal  # noqa: E402
from governor.devices.ownership import journal_path  # noqa: E402
from governor.devices.registry import open_device  # noqa: E402
from governor.paths import state_dir  # noqa: E402
from governor.runtime.daemon.config import parse_config  # noqa: E402
from governor.runtime.daemon.server import DaemonServer  # noqa: E402

JETSON = 'uri = "jetson"\nmin_mhz = 408\nmax_mhz = 1020'


@pytest.fixture
def orin(tmp_path, monkeypatch):
    root = tmp_path / "root"
    info = build_agx_orin(root)  # MODE_30W: devfreq 306-612 MHz
    monkeypatch.setenv("GOVERNOR_SYSFS_ROOT", str(root))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no nvpmodel: clocks only
    node = root / info["node"].lstrip("/")

    def freqs():
        return (node / "min_freq").read_text().strip(), (node / "max_freq").read_text().strip()

    return freqs


@pytest.fixture
def sockdir():
    path = short_socket_dir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def jetson_daemon(orin, sockdir):
    path = sockdir / "governor.sock"
    cfg = parse_config(config_text(path, [JETSON]), "jetson.toml")
    server = DaemonServer(cfg).start_in_thread()
    yield server, path
    server.stop()


def test_lock_reaches_devfreq_and_reset_restores_the_files(orin, jetson_daemon):
    server, path = jetson_daemon
    original = orin()
    assert original == ("306000000", "612000000")
    reply = ask(path, action="lock", min_mhz=612, max_mhz=918)
    assert reply["ok"], reply
    assert reply["result"]["applied"]["gpu_clocks_mhz"] == [612.0, 918.0]
    assert orin() == ("612000000", "918000000")
    assert list(state_dir().glob("journal-*.json"))  # journaled on disk before the write
    assert ask(path, action="lock", min_mhz=1300.5)["code"] == "out-of-limits"
    assert ask(path, action="reset")["ok"]
    assert orin() == original
    assert not list(state_dir().glob("journal-*.json"))


def test_apply_max_stays_within_the_limits(orin, jetson_daemon):
    server, path = jetson_daemon
    reply = ask(path, action="apply", policy="max")
    assert reply["result"]["applied"]["gpu_clocks_mhz"] == [1020.0, 1020.0]
    assert orin() == ("1020000000", "1020000000")
    assert ask(path, action="apply", policy="ppw")["code"] == "failed"  # no Orin profile here
    server.stop()
    assert orin() == ("306000000", "612000000")


def test_daemon_device_reads_locally_and_changes_through_the_daemon(orin, jetson_daemon):
    server, path = jetson_daemon
    with DaemonDevice(open_device("jetson"), path) as dev:
        assert dev.lock_gpu_clocks(816) == (816.0, 816.0)
        assert dev.state().gpu_clocks_mhz == (816.0, 816.0)  # read from the same files
    assert orin() == ("306000000", "612000000")


def test_a_crashed_daemons_journal_is_restored_at_start(orin, sockdir):
    dev = open_device("jetson")
    key = dev.identity.key
    dead = Layer(owner={"pid": 999999, "command": "governor daemon"}, persistent=False)
    dead.original["gpu_clocks"] = [306.0, 612.0]  # what a killed daemon left behind...
    state_dir().mkdir(parents=True, exist_ok=True)
    write_journal(journal_path(key), Journal(key, "jetson", "jetson", [dead]))
    dev.devfreq.set_caps_mhz(918.0, 918.0)  # ...after changing the clock
    assert orin() == ("918000000", "918000000")
    path = sockdir / "governor.sock"
    server = DaemonServer(parse_config(config_text(path, [JETSON]), "j.toml")).start_in_thread()
    try:
        assert orin() == ("306000000", "612000000")
    finally:
        server.stop()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_restores_the_board_and_removes_the_socket(orin, sockdir, signum):
    path = sockdir / "governor.sock"
    config = sockdir / "daemon.toml"
    config.write_text(config_text(path, [JETSON]))
    proc = start_daemon_process(config)
    try:
        wait_for_socket(path, proc)
        assert ask(path, action="lock", min_mhz=714, max_mhz=816)["ok"]
        assert orin() == ("714000000", "816000000")
        proc.send_signal(signum)
        assert proc.wait(15) == 0
        log = proc.stderr.read()
        assert "restored" in log and "Traceback" not in log
    finally:
        stop_process(proc)
    assert orin() == ("306000000", "612000000")
    assert not path.exists()


def test_the_cli_client_and_the_daemon_process(orin, sockdir):
    import subprocess

    from daemon_helpers import REPO

    path = sockdir / "governor.sock"
    config = sockdir / "daemon.toml"
    config.write_text(config_text(path, [JETSON], daemon='allow = ["status", "lock", "reset"]'))
    proc = start_daemon_process(config)
    env = {"GOVERNOR_DAEMON_SOCKET": str(path), "PYTHONPATH": str(REPO)}

    def cli(*args):
        import os

        return subprocess.run(
            [sys.executable, "-m", "governor", "daemon", *args],
            capture_output=True,
            text=True,
            env=dict(os.environ, **env),
            timeout=30,
        )

    try:
        wait_for_socket(path, proc)
        out = cli("lock", "--min-mhz", "510", "--json")
        assert out.returncode == 0, out.stderr
        assert '"gpu_clocks_mhz": [510.0, 510.0]' in out.stdout
        refused = cli("apply", "max", "--json")
        assert refused.returncode == 1
        assert refused.stderr.startswith(
            "governor: error: governor daemon: action 'apply' is not allowed"
        )
        assert '"error"' in refused.stdout and "Traceback" not in refused.stderr
        status = cli("status")
        assert "jetson: GPU clock 510 MHz" in status.stdout
        assert cli("reset").returncode == 0
        assert orin() == ("306000000", "612000000")
    finally:
        stop_process(proc)


def test_open_device_goes_through_the_daemon_when_it_lacks_the_right(
    orin, jetson_daemon, monkeypatch
):
    """An unprivileged app calls governor.open_device("jetson") as usual and gets a device
    whose changes the daemon makes; without a daemon it gets the plain (read-only) device."""
    import governor
    from governor.devices.jetson import sysfs

    server, path = jetson_daemon
    monkeypatch.setattr(sysfs, "can_write", lambda p: False)  # not root
    monkeypatch.setenv("GOVERNOR_DAEMON_SOCKET", str(path))
    with governor.open_device("jetson") as dev:
        assert isinstance(dev, DaemonDevice)
        dev.lock_gpu_clocks(612)
        assert orin() == ("612000000", "612000000")
    assert orin() == ("306000000", "612000000")  # leaving the block asked the daemon to reset
    monkeypatch.setenv("GOVERNOR_DAEMON_SOCKET", str(path) + ".absent")
    with governor.open_device("jetson") as dev:
        assert not isinstance(dev, DaemonDevice) and not dev.control_permitted()


def test_unprivileged_apply_and_reset_from_the_cli_go_through_the_daemon(
    orin, jetson_daemon, monkeypatch, capsys
):
    import json

    from cli_helpers import run_cli

    from governor.devices.jetson import sysfs

    server, path = jetson_daemon
    monkeypatch.setattr(sysfs, "can_write", lambda p: False)  # not root
    monkeypatch.setenv("GOVERNOR_DAEMON_SOCKET", str(path))
    code, out, err = run_cli(capsys, "apply", "--clock", "408", "--device", "jetson", "--json")
    assert code == 0, err
    assert orin() == ("408000000", "408000000")  # persists after the command: the daemon holds it
    code, out, err = run_cli(capsys, "reset", "--device", "jetson", "--json")
    assert code == 0, err
    assert json.loads(out)["devices"][0]["restored"] and orin() == ("306000000", "612000000")
