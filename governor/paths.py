"""Where governor keeps things on disk: state (journals, locks), user profiles, shipped files.

Each location can be overridden by an environment variable, which is how tests and the daemon
point governor at their own directories:

- ``GOVERNOR_STATE_DIR``: journals of original device state and device locks
  (default ``$XDG_STATE_HOME/governor``, i.e. ``~/.local/state/governor``);
- ``GOVERNOR_DATA_DIR``: profiles written by calibration
  (default ``$XDG_DATA_HOME/governor``, i.e. ``~/.local/share/governor``);
- ``GOVERNOR_PROFILES_DIR``: the shipped profiles and board catalog (default: the copy inside
  the installed package, or ``profiles/`` of a source checkout).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["data_dir", "shipped_profiles_dir", "state_dir"]


def _xdg(var: str, fallback: str) -> Path:
    base = os.environ.get(var)
    return Path(base) if base else Path.home() / fallback


def state_dir() -> Path:
    """Directory for journals and locks (not created here)."""
    env = os.environ.get("GOVERNOR_STATE_DIR")
    return Path(env) if env else _xdg("XDG_STATE_HOME", ".local/state") / "governor"


def data_dir() -> Path:
    """Directory for the user's calibration profiles (not created here)."""
    env = os.environ.get("GOVERNOR_DATA_DIR")
    return Path(env) if env else _xdg("XDG_DATA_HOME", ".local/share") / "governor"


def shipped_profiles_dir() -> Path:
    """The read-only ``profiles/`` folder that ships with governor."""
    env = os.environ.get("GOVERNOR_PROFILES_DIR")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent
    installed = here / "_shipped_profiles"  # wheel: force-included by pyproject.toml
    if installed.is_dir():
        return installed
    return here.parent / "profiles"  # source checkout or editable install
