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
- **A daemon killed or crashed and started again** (a node that rebooted without a clean
  stop) keeps the GPU at ``min(fallback_w, cap)``: each lease is also kept on disk (beside
  the journals, ``cluster-lease-<device>.json``), and before the new daemon takes the device,
  the dead daemon's journal is made to put the power limit back to that safe share instead of
  the driver's original; the original goes into the new daemon's journal, so a clean stop or
  ``governor reset`` still puts it back. (A clean stop of the daemon restores the original:
  stop it only on a node taken out of the budget.)
- **Accounting**: the daemon integrates each GPU's cap over time (``cap_ws``, with
  ``clock_s``), so a job's mean allocated cap is the difference of two readings divided by
  the time between them (what the Slurm prolog and epilog read).
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Optional

from governor.devices.base import Device
from governor.errors import GovernorError, InvalidRequestError

__all__ = [
    "Lease",
    "LeaseKeeper",
    "after_take",
    "before_take",
    "cap_refusal",
    "forget_lease",
    "restore_keeping_cap",
]

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
        if own is not None:
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
            info = self._info(device, now)
        _save_lease(device, set_w, fallback, holder)
        return info

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
        doc["power_limit_range_w"] = None
        try:  # a lost or not-responding GPU: its entry says why, the others are served
            limits = device.power_limit_range() if device.capabilities.power_limit else None
            doc["power_limit_range_w"] = [limits.min_w, limits.max_w] if limits else None
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
                _save_lease(slot.device, set_w, lease.fallback_w, lease.holder)
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


# -- leases on disk: a daemon killed and started again keeps the safe share -------------------
def _lease_path(device: Device) -> Optional[Path]:
    if not getattr(device, "persistent_state", True):
        return None  # a simulated board's state lives in its process
    from governor.devices.lock import key_slug
    from governor.devices.ownership import device_key
    from governor.paths import state_dir

    return Path(state_dir()) / f"cluster-lease-{key_slug(device_key(device))}.json"


def _journaled_original_w(device: Device) -> Optional[float]:
    own = getattr(device, "_ownership", None)
    if own is None:
        return None
    for layer in reversed(own.journal.layers):
        if "power_limit" in layer.original:
            value = layer.original["power_limit"]
            return None if value is None else float(value)
    return None


def _save_lease(device: Device, cap_w: float, fallback_w: float, holder: str) -> None:
    path = _lease_path(device)
    if path is None:
        return
    doc = {"cap_w": cap_w, "fallback_w": fallback_w, "holder": holder, "uri": device.uri}
    original = _journaled_original_w(device)
    if original is not None:
        doc["original_w"] = original
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(doc) + "\n", encoding="utf-8")
        os.replace(str(tmp), str(path))
    except OSError as err:
        log.warning("%s: cannot keep the lease on disk at %s: %s", device.uri, path, err)


def forget_lease(device: Device) -> None:
    """Drop the lease kept on disk (the daemon stopped cleanly: the original is back)."""
    path = _lease_path(device)
    if path is not None:
        try:
            path.unlink()
        except OSError:
            pass


def before_take(device: Device) -> Optional[Dict[str, Any]]:
    """Before the daemon takes ``device``: if a lease of a dead daemon is on disk, make the
    dead daemon's journal put the power limit back to ``min(fallback_w, cap_w)`` (not above
    what the GPU had) instead of the original. Returns the lease (with ``safe_w``), or None."""
    path = _lease_path(device)
    if path is None or not path.exists():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        safe = min(float(doc["fallback_w"]), float(doc["cap_w"]))
    except (OSError, ValueError, KeyError, TypeError) as err:
        log.warning("%s: ignoring the lease on disk %s: %s", device.uri, path, err)
        return None
    from governor.devices.journal import JournalCorruptError, read_journal, write_journal
    from governor.devices.ownership import device_key, journal_path

    jpath = journal_path(device_key(device))
    try:
        journal = read_journal(jpath)
    except (JournalCorruptError, GovernorError, OSError):
        journal = None
    if journal is not None:
        changed = False
        for layer in journal.layers:
            if not layer.persistent and "power_limit" in layer.original:
                original = layer.original["power_limit"]
                if original is not None and "original_w" not in doc:
                    doc["original_w"] = float(original)
                layer.original["power_limit"] = safe
                changed = True
        if changed:
            write_journal(jpath, journal)
    doc["safe_w"] = safe
    return doc


def after_take(keeper: LeaseKeeper, slot: Any, doc: Dict[str, Any]) -> None:
    """After the daemon took the device: the GPU at the safe share, the original back in this
    daemon's journal, the lease kept as run out."""
    device: Device = slot.device
    own = getattr(device, "_ownership", None)
    original = doc.get("original_w")
    if own is not None and original is not None and not own.journaled("power_limit"):
        own.record("power_limit", float(original))
        own.save()
    try:
        set_w = device.set_power_limit(float(doc["safe_w"]))
    except GovernorError as err:
        log.error("%s: cannot hold the safe share %s W: %s", device.uri, doc["safe_w"], err)
        return
    now = keeper._clock()
    with keeper._lock:
        keeper._account(device.uri, now)
        keeper._leases[device.uri] = Lease(
            set_w, set_w, 0.0, now, str(doc.get("holder") or "?"), expired=True
        )
    log.warning(
        "%s: a cluster lease of %s was in force when the last daemon ended: holding the "
        "safe share %g W until the cluster service renews it",
        device.uri,
        doc.get("holder"),
        set_w,
    )
