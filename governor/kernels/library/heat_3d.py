"""heat-3d: time steps of Polybench's seven-point heat stencil, read through L1."""

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
// One time step of Polybench heat-3d: B = A + 0.125 * (second differences along i, j, k).
// A block owns a TILE_I x TILE_J x TILE_K box of B; all references are stride-1 along k and
// read through L1 (EATSS cache references); nothing is staged in shared memory.
extern "C" __global__ void __launch_bounds__(BLOCK_X * BLOCK_Y * BLOCK_Z)
heat_3d(const real_t* __restrict__ A, real_t* __restrict__ B, int n)
{
    const int i0 = blockIdx.z * TILE_I, j0 = blockIdx.y * TILE_J, k0 = blockIdx.x * TILE_K;
    const size_t plane = (size_t)n * n;
    for (int a = threadIdx.z; a < TILE_I; a += BLOCK_Z) {
        const int i = i0 + a;
        if (i < 1 || i >= n - 1) continue;
        for (int b = threadIdx.y; b < TILE_J; b += BLOCK_Y) {
            const int j = j0 + b;
            if (j < 1 || j >= n - 1) continue;
            for (int c = threadIdx.x; c < TILE_K; c += BLOCK_X) {
                const int k = k0 + c;
                if (k < 1 || k >= n - 1) continue;
                const size_t at = (size_t)i * plane + (size_t)j * n + k;
                const real_t mid = A[at];
                B[at] = (real_t)0.125 * (A[at + plane] - (real_t)2 * mid + A[at - plane])
                      + (real_t)0.125 * (A[at + n] - (real_t)2 * mid + A[at - n])
                      + (real_t)0.125 * (A[at + 1] - (real_t)2 * mid + A[at - 1])
                      + mid;
            }
        }
    }
}
"""


def run(cp: Any, func: Any, plan: LaunchPlan, a: Any, steps: int = 1) -> Any:
    """``steps`` heat-3d steps on cubic ``a`` (boundary fixed); returns the result."""
    n = a.shape[0]
    t = plan.tiles
    grid = (ceil_div(n, t["k"]), ceil_div(n, t["j"]), ceil_div(n, t["i"]))
    src, dst = a, a.copy()
    for _ in range(int(steps)):
        func(grid, plan.thread_block, (src, dst, cp.int32(n)))
        src, dst = dst, src
    return src


def reference(a: Any, steps: int = 1) -> Any:
    """``steps`` seven-point heat steps (coefficient 1/8 per axis); the boundary stays."""
    src = a.copy()
    for _ in range(int(steps)):
        dst = src.copy()
        c = src[1:-1, 1:-1, 1:-1]
        dst[1:-1, 1:-1, 1:-1] = (
            0.125 * (src[2:, 1:-1, 1:-1] - 2 * c + src[:-2, 1:-1, 1:-1])
            + 0.125 * (src[1:-1, 2:, 1:-1] - 2 * c + src[1:-1, :-2, 1:-1])
            + 0.125 * (src[1:-1, 1:-1, 2:] - 2 * c + src[1:-1, 1:-1, :-2])
            + c
        )
        src = dst
    return src


def problem(rng: Any, tiles: Mapping[str, int], dtype: Any) -> Problem:
    n = max(span(tiles["i"]), span(tiles["j"]), span(tiles["k"]))
    return Problem((rng.standard_normal((n, n, n)).astype(dtype),), {"steps": 2})


def check_problem(rng: Any, dtype: Any) -> Problem:
    return Problem((rng.standard_normal((160, 160, 160)).astype(dtype),), {"steps": 1})


KERNEL = KernelDescription(
    name="heat-3d",
    entry="heat_3d",
    loops=("i", "j", "k"),
    eatss_kernel="heat-3d",
    block_loops=("k", "j", "i"),
    mapping=(
        "tile i x j x k = the box of one thread block per time step (grid over k, j, "
        "i); thread block x along k, y along j, z along i, each thread looping over "
        "its share of the box; no shared memory (L1 cache references); carveout = "
        "the shared fraction"
    ),
    body=BODY,
    run=run,
    reference=reference,
    problem=problem,
    check_problem=check_problem,
    traffic=stencil_traffic(("i", "j", "k")),
    memory_share=0.7,
    problem_points=256**3,
    small_tiles={"i": 4, "j": 8, "k": 32},
)
