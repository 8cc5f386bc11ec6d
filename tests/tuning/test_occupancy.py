"""Occupancy against values computed by hand, one or more per compute capability.

Notation in the comments: w = warps per block, rpw = registers per warp =
roundup(regs * 32, 256); register-limited warps = floor((65536 / parts) / rpw) * parts with
parts = 4 (2 on CC 6.0); shared per block = roundup(shared + reserved, unit) with reserved
1024 B and unit 128 B from CC 8.0 (0 B and 256 B before).
"""

from __future__ import annotations

import pytest

from governor.errors import InvalidRequestError
from governor.tuning.occupancy import LIMITS, arch_limits, occupancy, parse_block

# (cc, block, regs, shared, blocks/SM, active warps, occupancy, limited_by)
CASES = [
    # 5.0: w=4; warps 64/4=16; rpw=roundup(640,256)=768 -> floor(16384/768)=21*4=84 warps -> 21;
    # shared roundup(10000,256)=10240 -> 65536/10240=6.4 -> 6 blocks; 6*4=24 warps / 64 = 0.375
    ("5.0", 128, 20, 10000, 6, 24, 24 / 64, "shared"),
    # 5.2: same kernel, 98304/10240 = 9.6 -> 9 blocks; 36/64
    ("5.2", 128, 20, 10000, 9, 36, 36 / 64, "shared"),
    # 5.2: w=32, rpw=roundup(1056,256)=1280 -> floor(16384/1280)=12*4=48 warps -> 1 block; 32/64
    ("5.2", 1024, 33, 0, 1, 32, 0.5, "registers"),
    # 5.3: w=32, rpw=1024; per-block check roundup(32,4)*1024=32768 <= 32K; 64/32=2 by warps and
    # by registers (64 warps/32) -> 2 blocks, 100 %, warps first on a tie
    ("5.3", 1024, 32, 0, 2, 64, 1.0, "warps"),
    # 6.0 (2 parts): w=1, rpw=roundup(6400,256)=6400 -> floor(32768/6400)=5*2=10 warps -> 10 blocks
    ("6.0", 32, 200, 0, 10, 10, 10 / 64, "registers"),
    # 6.1 (4 parts): same kernel floor(16384/6400)=2*4=8 warps -> 8 blocks
    ("6.1", 32, 200, 0, 8, 8, 8 / 64, "registers"),
    # 6.2: w=16, rpw=2048; per-block 16*2048=32768 <= 32K; floor(16384/2048)=8*4=32 warps -> 2 blocks
    ("6.2", 512, 64, 0, 2, 32, 0.5, "registers"),
    # 7.0: w=3; warps floor(64/3)=21 < 32 blocks -> 21 blocks, 63 warps
    ("7.0", 96, 0, 0, 21, 63, 63 / 64, "warps"),
    # 7.2: w=2; shared 49152 (multiple of 256) -> 98304/49152 = 2 blocks, 4 warps
    ("7.2", 64, 0, 49152, 2, 4, 4 / 64, "shared"),
    # 7.5: w=1; warps 32/1=32 but 16 blocks per SM -> 16 warps of 32
    ("7.5", 32, 0, 0, 16, 16, 0.5, "blocks"),
    # 8.0: w=8; warps 64/8=8; shared 20000+1024=21024 -> roundup 128 = 21120 -> 167936/21120=7.95 -> 7
    # (without the 1 KB reserve: 20096 -> 8.36 -> 8 blocks, 100 %)
    ("8.0", 256, 0, 20000, 7, 56, 56 / 64, "shared"),
    # 8.6: w=8; warps 48/8=6; rpw=2048 -> floor(16384/2048)=8*4=32 warps -> 4 blocks; 32/48
    ("8.6", 256, 64, 0, 4, 32, 32 / 48, "registers"),
    # 8.7: w=6; warps 48/6=8; shared 30000+1024=31024 -> 31104 -> 167936/31104=5.4 -> 5; 30/48
    ("8.7", 192, 0, 30000, 5, 30, 30 / 48, "shared"),
    # 8.7: w=6, nothing else binding: 8 blocks, 48 warps, 100 %
    ("8.7", 192, 0, 0, 8, 48, 1.0, "warps"),
    # 8.9: w=1; warps 48 but 24 blocks per SM -> 24 warps of 48
    ("8.9", 32, 0, 0, 24, 24, 0.5, "blocks"),
    # 9.0: w=32, rpw=2048, per-block 32*2048=65536 ok; 32 warps by registers -> 1 block; 32/64
    ("9.0", 1024, 64, 0, 1, 32, 0.5, "registers"),
    # 9.0: w=8, shared 100000+1024=101024 -> roundup 128 = 101120 -> 233472/101120=2.3 -> 2
    ("9.0", 256, 32, 100000, 2, 16, 16 / 64, "shared"),
    # 10.0 (B200): w=1; warps 64 but 32 blocks per SM -> 32 warps of 64
    ("10.0", 32, 0, 0, 32, 32, 0.5, "blocks"),
    # 10.1 (Thor, CUDA 12.x name): w=1; 48 warps but 24 blocks -> 24 of 48
    ("10.1", 32, 0, 0, 24, 24, 0.5, "blocks"),
    # 10.3 (B300): shared 100000+1024 -> 101120 -> 233472/101120 = 2.3 -> 2 blocks of 8 warps
    ("10.3", 256, 32, 100000, 2, 16, 16 / 64, "shared"),
    # 11.0 (Thor): w=6; 48/6 = 8 blocks (under 24): 48 warps, 100 %
    ("11.0", 192, 0, 0, 8, 48, 1.0, "warps"),
    # 12.0 (RTX 50): w=8, rpw=2048 -> floor(16384/2048)=8*4=32 warps -> 4 blocks; 32/48
    ("12.0", 256, 64, 0, 4, 32, 32 / 48, "registers"),
    # 12.1 (GB10): shared 30000+1024=31024 -> 31104 -> 102400/31104 = 3.3 -> 3 blocks; 24/48
    ("12.1", 256, 0, 30000, 3, 24, 24 / 48, "shared"),
]


@pytest.mark.parametrize("cc,block,regs,shared,blocks,warps,occ,limit", CASES)
def test_hand_computed(cc, block, regs, shared, blocks, warps, occ, limit):
    o = occupancy(cc, block, regs, shared)
    assert (o.blocks_per_sm, o.active_warps_per_sm, o.limited_by) == (blocks, warps, limit)
    assert o.occupancy == pytest.approx(occ)


def test_every_listed_cc_has_a_case():
    assert {c[0] for c in CASES} == set(LIMITS)


def test_2d_and_3d_blocks_count_threads_and_round_to_warps():
    # 16x16 = 256 threads = 8 warps on 8.6 at 64 regs: same as the 1-D case above
    assert occupancy("8.6", (16, 16), 64).blocks_per_sm == 4
    # 8x8x4 = 256 threads on 8.6, no register limit: 48/8 = 6 blocks, 100 %
    o = occupancy("8.6", "8x8x4")
    assert (o.threads_per_block, o.blocks_per_sm, o.occupancy) == (256, 6, 1.0)
    # 10x10 = 100 threads -> 4 warps (rounded up); 8.0: 64/4 = 16 blocks, 64 warps
    o = occupancy("8.0", "10x10")
    assert (o.warps_per_block, o.blocks_per_sm, o.active_warps_per_sm) == (4, 16, 64)


def test_register_limit_per_block_on_jetson_53_and_62():
    # 1024 threads at 33 regs: rpw 1280 * 32 warps = 40960 > 32768 (the 5.3/6.2 per-block limit)
    for cc in ("5.3", "6.2"):
        with pytest.raises(InvalidRequestError, match="registers"):
            occupancy(cc, 1024, 33)
    assert occupancy("5.2", 1024, 33).blocks_per_sm == 1


@pytest.mark.parametrize(
    "cc,block,regs,shared,match",
    [
        ("8.6", 0, 0, 0, "positive"),
        ("8.6", 1025, 0, 0, "1024"),
        ("8.6", (1, 1, 65), 0, 0, "z=65"),
        ("8.6", "2x2x2x2", 0, 0, "1 to 3"),
        ("8.6", 256, 256, 0, "255"),
        ("8.6", 256, -1, 0, "negative"),
        ("5.2", 256, 0, 49153, "shared"),
        ("4.0", 256, 0, 0, "compute capability"),
        ("8.6", "abc", 0, 0, "block shape"),
    ],
)
def test_bad_requests_raise_one_line_errors(cc, block, regs, shared, match):
    with pytest.raises(InvalidRequestError, match=match) as err:
        occupancy(cc, block, regs, shared)
    assert "\n" not in str(err.value)


def test_parse_and_lookup_helpers():
    assert parse_block("16x8") == (16, 8, 1)
    assert parse_block([4, 4, 4]) == (4, 4, 4)
    assert arch_limits("8").cc == "8.0"
    assert arch_limits(8.6).max_warps_per_sm == 48
