"""seidel-2d: in-place Gauss-Seidel sweeps, a DOACROSS nest run as a wavefront of tiles."""

from __future__ import annotations

from typing import Any, Mapping, Tuple

from governor.kernels.description import (
    KernelDescription,
    Problem,
    ceil_div,
    span,
    stencil_traffic,
)
from governor.kernels.mapping import LaunchError, LaunchPlan
from governor.tuning.occupancy import MAX_BLOCK_DIMS, ArchLimits

BODY = r"""
// One sweep of Polybench seidel-2d, in place: A[i][j] = (3x3 neighbourhood sum) / 9, where
// (i-1, *) and (i, j-1) already hold this sweep's values (a DOACROSS nest). Its dependence
// distances (1,-1), (1,0), (1,1), (0,1) forbid rectangular tiles of (i, j); skewing j by i
// (p = j + i) makes them (1,0), (1,1), (1,2), (0,1), all non-negative, so tiles of
// TILE_I x TILE_J in (i, p) are legal and run in waves ti + tp. One launch per wave; block ti
// takes tile (ti, wave - ti). Inside a tile thread r owns row r and visits column c of the
// tile at step c + r, with a barrier between steps. Indices count interior points from 0.
// tiles_p, the tiles along p, comes from the host (the launch counts the waves with it).
extern "C" __global__ void __launch_bounds__(BLOCK_X)
seidel_2d(real_t* __restrict__ A, int n, int wave, int tiles_p)
{
    const int inner = n - 2;
    const int ti = blockIdx.x;
    const int tp = wave - ti;
    if (tp < 0 || tp >= tiles_p) return;
    const int r = threadIdx.x;
    const int ii = ti * TILE_I + r;
    const int steps = TILE_J + TILE_I - 1;
    for (int s = 0; s < steps; ++s) {
        const int c = s - r;
        const int jj = tp * TILE_J + c - ii;
        if (c >= 0 && c < TILE_J && ii < inner && jj >= 0 && jj < inner) {
            const size_t at = (size_t)(ii + 1) * n + (jj + 1);
            A[at] = (A[at - n - 1] + A[at - n] + A[at - n + 1]
                   + A[at - 1] + A[at] + A[at + 1]
                   + A[at + n - 1] + A[at + n] + A[at + n + 1]) / (real_t)9;
        }
        __syncthreads();
    }
}
"""


def waves(n: int, tiles: Mapping[str, int]) -> Tuple[int, int, int]:
    """(tiles along i, tiles along p = j + i, waves) of an ``n`` x ``n`` array, one launch
    per wave ``ti + tp``; the kernel takes ``tiles_p`` from here (one formula, not two)."""
    inner = n - 2
    tiles_i = ceil_div(inner, tiles["i"])
    tiles_p = ceil_div(2 * inner - 1, tiles["j"])
    return tiles_i, tiles_p, tiles_i + tiles_p - 1


def block_rule(
    tiles: Mapping[str, int], arch: ArchLimits, threads_target: int
) -> Tuple[Tuple[int, int, int], int]:
    """One thread per row of the tile (tile i threads), each walking tile j columns."""
    rows = tiles["i"]
    if rows > min(arch.max_threads_per_block, MAX_BLOCK_DIMS[0]):
        raise LaunchError(
            f"seidel-2d runs one thread per row of its tile: tile i={rows} is "
            f"{rows} threads per block, over the limit of {arch.max_threads_per_block} "
            f"on CC {arch.cc}"
        )
    return (rows, 1, 1), tiles["j"]


def run(cp: Any, func: Any, plan: LaunchPlan, a: Any, sweeps: int = 1) -> Any:
    """``sweeps`` in-place sweeps on square ``a``; one launch per wave; returns ``a``."""
    n = a.shape[0]
    tiles_i, tiles_p, count = waves(n, plan.tiles)
    for _ in range(int(sweeps)):
        for wave in range(count):
            args = (a, cp.int32(n), cp.int32(wave), cp.int32(tiles_p))
            func((tiles_i, 1, 1), plan.thread_block, args)
    return a


def reference(a: Any, sweeps: int = 1) -> Any:
    """``sweeps`` in-place nine-point Gauss-Seidel sweeps in row order. Points with equal
    ``j + 2 i`` depend on none of each other (the four earlier neighbours lie on smaller
    ones), so each such line is one NumPy step."""
    import numpy as np

    a = a.copy()
    n = a.shape[0]
    inner = np.arange(1, n - 1)
    ii, jj = np.meshgrid(inner, inner, indexing="ij")
    plane = (jj + 2 * ii).ravel()
    order = np.argsort(plane, kind="stable")
    cut = np.flatnonzero(np.diff(plane[order])) + 1
    groups = [(ii.ravel()[g], jj.ravel()[g]) for g in np.split(order, cut)]
    for _ in range(int(sweeps)):
        for i, j in groups:
            total = a[i, j].copy()
            for di in (-1, 0, 1):
                for dj in (-1, 0, 1):
                    if di or dj:
                        total += a[i + di, j + dj]
            a[i, j] = total / 9.0
    return a


def problem(rng: Any, tiles: Mapping[str, int], dtype: Any) -> Problem:
    # two tiles or more along i, and along p = j + i (2 inner - 1 columns of tiles)
    n = max(span(tiles["i"]), span(tiles["j"]) // 2 + 1) + 2
    return Problem((rng.standard_normal((n, n)).astype(dtype),), {"sweeps": 2}, in_place=(0,))


def check_problem(rng: Any, dtype: Any) -> Problem:
    return Problem((rng.standard_normal((192, 192)).astype(dtype),), {"sweeps": 1}, (0,))


KERNEL = KernelDescription(
    name="seidel-2d",
    entry="seidel_2d",
    loops=("i", "j"),
    eatss_kernel="seidel-2d",
    block_loops=("i",),
    mapping=(
        "DOACROSS wavefront: j is skewed by i (p = j + i) so rectangular tiles are "
        "legal; tile i x j = one thread block's tile of (i, p); tiles run in waves "
        "ti + tp, one launch per wave; tile i = threads per block (one row each), "
        "tile j = the columns each thread walks, one step behind the row above; no "
        "shared memory (in place through L1)"
    ),
    body=BODY,
    wavefront=True,
    block_rule=block_rule,
    run=run,
    reference=reference,
    problem=problem,
    check_problem=check_problem,
    traffic=stencil_traffic(("i", "j")),
    memory_share=0.5,
    problem_points=4096 * 4096,
    small_tiles={"i": 8, "j": 8},
)
