"""Time sources: the wall clock on hardware, a virtual clock on simulated boards.

Every piece of code that waits or time-stamps takes one of these instead of calling
``time`` directly, so a simulated calibration that spans minutes of device time runs in
milliseconds in tests. Times are seconds (``*_s``) from an arbitrary origin.

This module sits below the device layer (the simulated device owns a virtual clock), which is
why it is not in ``measure/`` as the design sketch first placed it.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any, List

__all__ = ["Clock", "VirtualClock", "WallClock"]


class Clock:
    """Interface: ``now_s()`` and ``sleep(duration_s)``."""

    virtual = False

    def now_s(self) -> float:  # pragma: no cover - interface
        raise NotImplementedError

    def sleep(self, duration_s: float) -> None:  # pragma: no cover - interface
        raise NotImplementedError


class WallClock(Clock):
    """Monotonic wall time; ``sleep`` really sleeps."""

    def now_s(self) -> float:
        return time.monotonic()

    def sleep(self, duration_s: float) -> None:
        if duration_s > 0:
            time.sleep(duration_s)


class VirtualClock(Clock):
    """Simulated time that moves only when someone sleeps on it (thread-safe).

    Watchers (an energy meter with a window open: there is no sampler thread on virtual
    time) are told before a sleep and after every ``step_s`` of it, the smallest step any
    watcher asks for, so whatever advances the clock feeds them as a thread would."""

    virtual = True

    def __init__(self, start_s: float = 0.0) -> None:
        self._now_s = float(start_s)
        self._lock = threading.Lock()
        self._watchers: List[Any] = []  # (weak method, step_s)

    def now_s(self) -> float:
        with self._lock:
            return self._now_s

    def watch(self, method: Any, step_s: float) -> None:
        """Call the bound ``method()`` before each sleep and after every ``step_s`` of it
        (held weakly: a watcher that is gone is dropped)."""
        with self._lock:
            self._watchers.append((weakref.WeakMethod(method), float(step_s)))

    def unwatch(self, method: Any) -> None:
        with self._lock:
            self._watchers = [(w, s) for w, s in self._watchers if w() not in (None, method)]

    def _calls(self) -> List[Any]:
        with self._lock:
            live = [(w(), s) for w, s in self._watchers]
        return [(m, s) for m, s in live if m is not None]

    def sleep(self, duration_s: float) -> None:
        if duration_s < 0:
            raise ValueError(f"cannot sleep a negative time ({duration_s} s)")
        calls = self._calls() if self._watchers else []
        if not calls:
            with self._lock:
                self._now_s += float(duration_s)
            return
        step_s = min(s for _m, s in calls)
        left = float(duration_s)
        with self._lock:
            end_s = self._now_s + left  # where one sleep of the whole time would end
        for method, _s in calls:  # the state before the sleep (a clock just changed)
            method()
        while left > 0:
            chunk = min(step_s, left)
            left = left - chunk if left - chunk > 1e-12 else 0.0
            with self._lock:
                self._now_s += chunk
                if not left and abs(self._now_s - end_s) < 1e-9:
                    self._now_s = end_s  # the same time as unwatched, to the last bit
            for method, _s in calls:
                method()

    advance = sleep
