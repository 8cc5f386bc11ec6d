"""``governor reset`` with no device: every device that has a journal in the state directory.

Kept apart from :mod:`governor.devices.ownership` because it opens devices by URI (the
registry, which imports the backends), while ownership is what every backend builds on.
"""

from __future__ import annotations

from typing import Callable, List, Optional

from governor.devices.base import Device
from governor.devices.lock import ensure_state_dir
from governor.devices.ownership import (
    ResetReport,
    device_key,
    journals_on_disk,
    reopen_uri,
    reset_device,
)
from governor.devices.registry import open_device
from governor.errors import GovernorError

__all__ = ["reset_all"]


def _failed(device: str, what: str, why: str) -> ResetReport:
    return ResetReport(device=device, restored={}, failed={what: why}, notes=[])


def reset_all(opener: Optional[Callable[[str], Device]] = None) -> List[ResetReport]:
    """``reset`` every device that has a journal in the state directory.

    A journal that cannot be read is reported, not guessed at: its device is unknown, so
    ``reset --device URI`` (which sets it aside and restores the defaults) is the way out.
    ``opener`` opens a URI (default: :func:`~governor.devices.registry.open_device`).
    """
    open_uri = opener if opener is not None else open_device
    ensure_state_dir()
    reports: List[ResetReport] = []
    for path, journal, problem in journals_on_disk():
        if journal is None:
            reports.append(
                _failed(path.name, "journal", problem + "; reset its device with --device URI")
            )
            continue
        uri = reopen_uri(journal)
        try:
            device = open_uri(uri)
        except GovernorError as err:
            reports.append(_failed(uri, "open", str(err)))
            continue
        try:
            if device_key(device) != journal.key:
                reports.append(
                    _failed(
                        uri,
                        "identity",
                        f"{uri} is now {device_key(device)}, but the journal "
                        f"belongs to {journal.key}; not applied",
                    )
                )
                continue
            reports.append(reset_device(device))
        except GovernorError as err:
            reports.append(_failed(uri, "reset", str(err)))
        finally:
            device.close()
    return reports
