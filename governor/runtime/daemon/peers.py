"""Who is at the other end of the daemon's socket, and whether the daemon admits them.

The socket's mode (0660) and group already keep other users out at ``connect()``. The daemon
checks again with the kernel's own record of the peer (``SO_PEERCRED`` for uid, gid and pid,
``SO_PEERGROUPS`` for the supplementary groups), so that a socket whose mode was widened, or
that is reached through a bind mount from a container, still admits only:

- root and the daemon's own user;
- members of ``daemon.socket_group``, by primary or supplementary group.

With no ``socket_group`` configured only root and the daemon's user are admitted. There is
deliberately no switch to admit anyone: the socket is at most 0660, so anybody else could
not connect in the first place; grant access through the group.
"""

from __future__ import annotations

import os
import platform
import socket
import struct
import sys
from dataclasses import dataclass
from typing import Callable, FrozenSet, Optional, Sequence, Tuple

__all__ = ["PeerCredentials", "PeerPolicy", "peer_credentials", "peer_groups"]

PeerCredentials = Tuple[Optional[int], Optional[int], Optional[int]]  # pid, uid, gid

# getsockopt() takes at most 1024 bytes: 256 groups; a peer with more falls back to the user
# database.
_GROUP_BYTES = 1024


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


def _peergroups_option() -> Optional[int]:
    option = getattr(socket, "SO_PEERGROUPS", None)  # Python does not name it (3.8-3.12)
    if option is not None:  # pragma: no cover - a future Python
        return int(option)
    if sys.platform.startswith("linux") and not platform.machine().startswith(
        ("alpha", "mips", "parisc", "sparc")
    ):
        return 59  # include/uapi/asm-generic/socket.h, Linux 4.13+
    return None  # pragma: no cover - other systems


def peer_groups(conn: socket.socket) -> Optional[Tuple[int, ...]]:
    """The peer's supplementary group ids as the kernel recorded them at ``connect()``
    (Linux 4.13+ ``SO_PEERGROUPS``); None when the kernel cannot tell."""
    option = _peergroups_option()
    if option is None:  # pragma: no cover - other systems
        return None
    try:
        raw = conn.getsockopt(socket.SOL_SOCKET, option, _GROUP_BYTES)
    except OSError:  # an older kernel, or more than 256 groups (ERANGE)
        return None
    count = len(raw) // 4
    return tuple(struct.unpack(f"{count}I", raw[: count * 4]))


def _groups_from_user_database(uid: int, gid: int) -> Tuple[int, ...]:
    """The groups the user database gives ``uid`` (the fallback without SO_PEERGROUPS)."""
    import pwd

    try:
        name = pwd.getpwuid(uid).pw_name
        return tuple(os.getgrouplist(name, gid))
    except (KeyError, OSError):  # a uid with no name (containers): its primary group only
        return (gid,)


@dataclass(frozen=True)
class PeerPolicy:
    """Which peers the daemon admits: ``uids`` (root and its own user), and members of the
    group ``gid`` (named ``group`` in messages), if one is configured."""

    uids: FrozenSet[int]
    gid: Optional[int] = None
    group: Optional[str] = None

    @classmethod
    def for_daemon(
        cls, gid: Optional[int], group: Optional[str], euid: Optional[int] = None
    ) -> PeerPolicy:
        """Root, this process's effective user, and members of ``gid``."""
        own = os.geteuid() if euid is None else euid
        return cls(uids=frozenset({0, own}), gid=gid, group=group)

    def refusal(
        self,
        peer: PeerCredentials,
        groups: Callable[[], Optional[Sequence[int]]] = lambda: None,
    ) -> Optional[str]:
        """None when ``peer`` is admitted, else a one-line reason. ``groups`` gives the peer's
        supplementary groups (asked only when needed; None: look them up by uid)."""
        _, uid, gid = peer
        if uid is None:
            return "the daemon cannot tell who is asking (no SO_PEERCRED on this system)"
        if uid in self.uids:
            return None
        own = ", ".join(str(u) for u in sorted(self.uids))
        if self.gid is None:
            return (
                f"uid {uid} may not use this daemon: with no daemon.socket_group configured "
                f"only uids {own} may"
            )
        if gid == self.gid:
            return None
        supplementary = groups()
        if supplementary is None and gid is not None:
            supplementary = _groups_from_user_database(uid, gid)
        if supplementary is not None and self.gid in supplementary:
            return None
        name = self.group or str(self.gid)
        return (
            f"uid {uid} may not use this daemon: only uids {own} and members of the group "
            f"{name!r} may (ask an administrator to add you: usermod -aG {name} USER)"
        )

    def check(self, conn: socket.socket, peer: PeerCredentials) -> Optional[str]:
        """:meth:`refusal` for a connected socket, its groups asked from the kernel."""
        return self.refusal(peer, lambda: peer_groups(conn))
