"""NVML errors sorted once, where they enter: transient ones are tried again, a lost GPU is
said at once.

- **transient** (``Timeout``, ``NotReady``, ``InUse``, ``IrqIssue``, ``NoData``,
  ``InsufficientResources``, ``Unknown``): a busy or flaky driver. The call is tried again up
  to :data:`ATTEMPTS` times in all, waiting :data:`FIRST_WAIT_S` and then twice as long each
  time (35 ms at most in all, well inside a control period); each retry is counted.
- **lost** (``GpuIsLost``, ``ResetRequired``, ``GpuNotFound``): the GPU fell off the bus or
  needs a reset. Nothing will work on it until it is back, so the call fails at once with
  :class:`~governor.errors.DeviceLostError`, one line naming the GPU and the error.
- **permanent** (``NotSupported``, ``NoPermission``, ``InvalidArgument`` and the rest): the
  caller's own translation (a missing capability, how to get the right, a bad argument).

Classified by the error's code (``err.value``), which nvml.h fixes, so an older binding that
lacks a class name still sorts its errors.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict

from governor.errors import DeviceLostError

__all__ = ["ATTEMPTS", "FaultCounter", "call_nvml", "kind_of"]

TRANSIENT_CODES = frozenset({10, 11, 19, 21, 23, 27, 999})
LOST_CODES = frozenset({15, 16, 28})

ATTEMPTS = 4
FIRST_WAIT_S = 0.005


def kind_of(err: BaseException) -> str:
    """``transient``, ``lost`` or ``permanent`` for an NVML error."""
    code = getattr(err, "value", None)  # NVMLError's return code
    if code in LOST_CODES:
        return "lost"
    if code in TRANSIENT_CODES:
        return "transient"
    return "permanent"


class FaultCounter:
    """Transient errors absorbed by one device's calls."""

    def __init__(self) -> None:
        self.retries = 0
        self.failures = 0

    def to_dict(self) -> Dict[str, int]:
        return {"transient_retries": self.retries, "transient_failures": self.failures}


def call_nvml(
    nv: Any,
    where: str,
    counter: FaultCounter,
    fn: Callable[..., Any],
    *args: Any,
    sleep: Callable[[float], None] = time.sleep,
) -> Any:
    """``fn(*args)``, tried again on transient errors (see the module docstring).

    Raises:
        DeviceLostError: the GPU ``where`` is lost or needs a reset.
        nv.NVMLError: a permanent error, or a transient one that outlasted the retries.
    """
    wait_s = FIRST_WAIT_S
    for attempt in range(ATTEMPTS):
        try:
            return fn(*args)
        except nv.NVMLError as err:
            kind = kind_of(err)
            if kind == "lost":
                name = getattr(fn, "__name__", "call")
                raise DeviceLostError(
                    f"{where}: the GPU is lost (NVML {name}: {err}); it needs to come back on "
                    "the bus or be reset before governor can read or change it"
                ) from err
            if kind == "permanent" or attempt == ATTEMPTS - 1:
                if kind == "transient":
                    counter.failures += 1
                raise
            counter.retries += 1
            sleep(wait_s)
            wait_s *= 2
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises
