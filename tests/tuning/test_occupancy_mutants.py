"""Occupancy checks written to kill mutants of governor/tuning/occupancy.py (docs/mutation.md).

Limits come from the CUDA C++ Programming Guide's table of technical specifications per
compute capability; occupancies are worked out by hand in the comments (the CUDA occupancy
calculator's rules: registers allocated per warp in units of 256, warps rounded to the
sub-partition count, shared memory per block plus 1 KB reserved on 8.x+ in 128-byte units).
"""

from __future__ import annotations

import pytest

from governor.errors import InvalidRequestError
from governor.tuning.occupancy import (
    WARP_SIZE,
    arch_limits,
    block_threads,
    occupancy,
    parse_block,
    supported_ccs,
)

KB = 1024
# cc: (threads per SM, blocks per SM, shared per SM, max shared per block, regs per block)
GUIDE = {
    "5.0": (2048, 32, 64 * KB, 48 * KB, 65536),
    "5.2": (2048, 32, 96 * KB, 48 * KB, 65536),
    "5.3": (2048, 32, 64 * KB, 48 * KB, 32768),
    "6.0": (2048, 32, 64 * KB, 48 * KB, 65536),
    "6.1": (2048, 32, 96 * KB, 48 * KB, 65536),
    "6.2": (2048, 32, 64 * KB, 48 * KB, 32768),
    "7.0": (2048, 32, 96 * KB, 96 * KB, 65536),
    "7.2": (2048, 32, 96 * KB, 96 * KB, 65536),
    "7.5": (1024, 16, 64 * KB, 64 * KB, 65536),
    "8.0": (2048, 32, 164 * KB, 163 * KB, 65536),
    "8.6": (1536, 16, 100 * KB, 99 * KB, 65536),
    "8.7": (1536, 16, 164 * KB, 163 * KB, 65536),
    "8.9": (1536, 24, 100 * KB, 99 * KB, 65536),
    "9.0": (2048, 32, 228 * KB, 227 * KB, 65536),
    "10.0": (2048, 32, 228 * KB, 227 * KB, 65536),
    "10.3": (2048, 32, 228 * KB, 227 * KB, 65536),
}


@pytest.mark.parametrize("cc", sorted(GUIDE))
def test_limits_match_the_programming_guide(cc):
    a = arch_limits(cc)
    threads, blocks, shared_sm, shared_block, regs_block = GUIDE[cc]
    assert (a.max_threads_per_sm, a.max_blocks_per_sm) == (threads, blocks)
    assert (a.shared_per_sm_bytes, a.max_shared_per_block_bytes) == (shared_sm, shared_block)
    assert (a.regs_per_sm, a.max_regs_per_block) == (65536, regs_block)
    assert a.max_threads_per_block == 1024 and a.reg_unit == 256
    assert a.max_warps_per_sm == threads // 32
    major = int(cc.split(".")[0])
    assert a.reserved_shared_per_block_bytes == (KB if major >= 8 else 0)
    assert a.shared_unit_bytes == (128 if major >= 8 else 256)
    assert a.sub_partitions == (2 if cc == "6.0" else 4)
    # the whole SM's shared memory fits in one block at most
    occ = occupancy(cc, 32, 0, shared_block)
    assert occ.blocks_per_sm >= 1


def test_known_capabilities_and_spellings():
    ccs = supported_ccs()
    assert isinstance(ccs, tuple) and set(GUIDE) <= set(ccs)
    assert arch_limits("9").cc == "9.0"
    assert arch_limits(8.6).cc == "8.6"
    assert arch_limits(" 8.6 ").cc == "8.6"
    for bad in ["4.0", "8.6.1", "x"]:
        with pytest.raises(InvalidRequestError, match="unsupported compute capability"):
            arch_limits(bad)


def test_parse_block_shapes_and_limits():
    assert WARP_SIZE == 32
    assert parse_block(256) == (256, 1, 1)
    assert parse_block("16x16") == (16, 16, 1)
    assert parse_block("8,8,4") == (8, 8, 4)
    assert parse_block((4, 4)) == (4, 4, 1)
    assert parse_block((1024, 1, 1)) == (1024, 1, 1)
    assert parse_block((1, 1024, 1)) == (1, 1024, 1)
    assert parse_block((1, 1, 64)) == (1, 1, 64)
    assert block_threads("8x8x4") == 256
    for bad in [0, "0x4", (1025,), (1, 1025), (1, 1, 65), "axb", True, (1, 1, 1, 1), (), None]:
        with pytest.raises(InvalidRequestError):
            parse_block(bad)


def test_register_limited_block_with_allocation_rounding():
    # 9.0, 64 threads = 2 warps, 37 regs: 37*32 = 1184 -> 1280 per warp;
    # 65536/4 = 16384 per sub-partition // 1280 = 12 warps, x4 = 48 warps -> 24 blocks
    # (without the rounding it would be 13*4 = 52 warps -> 26 blocks)
    occ = occupancy("9.0", 64, 37)
    assert occ.blocks_per_sm == 24 and occ.active_warps_per_sm == 48
    assert occ.occupancy == pytest.approx(48 / 64)
    assert occ.limited_by == "registers"
    assert dict(occ.limits) == {"warps": 32, "registers": 24, "shared": 32, "blocks": 32}


def test_register_exact_fit_on_8_6():
    # 256 threads = 8 warps at 64 regs: 2048 per warp; 16384 // 2048 = 8 -> 32 warps -> 4 blocks
    occ = occupancy("8.6", 256, 64)
    assert (occ.blocks_per_sm, occ.warps_per_block, occ.threads_per_block) == (4, 8, 256)
    assert occ.occupancy == pytest.approx(32 / 48) and occ.limited_by == "registers"


def test_shared_limited_block_counts_the_reserved_kilobyte():
    # 8.6, one warp, 10000 B: 10000 + 1024 = 11024 -> 11136 (128 B units);
    # 102400 // 11136 = 9 blocks (without the reserved 1 KB: 10112 -> 10 blocks)
    occ = occupancy("8.6", 32, 0, 10000)
    assert occ.blocks_per_sm == 9 and occ.limited_by == "shared"
    assert occ.occupancy == pytest.approx(9 / 48)
    # 7.5 has no reserve and 256 B units: 10000 -> 10240; 65536 // 10240 = 6
    assert occupancy("7.5", 32, 0, 10000).blocks_per_sm == 6


def test_limited_by_blocks_and_warps_and_partial_warps():
    occ = occupancy("7.5", 32)  # 32 warps allowed, but only 16 blocks
    assert (occ.blocks_per_sm, occ.limited_by, occ.occupancy) == (16, "blocks", 0.5)
    occ = occupancy("8.6", 1024)  # 32 warps per block, 48 per SM -> one block
    assert (occ.blocks_per_sm, occ.limited_by) == (1, "warps")
    assert occ.occupancy == pytest.approx(32 / 48)
    occ = occupancy("8.6", 33)  # 33 threads take 2 warps
    assert occ.warps_per_block == 2


def test_per_block_register_limit_counts_warps_in_sub_partition_units():
    # 5.3 allows 32768 registers per block. 800 threads = 25 warps at 40 regs (1280/warp):
    # 25*1280 = 32000 fits, but warps are allocated 4 at a time: 28*1280 = 35840 does not
    with pytest.raises(InvalidRequestError, match="registers a block may use"):
        occupancy("5.3", 800, 40)
    # 1024 threads at 32 regs: 32 warps * 1024 = 32768, exactly the limit
    assert occupancy("5.3", 1024, 32).blocks_per_sm == 2


def test_request_limits_are_inclusive():
    assert occupancy("8.6", 32, 255).blocks_per_sm >= 1
    with pytest.raises(InvalidRequestError, match="registers per thread"):
        occupancy("8.6", 32, 256)
    assert occupancy("8.6", 32, 0, 99 * KB).blocks_per_sm == 1
    with pytest.raises(InvalidRequestError, match="shared memory"):
        occupancy("8.6", 32, 0, 99 * KB + 1)
    with pytest.raises(InvalidRequestError, match="threads per block"):
        occupancy("8.6", (32, 33))
    for bad in [-1, 1.5, True, "8"]:
        with pytest.raises(InvalidRequestError):
            occupancy("8.6", 32, bad)
    assert occupancy("8.6", 32, None, None).blocks_per_sm == 16
    assert occupancy("8.6", 32, 32.0).blocks_per_sm == 16


def test_to_dict_keys():
    doc = occupancy("8.6", (16, 16), 64).to_dict()
    assert doc == {
        "compute_capability": "8.6",
        "threads_per_block": 256,
        "blocks_per_sm": 4,
        "active_warps_per_sm": 32,
        "occupancy": pytest.approx(32 / 48),
        "limited_by": "registers",
        "block": [16, 16, 1],
        "warps_per_block": 8,
        "blocks_per_sm_by_limit": {"warps": 6, "registers": 4, "shared": 16, "blocks": 16},
    }
    assert occupancy(arch_limits("8.6"), 256).compute_capability == "8.6"


def test_limits_are_frozen_whole_numbers():
    import dataclasses

    a = arch_limits("8.6")
    assert type(a.max_warps_per_sm) is int
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.max_threads_per_sm = 1  # type: ignore[misc]


def test_one_byte_of_shared_memory_counts_as_used():
    # 1 B + 1 KB reserved -> 1152 B (128 B units); 102400 // 1152 = 88 blocks by shared
    occ = occupancy("8.6", 32, 0, 1)
    assert dict(occ.limits)["shared"] == 88
    assert occ.limited_by == "blocks" and occ.blocks_per_sm == 16


def test_one_register_counts_as_used():
    # 1 reg: 32 per warp -> 256 (unit); 16384 // 256 = 64 warps per sub-partition x4 = 256
    occ = occupancy("8.6", 32, 1)
    assert dict(occ.limits)["registers"] == 256
    assert occ.limited_by == "blocks"
