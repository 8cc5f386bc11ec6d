"""Loads: the work calibration runs while it measures.

A load runs continuously between ``start()`` and ``stop()`` and counts the units of work it
has finished (``work_done()``); calibration divides time by work to get time per unit. Kinds:

- :class:`SimLoad` runs one of a simulated board's workloads (``compute``, ``memory``...);
- :class:`CommandLoad` runs the user's command over and over; one run is one unit of work;
- CuPy kernels on NVIDIA GPUs live in ``governor.calibrate.cuda_loads``.

:func:`make_load` turns ``--load builtin|memory|"CMD"`` into the right load for a device.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import threading
from typing import Optional

from governor.devices.base import Device
from governor.errors import CalibrationError, InvalidRequestError, UnsupportedError

__all__ = ["CommandLoad", "Load", "LoadFailed", "SimLoad", "ThreadedLoad", "make_load"]


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


class SimLoad(Load):
    """A simulated board's workload; work advances with the board's (virtual) time."""

    def __init__(self, device: Device, workload: str, kind: str = "builtin") -> None:
        if not hasattr(device, "run_workload"):
            raise UnsupportedError(f"{device.uri} is not a simulated board")
        self.device = device
        self.name = workload
        self.kind = kind
        device.workloads()  # type: ignore[attr-defined]
        if workload not in device.workloads():  # type: ignore[attr-defined]
            raise InvalidRequestError(
                f"unknown workload {workload!r} on {device.uri}; known: {', '.join(device.workloads())}"  # type: ignore[attr-defined]
            )

    def start(self) -> None:
        self.device.run_workload(self.name)  # type: ignore[attr-defined]

    def stop(self) -> None:
        self.device.stop_workload()  # type: ignore[attr-defined]

    def work_done(self) -> float:
        return self.device.work_done()  # type: ignore[attr-defined]


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

    def _context(self):
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


class LoadFailed(Exception):
    """Raised inside a load's thread to stop it with a one-line reason."""


class CommandLoad(ThreadedLoad):
    """The user's command, run back to back; one run = one unit of work."""

    kind = "command"

    def __init__(self, command: str) -> None:
        argv = shlex.split(command)
        if not argv:
            raise InvalidRequestError("--load command is empty")
        super().__init__()
        self.argv = argv
        self.name = command

    def _run_once(self) -> None:
        try:
            proc = subprocess.run(
                self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=os.environ.copy()
            )
        except OSError as err:
            raise LoadFailed(f"cannot run {self.argv[0]!r}: {err.strerror or err}") from err
        if proc.returncode != 0:
            tail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
            raise LoadFailed(f"load command exited with {proc.returncode}: {tail[0]}")


def make_load(device: Device, spec: str) -> Load:
    """The load for ``--load SPEC`` on ``device``: builtin, memory, or a shell-style command.

    Raises:
        UnsupportedError: no built-in load for this kind of device.
        InvalidRequestError: empty command.
    """
    spec = (spec or "builtin").strip()
    if spec in ("builtin", "compute", "memory"):
        kind = "memory" if spec == "memory" else "builtin"
        if hasattr(device, "run_workload"):
            return SimLoad(device, "memory" if kind == "memory" else "compute", kind)
        if device.identity.kind in ("nvml", "jetson", "jtop", "tegrastats"):
            from governor.calibrate import cuda_loads

            return cuda_loads.make_cuda_load(device, kind)
        raise UnsupportedError(
            f'no built-in load for {device.uri}; pass your own with --load "COMMAND"'
        )
    if spec.startswith("workload:"):
        return SimLoad(device, spec.split(":", 1)[1], "builtin")
    return CommandLoad(spec)
