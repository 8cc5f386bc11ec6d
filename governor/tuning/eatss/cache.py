"""Chosen tiles kept in a board's profile, and the clock to run them at when one is calibrated.

Tiles live in the profile's tuning section ``tiles`` under the key ``KERNEL/PRECISION``
(:func:`cache_key`), so a robotics app asks for ``cached_tiles("gemm")`` on the board it runs
on and gets the loop -> tile mapping chosen offline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional

from governor.errors import DeviceNotFoundError, GovernorError, InvalidRequestError

__all__ = ["SECTION", "cache_key", "cached_tiles", "clock_note", "current_board", "save_tiles"]

SECTION = "tiles"


def cache_key(kernel: str, precision: str = "double") -> str:
    """The profile key of a kernel's tiles: ``KERNEL/PRECISION``."""
    if precision not in ("single", "double"):
        raise InvalidRequestError(f"precision must be single or double, not {precision!r}")
    return f"{kernel}/{precision}"


def current_board() -> str:
    """The catalog name of the board governor finds on this machine.

    Raises:
        DeviceNotFoundError: no device could be opened or it has no catalog name.
    """
    try:
        import governor

        with governor.open_device("auto") as dev:
            model = dev.identity.model
    except GovernorError as err:
        raise DeviceNotFoundError(f"no board given and none detected ({err})") from err
    except (ImportError, AttributeError) as err:
        raise DeviceNotFoundError("no board given and device detection is not available") from err
    if not model:
        raise DeviceNotFoundError("no board given and the detected device has no catalog name")
    return str(model)


def save_tiles(result: Any, board: str) -> Path:
    """Store a feasible :class:`~governor.tuning.eatss.TileResult` in ``board``'s profile.

    Returns the profile path written.

    Raises:
        InvalidRequestError: the result has no tiles.
        ProfileError: bad board name or unreadable existing profile.
    """
    from governor.profiles.store import put_tuning

    if not getattr(result, "feasible", False):
        raise InvalidRequestError(f"no tiles to save for {result.kernel}: {result.reason}")
    value = {
        "tiles": dict(result.tiles),
        "objective": result.objective,
        "gpu": result.gpu,
        "shared_fraction": result.shared_fraction,
        "warp_fraction": result.warp_fraction,
        "precision": result.precision,
        "bound": result.bound,
    }
    return put_tuning(board, SECTION, cache_key(result.kernel, result.precision), value)


def cached_tiles(
    kernel: str, board: Optional[str] = None, precision: str = "double"
) -> Optional[Dict[str, int]]:
    """The tiles saved for ``kernel`` on ``board`` (default: the detected board), or None.

    Raises:
        DeviceNotFoundError: no board given and none detected.
        ProfileError: the profile is unreadable.
    """
    from governor.profiles.store import get_tuning

    entry = get_tuning(board or current_board(), SECTION, cache_key(kernel, precision))
    if not isinstance(entry, dict) or not isinstance(entry.get("tiles"), dict):
        return None
    return {str(k): int(v) for k, v in entry["tiles"].items()}


def clock_note(board: str) -> Dict[str, Any]:
    """The performance-per-watt optimal GPU clock of ``board`` if a calibrated profile has one.

    Returns ``{"board", "ppw_optimal_clock_mhz": float | None, "note": str}``; a missing
    profile (or a name that cannot be a board's, such as a GPU spec) is reported in the note.

    Raises:
        ProfileError: the board's profile exists but is unreadable or malformed.
    """
    from governor.errors import ProfileError
    from governor.profiles.store import profile_paths, read_profile_file

    clock: Optional[float] = None
    source = None
    try:
        paths = profile_paths(board)
    except ProfileError as err:
        return {
            "board": board,
            "ppw_optimal_clock_mhz": None,
            "note": f"no calibrated model ({err})",
        }
    for path in paths:
        if path.exists():
            value = read_profile_file(path).get("ppw_optimal_clock_mhz")
            if value is not None:
                clock, source = float(value), path
            break
    if clock is None:
        note = f"no calibrated power model for {board}"
    else:
        note = f"run at {clock:g} MHz, the performance-per-watt optimum of {board} ({source})"
    return {"board": board, "ppw_optimal_clock_mhz": clock, "note": note}
