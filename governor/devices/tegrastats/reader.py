"""A streaming reader over ``tegrastats --interval N``: a background thread parses each line
and keeps the latest sample. Works without root on every JetPack (some fields need root)."""

from __future__ import annotations

import subprocess
import threading
import time
from typing import List, Optional

from governor.devices.tegrastats.parser import TegrastatsParser, TegrastatsSample
from governor.errors import DeviceNotFoundError, TelemetryError

__all__ = ["TegrastatsReader"]


class TegrastatsReader:
    """Runs tegrastats and parses its output; use as a context manager or call ``close()``."""

    def __init__(self, executable: str, interval_ms: int = 1000) -> None:
        if interval_ms < 1:
            raise ValueError("interval_ms must be at least 1")
        self.executable = executable
        self.interval_ms = int(interval_ms)
        self.parser = TegrastatsParser()
        self._latest: Optional[TegrastatsSample] = None
        self._count = 0
        self._cond = threading.Condition()
        self._proc: Optional[subprocess.Popen] = None
        self._thread: Optional[threading.Thread] = None
        self._error: Optional[str] = None

    def start(self) -> TegrastatsReader:
        argv: List[str] = [self.executable, "--interval", str(self.interval_ms)]
        try:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                bufsize=1,
            )
        except OSError as err:
            raise DeviceNotFoundError(
                f"cannot run {self.executable}: {err.strerror or err}"
            ) from err
        self._thread = threading.Thread(target=self._pump, name="governor-tegrastats", daemon=True)
        self._thread.start()
        return self

    def _pump(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        for line in proc.stdout:
            sample = self.parser.feed(line)
            if sample is not None:
                with self._cond:
                    self._latest = sample
                    self._count += 1
                    self._cond.notify_all()
        with self._cond:
            self._error = f"tegrastats exited (status {proc.poll()})"
            self._cond.notify_all()

    @property
    def count(self) -> int:
        """Samples parsed so far."""
        with self._cond:
            return self._count

    def latest(self, timeout_s: Optional[float] = None, newer_than: int = 0) -> TegrastatsSample:
        """The newest sample (waiting up to ``timeout_s`` for sample number > ``newer_than``).

        Raises:
            TelemetryError: no sample in time, or tegrastats stopped.
        """
        if timeout_s is None:
            timeout_s = 3 * self.interval_ms / 1000.0 + 2.0
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._count <= newer_than and self._error is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            if self._latest is not None and self._count > newer_than:
                return self._latest
            if self._latest is not None and self._error is None:
                return self._latest
            raise TelemetryError(self._error or f"no tegrastats sample within {timeout_s:g} s")

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:  # pragma: no cover
                proc.kill()
                proc.wait()
        if proc is not None and proc.stdout is not None:
            proc.stdout.close()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None

    def __enter__(self) -> TegrastatsReader:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
