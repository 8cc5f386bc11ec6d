"""CUDA C sources of the library kernels, each parameterised by its loop tiles.

Every source starts with ``#define`` lines for its tiles and thread-block shape, so the text
printed by ``governor kernels compile`` compiles on its own. ``real_t`` is ``float`` or
``double``. The mapping of each kernel's tiles is in :data:`KERNELS` (``mapping``) and in
docs/tiles.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Mapping, Tuple

__all__ = ["KERNELS", "KernelTemplate", "render"]


@dataclass(frozen=True)
class KernelTemplate:
    """One library kernel: its loops (outermost first), the EATSS loop nest that chooses its
    tiles, the loops mapped to the thread block (x first), and what each tile becomes."""

    name: str
    entry: str
    loops: Tuple[str, ...]
    eatss_kernel: str
    block_loops: Tuple[str, ...]  # loops spread over thread-block dimensions x, y, z
    wavefront: bool  # DOACROSS: tiles run in skewed waves, one launch per wave
    mapping: str
    body: str
    staged: Tuple[str, ...] = ()  # loops whose tiles span the shared-memory slab (one array)


_GEMM = r"""
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

_JACOBI_2D = r"""
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

_HEAT_3D = r"""
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

_SEIDEL_2D = r"""
// One sweep of Polybench seidel-2d, in place: A[i][j] = (3x3 neighbourhood sum) / 9, where
// (i-1, *) and (i, j-1) already hold this sweep's values (a DOACROSS nest). Its dependence
// distances (1,-1), (1,0), (1,1), (0,1) forbid rectangular tiles of (i, j); skewing j by i
// (p = j + i) makes them (1,0), (1,1), (1,2), (0,1), all non-negative, so tiles of
// TILE_I x TILE_J in (i, p) are legal and run in waves ti + tp. One launch per wave; block ti
// takes tile (ti, wave - ti). Inside a tile thread r owns row r and visits column c of the
// tile at step c + r, with a barrier between steps. Indices count interior points from 0.
extern "C" __global__ void __launch_bounds__(BLOCK_X)
seidel_2d(real_t* __restrict__ A, int n, int wave)
{
    const int inner = n - 2;
    const int tiles_p = (2 * inner - 1 + TILE_J - 1) / TILE_J;
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

KERNELS: Dict[str, KernelTemplate] = {
    t.name: t
    for t in (
        KernelTemplate(
            name="gemm",
            entry="gemm",
            loops=("i", "j", "k"),
            eatss_kernel="gemm",
            block_loops=("j", "i"),
            wavefront=False,
            mapping=(
                "tile i x j = the C tile of one thread block (grid over i, j); tile k = the "
                "step of the k loop; thread block x along j, y along i, each thread computing "
                "(tile i / block y) x (tile j / block x) outputs; A's tile i x tile k slab "
                "staged in shared memory; carveout = the shared fraction"
            ),
            body=_GEMM,
            staged=("i", "k"),
        ),
        KernelTemplate(
            name="jacobi-2d",
            entry="jacobi_2d",
            loops=("i", "j"),
            eatss_kernel="jacobi-2d-imper",
            block_loops=("j", "i"),
            wavefront=False,
            mapping=(
                "tile i x j = the points of one thread block per time step (grid over i, j); "
                "thread block x along j, y along i, each thread looping over "
                "(tile i / block y) x (tile j / block x) points; no shared memory (every "
                "reference is an L1 cache reference); carveout = the shared fraction"
            ),
            body=_JACOBI_2D,
        ),
        KernelTemplate(
            name="heat-3d",
            entry="heat_3d",
            loops=("i", "j", "k"),
            eatss_kernel="heat-3d",
            block_loops=("k", "j", "i"),
            wavefront=False,
            mapping=(
                "tile i x j x k = the box of one thread block per time step (grid over k, j, "
                "i); thread block x along k, y along j, z along i, each thread looping over "
                "its share of the box; no shared memory (L1 cache references); carveout = "
                "the shared fraction"
            ),
            body=_HEAT_3D,
        ),
        KernelTemplate(
            name="seidel-2d",
            entry="seidel_2d",
            loops=("i", "j"),
            eatss_kernel="seidel-2d",
            block_loops=("i",),
            wavefront=True,
            mapping=(
                "DOACROSS wavefront: j is skewed by i (p = j + i) so rectangular tiles are "
                "legal; tile i x j = one thread block's tile of (i, p); tiles run in waves "
                "ti + tp, one launch per wave; tile i = threads per block (one row each), "
                "tile j = the columns each thread walks, one step behind the row above; no "
                "shared memory (in place through L1)"
            ),
            body=_SEIDEL_2D,
        ),
    )
}


def render(
    template: KernelTemplate,
    tiles: Mapping[str, int],
    block: Tuple[int, int, int],
    precision: str,
) -> str:
    """The complete CUDA C source of ``template`` for these tiles and thread-block shape."""
    real = "double" if precision == "double" else "float"
    lines = [f"// governor kernel {template.name}: {template.mapping}", f"typedef {real} real_t;"]
    lines += [f"#define TILE_{loop.upper()} {int(tiles[loop])}" for loop in template.loops]
    lines += [f"#define BLOCK_{axis} {int(n)}" for axis, n in zip("XYZ", block)]
    return "\n".join(lines) + "\n" + template.body.lstrip("\n")
