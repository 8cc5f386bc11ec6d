"""The controller a governor starts with, where the PPW clock may already be known: a clock an
earlier run found online (kept in the board's own profile, ``tuning.online_ppw``) is held at
once instead of being searched again, and a clock found now is kept for the next run."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from governor.devices.base import Device
from governor.errors import GovernorError
from governor.runtime import policies as _policies
from governor.runtime.controllers import (
    Controller,
    OnlinePpwController,
    PriorPpwController,
    StaticController,
    make_controller,
)
from governor.runtime.model import ClockModel
from governor.runtime.tuning_cache import load_online_ppw, save_online_ppw

__all__ = ["governed_controller", "keep_online_ppw"]


def governed_controller(
    policy: _policies.Policy,
    model: ClockModel,
    device: Device,
    interval_s: float,
    battery: Optional[Callable[[], float]],
) -> Tuple[Controller, List[str], bool]:
    """(controller, notes to say, whether its PPW clock is already kept): the policy's
    controller, or the PPW clock an earlier run found online for this board, held at once
    (a PPW search with no calibration of this unit, or a prior's, is not run again)."""
    searched = not model.fitted or model.prior
    known = None
    if isinstance(policy, _policies.MaxEfficiency) and searched:
        known = load_online_ppw(device, policy.workload)
    if known is not None:
        note = (
            f"PPW clock {known['clock_mhz']:g} MHz found online by an earlier run "
            f"({known.get('probes', '?')} probes, {known.get('date', '?')}); "
            "governor calibrate makes it exact"
        )
        return StaticController(model, float(known["clock_mhz"])), [note], True
    controller = make_controller(
        policy,
        model,
        interval_s=interval_s,
        battery=battery,
        energy_counter=device.capabilities.energy_counter,
    )
    notes: List[str] = []
    if isinstance(controller, OnlinePpwController):
        notes.append("finding the PPW clock online: a few probes of the running load")
    elif isinstance(controller, PriorPpwController):
        notes.append(
            f"confirming the profile's PPW clock {model.ppw_clock_mhz:g} MHz on this "
            "unit: a few probes of the running load around it"
        )
    return controller, notes, False


def keep_online_ppw(device: Device, workload: Optional[str], result: Dict[str, Any]) -> str:
    """Keep a PPW clock found online in the board's profile; the line that says where (or
    why it could not be kept)."""
    try:
        path = save_online_ppw(device, workload, result)
    except (OSError, GovernorError) as err:
        return f"PPW clock {result['clock_mhz']:g} MHz found online; not kept: {err}"
    return (
        f"PPW clock {result['clock_mhz']:g} MHz found online after "
        f"{result['found_after_s']:.0f} s ({result['probes']} probes); kept in {path}"
    )
