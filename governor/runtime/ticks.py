"""The app's ticks on their way from ``gov.tick()`` (any thread) to the control step."""

from __future__ import annotations

import threading
from typing import List

from governor.runtime.controller_base import Tick

__all__ = ["TickQueue"]


class TickQueue:
    """Ticks reported and not yet taken by a control step, under one lock (``lock``, which
    ``gov.admit()`` shares so that apps calling from several threads share one credit).
    Kept to ``LIMIT`` ticks: past it, nobody is consuming them (the governor is not
    started) and the older half is dropped."""

    LIMIT = 100000

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._ticks: List[Tick] = []

    def add(self, tick: Tick) -> None:
        with self.lock:
            self._ticks.append(tick)
            if len(self._ticks) > self.LIMIT:
                del self._ticks[: self.LIMIT // 2]

    def take(self) -> List[Tick]:
        """Every tick reported so far, oldest first; the queue is left empty."""
        with self.lock:
            ticks, self._ticks = self._ticks, []
        return ticks

    def put_back(self, ticks: List[Tick]) -> None:
        """Return ``ticks`` (taken by :meth:`take`) ahead of those reported since."""
        with self.lock:
            self._ticks[:0] = ticks

    def clear(self) -> None:
        with self.lock:
            self._ticks = []
