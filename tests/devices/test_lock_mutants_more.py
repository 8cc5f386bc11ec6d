"""governor.devices.lock against file-system state and hand-built names.

Written to kill the mutants scripts/mutation.py reports (docs/mutation.md).
"""

import hashlib
import json
import os
import stat
import sys

import pytest

from governor.devices import lock as lk
from governor.errors import DeviceBusyError, GovernorError


def _private(tmp_path):
    d = tmp_path / "state"
    d.mkdir(mode=0o700)
    os.chmod(d, 0o700)
    return d


def test_key_slug_is_readable_part_plus_twelve_hex_of_sha256():
    key = "nvml:GPU-1234/abc"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    assert lk.key_slug(key) == "nvml_GPU-1234_abc-" + digest
    long_key = "x" * 100
    assert lk.key_slug(long_key) == "x" * 60 + "-" + hashlib.sha256(b"x" * 100).hexdigest()[:12]
    assert lk.key_slug("::").startswith("device-")


def test_lock_path_is_in_the_given_directory(tmp_path):
    key = "jetson:/sys/devfreq/gpu"
    assert lk.lock_path(key, tmp_path) == tmp_path / ("lock-" + lk.key_slug(key) + ".lock")


def test_state_dir_created_private_and_permissions_checked(tmp_path):
    d = tmp_path / "a" / "b"
    assert lk.ensure_state_dir(d) == d
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    # others may traverse (o+x) but not write
    os.chmod(d, 0o711)
    assert lk.ensure_state_dir(d) == d
    os.chmod(d, 0o701)
    assert lk.ensure_state_dir(d) == d
    for mode in (0o720, 0o702, 0o777):
        os.chmod(d, mode)
        with pytest.raises(GovernorError, match="writable by others"):
            lk.ensure_state_dir(d)
    os.chmod(d, 0o700)
    link = tmp_path / "link"
    link.symlink_to(d)
    with pytest.raises(GovernorError, match="not a plain directory"):
        lk.ensure_state_dir(link)
    f = tmp_path / "file"
    f.write_text("x")
    # the OS's reason, not the exception's repr
    with pytest.raises(GovernorError, match=r"cannot create state directory .*: File exists$"):
        lk.ensure_state_dir(f)


def test_command_names_the_program_and_is_capped(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/usr/bin/governor", "run", "sim:agx-orin"])
    assert lk._command() == "governor run sim:agx-orin"
    monkeypatch.setattr(sys, "argv", ["/x/governor"] + ["a" * 50] * 10)
    assert len(lk._command()) == 200
    monkeypatch.setattr(sys, "argv", [""])
    assert lk._command() == "python"


def test_acquire_writes_the_holder_and_release_removes_it(tmp_path):
    d = _private(tmp_path)
    lock = lk.DeviceLock("key-1", d, command="governor run")
    assert lock.uri == "key-1"
    assert not lock.held
    assert lock.holder() is None
    # a stale, longer file from a dead holder is replaced, not overwritten in place
    lock.path.write_text("X" * 500)
    os.chmod(lock.path, 0o600)
    assert lock.acquire() is lock
    assert lock.held
    assert lock.acquire() is lock  # again: no-op
    doc = json.loads(lock.path.read_text())
    assert doc["pid"] == os.getpid()
    assert doc["command"] == "governor run"
    assert doc["key"] == "key-1" and doc["uri"] == "key-1"
    assert doc["since"].endswith("+00:00")
    assert lock.holder() == doc
    lock.release()
    assert not lock.held
    assert not lock.path.exists()
    lock.release()  # again: fine


def test_new_lock_file_is_private(tmp_path):
    d = _private(tmp_path)
    with lk.DeviceLock("k", d) as lock:
        assert stat.S_IMODE(os.stat(lock.path).st_mode) == 0o600
    assert not lock.path.exists()


def test_second_holder_is_told_who_holds_it(tmp_path):
    d = _private(tmp_path)
    with lk.DeviceLock("gpu", d, uri="nvml:0", command="governor run x"):
        other = lk.DeviceLock("gpu", d, uri="nvml:00")
        with pytest.raises(DeviceBusyError) as info:
            other.acquire()
        msg = str(info.value)
        assert f"pid {os.getpid()} (governor run x)" in msg
        assert " since " in msg
        assert msg.startswith("nvml:00 is already governed by")
        assert not other.held


def test_busy_message_without_a_readable_holder(tmp_path):
    lock = lk.DeviceLock("gpu", tmp_path, uri="u")
    assert "by another process;" in str(lock._busy(None))
    assert "pid 7 (unknown command);" in str(lock._busy({"pid": 7}))


def test_holder_ignores_unreadable_or_non_object_files(tmp_path):
    lock = lk.DeviceLock("gpu", tmp_path)
    lock.path.write_text("not json")
    assert lock.holder() is None
    lock.path.write_text("[1, 2]")
    assert lock.holder() is None
    lock.path.write_text('{"pid": 3}')
    assert lock.holder() == {"pid": 3}


def test_planted_links_and_non_files_are_refused(tmp_path):
    d = _private(tmp_path)
    lock = lk.DeviceLock("gpu", d)
    target = tmp_path / "target"
    target.write_text("")
    lock.path.symlink_to(target)
    with pytest.raises(
        GovernorError,
        match=r": Too many levels of symbolic links \(it is a symbolic link: remove it\)$",
    ):
        lock.acquire()
    lock.path.unlink()
    os.link(target, lock.path)
    with pytest.raises(GovernorError, match="other hard links"):
        lock.acquire()
    lock.path.unlink()
    os.mkfifo(lock.path, 0o600)
    with pytest.raises(GovernorError, match="not a regular file"):
        lock.acquire()
    assert not lock.held


def test_a_lock_file_replaced_under_us_is_retried_five_times(tmp_path):
    d = _private(tmp_path)
    lock = lk.DeviceLock("gpu", d)
    real_open = lock._open
    calls = []

    def racing_open():
        fd = real_open()
        calls.append(fd)
        fresh = d / "fresh"
        fresh.write_text("")
        os.replace(fresh, lock.path)  # another process swapped the file: new inode
        return fd

    lock._open = racing_open
    with pytest.raises(DeviceBusyError, match="by another process"):
        lock.acquire()
    assert len(calls) == 5 and not lock.held


def test_a_lock_file_removed_under_us_is_retried_too(tmp_path):
    d = _private(tmp_path)
    lock = lk.DeviceLock("gpu", d)
    real_open = lock._open
    calls = []

    def vanishing_open():
        fd = real_open()
        calls.append(fd)
        lock.path.unlink()  # another process released and removed it: our file is gone
        return fd

    lock._open = vanishing_open
    with pytest.raises(DeviceBusyError):
        lock.acquire()
    assert len(calls) == 5 and not lock.held
