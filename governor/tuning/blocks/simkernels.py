"""A kernel model for simulated boards: run time that depends on the thread-block shape.

A :class:`KernelModel` describes a CUDA kernel by its resources (registers per thread, shared
memory) and its work (time on the whole board at full occupancy, at the board's top clock,
split into a compute part that scales with the clock and a memory part that does not). On a
board (``BoardSpec.facts``: ``cc`` and ``sms``) and at a GPU clock ``f`` its time for a block
shape ``b`` is::

    B      = blocks per SM (occupancy calculator, governor.tuning.occupancy)
    A      = B · warps per block,   W = the SM's warp slots
    waves  = ⌈blocks in the grid / (B · SMs given to the kernel)⌉        wave quantisation
    wave   = τ(f) · (A + h)/(W + h) · (1 + σ · warps per block / 32) + o/f
    T      = waves · wave

where τ(f) is the time one SM needs for ``W·32`` threads at full occupancy (the board's
roofline ``Workload`` law in f), ``h`` the warps needed to hide latency (few active warps
leave the SM waiting), ``σ`` the cost of block-wide synchronisation, and ``o`` a per-wave
launch overhead in cycles.

Energy uses the board's own physics (``BoardSpec.steady_gpu_power_w``): the GPU's idle power
at ``f`` over the whole run, plus the kernel's dynamic power on the SMs it holds, scaled down
while SMs stall (low occupancy) or sit empty (the last, partial wave).

The memory clock ``m`` (boards with several, ``BoardSpec.mem_clocks_mhz``): the memory part
of ``τ`` is the one at the default memory clock times the board's memory load's
t_mem(m)/t_mem(m_default) (:func:`mem_time_scale`: latency plus bandwidth, the law of
:mod:`governor.models.memory` the catalog tabulates), and the power at ``m`` is the board's
(its memory background power at ``m``; the dynamic part through the busy share u, which a
longer memory part lowers). At the default memory clock every figure is the one without the
axis, bit for bit.

Concurrent kernels share the SMs: each receives a share proportional to its work (at least
one SM), runs on it with its own block shape, and the set takes as long as the slowest. This
static split is a simplification of the hardware's block scheduler, stated here so nobody
mistakes it for a measured fact.

:func:`equivalent_workload` turns one (kernels, blocks, clock) point into a ``Workload`` that a
:class:`~governor.devices.sim.device.SimDevice` can run, so measurements go through the
simulated sensors and energy counter like on hardware.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from governor.devices.sim.physics import BoardSpec, Workload
from governor.errors import InvalidRequestError
from governor.tuning.occupancy import ArchLimits, Occupancy, arch_limits, occupancy, parse_block

__all__ = [
    "EXAMPLE_KERNELS",
    "KernelModel",
    "KernelSetPoint",
    "board_arch",
    "board_sms",
    "equivalent_workload",
    "evaluate",
    "kernel_by_name",
    "kernel_time_energy",
    "mem_time_scale",
    "split_sms",
]

Block = Tuple[int, int, int]


@dataclass(frozen=True)
class KernelModel:
    """One kernel: resources, problem size and work (see module docstring).

    ``work_s`` is the kernel's time on the whole board at full occupancy and the top clock;
    ``mem_fraction`` the share of it spent waiting on memory (0 compute-bound, 1 memory-bound).
    """

    name: str
    threads: int
    work_s: float
    mem_fraction: float = 0.2
    registers_per_thread: int = 32
    static_shared_bytes: int = 0
    shared_bytes_per_thread: int = 0
    latency_warps: float = 8.0
    sync_cost: float = 0.02
    wave_overhead_cycles: float = 2000.0
    overlap_k: float = 2.0
    activity: float = 1.0  # dynamic-power scale while computing (1: the board's compute load)
    mem_w: float = 0.0

    def __post_init__(self) -> None:
        if self.threads < 1 or not self.work_s > 0:
            raise InvalidRequestError(f"kernel {self.name!r}: threads and work_s must be positive")
        if not 0.0 <= self.mem_fraction <= 1.0:
            raise InvalidRequestError(f"kernel {self.name!r}: mem_fraction must be in [0, 1]")
        if (
            min(
                self.latency_warps,
                self.sync_cost,
                self.wave_overhead_cycles,
                self.activity,
                self.mem_w,
            )
            < 0
        ):
            raise InvalidRequestError(f"kernel {self.name!r}: model parameters must be >= 0")

    def shared_bytes(self, threads_per_block: int) -> int:
        return self.static_shared_bytes + self.shared_bytes_per_thread * threads_per_block

    def occupancy(self, arch: ArchLimits, block: object) -> Occupancy:
        shape = parse_block(block)
        threads = shape[0] * shape[1] * shape[2]
        return occupancy(arch, shape, self.registers_per_thread, self.shared_bytes(threads))

    def base_workload(self, board: BoardSpec) -> Workload:
        """The roofline law of one full-occupancy run on the whole board (1 unit = 1 run).

        On a board with several memory clocks the memory part, ``work_s·mem_fraction`` at the
        default memory clock, follows the board's memory load across them
        (:func:`mem_time_scale`); on a board with one it is the same at every clock."""
        top = board.clocks_mhz[-1]
        compute_s = self.work_s * (1.0 - self.mem_fraction)
        mem_s = self.work_s * self.mem_fraction
        axis = len(board.mem_clocks_mhz) > 1 and board.default_mem_clock_mhz is not None
        return Workload(
            name=f"kernel:{self.name}",
            compute_mcycles=max(compute_s * top, 1e-12),
            mem_s=mem_s,
            overlap_k=self.overlap_k,
            a_stall=0.1 * self.activity,
            a_busy=self.activity,
            mem_w=self.mem_w,
            mem_clock_mhz=board.default_mem_clock_mhz if axis else None,
            mem_s_at=_mem_s_at(board, mem_s) if axis and mem_s > 0 else {},
        )


def mem_time_scale(board: BoardSpec, mem_clock_mhz: float) -> float:
    """t_mem(m)/t_mem(m_default) of the board's memory load (``workloads["memory"]``): how
    much longer a byte takes to move at ``mem_clock_mhz`` than at the default memory clock.
    The law is the board's own (:meth:`Workload.mem_time_s`: the latency + bandwidth law of
    :func:`governor.models.memory.mem_time_s` tabulated per memory clock on the Jetsons,
    1/f_mem (:func:`governor.models.formulas.mem_time_s`) where one point is known); a
    kernel's memory part is assumed to split into latency and bandwidth as that load's does.
    """
    load = board.workloads["memory"]
    return load.mem_time_s(mem_clock_mhz) / load.mem_time_s(board.default_mem_clock_mhz)


def _mem_s_at(board: BoardSpec, mem_s: float) -> Dict[float, float]:
    """A kernel's memory part (s) at each memory clock of ``board``: ``mem_s`` itself at the
    default (bit for bit), scaled by :func:`mem_time_scale` elsewhere."""
    default = board.default_mem_clock_mhz
    return {
        m: mem_s if m == default else mem_s * mem_time_scale(board, m) for m in board.mem_clocks_mhz
    }


def board_arch(board: BoardSpec) -> ArchLimits:
    cc = board.facts.get("cc")
    if cc is None:
        raise InvalidRequestError(f"board {board.name} has no compute capability in its facts")
    return arch_limits(str(cc))


def board_sms(board: BoardSpec) -> int:
    sms = board.facts.get("sms")
    if not sms:
        raise InvalidRequestError(f"board {board.name} has no SM count in its facts")
    if not isinstance(sms, (int, float, str)):
        raise InvalidRequestError(f"board {board.name}: its SM count is not a number: {sms!r}")
    return int(sms)


def split_sms(kernels: Sequence[KernelModel], sms: int) -> List[int]:
    """SMs given to each concurrent kernel: proportional to work, at least one each."""
    k = len(kernels)
    if k < 1:
        raise InvalidRequestError("at least one kernel is needed")
    if k > sms:
        raise InvalidRequestError(
            f"{k} concurrent kernels need at least {k} SMs; the board has {sms}"
        )
    if k == 1:
        return [sms]
    total = sum(m.work_s for m in kernels)
    spare = sms - k
    exact = [spare * m.work_s / total for m in kernels]
    share = [1 + int(math.floor(x)) for x in exact]
    left = sms - sum(share)
    order = sorted(range(k), key=lambda i: (-(exact[i] - math.floor(exact[i])), i))
    for i in order[:left]:
        share[i] += 1
    return share


@dataclass(frozen=True)
class KernelSetPoint:
    """The simulated truth for one (blocks, clock) point of a set of concurrent kernels."""

    clock_mhz: float
    time_s: float  # the slowest kernel's time (the set's makespan)
    energy_j: float
    power_w: float  # average GPU power over the run
    kernel_time_s: Tuple[float, ...]
    kernel_energy_j: Tuple[float, ...]  # each kernel's dynamic energy plus its share of idle
    sms: Tuple[int, ...]
    mem_clock_mhz: Optional[float] = None  # None: the board's default memory clock


def kernel_time_energy(
    board: BoardSpec,
    arch: ArchLimits,
    model: KernelModel,
    block: object,
    clock_mhz: float,
    sms: int,
    total_sms: int,
    mem_clock_mhz: Optional[float] = None,
) -> Tuple[float, float]:
    """(time_s, dynamic energy_j) of one kernel on ``sms`` SMs at ``clock_mhz`` and
    ``mem_clock_mhz`` (None: the board's default memory clock)."""
    occ = model.occupancy(arch, block)
    if occ.blocks_per_sm < 1:  # pragma: no cover - occupancy() raises first
        raise InvalidRequestError(f"kernel {model.name!r}: block {block} cannot run")
    base = model.base_workload(board)
    mem_clock = board.default_mem_clock_mhz if mem_clock_mhz is None else mem_clock_mhz
    t_full = base.time_per_unit_s(clock_mhz, mem_clock)
    w = arch.max_warps_per_sm
    tau = t_full * total_sms * w * 32 / model.threads
    a = occ.active_warps_per_sm
    h = model.latency_warps
    wave = tau * (a + h) / (w + h) * (1.0 + model.sync_cost * occ.warps_per_block / 32.0)
    wave += model.wave_overhead_cycles / (clock_mhz * 1e6)
    grid = math.ceil(model.threads / occ.threads_per_block)
    slots = occ.blocks_per_sm * sms
    waves = math.ceil(grid / slots)
    time_s = waves * wave
    # dynamic power of the kernel on the whole board, then its share
    dynamic_w = max(
        0.0,
        board.steady_gpu_power_w(clock_mhz, base, mem_clock)
        - board.steady_gpu_power_w(clock_mhz, None, mem_clock),
    )
    efficiency = (a / (a + h)) / (w / (w + h)) if h > 0 else 1.0
    activity = 0.5 + 0.5 * min(1.0, efficiency)
    filled = grid / (waves * slots)
    energy = dynamic_w * (sms / total_sms) * activity * filled * time_s
    return time_s, energy


def evaluate(
    board: BoardSpec,
    kernels: Sequence[KernelModel],
    blocks: Sequence[object],
    clock_mhz: float,
    mem_clock_mhz: Optional[float] = None,
) -> KernelSetPoint:
    """Time and energy of ``kernels`` run concurrently with ``blocks`` at ``clock_mhz`` and
    memory clock ``mem_clock_mhz`` (None: the board's default; the same figures bit for bit
    as naming it). At another memory clock each kernel's memory part follows the board's
    memory law (:func:`mem_time_scale`) and the memory's background power is the board's at
    that clock (``BoardSpec.mem_background_w``), in the idle and the loaded power alike.

    Raises:
        InvalidRequestError: a block that cannot launch, mismatched lengths, too many
            kernels, a memory clock that is not positive.
    """
    if len(blocks) != len(kernels):
        raise InvalidRequestError(
            f"{len(kernels)} kernels need {len(kernels)} blocks, got {len(blocks)}"
        )
    if mem_clock_mhz is not None and not mem_clock_mhz > 0:
        raise InvalidRequestError(f"memory clock must be positive, not {mem_clock_mhz!r} MHz")
    arch = board_arch(board)
    total = board_sms(board)
    shares = split_sms(kernels, total)
    parts = [
        kernel_time_energy(board, arch, m, b, clock_mhz, s, total, mem_clock_mhz)
        for m, b, s in zip(kernels, blocks, shares)
    ]
    times = tuple(p[0] for p in parts)
    makespan = max(times)
    mem_clock = board.default_mem_clock_mhz if mem_clock_mhz is None else mem_clock_mhz
    idle_w = board.steady_gpu_power_w(clock_mhz, None, mem_clock)
    dyn = [p[1] for p in parts]
    energy = idle_w * makespan + sum(dyn)
    per_kernel = tuple(d + idle_w * t * s / total for d, t, s in zip(dyn, times, shares))
    return KernelSetPoint(
        clock_mhz=clock_mhz,
        time_s=makespan,
        energy_j=energy,
        power_w=energy / makespan,
        kernel_time_s=times,
        kernel_energy_j=per_kernel,
        sms=tuple(shares),
        mem_clock_mhz=mem_clock_mhz,
    )


def equivalent_workload(board: BoardSpec, point: KernelSetPoint, name: str = "kernels") -> Workload:
    """A Workload that, run on a SimDevice locked at ``point.clock_mhz``, takes
    ``point.time_s`` per unit of work and draws ``point.power_w`` in thermal steady state."""
    f = point.clock_mhz
    gain = board.static_w * board.leakage_per_c * board.thermal_r_c_per_w
    ambient_w = point.power_w * (1.0 - gain)
    mem_clock = board.default_mem_clock_mhz if point.mem_clock_mhz is None else point.mem_clock_mhz
    base = board.static_w + board.mem_background_w(mem_clock)
    dyn_per_activity = board.dyn_w_per_mhz * f * board.voltage.volts(f) ** 2
    activity = max(0.0, (ambient_w - base) / dyn_per_activity)
    return Workload(
        name=name,
        compute_mcycles=point.time_s * f,
        mem_s=0.0,
        a_stall=0.0,
        a_busy=activity,
    )


#: kernels for the bench and the tests: shapes of common GPU codes, not measurements
EXAMPLE_KERNELS: Dict[str, KernelModel] = {
    m.name: m
    for m in (
        KernelModel(
            "vector-add",
            threads=1 << 24,
            work_s=0.004,
            mem_fraction=0.9,
            registers_per_thread=16,
            latency_warps=24.0,
            sync_cost=0.0,
        ),
        KernelModel(
            "stencil-2d",
            threads=1 << 22,
            work_s=0.006,
            mem_fraction=0.5,
            registers_per_thread=40,
            static_shared_bytes=1024,
            shared_bytes_per_thread=8,
            latency_warps=12.0,
            sync_cost=0.03,
        ),
        KernelModel(
            "gemm-tile",
            threads=1 << 20,
            work_s=0.010,
            mem_fraction=0.1,
            registers_per_thread=64,
            static_shared_bytes=4096,
            shared_bytes_per_thread=16,
            latency_warps=6.0,
            sync_cost=0.05,
            activity=1.1,
        ),
        KernelModel(
            "reduce",
            threads=1 << 23,
            work_s=0.003,
            mem_fraction=0.8,
            registers_per_thread=24,
            shared_bytes_per_thread=4,
            latency_warps=16.0,
            sync_cost=0.04,
        ),
        KernelModel(
            "nbody",
            threads=1 << 18,
            work_s=0.008,
            mem_fraction=0.05,
            registers_per_thread=48,
            shared_bytes_per_thread=16,
            latency_warps=4.0,
            sync_cost=0.02,
            activity=1.2,
        ),
    )
}


def kernel_by_name(name: str) -> KernelModel:
    try:
        return EXAMPLE_KERNELS[name]
    except KeyError:
        raise InvalidRequestError(
            f"unknown simulated kernel {name!r}; known: {', '.join(EXAMPLE_KERNELS)}"
        ) from None
