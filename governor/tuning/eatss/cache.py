"""Chosen tiles kept in a board's profile, and the clock to run them at when one is calibrated.

Tiles live in the profile's tuning section ``tiles`` under the key ``KERNEL/PRECISION``
(:func:`cache_key`), so a robotics app asks for ``cached_tiles("gemm")`` on the board it runs
on and gets the loop -> tile mapping chosen offline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from governor.errors import DeviceNotFoundError, GovernorError, InvalidRequestError

__all__ = [
    "SECTION",
    "UnknownBoardError",
    "cache_key",
    "cached_tiles",
    "check_board",
    "clock_note",
    "current_board",
    "save_command",
    "save_tiles",
]

SECTION = "tiles"


def cache_key(kernel: str, precision: str = "double") -> str:
    """The profile key of a kernel's tiles: ``KERNEL/PRECISION``."""
    if precision not in ("single", "double"):
        raise InvalidRequestError(f"precision must be single or double, not {precision!r}")
    return f"{kernel}/{precision}"


class UnknownBoardError(InvalidRequestError):
    """A board name that is neither in the catalog nor the name of a profile on this machine
    (a GPU spec name such as ``a100``, or a typo)."""


def known_boards() -> Tuple[str, ...]:
    """The names a profile may be saved under: the catalog's boards and the boards that
    already have a profile here (a calibrated real GPU), sorted."""
    from governor.devices.sim.catalog import board_names
    from governor.profiles.profile import list_profiles

    names = set(board_names())
    names.update(str(row["board"]) for row in list_profiles())
    return tuple(sorted(names))


def check_board(name: str) -> str:
    """``name`` if it is a board the runtime can find a profile under (``sim:NAME`` is NAME).

    Raises:
        UnknownBoardError: no such board (the message lists the known ones).
    """
    from governor.names import did_you_mean

    known = known_boards()
    key = name[len("sim:") :] if name.startswith("sim:") else name  # a board's device URI
    if key not in known:
        hint = did_you_mean(key, known) or ";"
        raise UnknownBoardError(f"{name!r} is no board{hint} boards: {', '.join(known)}")
    return key


def current_board(uri: Optional[str] = None) -> str:
    """The profile name of the board ``uri`` opens (default: ``GOVERNOR_DEVICE``, else the GPU
    found on this machine), as the running governor names it.

    Raises:
        DeviceNotFoundError: no device could be opened, or no GPU was found and none was named
            (a board saved for would be a guess: the simulated default board).
    """
    import os

    uri = uri or os.environ.get("GOVERNOR_DEVICE") or None
    try:
        import governor
        from governor.devices.registry import discover_hardware
        from governor.profiles.profile import board_key

        if uri is None or uri == "auto":
            found = discover_hardware()
            if not found:
                raise DeviceNotFoundError(
                    "no GPU found on this machine: name the board (--board NAME or "
                    "--device sim:NAME)"
                )
            uri = found[0]
        with governor.open_device(uri) as dev:
            return board_key(dev)
    except DeviceNotFoundError:
        raise
    except GovernorError as err:
        raise DeviceNotFoundError(f"no board given and none detected ({err})") from err
    except (ImportError, AttributeError) as err:
        raise DeviceNotFoundError("no board given and device detection is not available") from err


def save_command(
    kernel: str, board: str, precision: str = "double", uri: Optional[str] = None
) -> str:
    """The ``governor tiles`` command that saves ``kernel``'s tiles where the runtime looks
    for them on ``board`` (opened as ``uri``)."""
    import shlex

    from governor.tuning.eatss.catalog import find_gpu

    args = ["governor", "tiles", kernel]
    if uri and board not in known_boards():
        args += ["--device", uri]
    else:
        args += ["--board", board]
    try:
        find_gpu(board)
    except GovernorError:  # no built-in resource set for this board: the user names one
        args += ["--gpu", "NAME"]
    if precision != "double":
        args += ["--precision", precision]
    return " ".join(shlex.quote(a) for a in args + ["--save"])


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
