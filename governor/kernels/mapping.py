"""From loop tiles to a launch: thread-block shape, grid, work per thread, shared memory.

A tile is the block of loop iterations one thread block owns; the thread block is how many
threads share it. They differ: EATSS's gemm tile on an A100 is 16 x 336 (5,376 points),
which no launch accepts as threads per block, so the block here is at most
``threads_target`` threads (256 unless asked) shaped to divide the tile, and each thread
covers ``tile / block`` points. Checks name the limit and the value that breaks it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

from governor.errors import InvalidRequestError
from governor.kernels.description import KernelDescription, descriptions
from governor.tuning.occupancy import MAX_BLOCK_DIMS, ArchLimits

__all__ = [
    "DEFAULT_THREADS",
    "LaunchError",
    "LaunchPlan",
    "block_threads",
    "find_template",
    "plan_launch",
    "static_shared_limit_bytes",
]

DEFAULT_THREADS = 256
# Static __shared__ arrays are capped at 48 KB on every architecture; more needs dynamic
# shared memory and an opt-in attribute, which these kernels do not use.
_STATIC_SHARED_BYTES = 48 * 1024


class LaunchError(InvalidRequestError):
    """A configuration that cannot launch on the board; the message names limit and value."""


def block_threads(thread_block: Tuple[int, int, int]) -> int:
    """Threads in a thread block of shape ``(x, y, z)``."""
    x, y, z = thread_block
    return x * y * z


@dataclass(frozen=True)
class LaunchPlan:
    """How a kernel's tiles become a launch on one compute capability."""

    kernel: str
    tiles: Dict[str, int]
    thread_block: Tuple[int, int, int]
    work_per_thread: int
    shared_memory_bytes: int  # what the source declares; the compiler's figure is authoritative
    carveout_percent: int
    precision: str

    @property
    def threads_per_block(self) -> int:
        return block_threads(self.thread_block)

    def to_dict(self) -> Dict[str, Any]:
        return {
            "tile": dict(self.tiles),
            "thread_block": list(self.thread_block),
            "threads_per_block": self.threads_per_block,
            "work_per_thread": self.work_per_thread,
            "carveout_percent": self.carveout_percent,
            "precision": self.precision,
        }


def find_template(name: str) -> KernelDescription:
    """The description of library kernel ``name``.

    Raises:
        InvalidRequestError: unknown kernel (the message lists the known ones).
    """
    known = descriptions()
    if name not in known:
        raise InvalidRequestError(
            f"unknown library kernel {name!r}; known: {', '.join(sorted(known))}"
        )
    return known[name]


def static_shared_limit_bytes(arch: ArchLimits) -> int:
    """Shared memory a block may declare statically: 48 KB, or less where the CC has less."""
    return min(_STATIC_SHARED_BYTES, arch.max_shared_per_block_bytes)


def _pow2_divisor(value: int, cap: int) -> int:
    """The largest power of two that divides ``value`` and is at most ``cap`` (at least 1)."""
    d = 1
    while d * 2 <= cap and value % (d * 2) == 0:
        d *= 2
    return d


def _check_tiles(template: KernelDescription, tiles: Mapping[str, int]) -> Dict[str, int]:
    missing = [loop for loop in template.loops if loop not in tiles]
    extra = [loop for loop in tiles if loop not in template.loops]
    if missing or extra:
        raise InvalidRequestError(
            f"{template.name} takes tiles for loops {', '.join(template.loops)}"
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; unknown {', '.join(extra)}" if extra else "")
        )
    out: Dict[str, int] = {}
    for loop in template.loops:
        value = tiles[loop]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidRequestError(f"tile {loop}={value!r} must be a positive integer")
        out[loop] = value
    return out


def plan_launch(
    kernel: str,
    tiles: Mapping[str, int],
    arch: ArchLimits,
    threads_target: Optional[int] = None,
    shared_fraction: float = 0.0,
    precision: str = "double",
) -> LaunchPlan:
    """The launch of ``kernel`` for ``tiles`` on ``arch``.

    The thread block spreads over ``block_loops`` (x first): along each, the largest power of
    two that divides the tile and keeps the block within ``threads_target`` threads (256 by
    default) and CUDA's per-dimension limits. A kernel whose description has a
    ``block_rule`` (the wavefront kernel: one thread per row of its tile) uses that instead.

    Raises:
        InvalidRequestError: unknown kernel, tiles for other loops, bad precision.
        LaunchError: more threads per block or more shared memory than the CC allows.
    """
    template = find_template(kernel)
    if precision not in ("single", "double"):
        raise InvalidRequestError(f"precision must be single or double, not {precision!r}")
    if not 0.0 <= shared_fraction <= 1.0:
        raise InvalidRequestError(f"shared fraction {shared_fraction} is not in [0, 1]")
    tile = _check_tiles(template, tiles)
    target = DEFAULT_THREADS if threads_target is None else int(threads_target)
    if target < 1:
        raise InvalidRequestError(f"threads per block must be positive, not {target}")
    if target > arch.max_threads_per_block:
        raise LaunchError(
            f"threads per block {target} exceeds the limit of {arch.max_threads_per_block} "
            f"on CC {arch.cc}"
        )
    if template.block_rule is not None:
        block, work = template.block_rule(tile, arch, target)
        shape = list(block)
    else:
        shape = [1, 1, 1]
        budget = target
        for axis, loop in enumerate(template.block_loops):
            dim = _pow2_divisor(tile[loop], min(budget, MAX_BLOCK_DIMS[axis]))
            shape[axis] = dim
            budget //= dim
        work = 1
        for axis, loop in enumerate(template.block_loops):
            work *= -(-tile[loop] // shape[axis])
    shared = 0
    if template.staged:
        shared = 8 if precision == "double" else 4
        for loop in template.staged:
            shared *= tile[loop]
    limit = static_shared_limit_bytes(arch)
    if shared > limit:
        slab = " x ".join(f"tile {loop}" for loop in template.staged)
        raise LaunchError(
            f"shared memory per block {shared} bytes ({slab}) exceeds the "
            f"static limit of {limit} bytes on CC {arch.cc}"
        )
    return LaunchPlan(
        kernel=template.name,
        tiles=tile,
        thread_block=(shape[0], shape[1], shape[2]),
        work_per_thread=work,
        shared_memory_bytes=shared,
        carveout_percent=int(round(100 * shared_fraction)),
        precision=precision,
    )
