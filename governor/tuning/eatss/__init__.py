"""Energy-aware tile-size selection (EATSS) for affine loop nests on NVIDIA GPUs.

Implements the formulation of Jayaweera, Kong, Wang and Kaeli (CGO 2024), stated in
``docs/tiles.md``, with an exact solver: tile sizes that favour data shared between threads
under the GPU's cache, shared-memory and register limits.

    >>> from governor.tuning import eatss
    >>> r = eatss.select_tiles("gemm", "a100", shared_fraction=0.25, bound="artifact")
    >>> r.tiles, r.objective
    ({'i': 16, 'j': 336, 'k': 32}, 16160)
"""

from __future__ import annotations

from governor.tuning.eatss.cache import (
    UnknownBoardError,
    cache_key,
    cached_tiles,
    check_board,
    clock_note,
    current_board,
    save_tiles,
)
from governor.tuning.eatss.catalog import builtin_gpus, builtin_kernels, find_gpu, find_kernel
from governor.tuning.eatss.formulation import (
    BOUNDS,
    PRECISIONS,
    Constraint,
    Infeasible,
    Problem,
    build_problem,
)
from governor.tuning.eatss.gpus import GpuResources, gpu_from_cuda_properties, live_gpu, load_gpus
from governor.tuning.eatss.model import Kernel, Reference, load_kernels
from governor.tuning.eatss.select import (
    WARP_FRACTIONS,
    TileChoice,
    TileResult,
    select_all,
    select_tiles,
)
from governor.tuning.eatss.solver import search

__all__ = [
    "BOUNDS",
    "PRECISIONS",
    "WARP_FRACTIONS",
    "Constraint",
    "GpuResources",
    "Infeasible",
    "Kernel",
    "Problem",
    "Reference",
    "TileChoice",
    "TileResult",
    "UnknownBoardError",
    "build_problem",
    "builtin_gpus",
    "builtin_kernels",
    "cache_key",
    "cached_tiles",
    "check_board",
    "clock_note",
    "current_board",
    "find_gpu",
    "find_kernel",
    "gpu_from_cuda_properties",
    "live_gpu",
    "load_gpus",
    "load_kernels",
    "save_tiles",
    "search",
    "select_all",
    "select_tiles",
]
