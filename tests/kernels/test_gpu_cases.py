"""The GPU check's cases of the kernel library (governor.kernels.gpu_cases), without a GPU:
which configurations are run, and that max_error tells a right result from a wrong one. The
launches run the real kernels on the CPU emulation (tests/fakes/cuda_cpu)."""

from __future__ import annotations

import shutil

import pytest
from fakes.cuda_cpu import CpuCupy, build

from governor.kernels import KERNELS, cupy_run, gpu_cases, kernel_source, select_kernel_tiles
from governor.kernels.mapping import plan_launch
from governor.tuning.occupancy import arch_limits

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="no g++")

#: jacobi-2d with a wrong weight: what a broken kernel computes
_WRONG = ("(real_t)0.2 *", "(real_t)0.21 *")


def _sources(cc: str):
    out = []
    for kernel, description in KERNELS.items():
        board = gpu_cases.board_for_capability(cc)
        tiles = [{loop: 32 for loop in description.loops}, description.small_tiles]
        tiles.append(select_kernel_tiles(kernel, board).tiles)
        for tile in tiles:
            source = kernel_source(plan_launch(kernel, tile, arch_limits(cc), None, 0.0))
            out.append((source, description.entry))
            if kernel == "jacobi-2d":
                out.append((source.replace(*_WRONG), description.entry))
    return out


@pytest.fixture(scope="module")
def emulator(emulation_cache):
    sources = _sources("8.0") + _sources("9.0")
    return build(sources, emulation_cache)


def test_each_kernel_runs_the_default_the_boards_choice_and_a_small_tile(emulator):
    with CpuCupy(emulator, "80") as cp:
        cases = gpu_cases.gpu_check_cases(cp, 0, "8.0")
    board = gpu_cases.board_for_capability("8.0")
    assert board is not None and board.startswith("a100")
    assert sorted({c.kernel for c in cases}) == sorted(KERNELS)
    for kernel in KERNELS:
        roles = {c.role: c for c in cases if c.kernel == kernel}
        assert set(roles) == {"default", "chosen", "other"}
        assert set(roles["default"].tiles.values()) == {32}
        assert roles["chosen"].tiles == select_kernel_tiles(kernel, board).tiles
        assert roles["other"].tiles == KERNELS[kernel].small_tiles


def test_max_error_passes_the_real_kernels_and_fails_a_broken_one(emulator, monkeypatch):
    real_source = cupy_run.kernel_source

    def source(plan):
        text = real_source(plan)
        return text.replace(*_WRONG) if plan.kernel == "jacobi-2d" else text

    with CpuCupy(emulator, "90") as cp:
        for case in gpu_cases.gpu_check_cases(cp, 0, "9.0"):
            if case.role != "other":
                continue  # one case per kernel keeps the emulation short
            case.run()
            assert case.max_error() <= case.tolerance, case.kernel
        monkeypatch.setattr(cupy_run, "kernel_source", source)
        broken = [c for c in gpu_cases.gpu_check_cases(cp, 0, "9.0") if c.kernel == "jacobi-2d"]
        broken[0].run()
        assert broken[0].max_error() > 100 * broken[0].tolerance


def test_max_error_before_a_run_is_an_error(emulator):
    with CpuCupy(emulator, "80") as cp:
        case = gpu_cases.gpu_check_cases(cp, 0, "8.0")[0]
        with pytest.raises(RuntimeError, match="before run"):
            case.max_error()


def test_a_capability_newer_than_the_catalog_borrows_the_newest_board_below_it():
    assert gpu_cases.board_for_capability("10.0") == gpu_cases.board_for_capability("9.0")
    assert gpu_cases.board_for_capability("5.0") is None
