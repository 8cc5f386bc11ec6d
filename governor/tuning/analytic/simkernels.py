"""The analytic tile models' kernels on a simulated board: micro-benchmarks, stencils, SOR.

``governor.tuning.analytic.calibrate`` measures its constants with micro-benchmarks
(``global_copy``, ``block_barrier``, ``thread_barriers``, ``reduced_nest``, ``energy:*``...;
table in that module). Here a :class:`~governor.devices.sim.device.SimDevice` runs them: each
board has **hidden constants** (:func:`hidden_constants`), a request's true time follows from
them at the clock the board is running, the board's ``compute`` or ``memory`` workload runs for
that long on the device's clock, and energy is metered through the device's sensors (energy
counter when the board has one, else sampled power), so power-limit throttling, temperature
and sensor noise all act as on hardware. Times carry a small relative noise from a seeded RNG.

Hidden constants, per board (stated so nobody mistakes them for measurements):

- ``titan-x`` uses the thesis's Titan X constants (Tables A.2-A.4) at 1075 MHz.
- Every other board scales the thesis's GTX 980 constants (16 SMs, 1216 MHz): the core-clock
  terms C_iter and τ_sync by 1216 / reference clock (the same cycles per iteration), L (s/GB,
  the whole GPU's memory) by 16 / SMs, T_sync unchanged. The reference clock is the board's
  top clock.
- DOACROSS: the illustrative GT200-class constants of
  :func:`~governor.tuning.analytic.doacross.default_constants` on the board's occupancy limits,
  with α, β, γ, σ_thd scaled by 1296 MHz (C1060 shader clock) / reference clock.
- Energy benchmarks: throughput of one word (global: L; shared: one word per SM and cycle,
  ×32 lanes), of one fadd / fmul (one per core and cycle); energy is whatever the board's
  physics meters while the workload runs.

At a clock f the core-clock terms take reference / f times as long; memory traffic, host
synchronisation, kernel launch and grid synchronisation do not change.

    >>> import governor
    >>> from governor.tuning.analytic.simkernels import SimKernelRunner
    >>> dev = governor.open_device("sim:titan-x")
    >>> run = SimKernelRunner(dev, seed=1)
    >>> t = run("global_copy", {"words": 1 << 20})      # seconds, measured on the sim
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np

from governor.devices.sim.physics import BoardSpec
from governor.errors import InvalidRequestError, UnsupportedError
from governor.tuning.analytic import catalog
from governor.tuning.analytic.catalog import DoacrossGpu, HhcGpu
from governor.tuning.analytic.doacross import (
    DoacrossConstants,
    ThreadOrg,
    default_constants,
    occupancy_blocks,
    tile_features,
    total_time_s,
)
from governor.tuning.analytic.hhc import hhc_time_s

__all__ = [
    "KERNEL_KINDS",
    "KernelRun",
    "SimKernelRunner",
    "SimTruth",
    "board_doacross_gpu",
    "board_hhc_gpu",
    "energy_truth",
    "hidden_constants",
    "run_analytic_kernel",
]

_GTX980_CLOCK_MHZ = 1216.0
_TITANX_CLOCK_MHZ = 1075.0
_C1060_CLOCK_MHZ = 1296.0
_LAUNCH_S = 3.0e-6  # fixed cost of one micro-benchmark launch (the fits absorb it)

# kind -> the board workload that runs while it does
KERNEL_KINDS: Dict[str, str] = {
    "global_copy": "memory",
    "block_barrier": "compute",
    "host_sync": "memory",
    "shared_stencil": "compute",
    "empty_kernel": "compute",
    "thread_barriers": "compute",
    "grid_syncs": "memory",
    "reduced_nest": "compute",
    "stencil": "compute",
    "sor": "compute",
    "energy:idle": "",
    "energy:global_copy": "memory",
    "energy:shared_copy": "compute",
    "energy:fadd_loop": "compute",
    "energy:fmul_loop": "compute",
}

# cores (FP32 lanes) per SM by compute capability, where the catalog does not say
_CORES_PER_SM = {"5": 128, "6.0": 64, "6": 128, "7": 64, "8.0": 64, "8": 128, "9": 128}


def _int_fact(board: BoardSpec, key: str, default: Optional[int] = None) -> int:
    """An integer fact of a catalog board (SMs, CUDA cores); with a ``default``, that where
    the fact is missing, null or 0 (else a missing one is a KeyError)."""
    value = board.facts[key] if default is None else (board.facts.get(key) or default)
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(f"{board.name}: the catalog's {key} is not a number: {value!r}")
    return int(value)


def _cores_per_sm(board: BoardSpec) -> int:
    facts = board.facts
    sms = _int_fact(board, "sms", 0)
    if facts.get("cuda_cores") and sms:
        return _int_fact(board, "cuda_cores") // sms
    cc = str(facts.get("cc", "8.0"))
    return _CORES_PER_SM.get(cc, _CORES_PER_SM.get(cc.split(".")[0], 64))


def _arch(board: BoardSpec) -> Any:
    from governor.tuning.occupancy import arch_limits

    if "cc" not in board.facts or "sms" not in board.facts:
        raise UnsupportedError(f"board {board.name} lacks the SM count or compute capability")
    return arch_limits(str(board.facts["cc"]))


def _reference_clock_mhz(board: BoardSpec) -> float:
    return _TITANX_CLOCK_MHZ if board.name == "titan-x" else float(board.clocks_mhz[-1])


def board_hhc_gpu(board: BoardSpec) -> HhcGpu:
    """The board as the HHC model sees it (SMs, vector units, shared memory, blocks per SM),
    carrying the scaled thesis constants at its reference clock (the sim's hidden truth)."""
    ref = _reference_clock_mhz(board)
    if board.name == "titan-x":
        return replace(catalog.hhc_gpu("titanx"), name="titan-x", reference_clock_mhz=ref)
    arch = _arch(board)
    base = catalog.hhc_gpu("gtx980")
    n_sm = _int_fact(board, "sms")
    scale = _GTX980_CLOCK_MHZ / ref
    return HhcGpu(
        name=board.name,
        n_sm=n_sm,
        n_v=_cores_per_sm(board),
        shared_per_sm_bytes=int(arch.shared_per_sm_bytes),
        shared_per_block_bytes=48 * 1024,
        regs_per_sm=int(arch.regs_per_sm),
        max_blocks_per_sm=int(arch.max_blocks_per_sm),
        l_s_per_gb=base.l_s_per_gb * base.n_sm / n_sm,
        tau_sync_s=base.tau_sync_s * scale,
        t_sync_s=base.t_sync_s,
        c_iter_s={k: v * scale for k, v in base.c_iter_s.items()},
        reference_clock_mhz=ref,
    )


def board_doacross_gpu(board: BoardSpec) -> DoacrossGpu:
    """The board's occupancy limits as the DOACROSS model sees them
    (:func:`~governor.tuning.analytic.catalog.board_doacross_gpu`)."""
    return catalog.board_doacross_gpu(board)


@dataclass(frozen=True)
class SimTruth:
    """A board's hidden constants at ``reference_clock_mhz`` (for tests and benches)."""

    board: str
    reference_clock_mhz: float
    hhc: HhcGpu
    doacross_gpu: DoacrossGpu
    doacross: DoacrossConstants
    # seconds per unit at the reference clock: global word, shared word, fadd, fmul
    rates_s: Mapping[str, float]


_TRUTHS: Dict[str, SimTruth] = {}


def _truth(board: BoardSpec) -> SimTruth:
    if board.name not in _TRUTHS:
        _TRUTHS[board.name] = _make_truth(board)
    return _TRUTHS[board.name]


def _make_truth(board: BoardSpec) -> SimTruth:
    ref = _reference_clock_mhz(board)
    hhc = board_hhc_gpu(board)
    dgpu = board_doacross_gpu(board)
    illustrative = default_constants(dgpu)
    s = _C1060_CLOCK_MHZ / ref
    orgs = {
        t: ThreadOrg(o.alpha_s * s, o.beta_s * s, o.gamma_s * s, o.sigma_thd_s * s)
        for t, o in illustrative.per_threads.items()
    }
    doacross = DoacrossConstants(
        orgs, dict(illustrative.sigma_blk_s), illustrative.sigma_ker_s, source="sim-hidden"
    )
    lanes = hhc.n_sm * hhc.n_v * ref * 1e6
    rates = {
        "global_copy": hhc.l_s_per_word,
        "shared_copy": 1.0 / (hhc.n_sm * 32 * ref * 1e6),
        "fadd_loop": 1.0 / lanes,
        "fmul_loop": 1.0 / lanes,
    }
    return SimTruth(board.name, ref, hhc, dgpu, doacross, rates)


def hidden_constants(board: Any) -> SimTruth:
    """The hidden constants of ``board`` (a BoardSpec, a SimDevice or a catalog name)."""
    if isinstance(board, str):
        from governor.devices.sim.catalog import get_board

        board = get_board(board)
    elif not isinstance(board, BoardSpec):
        board = getattr(board, "board", None)
        if not isinstance(board, BoardSpec):
            raise UnsupportedError("analytic kernels run only on simulated boards (sim:NAME)")
    return _truth(board)


@dataclass(frozen=True)
class KernelRun:
    """One kernel run: its measured time, metered energy (None when not metered) and clock."""

    kind: str
    time_s: float
    energy_j: Optional[float]
    clock_mhz: float
    repeats: int = 1
    method: str = ""


def _param(params: Mapping[str, Any], name: str, kind: str) -> Any:
    if name not in params:
        raise InvalidRequestError(f"sim kernel {kind!r} needs parameter {name!r}")
    return params[name]


def _positive(params: Mapping[str, Any], name: str, kind: str) -> float:
    value = _param(params, name, kind)
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise InvalidRequestError(f"sim kernel {kind!r}: {name} must be a number") from None
    if not (math.isfinite(value) and value >= 0):
        raise InvalidRequestError(f"sim kernel {kind!r}: {name} must be finite and >= 0")
    return value


def true_time_s(truth: SimTruth, kind: str, params: Mapping[str, Any], clock_mhz: float) -> float:
    """The exact time in s of request ``kind`` at GPU clock ``clock_mhz`` (no noise)."""
    core = truth.reference_clock_mhz / float(clock_mhz)  # core-clock work takes this much longer
    g, c = truth.hhc, truth.doacross
    if kind == "global_copy":
        return _positive(params, "words", kind) * g.l_s_per_word + _LAUNCH_S
    if kind == "block_barrier":
        return _positive(params, "barriers", kind) * g.tau_sync_s * core + _LAUNCH_S
    if kind == "host_sync":
        return _positive(params, "syncs", kind) * g.t_sync_s + _LAUNCH_S
    if kind == "shared_stencil":
        name = catalog.stencil(_param(params, "stencil", kind)).name
        return _positive(params, "iterations", kind) * g.c_iter_s[name] * core + _LAUNCH_S
    if kind == "empty_kernel":
        return c.sigma_ker_s
    if kind == "thread_barriers":
        org = _org(c, params, kind)
        return _positive(params, "barriers", kind) * org.sigma_thd_s * core + c.sigma_ker_s
    if kind == "grid_syncs":
        grid = _positive(params, "grid", kind)
        return _positive(params, "syncs", kind) * float(c.sigma_blk_at(grid)) + c.sigma_ker_s
    if kind == "reduced_nest":
        org = _org(c, params, kind)
        tiles = np.asarray([tuple(int(v) for v in _param(params, "tiles", kind))], dtype=np.int64)
        feats = tile_features(tiles, truth.doacross_gpu.warp_size)
        t_tile = (
            org.alpha_s * feats["sum_warps"][0]
            + (feats["wavefronts"][0] + 2) * org.sigma_thd_s
            + org.beta_s * feats["iterations"][0]
            + org.gamma_s * feats["mem_words"][0]
        ) * core
        threads = int(_param(params, "threads", kind))
        b = int(occupancy_blocks(truth.doacross_gpu, threads, feats["shared_words"])[0])
        if b < 1:
            raise InvalidRequestError(f"tile {tuple(tiles[0])} with {threads} threads fits no SM")
        return b * t_tile + float(c.sigma_blk_at(b * truth.doacross_gpu.n_sm)) + c.sigma_ker_s
    if kind == "stencil":
        return _stencil_time(truth, params, core)
    if kind == "sor":
        return _sor_time(truth, params, core)
    if kind.startswith("energy:"):
        bench = kind.split(":", 1)[1]
        if bench == "idle":
            return _positive(params, "seconds", kind)
        param = "words" if bench.endswith("copy") else "ops"
        scale = 1.0 if bench == "global_copy" else core
        return _positive(params, param, kind) * truth.rates_s[bench] * scale + _LAUNCH_S
    raise InvalidRequestError(
        f"simulated boards have no analytic kernel {kind!r}; known: {', '.join(KERNEL_KINDS)}"
    )


def _org(c: DoacrossConstants, params: Mapping[str, Any], kind: str) -> ThreadOrg:
    threads = int(_positive(params, "threads", kind))
    if threads not in c.per_threads:
        raise InvalidRequestError(
            f"sim kernel {kind!r}: threads must be a multiple of 32 up to "
            f"{max(c.per_threads)}, got {threads}"
        )
    return c.per_threads[threads]


def _stencil_time(truth: SimTruth, params: Mapping[str, Any], core: float) -> float:
    st = catalog.stencil(_param(params, "stencil", "stencil"))
    size = tuple(int(s) for s in _param(params, "size", "stencil"))
    tiles = dict(_param(params, "tiles", "stencil"))
    t = hhc_time_s(
        truth.hhc, truth.hhc.c_iter_s[st.name], size, int(_param(params, "steps", "stencil")),
        tiles["t_s1"], tiles["t_t"], tiles.get("t_s2", 1), tiles.get("t_s3", 1),
        int(params.get("k", 1)), clock_scale=core,
    )  # fmt: skip
    return float(np.asarray(t).ravel()[0])


def _sor_time(truth: SimTruth, params: Mapping[str, Any], core: float) -> float:
    nest = catalog.nest(_param(params, "nest", "sor"))
    size = tuple(int(s) for s in _param(params, "size", "sor"))
    tiles = _param(params, "tiles", "sor")
    if isinstance(tiles, Mapping):
        tiles = list(tiles.values())
    threads = int(_param(params, "threads", "sor"))
    _org(truth.doacross, params, "sor")
    if len(tiles) != nest.depth:
        raise InvalidRequestError(f"{nest.name} tiles need {nest.depth} sizes")
    c = truth.doacross
    scaled = DoacrossConstants(
        {t: ThreadOrg(o.alpha_s * core, o.beta_s * core, o.gamma_s * core, o.sigma_thd_s * core)
         for t, o in c.per_threads.items()},
        dict(c.sigma_blk_s), c.sigma_ker_s, source=c.source,
    )  # fmt: skip
    t = total_time_s(
        scaled, truth.doacross_gpu, [tuple(int(v) for v in tiles)], size,
        int(_param(params, "steps", "sor")), threads,
    )  # fmt: skip
    return float(np.asarray(t).ravel()[0])


def _current_clock_mhz(dev: Any) -> float:
    from governor.measure.window import read_sample

    for _ in range(20):
        sample = read_sample(dev, [0])
        if sample is not None and sample.gpu_clock_mhz:
            return float(sample.gpu_clock_mhz)
        dev.clock.sleep(0.01)
    raise UnsupportedError(f"{dev.uri} reports no GPU clock")


def run_analytic_kernel(
    dev: Any,
    kind: str,
    params: Optional[Mapping[str, Any]] = None,
    *,
    rng: Optional[np.random.Generator] = None,
    noise: float = 0.005,
    meter: Optional[bool] = None,
    min_window_s: float = 0.5,
) -> KernelRun:
    """Run one analytic-model request on the simulated device ``dev`` (see module docstring).

    The board's workload runs for the request's true time at the current clock (repeated
    until ``min_window_s`` when energy is metered: ``energy:*``, ``stencil``, ``sor``, or
    ``meter=True``); the measured time has relative ``noise`` (1 σ) from ``rng``.

    Raises:
        UnsupportedError: ``dev`` is not a simulated board.
        InvalidRequestError: unknown kind or bad parameters (one line).
    """
    truth = hidden_constants(dev)
    params = dict(params or {})
    kind = str(kind)
    if kind not in KERNEL_KINDS:
        raise InvalidRequestError(
            f"simulated boards have no analytic kernel {kind!r}; known: {', '.join(KERNEL_KINDS)}"
        )
    rng = rng if rng is not None else np.random.default_rng(0)
    if meter is None:
        meter = kind.startswith("energy:") or kind in ("stencil", "sor")
    workload = KERNEL_KINDS[kind]
    if workload:
        dev.run_workload(workload)
    else:
        dev.stop_workload()
    try:
        clock = _current_clock_mhz(dev)
        t = true_time_s(truth, kind, params, clock)
        if not meter:
            dev.clock.sleep(t)
            energy, repeats, method = None, 1, ""
        else:
            from governor.measure.window import measure_window

            repeats = max(1, int(math.ceil(min_window_s / t))) if t > 0 else 1
            period = min(0.1, max(repeats * t / 5.0, 1e-3))
            window = measure_window(dev, repeats * t, period_s=period)
            energy, method = window.energy_j / repeats, window.method
            if window.mean_clock_mhz:
                clock = float(window.mean_clock_mhz)
    finally:
        if workload:
            dev.stop_workload()
    measured = t * (1.0 + noise * float(rng.standard_normal()))
    return KernelRun(kind, max(measured, 0.0), energy, clock, repeats, method)


class SimKernelRunner:
    """``run_kernel(kind, params)`` for :func:`~governor.tuning.analytic.calibrate_on_device`
    on a simulated board: seconds for time kinds, ``(time_s, energy_j)`` for ``energy:*``,
    ``stencil`` and ``sor``. ``seed`` defaults to the device's ``seed=`` option."""

    def __init__(self, dev: Any, seed: Optional[int] = None, noise: float = 0.005) -> None:
        hidden_constants(dev)  # refuses a device that is not a simulated board
        if seed is None:
            seed = int(getattr(dev, "_rng_seed", 0))
        self.device = dev
        self.noise = float(noise)
        self.rng = np.random.default_rng(seed)
        self.runs = 0

    def __call__(self, kind: str, params: Optional[Mapping[str, Any]] = None) -> Any:
        run = run_analytic_kernel(self.device, kind, params, rng=self.rng, noise=self.noise)
        self.runs += 1
        if run.energy_j is None:
            return run.time_s
        return run.time_s, run.energy_j

    def truth(self) -> SimTruth:
        return hidden_constants(self.device)


def energy_truth(dev: Any, clock_mhz: float, temperature_c: Optional[float] = None) -> Any:
    """The App. B constants the sim's physics implies at ``clock_mhz`` (and the die's current
    temperature): P_stat = idle power, e_x = (P under the bench's workload − P_stat)·seconds
    per unit. What :func:`~governor.tuning.analytic.calibrate_stencil_energy` should find."""
    from governor.tuning.analytic.energy import StencilEnergyConstants

    truth = hidden_constants(dev)
    board = dev.board
    temp = dev.true_temperature_c() if temperature_c is None else float(temperature_c)
    idle = board.gpu_power_w(clock_mhz, temp, None)
    core = truth.reference_clock_mhz / float(clock_mhz)

    def extra(bench: str) -> float:
        load = board.gpu_power_w(clock_mhz, temp, board.workloads[KERNEL_KINDS["energy:" + bench]])
        return (load - idle) * truth.rates_s[bench] * (1.0 if bench == "global_copy" else core)

    return StencilEnergyConstants(
        idle, extra("global_copy"), extra("shared_copy"), extra("fadd_loop"), extra("fmul_loop")
    )


def time_and_energy(run: Any) -> Tuple[float, Optional[float]]:
    """(time_s, energy_j) of what a runner returned."""
    if isinstance(run, tuple):
        return float(run[0]), float(run[1])
    return float(run), None
