"""Which memory knob a policy gets (issue 48 item 5): the throughput policy's, which reads
the frames' measured time (:mod:`.mem_frames`), or the one that reads power for the battery,
power-cap and online PPW policies (:mod:`.mem_knob`); and the knob handed from policy to
policy (:func:`next_knob`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Tuple

from governor.runtime.mem_frames import frame_knob
from governor.runtime.mem_knob import MemoryKnob, memory_knob

if TYPE_CHECKING:
    from governor.devices.base import Device
    from governor.runtime.model import ClockModel

__all__ = ["knob_for", "next_knob"]


def knob_for(
    device: Device, policy_name: str, model: ClockModel, *, owned: bool = False
) -> Optional[MemoryKnob]:
    """The memory knob for ``policy_name`` on ``device`` (None: the core clock alone); the
    throughput policy's tries the profile's pair's memory clock, else the next one down."""
    if policy_name == "throughput":
        pair = model.ppw_pair_mhz
        return frame_knob(device, pair[1] if pair else None, owned)
    return memory_knob(device, policy_name, model, owned=owned)


def next_knob(
    knob: Optional[MemoryKnob],
    device: Device,
    policy_name: str,
    model: ClockModel,
    held_mhz: Optional[float],
) -> Tuple[Optional[MemoryKnob], Optional[float]]:
    """The knob under a new policy (``Governor.set_policy``) and the memory clock the
    governor holds after the switch (``held_mhz``: the one it held before; None: it set
    none). ``knob`` is kept where it serves ``policy_name`` (:meth:`MemoryKnob.keep`);
    else it puts the default memory clock back, and a new knob governs from there where
    ``policy_name`` governs both (battery to power cap and back). A memory clock the
    governor holds is its own lock, no pin (:func:`.mem_knob.memory_knob`)."""
    if knob is not None:
        if knob.keep(policy_name) is knob:
            return knob, held_mhz
        if held_mhz is not None or knob.changes:
            held_mhz = knob.default_mhz  # (keep put it back)
    return knob_for(device, policy_name, model, owned=held_mhz is not None), held_mhz
