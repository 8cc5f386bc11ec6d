"""One owner per physical device: a lock file in the state directory naming its holder.

Locks (and journals) are keyed by what the device *is*, never by how it was spelled: the
GPU's UUID for NVML, the devfreq node's real path for a Jetson (see ``Identity.key``), so
``nvml:0``, ``nvml:00``, ``nvml:GPU-...`` and ``nvml:0000:3B:00.0`` all meet the same lock.

``<state_dir>/lock-<slug>.lock`` holds ``{"pid", "command", "key", "uri", "since"}`` and an
exclusive ``flock`` for as long as the holder lives. The kernel drops the ``flock`` when the
holder dies (even by ``kill -9``), so a stale lock is simply taken over; the file's text is
only there to name the holder in the :class:`~governor.errors.DeviceBusyError` a second
governor gets. The file is opened with ``O_NOFOLLOW`` and must be a regular file of this user
with one link, so a planted symlink or hard link cannot redirect a privileged write; the state
directory itself must belong to this user and not be writable by others.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
import stat
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, Optional

from governor._compat import json_loads
from governor.errors import DeviceBusyError, GovernorError
from governor.paths import state_dir

fcntl: Optional[ModuleType]
try:  # pragma: no cover - always present on Linux
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None

__all__ = ["DeviceLock", "ensure_state_dir", "key_slug", "lock_path"]


def key_slug(key: str) -> str:
    """A file-name-safe, collision-free form of a device key (readable part + hash)."""
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "_", key).strip("_.")[-60:] or "device"
    return f"{readable}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def ensure_state_dir(directory: Optional[Path] = None) -> Path:
    """The state directory, created private (0700) if missing.

    Raises:
        GovernorError: it is a symlink, not a directory, not this user's, or writable by
            others (where a planted link could redirect a write).
    """
    path = Path(directory if directory is not None else state_dir())
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(str(path))
    except OSError as err:
        raise GovernorError(
            f"cannot create state directory {path}: {err.strerror or err}"
        ) from None
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise GovernorError(f"state directory {path} is not a plain directory; refusing to use it")
    if st.st_uid != os.geteuid():
        raise GovernorError(
            f"state directory {path} belongs to uid {st.st_uid}, not to this user (uid "
            f"{os.geteuid()}); set GOVERNOR_STATE_DIR to a directory of your own"
        )
    if st.st_mode & 0o022:
        raise GovernorError(
            f"state directory {path} is writable by others; fix it with: chmod go-w {path}"
        )
    return path


def lock_path(key: str, directory: Optional[Path] = None) -> Path:
    """The lock file of the device whose identity key is ``key``."""
    return Path(directory if directory is not None else state_dir()) / f"lock-{key_slug(key)}.lock"


def _command() -> str:
    return " ".join([os.path.basename(sys.argv[0] or "python")] + sys.argv[1:])[:200]


class DeviceLock:
    """An exclusive, crash-proof claim on one physical device (a context manager).

    Raises:
        DeviceBusyError: from :meth:`acquire`, when another live process (or another
            governor in this process) holds the device; the message names its pid and command.
        GovernorError: the lock file cannot be created safely.
    """

    def __init__(
        self,
        key: str,
        directory: Optional[Path] = None,
        *,
        uri: Optional[str] = None,
        command: Optional[str] = None,
    ) -> None:
        self.key = key
        self.uri = uri or key
        self.directory = directory
        self.path = lock_path(key, directory)
        self.command = command or _command()
        self._fd: Optional[int] = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def holder(self) -> Optional[Dict[str, Any]]:
        """What the lock file says about its holder (None when there is no readable file)."""
        try:
            fd = os.open(str(self.path), os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return None
        try:
            doc = json_loads(os.read(fd, 4096).decode("utf-8", "replace"))
        except ValueError:
            return None
        finally:
            os.close(fd)
        return doc if isinstance(doc, dict) else None

    def _busy(self, holder: Optional[Dict[str, Any]]) -> DeviceBusyError:
        if holder:
            who = f"pid {holder.get('pid')} ({holder.get('command') or 'unknown command'})"
            since = f" since {holder['since']}" if holder.get("since") else ""
        else:
            who, since = "another process", ""
        return DeviceBusyError(
            f"{self.uri} is already governed by {who}{since}; stop it first (lock {self.path})"
        )

    def _open(self) -> int:
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(str(self.path), flags, 0o600)
        except OSError as err:
            raise GovernorError(
                f"cannot open the device lock {self.path}: {err.strerror or err}"
                + (" (it is a symbolic link: remove it)" if os.path.islink(self.path) else "")
            ) from None
        st = os.fstat(fd)
        problem = None
        if not stat.S_ISREG(st.st_mode):
            problem = "is not a regular file"
        elif st.st_uid != os.geteuid():
            problem = f"belongs to uid {st.st_uid}"
        elif st.st_nlink != 1:
            problem = "has other hard links"
        if problem:
            os.close(fd)
            raise GovernorError(f"device lock {self.path} {problem}; refusing to use it")
        return fd

    def acquire(self) -> DeviceLock:
        if self._fd is not None:
            return self
        ensure_state_dir(self.path.parent)
        for _ in range(5):
            fd = self._open()
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    os.close(fd)
                    raise self._busy(self.holder()) from None
                try:  # the file we locked must still be the one at the path
                    same = os.fstat(fd).st_ino == os.lstat(str(self.path)).st_ino
                except FileNotFoundError:
                    same = False
                if not same:
                    os.close(fd)
                    continue
            doc = {
                "pid": os.getpid(),
                "command": self.command,
                "key": self.key,
                "uri": self.uri,
                "since": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            }
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(doc) + "\n").encode("utf-8"), 0)
            self._fd = fd
            return self
        raise self._busy(self.holder())

    def release(self) -> None:
        """Let go (safe to repeat); removes the file."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        os.close(fd)  # closing drops the flock

    def __enter__(self) -> DeviceLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
