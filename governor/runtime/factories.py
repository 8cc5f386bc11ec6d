"""The controller factories that the policy table (:data:`governor.runtime.policies.POLICIES`)
names, one per policy: ``factory(policy, model, context) -> Controller``.

None of the controller modules imports the policies at run time (only for type checking),
so the table can hold these functions themselves while the controllers stay importable
alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from governor.runtime.battery_controller import BatteryController
from governor.runtime.cap_controller import PowerCapController
from governor.runtime.controller_base import ControlContext, Controller, StaticController
from governor.runtime.floor_controller import FloorThroughputController
from governor.runtime.model import ClockModel
from governor.runtime.ppw_local import OnlinePpwController, PriorPpwController
from governor.runtime.throughput_controller import ThroughputController

if TYPE_CHECKING:
    from governor.runtime.policies import (
        Battery,
        FixedClock,
        MaxEfficiency,
        Performance,
        PowerCap,
        Throughput,
    )

__all__ = [
    "battery_controller",
    "fixed_clock_controller",
    "power_cap_controller",
    "ppw_controller",
    "throughput_controller",
    "top_clock_controller",
]


def ppw_controller(policy: MaxEfficiency, model: ClockModel, context: ControlContext) -> Controller:
    """The calibrated PPW clock; searched online over the whole table when the model has
    none, and around the profile's clock when the profile is not this unit's own. A clock
    an earlier run found online for this board (``context.kept_ppw``) is held at once
    instead of being searched again."""
    searched = not model.fitted or model.prior
    known = context.kept_ppw(policy.workload) if searched and context.kept_ppw else None
    if known is not None:
        note = (
            f"PPW clock {known['clock_mhz']:g} MHz found online by an earlier run "
            f"({known.get('probes', '?')} probes, {known.get('date', '?')}); "
            "governor calibrate makes it exact"
        )
        kept = StaticController(model, float(known["clock_mhz"]), notes=(note,))
        kept.result_kept = True
        return kept
    if not model.fitted:
        return OnlinePpwController(model, settle_s=context.settle_s)
    if model.prior:
        return PriorPpwController(model, settle_s=context.settle_s)
    pair = model.ppw_pair_mhz
    if pair is not None and context.mem_clock_mhz is not None:
        if abs(context.mem_clock_mhz - pair[1]) < 0.5:  # the memory clock is the pair's
            note = f"PPW pair: {pair[0]:g} MHz core at the pair's {pair[1]:g} MHz memory clock"
            return StaticController(model, pair[0], notes=(note,))
    return StaticController(model, model.ppw_clock_mhz)


def top_clock_controller(
    policy: Performance, model: ClockModel, context: ControlContext
) -> Controller:
    return StaticController(model, model.top_mhz)


def fixed_clock_controller(
    policy: FixedClock, model: ClockModel, context: ControlContext
) -> Controller:
    return StaticController(model, policy.clock_mhz)


def power_cap_controller(
    policy: PowerCap, model: ClockModel, context: ControlContext
) -> Controller:
    return PowerCapController(model, policy, context.interval_s)


def battery_controller(policy: Battery, model: ClockModel, context: ControlContext) -> Controller:
    return BatteryController(model, policy, context.battery)


def throughput_controller(
    policy: Throughput, model: ClockModel, context: ControlContext
) -> Controller:
    """The rate's controller; with a battery floor, the rate as long as the budget lasts.
    Clocks are searched by measurement where the device meters energy."""
    search = context.energy_counter
    floor = policy.floor()
    if floor is not None:
        return FloorThroughputController(model, policy, floor, context.battery, search=search)
    return ThroughputController(model, policy, search=search)
