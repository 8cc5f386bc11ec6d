"""CUDA kernels that take the tuned tiles: gemm, jacobi-2d, heat-3d and seidel-2d.

Sources are CUDA C templates (``templates``); ``mapping`` turns loop tiles into a thread
block, a grid and shared memory; ``nvrtc`` compiles them for a board's architecture without a
GPU (extra ``nvrtc``) and reads ptxas's register and shared-memory counts; ``cupy_run``
launches them with CuPy (extra ``cuda``). Nothing here imports CuPy or NVRTC until asked.

    >>> from governor.kernels import build_kernel
    >>> k = build_kernel("gemm", "agx-orin")        # doctest: +SKIP
    >>> k.plan.threads_per_block, k.report.registers_per_thread   # doctest: +SKIP
"""

from __future__ import annotations

from governor.kernels.build import BuiltKernel, build_kernel, check_launch, kernel_source
from governor.kernels.gpu_cases import gpu_check_cases
from governor.kernels.mapping import LaunchError, LaunchPlan, find_template, plan_launch
from governor.kernels.nvrtc import CompileError, CompileReport, compile_source
from governor.kernels.select import BoardArch, TileSelection, board_arch, select_kernel_tiles
from governor.kernels.templates import KERNELS

__all__ = [
    "KERNELS",
    "BoardArch",
    "BuiltKernel",
    "CompileError",
    "CompileReport",
    "LaunchError",
    "LaunchPlan",
    "TileSelection",
    "board_arch",
    "build_kernel",
    "check_launch",
    "compile_source",
    "find_template",
    "gpu_check_cases",
    "kernel_source",
    "plan_launch",
    "select_kernel_tiles",
]
