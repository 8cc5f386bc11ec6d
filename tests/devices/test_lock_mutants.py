"""Lock checks written to kill mutants of governor/devices/lock.py (docs/mutation.md).

Each test looks at what is on disk (the lock file's name, mode and JSON) or at what a second
claimant is told, never at values copied from the code's output.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import stat

import pytest

from governor.devices.lock import DeviceLock, ensure_state_dir, key_slug, lock_path
from governor.errors import DeviceBusyError, GovernorError


def test_key_slug_is_readable_part_plus_sha256_prefix():
    key = "/sys/devices/gpu.0/devfreq/17000000.ga10b"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    assert key_slug(key) == f"sys_devices_gpu.0_devfreq_17000000.ga10b-{digest}"
    assert key_slug("///") == "device-" + hashlib.sha256(b"///").hexdigest()[:12]
    long_key = "a" * 100
    assert key_slug(long_key).split("-")[0] == "a" * 60
    assert lock_path(key, "/x").as_posix() == f"/x/lock-{key_slug(key)}.lock"


def test_state_dir_is_created_private_and_checked(tmp_path):
    d = ensure_state_dir(tmp_path / "a" / "b")
    assert d == tmp_path / "a" / "b"
    assert stat.S_IMODE(os.stat(d).st_mode) & 0o077 == 0
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    with pytest.raises(GovernorError, match="writable by others"):
        ensure_state_dir(open_dir)
    os.chmod(open_dir, 0o755)
    assert ensure_state_dir(open_dir) == open_dir
    link = tmp_path / "link"
    link.symlink_to(d)
    with pytest.raises(GovernorError, match="not a plain directory"):
        ensure_state_dir(link)
    afile = tmp_path / "file"
    afile.write_text("")
    with pytest.raises(GovernorError, match="cannot create state directory"):
        ensure_state_dir(afile)


def test_lock_file_names_its_holder_and_goes_on_release(tmp_path):
    lock = DeviceLock("GPU-1234", tmp_path, uri="nvml:0", command="governor run x")
    assert not lock.held and lock.holder() is None
    with lock as held:
        assert held is lock and lock.held
        doc = json.loads(lock.path.read_text())
        assert doc["pid"] == os.getpid() and doc["command"] == "governor run x"
        assert doc["key"] == "GPU-1234" and doc["uri"] == "nvml:0" and doc["since"]
        assert lock.holder() == doc
        assert stat.S_IMODE(os.stat(lock.path).st_mode) == 0o600
        assert lock.acquire() is lock  # again: still held, same file
        # the kernel lock is really taken
        fd = os.open(str(lock.path), os.O_RDWR)
        try:
            with pytest.raises(OSError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
        other = DeviceLock("GPU-1234", tmp_path, uri="nvml:00")
        with pytest.raises(DeviceBusyError) as err:
            other.acquire()
        msg = str(err.value)
        assert f"pid {os.getpid()} (governor run x) since {doc['since']}" in msg
        assert msg.startswith("nvml:00 is already governed") and str(lock.path) in msg
        assert not other.held
    assert not lock.held and not lock.path.exists()
    lock.release()  # twice is harmless
    assert DeviceLock("k", tmp_path).uri == "k"


def test_busy_message_without_a_readable_holder(tmp_path):
    lock = DeviceLock("dev", tmp_path, uri="sim:x")
    assert "another process;" in str(lock._busy(None))
    assert "pid 5 (unknown command);" in str(lock._busy({"pid": 5}))
    lock.path.write_text("[1, 2]")
    assert lock.holder() is None
    lock.path.write_text("{not json")
    assert lock.holder() is None


def test_refuses_a_symlinked_or_hard_linked_lock_file(tmp_path):
    lock = DeviceLock("dev", tmp_path)
    target = tmp_path / "target"
    target.write_text("")
    lock.path.symlink_to(target)
    with pytest.raises(GovernorError, match="symbolic link"):
        lock.acquire()
    assert target.read_text() == "" and not lock.held
    lock.path.unlink()
    os.link(target, lock.path)
    with pytest.raises(GovernorError, match="other hard links"):
        lock.acquire()
    assert target.read_text() == "" and not lock.held
    lock.path.unlink()
    lock.path.mkdir()
    with pytest.raises(GovernorError):
        lock.acquire()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to hand a directory to another uid")
def test_state_dir_of_another_user_is_refused(tmp_path):
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    os.chown(other, 1, 1)
    with pytest.raises(GovernorError, match="belongs to uid 1"):
        ensure_state_dir(other)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_release_closes_the_lock_file(tmp_path):
    before = len(os.listdir("/proc/self/fd"))
    lock = DeviceLock("dev", tmp_path).acquire()
    assert len(os.listdir("/proc/self/fd")) == before + 1
    lock.release()
    assert len(os.listdir("/proc/self/fd")) == before


def test_refuses_a_fifo_in_place_of_the_lock_file(tmp_path):
    lock = DeviceLock("dev", tmp_path)
    os.mkfifo(lock.path)
    with pytest.raises(GovernorError, match="is not a regular file"):
        lock.acquire()
    assert not lock.held


def test_a_stale_longer_lock_file_is_overwritten_whole(tmp_path):
    lock = DeviceLock("dev", tmp_path, command="new")
    lock.path.write_text('{"pid": 1, "command": "' + "old " * 200 + '"}\n')
    with lock:
        doc = json.loads(lock.path.read_text())
        assert doc["command"] == "new" and doc["pid"] == os.getpid()


def test_default_command_is_this_program(monkeypatch, tmp_path):
    monkeypatch.setattr("sys.argv", ["/usr/bin/governor", "run", "x"])
    assert DeviceLock("dev", tmp_path).command == "governor run x"
    monkeypatch.setattr("sys.argv", ["", "-c"])
    assert DeviceLock("dev", tmp_path).command == "python -c"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to hand a file to another uid")
def test_lock_file_of_another_user_is_refused(tmp_path):
    lock = DeviceLock("dev", tmp_path)
    lock.path.write_text("")
    os.chown(lock.path, 1, 1)
    with pytest.raises(GovernorError, match="belongs to uid 1"):
        lock.acquire()
