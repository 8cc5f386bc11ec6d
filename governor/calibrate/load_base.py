"""What every calibration load is: the :class:`Load` interface, and :class:`ThreadedLoad`,
which runs one unit of work after another in a thread (the user's command, a CuPy kernel).

Kept apart from :mod:`governor.calibrate.loads` (which picks the load for a device) so the
CuPy loads build on it without importing the module that imports them.
"""

from __future__ import annotations

import contextlib
import threading
from typing import ContextManager, Optional

from governor.errors import CalibrationError

__all__ = ["Load", "LoadFailed", "ThreadedLoad"]


class Load:
    """Interface: ``start()``, ``stop()``, ``work_done()`` (units), ``name``, ``kind``."""

    name = "load"
    kind = "builtin"  # builtin | memory | command

    def start(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def stop(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def work_done(self) -> float:  # pragma: no cover - interface
        raise NotImplementedError

    def check(self) -> None:
        """Raise if the load has failed since it started (a command exiting non-zero...)."""

    def __enter__(self) -> Load:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class LoadFailed(Exception):
    """Raised inside a load's thread to stop it with a one-line reason."""


class ThreadedLoad(Load):
    """Runs :meth:`_run_once` back to back in a background thread; each call is one unit.

    Work is counted in whole units plus the elapsed fraction of the current one (estimated from
    the mean unit time so far), so short windows still resolve throughput. A failure stops the
    thread and is raised by :meth:`check` (and :meth:`work_done`).
    """

    def __init__(self) -> None:
        import time

        self._now = time.monotonic
        self._thread: Optional[threading.Thread] = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._units = 0
        self._unit_time_s = 0.0
        self._current_start: Optional[float] = None
        self._error: Optional[str] = None

    def _run_once(self) -> None:  # pragma: no cover - interface
        """Do one unit of work; raise :class:`LoadFailed` to stop with a message."""
        raise NotImplementedError

    def _context(self) -> ContextManager[object]:
        """A context manager held around the whole loop (a CUDA device and stream...)."""
        return contextlib.nullcontext()

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._loop, name=f"governor-{self.kind}-load", daemon=True
        )
        self._thread.start()

    def _loop(self) -> None:
        try:
            with self._context():
                while not self._stop.is_set():
                    t0 = self._now()
                    with self._lock:
                        self._current_start = t0
                    self._run_once()
                    with self._lock:
                        self._units += 1
                        self._unit_time_s += self._now() - t0
                        self._current_start = None
        except LoadFailed as err:
            self._error = str(err)
        except Exception as err:  # a driver or OS error: report it through check()
            self._error = f"{self.name} failed: {err}"

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def check(self) -> None:
        if self._error:
            raise CalibrationError(self._error)

    def work_done(self) -> float:
        self.check()
        with self._lock:
            done = float(self._units)
            if self._current_start is not None and self._units:
                mean = self._unit_time_s / self._units
                done += min(0.999, (self._now() - self._current_start) / mean)
            return done
