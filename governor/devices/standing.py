"""What a device's settings are, who set them, and what ``governor reset`` would put back.

Read-only: this module reads the device, its journal and its lock file, and never takes the
lock, writes a journal or sets a journal aside (a corrupt one is reported as such). It backs
``governor status``.

Who set a field is read from the journal: the topmost layer that recorded the field's
original is the owner whose change is in force (a layer records the value *before* its owner
changed it). A field that differs from the driver's default with no layer recording it was
set by a program that is not governor, and ``reset`` leaves it alone. What ``reset`` puts
back is the lowest layer's original of each journaled field: the value before governor's
first change.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from governor.devices.base import Device
from governor.devices.journal import Journal, Layer

__all__ = ["device_standing", "journal_standing", "owner_label", "pid_alive"]

#: the journal's field names, in the order ``governor status`` prints them
FIELDS = ("gpu_clocks", "mem_clock", "power_limit", "power_mode")

#: two settings closer than this are the same (MHz or W): the drivers round
_SAME = 0.5


def pid_alive(pid: Any, host: Optional[str] = None) -> Optional[bool]:
    """Whether process ``pid`` runs (None: it ran on another host, so it cannot be told)."""
    if host and host != socket.gethostname():
        return None
    try:
        number = int(pid)
    except (TypeError, ValueError):
        return False
    if number <= 0:
        return False
    try:
        os.kill(number, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def owner_label(owner: Dict[str, Any]) -> str:
    """Who an owner record is, in words: a Slurm job, the daemon, apply, run, or a program
    (``this_process`` in :func:`device_standing`'s records says whether it is the caller)."""
    command = str(owner.get("command") or "")
    words = command.split()
    if "slurm" in words and "job" in words:
        after = words[words.index("job") + 1 :]
        return f"Slurm job {after[0]}" if after else "a Slurm job"
    if "daemon" in words:
        return "the governor daemon"
    if "apply" in words:
        return "governor apply"
    if "run" in words and words and words[0].endswith("governor"):
        return "governor run"
    return f"a program using governor ({command or 'unknown command'})"


def _owner_doc(owner: Dict[str, Any]) -> Dict[str, Any]:
    return {
        "who": owner_label(owner),
        "pid": owner.get("pid"),
        "command": owner.get("command"),
        "host": owner.get("host"),
        "since": owner.get("since"),
        "alive": pid_alive(owner.get("pid"), owner.get("host")),
        "this_process": _is_this_process(owner),
    }


def _is_this_process(owner: Dict[str, Any]) -> bool:
    try:
        same_pid = int(owner.get("pid") or 0) == os.getpid()
    except (TypeError, ValueError):
        return False
    return same_pid and owner.get("host") in (None, socket.gethostname())


def _current(device: Device) -> Dict[str, Any]:
    """The settings in force, as journal fields, for the controls the device has."""
    caps, state = device.capabilities, device.state()
    out: Dict[str, Any] = {}
    if caps.lock_gpu_clocks:
        out["gpu_clocks"] = list(state.gpu_clocks_mhz) if state.gpu_clocks_mhz else None
    if caps.lock_mem_clock:
        out["mem_clock"] = state.mem_clock_mhz
    if caps.power_limit:
        out["power_limit"] = state.power_limit_w
    if caps.power_mode:
        out["power_mode"] = state.power_mode
    return out


def same_setting(a: Any, b: Any) -> bool:
    """Whether two values of one field are the same setting (numbers within the rounding)."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_setting(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(float(a) - float(b)) <= _SAME
    return a == b


def _layer_doc(layer: Layer) -> Dict[str, Any]:
    return {
        "owner": _owner_doc(layer.owner),
        "persistent": layer.persistent,
        "original": dict(layer.original),
    }


def journal_standing(journal: Journal) -> Dict[str, Any]:
    """The layers of a journal, and what ``reset`` would restore from them."""
    restore: Dict[str, Any] = {}
    for layer in reversed(journal.layers):  # the lowest layer's original wins
        restore.update(layer.original)
    return {
        "layers": [_layer_doc(layer) for layer in journal.layers],
        "reset_restores": restore,
    }


def _applied(journal: Optional[Journal], name: str) -> Tuple[bool, Any]:
    """What the topmost layer that set ``name`` set it to (for fields the driver cannot read
    back: NVML's locked clocks)."""
    for layer in reversed(journal.layers if journal is not None else []):
        if name in layer.applied:
            return True, layer.applied[name]
    return False, None


def _setters(journal: Optional[Journal]) -> Dict[str, Layer]:
    """Each journaled field's topmost layer: the owner whose change is in force."""
    found: Dict[str, Layer] = {}
    for layer in journal.layers if journal is not None else []:
        for name in layer.original:
            found[name] = layer
    return found


def device_standing(
    device: Device,
    journal: Optional[Journal],
    journal_problem: str = "",
    holder: Optional[Dict[str, Any]] = None,
) -> Dict[str, Any]:
    """One device's settings, who set each, who holds it, and what reset would restore.

    ``journal`` is the device's journal as read from disk (None: none), ``journal_problem``
    why it could not be read, ``holder`` what its lock file says.
    """
    current = _current(device)
    defaults = device.default_originals()
    setters = _setters(journal)
    fields: List[Dict[str, Any]] = []
    for name in FIELDS:
        if name not in current:
            continue
        value, default = current[name], defaults.get(name)
        # clocks default to "not locked" (None); a limit or mode whose default the driver
        # does not tell is not known to be changed
        known = name in ("gpu_clocks", "mem_clock") or name in defaults
        readable = name not in device.READ_BLIND
        if not readable:  # what governor's journal says it set; another program's is unseen
            known, value = _applied(journal, name)
        layer = setters.get(name)
        if layer is not None:
            set_by: Optional[Dict[str, Any]] = _owner_doc(layer.owner)
        elif known and not same_setting(value, default):
            set_by = {"who": "another program (not journaled: reset leaves it)"}
        else:
            set_by = None
        fields.append(
            {
                "field": name,
                "value": value,
                "default": default,
                "at_default": same_setting(value, default) if known else None,
                "readable": readable,
                "set_by": set_by,
            }
        )
    doc: Dict[str, Any] = {
        "device": device.uri,
        "name": device.identity.name,
        "key": device.identity.key or device.identity.uri,
        "keeps_state": device.persistent_state,
        "settings": fields,
        "held_by": None,
        "layers": [],
        "reset_restores": {},
        "journal_problem": journal_problem or None,
    }
    if holder and pid_alive(holder.get("pid"), holder.get("host")) is not False:
        doc["held_by"] = _owner_doc(holder)
    if journal is not None:
        doc.update(journal_standing(journal))
    if journal_problem:
        doc["reset_restores"] = dict(defaults)  # reset sets it aside, restores the defaults
    return doc


def read_journal_quietly(path: Path) -> Tuple[Optional[Journal], str]:
    """A journal file read without setting it aside: (journal or None, problem)."""
    from governor.devices.journal import read_journal
    from governor.errors import GovernorError

    try:
        return read_journal(path), ""
    except GovernorError as err:
        return None, str(err)
