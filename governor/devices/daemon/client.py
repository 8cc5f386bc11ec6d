"""Talking to the governor daemon as an unprivileged user.

- :func:`request` sends one request and returns its ``result`` (or raises our errors);
- :func:`daemon_available` says whether a daemon answers on the socket;
- :class:`DaemonDevice` wraps a device this process may read but not change: reads go to the
  local backend, changes go to the daemon (``lock_gpu_clocks``, ``apply_policy``,
  ``restore``), so the Python API and CLI work the same with or without root.

The socket is ``$GOVERNOR_DAEMON_SOCKET`` or ``/run/governor/governor.sock``.
"""

from __future__ import annotations

import json
import os
import socket
import stat
from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from governor.devices.base import Device, DeviceState, Sample
from governor.devices.daemon import DEFAULT_SOCKET, SOCKET_ENV
from governor.devices.daemon.protocol import decode_reply
from governor.errors import (
    DeviceBusyError,
    DeviceNotFoundError,
    DevicePermissionError,
    GovernorError,
    InvalidRequestError,
)

__all__ = [
    "DaemonClient",
    "DaemonDevice",
    "daemon_available",
    "daemon_serves",
    "default_socket_path",
    "request",
]

_MAX_REPLY_BYTES = 1 << 20

# reply code -> the error a caller gets
_ERRORS = {
    "not-allowed": DevicePermissionError,
    "forbidden": DevicePermissionError,
    "unknown-device": DeviceNotFoundError,
    "busy": DeviceBusyError,
    "bad-json": InvalidRequestError,
    "too-large": InvalidRequestError,
    "bad-request": InvalidRequestError,
    "unknown-action": InvalidRequestError,
    "out-of-limits": InvalidRequestError,
}


def default_socket_path() -> Path:
    """``$GOVERNOR_DAEMON_SOCKET``, else ``/run/governor/governor.sock``."""
    return Path(os.environ.get(SOCKET_ENV) or DEFAULT_SOCKET)


def _error_for(reply: Dict[str, Any]) -> GovernorError:
    code = str(reply.get("code", "failed"))
    message = f"governor daemon: {reply.get('error', 'request failed')}"
    err = _ERRORS.get(code, GovernorError)(message)
    setattr(err, "code", code)  # noqa: B010 - the daemon's error code, for callers that branch on it
    return err


class DaemonClient:
    """One connection per call to the daemon's socket; ``timeout_s`` bounds each call."""

    def __init__(self, socket_path: Optional[Any] = None, *, timeout_s: float = 5.0) -> None:
        self.socket_path = Path(socket_path) if socket_path is not None else default_socket_path()
        self.timeout_s = timeout_s

    def _connect(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout_s)
        try:
            sock.connect(str(self.socket_path))
        except FileNotFoundError:
            sock.close()
            raise DeviceNotFoundError(
                f"no governor daemon socket at {self.socket_path} (is the daemon running? set {SOCKET_ENV})"
            ) from None
        except PermissionError:
            sock.close()
            raise DevicePermissionError(
                f"may not connect to the governor daemon at {self.socket_path}: "
                "ask an administrator to add you to the daemon's group (usually 'governor')"
            ) from None
        except OSError as err:
            sock.close()
            raise GovernorError(
                f"cannot reach the governor daemon at {self.socket_path}: {err.strerror or err}"
            ) from None
        return sock

    def send_raw(self, payload: bytes) -> Dict[str, Any]:
        """Send raw bytes (one request line) and return the parsed reply, ok or not."""
        sock = self._connect()
        try:
            try:
                sock.sendall(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the daemon hung up first (busy, too large): its reply may still be queued
            buffer = b""
            while b"\n" not in buffer:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                buffer += chunk
                if len(buffer) > _MAX_REPLY_BYTES:
                    raise GovernorError("the governor daemon sent an oversized reply")
        except socket.timeout:
            raise GovernorError(
                f"the governor daemon at {self.socket_path} did not answer within {self.timeout_s:g} s"
            ) from None
        except OSError as err:
            raise GovernorError(
                f"lost the governor daemon at {self.socket_path}: {err.strerror or err}"
            ) from None
        finally:
            sock.close()
        if not buffer.strip():
            raise GovernorError(
                f"the governor daemon at {self.socket_path} closed the connection without a reply"
            )
        return decode_reply(buffer.split(b"\n", 1)[0])

    def call(self, document: Dict[str, Any]) -> Dict[str, Any]:
        """Send a request document; the whole reply (``ok`` may be false)."""
        return self.send_raw((json.dumps(document) + "\n").encode("utf-8"))

    def request(self, action: str, **params: Any) -> Dict[str, Any]:
        """Ask for ``action``; the reply's ``result``. None-valued params are left out.

        Raises:
            DevicePermissionError (not allowed), InvalidRequestError (refused request),
            DeviceNotFoundError (no daemon, unknown device), GovernorError (device failed).
        """
        document = {"action": action}
        document.update({k: v for k, v in params.items() if v is not None})
        reply = self.call(document)
        if not reply["ok"]:
            raise _error_for(reply)
        result = reply.get("result")
        return result if isinstance(result, dict) else {}


def request(
    action: str, *, socket_path: Optional[Any] = None, timeout_s: float = 5.0, **params: Any
) -> Dict[str, Any]:
    """Send one request to the daemon and return its result (see :meth:`DaemonClient.request`)."""
    return DaemonClient(socket_path, timeout_s=timeout_s).request(action, **params)


def daemon_available(socket_path: Optional[Any] = None, *, timeout_s: float = 1.0) -> bool:
    """Whether a governor daemon accepts connections from this user on the socket."""
    path = Path(socket_path) if socket_path is not None else default_socket_path()
    try:
        if not stat.S_ISSOCK(os.stat(path).st_mode):
            return False
    except OSError:
        return False
    try:
        DaemonClient(path, timeout_s=timeout_s)._connect().close()
    except GovernorError:
        return False
    return True


def daemon_serves(uri: str, socket_path: Optional[Any] = None, *, timeout_s: float = 2.0) -> bool:
    """Whether the daemon answers and serves device ``uri``."""
    if not daemon_available(socket_path, timeout_s=timeout_s):
        return False
    try:
        status = request("status", socket_path=socket_path, timeout_s=timeout_s, device=uri)
    except GovernorError:
        return False
    return any(d.get("uri") == uri for d in status.get("devices", []))


class DaemonDevice(Device):
    """A device read locally and changed through the daemon.

    Only what the daemon allows can be changed: the GPU clock lock (within the site's limits)
    and the ``ppw``/``max`` policies; restoring asks the daemon to ``reset``, which also
    resumes the site's policy. Power limits and power modes are reported as unsupported.
    """

    persistent_state = False  # the daemon owns the device, its lock and its journal

    def __init__(
        self, inner: Device, socket_path: Optional[Any] = None, *, timeout_s: float = 5.0
    ) -> None:
        self.inner = inner
        self.client = DaemonClient(socket_path, timeout_s=timeout_s)
        capabilities = replace(
            inner.capabilities,
            lock_gpu_clocks=inner.capabilities.lock_gpu_clocks,
            lock_mem_clock=False,
            power_limit=False,
            power_mode=False,
        )
        super().__init__(inner.identity, capabilities, clock=inner.clock)
        self._asked = False  # whether this client changed something through the daemon

    def __repr__(self) -> str:
        return f"<DaemonDevice {self.uri} via {self.client.socket_path}>"

    def control_permitted(self) -> bool:
        return daemon_available(self.client.socket_path)

    # reads: the local backend
    def _supported_clocks_mhz(self) -> Tuple[float, ...]:
        return self.inner.supported_clocks_mhz()

    def _read_sample(self) -> Sample:
        return self.inner.sample()

    def _read_state(self) -> DeviceState:
        return self.inner.state()

    # changes: the daemon
    def _remember(self, previous: Dict[str, Any]) -> None:
        self._asked = True  # the daemon journals the original; this client only asks it back

    @property
    def changed(self) -> bool:
        return self._asked

    def acquire(self, command: Optional[str] = None) -> DaemonDevice:
        """The daemon owns the device (its lock and journal): nothing to take here."""
        return self

    def release(self, *, keep: bool = False, merge: bool = True) -> Dict[str, Any]:
        """Ask the daemon to undo this client's changes, or (``keep``) leave them with it.
        ``merge`` has no effect here: the daemon keeps its clients' changes in its own
        journal."""
        if keep:
            self._asked = False  # the daemon keeps the change until someone resets it
            return {}
        return self.restore()

    def lock_gpu_clocks(
        self, min_mhz: float, max_mhz: Optional[float] = None, *, strict: bool = False
    ) -> Tuple[float, float]:
        """Ask the daemon to lock the GPU clock (MHz). Returns the range it applied.

        Raises:
            InvalidRequestError: outside the device's range or the site's limits.
        """
        self._require("lock_gpu_clocks", "locking the GPU clock")
        lo = self.snap_clock_mhz(min_mhz, strict=strict)
        hi = lo if max_mhz is None else self.snap_clock_mhz(max_mhz, strict=strict)
        if lo > hi:
            raise InvalidRequestError(f"minimum clock {lo:g} MHz is above maximum {hi:g} MHz")
        result = self.client.request("lock", device=self.uri, min_mhz=lo, max_mhz=hi)
        self._remember(result.get("previous") or {})
        applied = result.get("applied", {}).get("gpu_clocks_mhz") or [lo, hi]
        return (float(applied[0]), float(applied[1]))

    def apply_policy(self, policy: str) -> Dict[str, Any]:
        """Ask the daemon to apply ``ppw`` or ``max``; its result (``applied``, ``previous``)."""
        result = self.client.request("apply", device=self.uri, policy=policy)
        self._remember(result.get("previous") or {})
        return result

    def reset_gpu_clocks(self) -> None:
        self.client.request("reset", device=self.uri)
        self._asked = False

    def restore(self) -> Dict[str, Any]:
        """Ask the daemon to reset this device (safe to repeat). Returns what it restored."""
        if not self.changed:
            return {}
        result = self.client.request("reset", device=self.uri)
        self._asked = False
        restored = result.get("restored")
        return restored if isinstance(restored, dict) else {}

    def restore_everything(self) -> Dict[str, Any]:
        """``governor reset`` through the daemon: it undoes every client's change."""
        result = self.client.request("reset", device=self.uri)
        self._asked = False
        restored = result.get("restored")
        return restored if isinstance(restored, dict) else {}

    def daemon_status(self) -> Dict[str, Any]:
        """The daemon's status of this device."""
        status = self.client.request("status", device=self.uri)
        devices = status.get("devices") or [{}]
        return dict(devices[0], daemon=status.get("daemon"))

    def close(self) -> None:
        """Ask the daemon to undo what this client changed, then close the local reader."""
        if self._closed:
            return
        try:
            self.restore()
        finally:
            self._closed = True
            self.inner.close()
