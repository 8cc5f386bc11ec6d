"""Loads: the work calibration runs while it measures.

A load runs continuously between ``start()`` and ``stop()`` and counts the units of work it
has finished (``work_done()``); calibration divides time by work to get time per unit. Kinds:

- :class:`SimLoad` runs one of a simulated board's workloads (``compute``, ``memory``...);
- :class:`CommandLoad` runs the user's command over and over; one run is one unit of work;
- CuPy kernels on NVIDIA GPUs live in ``governor.calibrate.cuda_loads``.

:func:`make_load` turns ``--load builtin|memory|"CMD"`` into the right load for a device.
"""

from __future__ import annotations

import os
import shlex
import subprocess

from governor.calibrate.load_base import Load, LoadFailed, ThreadedLoad
from governor.devices.base import Device, WorkloadDevice
from governor.errors import InvalidRequestError, UnsupportedError

__all__ = ["CommandLoad", "Load", "LoadFailed", "SimLoad", "ThreadedLoad", "make_load"]


class SimLoad(Load):
    """A simulated board's workload; work advances with the board's (virtual) time."""

    def __init__(self, device: Device, workload: str, kind: str = "builtin") -> None:
        if not isinstance(device, WorkloadDevice):
            raise UnsupportedError(f"{device.uri} is not a simulated board")
        self.device = device
        self.name = workload
        self.kind = kind
        known = device.workloads()
        if workload not in known:
            raise InvalidRequestError(
                f"unknown workload {workload!r} on {device.uri}; known: {', '.join(known)}"
            )

    def start(self) -> None:
        self.device.run_workload(self.name)

    def stop(self) -> None:
        self.device.stop_workload()

    def work_done(self) -> float:
        return self.device.work_done()


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
        if isinstance(device, WorkloadDevice):
            return SimLoad(device, "memory" if kind == "memory" else "compute", kind)
        if device.identity.kind in ("nvml", "jetson", "jtop", "tegrastats"):
            from governor.calibrate import cuda_loads

            return cuda_loads.make_cuda_load(device, kind)
        raise UnsupportedError(
            f'no built-in load for {device.uri}; pass your own with --load "COMMAND"'
        )
    if spec.startswith("workload:"):
        return SimLoad(device, spec.split(":", 1)[1], "builtin")
    _check_command(spec)
    return CommandLoad(spec)


def _check_command(spec: str) -> None:
    """Refuse a command load whose program cannot be found, before any probe: a typo of a
    built-in load (``memroy``) reads as a command and would fail only once it runs."""
    import shutil

    from governor.names import did_you_mean

    try:
        argv = shlex.split(spec)
    except ValueError as err:
        raise InvalidRequestError(f"--load {spec!r}: {err}") from None
    if not argv or "/" in argv[0] or shutil.which(argv[0]) is not None:
        return
    hint = did_you_mean(argv[0], ("builtin", "compute", "memory")) if len(argv) == 1 else ""
    raise InvalidRequestError(
        f"unknown load {spec!r}{hint or ';'} --load takes builtin, memory, workload:NAME (a "
        f"simulated board's) or a command, and {argv[0]!r} is no program on PATH"
    )
