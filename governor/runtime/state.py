"""Crash-safe device state: the on-disk journal the runtime relies on, and ``reset``.

Every device change is journaled before it happens (:mod:`governor.devices.journal`). Real
backends journal to ``<state_dir>/journal-<uri>.json`` already; a simulated board keeps its
journal in memory, so :func:`use_disk_journal` moves it to disk whenever the runtime governs
one — ``governor reset`` then works the same on every device.

Layers: ``governor apply`` leaves its journal on disk (the change persists until reset). A
governor started on top of it must bring back the *applied* state when it stops, not the
original, so :func:`begin_layer` sets the applied journal aside as
``journal-<uri>.base.json`` and starts an empty one; :func:`end_layer` puts it back.
:func:`reset_device` undoes both layers: the governor's, then the original's.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Dict, Optional

from governor.devices.base import Device
from governor.devices.journal import Journal, journal_path
from governor.errors import GovernorError
from governor.paths import state_dir

__all__ = [
    "base_path",
    "begin_layer",
    "end_layer",
    "journal_file",
    "reset_device",
    "use_disk_journal",
]

log = logging.getLogger("governor.runtime")


def journal_file(uri: str) -> Path:
    """Where the journal of device ``uri`` lives."""
    return journal_path(state_dir(), uri)


def base_path(uri: str) -> Path:
    """Where an applied journal waits while a governor runs on top of it."""
    path = journal_file(uri)
    return path.with_name(path.stem + ".base.json")


def use_disk_journal(device: Device) -> Journal:
    """Make ``device`` journal to its file in the state directory (keeping what its
    in-memory journal already holds). Returns the journal."""
    path = journal_file(device.uri)
    current = device.journal
    if current.path is not None and Path(current.path) == path:
        return current
    disk = Journal(device.uri, path)
    originals = current.originals()
    for name in current.fields():
        disk.record(name, originals[name])
    device.journal = disk
    return disk


def begin_layer(device: Device) -> bool:
    """Before a governor changes ``device``: set an existing journal (``governor apply``, or
    a crashed run) aside so stopping returns to the present state. True if one was set aside."""
    journal = use_disk_journal(device)
    base = base_path(device.uri)
    if base.exists():
        # a governor layered on an apply crashed: undo it first, the base stays
        if journal:
            log.warning(
                "%s: undoing a crashed governor's changes (journal %s)", device.uri, journal.path
            )
            device.restore()
        return False
    if not journal:
        return False
    assert journal.path is not None
    os.replace(journal.path, base)
    device.journal = Journal(device.uri, journal.path)
    log.info(
        "%s: already changed (governor apply); the governor will return to that state", device.uri
    )
    return True


def end_layer(device: Device, layered: bool) -> None:
    """After the governor restored ``device``: put the applied journal back."""
    if not layered:
        return
    base = base_path(device.uri)
    path = journal_file(device.uri)
    if base.exists():
        os.replace(base, path)
    device.journal = Journal(device.uri, path)


def reset_device(uri: str, *, device: Optional[Device] = None) -> Dict[str, Any]:
    """Restore device ``uri`` from its on-disk journal (after ``governor apply``, or a
    governor killed with ``kill -9``). Returns field -> value restored (empty: nothing to do).

    Raises:
        DeviceNotFoundError, DevicePermissionError: opening or writing the device failed.
        GovernorError: a journal is unreadable.
    """
    from governor.devices.registry import open_device

    path = journal_file(uri)
    base = base_path(uri)
    if not path.exists() and not base.exists():
        return {}
    own = device is None
    dev = device if device is not None else open_device(uri, journal=Journal(uri, path))
    try:
        if dev.journal.path is None or Path(dev.journal.path) != path:
            dev.journal = Journal(uri, path)
        restored = dev.restore()
        if base.exists():
            dev.journal = Journal(uri, base)
            restored.update(dev.restore())
            if base.exists():
                try:
                    base.unlink()
                except FileNotFoundError:
                    pass
            dev.journal = Journal(uri, path)
        return restored
    except GovernorError:
        raise
    finally:
        if own:
            dev.close()
