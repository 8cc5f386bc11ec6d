"""The journal of original device state: what to put back, layer by layer, and whose it is.

Every change a :class:`~governor.devices.base.Device` makes is recorded here *before* the
backend writes, so the state a device had before governor touched it can always be brought
back, after a clean exit, Ctrl-C, or ``kill -9`` (by ``governor reset``, or by the next owner).

A journal is a stack of **layers**, one per owner that changed the device, oldest first. Each
layer keeps the *first* value it saw of each field it changed (a second change must not
overwrite the true original with governor's own setting). ``governor apply`` leaves a
*persistent* layer behind on purpose; a governor (``run``, the daemon, a ``Governor`` in an
app) pushes a layer on top and pops it when it stops, so the applied state comes back; a layer
that is not persistent and whose owner no longer holds the device lock belongs to a process
that died, and the next owner restores it (see :mod:`governor.devices.ownership`).

On disk (real hardware only) the journal is one JSON document per physical device::

    {"format": "governor-journal", "version": 2,
     "key": "nvml:GPU-4f5e...", "uri": "nvml:0", "kind": "nvml",
     "layers": [{"owner": {"pid": 4242, "command": "governor apply ppw", "since": "..."},
                 "persistent": true, "original": {"gpu_clocks": null}}],
     "checksum": "sha256:..."}

The checksum covers the canonical JSON of everything else, so a torn or hand-edited file is
recognised as corrupt. Files are written atomically (new file opened with ``O_EXCL`` and
``O_NOFOLLOW``, fsync, rename, fsync of the directory) and values are checked before they
are written: a journal never holds NaN, an infinite clock or a field it does not know.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import socket
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from governor._compat import json_loads
from governor.errors import GovernorError

__all__ = [
    "FIELDS",
    "FORMAT",
    "VERSION",
    "Journal",
    "JournalCorruptError",
    "Layer",
    "check_value",
    "read_journal",
    "read_journal_bytes",
    "write_journal",
]

FORMAT = "governor-journal"
VERSION = 2

# The fields a device can change, in the order they are restored (a power mode first: it
# resets clock caps on a Jetson, so the clocks are put back after it).
FIELDS = ("power_mode", "power_limit", "mem_clock", "gpu_clocks")

#: the largest clock (MHz) or power limit (W) a journal may hold: anything above is not a
#: reading of real hardware but a corrupt value
_MAX_MHZ = 100_000.0
_MAX_W = 100_000.0
_MAX_BYTES = 1 << 20  # a journal is a few hundred bytes; a megabyte is not one


class JournalCorruptError(GovernorError, ValueError):
    """A journal file cannot be trusted (unparseable, wrong checksum, bad values)."""


def _number(value: Any, what: str, limit: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} must be a number, not {value!r}")
    number = float(value)
    if not math.isfinite(number) or not (0 < number <= limit):
        raise ValueError(f"{what} must be a finite number in (0, {limit:g}], not {value!r}")
    return number


def check_value(name: str, value: Any) -> Any:
    """``value`` as a journal may hold it for field ``name`` (JSON types, finite, in range).

    Raises:
        ValueError: unknown field or a value no device could have had.
    """
    if name not in FIELDS:
        raise ValueError(f"unknown journal field {name!r}")
    if value is None:
        return None
    if name == "gpu_clocks":
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise ValueError(f"gpu_clocks must be [min_mhz, max_mhz] or null, not {value!r}")
        lo = _number(value[0], "gpu_clocks min", _MAX_MHZ)
        hi = _number(value[1], "gpu_clocks max", _MAX_MHZ)
        if lo > hi:
            raise ValueError(f"gpu_clocks min {lo:g} is above max {hi:g}")
        return [lo, hi]
    if name == "mem_clock":
        return _number(value, "mem_clock", _MAX_MHZ)
    if name == "power_limit":
        return _number(value, "power_limit", _MAX_W)
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise ValueError(f"power_mode must be a mode name, not {value!r}")
    return value


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _command() -> str:
    return " ".join([os.path.basename(sys.argv[0] or "python")] + sys.argv[1:])[:200]


def owner_record(command: Optional[str] = None) -> Dict[str, Any]:
    """Who this process is, as a layer records it."""
    return {
        "pid": os.getpid(),
        "command": (command or _command())[:200],
        "host": socket.gethostname(),
        "since": _now(),
    }


@dataclass
class Layer:
    """One owner's originals. ``persistent`` layers (``governor apply``) outlive their owner."""

    owner: Dict[str, Any]
    persistent: bool = False
    original: Dict[str, Any] = field(default_factory=dict)
    #: what this layer set, for fields the hardware cannot report back (NVML's locked clocks):
    #: the next layer's original is read from here
    applied: Dict[str, Any] = field(default_factory=dict)

    def fields(self) -> List[str]:
        """Changed fields in restore order."""
        return [f for f in FIELDS if f in self.original]

    def describe(self) -> str:
        pid = self.owner.get("pid", "?")
        command = self.owner.get("command") or "unknown command"
        return f"pid {pid} ({command})"

    def to_dict(self) -> Dict[str, Any]:
        doc = {
            "owner": dict(self.owner),
            "persistent": self.persistent,
            "original": {f: self.original[f] for f in self.fields()},
        }
        if self.applied:
            doc["applied"] = {f: self.applied[f] for f in FIELDS if f in self.applied}
        return doc


class Journal:
    """The layers of one physical device (``key``), in memory; see the module docstring.

    The device's owner pushes its layer, records originals in it, and pops it when it has
    restored them. :mod:`governor.devices.ownership` keeps the file in step.
    """

    def __init__(
        self, key: str, uri: str, kind: str = "", layers: Optional[List[Layer]] = None
    ) -> None:
        self.key = key
        self.uri = uri
        self.kind = kind
        self.layers: List[Layer] = list(layers or [])

    # -- the top layer -----------------------------------------------------------------------
    @property
    def top(self) -> Optional[Layer]:
        return self.layers[-1] if self.layers else None

    def originals(self) -> Dict[str, Any]:
        """Field -> original value in the top layer."""
        top = self.top
        return dict(top.original) if top else {}

    def fields(self) -> List[str]:
        """Fields changed in the top layer, in restore order."""
        top = self.top
        return top.fields() if top else []

    def __bool__(self) -> bool:
        """Whether anything in the journal waits to be restored."""
        return any(layer.original for layer in self.layers)

    def record(self, name: str, original: Any) -> bool:
        """Remember ``original`` for ``name`` in the top layer unless already there.

        Returns True if recorded. Raises ValueError for a value no device could have had.
        """
        value = check_value(name, original)
        top = self.top
        if top is None:
            raise GovernorError("no journal layer to record in: the device is not owned")
        if name in top.original:
            return False
        top.original[name] = value
        return True

    def forget(self, name: str) -> None:
        """Drop one field of the top layer (restored)."""
        top = self.top
        if top is not None:
            top.original.pop(name, None)

    # -- serialisation -------------------------------------------------------------------------
    def to_dict(self) -> Dict[str, Any]:
        doc: Dict[str, Any] = {
            "format": FORMAT,
            "version": VERSION,
            "key": self.key,
            "uri": self.uri,
            "kind": self.kind,
            "layers": [layer.to_dict() for layer in self.layers],
        }
        doc["checksum"] = _checksum(doc)
        return doc


def _canonical(doc: Dict[str, Any]) -> bytes:
    body = {k: v for k, v in doc.items() if k != "checksum"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def _checksum(doc: Dict[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(_canonical(doc)).hexdigest()


def _parse(raw: bytes) -> Journal:
    if len(raw) > _MAX_BYTES:
        raise ValueError(f"{len(raw)} bytes is not a journal")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None

    def no_constants(name: str) -> Any:
        raise ValueError(f"{name} is not a value a journal holds")

    try:
        doc = json_loads(text, parse_constant=no_constants)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"not JSON ({err.msg} at line {err.lineno})") from None
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    if doc.get("format") != FORMAT:
        raise ValueError(f"format is {doc.get('format')!r}, not {FORMAT!r}")
    if doc.get("version") != VERSION:
        raise ValueError(f"version {doc.get('version')!r} is not {VERSION}")
    if doc.get("checksum") != _checksum(doc):
        raise ValueError("checksum does not match (torn write or edited by hand)")
    for name in ("key", "uri", "kind"):
        if not isinstance(doc.get(name), str) or (name != "kind" and not doc[name]):
            raise ValueError(f"{name} must be a non-empty string")
    layers_doc = doc.get("layers")
    if not isinstance(layers_doc, list):
        raise ValueError("layers must be a list")
    layers = []
    for i, item in enumerate(layers_doc):
        if not isinstance(item, dict):
            raise ValueError(f"layer {i} is not an object")
        owner, persistent, original = (
            item.get("owner"),
            item.get("persistent"),
            item.get("original"),
        )
        if not isinstance(owner, dict) or not isinstance(persistent, bool):
            raise ValueError(f"layer {i}: owner must be an object and persistent a boolean")
        if not isinstance(original, dict):
            raise ValueError(f"layer {i}: original must be an object")
        applied = item.get("applied", {})
        if not isinstance(applied, dict):
            raise ValueError(f"layer {i}: applied must be an object")
        checked: List[Dict[str, Any]] = [{}, {}]
        for slot, values in enumerate((original, applied)):
            for name, value in values.items():
                try:
                    checked[slot][name] = check_value(name, value)
                except ValueError as err:
                    raise ValueError(f"layer {i}: {err}") from None
        layers.append(
            Layer(owner=owner, persistent=persistent, original=checked[0], applied=checked[1])
        )
    return Journal(doc["key"], doc["uri"], doc["kind"], layers)


def read_journal_bytes(raw: bytes, path: Any = "journal") -> Journal:
    """Parse and check a journal document.

    Raises:
        JournalCorruptError: one line naming ``path`` and what is wrong.
    """
    try:
        return _parse(raw)
    except ValueError as err:
        raise JournalCorruptError(f"journal {path} is corrupt: {err}") from None


def _check_owned_file(fd: int, path: Path) -> None:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise GovernorError(f"{path} is not a regular file; refusing to use it")
    if st.st_uid not in (os.geteuid(), 0):
        raise GovernorError(f"{path} belongs to uid {st.st_uid}, not to this user; refusing it")


def read_journal(path: Path) -> Optional[Journal]:
    """The journal at ``path``; None when there is none. Symbolic links are not followed.

    Raises:
        JournalCorruptError: the file is there but cannot be trusted.
        GovernorError: it cannot be read, or is not a regular file of this user.
    """
    try:
        fd = os.open(str(path), os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as err:
        raise GovernorError(f"cannot read journal {path}: {err.strerror or err}") from None
    try:
        _check_owned_file(fd, path)
        chunks = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            if sum(map(len, chunks)) > _MAX_BYTES:
                break
    finally:
        os.close(fd)
    return read_journal_bytes(b"".join(chunks), path)


def _unwritable(path: Path, err: OSError) -> GovernorError:
    """The one line for a journal that cannot be written (a full or read-only state
    directory): where, why, and that the change it was for is not made."""
    return GovernorError(
        f"cannot write journal {path}: {err.strerror or err}; nothing is changed without its "
        "journal (free space there, or set GOVERNOR_STATE_DIR to a writable directory)"
    )


def write_journal(path: Path, journal: Journal) -> None:
    """Write ``journal`` to ``path`` atomically; remove the file when nothing waits in it.

    Layers with nothing recorded are left out: they say nothing a restore needs."""
    journal = Journal(
        journal.key,
        journal.uri,
        journal.kind,
        [layer for layer in journal.layers if layer.original],
    )
    if not journal.layers:
        try:
            os.unlink(str(path))
        except FileNotFoundError:
            pass
        return
    data = (
        json.dumps(journal.to_dict(), indent=2, sort_keys=True, allow_nan=False) + "\n"
    ).encode()
    # a str, not a Path: pathlib (to 3.11) interns every part it parses, and a name unique
    # to each write would churn the interpreter's table of interned strings once per write
    tmp = f"{path}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(tmp, flags, 0o600)
    except OSError as err:
        raise _unwritable(path, err) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, str(path))  # replaces a link itself, never its target
    except BaseException as err:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(err, OSError):  # a full or read-only state directory
            raise _unwritable(path, err) from None
        raise
    try:
        dfd = os.open(str(path.parent), os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:  # pragma: no cover - some file systems refuse fsync on a directory
        pass
