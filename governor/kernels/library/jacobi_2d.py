"""jacobi-2d: time steps of Polybench's five-point Jacobi stencil, read through L1."""

from __future__ import annotations

from typing import Any, Mapping

from governor.kernels.description import (
    KernelDescription,
    Problem,
    ceil_div,
    span,
    stencil_traffic,
)
from governor.kernels.mapping import LaunchPlan

BODY = r"""
// One time step of Polybench jacobi-2d: B[i][j] = 0.2 * (5-point sum of A), interior only.
// A block owns a TILE_I x TILE_J tile of B; every reference is stride-1 along j, so EATSS
// classes them all as cache references: they are read through L1, nothing is staged.
extern "C" __global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
jacobi_2d(const real_t* __restrict__ A, real_t* __restrict__ B, int n)
{
    const int i0 = blockIdx.y * TILE_I, j0 = blockIdx.x * TILE_J;
    for (int r = threadIdx.y; r < TILE_I; r += BLOCK_Y) {
        const int i = i0 + r;
        if (i < 1 || i >= n - 1) continue;
        for (int c = threadIdx.x; c < TILE_J; c += BLOCK_X) {
            const int j = j0 + c;
            if (j < 1 || j >= n - 1) continue;
            const size_t at = (size_t)i * n + j;
            B[at] = (real_t)0.2 * (A[at] + A[at - 1] + A[at + 1] + A[at + n] + A[at - n]);
        }
    }
}
"""


def run(cp: Any, func: Any, plan: LaunchPlan, a: Any, steps: int = 1) -> Any:
    """``steps`` Jacobi steps on square ``a`` (boundary fixed), one launch per step into the
    other of two buffers; returns the result."""
    n = a.shape[0]
    grid = (ceil_div(n, plan.tiles["j"]), ceil_div(n, plan.tiles["i"]), 1)
    src, dst = a, a.copy()
    for _ in range(int(steps)):
        func(grid, plan.thread_block, (src, dst, cp.int32(n)))
        src, dst = dst, src
    return src


def reference(a: Any, steps: int = 1) -> Any:
    """``steps`` five-point Jacobi steps; the boundary stays."""
    src = a.copy()
    for _ in range(int(steps)):
        dst = src.copy()
        dst[1:-1, 1:-1] = 0.2 * (
            src[1:-1, 1:-1] + src[1:-1, :-2] + src[1:-1, 2:] + src[2:, 1:-1] + src[:-2, 1:-1]
        )
        src = dst
    return src


def problem(rng: Any, tiles: Mapping[str, int], dtype: Any) -> Problem:
    n = max(span(tiles["i"]), span(tiles["j"]))
    return Problem((rng.standard_normal((n, n)).astype(dtype),), {"steps": 2})


def check_problem(rng: Any, dtype: Any) -> Problem:
    return Problem((rng.standard_normal((2048, 2048)).astype(dtype),), {"steps": 1})


KERNEL = KernelDescription(
    name="jacobi-2d",
    entry="jacobi_2d",
    loops=("i", "j"),
    eatss_kernel="jacobi-2d-imper",
    block_loops=("j", "i"),
    mapping=(
        "tile i x j = the points of one thread block per time step (grid over i, j); "
        "thread block x along j, y along i, each thread looping over "
        "(tile i / block y) x (tile j / block x) points; no shared memory (every "
        "reference is an L1 cache reference); carveout = the shared fraction"
    ),
    body=BODY,
    run=run,
    reference=reference,
    problem=problem,
    check_problem=check_problem,
    traffic=stencil_traffic(("i", "j")),
    memory_share=0.7,
    problem_points=4096 * 4096,
    small_tiles={"i": 4, "j": 64},
)
