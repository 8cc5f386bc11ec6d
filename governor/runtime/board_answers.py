"""What a governor answers an app about its own board's kernels: the tiles and thread
blocks tuned offline, and the per-clock kernel configuration that follows the operating
point it holds. Mixed into :class:`~governor.runtime.governor.Governor`, which tells it the
clock (:attr:`BoardAnswers.applied_clock_mhz`), the memory clock it set
(:attr:`BoardAnswers.applied_mem_clock_mhz`, None where it does not govern memory) and each
change of either (:meth:`BoardAnswers._clock_moved`).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from governor.devices.base import Device
from governor.runtime.kernel_config import KernelConfigFollower
from governor.runtime.tuning_cache import Cached, cached_block_size_for, cached_tiles_for

__all__ = ["BoardAnswers"]


class BoardAnswers:
    """The board's tuned answers (see the module docstring); ``device`` is the board."""

    device: Device
    _kernel_configs: Optional[KernelConfigFollower] = None  # made on first use

    @property
    def applied_clock_mhz(self) -> Optional[float]:  # pragma: no cover - the governor's
        """The GPU clock the governor holds now (MHz), None before start."""
        raise NotImplementedError

    @property
    def applied_mem_clock_mhz(self) -> Optional[float]:  # pragma: no cover - the governor's
        """The memory clock the governor set (MHz), None where it does not govern memory."""
        raise NotImplementedError

    def _kernel_mem_clock_mhz(self) -> Optional[float]:
        """The memory clock the kernel configurations answer for (None: the board's
        default); the governor's own where it sets one."""
        return self.applied_mem_clock_mhz

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
        see :meth:`~governor.runtime.governor.Governor._kernel_mem_clock_mhz`), from the
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
