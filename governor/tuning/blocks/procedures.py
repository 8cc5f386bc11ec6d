"""The four auto-tuning procedures of Lopes et al., over any benchmark function.

A benchmark (see :mod:`governor.tuning.blocks.bench`) measures a tuple of block shapes, one
per concurrently running kernel, at one GPU clock, and returns time (s) and energy (J) per
run. Every distinct (blocks, clock) point measured counts once; repeating a point reuses the
measurement, as the paper's procedures do.

- Alg. 1 :func:`tune_time`:          candidates in rank order, stop when time rises.
- Alg. 2 :func:`tune_energy`:        with the first candidate walk the clock down while
  energy falls; then try candidates at that clock while energy falls; if the block changed,
  walk the clock again.
- Alg. 3 :func:`tune_time_multi`:    Alg. 1 for several concurrent kernels: kernels visited
  in decreasing time order, restarting while any kernel's choice changes.
- Alg. 4 :func:`tune_energy_multi`:  Alg. 2 for several kernels, one clock for the chip,
  kernels visited in decreasing energy order.

The clock walk starts at the top clock (the paper's starting point) or, when given, at a
calibrated PPW-optimal clock, and then goes down, or up if going down does not help. On long
clock tables it walks in strides (about 12 over the table), then refines one step each side.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from governor.errors import InvalidRequestError
from governor.tuning.blocks.candidates import Candidate, format_block
from governor.tuning.occupancy import parse_block

__all__ = [
    "Measurement",
    "Meter",
    "TuneResult",
    "exhaustive",
    "tune_energy",
    "tune_energy_multi",
    "tune_time",
    "tune_time_multi",
]

Block = Tuple[int, int, int]
Blocks = Tuple[Block, ...]


class Measurement(NamedTuple):
    """One run of the kernel set: time (s) and energy (J) per run; per-kernel figures when the
    benchmark can profile them (used only to order the kernels in Alg. 3/4). A failed run has
    infinite time and energy. ``clock_mhz`` is the clock the GPU really ran at, when the
    benchmark can tell (firmware lowers a locked clock under a power cap)."""

    time_s: float
    energy_j: float
    kernel_time_s: Optional[Tuple[float, ...]] = None
    kernel_energy_j: Optional[Tuple[float, ...]] = None
    clock_mhz: Optional[float] = None

    @property
    def ok(self) -> bool:
        return math.isfinite(self.time_s) and math.isfinite(self.energy_j)


@dataclass
class Meter:
    """Wraps a benchmark: caches points, counts distinct measurements, keeps the history."""

    bench: Any
    history: List[Tuple[Blocks, float, Measurement]] = field(default_factory=list)
    _cache: Dict[Tuple[Blocks, float], Measurement] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return len(self._cache)

    def __call__(self, blocks: Blocks, clock_mhz: float) -> Measurement:
        key = (blocks, clock_mhz)
        if key not in self._cache:
            raw = self.bench.measure(blocks, clock_mhz)
            result = (
                raw if isinstance(raw, Measurement) else Measurement(float(raw[0]), float(raw[1]))
            )
            self._cache[key] = result
            self.history.append((blocks, clock_mhz, result))
        return self._cache[key]


@dataclass(frozen=True)
class TuneResult:
    """What a procedure chose and what it cost."""

    procedure: str
    blocks: Blocks
    clock_mhz: float
    time_s: float
    energy_j: float
    measurements: int
    history: Tuple[Tuple[Blocks, float, Measurement], ...] = ()

    @property
    def block(self) -> Block:
        return self.blocks[0]

    def to_dict(self) -> Dict[str, Any]:
        return {
            "procedure": self.procedure,
            "blocks": [list(b) for b in self.blocks],
            "block_labels": [format_block(b) for b in self.blocks],
            "clock_mhz": self.clock_mhz,
            "time_s": self.time_s,
            "energy_j": self.energy_j,
            "measurements": self.measurements,
        }


def _as_blocks(candidates: Sequence[Any]) -> List[Block]:
    out = []
    for c in candidates:
        out.append(c.block if isinstance(c, Candidate) else parse_block(c))
    if not out:
        raise InvalidRequestError("no candidate blocks to try")
    return out


def _clocks(bench: Any) -> Tuple[float, ...]:
    clocks = tuple(sorted(float(c) for c in bench.clocks_mhz()))
    if not clocks:
        raise InvalidRequestError("the benchmark offers no clock to run at")
    return clocks


def _nearest_index(clocks: Sequence[float], clock_mhz: Optional[float]) -> int:
    if clock_mhz is None:
        return len(clocks) - 1
    if isinstance(clock_mhz, bool) or not math.isfinite(clock_mhz) or clock_mhz <= 0:
        # nan would silently pick the lowest clock
        raise InvalidRequestError(f"a clock must be a finite number of MHz > 0, not {clock_mhz!r}")
    return min(range(len(clocks)), key=lambda i: (abs(clocks[i] - clock_mhz), -i))


Objective = Callable[[Measurement], float]


def _energy(m: Measurement) -> float:
    return m.energy_j


def _time(m: Measurement) -> float:
    return m.time_s


def _order(meter: Meter, current: Blocks, clock: float, objective: str) -> List[int]:
    """Kernels in decreasing time (energy) order, from the last profile of ``current``."""
    m = meter(current, clock)
    figures = m.kernel_energy_j if objective == "energy" else m.kernel_time_s
    k = len(current)
    if not figures or len(figures) != k:
        return list(range(k))
    return sorted(range(k), key=lambda i: (-figures[i], i))


def _block_pass(
    meter: Meter,
    cands: Sequence[Sequence[Block]],
    current: Blocks,
    clock: float,
    objective: str,
    patience: int,
) -> Blocks:
    """One visit of every kernel: try its candidates in rank order while the objective falls."""
    value = _energy if objective == "energy" else _time
    for k in _order(meter, current, clock, objective):
        best, best_v = current, value(meter(current, clock))
        misses = 0
        for block in cands[k]:
            if block == current[k]:
                continue
            trial = current[:k] + (block,) + current[k + 1 :]
            v = value(meter(trial, clock))
            if v < best_v:
                best, best_v, misses = trial, v, 0
            else:
                misses += 1
                if misses >= patience:
                    break
        current = best
    return current


def _sustained(meter: Meter, blocks: Blocks, clocks: Sequence[float], i: int) -> int:
    """``i``, or the index of the clock the GPU really ran at when firmware capped it."""
    ran = meter(blocks, clocks[i]).clock_mhz
    while ran is not None and ran < clocks[i] - 0.5 and i > 0:
        below = [j for j in range(i) if clocks[j] <= ran + 0.5]
        if not below:
            break
        i = below[-1]
        ran = meter(blocks, clocks[i]).clock_mhz
    return i


def _walk(meter: Meter, blocks: Blocks, clocks: Sequence[float], start: int, step: int) -> int:
    """Index of the clock reached by walking from ``start`` in strides of ``step`` while
    energy falls: down first, up if down did not help. Requested clocks above what the
    board sustains (power cap) are skipped: they all run at the same real clock."""
    best = _sustained(meter, blocks, clocks, start)
    best_e = meter(blocks, clocks[best]).energy_j
    for direction in (-1, 1):
        moved = False
        i = best + direction * step
        while 0 <= i < len(clocks):
            m = meter(blocks, clocks[i])
            if direction > 0 and m.clock_mhz is not None and m.clock_mhz < clocks[i] - 0.5:
                break  # capped: higher requests run no faster
            if m.energy_j < best_e:
                best, best_e, moved = i, m.energy_j, True
                i += direction * step
            else:
                break
        if moved:
            break
    return best


def _clock_walk(
    meter: Meter, blocks: Blocks, clocks: Sequence[float], start: int, stride: Optional[int]
) -> int:
    step = stride if stride is not None else max(1, round(len(clocks) / 12))
    if step < 1:
        raise InvalidRequestError(f"clock stride must be at least 1, not {step}")
    index = _walk(meter, blocks, clocks, start, step)
    if step > 1:
        index = _walk(meter, blocks, clocks, index, 1)
    return index


def _result(meter: Meter, procedure: str, blocks: Blocks, clock: float) -> TuneResult:
    m = meter(blocks, clock)
    return TuneResult(
        procedure, blocks, clock, m.time_s, m.energy_j, meter.count, tuple(meter.history)
    )


def _check_kernels(bench: Any, cands: Sequence[Sequence[Any]]) -> List[List[Block]]:
    n = int(getattr(bench, "n_kernels", 1))
    if len(cands) != n:
        raise InvalidRequestError(
            f"the benchmark runs {n} kernel(s) but {len(cands)} candidate lists were given"
        )
    return [_as_blocks(c) for c in cands]


def tune_time_multi(
    bench: Any,
    candidates: Sequence[Sequence[Any]],
    clock_mhz: Optional[float] = None,
    patience: int = 1,
    max_rounds: int = 10,
) -> TuneResult:
    """Alg. 3 (Alg. 1 for one kernel): fastest blocks at one clock (default: the top)."""
    cands = _check_kernels(bench, candidates)
    meter = Meter(bench)
    clocks = _clocks(bench)
    clock = clocks[_nearest_index(clocks, clock_mhz)]
    current: Blocks = tuple(c[0] for c in cands)
    for _ in range(max_rounds):
        new = _block_pass(meter, cands, current, clock, "time", patience)
        if new == current:
            break
        current = new
    name = "alg1-time" if len(cands) == 1 else "alg3-time-multi"
    return _result(meter, name, current, clock)


def tune_energy_multi(
    bench: Any,
    candidates: Sequence[Sequence[Any]],
    start_clock_mhz: Optional[float] = None,
    clock_stride: Optional[int] = None,
    patience: int = 1,
    max_rounds: int = 10,
) -> TuneResult:
    """Alg. 4 (Alg. 2 for one kernel): blocks and one chip clock of least energy.

    ``start_clock_mhz`` starts the clock walk there (a calibrated PPW-optimal clock) instead
    of at the top clock.
    """
    cands = _check_kernels(bench, candidates)
    meter = Meter(bench)
    clocks = _clocks(bench)
    index = _nearest_index(clocks, start_clock_mhz)
    current: Blocks = tuple(c[0] for c in cands)
    for _ in range(max_rounds):
        index = _clock_walk(meter, current, clocks, index, clock_stride)
        new = _block_pass(meter, cands, current, clocks[index], "energy", patience)
        if new == current:
            break
        current = new
    name = "alg2-energy" if len(cands) == 1 else "alg4-energy-multi"
    return _result(meter, name, current, clocks[index])


def tune_time(
    bench: Any, candidates: Sequence[Any], clock_mhz: Optional[float] = None, patience: int = 1
) -> TuneResult:
    """Alg. 1: the fastest block of one kernel, trying candidates in rank order."""
    return tune_time_multi(bench, [candidates], clock_mhz=clock_mhz, patience=patience)


def tune_energy(
    bench: Any,
    candidates: Sequence[Any],
    start_clock_mhz: Optional[float] = None,
    clock_stride: Optional[int] = None,
    patience: int = 1,
) -> TuneResult:
    """Alg. 2: the block and clock of least energy for one kernel."""
    return tune_energy_multi(
        bench,
        [candidates],
        start_clock_mhz=start_clock_mhz,
        clock_stride=clock_stride,
        patience=patience,
    )


def exhaustive(
    bench: Any,
    blocks: Sequence[Sequence[Any]],
    objective: str = "energy",
    clocks_mhz: Optional[Sequence[float]] = None,
) -> TuneResult:
    """Measure every (blocks, clock) point; the count is the size of that space.

    Benchmarks that know their own truth cheaply (simulated boards) may offer
    ``optimum(blocks, objective, clocks)``; it is used instead of measuring point by point.
    """
    lists = _check_kernels(bench, blocks)
    clocks = tuple(clocks_mhz) if clocks_mhz is not None else _clocks(bench)
    size = len(clocks) * math.prod(len(b) for b in lists)
    if hasattr(bench, "optimum"):
        chosen, clock, m = bench.optimum(lists, objective, clocks)
        return TuneResult(f"exhaustive-{objective}", chosen, clock, m.time_s, m.energy_j, size)
    meter = Meter(bench)
    best = None
    for clock in clocks:
        for combo in itertools.product(*lists):
            m = meter(tuple(combo), clock)
            v = m.energy_j if objective == "energy" else m.time_s
            if best is None or v < best[0]:
                best = (v, tuple(combo), clock)
    assert best is not None
    return TuneResult(
        f"exhaustive-{objective}", best[1], best[2], *meter(best[1], best[2])[:2], meter.count
    )
