"""The Jetson memory clock (EMC): its table of rates, reading it, locking it, unlocking it.

Two interfaces, both in debugfs (root only, and only where debugfs is mounted at
``/sys/kernel/debug``):

- **BPMP clock** (L4T on TX2, Xavier, Orin): ``/sys/kernel/debug/bpmp/debug/clk/emc/`` with
  ``rate``, ``min_rate``, ``max_rate`` (Hz) and ``mrq_rate_locked``. NVIDIA's
  ``jetson_clocks`` locks EMC by writing ``1`` to ``mrq_rate_locked`` and then the wanted rate
  to ``rate`` (it copies ``max_rate``); writing ``0`` to ``mrq_rate_locked`` hands the rate back
  to BPMP's own scaling. The rates the board offers: ``/sys/kernel/debug/bpmp/debug/emc/
  possible_rates`` (kHz, ``204000 665600 2133000 (kHz)`` on an Orin NX) where present, else
  the two ends ``min_rate`` and ``max_rate``. BPMP drops a rate it has no timing table for
  without an error, so every lock is read back.
- **Upstream ``tegra186-emc``** (mainline kernels, ``drivers/memory/tegra/tegra186-emc.c``):
  ``/sys/kernel/debug/emc/available_rates`` (Hz) and ``min_rate``/``max_rate``; a lock is
  ``min_rate == max_rate``, written in the order that keeps min <= max (the driver refuses
  anything else); unlocking writes the ends of the table back.

Sources: ``jetson_clocks`` (``do_emc``), jetson-stats ``read_emc`` (``mrq_rate_locked`` as
"override"), the upstream driver; ``docs/devices.md`` says what is and is not confirmed.
Nano (tegra210, ``override.emc``) and Thor (devfreq ``bwmgr``) are not handled: there the
memory clock is read-only (tegrastats' ``EMC_FREQ``) and the governor sets the core clock alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Optional, Tuple

from governor.devices.jetson.sysfs import SysfsRoot, can_write
from governor.errors import GovernorError, TelemetryError

__all__ = ["BPMP_EMC", "DEBUGFS", "UPSTREAM_EMC", "EmcControl", "find_emc"]

DEBUGFS = "/sys/kernel/debug"
BPMP_EMC = "/sys/kernel/debug/bpmp/debug/clk/emc"
BPMP_RATES = "/sys/kernel/debug/bpmp/debug/emc/possible_rates"
UPSTREAM_EMC = "/sys/kernel/debug/emc"


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:  # debugfs is 0700 root: a user cannot even look
        return False


class EmcControl:
    """One board's EMC clock, through the BPMP (``kind == "bpmp"``) or the upstream driver
    (``kind == "tegra186"``). Rates are MHz outside, Hz (or kHz where the file says so) in
    the files."""

    def __init__(
        self, fs: SysfsRoot, kind: str, directory: Path, table_hz: Tuple[int, ...]
    ) -> None:
        self.fs = fs
        self.kind = kind
        self.dir = directory
        self.table_hz = table_hz

    @property
    def table_mhz(self) -> Tuple[float, ...]:
        return tuple(hz / 1e6 for hz in self.table_hz)

    def hz_for(self, mhz: float) -> int:
        """The table rate (Hz) nearest ``mhz``."""
        return min(self.table_hz, key=lambda hz: abs(hz / 1e6 - mhz))

    def _hz(self, name: str) -> int:
        return int(self.fs.read_number(self.dir / name))

    def read_mhz(self) -> Optional[float]:
        """The memory clock now (MHz); None where the interface does not show it."""
        if self.kind == "bpmp":
            return self._hz("rate") / 1e6
        clk = self.fs.path("/sys/kernel/debug/clk/emc/clk_rate")  # the common clock's debugfs
        text = self.fs.read_optional(clk) if _exists(clk) else None
        try:
            return int(text.split()[0]) / 1e6 if text else None
        except (ValueError, IndexError):
            return None

    def locked_mhz(self) -> Optional[float]:
        """The rate it is locked at (MHz), or None while the firmware scales it."""
        if self.kind == "bpmp":
            if int(self.fs.read_number(self.dir / "mrq_rate_locked")) == 0:
                return None
            return self._hz("rate") / 1e6
        lo, hi = self._hz("min_rate"), self._hz("max_rate")
        return lo / 1e6 if lo == hi else None

    def lock_mhz(self, mhz: float) -> None:
        """Lock the rate nearest ``mhz``, read back.

        Raises:
            GovernorError: the firmware kept another rate (BPMP drops a rate whose timing
                table it did not load, silently: seen on an Orin NX whose boot chain loaded
                only 204/665.6/2133 MHz); what this call wrote is undone first.
        """
        hz = self.hz_for(mhz)
        if self.kind == "bpmp":  # jetson_clocks' order: take the rate from BPMP, then set it
            was_locked = self.fs.read(self.dir / "mrq_rate_locked")
            self.fs.write(self.dir / "mrq_rate_locked", "1")
            self.fs.write(self.dir / "rate", str(hz))
            got = self._hz("rate")
            if abs(got - hz) > 1e6:
                self.fs.write(self.dir / "mrq_rate_locked", was_locked or "0")
                raise GovernorError(
                    f"the BPMP kept the memory clock at {got / 1e6:g} MHz instead of "
                    f"{hz / 1e6:g} MHz: that rate's timing table is not loaded"
                )
            return
        self._set_range(hz, hz)

    def unlock(self) -> None:
        if self.kind == "bpmp":
            self.fs.write(self.dir / "mrq_rate_locked", "0")
            return
        self._set_range(self.table_hz[0], self.table_hz[-1])

    def _set_range(self, lo_hz: int, hi_hz: int) -> None:
        """min_rate/max_rate in the order that keeps min <= max between the two writes."""
        if lo_hz > self._hz("max_rate"):
            order = (("max_rate", hi_hz), ("min_rate", lo_hz))
        else:
            order = (("min_rate", lo_hz), ("max_rate", hi_hz))
        for name, hz in order:
            self.fs.write(self.dir / name, str(hz))

    def writable(self) -> bool:
        names = ("mrq_rate_locked", "rate") if self.kind == "bpmp" else ("min_rate", "max_rate")
        return all(can_write(self.dir / n) for n in names)


def _rates(text: Optional[str], scale: int) -> Tuple[int, ...]:
    out = set()
    for word in (text or "").replace(",", " ").split():
        try:
            value = int(float(word) * scale)
        except ValueError:
            continue
        if value > 0:
            out.add(value)
    return tuple(sorted(out))


def find_emc(fs: SysfsRoot) -> Tuple[Optional[EmcControl], str]:
    """The board's EMC control and ``""``, or None and why there is none (one line)."""
    if not _exists(fs.path(DEBUGFS)) or not any(_safe_iter(fs.path(DEBUGFS))):
        return None, (
            f"no debugfs at {DEBUGFS} (not mounted, or not root): the memory clock cannot be "
            "set; governing the GPU clock alone"
        )
    try:
        bpmp = fs.path(BPMP_EMC)
        if _exists(bpmp / "rate") and _exists(bpmp / "mrq_rate_locked"):
            rates_path = fs.path(BPMP_RATES)
            table = _rates(fs.read_optional(rates_path), 1000) if _exists(rates_path) else ()
            if not table:
                table = _rates(
                    f"{fs.read_optional(bpmp / 'min_rate') or ''} "
                    f"{fs.read_optional(bpmp / 'max_rate') or ''}",
                    1,
                )
            if not table:
                table = _rates(fs.read_optional(bpmp / "rate"), 1)
            return EmcControl(fs, "bpmp", bpmp, table), ""
        upstream = fs.path(UPSTREAM_EMC)
        if _exists(upstream / "available_rates") and _exists(upstream / "min_rate"):
            table = _rates(fs.read_optional(upstream / "available_rates"), 1)
            if table:
                return EmcControl(fs, "tegra186", upstream, table), ""
    except (TelemetryError, GovernorError) as err:
        return (
            None,
            f"the memory clock's files cannot be read ({err}); governing the GPU clock alone",
        )
    return None, (
        f"no EMC clock under {DEBUGFS} (neither {BPMP_EMC} nor {UPSTREAM_EMC}): the memory clock "
        "cannot be set; governing the GPU clock alone"
    )


def _safe_iter(path: Path) -> Iterator[Path]:
    try:
        yield from path.iterdir()
    except OSError:
        return
