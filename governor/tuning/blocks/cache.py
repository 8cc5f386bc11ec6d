"""Block-size choices in the board's profile, and the calibrated clock to start from.

Choices live under ``{"tuning": {"blocks": {KEY: VALUE}}}`` of the board's profile (next to
the tile choices), written with :func:`governor.profiles.store.put_tuning`. A calibrated
profile's top-level ``ppw_optimal_clock_mhz`` is where the energy procedures start their
clock walk instead of the top clock.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional, Sequence

from governor.profiles.store import get_tuning, profile_paths, put_tuning, read_profile_file

__all__ = ["choice_key", "load_choice", "ppw_start_clock_mhz", "save_choice"]

SECTION = "blocks"


def ppw_start_clock_mhz(board: str) -> Optional[float]:
    """The calibrated PPW-optimal clock (MHz) of ``board``'s profile, or None if there is none.

    Raises:
        ProfileError: the profile exists but is unreadable or malformed.
    """
    for path in profile_paths(board):
        if path.exists():
            value = read_profile_file(path).get("ppw_optimal_clock_mhz")
            return None if value is None else float(value)  # checked: positive, finite
    return None


def choice_key(kernels: Sequence[str], objective: str) -> str:
    """``vector-add@energy``; concurrent kernels joined with ``+`` in their given order."""
    return "+".join(kernels) + "@" + objective


def save_choice(board: str, key: str, result: Any, extra: Optional[Dict[str, Any]] = None) -> Path:
    """Store a :class:`~governor.tuning.blocks.procedures.TuneResult` under ``key``."""
    value = result.to_dict()
    value.update(extra or {})
    return put_tuning(board, SECTION, key, value)


def load_choice(board: str, key: str) -> Optional[Dict[str, Any]]:
    return get_tuning(board, SECTION, key)
