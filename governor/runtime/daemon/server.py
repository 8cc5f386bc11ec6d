"""The daemon: owns the configured devices, enforces the site policy, serves the socket.

The socket is created and removed by :mod:`.listen`. One thread reads every connection
without blocking (:mod:`.connections`): it refuses peers outside the allowed users and group
(:mod:`.peers`), holds each request line to a deadline and a size limit, and hands complete
lines to a few worker threads. A worker validates the line
(:mod:`~governor.devices.daemon.protocol`), checks the allow-list and the clock limits
(:mod:`.config`), and acts on the device (a :class:`~.slots.Slot`) through the Device API
only: nothing a client sends is passed to a shell or a subprocess. Every request is logged
with the caller's uid and pid from ``SO_PEERCRED``.

Actions:

- ``status``: the daemon, each device's state, limits, policy and last client action;
- ``apply`` ``ppw``: lock the GPU to the profile's PPW-optimal clock (clamped to the limits);
  ``apply`` ``max``: lock it to the highest clock within the limits;
- ``lock``: lock the GPU clock to ``[min_mhz, max_mhz]``, which must lie within the limits;
- ``reset``: restore what was changed, then resume the configured policy;
- ``cap`` (admins only): a power limit with a lease from the cluster budget service
  (:mod:`.lease`); a ``reset`` leaves it in force.

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
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple, cast

from governor._version import __version__
from governor.devices.base import Device
from governor.devices.daemon.protocol import (
    ProtocolError,
    Request,
    decode_request,
    error_reply,
    ok_reply,
)
from governor.errors import DeviceLostError, GovernorError, InvalidRequestError
from governor.runtime.daemon.actions import apply_policy, lock_clocks
from governor.runtime.daemon.config import ConfigError, DaemonConfig, DeviceConfig
from governor.runtime.daemon.connections import ConnectionLoop
from governor.runtime.daemon.jobs import Authority
from governor.runtime.daemon.lease import (
    LeaseKeeper,
    after_take,
    before_take,
    cap_refusal,
    forget_lease,
    restore_keeping_cap,
)
from governor.runtime.daemon.listen import bind_socket, group_id, remove_socket
from governor.runtime.daemon.peers import PeerCredentials, PeerPolicy, peer_credentials
from governor.runtime.daemon.slots import Slot

__all__ = [
    "DaemonServer",
    "PeerCredentials",
    "PeerPolicy",
    "bind_socket",
    "peer_credentials",
    "run_daemon",
]

log = logging.getLogger("governor.daemon")


# -- devices -----------------------------------------------------------------------------------
def _load_runtime() -> Optional[Tuple[Any, Any]]:
    """(Governor, policies) from governor.runtime, or None when it is not there."""
    try:
        from governor.runtime import Governor, policies
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
        self._slots: Dict[str, Slot] = {}
        self._listener: Optional[socket.socket] = None
        self._socket_ino: Optional[Tuple[int, int]] = None
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._loop: Optional[ConnectionLoop] = None
        self._peers: Optional[PeerPolicy] = None
        #: what each client may change; the admin group is resolved by start()
        self.authority = Authority(
            admin_uids=frozenset({0, os.geteuid()}), job_records=config.job_records
        )
        self._started_at = time.monotonic()
        self._thread: Optional[threading.Thread] = None
        self._cleanup_lock = threading.Lock()
        self._cleaned = False
        self._serving = False
        self._serving_thread: Optional[threading.Thread] = None
        self._metrics: Any = None
        self.leases = LeaseKeeper()  # the cluster service's caps
        self.leases.attach(lambda: list(self._slots.values()))

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
                group_id(self.config.socket_group, self.config.source), self.config.socket_group
            )
            import shutil

            self.authority = dataclasses.replace(
                self.authority,
                admin_gid=group_id(self.config.admin_group, self.config.source, "admin_group"),
                scontrol=shutil.which("scontrol", path=os.environ.get("PATH", "") + ":/usr/bin"),
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

        for index, dev_config in _numbered_devices(self.config):
            device = opener(dev_config.uri)
            slot = Slot(dev_config, device)
            problem = _limits_problem(self.config, index, slot)
            if problem is not None:  # refused before anything is taken or changed
                device.close()
                raise ConfigError(problem)
            self._slots[dev_config.uri] = slot
            held = before_take(device)  # a dead daemon's cluster cap stays
            slot.take()
            if held is not None:
                after_take(self.leases, slot, held)

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
        self.leases.stop()
        if self._metrics is not None:
            self._metrics.close()
        if self._listener is not None:
            try:
                self._listener.close()
            except OSError:
                pass
        remove_socket(self.config.socket, self._socket_ino)
        for slot in self._slots.values():
            slot.release()
            if self.leases.holds(slot.device.uri):
                forget_lease(slot.device)
        self._stopped.set()
        log.info("governor daemon stopped")

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
        if request.action == "cap":
            refusal = cap_refusal(self.authority, peer)
        else:
            refusal = self.authority.refusal(
                peer, slot.device, [s.device for s in self._slots.values()]
            )
        if refusal is not None:
            raise ProtocolError("not-allowed", refusal, request.id)
        # asked before the device's lock, never under it: the answer may take a subprocess
        # (scontrol pidinfo), and every other request on the device would wait for it
        job = self.authority.job_of(peer) if request.action in ("apply", "lock") else None
        with slot.lock:
            if request.action == "apply":
                result = apply_policy(slot, request, peer, job, self.config.allow_policies)
            elif request.action == "lock":
                result = lock_clocks(slot, request, peer, job)
            elif request.action == "cap":
                result = self.leases.grant(
                    slot,
                    float(cast(float, request.power_w)),
                    float(cast(float, request.lease_s)),
                    float(cast(float, request.fallback_w)),
                    request.holder or f"uid {peer[1]}",
                )
            else:
                result = self._reset(slot)
        return ok_reply(request, result, slot.device.uri)

    def _slot(self, request: Request) -> Slot:
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

    def _reset(self, slot: Slot) -> Dict[str, Any]:
        slot.stop_governor()
        if self.leases.holds(slot.device.uri):  # the cluster's cap stays
            restored = restore_keeping_cap(slot.device)
        else:
            restored = slot.device.restore()
        slot.override = None
        self._enforce(slot)
        return {
            "device": slot.device.uri,
            "restored": restored,
            "policy": slot.config.policy["policy"],
        }

    # -- the configured policy -----------------------------------------------------------------
    def _enforce(self, slot: Slot) -> None:
        """Start the configured policy on ``slot``; failures are logged and kept for status."""
        slot.enforce(self.config.interval_s, _load_runtime)

    # -- status --------------------------------------------------------------------------------
    def _policy_of(self, device: Device) -> Dict[str, Any]:
        """What the metrics show for ``device``: the policy in force and the budget left."""
        for slot in self._slots.values():
            if slot.device is device:
                return slot.policy_info()
        return {}

    def _status(self, slots: List[Slot], peer: PeerCredentials) -> Dict[str, Any]:
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
            "devices": [
                dict(_with_health(slot), cluster=self.leases.info(slot.device)) for slot in slots
            ],
        }


def _with_health(slot: Slot) -> Dict[str, Any]:
    """A device's status entry, with whether it answers its calls (``responding``) and, when
    it does not, why (``not_responding``: a call missed its deadline; retried meanwhile)."""
    try:
        doc = slot.status()
    except DeviceLostError as err:  # lost or not responding: the other devices are served
        device = slot.device
        doc = {
            "uri": device.uri,
            "name": device.identity.name,
            "model": device.identity.model,
            "policy": dict(slot.config.policy),
            "enforcing": slot.enforced,
            "client_override": slot.override,
            "changed": device.changed,
            "state": None,
            "state_error": str(err),
        }
    why = slot.device.not_responding
    doc["responding"] = why is None
    if why is not None:
        doc["not_responding"] = why
    return doc


def _expanded_devices(config: DaemonConfig) -> List[DeviceConfig]:
    """The configured devices, with ``uri = "all"`` standing for every GPU of this host
    that no other table names (found at start: a node's GPUs, however many)."""
    out: List[DeviceConfig] = []
    for dev_config in config.devices:
        if dev_config.uri != "all":
            out.append(dev_config)
            continue
        from governor.devices.registry import resolve_uris

        for uri in resolve_uris("all"):
            if config.device(uri) is None:
                out.append(dataclasses.replace(dev_config, uri=uri))
    return out


def _numbered_devices(config: DaemonConfig) -> List[Tuple[int, DeviceConfig]]:
    """Each device the config names, with the index of its ``[[device]]`` entry (``all``
    becomes the GPUs found)."""
    return [
        (index, dev_config)
        for index, entry in enumerate(config.devices)
        for dev_config in _expanded_devices(dataclasses.replace(config, devices=(entry,)))
    ]


def _limits_problem(config: DaemonConfig, index: int, slot: Slot) -> Optional[str]:
    """Why the device of ``slot`` cannot serve its clients (a device that locks clocks, none
    of them within ``min_mhz..max_mhz``), naming the file and the entry; None when it can."""
    device = slot.device
    if not device.capabilities.lock_gpu_clocks or slot.clocks_within_limits():
        return None
    lo, hi = slot.limits_mhz()
    table = device.supported_clocks_mhz()
    return (
        f"{config.source}: device[{index}]: {slot.config.uri} supports no clock "
        f"within min_mhz..max_mhz {lo:g}-{hi:g} MHz (its clocks: "
        f"{table[0]:g}-{table[-1]:g} MHz)"
    )


def check_devices(
    config: DaemonConfig, *, opener: Optional[Callable[[str], Device]] = None
) -> List[Dict[str, Any]]:
    """Open (read only: no lock, no journal, no write) every device ``config`` names, as the
    daemon would at start, and check its clock limits. Returns one row per device: ``uri``,
    ``name``, ``limits_mhz`` and the ``clocks_mhz`` within them.

    Raises:
        ConfigError: a device cannot be opened, or supports no clock within its limits (the
            message names the file and the key).
    """
    if opener is None:
        from governor.devices.registry import open_device
        from governor.timebase import WallClock

        def opener(uri: str) -> Device:
            return open_device(uri, clock=WallClock())

    rows: List[Dict[str, Any]] = []
    for index, entry in enumerate(config.devices):
        key = f"{config.source}: device[{index}].uri"
        try:
            expanded = _expanded_devices(dataclasses.replace(config, devices=(entry,)))
        except GovernorError as err:
            raise ConfigError(f"{key}: {entry.uri}: {err}") from None
        for dev_config in expanded:
            try:
                device = opener(dev_config.uri)
            except GovernorError as err:
                raise ConfigError(f"{key}: cannot open {dev_config.uri}: {err}") from None
            try:
                slot = Slot(dev_config, device)
                problem = _limits_problem(config, index, slot)
                if problem is not None:
                    raise ConfigError(problem)
                lo, hi = slot.limits_mhz()
                within = slot.clocks_within_limits()
                rows.append(
                    {
                        "uri": dev_config.uri,
                        "name": device.identity.name,
                        "limits_mhz": [lo, hi],
                        "clocks_mhz": within,
                    }
                )
            finally:
                device.close()
    return rows


def run_daemon(config: DaemonConfig, *, opener: Optional[Callable[[str], Device]] = None) -> int:
    """Run the daemon in this (main) thread until SIGTERM/SIGINT; returns the exit status."""
    server = DaemonServer(config, opener=opener)
    previous: Dict[int, Any] = {}

    def _on_signal(signum: int, _frame: Any) -> None:
        log.info("received signal %d: restoring devices and stopping", signum)
        server.request_stop()

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, _on_signal)
    try:
        server.start()
        server.serve_forever()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0
