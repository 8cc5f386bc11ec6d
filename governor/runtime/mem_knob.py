"""The memory clock as the battery policy's second knob (issue 48 item 5).

The battery controller chooses the core clock for its power plan as it does on a board with
one knob; this part chooses the memory clock beside it, from what the controller knows of
the load now:

- busy on a load the controller reads as compute-bound (its memory share from power,
  :class:`.ShareEstimator`, no more than ``SHARE_SAME``): the memory clock of the profile's
  (core, memory) pair (``tuning.ppw-pair.<load>``, found by ``governor calibrate`` on the
  compute-bound calibration load: :mod:`governor.models.memory` says a compute-bound load's
  time does not depend on the memory clock while the memory's background power falls with
  it), so the watts the memory no longer draws go to the core clock;
- busy on a memory-bound load: the default memory clock (a memory-bound load's time grows
  as the memory clock falls; a lower core clock is what the controller gives it);
- in a wait (:meth:`.BurstStats.waiting`): the lowest memory clock, the least the board can
  idle at; in a gap between bursts, the memory clock stays.

The controller keeps its one-knob model: the power of a busy period at a lower memory clock
is given to it as it would have been at the default memory clock (the drop measured at the
first switch, against the controller's corrected model at the clock that ran), so its
share estimate and power correction read the load, not the memory clock; the budget is
metered as it is spent, so the watts saved stay in it and the plan gives them to the core
clock. Every memory-clock change goes through ``Device.lock_mem_clock``: journaled in the
governor's layer first, restored when the governor releases the device, and undone by
``governor reset`` after a ``kill -9``.

Active only where the memory clock can be set, the board offers several, and nobody pinned
it (no memory-clock lock held: ``governor run --mem-clock`` or ``apply --mem-clock`` pin it,
and the policy then governs the core clock alone, the core-only baseline).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable, Dict, Optional, Tuple

from governor.errors import GovernorError

if TYPE_CHECKING:
    from governor.devices.base import Device
    from governor.runtime.controller_base import Controller, Observation
    from governor.runtime.model import ClockModel

__all__ = ["MemoryKnob", "memory_knob", "next_knob"]

SHARE_UP = 0.04  # a memory share above this goes back to the default memory clock


class MemoryKnob:
    """The memory clock beside a battery controller's core clock (see the module)."""

    def __init__(
        self, device: Device, table_mhz: Tuple[float, ...], default_mhz: float, low_mhz: float
    ) -> None:
        self.device = device
        self.table_mhz = table_mhz
        self.default_mhz = default_mhz
        self.low_mhz = low_mhz  # the busy compute-bound phase's
        self.mem_mhz = default_mhz  # where it is now
        self.saved_w: Dict[float, float] = {}  # power drop at each memory clock (W)
        self._before: Optional[Tuple[float, float]] = None  # (ratio, mem) of the last busy
        self.changes = 0
        self.off = False  # the device refused a memory clock: the core clock alone

    def adjust(self, obs: Observation, controller: Controller) -> Observation:
        """``obs`` as ``controller`` is to see it: a busy period's power at a lower memory
        clock raised by the drop that memory clock brings (learnt at the first busy period
        after a switch, from the last one at the default, each over the controller's
        corrected model power at the clock that ran)."""
        if self.off or obs.busy is False or obs.power_w is None:
            return obs
        tracker = getattr(controller, "tracker", None)
        f = obs.applied_mhz
        model_power_w = tracker.predicted_w(f) if tracker else controller.model.power_at(f)
        mem = self.mem_mhz
        if mem == self.default_mhz:
            if model_power_w > 0:
                self._before = (obs.power_w / model_power_w, mem)
            return obs
        if mem not in self.saved_w and self._before is not None:
            expected = self._before[0] * model_power_w
            self.saved_w[mem] = max(0.0, expected - obs.power_w)
        drop = self.saved_w.get(mem, 0.0)
        return dataclasses.replace(obs, power_w=obs.power_w + drop) if drop else obs

    def choose(self, controller: Controller, obs: Observation) -> float:
        """The memory clock for the next period (see the module)."""
        plan = getattr(getattr(controller, "budget", None), "plan", None)
        if obs.busy is False:
            if plan is not None and plan.bursts.waiting():
                return self.table_mhz[0]
            return self.mem_mhz
        share = getattr(controller, "share", None)
        k = getattr(share, "k", None)
        if k is None:
            return self.default_mhz
        if self.mem_mhz == self.low_mhz:
            return self.low_mhz if k <= SHARE_UP else self.default_mhz
        from governor.runtime.battery_parts.share import SHARE_SAME

        return self.low_mhz if k <= SHARE_SAME else self.default_mhz

    def step(self, controller: Controller, obs: Observation, note: Callable[[str], None]) -> None:
        """Choose and set the memory clock for the next period; where the device refuses
        it, said once through ``note``, and the core clock goes on alone (the memory clock
        stays where it is, its lock in the governor's layer)."""
        if self.off:
            return
        try:
            self.apply(self.choose(controller, obs))
        except GovernorError as err:
            note(f"the memory clock could not be set ({err}): the core clock alone from now")
            self.off = True

    def keep(self, policy_name: str) -> Optional[MemoryKnob]:
        """This knob under a new policy: itself for the battery policy; for another, the
        memory clock back at the default (its lock stays in the governor's layer, restored
        with it) and None."""
        if policy_name == "battery":
            return self
        self.apply(self.default_mhz)
        return None

    def apply(self, mem_mhz: float) -> None:
        """Lock the memory clock at ``mem_mhz`` (journaled in the governor's layer)."""
        if mem_mhz == self.mem_mhz:
            return
        self.device.lock_mem_clock(mem_mhz)
        self.mem_mhz = mem_mhz
        self.changes += 1


def next_knob(
    knob: Optional[MemoryKnob], device: Device, policy_name: str, model: ClockModel
) -> Optional[MemoryKnob]:
    """The knob under a new policy (``Governor.set_policy``): ``knob`` kept
    (:meth:`MemoryKnob.keep`), else a new one where ``policy_name`` governs both."""
    if knob is not None:
        return knob.keep(policy_name)
    return memory_knob(device, policy_name, model)


def memory_knob(device: Device, policy_name: str, model: ClockModel) -> Optional[MemoryKnob]:
    """The memory knob for ``policy_name`` on ``device`` (its compute-bound memory clock
    the pair's of ``model``'s profile); None where the policy governs the core clock alone
    (not the battery policy, a memory clock that cannot be set or has one value, or one
    pinned by a lock)."""
    pair = model.ppw_pair_mhz
    pair_mem_mhz = pair[1] if pair else None
    if policy_name != "battery" or not device.capabilities.lock_mem_clock:
        return None
    try:
        table = tuple(device.supported_mem_clocks_mhz())
        if len(table) < 2 or device.state().mem_clock_mhz is not None:
            return None
        now = device.sample().mem_clock_mhz
    except (GovernorError, OSError):
        return None
    if now is None:
        return None
    default = float(now)
    low = default if pair_mem_mhz is None or pair_mem_mhz >= default else float(pair_mem_mhz)
    return MemoryKnob(device, table, default, low)
