"""The governor daemon: a root process that owns the GPUs and lets unprivileged users ask.

``governor daemon --config FILE`` enforces the site's policy on the configured devices and
serves a Unix socket on which members of a group may ask for a short allow-list of actions
(apply the ``ppw`` or ``max`` profile policy, lock the GPU clock within the site's limits,
reset, status). Nothing a client sends reaches a shell; every request is size-limited and
validated against a hand-written schema before the daemon touches a device.

Modules (imported on demand, so ``import governor`` loads none of them):

- :mod:`~governor.runtime.daemon.config`   the TOML config file, validated to one-line errors
- :mod:`~governor.runtime.daemon.server`   the daemon: its life, client requests, signals
- :mod:`~governor.runtime.daemon.slots`    each served device: limits, its policy, status
- :mod:`~governor.runtime.daemon.listen`   the Unix socket, created and removed safely
- :mod:`~governor.runtime.daemon.connections`  one selector thread for every client, deadlines,
  a fixed pool of workers
- :mod:`~governor.runtime.daemon.peers`    who is connecting (SO_PEERCRED/SO_PEERGROUPS) and
  whether they are admitted

The protocol and the client are in :mod:`governor.devices.daemon` (the device layer uses them).
"""

from __future__ import annotations

from governor.devices.daemon import DEFAULT_SOCKET, SOCKET_ENV

__all__ = ["DEFAULT_SOCKET", "SOCKET_ENV"]
