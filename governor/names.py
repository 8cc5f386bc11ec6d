"""Close names for an error message: "did you mean agx-orin?".

Used wherever a name is looked up in a fixed table (boards, GPUs, kernels, device schemes),
so every such error suggests the same way.
"""

from __future__ import annotations

import difflib
from typing import Iterable, List

__all__ = ["close_names", "did_you_mean"]


def close_names(name: str, choices: Iterable[str], limit: int = 3) -> List[str]:
    """The choices closest to ``name``: those that contain it or that it contains (a short
    spelling such as ``orin`` or ``xavier-nx-16gb``), then near spellings (``xavier_nx``,
    ``agx-orni``); at most ``limit``, the closest first."""
    wanted = _plain(name)
    options = sorted(set(choices))
    if not wanted:
        return []
    exact = [option for option in options if _plain(option) == wanted]
    if exact:  # only the spelling differs (xavier_nx, AGX-Orin)
        return exact[:limit]
    scored = []
    for option in options:
        plain = _plain(option)
        ratio = difflib.SequenceMatcher(None, wanted, plain).ratio()
        if wanted in plain or plain in wanted:
            ratio += 1.0
        if ratio >= 0.6:
            scored.append((-ratio, option))
    return [option for _, option in sorted(scored)[:limit]]


def did_you_mean(name: str, choices: Iterable[str], prefix: str = "") -> str:
    """``"; did you mean sim:orin-nano or sim:orin-nx?"`` or "" when nothing is close."""
    found = [prefix + option for option in close_names(name, choices)]
    if not found:
        return ""
    said = found[0] if len(found) == 1 else ", ".join(found[:-1]) + " or " + found[-1]
    return f"; did you mean {said}?"


def _plain(text: str) -> str:
    return "".join(ch for ch in str(text).lower() if ch.isalnum())
