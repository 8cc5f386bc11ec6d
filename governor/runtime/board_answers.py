"""What a governor answers an app about its own board's kernels: the tiles and thread
blocks tuned offline, and the per-clock kernel configuration that follows the operating
point it holds. Mixed into :class:`~governor.runtime.governor.Governor`, which tells it the
clock (:attr:`BoardAnswers.applied_clock_mhz`), the memory clock it set
(:attr:`BoardAnswers.applied_mem_clock_mhz`, None where it does not govern memory) and each
change of either (:meth:`BoardAnswers._clock_moved`); the memory knob that sets it is kept
here too, and handed from policy to policy (:meth:`BoardAnswers._switch_mem_knob`).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Callable, Optional

from governor.devices.base import Device
from governor.errors import GovernorError
from governor.runtime.controller_base import Controller, Tick
from governor.runtime.kernel_config import KernelConfigFollower
from governor.runtime.mem_knob import MemoryKnob
from governor.runtime.mem_knobs import next_knob
from governor.runtime.model import ClockModel
from governor.runtime.tuning_cache import Cached, cached_block_size_for, cached_tiles_for

__all__ = ["BoardAnswers"]

log = logging.getLogger("governor.runtime")


class BoardAnswers:
    """The board's tuned answers (see the module docstring); ``device`` is the board."""

    device: Device
    controller: Controller  # the policy's (the memory knob asks it)
    _dev_lock: Any  # the governor's lock around device calls
    _kernel_configs: Optional[KernelConfigFollower] = None  # made on first use
    _applied_mem: Optional[float] = None  # the memory clock this governor set
    _mem: Optional[MemoryKnob] = None  # the memory knob (mem_knob.py; None: core alone)
    _locked_mem: Optional[float] = None  # the device's memory lock, read when asked
    _locked_mem_read = False

    @property
    def applied_clock_mhz(self) -> Optional[float]:  # pragma: no cover - the governor's
        """The GPU clock the governor holds now (MHz), None before start."""
        raise NotImplementedError

    @property
    def applied_mem_clock_mhz(self) -> Optional[float]:
        """The memory clock the governor set (MHz), None where it does not govern memory
        (the board then runs the memory clock it was at)."""
        return self._applied_mem

    def _mem_clock_set(self, mem_clock_mhz: Optional[float]) -> None:
        """Record the memory clock this governor has just written to the device (None: it
        handed the memory clock back); the kernel configurations follow the new pair."""
        if mem_clock_mhz == self._applied_mem:
            return
        self._applied_mem = mem_clock_mhz
        self._clock_moved(self.applied_clock_mhz)

    def _mem_frame(self, tick: Tick) -> Tick:
        """``tick`` handed to the memory knob as the app reports it (the throughput knob judges
        a frame at the lower memory clock at once, :mod:`.mem_frames`); returned marked
        ``mem_slowed`` where the knob found the lower memory clock slowed it."""
        if self._mem is None or tick.busy_s is None:
            return tick
        with self._dev_lock:
            before = self._mem.mem_mhz
            slowed = self._mem.frame(self.controller, tick)
            if self._mem.mem_mhz != before:
                self._mem_clock_set(self._mem.mem_mhz)
        return dataclasses.replace(tick, mem_slowed=True) if slowed else tick

    def _switch_mem_knob(self, policy_name: str, model: ClockModel) -> None:
        """The memory knob under a new policy (:func:`.mem_knobs.next_knob`: the old one
        kept, or the default memory clock back and the new policy's knob, if any) and the
        memory clock this governor holds after the switch."""
        self._mem, held = next_knob(self._mem, self.device, policy_name, model, self._applied_mem)
        self._mem_clock_set(held)

    def _forget_mem_clock(self) -> None:
        """The governor let the device go: no memory clock set, the lock read afresh."""
        self._applied_mem = None
        self._locked_mem_read = False

    def _kernel_mem_clock_mhz(self) -> Optional[float]:
        """The memory clock ``kernel_config`` answers for: the one this governor set, else
        the one the device's memory is locked at (``device.state()``, read once, when a
        kernel configuration is first asked for: a memory clock locked before the governor
        started, as ``governor run`` and ``device.lock_mem_clock`` do), else None (the
        board's default memory clock)."""
        if self._applied_mem is not None:
            return self._applied_mem
        if not self._locked_mem_read:
            self._locked_mem_read = True
            try:
                with self._dev_lock:
                    self._locked_mem = self.device.state().mem_clock_mhz
            except (GovernorError, OSError) as err:
                log.debug("memory clock lock unreadable: %s", err)
        return self._locked_mem

    def _clock_moved(self, clock_mhz: Optional[float]) -> None:
        """The governor holds ``clock_mhz`` (or a new memory clock) now: the kernels asked
        about follow the operating point."""
        if self._kernel_configs is not None:
            self._kernel_configs.clock_changed(clock_mhz, self._kernel_mem_clock_mhz())

    def tiles(self, kernel: str, precision: str = "double") -> Cached:
        """The tiles chosen offline (``governor tiles --save``) for ``kernel`` on this board."""
        return cached_tiles_for(self.device, kernel, precision)

    def block_size(self, kernel: str, objective: str = "energy") -> Cached:
        """The thread-block size chosen offline (``governor tune-blocks``) for ``kernel``."""
        return cached_block_size_for(self.device, kernel, objective)

    def _follower(self) -> KernelConfigFollower:
        if self._kernel_configs is None:
            from governor.profiles.profile import board_key

            self._kernel_configs = KernelConfigFollower(board_key(self.device))
        return self._kernel_configs

    def kernel_config(self, kernel: str, precision: str = "double") -> Cached:
        """The tile and thread block for ``kernel`` at the operating point the governor holds
        now (its clock, and the memory clock it set, else the one the device is locked at:
        see :meth:`_kernel_mem_clock_mhz`), from the
        board's table (``governor kernels table --save``); one dict lookup per call."""
        value, reason = self._follower().config(
            kernel, self.applied_clock_mhz, precision, self._kernel_mem_clock_mhz()
        )
        return Cached(value, reason)

    @property
    def kernel_config_generation(self) -> int:
        """Grows each time a change of the clock or of the memory clock moves a kernel asked
        about into another configuration."""
        return self._follower().generation

    def on_kernel_config_change(self, callback: Callable[[str, Any], None]) -> None:
        """Call ``callback(kernel, config)`` when a change of the clock or the memory clock
        crosses a configuration boundary."""
        self._follower().on_change(callback)
