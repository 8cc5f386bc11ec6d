"""Parse tegrastats lines from every Jetson generation (docs/hardware.md, FORMAT.md in
tests/data/tegrastats).

:func:`parse_line` returns a :class:`TegrastatsSample` for a sample line (one with a ``RAM``
field and at least a CPU list, a GPU field or a rail) and None for anything else; it never
raises. :class:`TegrastatsParser` counts what it skipped. Units are converted here: rail mW ->
W, clocks stay MHz, temperatures °C.

Handled variations, each seen in a real log (tests/data/README.md says where):

- Any text before ``RAM`` (``1712345678---RAM``, ``[12:01:02] RAM``, a logger's prefix); a
  timestamp is read from it when it has one of the forms of :data:`_STAMPS`
  (``MM-DD-YYYY HH:MM:SS`` from ``tegrastats --logfile``, ISO dates, Unix seconds, a bare
  ``HH:MM:SS``); separate ``date`` lines between samples are remembered by the parser.
- GPU: ``GR3D_FREQ 62%@306``, ``0%@[305,305]`` and ``@[1000,1000,1000]`` (one clock per GPC,
  Orin and Thor), ``99%`` (load only), ``@0``; ``GR3D 3%@76`` (L4T R28, TX1). A GPC at 0 MHz
  or ``off`` is power-gated: :attr:`TegrastatsSample.gpu_clock_mhz` is the clock of the
  running GPCs, None when every GPC is gated.
- EMC: ``EMC_FREQ 4%@1600``, ``0%``, ``@4266`` (Thor), absent; ``EMC 1%@408`` (L4T R28).
- CPU: ``CPU [9%@1190,off,...]``, and ``cpu [17%,13%]@408`` (L4T R28; one clock for all).
- Rails: ``NAME cur/avg`` in mW with no unit (JetPack 4), ``NAME 5299mW/5299mW``,
  ``NAME cur/avg/max`` (JetPack 7), units on some values only, ``W`` units. A channel with
  nothing connected prints as ``NC 0mW/0mW`` (AGX Orin, JetPack 6) or reads ``NC``: not a
  rail, skipped. The first value is the instantaneous power.
- Temperatures ``NAME@41.5C`` in any case, ``cpu@52.968C/52.968C`` (JetPack 7: the first is
  the current value); ``PMIC@100C`` is a fixed dummy and ``-256C`` an offline sensor, both
  dropped.
- Engines (``NVENC off``, ``VIC_FREQ 729``, ``APE 174``, ``MTS fg 0% bg 0%``) and irregular
  spacing are skipped.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from dataclasses import dataclass, field, replace
from typing import Any, Dict, Iterable, List, Optional, Tuple

__all__ = [
    "OFFLINE_SENSOR_C",
    "RailReading",
    "TegrastatsParser",
    "TegrastatsSample",
    "parse_date_line",
    "parse_line",
]

#: What tegrastats prints for a thermal zone it cannot read (``GPU@-256C``, seen on Orin and
#: Thor when the GPU is power-gated): not a temperature.
OFFLINE_SENSOR_C = -256.0

# "RAM 1179/3983MB" after the start of the line or any non-word character (so IRAM is not it).
_RAM_AT = re.compile(r"(?:^|(?<=[^A-Za-z0-9_]))RAM\s+(\d+)/(\d+)([kKmMgG]B)\b")
_DATE_LINE = re.compile(
    r"^\s*(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)\s+(\w{3})\s+(\d{1,2})\s+(\d{2}):(\d{2}):(\d{2})"
    r"\s+(?:\w+\s+)?(\d{4})\s*$"
)
_MONTHS = {
    m: i + 1 for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split())
}
# Timestamps found in the text before RAM, tried in order; the last match in the prefix wins.
_STAMPS = (
    # tegrastats --logfile on L4T R32.5+: 03-14-2024 09:26:53
    (
        "mdy",
        re.compile(r"(\d{2})-(\d{2})-(\d{4})[ T]+(\d{1,2}):(\d{2}):(\d{2})(?:[.,](\d+))?"),
    ),
    # logging scripts: 2024-03-14 09:26:53(.123), 2024-03-14T09:26:53
    (
        "ymd",
        re.compile(r"(\d{4})-(\d{2})-(\d{2})[ T_]+(\d{1,2}):(\d{2}):(\d{2})(?:[.,](\d+))?"),
    ),
    # date +%s: 1712345678 or 1712345678.123; date +%s%3N: 1712345678123 (ms)
    ("epoch", re.compile(r"(?<![\d.])(\d{9,10})(?:\.(\d+))?(?![\d:])")),
    ("epoch_ms", re.compile(r"(?<![\d.])(\d{12,13})(?![\d.:])")),
    # a time of day alone: [12:01:02]
    ("hms", re.compile(r"(?<![\d:])(\d{1,2}):(\d{2}):(\d{2})(?:[.,](\d+))?(?![\d:])")),
)
_TEMP = re.compile(r"^([A-Za-z][A-Za-z0-9_]*)@(-?\d+(?:\.\d+)?)C(?:/-?\d+(?:\.\d+)?C)*$")
_RAIL_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
_POWER = re.compile(r"^(\d+(?:\.\d+)?)(mW|W)?$")
_FREQ = re.compile(r"^(?:(\d+(?:\.\d+)?)%)?(?:@(?:\[([^\]]*)\]|(\d+(?:\.\d+)?)))?$")
_OLD_CPUS = re.compile(r"^\[([^\]]*)\](?:@(\d+(?:\.\d+)?))?$")
_DUMMY_TEMPS = ("PMIC",)
_NOT_RAILS = (
    "RAM",
    "SWAP",
    "IRAM",
    "EMC",
    "EMC_FREQ",
    "GR3D",
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
    """One tegrastats line, in governor's units. Missing fields are None or empty.

    ``timestamp`` is naive local time as printed; a bare time of day is dated 1900-01-01
    (``time_only`` is then True) and only its differences mean anything.
    """

    timestamp: Optional[_dt.datetime] = None
    ram_used_mb: Optional[float] = None
    ram_total_mb: Optional[float] = None
    cpu_load_pct: Tuple[Optional[float], ...] = ()  # None for an "off" core
    cpu_clock_mhz: Tuple[Optional[float], ...] = ()
    emc_load_pct: Optional[float] = None
    emc_clock_mhz: Optional[float] = None
    gpu_load_pct: Optional[float] = None
    # One per GPC (Orin and Thor print a list) as printed; 0 or None (``off``) is gated.
    gpu_clocks_mhz: Tuple[Optional[float], ...] = ()
    temperatures_c: Dict[str, float] = field(default_factory=dict)
    rails: Dict[str, RailReading] = field(default_factory=dict)
    time_only: bool = False

    @property
    def gpu_clock_mhz(self) -> Optional[float]:
        """The GPU clock in MHz: the highest clock of the running GPCs; None when every GPC is
        power-gated (``0%@[0,0]``) or no clock was printed."""
        running = [c for c in self.gpu_clocks_mhz if c is not None and c > 0]
        return max(running) if running else None

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
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _clock(text: str) -> Optional[float]:
    """One GPC's clock: MHz, or None for ``off`` and anything unreadable."""
    text = text.strip()
    if not text or not text.replace(".", "", 1).isdigit():
        return None
    return _finite(text)


def _freq(token: str) -> Tuple[Optional[float], Tuple[Optional[float], ...]]:
    """``62%@306`` -> (62.0, (306.0,)); ``0%@[305,off]`` -> (0.0, (305.0, None))."""
    match = _FREQ.match(token)
    if not match or not token:
        return None, ()
    load = _finite(match.group(1)) if match.group(1) else None
    if match.group(2) is not None:
        clocks: Tuple[Optional[float], ...] = tuple(
            _clock(c) for c in match.group(2).split(",") if c.strip()
        )
    elif match.group(3):
        clocks = (_finite(match.group(3)),)
    else:
        clocks = ()
    return load, clocks


def _cpus(token: str) -> Tuple[Tuple[Optional[float], ...], Tuple[Optional[float], ...]]:
    """``[9%@1190,off]`` or (L4T R28) ``[17%,13%]@408``: per-core loads and clocks."""
    match = _OLD_CPUS.match(token)
    if not match:
        return (), ()
    shared = _finite(match.group(2)) if match.group(2) else None
    loads: List[Optional[float]] = []
    clocks: List[Optional[float]] = []
    for core in match.group(1).split(","):
        core = core.strip()
        if core == "off" or not core:
            loads.append(None)
            clocks.append(None)
            continue
        load, mhz = _freq(core)
        loads.append(load)
        clocks.append(mhz[0] if mhz else shared)
    return tuple(loads), tuple(clocks)


def _rail(values: str) -> Optional[RailReading]:
    """``5299mW/5299mW``, ``2532/2698``, ``1.5W/2W``, ``a/b/c`` -> W; None if not a rail."""
    parts = values.split("/")
    if not 2 <= len(parts) <= 3:
        return None
    numbers = []
    for part in parts:
        match = _POWER.match(part)
        if not match:
            return None
        value = float(match.group(1)) * (1.0 if match.group(2) == "W" else 1e-3)
        if not math.isfinite(value):
            return None
        numbers.append(value)
    return RailReading(numbers[0], numbers[1])


def _not_connected(values: str) -> bool:
    """``NC`` or ``NC/NC``: a rail tegrastats lists but cannot read."""
    parts = values.split("/")
    return bool(parts) and all(p == "NC" for p in parts)


def _stamp_from(prefix: str) -> Tuple[Optional[_dt.datetime], bool]:
    """The timestamp in the text before RAM, and whether it is a time of day only."""
    for kind, pattern in _STAMPS:
        matches = list(pattern.finditer(prefix))
        if not matches:
            continue
        g = matches[-1].groups()
        try:
            if kind in ("epoch", "epoch_ms"):
                if kind == "epoch_ms":
                    seconds = int(g[0]) / 1000.0
                else:
                    seconds = float(g[0] + ("." + g[1] if g[1] else ""))
                stamp = _dt.datetime(1970, 1, 1) + _dt.timedelta(seconds=seconds)
                return stamp, False
            if kind == "hms":
                micro = int((g[3] or "0")[:6].ljust(6, "0"))
                base = _dt.datetime(1900, 1, 1, int(g[0]), int(g[1]), int(g[2]), micro)
                return base, True
            if kind == "mdy":
                month, day, year = int(g[0]), int(g[1]), int(g[2])
            else:
                year, month, day = int(g[0]), int(g[1]), int(g[2])
            micro = int((g[6] or "0")[:6].ljust(6, "0"))
            stamp = _dt.datetime(year, month, day, int(g[3]), int(g[4]), int(g[5]), micro)
            return stamp, False
        except (ValueError, OverflowError):
            continue
    return None, False


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
    ram = _RAM_AT.search(line)
    if not ram:
        return None
    timestamp, time_only = _stamp_from(line[: ram.start()])
    fields: Dict[str, Any] = {
        "timestamp": timestamp,
        "time_only": time_only,
        "ram_used_mb": _mb(ram.group(1), ram.group(3)),
        "ram_total_mb": _mb(ram.group(2), ram.group(3)),
    }
    tokens = line[ram.end() :].split()
    temps: Dict[str, float] = {}
    rails: Dict[str, RailReading] = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ""
        if tok in ("CPU", "cpu") and nxt.startswith("["):
            loads, clocks = _cpus(nxt)
            if loads:
                fields["cpu_load_pct"], fields["cpu_clock_mhz"] = loads, clocks
                i += 2
                continue
        if tok in ("GR3D_FREQ", "GR3D") and nxt:
            load, gpcs = _freq(nxt)
            if load is not None or gpcs:
                fields["gpu_load_pct"], fields["gpu_clocks_mhz"] = load, gpcs
                i += 2
                continue
        if tok in ("EMC_FREQ", "EMC") and nxt:
            load, clocks = _freq(nxt)
            if load is not None or clocks:
                fields["emc_load_pct"] = load
                fields["emc_clock_mhz"] = clocks[0] if clocks else None
                i += 2
                continue
        temp = _TEMP.match(tok)
        if temp:
            value = _finite(temp.group(2))
            name = temp.group(1)
            if (
                value is not None
                and value > OFFLINE_SENSOR_C + 0.5  # -256C: the sensor is offline
                and name.upper() not in _DUMMY_TEMPS
            ):
                temps[name] = value
            i += 1
            continue
        if _RAIL_NAME.match(tok) and tok not in _NOT_RAILS and nxt:
            if tok == "NC" or _not_connected(nxt):
                i += 2  # NC: listed but not connected; no reading
                continue
            reading = _rail(nxt)
            if reading is not None:
                rails[tok] = reading
                i += 2
                continue
        i += 1
    if not (rails or "cpu_load_pct" in fields or "gpu_load_pct" in fields):
        return None  # a line cut short after RAM/SWAP: nothing to measure
    return TegrastatsSample(temperatures_c=temps, rails=rails, **fields)


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
            sample = replace(sample, timestamp=self._last_date)
            self._last_date = None
        return sample

    def parse(self, lines: Iterable[str]) -> List[TegrastatsSample]:
        out = []
        for line in lines:
            sample = self.feed(line)
            if sample is not None:
                out.append(sample)
        return out
