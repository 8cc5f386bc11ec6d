"""Theoretical occupancy of a thread block, per compute capability (CC 5.0 to 12.1).

How many blocks of a kernel fit on one streaming multiprocessor (SM) at once, and what share
of the SM's warp slots they fill. Four limits, as the CUDA occupancy calculator applies them:

- ``warps``:     ⌊max warps per SM / warps per block⌋
- ``registers``: registers are given to warps in units of 256 (``regs_per_warp =
  roundup(regs_per_thread · 32, 256)``); the register file is split between the SM's
  sub-partitions (4 warp schedulers; 2 on CC 6.0), so ``warps = ⌊(regs_per_SM / parts) /
  regs_per_warp⌋ · parts``, and ``blocks = ⌊warps / warps per block⌋``. A block whose warps,
  rounded up to the warp allocation granularity (= parts), need more than the per-block
  register limit cannot launch at all.
- ``shared``:    ``⌊shared_per_SM / roundup(shared_per_block + reserved, unit)⌋`` with the
  allocation unit 256 B up to CC 7.x and 128 B from CC 8.0, and 1 KB per block reserved by
  the driver from CC 8.0 on. A block that needs no shared memory is not limited by it.
- ``blocks``:    the hardware's resident-block limit per SM.

Occupancy = blocks · warps per block / max warps per SM. Numbers are the public per-CC
limits (CUDA programming guide; ../shared/data/boards.md); the shared memory per SM is the
largest carveout, which is what the calculator assumes without a carveout preference.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Dict, Iterable, Optional, Sequence, Tuple, Union

from governor.errors import InvalidRequestError

__all__ = [
    "LIMITS",
    "WARP_SIZE",
    "ArchLimits",
    "Occupancy",
    "arch_limits",
    "block_threads",
    "occupancy",
    "parse_block",
    "supported_ccs",
]

WARP_SIZE = 32
MAX_REGISTERS_PER_THREAD = 255
MAX_BLOCK_DIMS = (1024, 1024, 64)

BlockLike = Union[int, Sequence[int], str]


@dataclass(frozen=True)
class ArchLimits:
    """Per-SM limits of one compute capability (counts; bytes for shared memory)."""

    cc: str
    max_threads_per_sm: int
    max_blocks_per_sm: int
    regs_per_sm: int = 65536
    max_regs_per_block: int = 65536
    shared_per_sm_bytes: int = 98304
    max_shared_per_block_bytes: int = 49152  # opt-in maximum (48 KB without opt-in)
    reserved_shared_per_block_bytes: int = 0
    shared_unit_bytes: int = 256
    reg_unit: int = 256
    sub_partitions: int = 4  # also the warp allocation granularity of the per-block check
    max_threads_per_block: int = 1024

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // WARP_SIZE


_KB = 1024


def _limits() -> Dict[str, ArchLimits]:
    table = [
        ArchLimits("5.0", 2048, 32, shared_per_sm_bytes=64 * _KB),
        ArchLimits("5.2", 2048, 32, shared_per_sm_bytes=96 * _KB),
        ArchLimits("5.3", 2048, 32, max_regs_per_block=32768, shared_per_sm_bytes=64 * _KB),
        ArchLimits("6.0", 2048, 32, shared_per_sm_bytes=64 * _KB, sub_partitions=2),
        ArchLimits("6.1", 2048, 32, shared_per_sm_bytes=96 * _KB),
        ArchLimits("6.2", 2048, 32, max_regs_per_block=32768, shared_per_sm_bytes=64 * _KB),
        ArchLimits(
            "7.0", 2048, 32, shared_per_sm_bytes=96 * _KB, max_shared_per_block_bytes=96 * _KB
        ),
        ArchLimits(
            "7.2", 2048, 32, shared_per_sm_bytes=96 * _KB, max_shared_per_block_bytes=96 * _KB
        ),
        ArchLimits(
            "7.5", 1024, 16, shared_per_sm_bytes=64 * _KB, max_shared_per_block_bytes=64 * _KB
        ),
    ]
    ampere_plus = dict(reserved_shared_per_block_bytes=_KB, shared_unit_bytes=128)
    table += [
        ArchLimits(
            "8.0",
            2048,
            32,
            shared_per_sm_bytes=164 * _KB,
            max_shared_per_block_bytes=163 * _KB,
            **ampere_plus,
        ),
        ArchLimits(
            "8.6",
            1536,
            16,
            shared_per_sm_bytes=100 * _KB,
            max_shared_per_block_bytes=99 * _KB,
            **ampere_plus,
        ),
        ArchLimits(
            "8.7",
            1536,
            16,
            shared_per_sm_bytes=164 * _KB,
            max_shared_per_block_bytes=163 * _KB,
            **ampere_plus,
        ),
        ArchLimits(
            "8.9",
            1536,
            24,
            shared_per_sm_bytes=100 * _KB,
            max_shared_per_block_bytes=99 * _KB,
            **ampere_plus,
        ),
        ArchLimits(
            "9.0",
            2048,
            32,
            shared_per_sm_bytes=228 * _KB,
            max_shared_per_block_bytes=227 * _KB,
            **ampere_plus,
        ),
    ]
    # Blackwell. Datacenter (10.0 B200/GB200, 10.3 B300) keeps Hopper's SM; Thor (11.0, called
    # 10.1 before CUDA 13) and the RTX parts (12.0, 12.1 GB10) hold 1536 threads in 24 blocks.
    # NVIDIA's per-architecture traits in CCCL (cuda/__device/arch_traits.h) list these.
    blackwell = dict(max_shared_per_block_bytes=227 * _KB, **ampere_plus)
    table += [
        ArchLimits("10.0", 2048, 32, shared_per_sm_bytes=228 * _KB, **blackwell),
        ArchLimits("10.1", 1536, 24, shared_per_sm_bytes=228 * _KB, **blackwell),
        ArchLimits("10.3", 2048, 32, shared_per_sm_bytes=228 * _KB, **blackwell),
        ArchLimits("11.0", 1536, 24, shared_per_sm_bytes=228 * _KB, **blackwell),
    ]
    rtx_blackwell = dict(max_shared_per_block_bytes=99 * _KB, **ampere_plus)
    table += [
        ArchLimits("12.0", 1536, 24, shared_per_sm_bytes=100 * _KB, **rtx_blackwell),
        ArchLimits("12.1", 1536, 24, shared_per_sm_bytes=100 * _KB, **rtx_blackwell),
    ]
    return {a.cc: a for a in table}


#: compute capability "X.Y" -> its limits
LIMITS: Dict[str, ArchLimits] = _limits()


def supported_ccs() -> Tuple[str, ...]:
    return tuple(LIMITS)


def arch_limits(cc: Union[str, float]) -> ArchLimits:
    """The limits of compute capability ``cc`` ("8.6", 8.6).

    Raises:
        InvalidRequestError: unknown or unsupported compute capability.
    """
    text = str(cc).strip()
    if re.fullmatch(r"\d+", text):
        text += ".0"
    if text not in LIMITS:
        raise InvalidRequestError(
            f"unsupported compute capability {cc!r}; known: {', '.join(LIMITS)}"
        )
    return LIMITS[text]


def parse_block(block: object) -> Tuple[int, int, int]:
    """A block shape as ``(x, y, z)`` from 256, (16, 16), "16x16" or "8,8,4" (a
    :data:`BlockLike`; anything else is refused).

    Raises:
        InvalidRequestError: not positive integers, more than 3 dimensions, or a dimension
            above CUDA's limits (1024, 1024, 64).
    """
    if isinstance(block, str):
        parts = [p for p in re.split(r"[x×,*\s]+", block.strip()) if p]
        try:
            dims = [int(p) for p in parts]
        except ValueError:
            raise InvalidRequestError(
                f"invalid block shape {block!r}; use N, XxY or XxYxZ"
            ) from None
    elif isinstance(block, int) and not isinstance(block, bool):
        dims = [block]
    elif isinstance(block, Iterable):
        try:
            dims = [int(d) for d in block]
        except (TypeError, ValueError):
            raise InvalidRequestError(f"invalid block shape {block!r}") from None
    else:
        raise InvalidRequestError(f"invalid block shape {block!r}")
    if not 1 <= len(dims) <= 3:
        raise InvalidRequestError(f"a block has 1 to 3 dimensions, not {len(dims)} ({block!r})")
    if any(d < 1 for d in dims):
        raise InvalidRequestError(f"block dimensions must be positive, not {block!r}")
    dims += [1] * (3 - len(dims))
    for d, top, name in zip(dims, MAX_BLOCK_DIMS, "xyz"):
        if d > top:
            raise InvalidRequestError(f"block dimension {name}={d} exceeds CUDA's limit of {top}")
    return (dims[0], dims[1], dims[2])


def block_threads(block: BlockLike) -> int:
    x, y, z = parse_block(block)
    return x * y * z


@dataclass(frozen=True)
class Occupancy:
    """Theoretical occupancy of one block shape on one SM."""

    compute_capability: str
    block: Tuple[int, int, int]
    threads_per_block: int
    warps_per_block: int
    blocks_per_sm: int
    active_warps_per_sm: int
    occupancy: float
    limited_by: str  # "warps" | "registers" | "shared" | "blocks"
    limits: Tuple[Tuple[str, int], ...]  # blocks allowed by each limit

    def to_dict(self) -> Dict[str, object]:
        """The keys of ``governor occupancy --json`` (specs/cli-json.md), and a few more."""
        return {
            "compute_capability": self.compute_capability,
            "threads_per_block": self.threads_per_block,
            "blocks_per_sm": self.blocks_per_sm,
            "active_warps_per_sm": self.active_warps_per_sm,
            "occupancy": self.occupancy,
            "limited_by": self.limited_by,
            "block": list(self.block),
            "warps_per_block": self.warps_per_block,
            "blocks_per_sm_by_limit": dict(self.limits),
        }


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def occupancy(
    cc: Union[str, float, ArchLimits],
    block: BlockLike,
    registers_per_thread: int = 0,
    shared_bytes_per_block: int = 0,
) -> Occupancy:
    """Blocks per SM and occupancy (0–1] of ``block`` threads using ``registers_per_thread``
    registers and ``shared_bytes_per_block`` bytes of shared memory (static + dynamic).

    ``limited_by`` names the limit that gives the fewest blocks; on a tie the first of
    warps, registers, shared, blocks.

    Raises:
        InvalidRequestError: unknown CC, bad block shape, more than 1024 threads, more than
            255 registers, more shared memory than a block may have, or a block whose
            registers exceed the per-block limit (it could not launch).
    """
    arch = cc if isinstance(cc, ArchLimits) else arch_limits(cc)
    shape = parse_block(block)
    threads = shape[0] * shape[1] * shape[2]
    if threads > arch.max_threads_per_block:
        raise InvalidRequestError(
            f"{threads} threads per block exceeds the limit of {arch.max_threads_per_block}"
        )
    regs = _count(registers_per_thread, "registers per thread")
    if regs > MAX_REGISTERS_PER_THREAD:
        raise InvalidRequestError(
            f"{regs} registers per thread exceeds the limit of {MAX_REGISTERS_PER_THREAD}"
        )
    shared = _count(shared_bytes_per_block, "shared memory per block")
    if shared > arch.max_shared_per_block_bytes:
        raise InvalidRequestError(
            f"{shared} bytes of shared memory per block exceeds the limit of "
            f"{arch.max_shared_per_block_bytes} on CC {arch.cc}"
        )
    warps = math.ceil(threads / WARP_SIZE)

    by_warps = arch.max_warps_per_sm // warps
    if regs > 0:
        regs_per_warp = _round_up(regs * WARP_SIZE, arch.reg_unit)
        if _round_up(warps, arch.sub_partitions) * regs_per_warp > arch.max_regs_per_block:
            raise InvalidRequestError(
                f"a block of {threads} threads at {regs} registers each needs more than the "
                f"{arch.max_regs_per_block} registers a block may use on CC {arch.cc}"
            )
        warps_by_regs = (
            arch.regs_per_sm // arch.sub_partitions // regs_per_warp
        ) * arch.sub_partitions
        by_regs = warps_by_regs // warps
    else:
        by_regs = arch.max_blocks_per_sm
    if shared > 0:
        per_block = _round_up(shared + arch.reserved_shared_per_block_bytes, arch.shared_unit_bytes)
        by_shared = arch.shared_per_sm_bytes // per_block
    else:
        by_shared = arch.max_blocks_per_sm
    by_blocks = arch.max_blocks_per_sm
    limits = (
        ("warps", by_warps),
        ("registers", by_regs),
        ("shared", by_shared),
        ("blocks", by_blocks),
    )
    blocks = min(n for _, n in limits)
    unused = {"registers": regs == 0, "shared": shared == 0}  # a resource not used limits nothing
    limited_by = next(name for name, n in limits if n == blocks and not unused.get(name, False))
    active = blocks * warps
    return Occupancy(
        compute_capability=arch.cc,
        block=shape,
        threads_per_block=threads,
        warps_per_block=warps,
        blocks_per_sm=blocks,
        active_warps_per_sm=active,
        occupancy=active / arch.max_warps_per_sm,
        limited_by=limited_by,
        limits=limits,
    )


def _count(value: Optional[int], what: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise InvalidRequestError(f"{what} must be a whole number, not {value!r}")
    if value < 0:
        raise InvalidRequestError(f"{what} must not be negative, not {value!r}")
    return int(value)
