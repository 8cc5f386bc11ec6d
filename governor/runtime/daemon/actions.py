"""The daemon's requests that change a device: ``apply`` a profile policy, ``lock`` clocks.

Each runs under the device's slot lock (the server takes it) and leaves the slot marked with
who asked, so ``status`` and a later ``reset`` know whose setting is in force.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple, cast

from governor.devices.base import Device
from governor.devices.daemon.protocol import ProtocolError, Request
from governor.runtime.daemon.peers import PeerCredentials
from governor.runtime.daemon.slots import Slot

__all__ = ["apply_policy", "lock_clocks"]

_TOLERANCE_MHZ = Device.CLOCK_TOLERANCE_MHZ


def apply_policy(
    slot: Slot,
    request: Request,
    peer: PeerCredentials,
    job: Optional[str],
    allow_policies: Tuple[str, ...],
) -> Dict[str, Any]:
    """Apply the profile policy the request names (ppw, max) if the daemon allows it."""
    policy = str(request.policy)
    if policy not in allow_policies:
        from governor.runtime.daemon.config import CLIENT_POLICIES

        code = "not-allowed" if policy in CLIENT_POLICIES else "bad-request"
        raise ProtocolError(
            code,
            f"policy {policy!r} cannot be applied through the daemon; allowed: {', '.join(allow_policies)}",
            request.id,
        )
    slot.stop_governor()
    previous = slot.device.state().to_dict()
    applied = slot.apply_static(policy)
    slot.mark(applied, peer, job)
    return {"device": slot.device.uri, "applied": applied, "previous": previous}


def lock_clocks(
    slot: Slot, request: Request, peer: PeerCredentials, job: Optional[str]
) -> Dict[str, Any]:
    """Lock the GPU clocks to the request's range, within the limits set for the slot."""
    lo_limit, hi_limit = slot.limits_mhz()
    low = float(cast(float, request.min_mhz))  # decode_request requires it for a lock
    high = float(request.max_mhz) if request.max_mhz is not None else low
    for key, value in (("min_mhz", low), ("max_mhz", high)):
        if value < lo_limit - _TOLERANCE_MHZ or value > hi_limit + _TOLERANCE_MHZ:
            raise ProtocolError(
                "out-of-limits",
                f"{key} {value:g} MHz is outside the limits {lo_limit:g}-{hi_limit:g} MHz set for {slot.device.uri}",
                request.id,
            )
    slot.stop_governor()
    previous = slot.device.state().to_dict()
    lo, hi = slot.device.lock_gpu_clocks(slot.nearest_allowed(low), slot.nearest_allowed(high))
    applied = {"gpu_clocks_mhz": [lo, hi]}
    slot.mark(applied, peer, job)
    return {"device": slot.device.uri, "applied": applied, "previous": previous}
