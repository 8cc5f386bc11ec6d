"""The journal of original device state, written before any change reaches a device.

Every control in :class:`governor.devices.base.Device` calls :meth:`Journal.record` before the
backend writes, so the state a device had before governor touched it is always on disk (or in
memory, for simulated boards whose state dies with the process) and can be restored after a
crash, Ctrl-C or ``kill -9`` by ``governor reset``.

The file is one JSON document per device, ``<state_dir>/journal-<uri>.json``::

    {"uri": "nvml:0", "pid": 4242, "recorded_at": "2026-11-22T04:00:00+00:00",
     "original": {"gpu_clocks": null, "power_limit": 250.0}}

Only the *first* recorded value of a field is kept: a second change must not overwrite the
true original with governor's own setting. Writes are atomic (temporary file, fsync, rename).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional

from governor.errors import GovernorError

__all__ = ["FIELDS", "Journal", "journal_path"]

# The fields a device can change, in the order they are restored.
FIELDS = ("power_mode", "power_limit", "mem_clock", "gpu_clocks")


def journal_path(state_dir: Path, uri: str) -> Path:
    """The journal file of device ``uri`` in ``state_dir``."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", uri).strip("_") or "device"
    return Path(state_dir) / f"journal-{safe}.json"


class Journal:
    """Original values of changed fields for one device; on disk when ``path`` is given."""

    def __init__(self, uri: str, path: Optional[Path] = None) -> None:
        self.uri = uri
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._original: Dict[str, Any] = {}
        if self.path is not None and self.path.exists():
            self._original = self._load(self.path)

    # -- reading -------------------------------------------------------------------------
    @staticmethod
    def _load(path: Path) -> Dict[str, Any]:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            original = doc["original"]
            if not isinstance(original, dict):
                raise TypeError("'original' is not a table")
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise GovernorError(f"device journal {path} is unreadable: {err}") from err
        return {k: v for k, v in original.items() if k in FIELDS}

    def originals(self) -> Dict[str, Any]:
        """Field -> original value, for every field changed since the last restore."""
        with self._lock:
            return dict(self._original)

    def fields(self) -> List[str]:
        """Changed fields in restore order."""
        with self._lock:
            return [f for f in FIELDS if f in self._original]

    def __bool__(self) -> bool:
        return bool(self.originals())

    # -- writing -------------------------------------------------------------------------
    def record(self, field: str, original: Any) -> bool:
        """Remember ``original`` for ``field`` unless already remembered; True if recorded.

        The journal reaches the disk before this returns, so the caller may then write.
        """
        if field not in FIELDS:
            raise ValueError(f"unknown journal field {field!r}")
        with self._lock:
            if field in self._original:
                return False
            self._original[field] = original
            self._flush()
            return True

    def forget(self, field: Optional[str] = None) -> None:
        """Drop one field (restored) or all; removes the file when nothing is left."""
        with self._lock:
            if field is None:
                self._original.clear()
            else:
                self._original.pop(field, None)
            self._flush()

    def _flush(self) -> None:
        if self.path is None:
            return
        if not self._original:
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass
            return
        doc = {
            "uri": self.uri,
            "pid": os.getpid(),
            "recorded_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "original": self._original,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2, sort_keys=True)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
