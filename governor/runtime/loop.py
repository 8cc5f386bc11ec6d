"""The governor's background thread: a control step every period on the device's clock."""

from __future__ import annotations

import threading
from typing import Callable, Optional

from governor.devices.base import Device

__all__ = ["BackgroundLoop"]


class BackgroundLoop:
    """Calls ``step`` every ``interval_s`` of ``device``'s clock in a daemon thread, from
    :meth:`start` to :meth:`stop`; a step that raises is reported to ``failed`` (its error
    text) and the loop goes on. On a virtual clock it polls every 5 ms of wall time."""

    def __init__(
        self,
        device: Device,
        interval_s: float,
        step: Callable[[], None],
        failed: Callable[[str], None],
    ) -> None:
        self.device = device
        self.interval_s = interval_s
        self._step = step
        self._failed = failed
        self._thread: Optional[threading.Thread] = None
        self._stop = threading.Event()

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, name=f"governor {self.device.uri}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """End the thread and wait for it (safe to repeat)."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            thread.join()

    def _run(self) -> None:
        clock = self.device.clock
        interval = self.interval_s
        due = clock.now_s() + interval
        wait = 0.005 if clock.virtual else interval
        while not self._stop.is_set():
            now = clock.now_s()
            if now >= due - 1e-9:
                try:
                    self._step()
                except Exception as err:  # the loop must outlive one bad period
                    self._failed(f"control step failed: {type(err).__name__}: {err}")
                due = max(due + interval, now + interval * 0.5)
                wait_s = 0.005 if clock.virtual else max(0.0, due - clock.now_s())
            else:
                wait_s = wait if clock.virtual else max(0.0, due - now)
            self._stop.wait(wait_s)
