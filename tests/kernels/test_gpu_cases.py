"""The GPU check's cases of the kernel library (governor.kernels.gpu_cases), without a GPU:
which configurations are run, and that max_error tells a right result from a wrong one.
The launches are stood in for by NumPy (the kernels themselves are checked on a GPU by
test_gpu.py and by the GPU check)."""

from __future__ import annotations

import types

import numpy as np
import pytest

from governor.kernels import cupy_run, gpu_cases, reference, select_kernel_tiles
from governor.kernels.templates import KERNELS


@pytest.fixture
def numpy_cupy(monkeypatch):
    """A CuPy whose arrays are NumPy's and whose kernel launches compute the reference,
    off by ``wrong[kernel]`` where a test asks for a wrong result."""
    wrong = {}
    cp = types.SimpleNamespace(asarray=np.asarray, zeros=np.zeros, asnumpy=np.asarray)

    def off(kernel, out):
        return out + wrong.get(kernel, 0.0)

    def gemm(plan, a, b, c, alpha, beta):
        c[...] = off("gemm", reference.gemm_ref(a, b, c, alpha, beta))
        return c

    monkeypatch.setattr(cupy_run, "run_gemm", gemm)
    monkeypatch.setattr(
        cupy_run, "run_jacobi_2d", lambda p, a, s: off("jacobi-2d", reference.jacobi_2d_ref(a, s))
    )
    monkeypatch.setattr(
        cupy_run, "run_heat_3d", lambda p, a, s: off("heat-3d", reference.heat_3d_ref(a, s))
    )
    monkeypatch.setattr(
        cupy_run, "run_seidel_2d", lambda p, a, s: off("seidel-2d", reference.seidel_2d_ref(a, s))
    )
    return cp, wrong


def test_each_kernel_runs_the_default_the_boards_choice_and_a_small_tile(numpy_cupy):
    cp, _ = numpy_cupy
    cases = gpu_cases.gpu_check_cases(cp, 0, "8.0")
    board = gpu_cases.board_for_capability("8.0")
    assert board is not None and board.startswith("a100")
    assert sorted({c.kernel for c in cases}) == sorted(KERNELS)
    for kernel in KERNELS:
        roles = {c.role: c for c in cases if c.kernel == kernel}
        assert set(roles) == {"default", "chosen", "other"}
        assert set(roles["default"].tiles.values()) == {32}
        assert roles["chosen"].tiles == select_kernel_tiles(kernel, board).tiles


def test_max_error_passes_the_reference_and_fails_a_result_that_is_off(numpy_cupy):
    cp, wrong = numpy_cupy
    wrong["jacobi-2d"] = 1e-3
    for case in gpu_cases.gpu_check_cases(cp, 0, "9.0"):
        if case.kernel == "seidel-2d" and case.role != "default":
            continue  # the Python reference is slow: one seidel case is enough here
        case.run()
        error = case.max_error()
        if case.kernel == "jacobi-2d":
            assert error > case.tolerance
        else:
            assert error <= case.tolerance


def test_max_error_before_a_run_is_an_error(numpy_cupy):
    cp, _ = numpy_cupy
    case = gpu_cases.gpu_check_cases(cp, 0, "8.7")[0]
    with pytest.raises(RuntimeError, match="before run"):
        case.max_error()


def test_a_capability_newer_than_the_catalog_borrows_the_newest_board_below_it():
    assert gpu_cases.board_for_capability("10.0") == gpu_cases.board_for_capability("9.0")
    assert gpu_cases.board_for_capability("5.0") is None
