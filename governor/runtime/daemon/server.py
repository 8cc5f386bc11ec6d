"""The daemon: owns the configured devices, enforces the site policy, serves the socket.

One thread reads every connection without blocking (:mod:`.connections`): it refuses peers
outside the allowed users and group (:mod:`.peers`), holds each request line to a deadline
and a size limit, and hands complete lines to a few worker threads. A worker validates the
line (:mod:`~governor.devices.daemon.protocol`), checks the allow-list and the clock limits
(:mod:`.config`), and acts on the device through the Device API only: nothing a client sends
is passed to a shell or a subprocess. Every request is logged with the caller's uid and pid
from ``SO_PEERCRED``.

Actions:

- ``status``: the daemon, each device's state, limits, policy and last client action;
- ``apply`` ``ppw``: lock the GPU to the profile's PPW-optimal clock (clamped to the limits);
  ``apply`` ``max``: lock it to the highest clock within the limits;
- ``lock``: lock the GPU clock to ``[min_mhz, max_mhz]``, which must lie within the limits;
- ``reset``: restore what was changed, then resume the configured policy.

A client's ``apply``/``lock`` pauses the configured policy on that device until ``reset``.

A device whose profile is malformed (or names clocks the device does not have) is not a
reason to stop serving the others: the daemon starts, logs one line, leaves that device
unchanged and reports the error in ``status`` (``policy_error``) instead of enforcing its
configured policy; an ``apply ppw`` for it is refused with a ``failed`` reply naming the
file and the field. ``max``, ``lock``, ``reset`` and ``status`` keep working.
On SIGTERM/SIGINT (or :meth:`DaemonServer.stop`) the daemon stops its policies, restores
every device and removes its socket.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import socket
import stat
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from governor._version import __version__
from governor.devices.base import Device
from governor.devices.daemon.protocol import (
    ProtocolError,
    Request,
    decode_request,
    error_reply,
    ok_reply,
)
from governor.errors import DeviceBusyError, GovernorError, InvalidRequestError
from governor.runtime.daemon.config import ConfigError, DaemonConfig, DeviceConfig
from governor.runtime.daemon.connections import ConnectionLoop
from governor.runtime.daemon.peers import PeerCredentials, PeerPolicy, peer_credentials

__all__ = [
    "DaemonServer",
    "PeerCredentials",
    "PeerPolicy",
    "bind_socket",
    "peer_credentials",
    "run_daemon",
]

log = logging.getLogger("governor.daemon")

_TOLERANCE_MHZ = Device.CLOCK_TOLERANCE_MHZ


# -- the socket --------------------------------------------------------------------------------
def _group_id(name: Optional[str], source: str) -> Optional[int]:
    if name is None:
        return None
    if name.isdigit():
        return int(name)
    import grp

    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        raise ConfigError(
            f"{source}: daemon.socket_group: no group named {name!r} "
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
    gid = _group_id(group, source)
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


# -- devices -----------------------------------------------------------------------------------
class _Slot:
    """A configured device with its lock, its policy runner and the last client action."""

    def __init__(self, config: DeviceConfig, device: Device) -> None:
        self.config = config
        self.device = device
        self.lock = threading.RLock()
        self.governor: Any = None
        self.enforced: Optional[Dict[str, Any]] = None
        self.policy_error: Optional[str] = None
        self.override: Optional[Dict[str, Any]] = None

    def limits_mhz(self) -> Tuple[float, float]:
        table = self.device.supported_clocks_mhz()
        lo = (
            self.config.min_mhz if self.config.min_mhz is not None else (table[0] if table else 0.0)
        )
        hi = (
            self.config.max_mhz
            if self.config.max_mhz is not None
            else (table[-1] if table else 0.0)
        )
        return (lo, hi)

    def clocks_within_limits(self) -> List[float]:
        lo, hi = self.limits_mhz()
        return [
            c
            for c in self.device.supported_clocks_mhz()
            if lo - _TOLERANCE_MHZ <= c <= hi + _TOLERANCE_MHZ
        ]

    def nearest_allowed(self, clock_mhz: float) -> float:
        allowed = self.clocks_within_limits()
        if not allowed:
            lo, hi = self.limits_mhz()
            raise GovernorError(
                f"{self.device.uri} supports no clock within the configured limits {lo:g}-{hi:g} MHz"
            )
        return min(allowed, key=lambda c: (abs(c - clock_mhz), c))


def _load_runtime() -> Optional[Tuple[Any, Any]]:
    """(Governor, policies) from governor.runtime, or None when it is not there."""
    try:
        from governor.runtime import Governor, policies  # type: ignore[attr-defined]
    except ImportError as err:
        log.debug("governor.runtime is not available: %s", err)
        return None
    return Governor, policies


class DaemonServer:
    """The daemon. ``start()`` opens devices and the socket; ``serve_forever()`` blocks;
    ``stop()`` (any thread, or a signal) restores devices and removes the socket."""

    def __init__(
        self,
        config: DaemonConfig,
        *,
        opener: Optional[Callable[[str], Device]] = None,
    ) -> None:
        self.config = config
        self._opener = opener
        self._slots: Dict[str, _Slot] = {}
        self._listener: Optional[socket.socket] = None
        self._socket_ino: Optional[Tuple[int, int]] = None
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._loop: Optional[ConnectionLoop] = None
        self._peers: Optional[PeerPolicy] = None
        self._started_at = time.monotonic()
        self._thread: Optional[threading.Thread] = None
        self._cleanup_lock = threading.Lock()
        self._cleaned = False
        self._serving = False
        self._serving_thread: Optional[threading.Thread] = None
        self._metrics: Any = None

    # -- lifecycle -----------------------------------------------------------------------------
    @property
    def socket_path(self) -> Path:
        return self.config.socket

    def start(self) -> DaemonServer:
        """Open the devices (restoring what a crashed predecessor left), enforce their policies,
        and listen. On failure everything opened so far is restored and closed.

        Raises:
            GovernorError: a device cannot be opened, or the socket cannot be created.
        """
        try:
            self._peers = PeerPolicy.for_daemon(
                _group_id(self.config.socket_group, self.config.source), self.config.socket_group
            )
            self._open_devices()
            self._listener = bind_socket(
                self.config.socket,
                mode=self.config.socket_mode,
                group=self.config.socket_group,
                source=self.config.source,
                backlog=socket.SOMAXCONN,
            )
            st = os.stat(self.config.socket)
            self._socket_ino = (st.st_dev, st.st_ino)
            self._listener.setblocking(False)
            for slot in self._slots.values():
                self._enforce(slot)
            if self.config.metrics_listen:
                from governor.runtime.exporter import serve_metrics

                self._metrics = serve_metrics(
                    [slot.device for slot in self._slots.values()],
                    self.config.metrics_listen,
                    policy_of=self._policy_of,
                )
                log.info(
                    "serving metrics on http://%s:%d/metrics",
                    self._metrics.addr,
                    self._metrics.port,
                )
        except BaseException:
            self._cleanup()
            raise
        log.info(
            "governor daemon %s listening on %s for %s (allowed: %s; users: uids %s%s)",
            __version__,
            self.config.socket,
            ", ".join(self._slots),
            ", ".join(self.config.allow),
            ", ".join(str(u) for u in sorted(self._peers.uids)),
            f" and group {self.config.socket_group}" if self.config.socket_group else "",
        )
        return self

    def _open_devices(self) -> None:
        opener = self._opener
        if opener is None:
            from governor.devices.registry import open_device
            from governor.timebase import WallClock

            def opener(uri: str) -> Device:  # a daemon lives in real time, simulated or not
                return open_device(uri, clock=WallClock())

        for dev_config in self._expanded_devices():
            device = opener(dev_config.uri)
            slot = _Slot(dev_config, device)
            self._slots[dev_config.uri] = slot
            self._recover(device, dev_config.uri)
            if not device.capabilities.lock_gpu_clocks:
                log.warning("%s cannot lock its GPU clock: only status will work", device.uri)
            elif not slot.clocks_within_limits():
                lo, hi = slot.limits_mhz()
                log.error(
                    "%s supports no clock within the configured limits %g-%g MHz",
                    device.uri,
                    lo,
                    hi,
                )

    def _expanded_devices(self) -> List[DeviceConfig]:
        """The configured devices, with ``uri = "all"`` standing for every GPU of this host
        that no other table names (found at start: a node's GPUs, however many)."""
        out: List[DeviceConfig] = []
        for dev_config in self.config.devices:
            if dev_config.uri != "all":
                out.append(dev_config)
                continue
            from governor.devices.registry import resolve_uris

            for uri in resolve_uris("all"):
                if self.config.device(uri) is None:
                    out.append(dataclasses.replace(dev_config, uri=uri))
        return out

    @staticmethod
    def _recover(device: Device, uri: str) -> None:
        """Take the device like any other owner: its lock for the daemon's whole life (a
        device a live governor holds is refused), and a journal layer on disk, so that the
        next owner or ``governor reset`` can undo this daemon's changes after a ``kill -9``.
        Settings a dead owner left are restored by taking it; ``governor apply``'s stay."""
        try:
            device.acquire(command=f"governor daemon (pid {os.getpid()})")
        except DeviceBusyError as err:
            raise DeviceBusyError(f"the daemon cannot serve {uri}: {err}") from None

    def serve_forever(self) -> None:
        """Serve clients until :meth:`stop`; then restore devices and remove the socket."""
        if self._listener is None:
            self.start()
        listener = self._listener
        assert listener is not None and self._peers is not None
        config = self.config
        self._loop = ConnectionLoop(
            listener,
            self.handle_line,
            admission=self._peers.check,
            max_request_bytes=config.max_request_bytes,
            max_connections=config.max_connections,
            request_timeout_s=config.request_timeout_s,
            idle_timeout_s=config.idle_timeout_s,
            workers=config.workers,
            stop_event=self._stop,
        )
        self._serving = True
        self._serving_thread = threading.current_thread()
        try:
            self._loop.run()
        finally:
            self._cleanup()

    def start_in_thread(self) -> DaemonServer:
        """Start and serve from a background thread (tests, embedding)."""
        self.start()
        self._thread = threading.Thread(
            target=self.serve_forever, name="governor-daemon", daemon=True
        )
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask the daemon to stop; when serving from a thread, wait until it has cleaned up."""
        self.request_stop()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)
        elif not self._serving:
            self._cleanup()
        elif self._serving_thread is not threading.current_thread():
            self._stopped.wait(timeout_s)

    def request_stop(self) -> None:
        """Signal-safe: sets the flag the connection loop polls, and wakes it."""
        self._stop.set()
        loop = self._loop
        if loop is not None:
            loop.stop()

    def _cleanup(self) -> None:
        with self._cleanup_lock:
            if self._cleaned:
                return
            self._cleaned = True
        self._stop.set()
        if self._metrics is not None:
            self._metrics.close()
        if self._listener is not None:
            try:
                self._listener.close()
            except OSError:
                pass
        self._remove_socket()
        for slot in self._slots.values():
            with slot.lock:
                self._stop_governor(slot)
                try:
                    restored = slot.device.restore()
                    if restored:
                        log.info("%s: restored %s", slot.device.uri, restored)
                except GovernorError as err:
                    log.error(
                        "%s: could not restore: %s (run 'governor reset')", slot.device.uri, err
                    )
                finally:
                    try:
                        slot.device.close()
                    except GovernorError as err:  # pragma: no cover - defensive
                        log.warning("%s: close failed: %s", slot.device.uri, err)
        self._stopped.set()
        log.info("governor daemon stopped")

    def _remove_socket(self) -> None:
        path = self.config.socket
        try:
            st = os.stat(path)
        except OSError:
            return
        if self._socket_ino is not None and (st.st_dev, st.st_ino) != self._socket_ino:
            return  # another daemon's socket now: leave it
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    # -- requests ------------------------------------------------------------------------------
    def _log(self, peer: PeerCredentials, request: Optional[Request], outcome: str) -> None:
        pid, uid, _ = peer
        what = request.to_dict() if request is not None else {}
        log.info("uid=%s pid=%s %s -> %s", uid, pid, what or "(unparsed request)", outcome)

    def handle_line(
        self, line: bytes, peer: PeerCredentials = (None, None, None)
    ) -> Dict[str, Any]:
        """The reply to one request line. Never raises: every failure becomes an error reply."""
        request: Optional[Request] = None
        try:
            request = decode_request(line, self.config.max_request_bytes)
            reply = self.dispatch(request, peer)
        except ProtocolError as err:
            reply = error_reply(
                err.code, str(err), err.request_id if request is None else request.id
            )
        except InvalidRequestError as err:
            reply = error_reply("bad-request", str(err), request.id if request else None)
        except GovernorError as err:
            reply = error_reply("failed", str(err), request.id if request else None)
        except Exception as err:  # the daemon must survive anything a request triggers
            log.exception("internal error while handling %r", line[:200])
            reply = error_reply(
                "internal",
                f"internal error: {type(err).__name__}: {err}",
                request.id if request else None,
            )
        self._log(peer, request, "ok" if reply["ok"] else f"{reply['code']}: {reply['error']}")
        return reply

    def dispatch(
        self, request: Request, peer: PeerCredentials = (None, None, None)
    ) -> Dict[str, Any]:
        """Carry out a validated request. Raises ProtocolError/GovernorError on refusal."""
        if request.action not in self.config.allow:
            raise ProtocolError(
                "not-allowed",
                f"action {request.action!r} is not allowed by this daemon; allowed: {', '.join(self.config.allow)}",
                request.id,
            )
        if request.action == "status":
            slots = (
                [self._slot(request)]
                if request.device is not None or len(self._slots) == 1
                else list(self._slots.values())
            )
            return ok_reply(request, self._status(slots, peer))
        slot = self._slot(request)
        with slot.lock:
            if request.action == "apply":
                result = self._apply(slot, request, peer)
            elif request.action == "lock":
                result = self._lock(slot, request, peer)
            else:
                result = self._reset(slot)
        return ok_reply(request, result, slot.device.uri)

    def _slot(self, request: Request) -> _Slot:
        if request.device is None:
            if len(self._slots) == 1:
                return next(iter(self._slots.values()))
            raise ProtocolError(
                "bad-request",
                f"this daemon serves several devices; name one with device: {', '.join(self._slots)}",
                request.id,
            )
        slot = self._slots.get(request.device)
        if slot is None:
            raise ProtocolError(
                "unknown-device",
                f"device {request.device!r} is not served by this daemon; served: {', '.join(self._slots)}",
                request.id,
            )
        return slot

    def _mark(self, slot: _Slot, what: Dict[str, Any], peer: PeerCredentials) -> None:
        pid, uid, _ = peer
        slot.override = dict(what, by_uid=uid, by_pid=pid, at_unix_s=round(time.time(), 3))

    def _apply(self, slot: _Slot, request: Request, peer: PeerCredentials) -> Dict[str, Any]:
        policy = str(request.policy)
        if policy not in self.config.allow_policies:
            from governor.runtime.daemon.config import CLIENT_POLICIES

            code = "not-allowed" if policy in CLIENT_POLICIES else "bad-request"
            raise ProtocolError(
                code,
                f"policy {policy!r} cannot be applied through the daemon; allowed: {', '.join(self.config.allow_policies)}",
                request.id,
            )
        self._stop_governor(slot)
        previous = slot.device.state().to_dict()
        applied = self._apply_static(slot, policy)
        self._mark(slot, applied, peer)
        return {"device": slot.device.uri, "applied": applied, "previous": previous}

    def _apply_static(self, slot: _Slot, policy: str) -> Dict[str, Any]:
        """Lock the clock for ``ppw`` (profile's PPW-optimal clock) or ``max`` (top clock),
        both within the configured limits."""
        device = slot.device
        applied: Dict[str, Any] = {"policy": policy}
        if policy == "ppw":
            from governor.profiles.profile import load_profile_for

            path, doc, warnings = load_profile_for(device)
            wanted = float(doc["ppw_optimal_clock_mhz"])
            applied["profile"] = str(path)
            if warnings:
                applied["warnings"] = list(warnings)
        elif policy == "clock":
            wanted = float(slot.config.policy["clock_mhz"])
        else:
            allowed = slot.clocks_within_limits()
            wanted = allowed[-1] if allowed else slot.limits_mhz()[1]
        clock = slot.nearest_allowed(wanted)
        if abs(clock - wanted) > _TOLERANCE_MHZ:
            applied["clamped_from_mhz"] = wanted
        lo, hi = device.lock_gpu_clocks(clock)
        applied["gpu_clocks_mhz"] = [lo, hi]
        return applied

    def _lock(self, slot: _Slot, request: Request, peer: PeerCredentials) -> Dict[str, Any]:
        lo_limit, hi_limit = slot.limits_mhz()
        low = float(request.min_mhz)  # type: ignore[arg-type]
        high = float(request.max_mhz) if request.max_mhz is not None else low
        for key, value in (("min_mhz", low), ("max_mhz", high)):
            if value < lo_limit - _TOLERANCE_MHZ or value > hi_limit + _TOLERANCE_MHZ:
                raise ProtocolError(
                    "out-of-limits",
                    f"{key} {value:g} MHz is outside the limits {lo_limit:g}-{hi_limit:g} MHz set for {slot.device.uri}",
                    request.id,
                )
        self._stop_governor(slot)
        previous = slot.device.state().to_dict()
        lo, hi = slot.device.lock_gpu_clocks(slot.nearest_allowed(low), slot.nearest_allowed(high))
        applied = {"gpu_clocks_mhz": [lo, hi]}
        self._mark(slot, applied, peer)
        return {"device": slot.device.uri, "applied": applied, "previous": previous}

    def _reset(self, slot: _Slot) -> Dict[str, Any]:
        self._stop_governor(slot)
        restored = slot.device.restore()
        slot.override = None
        self._enforce(slot)
        return {
            "device": slot.device.uri,
            "restored": restored,
            "policy": slot.config.policy["policy"],
        }

    # -- the configured policy -----------------------------------------------------------------
    def _enforce(self, slot: _Slot) -> None:
        """Start the configured policy on ``slot``; failures are logged and kept for status."""
        spec = dict(slot.config.policy)
        name = spec["policy"]
        slot.enforced = None
        slot.policy_error = None
        if name == "none" or not slot.device.capabilities.lock_gpu_clocks:
            return
        try:
            runtime = _load_runtime()
            if runtime is not None:
                governor_cls, policies = runtime
                policy = policies.from_spec(spec)
                slot.governor = governor_cls(
                    slot.device,
                    policy,
                    profile=None,
                    interval_s=self.config.interval_s,
                    handle_signals=False,
                )
                slot.governor.start()
                slot.enforced = {"policy": name, "by": "governor", "spec": spec}
            elif name in ("ppw", "max", "clock"):
                slot.enforced = dict(self._apply_static(slot, name), by="static")
            else:
                raise GovernorError(
                    f"the {name} policy needs governor.runtime, which this installation lacks"
                )
            log.info("%s: enforcing %s", slot.device.uri, slot.enforced)
        except GovernorError as err:
            slot.policy_error = str(err)
            slot.governor = None
            log.error("%s: cannot enforce the %s policy: %s", slot.device.uri, name, err)

    def _stop_governor(self, slot: _Slot) -> None:
        governor = slot.governor
        slot.governor = None
        slot.enforced = None
        if governor is not None:
            try:
                governor.stop()
            except GovernorError as err:
                log.warning("%s: stopping the policy: %s", slot.device.uri, err)

    # -- status --------------------------------------------------------------------------------
    def _policy_of(self, device: Device) -> Dict[str, Any]:
        """What the metrics show for ``device``: the policy in force and the budget left."""
        for slot in self._slots.values():
            if slot.device is device:
                governor = slot.governor
                budget = None
                if governor is not None:
                    try:
                        budget = governor.controller.status().get("remaining_j")
                    except Exception:  # a controller without a budget
                        budget = None
                if slot.override:
                    return {"policy": slot.override.get("policy", "lock"), "source": "client"}
                name = (slot.enforced or {}).get("policy") or "none"
                return {"policy": name, "source": "daemon", "budget_remaining_j": budget}
        return {}

    def _status(self, slots: List[_Slot], peer: PeerCredentials) -> Dict[str, Any]:
        pid, uid, _ = peer
        return {
            "daemon": {
                "version": __version__,
                "pid": os.getpid(),
                "socket": str(self.config.socket),
                "uptime_s": round(time.monotonic() - self._started_at, 3),
                "allow": list(self.config.allow),
                "allow_policies": list(self.config.allow_policies),
            },
            "caller": {"uid": uid, "pid": pid},
            "devices": [self._device_status(slot) for slot in slots],
        }

    def _device_status(self, slot: _Slot) -> Dict[str, Any]:
        with slot.lock:
            device = slot.device
            table = device.supported_clocks_mhz()
            doc: Dict[str, Any] = {
                "uri": device.uri,
                "name": device.identity.name,
                "model": device.identity.model,
                "supported_clocks_mhz": [table[0], table[-1]] if table else None,
                "limits_mhz": list(slot.limits_mhz()),
                "policy": dict(slot.config.policy),
                "enforcing": slot.enforced,
                "policy_error": slot.policy_error,
                "client_override": slot.override,
                "changed": device.changed,
            }
            try:
                doc["state"] = device.state().to_dict()
            except GovernorError as err:
                doc["state"] = None
                doc["state_error"] = str(err)
            if slot.governor is not None:
                try:
                    doc["governor"] = slot.governor.status()
                except GovernorError as err:
                    doc["governor"] = {"error": str(err)}
            return doc


def run_daemon(config: DaemonConfig, *, opener: Optional[Callable[[str], Device]] = None) -> int:
    """Run the daemon in this (main) thread until SIGTERM/SIGINT; returns the exit status."""
    server = DaemonServer(config, opener=opener)
    previous: Dict[int, Any] = {}

    def _on_signal(signum: int, _frame: Any) -> None:
        log.info("received signal %d: restoring devices and stopping", signum)
        server.request_stop()

    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            previous[signum] = signal.signal(signum, _on_signal)
    try:
        server.start()
        server.serve_forever()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0
