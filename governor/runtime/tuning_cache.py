"""The tuning choices made offline and kept in the board's profile, as the running
governor hands them to the app: tiles (``governor tiles --save``), thread-block sizes
(``governor tune-blocks``), and the PPW clock an earlier run found online."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterator, Mapping, Optional

from governor.devices.base import Device
from governor.errors import GovernorError

__all__ = [
    "Cached",
    "cached_block_size_for",
    "cached_tiles_for",
    "keep_online_ppw",
    "load_online_ppw",
    "save_online_ppw",
]


class Cached:
    """A cached tuning choice: ``value`` (None when there is none) and ``reason``.

    Unpacks as ``value, reason = gov.tiles("gemm")`` and is truthy when there is a value.
    """

    __slots__ = ("reason", "value")

    def __init__(self, value: Any, reason: str) -> None:
        self.value = value
        self.reason = reason

    def __iter__(self) -> Iterator[Any]:
        return iter((self.value, self.reason))

    def __bool__(self) -> bool:
        return self.value is not None

    def __repr__(self) -> str:
        return f"Cached({self.value!r}, {self.reason!r})"


def cached_tiles_for(device: Device, kernel: str, precision: str = "double") -> Cached:
    """The tiles chosen offline (``governor tiles --save``) for ``kernel`` on ``device``'s
    board."""
    from governor.profiles.profile import board_key
    from governor.tuning.eatss.cache import cached_tiles, save_command

    board = board_key(device)
    try:
        value = cached_tiles(kernel, board=board, precision=precision)
    except GovernorError as err:
        return Cached(None, f"tile cache unreadable: {err}")
    if value is None:
        command = save_command(kernel, board, precision, device.uri)
        return Cached(
            None, f"no tiles cached for {kernel}/{precision} on {board} (run '{command}')"
        )
    return Cached(value, f"cached for {board}")


def cached_block_size_for(device: Device, kernel: str, objective: str = "energy") -> Cached:
    """The thread-block size chosen offline (``governor tune-blocks``) for ``kernel`` on
    ``device``'s board."""
    from governor.profiles.profile import board_key
    from governor.tuning.blocks.cache import choice_key, load_choice

    board = board_key(device)
    key = kernel if "@" in kernel else choice_key([kernel], objective)
    try:
        entry = load_choice(board, key)
    except GovernorError as err:
        return Cached(None, f"block cache unreadable: {err}")
    if not isinstance(entry, dict) or not entry.get("blocks"):
        return Cached(
            None, f"no block size cached for {key} on {board} (run 'governor tune-blocks')"
        )
    blocks = [tuple(int(x) for x in b) for b in entry["blocks"]]
    value: Any = blocks[0] if len(blocks) == 1 else blocks
    clock = entry.get("clock_mhz")
    note = f" at {clock:g} MHz" if isinstance(clock, (int, float)) else ""
    return Cached(value, f"cached for {board}{note}")


def load_online_ppw(device: Device, workload: Optional[str]) -> Optional[Dict[str, Any]]:
    """The PPW clock an earlier run found online for this board and workload (kept in the
    board's profile, ``tuning.online_ppw``), if it is one of the device's clocks; None
    otherwise (a damaged entry is ignored: it is only a cache)."""
    from governor.errors import ProfileError
    from governor.profiles.profile import board_key
    from governor.profiles.store import get_tuning

    try:
        entry = get_tuning(board_key(device), "online_ppw", workload or "builtin")
    except (ProfileError, OSError):
        return None
    if entry is None:
        return None
    try:
        clock = float(entry["clock_mhz"])
    except (ValueError, KeyError, TypeError):
        return None
    clocks = device.supported_clocks_mhz()
    if not any(abs(c - clock) <= 0.5 for c in clocks):
        return None
    return dict(entry)


def save_online_ppw(device: Device, workload: Optional[str], result: Mapping[str, Any]) -> Path:
    """Keep an online PPW result for the next run on this board: in the user's profile of
    the board (``tuning.online_ppw.<workload>``, created when there is none; atomically
    replaced). Returns the profile's path.

    Raises:
        OSError: the profile cannot be written; ProfileError: the board's profile is malformed.
    """
    import datetime

    from governor.profiles.profile import board_key
    from governor.profiles.store import put_tuning

    entry = {k: v for k, v in result.items() if v is not None}
    entry["date"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    return put_tuning(board_key(device), "online_ppw", workload or "builtin", entry)


def keep_online_ppw(device: Device, workload: Optional[str], result: Dict[str, Any]) -> str:
    """Keep a PPW clock found online in the board's profile; the line that says where (or
    why it could not be kept)."""
    try:
        path = save_online_ppw(device, workload, result)
    except (OSError, GovernorError) as err:
        return f"PPW clock {result['clock_mhz']:g} MHz found online; not kept: {err}"
    return (
        f"PPW clock {result['clock_mhz']:g} MHz found online after "
        f"{result['found_after_s']:.0f} s ({result['probes']} probes); kept in {path}"
    )
