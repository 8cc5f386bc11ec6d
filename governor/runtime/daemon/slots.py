"""The daemon's devices: each configured device with its lock, its policy and the last client
action (a :class:`Slot`).

A slot knows the clock limits clients must stay within, locks the clock for the static
policies (``ppw``, ``max``, ``clock``), starts and stops the configured policy's governor,
restores and closes its device when the daemon stops, and reports its state for ``status``
and the metrics. The server (:mod:`.server`) holds the slots and decides which client may
ask what.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from governor.devices.base import Device
from governor.errors import DeviceBusyError, GovernorError
from governor.runtime.daemon.config import DeviceConfig
from governor.runtime.daemon.peers import PeerCredentials

__all__ = ["RuntimeLoader", "Slot"]

log = logging.getLogger("governor.daemon")

_TOLERANCE_MHZ = Device.CLOCK_TOLERANCE_MHZ

#: (Governor, policies) from governor.runtime, or None when it is not there
RuntimeLoader = Callable[[], Optional[Tuple[Any, Any]]]


class Slot:
    """A configured device with its lock, its policy runner and the last client action."""

    def __init__(self, config: DeviceConfig, device: Device) -> None:
        self.config = config
        self.device = device
        self.lock = threading.RLock()
        self.governor: Any = None
        self.enforced: Optional[Dict[str, Any]] = None
        self.policy_error: Optional[str] = None
        self.override: Optional[Dict[str, Any]] = None

    def take(self) -> None:
        """Take the device like any other owner: its lock for the daemon's whole life (a
        device a live governor holds is refused), and a journal layer on disk, so that the
        next owner or ``governor reset`` can undo this daemon's changes after a ``kill -9``.
        Settings a dead owner left are restored by taking it; ``governor apply``'s stay.
        Then log what the daemon cannot do with it (lock its clock). Limits that hold no
        clock are refused before (``server._limits_problem``).

        Raises:
            DeviceBusyError: another live process holds the device.
        """
        device = self.device
        try:
            device.acquire(command=f"governor daemon (pid {os.getpid()})")
        except DeviceBusyError as err:
            raise DeviceBusyError(f"the daemon cannot serve {self.config.uri}: {err}") from None
        if not device.capabilities.lock_gpu_clocks:
            log.warning("%s cannot lock its GPU clock: only status will work", device.uri)

    # -- clock limits --------------------------------------------------------------------------
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

    # -- policies ------------------------------------------------------------------------------
    def apply_static(self, policy: str) -> Dict[str, Any]:
        """Lock the clock for ``ppw`` (profile's PPW-optimal clock), ``clock`` (the configured
        ``clock_mhz``) or ``max`` (top clock), all within the configured limits."""
        device = self.device
        applied: Dict[str, Any] = {"policy": policy}
        if policy == "ppw":
            from governor.profiles.profile import load_profile_for

            path, doc, warnings = load_profile_for(device)
            wanted = float(doc["ppw_optimal_clock_mhz"])
            applied["profile"] = str(path)
            if warnings:
                applied["warnings"] = list(warnings)
        elif policy == "clock":
            wanted = float(self.config.policy["clock_mhz"])
        else:
            allowed = self.clocks_within_limits()
            wanted = allowed[-1] if allowed else self.limits_mhz()[1]
        clock = self.nearest_allowed(wanted)
        if abs(clock - wanted) > _TOLERANCE_MHZ:
            applied["clamped_from_mhz"] = wanted
        lo, hi = device.lock_gpu_clocks(clock)
        applied["gpu_clocks_mhz"] = [lo, hi]
        return applied

    def enforce(self, interval_s: float, load_runtime: RuntimeLoader) -> None:
        """Start the configured policy (a governor every ``interval_s`` when ``load_runtime``
        finds governor.runtime, else a static clock lock); failures are logged and kept for
        status."""
        spec = dict(self.config.policy)
        name = spec["policy"]
        self.enforced = None
        self.policy_error = None
        if name == "none" or not self.device.capabilities.lock_gpu_clocks:
            return
        try:
            runtime = load_runtime()
            if runtime is not None:
                governor_cls, policies = runtime
                policy = policies.from_spec(spec)
                self.governor = governor_cls(
                    self.device,
                    policy,
                    profile=None,
                    interval_s=interval_s,
                    handle_signals=False,
                )
                self.governor.start()
                self.enforced = {"policy": name, "by": "governor", "spec": spec}
            elif _is_static(name):
                self.enforced = dict(self.apply_static(name), by="static")
            else:
                raise GovernorError(
                    f"the {name} policy needs governor.runtime, which this installation lacks"
                )
            log.info("%s: enforcing %s", self.device.uri, self.enforced)
        except GovernorError as err:
            self.policy_error = str(err)
            self.governor = None
            log.error("%s: cannot enforce the %s policy: %s", self.device.uri, name, err)

    def stop_governor(self) -> None:
        governor = self.governor
        self.governor = None
        self.enforced = None
        if governor is not None:
            try:
                governor.stop()
            except GovernorError as err:
                log.warning("%s: stopping the policy: %s", self.device.uri, err)

    def mark(self, what: Dict[str, Any], peer: PeerCredentials, job: Optional[str] = None) -> None:
        """Record a client's action (``what``) and who asked (and from which Slurm job, which
        that job's epilog reads to undo it), for status and the metrics."""
        pid, uid, _ = peer
        self.override = dict(
            what, by_uid=uid, by_pid=pid, by_job=job, at_unix_s=round(time.time(), 3)
        )

    def release(self) -> None:
        """Stop the policy, restore what was changed and close the device (errors logged)."""
        with self.lock:
            self.stop_governor()
            try:
                restored = self.device.restore()
                if restored:
                    log.info("%s: restored %s", self.device.uri, restored)
            except GovernorError as err:
                log.error("%s: could not restore: %s (run 'governor reset')", self.device.uri, err)
            finally:
                try:
                    self.device.close()
                except GovernorError as err:  # pragma: no cover - defensive
                    log.warning("%s: close failed: %s", self.device.uri, err)

    # -- status --------------------------------------------------------------------------------
    def policy_info(self) -> Dict[str, Any]:
        """What the metrics show: the policy in force, who set it and the budget left."""
        governor = self.governor
        state = governor.controller.budget_state() if governor is not None else None
        budget = state.remaining_j if state is not None else None
        if self.override:
            return {"policy": self.override.get("policy", "lock"), "source": "client"}
        name = (self.enforced or {}).get("policy") or "none"
        return {"policy": name, "source": "daemon", "budget_remaining_j": budget}

    def status(self) -> Dict[str, Any]:
        """The device's entry in ``status``: its clocks, limits, policy and state."""
        with self.lock:
            device = self.device
            table = device.supported_clocks_mhz()
            doc: Dict[str, Any] = {
                "uri": device.uri,
                "name": device.identity.name,
                "model": device.identity.model,
                "supported_clocks_mhz": [table[0], table[-1]] if table else None,
                "limits_mhz": list(self.limits_mhz()),
                "policy": dict(self.config.policy),
                "enforcing": self.enforced,
                "policy_error": self.policy_error,
                "client_override": self.override,
                "changed": device.changed,
            }
            try:
                doc["state"] = device.state().to_dict()
            except GovernorError as err:
                doc["state"] = None
                doc["state_error"] = str(err)
            if self.governor is not None:
                try:
                    doc["governor"] = self.governor.status()
                except GovernorError as err:
                    doc["governor"] = {"error": str(err)}
            return doc


def _is_static(name: str) -> bool:
    """Whether policy ``name`` is one clock lock the daemon can hold without a governor."""
    from governor.runtime.policies import POLICIES

    kind = POLICIES.get(name)
    return kind is not None and kind.static
