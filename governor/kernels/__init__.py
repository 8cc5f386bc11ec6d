"""CUDA kernels that take the tuned tiles (gemm, jacobi-2d, heat-3d, seidel-2d, ...).

Each kernel is one module of ``governor.kernels.library`` holding its description
(``description.KernelDescription``: CUDA C template, tiles, block and grid rules, traffic,
reference, test problems); ``mapping`` turns loop tiles into a thread block, a grid and
shared memory; ``nvrtc`` compiles them for a board's architecture without a
GPU (extra ``nvrtc``) and reads ptxas's register and shared-memory counts; ``cupy_run``
launches them with CuPy (extra ``cuda``); ``build_launch`` turns a per-clock
``KernelConfig`` back into a launch. Nothing here imports CuPy or NVRTC until asked.

    >>> from governor.kernels import build_kernel
    >>> k = build_kernel("gemm", "agx-orin")        # doctest: +SKIP
    >>> k.plan.threads_per_block, k.report.registers_per_thread   # doctest: +SKIP
"""

from __future__ import annotations

from governor.kernels.build import BuiltKernel, build_kernel, check_launch, kernel_source
from governor.kernels.description import KernelDescription, Problem, descriptions
from governor.kernels.gpu_cases import gpu_check_cases
from governor.kernels.launch import KernelLaunch, build_launch
from governor.kernels.mapping import LaunchError, LaunchPlan, find_template, plan_launch
from governor.kernels.nvrtc import CompileError, CompileReport, compile_source
from governor.kernels.operating_points import ConfigTable, KernelConfig
from governor.kernels.select import BoardArch, TileSelection, board_arch, select_kernel_tiles
from governor.kernels.templates import KERNELS

__all__ = [
    "KERNELS",
    "BoardArch",
    "BuiltKernel",
    "CompileError",
    "CompileReport",
    "ConfigTable",
    "KernelConfig",
    "KernelDescription",
    "KernelLaunch",
    "LaunchError",
    "LaunchPlan",
    "Problem",
    "TileSelection",
    "board_arch",
    "build_kernel",
    "build_launch",
    "check_launch",
    "compile_source",
    "find_template",
    "gpu_check_cases",
    "kernel_source",
    "descriptions",
    "plan_launch",
    "select_kernel_tiles",
]
