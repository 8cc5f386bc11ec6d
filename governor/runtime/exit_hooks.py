"""The governor's way out when its owner forgets: an ``atexit`` hook that stops it, and
SIGTERM turned into ``SystemExit`` (when SIGTERM was left at its default, and only on the main
thread) so a ``kill`` unwinds through the restore like Ctrl-C does."""

from __future__ import annotations

import atexit
import signal
import threading
from typing import Any, Callable

__all__ = ["ExitHooks"]


def _sigterm_to_exit(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


class ExitHooks:
    """Installs and removes the hooks for one governor's ``stop``."""

    def __init__(self, stop: Callable[[], Any], handle_signals: bool) -> None:
        self.stop = stop
        self.handle_signals = handle_signals
        self._old_sigterm: Any = None
        self._atexit = False

    def install(self) -> None:
        if not self._atexit:
            atexit.register(self.stop)
            self._atexit = True
        if self.handle_signals and threading.current_thread() is threading.main_thread():
            try:
                if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
                    self._old_sigterm = signal.signal(signal.SIGTERM, _sigterm_to_exit)
            except (ValueError, OSError):  # pragma: no cover - not the main interpreter
                self._old_sigterm = None

    def remove(self) -> None:
        if self._atexit:
            atexit.unregister(self.stop)
            self._atexit = False
        if self._old_sigterm is not None and threading.current_thread() is threading.main_thread():
            try:
                if signal.getsignal(signal.SIGTERM) is _sigterm_to_exit:
                    signal.signal(signal.SIGTERM, self._old_sigterm)
            except (ValueError, OSError):  # pragma: no cover
                pass
            self._old_sigterm = None
