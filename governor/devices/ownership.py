"""Who may change and restore a device: the lock holder, and only the lock holder.

The rules (docs/ownership.md tells them to users):

- Reading a device never takes its lock and never reads or writes its journal.
- The first change (or :meth:`Device.acquire`) takes the device's lock, keyed by its physical
  identity; a second owner gets :class:`~governor.errors.DeviceBusyError` naming the first.
- The owner pushes a journal layer, records originals in it before each write, and restores
  and pops it when it lets go; ``governor apply`` keeps its layer instead (persistent).
- Taking the lock, an owner finds the layers earlier owners left. A layer that is not
  persistent was left by a process that died holding the lock (``kill -9``, a power cut): the
  new owner restores it and says so. Persistent layers stay until ``governor reset``.
- ``reset`` takes the lock too (so it never undoes a live governor), restores every layer,
  top first, trying every field and reporting each failure; the fields that failed stay
  journaled. A corrupt journal is set aside (renamed, with a message) and the device is put
  back to its driver defaults.

Simulated and replayed boards live inside one process: their owner keeps the journal in
memory and takes no lock, so simulations never collide with each other or with hardware.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Tuple

from governor.devices.journal import (
    Journal,
    JournalCorruptError,
    Layer,
    check_value,
    owner_record,
    read_journal,
    write_journal,
)
from governor.devices.lock import DeviceLock, key_slug
from governor.errors import GovernorError
from governor.paths import state_dir

if TYPE_CHECKING:  # pragma: no cover
    from governor.devices.base import Device

__all__ = [
    "Ownership",
    "ResetReport",
    "RestoreError",
    "journal_path",
    "journal_in_hand",
    "journals_on_disk",
    "read_own_journal",
    "reset_device",
    "restore_layers_down_to",
]

log = logging.getLogger("governor.devices")


class RestoreError(GovernorError, RuntimeError):
    """Some settings could not be put back; ``failed`` maps field -> reason. They stay
    journaled, so ``governor reset`` can try again."""

    def __init__(self, uri: str, failed: Dict[str, str], restored: Dict[str, Any]) -> None:
        detail = "; ".join(f"{name}: {why}" for name, why in failed.items())
        super().__init__(
            f"{uri}: could not restore {detail} (kept in the journal: run 'governor reset --device {uri}')"
        )
        self.failed = dict(failed)
        self.restored = dict(restored)


def journal_path(key: str, directory: Optional[Path] = None) -> Path:
    """The journal file of the device whose identity key is ``key``."""
    base = Path(directory if directory is not None else state_dir())
    return base / f"journal-{key_slug(key)}.json"


def _set_aside(path: Path) -> Path:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}-{os.getpid()}")
    os.replace(str(path), str(aside))
    return aside


def device_key(device: Device) -> str:
    """The physical identity locks and journals are keyed by."""
    return device.identity.key or device.identity.uri


class Ownership:
    """This process's claim on one device: its lock, and the journal layers it owns."""

    def __init__(self, device: Device, command: Optional[str] = None) -> None:
        self.device = device
        self.key = device_key(device)
        self.on_disk = device.persistent_state
        self.command = command
        self.lock: Optional[DeviceLock] = None
        self.path: Optional[Path] = None
        if self.on_disk:
            self.path = journal_path(self.key)
            self.lock = DeviceLock(self.key, self.path.parent, uri=device.uri, command=command)
        self.journal = Journal(self.key, device.uri, device.identity.kind)
        self.base_depth = 0  # layers below ours: not ours to pop
        self.notes: List[str] = []

    # -- taking and letting go -------------------------------------------------------------
    def take(self) -> None:
        """Lock the device and adopt what earlier owners left (see the module docstring).

        Raises:
            DeviceBusyError: another live owner holds it.
            RestoreError: a dead owner's settings could not all be put back.
        """
        if self.lock is not None:
            self.lock.acquire()
        try:
            self._adopt()
        except BaseException:
            self.let_go()
            raise

    def _adopt(self) -> None:
        if self.path is None:
            return
        found = read_own_journal(self)
        if found.set_aside is not None:
            self._note(f"{found.set_aside}; restoring the driver defaults")
            restore_defaults(self.device)
            return
        if found.journal is None:
            return
        self.journal.layers = found.journal.layers
        while self.journal.top is not None and not self.journal.top.persistent:
            dead = self.journal.top
            self._note(
                f"{self.device.uri}: restoring settings left by {dead.describe()}, "
                "which ended without restoring them"
            )
            self.restore_top()
            self.journal.layers.pop()
            self.save()
        self.base_depth = len(self.journal.layers)

    def let_go(self) -> None:
        if self.lock is not None:
            self.lock.release()

    def _note(self, text: str) -> None:
        self.notes.append(text)
        log.warning("governor: %s", text)

    # -- layers ----------------------------------------------------------------------------------
    @property
    def own_depth(self) -> int:
        return len(self.journal.layers) - self.base_depth

    def push(self, command: Optional[str] = None, persistent: bool = False) -> None:
        self.journal.layers.append(
            Layer(owner=owner_record(command or self.command), persistent=persistent)
        )

    def keep_top(self, merge: bool = True) -> None:
        """Leave this owner's only layer for ``reset`` (``governor apply``), merged into a
        persistent layer right below it so that repeated applies do not pile up layers
        (``merge=False`` keeps it a layer of its own, which its owner's successor can find
        and undo alone: a Slurm job's)."""
        if self.own_depth != 1:
            raise GovernorError(
                f"{self.device.uri}: only an owner with one journal layer can keep its changes"
            )
        top = self.journal.layers[-1]
        top.persistent = True
        below = self.journal.layers[-2] if len(self.journal.layers) >= 2 else None
        if merge and below is not None and below.persistent:
            for name, value in top.original.items():
                below.original.setdefault(name, value)
            below.applied.update(top.applied)  # the newer setting is what is in force
            self.journal.layers.pop()
        self.base_depth = len(self.journal.layers)
        self.save()

    def save(self) -> None:
        if self.path is not None:
            write_journal(self.path, self.journal)

    def journaled(self, name: str) -> bool:
        """Whether the top layer already holds the original of ``name``."""
        top = self.journal.top
        return top is not None and name in top.original

    def record(self, name: str, original: Any) -> bool:
        recorded = self.journal.record(name, original)
        if recorded:
            try:
                self.save()  # on disk before the caller writes the device
            except BaseException:
                self.journal.forget(name)  # not journaled, so not changed: nothing to put back
                raise
        return recorded

    def forget(self, name: str) -> None:
        self.journal.forget(name)
        self.save()

    def note_applied(self, name: str, value: Any) -> None:
        """Remember what the top layer set ``name`` to (see ``Layer.applied``)."""
        top = self.journal.top
        if top is not None:
            top.applied[name] = check_value(name, value)
            self.save()

    def applied_below_top(self, name: str) -> Tuple[bool, Any]:
        """(found, value): what the nearest layer under the top one set ``name`` to."""
        for layer in reversed(self.journal.layers[:-1]):
            if name in layer.applied:
                return True, layer.applied[name]
        return False, None

    def restore_top(self) -> Dict[str, Any]:
        """Put back every field of the top layer, trying them all; each one restored is
        dropped from the journal at once, the failures stay.

        Raises:
            RestoreError: listing each field that failed.
        """
        restored: Dict[str, Any] = {}
        failed: Dict[str, str] = {}
        layer = self.journal.top
        if layer is None:
            return restored
        for name in layer.fields():
            original = layer.original[name]
            try:
                self.device.put_back(name, original)
            except Exception as err:  # every field gets its turn
                failed[name] = str(err) or type(err).__name__
                # the RestoreError below carries every failure to the caller, who says it
                log.debug(
                    "%s: could not restore %s to %r: %s", self.device.uri, name, original, err
                )
                continue
            layer.original.pop(name, None)
            layer.applied.pop(name, None)
            self.save()
            restored[name] = original
            log.info("%s: restored %s to %r", self.device.uri, name, original)
        if failed:
            raise RestoreError(self.device.uri, failed, restored)
        return restored


@dataclass
class JournalRead:
    """What :func:`read_own_journal` found: the device's journal (None: there is none), or,
    for a corrupt one, ``set_aside``: the one line saying where it was moved."""

    journal: Optional[Journal]
    set_aside: Optional[str] = None


def read_own_journal(own: Ownership, *, set_aside: bool = True) -> JournalRead:
    """Read the journal of ``own``'s device and check that it is this device's.

    A corrupt journal is moved aside with a timestamp (``set_aside``) and reported, or, with
    ``set_aside=False``, raised.

    Raises:
        JournalCorruptError: corrupt, and ``set_aside`` is False.
        GovernorError: the journal belongs to another device.
    """
    if own.path is None:
        return JournalRead(None)
    try:
        found = read_journal(own.path)
    except JournalCorruptError as err:
        if not set_aside:
            raise
        aside = _set_aside(own.path)
        return JournalRead(None, f"{err}; moved to {aside.name}")
    if found is not None and found.key != own.key:
        raise GovernorError(
            f"journal {own.path} belongs to {found.key}, not to this device ({own.key}); "
            "not applied"
        )
    return JournalRead(found)


@contextlib.contextmanager
def journal_in_hand(
    device: Device, command: Optional[str], *, doing: str, set_aside: bool = True
) -> Iterator[Tuple[Ownership, JournalRead]]:
    """Lock ``device`` (a device with state on disk, released first by its owner), read its
    journal and check its identity (:func:`read_own_journal`); the lock is held for the
    block and let go after it. The steps ``reset`` and the epilog's restore share.

    Raises:
        GovernorError: this process still owns the device; DeviceBusyError: another live
            owner holds it; and what :func:`read_own_journal` raises.
    """
    if device.owned:
        raise GovernorError(f"{device.uri}: release the device before {doing} it")
    own = Ownership(device, command)
    if own.lock is not None:
        own.lock.acquire()
    try:
        yield own, read_own_journal(own, set_aside=set_aside)
    finally:
        own.let_go()


def restore_defaults(device: Device) -> Dict[str, Any]:
    """Put the device back to its driver defaults (when no trustworthy journal says more).

    Raises:
        RestoreError: listing each field that failed (every one is tried).
    """
    restored: Dict[str, Any] = {}
    failed: Dict[str, str] = {}
    for name, value in device.default_originals().items():
        try:
            device.put_back(name, value)
            restored[name] = value
        except Exception as err:
            failed[name] = str(err) or type(err).__name__
    if failed:
        raise RestoreError(device.uri, failed, restored)
    return restored


class ResetReport(Dict[str, Any]):
    """What ``reset`` did to one device: ``restored`` (field -> value), ``failed`` (field ->
    reason), ``notes`` (corrupt journals set aside, layers undone), ``device``."""


def _unwind(own: Ownership, report: ResetReport, *, depth: int) -> None:
    """Restore the journal's layers above ``depth``, top first, every field tried. What
    fails stays journaled, in persistent layers (for ``reset``, not the next owner)."""
    failed_layers: List[Layer] = []
    while len(own.journal.layers) > depth:
        try:
            restored = own.restore_top()
        except RestoreError as err:
            restored = err.restored
            for name, why in err.failed.items():
                report["failed"].setdefault(name, why)
            failed_layers.insert(0, own.journal.layers[-1])
        report["restored"].update(restored)  # a lower layer's value wins: it is the original
        own.journal.layers.pop()
    for layer in failed_layers:
        layer.persistent = True
    own.journal.layers.extend(failed_layers)
    own.save()


def reset_device(device: Device, *, command: Optional[str] = None) -> ResetReport:
    """Undo every layer journaled for ``device`` (its own, a dead owner's, ``apply``'s).

    Takes the device's lock for the duration, so it never undoes a live governor's work.
    Returns a report; never raises for a field that fails to restore (it is reported, and
    stays journaled).

    Raises:
        DeviceBusyError: a live process owns the device.
        GovernorError: the journal belongs to another device, or the state dir is unsafe.
    """
    report = ResetReport(device=device.uri, restored={}, failed={}, notes=[])
    if not device.persistent_state:  # its state lives in this process (or in a daemon)
        try:
            report["restored"].update(device.restore_everything())
        except RestoreError as err:
            report["restored"].update(err.restored)
            report["failed"].update(err.failed)
        return report
    with journal_in_hand(device, command, doing="resetting") as (own, found):
        if found.set_aside is not None:
            report["notes"].append(f"{found.set_aside}; restored the driver defaults")
            try:
                report["restored"].update(restore_defaults(device))
            except RestoreError as failure:
                report["restored"].update(failure.restored)
                report["failed"].update(failure.failed)
            return report
        if found.journal is None:
            return report
        own.journal.layers = found.journal.layers
        _unwind(own, report, depth=0)
    return report


def restore_layers_down_to(
    device: Device, marker: str, *, command: Optional[str] = None
) -> Optional[ResetReport]:
    """Undo the journal layers of ``device`` from the top down to, and including, the topmost
    layer whose owner command contains ``marker`` (a Slurm job's layer, kept apart by
    ``release(keep=True, merge=False)``); the layers below it (a site's ``governor apply``)
    stay. None when no layer carries ``marker``: nothing was changed.

    Takes the device's lock for the duration. Fields that fail are reported and stay
    journaled in a persistent layer, for ``governor reset``.

    Raises:
        DeviceBusyError: a live process owns the device.
        GovernorError: the journal belongs to another device, or cannot be read.
    """
    if not device.persistent_state:
        if device.owned:
            raise GovernorError(f"{device.uri}: release the device before restoring it")
        return None
    with journal_in_hand(device, command, doing="restoring", set_aside=False) as (
        own,
        found,
    ):
        if found.journal is None:
            return None
        layers = found.journal.layers
        depth = None
        for i in range(len(layers) - 1, -1, -1):
            if marker in str(layers[i].owner.get("command", "")):
                depth = i
                break
        if depth is None:
            return None
        report = ResetReport(device=device.uri, restored={}, failed={}, notes=[])
        own.journal.layers = layers
        _unwind(own, report, depth=depth)
    return report


def journals_on_disk(directory: Optional[Path] = None) -> List[Tuple[Path, Optional[Journal], str]]:
    """Every journal file in the state directory: (path, journal or None, problem)."""
    base = Path(directory if directory is not None else state_dir())
    found = []
    for path in sorted(base.glob("journal-*.json")):
        try:
            found.append((path, read_journal(path), ""))
        except GovernorError as err:
            found.append((path, None, str(err)))
    return found


def reopen_uri(journal: Journal) -> str:
    """The URI that reopens the device a journal belongs to (its key when the key is one)."""
    if journal.kind == "nvml" and journal.key.startswith("nvml:"):
        return journal.key
    return journal.uri
