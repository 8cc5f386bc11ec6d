"""Parse tegrastats lines from every Jetson generation (shared/data/tegrastats/FORMAT.md).

:func:`parse_line` returns a :class:`TegrastatsSample` for a sample line (one with a ``RAM``
field and at least a CPU list, a GPU field or a rail) and None for anything else; it never raises. :class:`TegrastatsParser` counts what it
skipped. Units are converted here: rail mW -> W, clocks stay MHz, temperatures °C.

Handled variations: an optional ``MM-DD-YYYY HH:MM:SS`` prefix or separate ``date`` lines;
``GR3D_FREQ 62%@306``, ``0%@[305,305]`` (per GPC), ``@[1000,1000,1000]`` (clock only),
``99%`` (load only), ``@0``; ``EMC_FREQ 4%@1600`` or ``0%`` or absent; rails ``NAME cur/avg``
with or without ``mW`` on any value and with two or three values; temperatures ``NAME@41.5C``
in any case (``PMIC@100C`` is a fixed dummy and is dropped); CPU lists with ``off`` cores;
engines (``NVENC off``, ``VIC_FREQ 729``, ``APE 174``, ``MTS fg 0% bg 0%``) and irregular
spacing.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

__all__ = ["RailReading", "TegrastatsParser", "TegrastatsSample", "parse_date_line", "parse_line"]

_STAMP = re.compile(r"^\s*(\d{2})-(\d{2})-(\d{4})\s+(\d{2}):(\d{2}):(\d{2})\s+")
_DATE_LINE = re.compile(
    r"^\s*(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)\s+(\w{3})\s+(\d{1,2})\s+(\d{2}):(\d{2}):(\d{2})\s+(?:\w+\s+)?(\d{4})\s*$"
)
_MONTHS = {
    m: i + 1 for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split())
}
_RAM = re.compile(r"^(\d+)/(\d+)([kKmMgG]B)$")
_TEMP = re.compile(r"^([A-Za-z][A-Za-z0-9_]*)@(-?\d+(?:\.\d+)?)C$")
_RAIL_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
_RAIL_VALUES = re.compile(r"^\d+(?:\.\d+)?(?:mW)?(?:/\d+(?:\.\d+)?(?:mW)?){1,2}$")
_FREQ = re.compile(r"^(?:(\d+(?:\.\d+)?)%)?(?:@(?:\[([\d.,]+)\]|(\d+(?:\.\d+)?)))?$")
_DUMMY_TEMPS = ("PMIC",)
_NOT_RAILS = (
    "RAM",
    "SWAP",
    "IRAM",
    "EMC_FREQ",
    "GR3D_FREQ",
    "GR3D2_FREQ",
    "MTS",
    "APE",
    "VIC_FREQ",
)


@dataclass(frozen=True)
class RailReading:
    """One rail: the instantaneous power and the average tegrastats printed, in W."""

    power_w: float
    average_w: Optional[float] = None


@dataclass(frozen=True)
class TegrastatsSample:
    """One tegrastats line, in governor's units. Missing fields are None or empty."""

    timestamp: Optional[_dt.datetime] = None
    ram_used_mb: Optional[float] = None
    ram_total_mb: Optional[float] = None
    cpu_load_pct: Tuple[Optional[float], ...] = ()  # None for an "off" core
    cpu_clock_mhz: Tuple[Optional[float], ...] = ()
    emc_load_pct: Optional[float] = None
    emc_clock_mhz: Optional[float] = None
    gpu_load_pct: Optional[float] = None
    gpu_clocks_mhz: Tuple[float, ...] = ()  # one per GPC on Orin/Thor
    temperatures_c: Dict[str, float] = field(default_factory=dict)
    rails: Dict[str, RailReading] = field(default_factory=dict)

    @property
    def gpu_clock_mhz(self) -> Optional[float]:
        """The GPU clock (the highest GPC clock where there are several), MHz."""
        return max(self.gpu_clocks_mhz) if self.gpu_clocks_mhz else None

    @property
    def gpu_temperature_c(self) -> Optional[float]:
        for name, value in self.temperatures_c.items():
            if name.lower() == "gpu":
                return value
        return None

    def to_dict(self) -> Dict[str, object]:
        """One JSON line of ``governor tegrastats parse --json``."""
        return {
            "timestamp": self.timestamp.isoformat() if self.timestamp else None,
            "ram_used_mb": self.ram_used_mb,
            "ram_total_mb": self.ram_total_mb,
            "cpu_load_pct": list(self.cpu_load_pct),
            "cpu_clock_mhz": list(self.cpu_clock_mhz),
            "emc": {"load_pct": self.emc_load_pct, "clock_mhz": self.emc_clock_mhz},
            "gpu": {
                "load_pct": self.gpu_load_pct,
                "clock_mhz": self.gpu_clock_mhz,
                "clocks_mhz": list(self.gpu_clocks_mhz),
            },
            "temperatures_c": dict(self.temperatures_c),
            "rails": {
                n: {"power_w": r.power_w, "average_w": r.average_w} for n, r in self.rails.items()
            },
        }


def _mb(value: str, unit: str) -> float:
    scale = {"k": 1.0 / 1024.0, "m": 1.0, "g": 1024.0}[unit[0].lower()]
    return float(value) * scale


def _finite(text: str) -> Optional[float]:
    value = float(text)
    return value if math.isfinite(value) else None


def _freq(token: str) -> Tuple[Optional[float], Tuple[float, ...]]:
    """``62%@306`` -> (62.0, (306.0,)); ``0%@[305,305]`` -> (0.0, (305.0, 305.0))."""
    match = _FREQ.match(token)
    if not match or not token:
        return None, ()
    load = _finite(match.group(1)) if match.group(1) else None
    if match.group(2):
        clocks = tuple(
            float(c) for c in match.group(2).split(",") if c and c.replace(".", "", 1).isdigit()
        )
    elif match.group(3):
        clocks = (float(match.group(3)),)
    else:
        clocks = ()
    return load, clocks


def _cpus(token: str) -> Tuple[Tuple[Optional[float], ...], Tuple[Optional[float], ...]]:
    loads: List[Optional[float]] = []
    clocks: List[Optional[float]] = []
    for core in token.strip("[]").split(","):
        if core == "off" or not core:
            loads.append(None)
            clocks.append(None)
            continue
        load, mhz = _freq(core)
        loads.append(load)
        clocks.append(mhz[0] if mhz else None)
    return tuple(loads), tuple(clocks)


def _rail(values: str) -> RailReading:
    numbers = [float(v.replace("mW", "")) / 1000.0 for v in values.split("/")]
    return RailReading(numbers[0], numbers[1] if len(numbers) > 1 else None)


def parse_date_line(line: str) -> Optional[_dt.datetime]:
    """A ``date`` line some scripts log between samples (``Tue Jan 26 18:22:31 UTC 2021``)."""
    match = _DATE_LINE.match(line)
    if not match:
        return None
    month = _MONTHS.get(match.group(1))
    if month is None:
        return None
    try:
        return _dt.datetime(
            int(match.group(6)),
            month,
            int(match.group(2)),
            int(match.group(3)),
            int(match.group(4)),
            int(match.group(5)),
        )
    except ValueError:
        return None


def _parse(line: str) -> Optional[TegrastatsSample]:
    timestamp = None
    stamp = _STAMP.match(line)
    if stamp:
        mm, dd, yyyy, hh, mi, ss = (int(g) for g in stamp.groups())
        timestamp = _dt.datetime(yyyy, mm, dd, hh, mi, ss)
        line = line[stamp.end() :]
    tokens = line.split()
    if len(tokens) < 2 or tokens[0] != "RAM":
        return None
    ram = _RAM.match(tokens[1])
    if not ram:
        return None
    fields: Dict[str, object] = {
        "timestamp": timestamp,
        "ram_used_mb": _mb(ram.group(1), ram.group(3)),
        "ram_total_mb": _mb(ram.group(2), ram.group(3)),
    }
    temps: Dict[str, float] = {}
    rails: Dict[str, RailReading] = {}
    i = 2
    while i < len(tokens):
        tok = tokens[i]
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
        if tok == "CPU" and nxt.startswith("[") and nxt.endswith("]"):
            fields["cpu_load_pct"], fields["cpu_clock_mhz"] = _cpus(nxt)
            i += 2
            continue
        if tok == "GR3D_FREQ" and nxt:
            load, clocks = _freq(nxt)
            if load is not None or clocks:
                fields["gpu_load_pct"], fields["gpu_clocks_mhz"] = load, clocks
                i += 2
                continue
        if tok == "EMC_FREQ" and nxt:
            load, clocks = _freq(nxt)
            if load is not None or clocks:
                fields["emc_load_pct"], fields["emc_clock_mhz"] = (
                    load,
                    (clocks[0] if clocks else None),
                )
                i += 2
                continue
        temp = _TEMP.match(tok)
        if temp:
            value = _finite(temp.group(2))
            if value is not None and temp.group(1).upper() not in _DUMMY_TEMPS:
                temps[temp.group(1)] = value
            i += 1
            continue
        if _RAIL_NAME.match(tok) and tok not in _NOT_RAILS and _RAIL_VALUES.match(nxt):
            reading = _rail(nxt)
            if math.isfinite(reading.power_w):
                rails[tok] = reading
            i += 2
            continue
        i += 1
    if not (rails or "cpu_load_pct" in fields or "gpu_load_pct" in fields):
        return None  # a line cut short after RAM/SWAP: nothing to measure
    return TegrastatsSample(temperatures_c=temps, rails=rails, **fields)  # type: ignore[arg-type]


def parse_line(line: str) -> Optional[TegrastatsSample]:
    """The sample on ``line``, or None if it is not a (readable) sample line. Never raises."""
    try:
        return _parse(line)
    except Exception:  # a malformed field we did not foresee: the line is skipped, not fatal
        return None


class TegrastatsParser:
    """Parses lines one by one, tracking ``date`` lines and counting skipped lines.

    ``skipped_lines`` counts non-blank lines that are neither samples nor ``date`` lines.
    A sample without its own timestamp takes the last ``date`` line seen, if any.
    """

    def __init__(self) -> None:
        self.samples = 0
        self.skipped_lines = 0
        self._last_date: Optional[_dt.datetime] = None

    def feed(self, line: str) -> Optional[TegrastatsSample]:
        text = line.rstrip("\r\n")
        if not text.strip():
            return None
        sample = parse_line(text)
        if sample is None:
            date = parse_date_line(text)
            if date is not None:
                self._last_date = date
            else:
                self.skipped_lines += 1
            return None
        self.samples += 1
        if sample.timestamp is None and self._last_date is not None:
            sample = _with_timestamp(sample, self._last_date)
            self._last_date = None
        return sample

    def parse(self, lines: Iterable[str]) -> List[TegrastatsSample]:
        out = []
        for line in lines:
            sample = self.feed(line)
            if sample is not None:
                out.append(sample)
        return out


def _with_timestamp(sample: TegrastatsSample, timestamp: _dt.datetime) -> TegrastatsSample:
    from dataclasses import replace

    return replace(sample, timestamp=timestamp)
