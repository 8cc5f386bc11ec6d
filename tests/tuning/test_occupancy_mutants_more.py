"""governor.tuning.occupancy against cases worked out by hand and the CUDA guide's tables.

Written to kill the mutants scripts/mutation.py reports (docs/mutation.md). Each expected
figure is derived in the comment beside it from the occupancy rules in the module docstring.
"""

import pytest

from governor.errors import InvalidRequestError
from governor.tuning import occupancy as oc

_K = 1024
# CUDA C++ Programming Guide, "Technical Specifications per Compute Capability":
# cc: (threads/SM, blocks/SM, shared/SM KB, max shared/block KB, regs/block, sub-partitions)
GUIDE = {
    "5.0": (2048, 32, 64, 48, 65536, 4),
    "5.2": (2048, 32, 96, 48, 65536, 4),
    "5.3": (2048, 32, 64, 48, 32768, 4),
    "6.0": (2048, 32, 64, 48, 65536, 2),
    "6.1": (2048, 32, 96, 48, 65536, 4),
    "6.2": (2048, 32, 64, 48, 32768, 4),
    "7.0": (2048, 32, 96, 96, 65536, 4),
    "7.2": (2048, 32, 96, 96, 65536, 4),
    "7.5": (1024, 16, 64, 64, 65536, 4),
    "8.0": (2048, 32, 164, 163, 65536, 4),
    "8.6": (1536, 16, 100, 99, 65536, 4),
    "8.7": (1536, 16, 164, 163, 65536, 4),
    "8.9": (1536, 24, 100, 99, 65536, 4),
    "9.0": (2048, 32, 228, 227, 65536, 4),
    "10.0": (2048, 32, 228, 227, 65536, 4),
    "10.1": (1536, 24, 228, 227, 65536, 4),
    "10.3": (2048, 32, 228, 227, 65536, 4),
    "11.0": (1536, 24, 228, 227, 65536, 4),
    "12.0": (1536, 24, 100, 99, 65536, 4),
    "12.1": (1536, 24, 100, 99, 65536, 4),
}


@pytest.mark.parametrize("cc", sorted(GUIDE))
def test_limits_match_the_guide(cc):
    threads, blocks, smem_kb, block_smem_kb, regs_block, parts = GUIDE[cc]
    a = oc.arch_limits(cc)
    assert a.cc == cc
    assert (a.max_threads_per_sm, a.max_blocks_per_sm) == (threads, blocks)
    assert a.max_warps_per_sm == threads // 32
    assert a.shared_per_sm_bytes == smem_kb * _K
    assert a.max_shared_per_block_bytes == block_smem_kb * _K
    assert a.max_regs_per_block == regs_block and a.regs_per_sm == 65536
    assert a.sub_partitions == parts and a.reg_unit == 256
    assert a.max_threads_per_block == 1024
    ampere = float(cc) >= 8.0
    assert a.reserved_shared_per_block_bytes == (1024 if ampere else 0)
    assert a.shared_unit_bytes == (128 if ampere else 256)


def test_supported_and_spelled_ccs():
    assert oc.supported_ccs() == tuple(GUIDE)
    assert oc.arch_limits("8").cc == "8.0"
    assert oc.arch_limits(8.6).cc == "8.6"
    assert oc.arch_limits(" 7.5 ").cc == "7.5"
    with pytest.raises(InvalidRequestError, match="unsupported compute capability '9.9'"):
        oc.arch_limits("9.9")


def test_parse_block_shapes_and_refusals():
    assert oc.parse_block(256) == (256, 1, 1)
    assert oc.parse_block("16x16") == (16, 16, 1)
    assert oc.parse_block(" 8,8,4 ") == (8, 8, 4)
    assert oc.parse_block((2, 3)) == (2, 3, 1)
    assert oc.parse_block((1024, 1, 1)) == (1024, 1, 1)
    assert oc.parse_block((1, 1024, 64)) == (1, 1024, 64)
    assert oc.block_threads("8x8x4") == 256
    for bad, match in [
        ("", "1 to 3 dimensions, not 0"),
        ("1x1x1x1", "not 4"),
        ("0x4", "must be positive"),
        ((4, -1), "must be positive"),
        ("1025", "x=1025 exceeds CUDA's limit of 1024"),
        ((1, 1025), "y=1025 exceeds"),
        ((1, 1, 65), "z=65 exceeds CUDA's limit of 64"),
        ("abc", "invalid block shape 'abc'"),
        (True, "invalid block shape True"),
        (None, "invalid block shape None"),
    ]:
        with pytest.raises(InvalidRequestError, match=match):
            oc.parse_block(bad)


def test_warp_limited_block():
    # CC 8.6, 256 threads = 8 warps, 32 regs: warps 48 // 8 = 6; regs: 32*32 = 1024 per warp,
    # 16384 // 1024 = 16 per part * 4 = 64 warps -> 8 blocks; shared unused -> 16; blocks 16
    o = oc.occupancy("8.6", 256, 32)
    assert o.warps_per_block == 8 and o.threads_per_block == 256
    assert dict(o.limits) == {"warps": 6, "registers": 8, "shared": 16, "blocks": 16}
    assert (o.blocks_per_sm, o.active_warps_per_sm, o.limited_by) == (6, 48, "warps")
    assert o.occupancy == 1.0
    d = o.to_dict()
    assert d["blocks_per_sm_by_limit"] == dict(o.limits) and d["block"] == [256, 1, 1]
    assert d["occupancy"] == 1.0 and d["limited_by"] == "warps" and d["warps_per_block"] == 8
    assert d["compute_capability"] == "8.6" and d["threads_per_block"] == 256
    assert d["blocks_per_sm"] == 6 and d["active_warps_per_sm"] == 48


def test_register_limited_blocks():
    # CC 8.0, 128 threads = 4 warps, 64 regs: 2048 per warp, 16384 // 2048 = 8 * 4 = 32
    # warps -> 8 blocks (warps allow 16): 32 warps of 64 -> 0.5
    o = oc.occupancy("8.0", 128, 64)
    assert (o.blocks_per_sm, o.limited_by, o.occupancy) == (8, "registers", 0.5)
    # 40 regs: 1280 per warp; 16384 // 1280 = 12 per part -> 48 warps (not 65536 // 1280 = 51)
    # 64 threads = 2 warps -> 24 blocks; 48 / 64 = 0.75
    o = oc.occupancy("8.0", 64, 40)
    assert dict(o.limits)["registers"] == 24
    assert (o.blocks_per_sm, o.limited_by, o.occupancy) == (24, "registers", 0.75)
    # 33 regs: 33*32 = 1056 rounds up to 1280 per warp: the same 24
    assert dict(oc.occupancy("8.0", 64, 33).limits)["registers"] == 24


def test_per_block_register_limit():
    # CC 8.0, 1024 threads at 64 regs: 32 warps * 2048 = 65536 = the limit: fits
    assert oc.occupancy("8.0", 1024, 64).blocks_per_sm == 1
    with pytest.raises(InvalidRequestError, match="more than the 65536 registers"):
        oc.occupancy("8.0", 1024, 65)
    # CC 5.3 (32768 per block): 5 warps at 200 regs (6400 per warp) = 32000 fits, but the
    # warps are allocated in 4s: 8 * 6400 = 51200 does not
    with pytest.raises(InvalidRequestError, match="on CC 5.3"):
        oc.occupancy("5.3", 160, 200)
    assert oc.occupancy("5.3", 128, 200).blocks_per_sm >= 1  # 4 warps * 6400 = 25600


def test_shared_memory_limited_blocks():
    # CC 8.0: 20000 + 1024 reserved = 21024 -> 21120 (165 * 128); 167936 // 21120 = 7
    o = oc.occupancy("8.0", 128, 0, 20000)
    assert dict(o.limits)["shared"] == 7
    assert (o.blocks_per_sm, o.limited_by, o.occupancy) == (7, "shared", 28 / 64)
    # CC 7.5: no reserve, 256 B unit: 10000 -> 10240; 65536 // 10240 = 6; 12 of 32 warps
    o = oc.occupancy("7.5", 64, 0, 10000)
    assert (o.blocks_per_sm, o.limited_by, o.occupancy) == (6, "shared", 0.375)
    # exactly a unit: 7.5, 8192 B -> 8 blocks (no rounding up past it)
    assert dict(oc.occupancy("7.5", 32, 0, 8192).limits)["shared"] == 8


def test_block_count_limit_and_unused_resources_on_a_tie():
    # CC 8.6, 1 warp: warps 48, registers and shared unused (16 each), blocks 16
    o = oc.occupancy("8.6", 32)
    assert (o.blocks_per_sm, o.limited_by) == (16, "blocks")
    assert o.occupancy == pytest.approx(16 / 48, rel=1e-12)
    # 33 threads are 2 warps
    assert oc.occupancy("8.6", 33).warps_per_block == 2
    # tie between used limits: the first wins. CC 8.0, 256 threads (8 warps), 32 regs:
    # warps 64 // 8 = 8, registers 64 warps // 8 = 8 -> "warps"
    assert oc.occupancy("8.0", 256, 32).limited_by == "warps"
    # used registers that do not bind: CC 8.6, 1 warp at 96 regs: 3072 per warp,
    # 16384 // 3072 = 5 per part * 4 = 20 warps -> 20 blocks; the 16-block limit binds
    assert oc.occupancy("8.6", 32, 96).limited_by == "blocks"


def test_request_limits():
    assert oc.occupancy("8.0", (32, 32)).threads_per_block == 1024
    with pytest.raises(InvalidRequestError, match="2048 threads per block exceeds the limit"):
        oc.occupancy("8.0", (1024, 2))
    assert oc.occupancy("8.0", 32, 255).blocks_per_sm >= 1
    with pytest.raises(InvalidRequestError, match="256 registers per thread exceeds"):
        oc.occupancy("8.0", 32, 256)
    assert oc.occupancy("8.6", 32, 0, 99 * _K).blocks_per_sm == 1  # 100 KB // 100 KB
    with pytest.raises(InvalidRequestError, match="101377 bytes of shared memory"):
        oc.occupancy("8.6", 32, 0, 99 * _K + 1)
    assert oc.occupancy("8.0", 32, None, None).blocks_per_sm == 32
    assert oc.occupancy("8.0", 32, 2.0).blocks_per_sm == 32
    assert oc.occupancy(oc.arch_limits("8.0"), 32).compute_capability == "8.0"
    for bad, match in [(True, "whole number"), (1.5, "whole number"), ("4", "whole number")]:
        with pytest.raises(InvalidRequestError, match=match):
            oc.occupancy("8.0", 32, bad)
    with pytest.raises(InvalidRequestError, match="must not be negative, not -1"):
        oc.occupancy("8.0", 32, -1)
    with pytest.raises(InvalidRequestError, match="shared memory per block must not be neg"):
        oc.occupancy("8.0", 32, 0, -4)


def test_register_limit_from_one_register_and_when_unused():
    # 1 register: 32 per warp rounds up to 256; 16384 // 256 = 64 per part * 4 = 256 warps
    assert dict(oc.occupancy("8.6", 32, 1).limits)["registers"] == 256
    # no registers given: the limit is the block limit (16 on CC 8.6), it limits nothing
    o = oc.occupancy("8.6", 32)
    assert dict(o.limits)["registers"] == 16 and o.limited_by == "blocks"
