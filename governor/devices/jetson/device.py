"""The ``jetson`` device: GPU clocks through devfreq, rails from INA3221, modes via nvpmodel.

``jetson`` opens the board under the sysfs root (``GOVERNOR_SYSFS_ROOT``, default ``/``).
Reading needs no privileges; locking the GPU clock writes ``min_freq``/``max_freq`` and
switching modes runs ``nvpmodel``, both of which need root (or the governor daemon).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from governor.devices.base import Capabilities, Device, DeviceState, Identity, Rail, Sample
from governor.devices.jetson.board import identify_board, l4t_version
from governor.devices.jetson.emc import EmcControl, find_emc
from governor.devices.jetson.rails import RailSource, best_rail, find_rails
from governor.devices.jetson.sysfs import (
    GpuDevfreq,
    SysfsRoot,
    find_gpu_devfreq,
    gpu_temperature_c,
    thermal_zones,
)
from governor.devices.jetson.tools import JetsonClocks, Nvpmodel, find_tool
from governor.errors import (
    DeviceNotFoundError,
    GovernorError,
    InvalidRequestError,
    UnsupportedError,
)
from governor.timebase import Clock

__all__ = ["JetsonDevice", "discover_jetson", "open_jetson"]

log = logging.getLogger("governor.devices.jetson")


class JetsonDevice(Device):
    """A Jetson board read and controlled through sysfs and the NVIDIA tools."""

    def __init__(
        self,
        fs: SysfsRoot,
        devfreq: GpuDevfreq,
        *,
        uri: str = "jetson",
        rails: Optional[RailSource] = None,
        nvpmodel: Optional[Nvpmodel] = None,
        jetson_clocks: Optional[JetsonClocks] = None,
        kind: str = "jetson",
        clock: Optional[Clock] = None,
        emc: Optional[EmcControl] = None,
        emc_note: str = "",
    ) -> None:
        self.fs = fs
        self.emc = emc
        self._emc_note = emc_note
        self.devfreq = devfreq
        self.rail_source = rails
        self.nvpmodel = nvpmodel
        self.jetson_clocks = jetson_clocks
        self._modes: Tuple[str, ...] = ()
        self._cap_cache: Optional[Tuple[Optional[float]]] = None
        if nvpmodel is not None:
            try:
                self._modes = tuple(name for _, name in nvpmodel.modes())
            except GovernorError as err:
                log.info("nvpmodel modes unavailable: %s", err)
        zones = thermal_zones(fs)
        model, display = identify_board(fs, devfreq.table_mhz)
        caps = Capabilities(
            power=rails is not None,
            energy_counter=False,
            rails=rails is not None,
            gpu_clock=(devfreq.node / "cur_freq").exists(),
            mem_clock=emc is not None,
            temperature=gpu_temperature_c(zones) is not None,
            utilisation=devfreq.load_path() is not None,
            throttle_reasons=False,
            lock_gpu_clocks=True,
            lock_mem_clock=emc is not None and len(emc.table_hz) > 1 and emc.writable(),
            power_limit=False,
            power_mode=bool(self._modes),
        )
        identity = Identity(
            uri=uri,
            kind=kind,
            name=display,
            model=model,
            l4t_version=l4t_version(fs),
            key="jetson:" + os.path.realpath(str(devfreq.node)),
        )
        super().__init__(identity, caps, clock=clock)

    # -- description -----------------------------------------------------------------------
    def _supported_clocks_mhz(self) -> Sequence[float]:
        """The devfreq table up to the power mode's GPU cap: nvpmodel holds the clock below
        its mode's MAX_FREQ whatever ``max_freq`` says, so clocks above it cannot be run."""
        cap = self._mode_cap_mhz()
        table = self.devfreq.table_mhz
        allowed = [c for c in table if cap is None or c <= cap + 0.5]
        return allowed or table[:1]

    def _mode_cap_mhz(self) -> Optional[float]:
        if self._cap_cache is None:
            cap = None
            if self.nvpmodel is not None and self._modes:
                try:
                    cap = self.nvpmodel.gpu_cap_mhz(self.nvpmodel.query()[0])
                except GovernorError as err:
                    log.info("nvpmodel cap unknown: %s", err)
            self._cap_cache = (cap,)
        return self._cap_cache[0]

    def power_modes(self) -> Tuple[str, ...]:
        return self._modes

    def _supported_mem_clocks_mhz(self) -> Sequence[float]:
        """The EMC rates the board offers (MHz); empty where it cannot be set."""
        return (
            self.emc.table_mhz if self.emc is not None and self.capabilities.lock_mem_clock else ()
        )

    def control_notes(self) -> List[str]:
        """Why the memory clock cannot be set here, once (the GPU clock is governed alone)."""
        return [self.mem_clock_note] if self.mem_clock_note else []

    @property
    def mem_clock_note(self) -> str:
        """One line saying why the memory clock cannot be set ("" when it can)."""
        if self.emc is None:
            return self._emc_note
        if len(self.emc.table_hz) < 2:
            return "the board offers one memory clock: governing the GPU clock alone"
        if not self.emc.writable():
            return (
                f"setting the memory clock ({self.fs.shown(self.emc.dir)}) needs root: "
                "governing the GPU clock alone"
            )
        return ""

    def control_permitted(self) -> bool:
        return self.control_reason() is None

    def control_reason(self) -> Optional[str]:
        """Why this process may not change settings (None when it may)."""
        if not self.devfreq.writable():
            return "needs root: run with sudo or use the governor daemon"
        return None

    # -- reading ---------------------------------------------------------------------------
    def read_rails(self) -> List[Rail]:
        """Every INA3221 rail, in W (empty on boards without a monitor, such as Nano 2GB)."""
        return self.rail_source.read() if self.rail_source is not None else []

    def _read_sample(self) -> Sample:
        t_s = self.clock.now_s()
        caps = self.capabilities
        rails = self.read_rails()
        best = best_rail(rails)
        temperature = gpu_temperature_c(thermal_zones(self.fs)) if caps.temperature else None
        return Sample(
            t_s=t_s,
            power_w=best.power_w if best else None,
            power_scope=best.scope if best else None,
            rails=tuple(rails),
            gpu_clock_mhz=self.devfreq.read_mhz("cur_freq") if caps.gpu_clock else None,
            temperature_c=temperature,
            utilisation_pct=self.devfreq.load_pct() if caps.utilisation else None,
            mem_clock_mhz=self.emc.read_mhz() if self.emc is not None else None,
        )

    def _read_state(self) -> DeviceState:
        mode = None
        if self.capabilities.power_mode and self.nvpmodel is not None:
            mode = self.nvpmodel.query()[0]
        mem = self.emc.locked_mhz() if self.capabilities.lock_mem_clock and self.emc else None
        return DeviceState(
            gpu_clocks_mhz=self.devfreq.caps_mhz(), power_mode=mode, mem_clock_mhz=mem
        )

    # -- writing ---------------------------------------------------------------------------
    def _write_gpu_clocks(self, min_mhz: float, max_mhz: float) -> None:
        self.devfreq.set_caps_mhz(min_mhz, max_mhz)

    def _reset_gpu_clocks(self) -> None:
        table = self.supported_clocks_mhz()
        self.devfreq.set_caps_mhz(table[0], table[-1])

    def _write_mem_clock(self, clock_mhz: Optional[float]) -> None:
        """Lock EMC at ``clock_mhz`` (a table rate), or hand it back to the firmware (None)."""
        if self.emc is None or not self.capabilities.lock_mem_clock:
            raise UnsupportedError(f"{self.uri}: {self.mem_clock_note}")
        if clock_mhz is None:
            self.emc.unlock()
        else:
            self.emc.lock_mhz(clock_mhz)

    def _all_clocks_mhz(self) -> Sequence[float]:
        return self.devfreq.table_mhz

    def default_state(self) -> DeviceState:
        """The kernel's devfreq defaults: min/max at the ends of ``available_frequencies``."""
        table = self.devfreq.table_mhz
        return DeviceState(gpu_clocks_mhz=(table[0], table[-1]))

    def _write_power_mode(self, mode: str) -> None:
        if self.nvpmodel is None:
            raise UnsupportedError(f"{self.uri}: nvpmodel is not on PATH")
        self.nvpmodel.set(mode)
        self._cap_cache = None  # the new mode has its own GPU cap

    # -- jetson_clocks ---------------------------------------------------------------------
    def store_clocks(self, path: Path) -> None:
        """Save every clock of the board with ``jetson_clocks --store`` (needs root)."""
        self._tool().store(Path(path))

    def restore_clocks(self, path: Path) -> None:
        """Bring back clocks saved by :meth:`store_clocks` (``jetson_clocks --restore``)."""
        if not Path(path).is_file():
            raise InvalidRequestError(f"no stored clocks at {path}")
        self._tool().restore(Path(path))

    def _tool(self) -> JetsonClocks:
        if self.jetson_clocks is None:
            raise UnsupportedError(f"{self.uri}: jetson_clocks is not on PATH")
        return self.jetson_clocks


def open_board(
    fs: SysfsRoot,
) -> Tuple[GpuDevfreq, Optional[RailSource], Optional[Nvpmodel], Optional[JetsonClocks]]:
    """The parts of the board under ``fs``.

    Raises:
        DeviceNotFoundError: no GPU devfreq node (not a Jetson, or the wrong root).
    """
    node = find_gpu_devfreq(fs)
    if node is None:
        raise DeviceNotFoundError(
            f"no Jetson GPU devfreq node under {fs.root} (looked in /sys/class/devfreq); "
            "set GOVERNOR_SYSFS_ROOT if sysfs is mounted elsewhere"
        )
    devfreq = GpuDevfreq(fs, node)
    nvp = find_tool("nvpmodel")
    clocks = find_tool("jetson_clocks")
    return (
        devfreq,
        find_rails(fs),
        Nvpmodel(nvp, fs) if nvp else None,
        JetsonClocks(clocks) if clocks else None,
    )


def open_jetson(spec: str = "", *, clock: Optional[Clock] = None) -> JetsonDevice:
    """Open ``jetson`` (nothing may follow the colon).

    Raises:
        DeviceNotFoundError: not a Jetson; TelemetryError: unexpected files.
    """
    if spec.strip():
        raise InvalidRequestError(f"the jetson device takes no argument (got {spec!r})")
    from governor.devices.deadline import call_with_deadline, deadlines_s

    def opening() -> JetsonDevice:
        fs = SysfsRoot()
        devfreq, rails, nvp, clocks = open_board(fs)
        emc, note = find_emc(fs)
        return JetsonDevice(
            fs,
            devfreq,
            rails=rails,
            nvpmodel=nvp,
            jetson_clocks=clocks,
            clock=clock,
            emc=emc,
            emc_note=note,
        )

    # a stalled sysfs read (the BPMP, an I2C power monitor) blocks: opening has a deadline
    device: JetsonDevice = call_with_deadline(
        "jetson", "opening it", deadlines_s()["open"], opening, _close_late
    )
    return device


def _close_late(device: JetsonDevice) -> None:
    """Close a device whose opening answered after its deadline (nobody holds it)."""
    device.close()


def discover_jetson() -> List[str]:
    """``["jetson"]`` when a Jetson GPU devfreq node is under the root, else []."""
    return ["jetson"] if find_gpu_devfreq(SysfsRoot()) is not None else []
