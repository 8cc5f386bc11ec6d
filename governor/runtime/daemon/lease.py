"""Power caps a cluster budget service sets on this node's GPUs, each with a lease (issue 45).

The cluster service (:mod:`governor.fleet.cluster_service`) asks each node's daemon for
``cap``: a power limit for one GPU, the lease in seconds, and the safe share the GPU falls
back to if the lease runs out (the budget divided over the GPUs the service knows). The cap
is set through the Device API, so it is journaled before it is written and restored by the
rules of :mod:`governor.devices.ownership` when the daemon stops. Renewing is asking again.

- **Lease**: if no ``cap`` for a GPU arrives within its lease (the service stopped, this
  node lost it), the daemon lowers the GPU to ``min(fallback_w, its cap)`` by itself. The cap
  only ever goes down without the service, so the sum over the cluster stays within the
  budget the service kept it under.
- **Only admins cap**: ``cap`` is refused to every client that is not an admin of the daemon
  (root, the daemon's user, ``admin_group``), so a job cannot raise its own GPU's cap; a job's
  ``reset`` (or its epilog's) puts back what it changed and leaves the cap in force.
- **Accounting**: the daemon integrates each GPU's cap over time (``cap_ws``, with
  ``clock_s``), so a job's mean allocated cap is the difference of two readings divided by
  the time between them (what the Slurm prolog and epilog read).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Optional

from governor.devices.base import Device
from governor.errors import GovernorError, InvalidRequestError

__all__ = ["Lease", "LeaseKeeper", "cap_refusal", "restore_keeping_cap"]

log = logging.getLogger("governor.daemon")

#: the least lease accepted (s): shorter would lapse between two renewals of a busy service
MIN_LEASE_S = 0.5
#: the longest lease accepted (s)
MAX_LEASE_S = 86400.0


@dataclass
class Lease:
    """One GPU's cap from the cluster service."""

    cap_w: float
    fallback_w: float
    lease_s: float
    expires_at: float  # on the keeper's clock
    holder: str
    expired: bool = False

    def to_dict(self, now: float) -> Dict[str, Any]:
        return {
            "cap_w": self.cap_w,
            "fallback_w": self.fallback_w,
            "lease_s": self.lease_s,
            "expires_in_s": round(max(0.0, self.expires_at - now), 3),
            "holder": self.holder,
            "expired": self.expired,
        }


def restore_keeping_cap(device: Device) -> Dict[str, Any]:
    """:meth:`Device.restore` of everything but the power limit, which stays as it is and
    stays journaled (its original is put back when the daemon stops)."""
    own = getattr(device, "_ownership", None)
    layer = own.journal.top if own is not None else None
    if layer is None or "power_limit" not in layer.original:
        return device.restore()
    original = layer.original.pop("power_limit")
    applied = layer.applied.pop("power_limit", None)
    try:
        return device.restore()
    finally:
        layer.original["power_limit"] = original
        if applied is not None:
            layer.applied["power_limit"] = applied
        own.save()


class LeaseKeeper:
    """The leases of one daemon, and the thread that lets them run out."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._leases: Dict[str, Lease] = {}
        self._cap_ws: Dict[str, float] = {}
        self._since: Dict[str, float] = {}
        self._start = clock()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def holds(self, uri: str) -> bool:
        return uri in self._leases

    def _account(self, uri: str, now: float) -> None:
        lease = self._leases.get(uri)
        if lease is not None:
            self._cap_ws[uri] = self._cap_ws.get(uri, 0.0) + lease.cap_w * (now - self._since[uri])
        self._since[uri] = now

    def grant(
        self, slot: Any, power_w: float, lease_s: float, fallback_w: float, holder: str
    ) -> Dict[str, Any]:
        """Set ``slot``'s GPU to ``power_w`` for ``lease_s`` (caller holds ``slot.lock``).

        Raises:
            InvalidRequestError: a lease out of range, a cap outside the GPU's range.
            GovernorError: the device has no power limit or refused it.
        """
        device: Device = slot.device
        if not (MIN_LEASE_S <= lease_s <= MAX_LEASE_S):
            raise InvalidRequestError(
                f"lease_s {lease_s:g} is outside {MIN_LEASE_S:g}-{MAX_LEASE_S:g} s"
            )
        limits = device.power_limit_range()
        if not device.capabilities.power_limit or limits is None:
            raise GovernorError(f"{device.uri} has no settable power limit")
        set_w = device.set_power_limit(power_w)  # journaled first, range checked
        fallback = max(limits.min_w, min(float(fallback_w), set_w))
        now = self._clock()
        with self._lock:
            self._account(device.uri, now)
            self._leases[device.uri] = Lease(set_w, fallback, lease_s, now + lease_s, holder)
            self._ensure_thread()
            return self._info(device, now)

    def _info(self, device: Device, now: float) -> Dict[str, Any]:
        lease = self._leases.get(device.uri)
        cap_ws = self._cap_ws.get(device.uri, 0.0)
        if lease is not None:
            cap_ws += lease.cap_w * (now - self._since[device.uri])
        doc: Dict[str, Any] = {
            "lease": lease.to_dict(now) if lease is not None else None,
            "cap_ws": round(cap_ws, 3),
            "clock_s": round(now - self._start, 3),
        }
        return doc

    def info(self, device: Device) -> Dict[str, Any]:
        """The GPU's lease, its cap integral, its power-limit range, power limit and power."""
        with self._lock:
            doc = self._info(device, self._clock())
        limits = device.power_limit_range() if device.capabilities.power_limit else None
        doc["power_limit_range_w"] = [limits.min_w, limits.max_w] if limits else None
        try:
            doc["power_limit_w"] = device.state().power_limit_w
            power = device.sample().power_w
            doc["power_w"] = power if power is not None and math.isfinite(power) else None
        except GovernorError as err:
            doc["power_limit_w"] = None
            doc["power_w"] = None
            doc["error"] = str(err)
        doc["uuid"] = device.identity.uuid
        doc["model"] = device.identity.model
        return doc

    # -- running out ---------------------------------------------------------------------------
    def _ensure_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="governor-leases", daemon=True)
            self._thread.start()

    def attach(self, slots: Callable[[], Iterable[Any]]) -> None:
        """Where the keeper finds the daemon's slots (to lower a GPU whose lease ran out)."""
        self._slots = slots

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.tick()

    def tick(self) -> None:
        """Lower every GPU whose lease ran out to ``min(fallback_w, cap_w)``."""
        now = self._clock()
        with self._lock:
            due = [
                u
                for u, lease in self._leases.items()
                if not lease.expired and now >= lease.expires_at
            ]
        if not due:
            return
        for slot in getattr(self, "_slots", lambda: [])():
            uri = slot.device.uri
            if uri not in due:
                continue
            with slot.lock:
                with self._lock:
                    lease = self._leases.get(uri)
                    if lease is None or lease.expired or self._clock() < lease.expires_at:
                        continue  # renewed meanwhile
                target = min(lease.fallback_w, lease.cap_w)
                try:
                    set_w = slot.device.set_power_limit(target) if target < lease.cap_w else target
                except GovernorError as err:
                    log.error(
                        "%s: lease ran out, cannot lower the cap to %g W: %s", uri, target, err
                    )
                    continue
                with self._lock:
                    self._account(uri, self._clock())
                    lease.cap_w = set_w
                    lease.expired = True
                log.warning(
                    "%s: the cluster lease of %s ran out (%g s): cap %g W (safe share)",
                    uri,
                    lease.holder,
                    lease.lease_s,
                    set_w,
                )

    def stop(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(2.0)


def cap_refusal(authority: Any, peer: Any) -> Optional[str]:
    """None when the client ``peer`` may set cluster caps (an admin of the daemon, or an
    in-process caller), else one line saying why not."""
    from governor.runtime.daemon.jobs import _groups_of

    pid, uid, gid = peer
    if uid is None or uid in authority.admin_uids:
        return None
    if authority.admin_gid is not None and gid is not None:
        groups = _groups_of(pid, uid, gid, authority.proc_root) if pid is not None else {gid}
        if authority.admin_gid in groups:
            return None
    job = authority.job_of(peer)
    who = f"uid {uid}" + (f" in Slurm job {job}" if job else "")
    return f"{who} may not set power caps: only the cluster service (an admin of the daemon) may"
