"""Candidate thread-block shapes for a kernel, ranked as Lopes et al. rank them.

Keep the shapes whose theoretical occupancy reaches a threshold (0.8 by default), sorted by
occupancy (highest first), then by threads per block (largest first, our reading of the
paper's "then by block size"; ``larger_first=False`` reverses it), then by x extent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

from governor.errors import InvalidRequestError
from governor.tuning.occupancy import ArchLimits, arch_limits, occupancy, parse_block

__all__ = [
    "Candidate",
    "KernelResources",
    "default_blocks",
    "rank_candidates",
    "shapes_2d",
]

Block = Tuple[int, int, int]


@dataclass(frozen=True)
class KernelResources:
    """What one thread block of a kernel uses: registers per thread (as ``nvcc -Xptxas -v``
    or ``cuobjdump --dump-resource-usage`` report them), static shared memory (B) and
    dynamic shared memory per thread (B)."""

    registers_per_thread: int = 0
    static_shared_bytes: int = 0
    shared_bytes_per_thread: int = 0

    def shared_bytes(self, threads_per_block: int) -> int:
        return self.static_shared_bytes + self.shared_bytes_per_thread * threads_per_block


@dataclass(frozen=True)
class Candidate:
    """A block shape with its theoretical occupancy on one compute capability."""

    block: Block
    threads: int
    occupancy: float
    blocks_per_sm: int
    limited_by: str

    @property
    def label(self) -> str:
        return format_block(self.block)

    def to_dict(self) -> Dict[str, object]:
        return {
            "block": list(self.block),
            "threads": self.threads,
            "occupancy": self.occupancy,
            "blocks_per_sm": self.blocks_per_sm,
            "limited_by": self.limited_by,
        }


def format_block(block: Block) -> str:
    x, y, z = block
    if y == 1 and z == 1:
        return str(x)
    if z == 1:
        return f"{x}x{y}"
    return f"{x}x{y}x{z}"


def default_blocks(step: int = 32, max_threads: int = 1024) -> List[Block]:
    """1-D blocks of ``step``, 2·``step``, ... ``max_threads`` threads."""
    if step < 1 or max_threads < step:
        raise InvalidRequestError(f"invalid block range: step {step}, max {max_threads}")
    return [(n, 1, 1) for n in range(step, max_threads + 1, step)]


def shapes_2d(max_threads: int = 1024, min_x: int = 8) -> List[Block]:
    """2-D blocks ``x × y`` with both powers of two, x ≥ ``min_x``, whole warps, ≤ max_threads."""
    out = []
    x = min_x
    while x <= max_threads:
        y = 1
        while x * y <= max_threads:
            if (x * y) % 32 == 0:
                out.append((x, y, 1))
            y *= 2
        x *= 2
    return out


def rank_candidates(
    cc: Union[str, ArchLimits],
    resources: Optional[KernelResources] = None,
    blocks: Optional[Iterable[object]] = None,
    threshold: float = 0.8,
    larger_first: bool = True,
) -> List[Candidate]:
    """Block shapes with occupancy ≥ ``threshold``, best first (see module docstring).

    Shapes that cannot launch (too many registers or too much shared memory) are left out.
    When the kernel's resources keep every shape below ``threshold``, the threshold applies
    to the best occupancy it can reach (``threshold`` × best). ``blocks`` defaults to 1-D
    blocks of 32..1024 threads.

    Raises:
        InvalidRequestError: bad threshold, unknown CC, or no shape can launch.
    """
    if not 0.0 <= threshold <= 1.0:
        raise InvalidRequestError(f"occupancy threshold must be in [0, 1], not {threshold!r}")
    arch = cc if isinstance(cc, ArchLimits) else arch_limits(cc)
    res = resources or KernelResources()
    shapes: Sequence[object] = list(blocks) if blocks is not None else default_blocks()
    found: List[Candidate] = []
    seen = set()
    for raw in shapes:
        shape = parse_block(raw)
        if shape in seen:
            continue
        seen.add(shape)
        threads = shape[0] * shape[1] * shape[2]
        try:
            occ = occupancy(arch, shape, res.registers_per_thread, res.shared_bytes(threads))
        except InvalidRequestError:
            continue
        if occ.blocks_per_sm >= 1:
            found.append(
                Candidate(shape, threads, occ.occupancy, occ.blocks_per_sm, occ.limited_by)
            )
    if not found:
        raise InvalidRequestError(f"no block shape of this kernel can launch on CC {arch.cc}")
    # registers or shared memory may cap every shape below the threshold: then the threshold
    # applies to the best occupancy this kernel can reach
    bar = min(threshold, max(c.occupancy for c in found) * threshold)
    found = [c for c in found if c.occupancy >= bar - 1e-12]
    sign = -1 if larger_first else 1
    found.sort(key=lambda c: (-c.occupancy, sign * c.threads, -c.block[0]))
    return found
