"""Summaries of a tegrastats log: per-rail mean/max power and energy, GPU load and clocks.

Each sample stands for one interval (``--interval-ms``, default 1000 ms, tegrastats' own
default). Where every sample carries a timestamp, the gaps between them are used instead, the
last sample keeping the median gap. Rail power is the first (instantaneous) value.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Dict, Iterable, List, Optional

from governor.devices.tegrastats.parser import TegrastatsParser, TegrastatsSample
from governor.errors import InvalidRequestError

__all__ = ["summarize", "summarize_lines"]


def _intervals_s(samples: List[TegrastatsSample], interval_s: float) -> List[float]:
    stamps = [s.timestamp for s in samples]
    if len(samples) >= 2 and all(stamps):
        gaps = [(b - a).total_seconds() for a, b in zip(stamps, stamps[1:])]  # type: ignore[operator]
        if all(g > 0 for g in gaps):
            return gaps + [statistics.median(gaps)]
    return [interval_s] * len(samples)


def summarize(
    samples: List[TegrastatsSample], skipped_lines: int = 0, interval_ms: float = 1000.0
) -> Dict[str, Any]:
    """The document of ``governor tegrastats summarize --json`` (keys in specs/cli-json.md).

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
    dts = _intervals_s(samples, interval_ms / 1000.0)
    duration = sum(dts)
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
    loads = [s.gpu_load_pct for s in samples if s.gpu_load_pct is not None]
    clocks = [c for s in samples for c in s.gpu_clocks_mhz]
    mean_load: Optional[float] = sum(loads) / len(loads) if loads else None
    return {
        "samples": len(samples),
        "skipped_lines": skipped_lines,
        "duration_s": duration,
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
