"""Summaries of a tegrastats log: per-rail mean/max power and energy, GPU load and clocks.

Time-weighted: each sample holds until the next one. Where samples carry timestamps (their
own prefix, or ``date`` lines between them) the times come from those; ``--interval-ms``
(default 1000 ms, tegrastats' own default) is used only for a log without timestamps, and
the document says which (``"timing": "timestamps" | "interval"``).

Timestamps have one-second resolution, and a log faster than 1 Hz prints several samples
with the same second: those are spread evenly over that second (n samples 1/n s apart).
Samples without a stamp that follow a stamped one (a ``date`` line every few samples) are
spread evenly up to the next stamp. The last sample holds to the end of its second when it
shares that second with others, else for the typical interval of the log (the median
spacing); a log's duration is thus last - first + at most one second. Rail power is
the first (instantaneous) value tegrastats prints.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Dict, Iterable, List, Optional, Tuple

from governor.devices.tegrastats.parser import TegrastatsParser, TegrastatsSample
from governor.errors import InvalidRequestError

__all__ = ["hold_times_s", "summarize", "summarize_lines"]

_DAY_S = 86400.0


def _seconds(samples: List[TegrastatsSample]) -> List[Optional[float]]:
    """Each sample's stamp in seconds after the first stamp (None where it has none); a
    time of day that goes backwards by more than half a day crossed midnight."""
    first = next((s.timestamp for s in samples if s.timestamp is not None), None)
    out: List[Optional[float]] = []
    offset = 0.0
    last: Optional[float] = None
    for s in samples:
        if s.timestamp is None or first is None:
            out.append(None)
            continue
        t = (s.timestamp - first).total_seconds() + offset
        if s.time_only and last is not None and t < last - _DAY_S / 2:
            offset += _DAY_S
            t += _DAY_S
        out.append(t)
        last = t
    return out


def _slots(stamps: List[Optional[float]]) -> List[Tuple[float, int, bool]]:
    """Runs of samples anchored at one stamp: (stamp, samples, all share the stamp)."""
    slots: List[List[Any]] = []
    for t in stamps:
        if t is None:
            if slots:
                slots[-1][1] += 1
                slots[-1][2] = False
            continue
        if slots and t == slots[-1][0] and slots[-1][2]:
            slots[-1][1] += 1
        else:
            slots.append([t, 1, True])
    return [(float(t), int(n), bool(same)) for t, n, same in slots]


def hold_times_s(
    samples: List[TegrastatsSample], interval_s: float = 1.0
) -> Tuple[List[float], str]:
    """How long each sample holds (s), and the timing used: "timestamps" or "interval".

    Raises:
        ValueError: ``interval_s`` is not positive.
    """
    if interval_s <= 0:
        raise ValueError("interval_s must be positive")
    stamps = _seconds(samples)
    lead = 0
    while lead < len(stamps) and stamps[lead] is None:
        lead += 1  # samples before the first stamp: nothing to anchor them
    slots = _slots(stamps[lead:])
    if not slots or (len(slots) == 1 and (slots[0][1] < 2 or not slots[0][2])):
        return [interval_s] * len(samples), "interval"
    # Times of every anchored sample: samples sharing a stamp spread over its second (or up to
    # the next stamp, if sooner), unstamped followers up to the next stamp.
    times: List[float] = []
    for k, (t, n, same) in enumerate(slots):
        nxt = slots[k + 1][0] if k + 1 < len(slots) else None
        if nxt is not None and nxt > t:
            span = min(1.0, nxt - t) if same else nxt - t
        elif same and n > 1:
            span = 1.0
        else:
            span = 0.0  # the last slot of unstamped followers, or the clock went back
        times.extend(t + j * span / n for j in range(n))
    steps = [b - a for a, b in zip(times, times[1:]) if b > a]
    typical = statistics.median(steps) if steps else interval_s
    # A slot whose span is unknown (span 0 above) holds the typical interval per sample; the
    # last of n >= 2 samples sharing the final second holds to the end of that second.
    _, n_last, same_last = slots[-1]
    last = 1.0 / n_last if same_last and n_last > 1 else typical
    holds = [b - a if b > a else typical for a, b in zip(times, times[1:])] + [last]
    return [typical] * lead + holds, "timestamps"


def summarize(
    samples: List[TegrastatsSample], skipped_lines: int = 0, interval_ms: float = 1000.0
) -> Dict[str, Any]:
    """The document of ``governor tegrastats summarize --json`` (described in docs/hardware.md).

    Raises:
        InvalidRequestError: ``interval_ms`` is not a finite number > 0.
    """
    try:
        finite = not isinstance(interval_ms, bool) and math.isfinite(float(interval_ms))
    except (TypeError, ValueError):
        finite = False
    if not finite or interval_ms <= 0:
        raise InvalidRequestError(
            f"interval_ms must be a finite number of ms > 0, not {interval_ms!r}"
        )
    dts, timing = hold_times_s(samples, interval_ms / 1000.0)
    names: List[str] = []
    for s in samples:
        names.extend(n for n in s.rails if n not in names)
    rails: Dict[str, Dict[str, float]] = {}
    for name in names:
        pairs = [(s.rails[name].power_w, dt) for s, dt in zip(samples, dts) if name in s.rails]
        energy = sum(p * dt for p, dt in pairs)
        covered = sum(dt for _, dt in pairs)
        rails[name] = {
            "mean_w": energy / covered if covered > 0 else 0.0,
            "max_w": max(p for p, _ in pairs),
            "energy_j": energy,
        }
    loads = [(s.gpu_load_pct, dt) for s, dt in zip(samples, dts) if s.gpu_load_pct is not None]
    load_time = sum(dt for _, dt in loads)
    mean_load: Optional[float] = (
        sum(v * dt for v, dt in loads) / load_time if loads and load_time > 0 else None
    )
    clocks = [s.gpu_clock_mhz for s in samples if s.gpu_clock_mhz is not None]
    return {
        "samples": len(samples),
        "skipped_lines": skipped_lines,
        "timing": timing,
        "duration_s": sum(dts),
        "rails": rails,
        "gpu": {
            "mean_load_pct": mean_load,
            "clock_mhz": {
                "min": min(clocks) if clocks else None,
                "max": max(clocks) if clocks else None,
            },
        },
    }


def summarize_lines(lines: Iterable[str], interval_ms: float = 1000.0) -> Dict[str, Any]:
    """Parse then summarize a log's lines."""
    parser = TegrastatsParser()
    samples = parser.parse(lines)
    return summarize(samples, parser.skipped_lines, interval_ms)
