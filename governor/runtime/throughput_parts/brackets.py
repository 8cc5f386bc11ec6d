"""Comparisons of neighbouring clocks, each measured between two windows of the held clock.

A neighbour (the probe) is measured between two windows at ``home``, so that the board's
warming in between cancels and the two are compared at one temperature. :class:`PairBook`
keeps the mean of the comparisons made lately for each pair of clocks; :func:`verdict`
says whether a neighbour is cheaper, dearer, or not told apart yet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

__all__ = ["Bracket", "Pair", "PairBook", "verdict"]

#: a neighbour bracketed once whose cost differs by more than this share is cheaper or dearer
BRACKET_NOISE = 0.001
#: a neighbour within the noise is bracketed again, up to this many times
BRACKETS = 4


@dataclass
class Bracket:
    """A bracket in progress: ``probe`` measured from ``home``, whose window before the
    probe cost ``home_w``; ``probe_w`` the probe's window once taken."""

    home: int
    home_w: float
    probe: int
    probe_w: float = 0.0


@dataclass(frozen=True)
class Pair:
    """The mean of ``brackets`` comparisons of one clock's cost over another's, ``ratio``,
    the latest made at ``when_s``."""

    ratio: float
    when_s: float
    brackets: int


class PairBook:
    """The bracketed comparisons made lately, kept both ways round: ``(a, b)`` holds a's
    cost over b's. A comparison older than ``stale_s`` is forgotten when a new one comes."""

    def __init__(self, stale_s: float) -> None:
        self.stale_s = stale_s
        self.pairs: Dict[Tuple[int, int], Pair] = {}

    def add(self, probe: int, home: int, ratio: float, now_s: float) -> None:
        """Add a comparison: ``probe``'s cost over ``home``'s is ``ratio``."""
        for key, value in (((probe, home), ratio), ((home, probe), 1.0 / ratio)):
            old = self.pairs.get(key)
            if old is None or now_s - old.when_s > self.stale_s:
                self.pairs[key] = Pair(value, now_s, 1)
            else:
                n = old.brackets + 1
                self.pairs[key] = Pair(old.ratio + (value - old.ratio) / n, now_s, n)

    def recent(self, i: int, home: int, now_s: float) -> Optional[Pair]:
        """The mean comparison of ``i`` over ``home``, if one was made within ``stale_s``."""
        pair = self.pairs.get((i, home))
        if pair is not None and now_s - pair.when_s <= self.stale_s:
            return pair
        return None


def noise_band(brackets: int) -> float:
    """The noise of the mean of ``brackets`` comparisons (independent: the warming cancels
    in each), as a share of the cost."""
    return BRACKET_NOISE / math.sqrt(brackets)


def verdict(ratio: float, brackets: int) -> int:
    """A neighbour's mean bracketed cost over this clock's, ``ratio``, after ``brackets``
    comparisons: -1 cheaper, 1 dearer, 0 not told apart yet (within :func:`noise_band`).
    After ``BRACKETS`` the mean's side decides: the two are then within the mean's noise of
    each other, and holding either costs at most that."""
    band = noise_band(brackets)
    if ratio < 1.0 - band:
        return -1
    if ratio > 1.0 + band:
        return 1
    if brackets >= BRACKETS:
        return -1 if ratio < 1.0 else 1
    return 0
