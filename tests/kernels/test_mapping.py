"""Tiles to launches without a compiler: thread-block shapes, limits, error lines."""

from __future__ import annotations

import pytest

from governor.devices.sim.catalog import board_names
from governor.errors import InvalidRequestError
from governor.kernels import KERNELS, LaunchError, plan_launch, select_kernel_tiles
from governor.kernels.nvrtc import parse_ptxas
from governor.tuning.occupancy import arch_limits


def test_the_a100_gemm_tile_is_not_a_thread_block():
    # EATSS's gemm tile on an A100 covers 16 x 336 = 5376 points; the launch uses 256 threads
    sel = select_kernel_tiles("gemm", "a100-sxm")
    plan = plan_launch("gemm", sel.tiles, arch_limits("8.0"))
    assert sel.tiles["i"] * sel.tiles["j"] > 1024
    assert plan.threads_per_block <= 256
    x, y, z = plan.thread_block
    assert sel.tiles["j"] % x == 0 and sel.tiles["i"] % y == 0 and z == 1
    assert plan.work_per_thread * plan.threads_per_block == sel.tiles["i"] * sel.tiles["j"]


@pytest.mark.parametrize("board", board_names())
def test_every_selected_configuration_fits_the_board_before_compiling(board):
    from governor.kernels import board_arch

    limits = board_arch(board).limits
    for kernel in KERNELS:
        sel = select_kernel_tiles(kernel, board)
        plan = plan_launch(kernel, sel.tiles, limits, None, sel.shared_fraction)
        x, y, z = plan.thread_block
        assert x * y * z <= limits.max_threads_per_block and z <= 64
        assert plan.shared_memory_bytes <= 48 * 1024


def test_boards_without_an_eatss_resource_set_get_ppcg_defaults(monkeypatch):
    # every catalog board has a resource set now; a board without one (a new board's profile)
    # still gets PPCG's default tiles
    monkeypatch.setattr("governor.kernels.select._eatss_resources", lambda board: None)
    sel = select_kernel_tiles("heat-3d", "nano")
    assert sel.selector == "ppcg-default" and sel.tiles == {"i": 32, "j": 32, "k": 32}
    assert sel.note == "no EATSS resource set for nano: PPCG's default tiles (32 per loop)"


def test_a_maxwell_jetson_gets_eatss_tiles_from_its_separate_shared_memory():
    sel = select_kernel_tiles("gemm", "nano")
    assert sel.selector == "eatss" and "EATSS on gemm" in sel.note


def test_heat_3d_falls_back_to_a_smaller_warp_fraction():
    # at warp fraction 1 no heat-3d case fits any board's L1; the selector goes down
    sel = select_kernel_tiles("heat-3d", "agx-orin")
    assert sel.selector == "eatss" and sel.warp_fraction is not None and sel.warp_fraction < 1


def test_a_wavefront_tile_over_the_thread_limit_names_it():
    with pytest.raises(LaunchError, match="2048 threads per block, over the limit of 1024"):
        plan_launch("seidel-2d", {"i": 2048, "j": 8}, arch_limits("5.3"))


def test_staged_shared_memory_over_48_kb_names_it():
    with pytest.raises(LaunchError, match="65536 bytes .* static limit of 49152"):
        plan_launch("gemm", {"i": 128, "j": 64, "k": 64}, arch_limits("9.0"))


def test_tiles_for_the_wrong_loops_are_refused():
    with pytest.raises(InvalidRequestError, match="missing k; unknown x"):
        plan_launch("gemm", {"i": 16, "j": 16, "x": 4}, arch_limits("8.0"))


def test_parse_ptxas_reads_a_real_log():
    log = (
        "ptxas info    : 0 bytes gmem\n"
        "ptxas info    : Compiling entry function 'gemm' for 'sm_80'\n"
        "ptxas info    : Function properties for gemm\n"
        "ptxas         .     16 bytes stack frame, 16 bytes spill stores, 12 bytes spill loads\n"
        "ptxas info    : Used 80 registers, used 1 barriers, 6144 bytes smem, 400 bytes cmem[0]\n"
    )
    assert parse_ptxas(log, "gemm") == {
        "registers_per_thread": 80,
        "shared_memory_bytes": 6144,
        "stack_frame_bytes": 16,
        "spill_store_bytes": 16,
        "spill_load_bytes": 12,
    }
