"""governor: more GPU work per joule on NVIDIA Jetson boards and datacenter GPUs.

Importing this package is cheap: it loads none of numpy, scipy, rich, pynvml, jtop or cupy.
Public names are resolved on first use (PEP 562), so ``import governor`` on a Jetson costs
milliseconds and ``governor.open_device`` pulls in only what the chosen backend needs.

    >>> import governor
    >>> with governor.open_device("sim:agx-orin") as dev:
    ...     sample = dev.sample()
"""

from __future__ import annotations

import importlib
from typing import Any

from governor._version import __version__

# public name -> module that defines it
_LAZY = {
    "open_device": "governor.devices.registry",
    "list_devices": "governor.devices.registry",
    "simulated_boards": "governor.devices.registry",
    "Device": "governor.devices.base",
    "Capabilities": "governor.devices.base",
    "Sample": "governor.devices.base",
    "Rail": "governor.devices.base",
    "Identity": "governor.devices.base",
    "DeviceState": "governor.devices.base",
    "EnergyMeter": "governor.measure.energy",
    "EnergyWindow": "governor.measure.energy",
    "energy_meter": "governor.measure.energy",
    "measure_energy": "governor.measure.energy",
    "GovernorError": "governor.errors",
    "DeviceNotFoundError": "governor.errors",
    "UnsupportedError": "governor.errors",
    "DevicePermissionError": "governor.errors",
    "InvalidRequestError": "governor.errors",
    "TelemetryError": "governor.errors",
    "ProfileError": "governor.errors",
    "CalibrationError": "governor.errors",
    "DeviceBusyError": "governor.errors",
}

__all__ = ["__version__", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'governor' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(_LAZY))
