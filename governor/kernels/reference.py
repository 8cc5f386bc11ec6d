"""NumPy references of the library kernels, on the same boundary rules: what a kernel's
result on a GPU is checked against (the GPU tests and the GPU check)."""

from __future__ import annotations

from typing import Any

__all__ = ["gemm_ref", "heat_3d_ref", "jacobi_2d_ref", "seidel_2d_ref"]


def gemm_ref(a: Any, b: Any, c: Any, alpha: float, beta: float) -> Any:
    """``alpha * a @ b + beta * c``."""
    return alpha * (a @ b) + beta * c


def jacobi_2d_ref(a: Any, steps: int) -> Any:
    """``steps`` five-point Jacobi steps; the boundary stays."""
    src = a.copy()
    for _ in range(steps):
        dst = src.copy()
        dst[1:-1, 1:-1] = 0.2 * (
            src[1:-1, 1:-1] + src[1:-1, :-2] + src[1:-1, 2:] + src[2:, 1:-1] + src[:-2, 1:-1]
        )
        src = dst
    return src


def heat_3d_ref(a: Any, steps: int) -> Any:
    """``steps`` seven-point heat steps (coefficient 1/8 per axis); the boundary stays."""
    src = a.copy()
    for _ in range(steps):
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


def seidel_2d_ref(a: Any, sweeps: int) -> Any:
    """``sweeps`` in-place nine-point Gauss-Seidel sweeps, row by row (a Python loop: keep
    ``a`` small)."""
    a = a.copy()
    n = a.shape[0]
    for _ in range(sweeps):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                a[i, j] = a[i - 1 : i + 2, j - 1 : j + 2].sum() / 9.0
    return a
