"""One governor per device: a lock file in the state directory naming its holder.

``<state_dir>/lock-<uri>.lock`` holds ``{"pid", "command", "uri", "since"}`` and an exclusive
``flock`` for as long as the holder lives. The kernel drops the ``flock`` when the holder dies
(even by ``kill -9``), so a stale lock is simply taken over; the file's text is only there to
name the holder in the :class:`~governor.errors.DeviceBusyError` a second governor gets.
Where ``fcntl`` is missing (not Linux), the pid in the file decides: a dead pid's lock is
taken over.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Dict, Optional

from governor.errors import DeviceBusyError, GovernorError
from governor.paths import state_dir

try:  # pragma: no cover - always present on Linux
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

__all__ = ["DeviceLock", "lock_path"]


def lock_path(uri: str, directory: Optional[Path] = None) -> Path:
    """The lock file of device ``uri``."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", uri).strip("_") or "device"
    return Path(directory if directory is not None else state_dir()) / f"lock-{safe}.lock"


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _command() -> str:
    return " ".join([os.path.basename(sys.argv[0] or "python")] + sys.argv[1:])[:200]


class DeviceLock:
    """An exclusive, crash-proof claim on one device (a context manager).

    Raises:
        DeviceBusyError: from :meth:`acquire`, when another live process (or another
            governor in this process) holds the device; the message names its pid and command.
    """

    def __init__(
        self, uri: str, directory: Optional[Path] = None, *, command: Optional[str] = None
    ) -> None:
        self.uri = uri
        self.path = lock_path(uri, directory)
        self.command = command or _command()
        self._fd: Optional[int] = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def holder(self) -> Optional[Dict[str, Any]]:
        """What the lock file says about its holder (None when there is no readable file)."""
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
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

    def acquire(self) -> DeviceLock:
        if self._fd is not None:
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(5):
            try:
                fd = os.open(str(self.path), os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as err:
                raise GovernorError(
                    f"cannot create the device lock {self.path}: {err.strerror or err}"
                ) from err
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    os.close(fd)
                    raise self._busy(self.holder()) from None
                try:  # the file we locked must still be the one at the path
                    same = os.fstat(fd).st_ino == os.stat(str(self.path)).st_ino
                except FileNotFoundError:
                    same = False
                if not same:
                    os.close(fd)
                    continue
            else:  # pragma: no cover - non-Linux fallback
                holder = self.holder()
                if (
                    holder
                    and holder.get("pid") != os.getpid()
                    and _pid_alive(int(holder.get("pid", 0)))
                ):
                    os.close(fd)
                    raise self._busy(holder)
            doc = {
                "pid": os.getpid(),
                "command": self.command,
                "uri": self.uri,
                "since": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            }
            os.ftruncate(fd, 0)
            os.write(fd, (json.dumps(doc) + "\n").encode("utf-8"))
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
