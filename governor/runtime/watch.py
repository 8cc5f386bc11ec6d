"""What the governor keeps watching about the device besides its readings: a device that is
gone (a GPU off the bus), another program that took the clock over, clock writes that keep
failing, and the run's errors. Each is said once, not every period."""

from __future__ import annotations

import logging
from typing import Callable, List, Optional, Tuple

from governor.devices.base import Device
from governor.errors import GovernorError

__all__ = ["DeviceWatch"]

log = logging.getLogger("governor.runtime")


class DeviceWatch:
    """The device's faults over a governed run. ``note`` says a thing to the user (the
    governor's notes and log)."""

    def __init__(self, device: Device, note: Callable[[str], None]) -> None:
        self.device = device
        self._note = note
        #: why the device stopped answering (a GPU off the bus for good; a wedged driver until
        #: it answers again: :meth:`answers_again`); None while it answers
        self.lost: Optional[str] = None
        self._wedged = False  # lost by a call past its deadline: it may answer again
        #: what another program set the clock to while the governor held it (it then steps
        #: back); None while nobody else writes it
        self.overridden: Optional[str] = None
        self.errors: List[str] = []
        self.applied_range: Optional[Tuple[float, float]] = None
        self._write_failing = False  # a clock write failed and none has succeeded since

    @property
    def hands_off(self) -> bool:
        """Whether the governor must leave the clock alone: the device is lost, or another
        program took it over."""
        return self.lost is not None or self.overridden is not None

    def wrote(self, lo_mhz: float, hi_mhz: float) -> None:
        """A clock write succeeded: the range now held."""
        if self._write_failing:
            self._write_failing = False
            log.warning("%s: setting the clock works again (%g MHz)", self.device.uri, lo_mhz)
        self.applied_range = (lo_mhz, hi_mhz)

    def taken_over(self) -> bool:
        """Whether another program (``jetson_clocks``, ``nvpmodel``, a second tool) changed
        the GPU clock the governor holds. The rule is to step back: say so once, stop
        changing the clock, and leave that program's setting in place at the end (the clock
        is dropped from this run's journal layer). Fighting it would flip the clock every
        period. Devices that cannot read their lock back (NVML) are not checked; a maximum
        that only went down is taken for a thermal cap, not another writer."""
        held = self.applied_range
        if held is None or "gpu_clocks" in self.device.READ_BLIND:
            return False
        try:
            now = self.device.state().gpu_clocks_mhz
        except GovernorError:
            return False  # an unreadable state is the telemetry's concern, not a takeover
        tol = self.device.CLOCK_TOLERANCE_MHZ
        # A lower maximum alone is not a takeover: devfreq's max_freq reads back the
        # effective limit, which a thermal or PM QoS cap lowers without anyone writing it.
        if now is None or (abs(now[0] - held[0]) <= tol and now[1] <= held[1] + tol):
            return False
        self.overridden = f"{now[0]:g}-{now[1]:g} MHz"
        self.device.leave_to_others("gpu_clocks")
        self._note(
            f"another program set the GPU clock to {self.overridden} while governor held "
            f"{held[0]:g}-{held[1]:g} MHz; governor steps back: it stops changing the clock "
            "and leaves that setting in place"
        )
        return True

    def lose(self, why: str, wedged: bool = False) -> None:
        """The device is gone: stop changing it (said once); the app's work goes on, and
        ``stop()`` still tries the restore, which keeps the journal if it fails. ``wedged``:
        a call missed its deadline (the device is not responding), so it may answer again."""
        self.lost = why
        self._wedged = wedged
        self._note(f"{why}; governor stopped changing it")

    def answers_again(self) -> bool:
        """Whether a device lost to a wedged driver answers again (its background probe got
        an answer: :attr:`Device.not_responding` is None): then it is no longer lost, and the
        governor governs it again (said once). A GPU off the bus stays lost."""
        if self.lost is None or not self._wedged or self.device.not_responding is not None:
            return False
        self.lost, self._wedged = None, False
        self._note(f"{self.device.uri} answers again; governor governs it again")
        return True

    def write_failed(self, text: str) -> None:
        """A clock write refused (devfreq's EBUSY/EINVAL, a driver error): kept in the errors
        each time, logged once until a write succeeds again; the next period tries again."""
        if self._write_failing:
            self.errors.append(text)
            del self.errors[:-10]
            log.debug("%s: %s", self.device.uri, text)
            return
        self._write_failing = True
        self.error(text + " (tried again each period; said once until it works)")

    def error(self, text: str) -> None:
        """An error of the run: logged, and the last ten kept for ``status()``."""
        log.error("%s: %s", self.device.uri, text)
        self.errors.append(text)
        del self.errors[:-10]
