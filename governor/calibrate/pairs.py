"""Calibration in two dimensions: the (core clock, memory clock) pair with the least energy
per unit of work, on boards with several memory clocks.

It runs after the core-clock calibration (``procedure.py``, at the default memory clock,
unchanged), from its PPW-optimal core clock f*, with its own probes (at most
``MAX_PAIR_PROBES``), each measuring the power that sees the memory: the board's input rail on
a Jetson (``VDD_IN``, ``POM_5V_IN``; :func:`governor.devices.base.board_power_w`), the module
power on an NVML GPU. A GPU-rail-only figure would make a lower memory clock look free.

1. The memory axis at f*: every memory clock when there are at most four, else a search
   for the minimum over the ordered table (energy per unit is unimodal in the memory clock:
   bandwidth-bound time falls as 1/m, background power rises with m; ``models/memory.py``).
2. The core axis at the best memory clock m*: the neighbours of f* in the core table, then
   onward in the direction that lowered the energy, while the budget lasts (a lower memory
   clock makes a memory-bound load's core time matter less, so f* may move down).
3. The pair with the least measured energy wins; ties (within 0.1 %) go to the default
   memory clock, then to the higher core clock.

:func:`search_pairs` works on any ``probe(core_mhz, mem_mhz) -> (power_w, time_s)``: a live
device (:class:`PairProber`) or a measured table (``scripts/bench_calibration_2d.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from governor.devices.base import Device, board_power_w
from governor.errors import CalibrationError

__all__ = ["MAX_PAIR_PROBES", "PairProber", "PairResult", "search_pairs"]

#: the most pair probes the two-dimensional search takes
MAX_PAIR_PROBES = 10

Probe2 = Callable[[float, float], Tuple[float, float]]


@dataclass
class PairResult:
    """What the search measured and chose (MHz, W, s, J per unit)."""

    clock_mhz: float
    mem_clock_mhz: float
    energy_per_unit_j: float
    default_mem_clock_mhz: float
    default_energy_per_unit_j: float
    probes: List[Dict[str, float]] = field(default_factory=list)
    power_scope: str = "board"
    #: device time under load the pair probes took (s)
    device_time_s: float = 0.0

    @property
    def saving_rel(self) -> float:
        """Energy per unit saved against f* at the default memory clock (fraction)."""
        if self.default_energy_per_unit_j <= 0:
            return 0.0
        return 1.0 - self.energy_per_unit_j / self.default_energy_per_unit_j

    def to_dict(self) -> Dict[str, object]:
        return {
            "clock_mhz": self.clock_mhz,
            "mem_clock_mhz": self.mem_clock_mhz,
            "energy_per_unit_j": self.energy_per_unit_j,
            "default_mem_clock_mhz": self.default_mem_clock_mhz,
            "default_energy_per_unit_j": self.default_energy_per_unit_j,
            "saving_rel": self.saving_rel,
            "power_scope": self.power_scope,
            "device_time_s": self.device_time_s,
            "probes": list(self.probes),
        }


def search_pairs(
    probe: Probe2,
    clocks_mhz: Sequence[float],
    mem_clocks_mhz: Sequence[float],
    start_mhz: float,
    default_mem_mhz: float,
    *,
    max_probes: int = MAX_PAIR_PROBES,
) -> PairResult:
    """Search (see the module docstring) from core clock ``start_mhz``.

    Raises:
        ValueError: fewer than 2 probes allowed, or empty tables.
    """
    clocks = sorted(clocks_mhz)
    mems = sorted(mem_clocks_mhz)
    if max_probes < 2 or not clocks or not mems:
        raise ValueError("the pair search needs two probes and both clock tables")
    start = min(clocks, key=lambda c: abs(c - start_mhz))
    default_mem = min(mems, key=lambda m: abs(m - default_mem_mhz))
    energy: Dict[Tuple[float, float], float] = {}
    rows: List[Dict[str, float]] = []

    def e(f: float, m: float) -> float:
        if (f, m) not in energy:
            if len(rows) >= max_probes:
                return float("inf")
            p, t = probe(f, m)
            energy[(f, m)] = p * t
            rows.append({"clock_mhz": f, "mem_clock_mhz": m, "power_w": p, "time_s": t})
        return energy[(f, m)]

    # 1. the memory axis at f*
    e(start, default_mem)
    if len(mems) <= 4:
        for m in reversed(mems):
            e(start, m)
    else:  # ternary search over the table's indices
        lo, hi = 0, len(mems) - 1
        while hi - lo > 2 and len(rows) < max_probes - 2:
            a = lo + (hi - lo) // 3
            b = hi - (hi - lo) // 3
            if e(start, mems[a]) <= e(start, mems[b]):
                hi = b
            else:
                lo = a
        for i in range(lo, hi + 1):
            e(start, mems[i])
    best_m = _best_m(energy, start, mems, default_mem)
    # 2. the core axis at m*
    i = clocks.index(start)
    for step in (-1, 1):
        j = i + step
        while 0 <= j < len(clocks) and len(rows) < max_probes:
            here = e(clocks[j], best_m)
            if here >= energy[(clocks[j - step], best_m)]:
                break
            j += step
    # 3. the least measured energy
    ranked = sorted(
        energy.items(),
        key=lambda kv: (kv[1], kv[0][1] != default_mem, -kv[0][0]),
    )
    (f_best, m_best), e_best = ranked[0]
    for (f, m), v in ranked[1:]:  # within 0.1 %: prefer the default memory clock
        if v <= e_best * 1.001 and m == default_mem and m_best != default_mem:
            (f_best, m_best), e_best = (f, m), v
            break
    return PairResult(
        clock_mhz=f_best,
        mem_clock_mhz=m_best,
        energy_per_unit_j=e_best,
        default_mem_clock_mhz=default_mem,
        default_energy_per_unit_j=energy[(start, default_mem)],
        probes=rows,
    )


def _best_m(
    energy: Dict[Tuple[float, float], float], f: float, mems: Sequence[float], default: float
) -> float:
    measured = [(energy[(f, m)], m != default, m) for m in mems if (f, m) in energy]
    return min(measured)[2]


class PairProber:
    """Probes (core, memory) pairs on a live device under a running load: lock both clocks,
    wait, measure the board's power (the module's on NVML) and the work done over a window."""

    def __init__(
        self,
        device: Device,
        load: object,
        *,
        window_s: float = 1.5,
        settle_s: float = 1.5,
        period_s: float = 0.1,
    ) -> None:
        self.device = device
        self.load = load
        self.window_s = window_s
        self.settle_s = settle_s
        self.period_s = period_s
        self.scope: Optional[str] = None
        self.loaded_s = 0.0
        self._running = False

    def __call__(self, clock_mhz: float, mem_clock_mhz: float) -> Tuple[float, float]:
        dev = self.device
        dev.lock_gpu_clocks(clock_mhz)
        dev.lock_mem_clock(mem_clock_mhz)
        t_start = dev.clock.now_s()
        if not self._running:
            self.load.start()  # type: ignore[attr-defined]
            self._running = True
        dev.clock.sleep(self.settle_s)
        self.load.check()  # type: ignore[attr-defined]
        w0, t0 = self.load.work_done(), dev.clock.now_s()  # type: ignore[attr-defined]
        powers: List[float] = []
        while dev.clock.now_s() - t0 < self.window_s - 1e-9:
            dev.clock.sleep(self.period_s)
            sample = dev.sample()
            board = board_power_w(sample)
            if board is not None:
                self.scope = "board"
                powers.append(board)
            elif sample.power_w is not None:
                self.scope = sample.power_scope or "gpu"
                powers.append(sample.power_w)
        w1, t1 = self.load.work_done(), dev.clock.now_s()  # type: ignore[attr-defined]
        self.load.check()  # type: ignore[attr-defined]
        self.loaded_s += t1 - t_start
        if w1 <= w0 or not powers:
            raise CalibrationError(
                f"no measurable work or power at {clock_mhz:g} MHz / memory {mem_clock_mhz:g} "
                "MHz; use a longer --window-s"
            )
        return sum(powers) / len(powers), (t1 - t0) / (w1 - w0)

    def finish(self) -> None:
        if self._running:
            self.load.stop()  # type: ignore[attr-defined]
            self._running = False
        self.device.restore()
