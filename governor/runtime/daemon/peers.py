"""Who is at the other end of the daemon's socket, as the kernel recorded it at connect()."""

from __future__ import annotations

import socket
import struct
from typing import Optional, Tuple

__all__ = ["PeerCredentials", "peer_credentials"]

PeerCredentials = Tuple[Optional[int], Optional[int], Optional[int]]  # pid, uid, gid


def peer_credentials(conn: socket.socket) -> PeerCredentials:
    """(pid, uid, gid) of the process at the other end of a Unix socket (Linux SO_PEERCRED)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:  # pragma: no cover - not Linux
        return (None, None, None)
    try:
        raw = conn.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
        pid, uid, gid = struct.unpack("3i", raw)
    except OSError:  # pragma: no cover - peer already gone
        return (None, None, None)
    return (pid, uid, gid)
