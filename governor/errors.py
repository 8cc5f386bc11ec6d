"""The errors governor raises, in one small tree.

Each class also inherits the Python exception a caller would naturally catch, so code that
knows nothing of governor still does the right thing::

    GovernorError(Exception)
    ├── DeviceNotFoundError(GovernorError, LookupError)      unknown URI, board or GPU
    ├── UnsupportedError(GovernorError, NotImplementedError) the device cannot do that
    ├── DevicePermissionError(GovernorError, PermissionError) says how to get the right
    ├── InvalidRequestError(GovernorError, ValueError)       a bad argument (clock, watts, ...)
    ├── TelemetryError(GovernorError, OSError)               a sensor read failed
    │   └── DeviceLostError(TelemetryError)                  the GPU is gone (off the bus, needs
    │       │                                                a reset): reads and writes both fail
    │       └── DeviceNotRespondingError(DeviceLostError)    a call missed its deadline (a wedged
    │                                                        driver); retried in the background
    ├── ProfileError(GovernorError, ValueError)              bad or mismatched profile (has .path)
    ├── CalibrationError(GovernorError, RuntimeError)        a fit or procedure failed (has .data)
    └── DeviceBusyError(GovernorError, RuntimeError)         another governor holds the device

Vendor errors (pynvml, OSError from sysfs) are translated where they enter, with
``raise ... from err``; nothing above the device layer sees them.
"""

from __future__ import annotations

from typing import Any, Optional

__all__ = [
    "CalibrationError",
    "DeviceBusyError",
    "DeviceLostError",
    "DeviceNotFoundError",
    "DeviceNotRespondingError",
    "DevicePermissionError",
    "GovernorError",
    "InvalidRequestError",
    "ProfileError",
    "TelemetryError",
    "UnsupportedError",
]


class GovernorError(Exception):
    """Base of every error governor raises on purpose; its text is one line for users."""


class DeviceNotFoundError(GovernorError, LookupError):
    """No device, board or GPU answers to that name."""


class UnsupportedError(GovernorError, NotImplementedError):
    """The device cannot do this (a missing capability, not a failure)."""


class DevicePermissionError(GovernorError, PermissionError):
    """The operating system refused a change; the message says how to get the right."""


class InvalidRequestError(GovernorError, ValueError):
    """An argument is out of range or malformed (a clock not supported, negative watts...)."""


class TelemetryError(GovernorError, OSError):
    """A sensor could not be read."""


class DeviceLostError(TelemetryError):
    """The device stopped answering for good (an NVML GPU lost or needing a reset): no read
    or write will work until it is back, so callers stop using it instead of retrying."""


class DeviceNotRespondingError(DeviceLostError):
    """A call on the device did not answer within its deadline (a wedged driver, a stalled
    power monitor): calls fail at once until a background probe gets an answer again."""


class ProfileError(GovernorError, ValueError):
    """A profile is unreadable, corrupt, or belongs to another board."""

    def __init__(self, message: str, path: Optional[object] = None) -> None:
        super().__init__(message if path is None else f"{message} ({path})")
        self.path = path


class CalibrationError(GovernorError, RuntimeError):
    """Calibration could not produce a trustworthy result; ``data`` keeps what was measured."""

    def __init__(self, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.data = data


class DeviceBusyError(GovernorError, RuntimeError):
    """Another governor process holds this device."""
