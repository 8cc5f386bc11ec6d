"""Launch the library kernels with CuPy (extra ``cuda``), one function per kernel.

Each takes a :class:`~governor.kernels.mapping.LaunchPlan` and CuPy arrays, compiles the
plan's source once (CuPy caches kernels by source) and launches it with the plan's thread
block and the grid its tiles imply. The carveout is set through the function's
``preferred_shared_memory_carveout`` attribute where CuPy exposes it.
"""

from __future__ import annotations

from typing import Any, Optional

from governor.errors import UnsupportedError
from governor.kernels.build import kernel_source
from governor.kernels.mapping import LaunchPlan, find_template, plan_launch

__all__ = [
    "device_plan",
    "run_gemm",
    "run_heat_3d",
    "run_jacobi_2d",
    "run_seidel_2d",
]


def _cupy() -> Any:
    try:
        import cupy  # type: ignore[import-not-found]
    except ImportError as err:
        raise UnsupportedError(
            "running kernels needs CuPy: pip install 'gpu-governor[cuda]'"
        ) from err
    return cupy


def device_plan(
    kernel: str,
    tiles: Any,
    threads_per_block: Optional[int] = None,
    precision: str = "double",
    shared_fraction: float = 0.0,
    device: int = 0,
) -> LaunchPlan:
    """The launch plan of ``kernel`` for the compute capability of CUDA device ``device``."""
    from governor.tuning.occupancy import arch_limits

    cupy = _cupy()
    text = str(cupy.cuda.Device(device).compute_capability)  # "87", "90", "100"
    cc = f"{text[:-1]}.{text[-1]}"
    return plan_launch(
        kernel, tiles, arch_limits(cc), threads_per_block, shared_fraction, precision
    )


def _function(plan: LaunchPlan) -> Any:
    cupy = _cupy()
    func = cupy.RawKernel(kernel_source(plan), find_template(plan.kernel).entry)
    try:
        func.preferred_shared_memory_carveout = plan.carveout_percent
    except (AttributeError, cupy.cuda.driver.CUDADriverError):
        pass  # a CuPy without the attribute: the driver's default carveout
    return func


def _dtype(plan: LaunchPlan) -> Any:
    cupy = _cupy()
    return cupy.float64 if plan.precision == "double" else cupy.float32


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def run_gemm(plan: LaunchPlan, a: Any, b: Any, c: Any, alpha: float, beta: float) -> Any:
    """``c = alpha * a @ b + beta * c`` in place; returns ``c``."""
    cupy = _cupy()
    m, k = a.shape
    n = b.shape[1]
    func = _function(plan)
    grid = (_ceil(n, plan.tiles["j"]), _ceil(m, plan.tiles["i"]), 1)
    real = _dtype(plan)
    i32 = cupy.int32
    func(grid, plan.thread_block, (a, b, c, i32(m), i32(n), i32(k), real(alpha), real(beta)))
    return c


def run_jacobi_2d(plan: LaunchPlan, a: Any, steps: int) -> Any:
    """``steps`` Jacobi steps on square ``a`` (boundary fixed); returns the result."""
    cupy = _cupy()
    n = a.shape[0]
    func = _function(plan)
    grid = (_ceil(n, plan.tiles["j"]), _ceil(n, plan.tiles["i"]), 1)
    src, dst = a, a.copy()
    for _ in range(steps):
        func(grid, plan.thread_block, (src, dst, cupy.int32(n)))
        src, dst = dst, src
    return src


def run_heat_3d(plan: LaunchPlan, a: Any, steps: int) -> Any:
    """``steps`` heat-3d steps on cubic ``a`` (boundary fixed); returns the result."""
    cupy = _cupy()
    n = a.shape[0]
    func = _function(plan)
    t = plan.tiles
    grid = (_ceil(n, t["k"]), _ceil(n, t["j"]), _ceil(n, t["i"]))
    src, dst = a, a.copy()
    for _ in range(steps):
        func(grid, plan.thread_block, (src, dst, cupy.int32(n)))
        src, dst = dst, src
    return src


def run_seidel_2d(plan: LaunchPlan, a: Any, sweeps: int) -> Any:
    """``sweeps`` in-place Gauss-Seidel sweeps on square ``a``; returns ``a``."""
    cupy = _cupy()
    n = a.shape[0]
    func = _function(plan)
    tiles_i = _ceil(n - 2, plan.tiles["i"])
    tiles_p = _ceil(2 * (n - 2) - 1, plan.tiles["j"])  # j skewed by i: p = j + i
    waves = tiles_i + tiles_p - 1
    for _ in range(sweeps):
        for wave in range(waves):
            func((tiles_i, 1, 1), plan.thread_block, (a, cupy.int32(n), cupy.int32(wave)))
    return a
