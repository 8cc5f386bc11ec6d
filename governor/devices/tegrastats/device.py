"""The ``tegrastats`` device: read-only telemetry from ``tegrastats --interval N``.

For boards where neither sysfs nor jtop can be read (a container without /sys, no root for
some files). URI: ``tegrastats`` or ``tegrastats:?interval_ms=200`` (default 1000 ms).
Capabilities are those the first line shows; nothing can be controlled.
"""

from __future__ import annotations

from typing import List, Optional
from urllib.parse import parse_qsl

from governor.devices.base import Capabilities, Device, Identity, Rail, Sample
from governor.devices.jetson.board import identify_board, l4t_version
from governor.devices.jetson.rails import best_rail, rail_scope
from governor.devices.jetson.sysfs import SysfsRoot, find_gpu_devfreq
from governor.devices.jetson.tools import find_tool
from governor.devices.tegrastats.parser import TegrastatsSample
from governor.devices.tegrastats.reader import TegrastatsReader
from governor.errors import DeviceNotFoundError, InvalidRequestError
from governor.timebase import Clock

__all__ = ["TegrastatsDevice", "discover_tegrastats", "open_tegrastats", "to_sample"]


def to_sample(ts: TegrastatsSample, t_s: float) -> Sample:
    """A governor Sample from a parsed line (rails labelled, best GPU rail chosen)."""
    rails = tuple(Rail(name, r.power_w, rail_scope(name)) for name, r in ts.rails.items())
    best = best_rail(rails)
    return Sample(
        t_s=t_s,
        power_w=best.power_w if best else None,
        power_scope=best.scope if best else None,
        rails=rails,
        gpu_clock_mhz=ts.gpu_clock_mhz,
        mem_clock_mhz=ts.emc_clock_mhz,
        temperature_c=ts.gpu_temperature_c,
        utilisation_pct=ts.gpu_load_pct,
    )


class TegrastatsDevice(Device):
    """Telemetry from a running tegrastats; no controls (``control_reason`` says so)."""

    def __init__(
        self,
        reader: TegrastatsReader,
        *,
        uri: str = "tegrastats",
        clock: Optional[Clock] = None,
    ) -> None:
        self.reader = reader
        first = reader.latest()
        self._seen = reader.count
        fs = SysfsRoot()
        model, display = identify_board(fs)
        caps = Capabilities(
            power=bool(first.rails),
            rails=bool(first.rails),
            gpu_clock=bool(first.gpu_clocks_mhz),  # printed, even if gated (None) right now
            mem_clock=first.emc_clock_mhz is not None,
            temperature=first.gpu_temperature_c is not None,
            utilisation=first.gpu_load_pct is not None,
        )
        identity = Identity(
            uri=uri,
            kind="tegrastats",
            name=f"{display} (tegrastats)",
            model=model,
            l4t_version=l4t_version(fs),
        )
        super().__init__(identity, caps, clock=clock)

    def control_permitted(self) -> bool:
        return False

    def control_reason(self) -> Optional[str]:
        return "read-only telemetry source: use the jetson backend to change clocks"

    def _read_sample(self) -> Sample:
        ts = self.reader.latest()
        return to_sample(ts, self.clock.now_s())

    def _close(self) -> None:
        self.reader.close()


def open_tegrastats(spec: str = "", *, clock: Optional[Clock] = None) -> TegrastatsDevice:
    """Open ``tegrastats[:?interval_ms=N]``.

    Raises:
        DeviceNotFoundError: tegrastats is not on PATH or prints nothing usable.
    """
    query = spec.lstrip("?")
    options = dict(parse_qsl(query)) if query else {}
    unknown = sorted(set(options) - {"interval_ms"})
    if unknown:
        raise InvalidRequestError(
            f"unknown tegrastats option(s) {', '.join(unknown)}; known: interval_ms"
        )
    try:
        interval_ms = int(options.get("interval_ms", "1000"))
    except ValueError:
        raise InvalidRequestError(
            f"tegrastats interval_ms={options['interval_ms']!r} is not an integer"
        ) from None
    if not 1 <= interval_ms <= 60000:
        raise InvalidRequestError("tegrastats interval_ms must be 1..60000")
    exe = find_tool("tegrastats")
    if exe is None:
        raise DeviceNotFoundError("tegrastats is not on PATH (it ships with L4T in /usr/bin)")
    reader = TegrastatsReader(exe, interval_ms).start()
    try:
        return TegrastatsDevice(
            reader, uri="tegrastats" + (f":{spec}" if spec else ""), clock=clock
        )
    except Exception as err:
        reader.close()
        if isinstance(err, DeviceNotFoundError):
            raise
        raise DeviceNotFoundError(f"tegrastats printed no sample: {err}") from err


def discover_tegrastats() -> List[str]:
    """``["tegrastats"]`` when tegrastats is on PATH and sysfs shows no Jetson GPU, else []."""
    if find_tool("tegrastats") is None:
        return []
    if find_gpu_devfreq(SysfsRoot()) is not None:
        return []  # the jetson backend reads more, and can control
    return ["tegrastats"]
