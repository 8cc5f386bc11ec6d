"""Readers for recorded sweeps: replay CSV files and Kernel Tuner cache JSON files.

Replay CSV: ``#`` comment lines (``# device: ...``, ``# workload: ...``, ``# source: ...``), a
header ``clock_mhz,power_w,time_s`` and one row per measured core clock: power (W) while the
workload runs at that clock, time (s) per run. Headers in words, other units and ``;`` or tab
separators are taken too (:mod:`governor.devices.replay_columns`).

Kernel Tuner cache: ``{"device_name", "tune_params", "cache": {key: entry}}`` where an entry
has ``nvml_gr_clock`` (requested MHz), ``core_freq`` (measured MHz, when present),
``nvml_power`` (W) and ``time`` (ms per run). Entries are grouped by requested clock; when a
cache sweeps other parameters too, the fastest configuration at each clock is kept.

Every problem is a :class:`~governor.errors.InvalidRequestError` naming the file, the line
and the field. A value no GPU produces is a bad row, not a measurement: not a finite number,
zero or negative, a power above :data:`MAX_POWER_W` or a clock above :data:`MAX_CLOCK_MHZ`.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Container, Dict, List, Optional, Tuple, Union

from governor._compat import json_loads
from governor.devices.replay_columns import canonical_csv, strip_bom
from governor.errors import InvalidRequestError

__all__ = [
    "MAX_CLOCK_MHZ",
    "MAX_POWER_W",
    "MIN_CLOCKS",
    "Sweep",
    "check_value",
    "entry_place",
    "read_sweep",
]

MIN_CLOCKS = 3  # fewer measured clocks cannot define a power model
# Above any GPU: the largest boards draw about 1.2 kW (B200), a superchip module 2.7 kW.
MAX_POWER_W = 5000.0
MAX_CLOCK_MHZ = 10000.0  # GPU core clocks are below 3 GHz


@dataclass(frozen=True)
class Sweep:
    """A measured sweep: one row per distinct clock, ascending by measured clock."""

    path: str
    device: str
    workload: str
    source: str
    clock_mhz: Tuple[float, ...]  # measured clock
    requested_mhz: Tuple[float, ...]  # requested clock (= measured when unknown)
    power_w: Tuple[float, ...]
    time_s: Tuple[float, ...]

    def __len__(self) -> int:
        return len(self.clock_mhz)

    def energy_j(self) -> Tuple[float, ...]:
        return tuple(p * t for p, t in zip(self.power_w, self.time_s))

    def rows(self, keep: Container[int]) -> Sweep:
        """The same sweep with only the rows whose indices are in ``keep`` (held-out fits)."""
        from dataclasses import replace

        def pick(xs: Tuple[float, ...]) -> Tuple[float, ...]:
            return tuple(x for i, x in enumerate(xs) if i in keep)

        return replace(
            self,
            clock_mhz=pick(self.clock_mhz),
            requested_mhz=pick(self.requested_mhz),
            power_w=pick(self.power_w),
            time_s=pick(self.time_s),
        )


def _bad(path: Path, message: str) -> InvalidRequestError:
    return InvalidRequestError(f"{path}: {message}")


def check_value(value: float, field: str) -> Optional[str]:
    """Why ``value`` of a sweep's ``field`` (``clock_mhz``, ``power_w``, ``time_s`` or a
    Kernel Tuner name) is no GPU's measurement, or None when it can be one."""
    if not math.isfinite(value):
        return f"{value!r} is not a finite number"
    if value <= 0:
        return f"{value:g} must be positive"
    if "power" in field and value > MAX_POWER_W:
        return f"{value:g} W is more than any GPU draws (at most {MAX_POWER_W:g} W)"
    if ("clock" in field or "freq" in field) and value > MAX_CLOCK_MHZ:
        return f"{value:g} MHz is above any GPU's clock (at most {MAX_CLOCK_MHZ:g} MHz)"
    return None


def _number(path: Path, where: str, text: Any, field: str) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise _bad(path, f"{where} {field}: {text!r} is not a number") from None
    problem = check_value(value, field)
    if problem:
        raise _bad(path, f"{where} {field}: {problem}")
    return value


def read_sweep(path: Union[str, Path]) -> Sweep:
    """Read a replay CSV or a Kernel Tuner cache JSON (chosen by content).

    Raises:
        InvalidRequestError: unreadable file, bad rows (NaN, negative, missing columns),
            duplicate clocks, or fewer than ``MIN_CLOCKS`` clocks.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise _bad(path, f"cannot read replay file ({err.strerror or err})") from err
    except UnicodeDecodeError as err:
        raise _bad(path, "not a text file") from err
    text = strip_bom(text)
    if text.lstrip().startswith("{"):
        sweep = _read_kernel_tuner(path, text)
    else:
        sweep = _read_csv(path, canonical_csv(path, text))
    if len(sweep) < MIN_CLOCKS:
        raise _bad(
            path, f"only {len(sweep)} distinct clock(s); a power model needs at least {MIN_CLOCKS}"
        )
    return sweep


def _read_csv(path: Path, text: str) -> Sweep:
    meta: Dict[str, str] = {}
    rows: List[Tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if line.lstrip().startswith("#"):
            key, sep, value = line.lstrip("# \t").partition(":")
            if sep:
                meta[key.strip().lower()] = value.strip()
            continue
        rows.append((number, line))
    if not rows:
        raise _bad(path, "no header or rows (expected 'clock_mhz,power_w,time_s')")
    header_line, header = rows[0][0], [h.strip() for h in next(csv.reader([rows[0][1]]))]
    needed = ("clock_mhz", "power_w", "time_s")
    missing = [c for c in needed if c not in header]
    if missing:
        raise _bad(
            path,
            f"line {header_line}: header lacks {', '.join(missing)} (expected 'clock_mhz,power_w,time_s')",
        )
    index = [header.index(c) for c in needed]
    points = []
    for number, line in rows[1:]:
        cells = next(csv.reader([line]))
        if len(cells) < len(header):
            raise _bad(path, f"line {number}: expected {len(header)} columns, found {len(cells)}")
        clock, power, time = (
            _number(path, f"line {number}", cells[i], name) for name, i in zip(needed, index)
        )
        points.append((clock, clock, power, time, number))
    return _build(
        path,
        meta.get("device", path.stem),
        meta.get("workload", ""),
        meta.get("source", ""),
        points,
    )


def _read_kernel_tuner(path: Path, text: str) -> Sweep:
    try:
        doc = json_loads(text)
    except ValueError as err:
        raise _bad(path, f"not valid JSON ({err})") from err
    cache = doc.get("cache") if isinstance(doc, dict) else None
    if not isinstance(cache, dict) or not cache:
        raise _bad(path, "not a Kernel Tuner cache (no 'cache' entries)")
    best: Dict[float, Tuple[float, float, float, float, str]] = {}
    for key, entry in cache.items():
        if not isinstance(entry, dict) or "nvml_gr_clock" not in entry:
            raise _bad(path, f"entry {key!r} has no 'nvml_gr_clock' (not a clock sweep)")
        where = entry_place(text, key)
        if not isinstance(entry.get("time"), (int, float)):
            continue  # failed or invalid configuration recorded by Kernel Tuner
        requested = _number(path, where, entry["nvml_gr_clock"], "nvml_gr_clock")
        measured = _number(path, where, entry.get("core_freq", requested), "core_freq")
        power = _number(path, where, entry.get("nvml_power"), "nvml_power")
        time_s = _number(path, where, entry["time"], "time") / 1000.0  # ms -> s
        if requested not in best or time_s < best[requested][3]:
            best[requested] = (requested, measured, power, time_s, key)
    points = [(m, r, p, t, k) for r, m, p, t, k in best.values()]
    device = str(doc.get("device_name", path.stem))
    workload = str(doc.get("kernel_name", ""))
    return _build(path, device, workload, "Kernel Tuner cache", points)


def entry_place(text: str, key: str) -> str:
    """``line N entry 'KEY'``: where a Kernel Tuner cache entry starts in the file's text."""
    at = text.find(json.dumps(key) + ":")
    line = f"line {text.count(chr(10), 0, at) + 1} " if at >= 0 else ""
    return f"{line}entry {key!r}"


def _build(path: Path, device: str, workload: str, source: str, points: list) -> Sweep:
    points.sort(key=lambda p: p[0])
    for a, b in zip(points, points[1:]):
        if abs(a[0] - b[0]) < 1e-9:
            raise _bad(path, f"clock {a[0]:g} MHz appears twice (at {a[4]} and {b[4]})")
    return Sweep(
        path=str(path),
        device=device,
        workload=workload,
        source=source,
        clock_mhz=tuple(p[0] for p in points),
        requested_mhz=tuple(p[1] for p in points),
        power_w=tuple(p[2] for p in points),
        time_s=tuple(p[3] for p in points),
    )


def nearest_index(values: Tuple[float, ...], target: float) -> int:
    return min(range(len(values)), key=lambda i: abs(values[i] - target))


def sweep_optimum(sweep: Sweep) -> Tuple[int, Optional[float]]:
    """Index and clock of the lowest measured energy per run."""
    energy = sweep.energy_j()
    i = min(range(len(energy)), key=lambda k: energy[k])
    return i, sweep.clock_mhz[i]
