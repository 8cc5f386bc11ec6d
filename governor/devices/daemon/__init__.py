"""The client side of the governor daemon: a device whose changes go through the daemon.

A process without the right to change a GPU (not root) reads it directly and asks the daemon
(``governor daemon``, in ``governor.runtime.daemon``) for the few changes its site allows.
This side lives in the device layer because :func:`governor.open_device` uses it on its own
when it lacks the right and a daemon serves the device.

- :mod:`~governor.devices.daemon.protocol` JSON lines: request schema, replies, size limit
- :mod:`~governor.devices.daemon.client`   ``request()``, ``daemon_available()``, ``DaemonDevice``
"""

from __future__ import annotations

__all__ = ["DEFAULT_SOCKET", "SOCKET_ENV"]

#: where the daemon listens unless its config says otherwise (and where clients look)
DEFAULT_SOCKET = "/run/governor/governor.sock"
#: clients look here first for the socket path
SOCKET_ENV = "GOVERNOR_DAEMON_SOCKET"
