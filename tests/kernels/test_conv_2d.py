"""conv-2d, the library's fifth kernel, added as one module (governor/kernels/library/
conv_2d.py): the library finds it, the selector tiles it, NVRTC compiles it within every
board's limits, and its real CUDA C matches the NumPy reference on the CPU emulation."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from fakes.cuda_cpu import CpuCupy, build

from governor.devices.sim.catalog import board_names
from governor.kernels import KERNELS, kernel_source, plan_launch, select_kernel_tiles
from governor.kernels.cupy_run import run_kernel
from governor.kernels.operating_points import candidate_plans
from governor.tuning.occupancy import arch_limits


def test_the_library_finds_conv_2d_and_the_selector_tiles_it():
    conv = KERNELS["conv-2d"]
    assert conv.loops == ("c", "h", "w", "kh", "kw") and conv.eatss_kernel == "conv-2d"
    sel = select_kernel_tiles("conv-2d", "agx-orin")
    assert sel.selector == "eatss" and set(sel.tiles) == set(conv.loops)
    plan = plan_launch("conv-2d", sel.tiles, arch_limits("8.7"), None, 0.0, "single")
    assert plan.shared_memory_bytes == 4 * sel.tiles["kh"] * sel.tiles["kw"]


def test_the_reference_is_a_zero_padded_depthwise_convolution():
    rng = np.random.default_rng(0)
    image, filters = rng.standard_normal((2, 5, 6)), rng.standard_normal((2, 3, 3))
    got = KERNELS["conv-2d"].reference(image, filters, np.zeros_like(image))
    c, h, w = 1, 0, 5  # a corner: only the in-image part of the window counts
    want = sum(
        image[c, h + r - 1, w + q - 1] * filters[c, r, q]
        for r in range(3)
        for q in range(3)
        if 0 <= h + r - 1 < 5 and 0 <= w + q - 1 < 6
    )
    assert got[c, h, w] == pytest.approx(want)


@pytest.mark.parametrize("board", board_names())
def test_conv_2d_compiles_for_every_board_within_its_limits(board):
    pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC not installed (extra nvrtc)")
    from governor.kernels import build_kernel

    built = build_kernel("conv-2d", board)
    assert built.report.shared_memory_bytes == built.plan.shared_memory_bytes
    assert built.occupancy.blocks_per_sm >= 1


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++")
def test_every_conv_2d_configuration_matches_numpy_on_the_emulation(emulation_cache):
    plans = {}
    for board in board_names():
        for precision in ("single", "double"):
            for plan in candidate_plans("conv-2d", board, precision):
                plans.setdefault(kernel_source(plan), plan)
    binary = build([(src, "conv_2d") for src in plans], emulation_cache)
    conv = KERNELS["conv-2d"]
    with CpuCupy(binary) as cp:
        for plan in plans.values():
            dtype = np.float64 if plan.precision == "double" else np.float32
            problem = conv.problem(np.random.default_rng(2), plan.tiles, dtype)
            results = []
            for schedule in (("forward", 0), ("reversed", 0), ("shuffled", 3)):
                cp.schedule = schedule
                arrays = [cp.asarray(a) for a in problem.arrays]
                results.append(cp.asnumpy(run_kernel(plan, *arrays, cupy=cp)))
            want = conv.expected(problem)
            error = np.abs(results[0] - want).max() / np.abs(want).max()
            assert error <= conv.tolerance_for(plan.precision), (plan.tiles, plan.precision)
            assert all(np.array_equal(r, results[0]) for r in results[1:]), plan.tiles
    assert len(plans) >= 4
