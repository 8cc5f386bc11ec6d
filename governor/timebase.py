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
    """Simulated time that moves only when someone sleeps on it (thread-safe)."""

    virtual = True

    def __init__(self, start_s: float = 0.0) -> None:
        self._now_s = float(start_s)
        self._lock = threading.Lock()

    def now_s(self) -> float:
        with self._lock:
            return self._now_s

    def sleep(self, duration_s: float) -> None:
        if duration_s < 0:
            raise ValueError(f"cannot sleep a negative time ({duration_s} s)")
        with self._lock:
            self._now_s += float(duration_s)

    advance = sleep
