"""conv-2d: a depthwise 2-D convolution (one filter per channel, zero padding), the EATSS
catalog's conv-2d nest, with the block's slab of filters staged in shared memory."""

from __future__ import annotations

from typing import Any, Mapping

from governor.kernels.description import KernelDescription, Problem, ceil_div, span
from governor.kernels.mapping import LaunchPlan

BODY = r"""
// O[c][h][w] = sum_{kh, kw} I[c][h + kh - KH/2][w + kw - KW/2] * F[c][kh][kw], zero outside
// the image ("same" size). A block owns a TILE_C x TILE_H x TILE_W box of O; its threads
// spread over h and w and take the box's channels one after another, walking the filter
// window in TILE_KH x TILE_KW steps; each step's TILE_KH x TILE_KW slab of the channel's
// filter is staged in shared memory. I and O (stride-1 along w) are read through L1. Each
// thread owns its points of the box for the whole launch, so it adds into O without a race.
extern "C" __global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
conv_2d(const real_t* __restrict__ I, const real_t* __restrict__ F, real_t* __restrict__ O,
        int C, int H, int W, int KH, int KW)
{
    __shared__ real_t f_tile[TILE_KH][TILE_KW];
    const int c0 = blockIdx.z * TILE_C, h0 = blockIdx.y * TILE_H, w0 = blockIdx.x * TILE_W;
    const int t = threadIdx.y * BLOCK_X + threadIdx.x;
    const int ph = KH / 2, pw = KW / 2;
    for (int a = 0; a < TILE_C && c0 + a < C; ++a) {  // the same channel in every thread
        const int c = c0 + a;
        for (int kh0 = 0; kh0 < KH; kh0 += TILE_KH) {
            for (int kw0 = 0; kw0 < KW; kw0 += TILE_KW) {
                for (int s = t; s < TILE_KH * TILE_KW; s += BLOCK_X * BLOCK_Y) {
                    const int kh = kh0 + s / TILE_KW, kw = kw0 + s % TILE_KW;
                    f_tile[s / TILE_KW][s % TILE_KW] =
                        (kh < KH && kw < KW) ? F[((size_t)c * KH + kh) * KW + kw] : (real_t)0;
                }
                __syncthreads();
                for (int b = threadIdx.y; b < TILE_H && h0 + b < H; b += BLOCK_Y) {
                    const int h = h0 + b;
                    for (int d = threadIdx.x; d < TILE_W && w0 + d < W; d += BLOCK_X) {
                        const int w = w0 + d;
                        const size_t at = ((size_t)c * H + h) * W + w;
                        real_t acc = (kh0 == 0 && kw0 == 0) ? (real_t)0 : O[at];
                        for (int r = 0; r < TILE_KH; ++r) {
                            const int y = h + kh0 + r - ph;
                            if (y < 0 || y >= H) continue;
                            for (int q = 0; q < TILE_KW; ++q) {
                                const int x = w + kw0 + q - pw;
                                if (x < 0 || x >= W) continue;
                                acc += I[((size_t)c * H + y) * W + x] * f_tile[r][q];
                            }
                        }
                        O[at] = acc;
                    }
                }
                __syncthreads();
            }
        }
    }
}
"""


def run(cp: Any, func: Any, plan: LaunchPlan, image: Any, filters: Any, out: Any) -> Any:
    """``out`` = the depthwise convolution of ``image`` (C x H x W) with ``filters``
    (C x KH x KW, odd sizes), in one launch: a block per box of the output; returns out."""
    c, h, w = image.shape
    kh, kw = filters.shape[1:]
    t = plan.tiles
    grid = (ceil_div(w, t["w"]), ceil_div(h, t["h"]), ceil_div(c, t["c"]))
    i32 = cp.int32
    args = (image, filters, out, i32(c), i32(h), i32(w), i32(kh), i32(kw))
    func(grid, plan.thread_block, args)
    return out


def reference(image: Any, filters: Any, out: Any) -> Any:
    import numpy as np

    c, h, w = image.shape
    kh, kw = filters.shape[1:]
    padded = np.zeros((c, h + kh - 1, w + kw - 1), dtype=image.dtype)
    padded[:, kh // 2 : kh // 2 + h, kw // 2 : kw // 2 + w] = image
    result = np.zeros_like(image)
    for r in range(kh):
        for q in range(kw):
            result += padded[:, r : r + h, q : q + w] * filters[:, r, q][:, None, None]
    return result


def problem(rng: Any, tiles: Mapping[str, int], dtype: Any) -> Problem:
    c, h, w = span(tiles["c"]), span(tiles["h"]), span(tiles["w"])
    step = max(tiles["kh"], tiles["kw"])
    size = 2 * step + 1 if step <= 4 else 5  # odd; two filter steps or more where cheap
    image = rng.standard_normal((c, h, w)).astype(dtype)
    filters = rng.standard_normal((c, size, size)).astype(dtype)
    return Problem((image, filters, np_zeros_like(image)), in_place=(2,))


def check_problem(rng: Any, dtype: Any) -> Problem:
    image = rng.standard_normal((32, 224, 224)).astype(dtype)
    filters = rng.standard_normal((32, 3, 3)).astype(dtype)
    return Problem((image, filters, np_zeros_like(image)), in_place=(2,))


def np_zeros_like(array: Any) -> Any:
    import numpy as np

    return np.zeros_like(array)


def traffic(tile: Mapping[str, int]) -> float:
    """The image box with its halo (one point each side) per output point, plus the write."""
    return (tile["h"] + 2) / tile["h"] * (tile["w"] + 2) / tile["w"] + 1.0


KERNEL = KernelDescription(
    name="conv-2d",
    entry="conv_2d",
    loops=("c", "h", "w", "kh", "kw"),
    eatss_kernel="conv-2d",
    block_loops=("w", "h"),
    mapping=(
        "tile c x h x w = the output box of one thread block (grid over w, h, c), its "
        "channels taken one after another; tiles kh x kw = the step of the filter window; "
        "thread block x along w, y along h; each step's tile kh x kw slab of the filter "
        "staged in shared memory; carveout = the shared fraction"
    ),
    body=BODY,
    staged=("kh", "kw"),
    run=run,
    reference=reference,
    problem=problem,
    check_problem=check_problem,
    traffic=traffic,
    memory_share=0.5,
    problem_points=32 * 224 * 224,
    small_tiles={"c": 2, "h": 8, "w": 32, "kh": 2, "kw": 2},
)
