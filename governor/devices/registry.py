"""Opening devices by URI, and discovering what is there.

URIs: ``sim:<board>[?options]``, ``replay:<path>``, ``twin:<path>`` (a simulated board
fitted to a measured sweep), ``nvml:<index>``, ``jetson``, ``jtop``,
``tegrastats``, and ``auto`` (real hardware first, then the simulated default board, saying
so on the ``governor`` logger and in :func:`last_auto_note`).

Backends live in a name table and are imported only when a URI names them, so opening a
simulated board never imports pynvml and ``import governor`` imports nothing here.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any, Callable, Dict, List, Optional, Tuple

from governor.devices.base import Device
from governor.errors import DeviceNotFoundError, GovernorError, InvalidRequestError

__all__ = [
    "BACKENDS",
    "DeviceInfo",
    "list_devices",
    "open_device",
    "resolve_uris",
    "simulated_boards",
]

log = logging.getLogger("governor")

# scheme -> (module, opener, discoverer or None). The opener takes what follows "scheme:".
# Hardware backends add their row here; discovery order for ``auto`` follows AUTO_ORDER.
BACKENDS: Dict[str, Tuple[str, str, Optional[str]]] = {
    "sim": ("governor.devices.sim.device", "open_sim", None),
    "replay": ("governor.devices.replay", "open_replay", None),
    "twin": ("governor.devices.sim.device", "open_twin", None),
    "nvml": ("governor.devices.nvml", "open_nvml", "discover_nvml"),
    "jetson": ("governor.devices.jetson.device", "open_jetson", "discover_jetson"),
    "jtop": ("governor.devices.jtop", "open_jtop", "discover_jtop"),
    "tegrastats": ("governor.devices.tegrastats.device", "open_tegrastats", "discover_tegrastats"),
}
AUTO_ORDER: Tuple[str, ...] = (
    "nvml",
    "jetson",
    "jtop",
    "tegrastats",
)  # hardware schemes probed by ``auto``, in order

_auto_note: List[str] = []


def _resolve(scheme: str, which: int) -> Callable[..., Any]:
    module_name, opener, discover = BACKENDS[scheme]
    name = opener if which == 0 else discover
    if name is None:
        raise GovernorError(f"{scheme}: devices of this kind are not discovered, only opened")
    module = importlib.import_module(module_name)
    return getattr(module, name)


def simulated_boards() -> Tuple[str, ...]:
    """Names usable as ``sim:<name>``."""
    from governor.devices.sim.catalog import board_names

    return board_names()


def discover_hardware() -> List[str]:
    """URIs of real devices that answer, in ``auto`` order (empty on a machine without GPUs)."""
    found: List[str] = []
    for scheme in AUTO_ORDER:
        if BACKENDS[scheme][2] is None:
            continue
        try:
            found.extend(_resolve(scheme, 1)())
        except GovernorError as err:
            log.debug("discovery of %s failed: %s", scheme, err)
    return found


def last_auto_note() -> Optional[str]:
    """What ``auto`` decided the last time it fell back to a simulated board, if it did."""
    return _auto_note[-1] if _auto_note else None


def resolve_uris(spec: str) -> List[str]:
    """The device URIs a ``--device`` value names: ``all`` (every real device on this host),
    a comma-separated list, or one URI.

    Raises:
        DeviceNotFoundError: ``all`` on a host where no real device answers.
    """
    spec = (spec or "").strip()
    if spec == "all":
        found = discover_hardware()
        if not found:
            raise DeviceNotFoundError(
                "no GPU found: --device all covers the real GPUs of this host; "
                "name a simulated board instead (sim:NAME)"
            )
        return found
    uris = [part.strip() for part in spec.split(",")] if "," in spec else [spec]
    if any(not u for u in uris):
        raise InvalidRequestError(f"empty device in {spec!r}")
    return uris


def open_device(uri: str = "auto", **options: Any) -> Device:
    """Open the device named by ``uri``.

    Raises:
        DeviceNotFoundError: unknown scheme, board or device.
        InvalidRequestError: malformed URI or options.
    """
    if not isinstance(uri, str) or not uri.strip():
        raise InvalidRequestError("a device URI is required, e.g. sim:agx-orin or nvml:0")
    uri = uri.strip()
    if uri == "auto":
        hardware = discover_hardware()
        if hardware:
            return open_device(hardware[0], **options)
        from governor.devices.sim.catalog import DEFAULT_BOARD

        note = f"no GPU found: using the simulated board sim:{DEFAULT_BOARD}"
        _auto_note.append(note)
        log.info(note)
        return open_device(f"sim:{DEFAULT_BOARD}", **options)
    scheme, sep, rest = uri.partition(":")
    if scheme not in BACKENDS:
        from governor.names import did_you_mean

        known = ", ".join(sorted(BACKENDS)) + ", auto"
        hint = did_you_mean(uri, simulated_boards(), prefix="sim:") or did_you_mean(
            scheme, list(BACKENDS) + ["auto"]
        )
        raise DeviceNotFoundError(
            f"unknown device {uri!r}{hint or ';'} device URIs start with {known}"
        )
    try:
        opener = _resolve(scheme, 0)
    except ImportError as err:  # a backend whose module is not installed
        raise DeviceNotFoundError(f"the {scheme} backend is not available: {err}") from err
    device = opener(rest, **options)
    return _through_daemon_if_needed(device)


def _through_daemon_if_needed(device: Device) -> Device:
    """A real device this process may not change is changed through the governor daemon
    when one serves it (reads stay local); otherwise it is returned as it is."""
    if device.identity.kind in ("sim", "replay") or device.control_permitted():
        return device
    from governor.devices.daemon.client import DaemonDevice, daemon_serves

    if daemon_serves(device.uri):
        log.info(
            "%s: no right to change it here; changes go through the governor daemon", device.uri
        )
        return DaemonDevice(device)
    return device


class DeviceInfo(Dict[str, Any]):
    """One row of ``governor devices``: plain data for printing or JSON."""


def describe(device: Device) -> DeviceInfo:
    limits = device.power_limit_range()
    reason = device.control_reason()
    return DeviceInfo(
        uri=device.uri,
        name=device.identity.name,
        kind=device.identity.kind,
        model=device.identity.model,
        identity=device.identity.to_dict(),
        supported_clocks_mhz=list(device.supported_clocks_mhz()),
        # the memory clocks it can be locked at (empty: one, or none settable)
        supported_mem_clocks_mhz=list(device.supported_mem_clocks_mhz()),
        capabilities=device.capabilities.to_dict(),
        can_control=reason is None,
        control_reason=reason,
        power_limit_range_w=None if limits is None else [limits.min_w, limits.max_w],
        power_modes=list(device.power_modes()),
        power_source=getattr(device, "power_source", None),
        control_notes=device.control_notes(),
        parts=device.parts(),
    )


def list_devices(
    include_simulated: bool = False, uris: Optional[List[str]] = None
) -> List[DeviceInfo]:
    """Describe every real device found, or those named (and, if asked, every simulated
    board)."""
    uris = list(uris) if uris is not None else discover_hardware()
    if include_simulated:
        uris += [f"sim:{name}" for name in simulated_boards()]
    rows = []
    for uri in uris:
        with open_device(uri) as device:
            rows.append(describe(device))
    return rows
