"""A recorded sweep's CSV as people write it, made into the columns the readers take.

The readers (:func:`governor.devices.replay_files.read_sweep`, the twin's
``read_twin_sweeps``) take ``clock_mhz,power_w,time_s`` (and ``mem_clock_mhz``). Sweeps
measured elsewhere come as a spreadsheet saves them, so :func:`canonical_csv` first accepts:

- a UTF-8 byte-order mark (Excel's "CSV UTF-8");
- ``;`` or tab between the cells (a European spreadsheet), with decimal commas then;
- a header in words: ``Clock (MHz)``, ``power [mW]``, ``Time_ms``, ``sm_clock_khz`` -- case,
  spaces and brackets do not matter;
- other units, each converted: clocks in Hz, kHz, MHz or GHz; power in µW (``uw``), mW or
  W; time per run in ns, µs (``us``), ms, s or min.

A column must say its unit: ``time`` alone is seconds in some tools and milliseconds in
others (Kernel Tuner), so a header without one is refused with the names it could take.
Every line stays on its line number, so the readers' messages still point at the file's own
lines. Columns the readers do not know are passed on as they are.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from governor.errors import InvalidRequestError

__all__ = ["canonical_csv", "strip_bom"]

#: each quantity the readers take: the names it goes by, and its units as factors to the
#: reader's unit (the first unit is the reader's)
_CLOCK_UNITS = (("mhz", 1.0), ("khz", 1e-3), ("hz", 1e-6), ("ghz", 1e3))
_QUANTITIES: Dict[str, Tuple[Tuple[str, ...], Tuple[Tuple[str, float], ...]]] = {
    "clock": (
        (
            "clock",
            "freq",
            "frequency",
            "core_clock",
            "gpu_clock",
            "sm_clock",
            "graphics_clock",
            "core_freq",
            "gpu_freq",
            "sm_freq",
        ),
        _CLOCK_UNITS,
    ),
    "mem_clock": (("mem_clock", "memory_clock", "mem_freq", "memory_freq"), _CLOCK_UNITS),
    "power": (
        ("power", "power_draw", "avg_power", "mean_power", "gpu_power"),
        (
            ("w", 1.0),
            ("watt", 1.0),
            ("watts", 1.0),
            ("mw", 1e-3),
            ("milliwatts", 1e-3),
            ("uw", 1e-6),
        ),
    ),
    "time": (
        ("time", "runtime", "run_time", "duration", "time_per_run", "kernel_time"),
        (
            ("s", 1.0),
            ("sec", 1.0),
            ("secs", 1.0),
            ("seconds", 1.0),
            ("ms", 1e-3),
            ("msec", 1e-3),
            ("milliseconds", 1e-3),
            ("us", 1e-6),
            ("microseconds", 1e-6),
            ("ns", 1e-9),
            ("min", 60.0),
        ),
    ),
}
_DECIMAL_COMMA = re.compile(r"^\s*[-+]?\d+,\d+\s*$")


def strip_bom(text: str) -> str:
    """``text`` without the byte-order mark a spreadsheet may put first."""
    return text[1:] if text.startswith("\ufeff") else text


def _words(name: str) -> str:
    """``Clock (MHz)`` -> ``clock_mhz``: lower case, brackets and spaces to one ``_``; µ is u."""
    name = name.strip().lower().replace("µ", "u").replace("μ", "u")
    return re.sub(r"[^a-z0-9]+", "_", name).strip("_")


def _column(name: str) -> Tuple[str, float, Optional[str]]:
    """(the reader's name, the factor to its unit, why it cannot be taken) for a header cell;
    a name the readers do not know is passed on as written (factor 1)."""
    words = _words(name)
    for quantity, (names, units) in _QUANTITIES.items():
        for base in names:
            if words == base:
                firsts = {factor: u for u, factor in reversed(units)}  # a name per unit
                choices = ", ".join(
                    f"{base}_{firsts[f]}" for f in dict.fromkeys(f for _, f in units)
                )
                return words, 1.0, f"column {name.strip()!r} has no unit: name it one of {choices}"
            if not words.startswith(base + "_"):
                continue
            unit = words[len(base) + 1 :]
            for known, factor in units:
                if unit == known:
                    return f"{quantity}_{units[0][0]}", factor, None
    return name.strip(), 1.0, None


def _join(cells: List[str]) -> str:
    """One CSV line of ``cells``, quoted where a cell needs it."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="").writerow(cells)
    return buffer.getvalue()


def _delimiter(header: str) -> str:
    """The cell separator of ``header``: the one of ``,`` ``;`` tab that splits it most."""

    def cells(d: str) -> int:
        return len(next(csv.reader([header], delimiter=d)))

    return max((",", ";", "\t"), key=lambda d: (cells(d), d == ","))


def canonical_csv(path: Path, text: str) -> str:
    """``text`` (a sweep's CSV, see the module) as ``,``-separated cells under the readers'
    column names and units, line for line.

    Raises:
        InvalidRequestError: a known quantity without its unit, or two columns for one
            quantity (one line, with the path and the line).
    """
    lines = strip_bom(text).splitlines()
    body = [i for i, ln in enumerate(lines) if ln.strip() and not ln.lstrip().startswith("#")]
    if not body:
        return "\n".join(lines)
    head = body[0]
    delimiter = _delimiter(lines[head])
    columns: List[Tuple[str, float]] = []
    seen: Dict[str, str] = {}
    for cell in next(csv.reader([lines[head]], delimiter=delimiter)):
        name, factor, problem = _column(cell)
        if problem is not None:
            raise InvalidRequestError(f"{path}: line {head + 1}: {problem}")
        if name in seen:
            raise InvalidRequestError(
                f"{path}: line {head + 1}: columns {seen[name]!r} and {cell.strip()!r} are both "
                f"{name}; keep one"
            )
        seen[name] = cell.strip()
        columns.append((name, factor))
    out = list(lines)
    out[head] = _join([name for name, _ in columns])
    for i in body[1:]:
        cells = next(csv.reader([lines[i]], delimiter=delimiter))
        if delimiter != ",":
            cells = [c.replace(",", ".") if _DECIMAL_COMMA.match(c) else c for c in cells]
        for k, cell in enumerate(cells):
            factor = columns[k][1] if k < len(columns) else 1.0
            if factor != 1.0:
                try:
                    cells[k] = repr(float(cell) * factor)
                except ValueError:
                    pass  # the reader says which line and field is not a number
        out[i] = _join(cells)
    return "\n".join(out)
