"""What a governor is made with, before it runs: the clock model of its device and policy,
the policy's controller, and the notes making them gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, List, Mapping, Optional, Tuple, Union

from governor.devices.base import Device, board_power_w
from governor.errors import GovernorError
from governor.runtime.controller_base import Controller
from governor.runtime.model import ClockModel, model_for_device
from governor.runtime.policies import Policy, make_controller
from governor.runtime.tuning_cache import load_online_ppw

__all__ = [
    "ProfileArg",
    "board_rest_w",
    "governed_controller",
    "loaded_model",
    "rated_power_w",
    "request_context",
    "unmetered_board_note",
]

#: what ``Governor(profile=...)`` takes: a profile dict or path, None (look it up), False
#: (none: the generic model)
ProfileArg = Union[None, bool, Mapping[str, Any], str, Path]


def loaded_model(
    device: Device, profile: ProfileArg, policy: Policy
) -> Tuple[ClockModel, Optional[str], List[str], List[str]]:
    """(the clock model, the profile's path, what was found, warnings to say) for
    ``policy`` on ``device`` (see :func:`~governor.runtime.model.model_for_device`)."""
    loaded = model_for_device(device, profile, policy.model_workload)
    warnings = []
    for text in loaded.warnings:
        if text == loaded.model.source and not loaded.model.fitted:
            text += f"; calibrate it once with 'governor calibrate --device {device.uri}'"
        warnings.append(text)
    return loaded.model, loaded.profile_path, list(loaded.found_notes), warnings


def governed_controller(
    policy: Policy,
    model: ClockModel,
    device: Device,
    interval_s: float,
    battery: Optional[Callable[[], float]],
) -> Controller:
    """The controller of ``policy`` on ``model``, made by its row of the policy table
    (:func:`~governor.runtime.policies.make_controller`); a PPW clock an earlier run found
    online for this board is held at once instead of being searched again.

    Raises:
        InvalidRequestError: a clock off the board's range by orders of magnitude (1.3 for
            1.3 GHz), refused as the CLI refuses it, before anything reaches the device.
    """
    from governor.errors import InvalidRequestError
    from governor.runtime.feasibility import clock_unit_slip

    wanted = policy.requested_clock_mhz
    slip = None if wanted is None else clock_unit_slip(wanted, model.clocks_mhz, device.uri)
    if slip is not None:
        raise InvalidRequestError(slip)
    return make_controller(
        policy,
        model,
        interval_s=interval_s,
        battery=battery,
        energy_counter=device.capabilities.energy_counter,
        kept_ppw=lambda workload: load_online_ppw(device, workload),
        mem_clock_mhz=_mem_clock_mhz(device) if model.ppw_pair_mhz is not None else None,
    )


def board_rest_w(device: Device) -> Tuple[bool, Optional[float]]:
    """One reading at the start: (whether ``device`` reports whole-board power, the rest of
    the board in W: board input − GPU figure, None when not known). A failed read counts as
    reporting it (the telemetry checks say so once running)."""
    try:
        sample = device.sample()
    except (GovernorError, OSError):
        return True, None
    board_w = board_power_w(sample)
    if board_w is None or sample.power_w is None:
        return board_w is not None, None
    return True, max(0.0, board_w - sample.power_w)


def request_context(
    device: Device, policy: Policy
) -> Tuple[Optional[float], Optional[float], Optional[float]]:
    """What :mod:`.feasibility` adds to the clock model for ``policy``: (the rest of the board
    in W, read once where the policy has an energy budget metered on the board, else None;
    the device's highest power limit in W, None without one; the board's rated power in W
    from the catalog, None for a board it does not list)."""
    rest_w = None
    if policy.budget_j is not None and (policy.budget_scope or "board") == "board":
        rest_w = board_rest_w(device)[1]
    try:
        limits = device.power_limit_range()
    except (GovernorError, OSError):
        limits = None
    return rest_w, (limits.max_w if limits is not None else None), rated_power_w(device)


def rated_power_w(device: Device) -> Optional[float]:
    """The rated power of ``device``'s board in W (a Jetson module's rating, a card's power
    limit) from the simulated catalog, which lists the same boards by the same model names;
    None for a board it does not list."""
    from governor.devices.sim.catalog import load_catalog

    try:
        spec = load_catalog().get(str(device.identity.model))
    except (GovernorError, OSError, AttributeError):
        return None
    rated = getattr(spec, "power_limit_w", None) if spec is not None else None
    return float(rated) if rated else None


def _mem_clock_mhz(device: Device) -> Optional[float]:
    """The memory clock ``device`` is at (its journaled lock, else what it reads); None where
    it reads none."""
    try:
        state = device.state().mem_clock_mhz
        return state if state is not None else device.sample().mem_clock_mhz
    except (GovernorError, OSError):
        return None


def unmetered_board_note(device: Device) -> Optional[str]:
    """What to say when a board-scope budget can only be metered on ``device``'s GPU
    figure (None: the device reports whole-board power, or reading it failed, which the
    telemetry checks say once running)."""
    if board_rest_w(device)[0]:
        return None
    return (
        "the device reports no whole-board power: the battery budget is metered "
        "on its GPU figure (scope gpu)"
    )
