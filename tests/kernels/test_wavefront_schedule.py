"""The seidel-2d wavefront schedule, replayed on the CPU: waves of tiles, in each tile the
threads' skewed steps, each step computed from the values before it (as parallel threads
would see them), blocks of a wave in either order. It must give the sequential sweep."""

from __future__ import annotations

import numpy as np
import pytest


def _sequential(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    n = a.shape[0]
    for i in range(1, n - 1):
        for j in range(1, n - 1):
            a[i, j] = a[i - 1 : i + 2, j - 1 : j + 2].sum() / 9.0
    return a


def _replay(a: np.ndarray, tile_i: int, tile_j: int, reverse: bool) -> np.ndarray:
    # the index arithmetic of the seidel_2d template in governor/kernels/templates.py
    a = a.copy()
    n = a.shape[0]
    inner = n - 2
    tiles_i = -(-inner // tile_i)
    tiles_p = -(-(2 * inner - 1) // tile_j)
    for wave in range(tiles_i + tiles_p - 1):
        blocks = range(tiles_i - 1, -1, -1) if reverse else range(tiles_i)
        for ti in blocks:
            tp = wave - ti
            if tp < 0 or tp >= tiles_p:
                continue
            for s in range(tile_j + tile_i - 1):
                before = a.copy()  # every thread of the step reads the state before it
                for r in range(tile_i):
                    c = s - r
                    ii = ti * tile_i + r
                    jj = tp * tile_j + c - ii
                    if 0 <= c < tile_j and ii < inner and 0 <= jj < inner:
                        i, j = ii + 1, jj + 1
                        a[i, j] = before[i - 1 : i + 2, j - 1 : j + 2].sum() / 9.0
    return a


@pytest.mark.parametrize("tile_i, tile_j", [(1, 1), (2, 3), (4, 4), (3, 7), (16, 5)])
@pytest.mark.parametrize("reverse", [False, True])
def test_the_wave_order_reproduces_the_sequential_sweep(tile_i, tile_j, reverse):
    a = np.random.default_rng(7).standard_normal((19, 19))
    np.testing.assert_allclose(_replay(a, tile_i, tile_j, reverse), _sequential(a), rtol=1e-13)


def test_tiles_without_the_skew_are_caught():
    # rectangular tiles of (i, j) in waves ti + tj: a tile updates (i+1, j-1) before (i, j)
    a = np.random.default_rng(8).standard_normal((12, 12))
    n, t = 12, 2
    b = a.copy()
    tiles = -(-(n - 2) // t)
    for wave in range(2 * tiles - 1):
        for ti in range(tiles):
            tj = wave - ti
            if 0 <= tj < tiles:
                for i in range(1 + ti * t, min(1 + (ti + 1) * t, n - 1)):
                    for j in range(1 + tj * t, min(1 + (tj + 1) * t, n - 1)):
                        b[i, j] = b[i - 1 : i + 2, j - 1 : j + 2].sum() / 9.0
    assert not np.allclose(b, _sequential(a))
