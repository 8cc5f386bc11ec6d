"""Calibrating the analytic models' constants from micro-benchmarks, on any device.

Every procedure here takes ``measure(kind, **params) -> float`` (seconds; for energy kinds a
``(time_s, energy_j)`` pair) and knows nothing else about the device, so it runs equally on a
real GPU harness, a simulated board, or the synthetic GPUs below (which generate timings from
known constants with noise, and so prove the fits recover them). Kinds and their parameters:

=====================  =======================================  ==========================
kind                   params                                   model of the time
=====================  =======================================  ==========================
``global_copy``        words (per SM)                           words·L + c
``block_barrier``      barriers                                 barriers·τ_sync + c
``host_sync``          syncs                                    syncs·T_sync + c
``shared_stencil``     stencil, iterations (per vector unit)    iterations·C_iter + c
``empty_kernel``       (none)                                   σ_ker
``thread_barriers``    threads, barriers                        barriers·σ_thd(threads) + c
``grid_syncs``         grid, syncs                              syncs·σ_blk(grid) + c
``reduced_nest``       tiles (tuple), threads                   B·T_TILE + σ_blk(BP) + σ_ker
``energy:<bench>``     see :func:`calibrate_stencil_energy`     (time_s, energy_j)
=====================  =======================================  ==========================

Fits: slopes by non-negative least squares; α, β, γ by non-negative least squares per thread
count (DOACROSS); the stencil energy constants by the L1 linear program of
:func:`~governor.tuning.analytic.energy.fit_energy_l1`. All constants come out ≥ 0.

On a simulated board, :class:`governor.tuning.analytic.simkernels.SimKernelRunner` runs these
kinds (``calibrate_on_device(SimKernelRunner(dev), ...)``);
:func:`governor.tuning.analytic.device.calibrate_device` wraps that with a locked clock.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from governor.errors import CalibrationError
from governor.tuning.analytic.catalog import DoacrossGpu, HhcGpu, Nest
from governor.tuning.analytic.doacross import (
    DoacrossConstants,
    ThreadOrg,
    occupancy_blocks,
    tile_features,
)
from governor.tuning.analytic.energy import (
    ENERGY_TERMS,
    StencilEnergyConstants,
    fit_energy_l1,
)

__all__ = [
    "Measure",
    "SyntheticDoacrossGpu",
    "SyntheticEnergyGpu",
    "SyntheticHhcGpu",
    "calibrate_doacross",
    "calibrate_hhc",
    "calibrate_on_device",
    "calibrate_stencil_energy",
    "fit_slope",
    "reduced_nest_tiles",
]

Measure = Callable[..., Any]


def fit_slope(x: Sequence[float], y: Sequence[float]) -> Tuple[float, float]:
    """Fit y = slope·x + intercept with both ≥ 0 (NNLS). Returns (slope, intercept).

    Raises:
        CalibrationError: fewer than two distinct x, or non-finite data.
    """
    from scipy.optimize import nnls

    xs = np.asarray(x, dtype=float)
    ys = np.asarray(y, dtype=float)
    if (
        xs.size < 2
        or np.unique(xs).size < 2
        or not (np.isfinite(xs).all() and np.isfinite(ys).all())
    ):
        raise CalibrationError("a slope needs finite data at two or more distinct points", (xs, ys))
    scale_x, scale_y = float(np.abs(xs).max()) or 1.0, float(np.abs(ys).max()) or 1.0
    a = np.column_stack([xs / scale_x, np.ones_like(xs)])
    coef, _ = nnls(a, ys / scale_y)
    return float(coef[0] * scale_y / scale_x), float(coef[1] * scale_y)


def _sweep(measure: Measure, kind: str, var: str, values: Iterable[float], **fixed: Any) -> float:
    xs, ys = [], []
    for v in values:
        xs.append(float(v))
        ys.append(float(measure(kind, **{var: int(v)}, **fixed)))
    return fit_slope(xs, ys)[0]


# ---------------------------------------------------------------------------------------------
# HHC time constants


def calibrate_hhc(
    measure: Measure, base: HhcGpu, stencils: Optional[Sequence[str]] = None
) -> HhcGpu:
    """Measure L, τ_sync, T_sync and C_iter per stencil; return ``base`` with them replaced.

    Raises:
        CalibrationError: a fit failed.
    """
    words = [2**k for k in range(12, 19)]
    l_s_per_word = _sweep(measure, "global_copy", "words", words)
    tau = _sweep(measure, "block_barrier", "barriers", [1000, 4000, 16000, 64000])
    t_sync = _sweep(measure, "host_sync", "syncs", [100, 400, 1600, 6400])
    names = list(stencils) if stencils is not None else sorted(base.c_iter_s)
    c_iter = {
        name: _sweep(
            measure, "shared_stencil", "iterations", [1e4, 4e4, 1.6e5, 6.4e5], stencil=name
        )
        for name in names
    }
    return replace(
        base,
        l_s_per_gb=l_s_per_word / base.word_bytes * 1e9,
        tau_sync_s=tau,
        t_sync_s=t_sync,
        c_iter_s=c_iter,
    )


class _NoisyBench:
    """A stand-in GPU's measurement noise: a seeded relative jitter."""

    def __init__(self, noise: float, seed: int) -> None:
        self.noise = float(noise)
        self.rng = np.random.default_rng(seed)

    def _jitter(self, value: float) -> float:
        return float(value * (1.0 + self.noise * self.rng.standard_normal()))


class SyntheticHhcGpu(_NoisyBench):
    """A stand-in GPU whose HHC micro-benchmarks follow ``truth``'s constants with noise."""

    def __init__(self, truth: HhcGpu, noise: float = 0.01, seed: int = 0) -> None:
        super().__init__(noise, seed)
        self.truth = truth

    def __call__(self, kind: str, **p: Any) -> float:
        g = self.truth
        if kind == "global_copy":
            return self._jitter(p["words"] * g.l_s_per_word + 2e-6)
        if kind == "block_barrier":
            return self._jitter(p["barriers"] * g.tau_sync_s + 1e-6)
        if kind == "host_sync":
            return self._jitter(p["syncs"] * g.t_sync_s + 5e-6)
        if kind == "shared_stencil":
            return self._jitter(p["iterations"] * g.c_iter_s[p["stencil"]] + 3e-6)
        raise CalibrationError(f"synthetic HHC GPU has no benchmark {kind!r}")


# ---------------------------------------------------------------------------------------------
# DOACROSS constants


def reduced_nest_tiles(depth: int) -> np.ndarray:
    """Tile sizes for the reduced-nest runs: varied shapes so Σ G, L_TILE, N_mem separate."""
    sizes: List[Tuple[int, ...]]
    if depth == 2:
        sizes = [(1, 64), (1, 500), (2, 40), (3, 300), (8, 8), (16, 100), (33, 33), (64, 7),
                 (100, 128), (200, 200)]  # fmt: skip
    elif depth == 3:
        sizes = [(1, 1, 64), (1, 8, 64), (2, 16, 16), (4, 4, 40), (8, 8, 8), (3, 20, 33),
                 (16, 12, 24), (1, 2, 200), (20, 20, 20), (32, 40, 40)]  # fmt: skip
    else:
        sizes = [(1, 1, 1, 64), (1, 4, 8, 32), (2, 2, 16, 16), (4, 4, 4, 4), (3, 8, 8, 6),
                 (8, 6, 6, 6), (1, 1, 20, 20), (12, 12, 12, 12), (16, 16, 16, 8)]  # fmt: skip
    return np.array(sizes, dtype=np.int64)


def calibrate_doacross(
    measure: Measure,
    gpu: DoacrossGpu,
    nest: Nest,
    thread_counts: Optional[Sequence[int]] = None,
    repeats: int = 5,
) -> DoacrossConstants:
    """Run the paper's procedure: σ_ker, σ_thd(threads), σ_blk(grid) from micro-benchmarks,
    then α, β, γ per thread count by NNLS over reduced-nest runs.

    Raises:
        CalibrationError: a fit failed or a thread count fits no reduced-nest tile.
    """
    from scipy.optimize import nnls

    if thread_counts is None:
        thread_counts = range(gpu.warp_size, gpu.max_threads_per_block + 1, 4 * gpu.warp_size)
    thread_counts = [int(t) for t in thread_counts]
    sigma_ker = float(np.mean([measure("empty_kernel") for _ in range(max(1, repeats))]))
    barriers = [100, 400, 1600, 6400]
    sigma_thd = {t: _sweep(measure, "thread_barriers", "barriers", barriers, threads=t)
                 for t in thread_counts}  # fmt: skip
    grids = sorted({gpu.n_sm * b for b in (1, 2, 4, gpu.max_blocks_per_sm)})
    sigma_blk = {g: _sweep(measure, "grid_syncs", "syncs", barriers, grid=g) for g in grids}
    sigma_blk_fn = DoacrossConstants({32: ThreadOrg(0, 0, 0, 0)}, sigma_blk, sigma_ker).sigma_blk_at
    tiles = reduced_nest_tiles(nest.depth)
    feats = tile_features(tiles, gpu.warp_size)
    orgs = {}
    for t in thread_counts:
        blocks = occupancy_blocks(gpu, t, feats["shared_words"])
        rows, ys = [], []
        for i, tile in enumerate(tiles):
            b = int(blocks[i])
            if b < 1:
                continue
            runs = [
                float(measure("reduced_nest", tiles=tuple(int(v) for v in tile), threads=t))
                for _ in range(max(1, repeats))
            ]
            total = float(np.mean(runs))
            y = (total - sigma_ker - float(sigma_blk_fn(b * gpu.n_sm))) / b
            y -= (feats["wavefronts"][i] + 2) * sigma_thd[t]
            rows.append([feats["sum_warps"][i], feats["iterations"][i], feats["mem_words"][i]])
            ys.append(y)
        if len(rows) < 3:
            raise CalibrationError(f"too few reduced-nest runs fit {t} threads", (rows, ys))
        a = np.asarray(rows, dtype=float)
        col = a.max(axis=0)
        ys_arr = np.asarray(ys)
        scale = float(np.abs(ys_arr).max()) or 1.0
        coef, _ = nnls(a / col, np.maximum(ys_arr, 0.0) / scale)
        coef = coef * scale / col
        orgs[t] = ThreadOrg(float(coef[0]), float(coef[1]), float(coef[2]), sigma_thd[t])
    return DoacrossConstants(orgs, sigma_blk, sigma_ker, source="calibrated")


class SyntheticDoacrossGpu(_NoisyBench):
    """A stand-in GPU whose DOACROSS micro-benchmarks follow ``truth`` with noise."""

    def __init__(
        self, gpu: DoacrossGpu, truth: DoacrossConstants, noise: float = 0.01, seed: int = 0
    ) -> None:
        super().__init__(noise, seed)
        self.gpu = gpu
        self.truth = truth

    def __call__(self, kind: str, **p: Any) -> float:
        c = self.truth
        if kind == "empty_kernel":
            return self._jitter(c.sigma_ker_s)
        if kind == "thread_barriers":
            org = c.per_threads[int(p["threads"])]
            return self._jitter(p["barriers"] * org.sigma_thd_s + c.sigma_ker_s)
        if kind == "grid_syncs":
            return self._jitter(p["syncs"] * float(c.sigma_blk_at(p["grid"])) + c.sigma_ker_s)
        if kind == "reduced_nest":
            tiles = np.asarray([p["tiles"]], dtype=np.int64)
            threads = int(p["threads"])
            feats = tile_features(tiles, self.gpu.warp_size)
            org = c.per_threads[threads]
            t_tile = (
                org.alpha_s * feats["sum_warps"][0]
                + (feats["wavefronts"][0] + 2) * org.sigma_thd_s
                + org.beta_s * feats["iterations"][0]
                + org.gamma_s * feats["mem_words"][0]
            )
            b = int(occupancy_blocks(self.gpu, threads, feats["shared_words"])[0])
            return self._jitter(
                b * t_tile + float(c.sigma_blk_at(b * self.gpu.n_sm)) + c.sigma_ker_s
            )
        raise CalibrationError(f"synthetic DOACROSS GPU has no benchmark {kind!r}")


# ---------------------------------------------------------------------------------------------
# stencil energy (thesis App. B)

# benchmark -> (parameter, index of the count it drives in ENERGY_TERMS)
_ENERGY_BENCHES = {
    "idle": ("seconds", None),
    "global_copy": ("words", 1),
    "shared_copy": ("words", 2),
    "fadd_loop": ("ops", 3),
    "fmul_loop": ("ops", 4),
}


def calibrate_stencil_energy(
    measure: Measure,
    extra_runs: Optional[Tuple[Any, Any]] = None,
    sizes: Sequence[float] = (1e9, 3e9, 1e10, 3e10),
) -> StencilEnergyConstants:
    """Run energy micro-benchmarks and fit P_stat, e_gs, e_sr, e_fadd, e_fmul by the L1 LP.

    ``measure("energy:<bench>", <param>=n)`` returns (time_s, energy_j) for benches ``idle``
    (seconds), ``global_copy`` / ``shared_copy`` (words) and ``fadd_loop`` / ``fmul_loop``
    (ops). ``extra_runs`` = (features, energy_j) adds recorded runs (e.g. stencils) to the fit.
    """
    rows, energies = [], []
    for bench, (param, col) in _ENERGY_BENCHES.items():
        for n in sizes if col is not None else (0.5, 1.0, 2.0, 4.0):
            time_s, energy_j = measure(f"energy:{bench}", **{param: n})
            row = [float(time_s), 0.0, 0.0, 0.0, 0.0]
            if col is not None:
                row[col] = float(n)
            rows.append(row)
            energies.append(float(energy_j))
    a = np.asarray(rows)
    e = np.asarray(energies)
    if extra_runs is not None:
        a = np.vstack([a, np.asarray(extra_runs[0], dtype=float)])
        e = np.concatenate([e, np.asarray(extra_runs[1], dtype=float).ravel()])
    return fit_energy_l1(a, e)


class SyntheticEnergyGpu(_NoisyBench):
    """A stand-in GPU whose energy micro-benchmarks follow ``truth`` (App. B) with noise."""

    # throughput of each bench: seconds per unit of its parameter
    _RATE = {"global_copy": 1.0 / 50e9, "shared_copy": 1.0 / 400e9, "fadd_loop": 1.0 / 1.2e12,
             "fmul_loop": 1.0 / 1.2e12}  # fmt: skip

    def __init__(self, truth: StencilEnergyConstants, noise: float = 0.01, seed: int = 0) -> None:
        super().__init__(noise, seed)
        self.truth = truth

    def __call__(self, kind: str, **p: Any) -> Tuple[float, float]:
        bench = kind.split(":", 1)[-1]
        if bench not in _ENERGY_BENCHES:
            raise CalibrationError(f"synthetic energy GPU has no benchmark {kind!r}")
        param, col = _ENERGY_BENCHES[bench]
        n = float(p[param])
        time_s = n if col is None else n * self._RATE[bench] + 1e-4
        row = np.zeros(len(ENERGY_TERMS))
        row[0] = time_s
        if col is not None:
            row[col] = n
        energy = float(self.truth.energy_j(row))
        return time_s, self._jitter(energy)


# ---------------------------------------------------------------------------------------------
# hookup


def calibrate_on_device(
    run_kernel: Callable[[str, Dict[str, Any]], Any],
    hhc_base: Optional[HhcGpu] = None,
    doacross: Optional[Tuple[DoacrossGpu, Nest]] = None,
    energy: bool = False,
) -> Dict[str, Any]:
    """Calibrate whichever models are asked for on a device reached through ``run_kernel``.

    ``run_kernel(kind, params)`` runs one micro-benchmark (see the module table) on the device
    and returns its time in s (or (time_s, energy_j) for ``energy:*`` kinds). For a simulated
    board pass ``governor.tuning.analytic.simkernels.SimKernelRunner(dev)``. Returns ``{"hhc": HhcGpu, "doacross": DoacrossConstants,
    "energy": StencilEnergyConstants}`` for the parts requested.
    """

    def measure(kind: str, **params: Any) -> Any:
        return run_kernel(kind, params)

    out: Dict[str, Any] = {}
    if hhc_base is not None:
        out["hhc"] = calibrate_hhc(measure, hhc_base)
    if doacross is not None:
        out["doacross"] = calibrate_doacross(measure, *doacross)
    if energy:
        out["energy"] = calibrate_stencil_energy(measure)
    return out
