"""Where profiles live and how they are read and written.

A profile is one JSON file per board, ``<board>.json``, looked up first in the user's data
directory (``GOVERNOR_DATA_DIR``, default ``~/.local/share/governor/profiles``) and then in the
shipped ``profiles/`` folder. Writes always go to the user's directory, atomically.

Sections other than calibration (tile and block-size caches) are kept under ``"tuning"``:
``{"tuning": {SECTION: {KEY: VALUE}}}``; :func:`get_tuning` and :func:`put_tuning` read and
write one entry without touching the rest of the file.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Dict, List, Optional

from governor._compat import json_loads
from governor.errors import ProfileError
from governor.paths import data_dir, shipped_profiles_dir
from governor.profiles.schema import SCHEMA_VERSION, check_document

__all__ = [
    "SCHEMA_VERSION",
    "CorruptProfileError",
    "get_tuning",
    "parse_profile",
    "profile_paths",
    "put_tuning",
    "read_profile_file",
    "user_profiles_dir",
    "write_profile_file",
]

_BOARD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


def user_profiles_dir() -> Path:
    return data_dir() / "profiles"


def _check_board(board: str) -> str:
    if not isinstance(board, str) or not _BOARD.match(board):
        raise ProfileError(f"invalid board name {board!r} for a profile")
    return board


def profile_paths(board: str) -> List[Path]:
    """Candidate files for ``board``, in lookup order (user's first, then shipped)."""
    name = _check_board(board) + ".json"
    return [user_profiles_dir() / name, shipped_profiles_dir() / name]


class CorruptProfileError(ProfileError):
    """A profile file that is not a JSON object at all (torn, not UTF-8, not JSON): what
    ``governor calibrate`` sets aside before writing a new one."""


def parse_profile(data: bytes, path: Any = None) -> Dict[str, Any]:
    """Parse and check the bytes of a profile file (``path`` only names it in errors).

    Raises:
        ProfileError: not UTF-8 JSON, not an object, of a newer schema, or breaking a rule of
            :mod:`governor.profiles.schema` (one line naming the file and the field).
    """
    try:
        doc = json_loads(data.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise CorruptProfileError(f"corrupt profile (not UTF-8 text: {err.reason})", path) from None
    except RecursionError:
        raise CorruptProfileError("corrupt profile (nested too deeply)", path) from None
    except ValueError as err:
        raise CorruptProfileError(f"corrupt profile (not JSON: {err})", path) from None
    if not isinstance(doc, dict):
        raise CorruptProfileError("corrupt profile (not a JSON object)", path)
    return check_document(doc, path)


def read_profile_file(path: Path) -> Dict[str, Any]:
    """Read, parse and check one profile file (see :func:`parse_profile`).

    Raises:
        ProfileError: unreadable, not JSON, not an object, of a newer schema, or malformed.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ProfileError(f"cannot read profile: {err.strerror or err}", path) from err
    return parse_profile(data, path)


def write_profile_file(path: Path, doc: Dict[str, Any]) -> Path:
    """Write ``doc`` to ``path`` atomically, pretty-printed. Returns the path.

    ``doc`` is first checked by the rules the reader applies (:func:`check_document`), so
    governor never writes a profile it would refuse to read; the file on disk is then left
    as it was.

    Raises:
        ProfileError: ``doc`` breaks a rule (a bug in the code that built it: the message says
            so, one line naming the file and the field).
    """
    path = Path(path)
    doc = dict(doc)
    doc.setdefault("schema_version", SCHEMA_VERSION)
    try:
        check_document(doc, path)
    except ProfileError as err:
        refused = ProfileError(
            f"refusing to write an invalid {err} (a bug in governor: please report it; the "
            "file was left as it was)"
        )
        refused.path = path
        raise refused from None
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2, sort_keys=False)
        fh.write("\n")
    os.replace(tmp, path)
    return path


def _load_first(board: str) -> Optional[Dict[str, Any]]:
    for path in profile_paths(board):
        if path.exists():
            return read_profile_file(path)
    return None


def get_tuning(board: str, section: str, key: str) -> Optional[Any]:
    """The cached tuning entry ``section/key`` for ``board``, or None if there is none."""
    doc = _load_first(board)
    if doc is None:
        return None
    return doc.get("tuning", {}).get(section, {}).get(key)


def put_tuning(board: str, section: str, key: str, value: Any) -> Path:
    """Store a tuning entry in the user's profile of ``board`` (created if needed)."""
    user = profile_paths(board)[0]
    doc = _load_first(board) or {"schema_version": SCHEMA_VERSION, "board": board}
    doc.setdefault("tuning", {}).setdefault(section, {})[key] = value
    return write_profile_file(user, doc)
