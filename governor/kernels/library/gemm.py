"""gemm: ``C = alpha * A @ B + beta * C`` (Polybench gemm), A's slab staged in shared memory."""

from __future__ import annotations

from typing import Any, Mapping

from governor.kernels.description import KernelDescription, Problem, ceil_div, span
from governor.kernels.mapping import LaunchPlan

BODY = r"""
// C[i][j] = alpha * sum_k A[i][k] * B[k][j] + beta * C[i][j]   (Polybench gemm)
// A block owns a TILE_I x TILE_J tile of C and walks k in steps of TILE_K. A[i][k] is the
// shared-memory reference of the EATSS formulation: its TILE_I x TILE_K slab is staged in
// shared memory. B and C (stride-1 along j) are read through L1.
#define ROWS_PER_THREAD (TILE_I / BLOCK_Y)
#define COLS_PER_THREAD (TILE_J / BLOCK_X)

extern "C" __global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
gemm(const real_t* __restrict__ A, const real_t* __restrict__ B, real_t* __restrict__ C,
     int M, int N, int K, real_t alpha, real_t beta)
{
    __shared__ real_t a_tile[TILE_I][TILE_K];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int i0 = blockIdx.y * TILE_I, j0 = blockIdx.x * TILE_J;
    real_t acc[ROWS_PER_THREAD][COLS_PER_THREAD];
#pragma unroll
    for (int r = 0; r < ROWS_PER_THREAD; ++r)
#pragma unroll
        for (int c = 0; c < COLS_PER_THREAD; ++c) acc[r][c] = (real_t)0;
    for (int k0 = 0; k0 < K; k0 += TILE_K) {
        for (int t = ty * BLOCK_X + tx; t < TILE_I * TILE_K; t += BLOCK_X * BLOCK_Y) {
            const int r = t / TILE_K, kk = t % TILE_K;
            const int i = i0 + r, k = k0 + kk;
            a_tile[r][kk] = (i < M && k < K) ? A[(size_t)i * K + k] : (real_t)0;
        }
        __syncthreads();
        const int k_end = min(TILE_K, K - k0);
        for (int kk = 0; kk < k_end; ++kk) {
            real_t b[COLS_PER_THREAD];
#pragma unroll
            for (int c = 0; c < COLS_PER_THREAD; ++c) {
                const int j = j0 + tx + c * BLOCK_X;
                b[c] = j < N ? B[(size_t)(k0 + kk) * N + j] : (real_t)0;
            }
#pragma unroll
            for (int r = 0; r < ROWS_PER_THREAD; ++r) {
                const real_t a = a_tile[ty + r * BLOCK_Y][kk];
#pragma unroll
                for (int c = 0; c < COLS_PER_THREAD; ++c) acc[r][c] += a * b[c];
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < ROWS_PER_THREAD; ++r) {
        const int i = i0 + ty + r * BLOCK_Y;
#pragma unroll
        for (int c = 0; c < COLS_PER_THREAD; ++c) {
            const int j = j0 + tx + c * BLOCK_X;
            if (i < M && j < N) {
                const size_t at = (size_t)i * N + j;
                C[at] = alpha * acc[r][c] + beta * C[at];
            }
        }
    }
}
"""


def run(
    cp: Any,
    func: Any,
    plan: LaunchPlan,
    a: Any,
    b: Any,
    c: Any,
    alpha: float = 1.0,
    beta: float = 0.0,
) -> Any:
    """``c = alpha * a @ b + beta * c`` in place: one launch, a block per C tile; returns c."""
    m, k = a.shape
    n = b.shape[1]
    grid = (ceil_div(n, plan.tiles["j"]), ceil_div(m, plan.tiles["i"]), 1)
    real = cp.float64 if plan.precision == "double" else cp.float32
    i32 = cp.int32
    func(grid, plan.thread_block, (a, b, c, i32(m), i32(n), i32(k), real(alpha), real(beta)))
    return c


def reference(a: Any, b: Any, c: Any, alpha: float = 1.0, beta: float = 0.0) -> Any:
    return alpha * (a @ b) + beta * c


def problem(rng: Any, tiles: Mapping[str, int], dtype: Any) -> Problem:
    m, n, k = span(tiles["i"]), span(tiles["j"]), span(tiles["k"])
    a, b, c = (rng.standard_normal(s).astype(dtype) for s in ((m, k), (k, n), (m, n)))
    return Problem((a, b, c), {"alpha": 1.5, "beta": 0.5}, in_place=(2,))


def check_problem(rng: Any, dtype: Any) -> Problem:
    a = rng.standard_normal((1024, 512)).astype(dtype)
    b = rng.standard_normal((512, 1024)).astype(dtype)
    c = rng.standard_normal((1024, 1024)).astype(dtype)
    return Problem((a, b, c), {"alpha": 1.0, "beta": 0.5}, in_place=(2,))


def traffic(tile: Mapping[str, int]) -> float:
    """A is re-read once per column of tiles, B once per row."""
    return 1.0 / tile["i"] + 1.0 / tile["j"]


KERNEL = KernelDescription(
    name="gemm",
    entry="gemm",
    loops=("i", "j", "k"),
    eatss_kernel="gemm",
    block_loops=("j", "i"),
    mapping=(
        "tile i x j = the C tile of one thread block (grid over i, j); tile k = the "
        "step of the k loop; thread block x along j, y along i, each thread computing "
        "(tile i / block y) x (tile j / block x) outputs; A's tile i x tile k slab "
        "staged in shared memory; carveout = the shared fraction"
    ),
    body=BODY,
    staged=("i", "k"),
    run=run,
    reference=reference,
    problem=problem,
    check_problem=check_problem,
    traffic=traffic,
    memory_share=0.15,
    problem_points=2048 * 2048,
    small_tiles={"i": 8, "j": 64, "k": 8},
)
