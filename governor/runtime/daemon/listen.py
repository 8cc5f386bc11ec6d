"""The daemon's socket: a listening Unix socket created safely, and removed only if it is ours.

The socket's directory must be one no other user can tamper with (:func:`_safe_parent`); the
socket is bound under a temporary name, given its mode and group, and only then renamed into
place (:func:`bind_socket`); a stale socket of a dead daemon is replaced, a live one refused.
"""

from __future__ import annotations

import logging
import os
import socket
import stat
from pathlib import Path
from typing import Optional, Tuple

from governor.errors import DeviceBusyError, GovernorError
from governor.runtime.daemon.config import ConfigError

__all__ = ["bind_socket", "group_id", "remove_socket"]

log = logging.getLogger("governor.daemon")


def group_id(name: Optional[str], source: str, key: str = "socket_group") -> Optional[int]:
    if name is None:
        return None
    if name.isdigit():
        return int(name)
    import grp

    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        raise ConfigError(
            f"{source}: daemon.{key}: no group named {name!r} "
            f"(create it with 'groupadd --system {name}')"
        ) from None


def _unsafe_dir(st: os.stat_result, euid: int, *, sticky_ok: bool) -> Optional[str]:
    """Why a directory others could tamper with is unsafe, or None when it is safe."""
    if st.st_uid not in (0, euid):
        return f"belongs to uid {st.st_uid}, not to root or this user"
    if st.st_mode & 0o022 and not (sticky_ok and st.st_mode & stat.S_ISVTX):
        return f"is writable by others (mode {oct(st.st_mode & 0o7777)})"
    return None


def _safe_parent(parent: Path) -> None:
    """Create the socket's directory (0755) if needed; refuse one others could tamper with.

    The directory itself must be a real directory (not a symlink) owned by root or this user
    and writable by no one else; each directory above it must be owned by root or this user
    and writable by no one else unless sticky (as /tmp is), so it cannot be swapped.
    """
    if not os.path.lexists(parent):
        try:
            parent.mkdir(mode=0o755, parents=True)
            os.chmod(parent, 0o755)  # whatever the umask: clients must be able to enter it
        except OSError as err:
            raise GovernorError(
                f"cannot create the socket directory {parent}: {err.strerror or err}"
            ) from None
    st = os.lstat(parent)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise GovernorError(f"the socket directory {parent} is not a plain directory (a symlink?)")
    euid = os.geteuid()
    reason = _unsafe_dir(st, euid, sticky_ok=False)
    if reason is not None:
        raise GovernorError(
            f"the socket directory {parent} {reason}; "
            "use a directory only root can write, such as /run/governor"
        )
    for above in Path(os.path.realpath(parent)).parents:
        reason = _unsafe_dir(os.stat(above), euid, sticky_ok=True)
        if reason is not None:
            raise GovernorError(
                f"the socket directory {parent} lies under {above}, which {reason}; "
                "use a directory only root can write, such as /run/governor"
            )


def _remove_stale(path: Path) -> None:
    """Remove a socket no daemon answers on; refuse a live one or a non-socket file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise GovernorError(
            f"{path} is a symbolic link; refusing to follow or replace it (remove it if it is stale)"
        )
    if not stat.S_ISSOCK(st.st_mode):
        raise GovernorError(f"{path} exists and is not a socket; refusing to replace it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(0.5)
    try:
        probe.connect(str(path))
    except OSError:
        log.info("removing stale socket %s", path)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        return
    finally:
        probe.close()
    raise DeviceBusyError(f"another governor daemon is already listening on {path}")


def bind_socket(
    path: Path,
    *,
    mode: int = 0o660,
    group: Optional[str] = None,
    source: str = "<config>",
    backlog: int = 16,
) -> socket.socket:
    """A listening Unix socket at ``path`` with ``mode`` and ``group``, created safely.

    The socket is bound under a temporary name, given its mode and group, and only then
    renamed into place, so no client ever sees it with looser permissions.

    Raises:
        ConfigError: unknown group; DeviceBusyError: a daemon already listens there;
        GovernorError: an unsafe directory or a non-socket file in the way.
    """
    path = Path(path)
    gid = group_id(group, source)
    _safe_parent(path.parent)
    _remove_stale(path)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        os.unlink(temp)
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(temp))
        os.chmod(temp, mode)
        if gid is not None:
            os.chown(temp, -1, gid)
        os.replace(temp, path)
        sock.listen(backlog)
    except OSError as err:
        sock.close()
        try:
            os.unlink(temp)
        except FileNotFoundError:
            pass
        raise GovernorError(f"cannot listen on {path}: {err.strerror or err}") from None
    return sock


def remove_socket(path: Path, ino: Optional[Tuple[int, int]]) -> None:
    """Remove the socket at ``path`` unless it is another daemon's now (its ``(st_dev,
    st_ino)`` is not ``ino``, the one this daemon bound); a missing one is fine."""
    try:
        st = os.stat(path)
    except OSError:
        return
    if ino is not None and (st.st_dev, st.st_ino) != ino:
        return  # another daemon's socket now: leave it
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
