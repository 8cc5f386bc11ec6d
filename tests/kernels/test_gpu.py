"""The library kernels against NumPy on a real GPU, at several tile configurations.

Marked ``gpu`` (``pytest -m gpu`` selects them) and skipped, saying why, without CuPy or a
CUDA device.
"""

from __future__ import annotations

import numpy as np
import pytest

from governor.kernels import cupy_run, reference

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cupy():
    cp = pytest.importorskip("cupy", reason="CuPy not installed (extra cuda)")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except cp.cuda.runtime.CUDARuntimeError as err:
        pytest.skip(f"no CUDA device: {err}")
    return cp


_jacobi_ref = reference.jacobi_2d_ref
_heat_ref = reference.heat_3d_ref
_seidel_ref = reference.seidel_2d_ref


@pytest.mark.parametrize("precision", ["double", "single"])
@pytest.mark.parametrize(
    "tiles, threads",
    [
        ({"i": 16, "j": 336, "k": 48}, None),  # EATSS's choice on an A100 / Orin (double)
        ({"i": 32, "j": 32, "k": 32}, None),  # PPCG's default
        ({"i": 8, "j": 64, "k": 8}, 64),
        ({"i": 4, "j": 24, "k": 5}, 32),  # tiles that divide no size below
    ],
)
def test_gemm_matches_numpy(cupy, tiles, threads, precision):
    plan = cupy_run.device_plan("gemm", tiles, threads, precision)
    rng = np.random.default_rng(1)
    dtype = np.float64 if precision == "double" else np.float32
    m, n, k = 203, 517, 131
    a, b, c = (rng.standard_normal(s).astype(dtype) for s in ((m, k), (k, n), (m, n)))
    out = cupy_run.run_gemm(plan, cupy.asarray(a), cupy.asarray(b), cupy.asarray(c), 1.5, 0.5)
    tol = 1e-10 if precision == "double" else 1e-3
    np.testing.assert_allclose(cupy.asnumpy(out), 1.5 * a @ b + 0.5 * c, rtol=tol, atol=tol)


@pytest.mark.parametrize(
    "tiles, threads",
    [({"i": 16, "j": 256}, None), ({"i": 32, "j": 32}, None), ({"i": 3, "j": 40}, 64)],
)
def test_jacobi_2d_matches_numpy(cupy, tiles, threads):
    plan = cupy_run.device_plan("jacobi-2d", tiles, threads)
    a = np.random.default_rng(2).standard_normal((301, 301))
    out = cupy_run.run_jacobi_2d(plan, cupy.asarray(a), steps=5)
    np.testing.assert_allclose(cupy.asnumpy(out), _jacobi_ref(a, 5), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "tiles, threads",
    [
        ({"i": 8, "j": 8, "k": 32}, None),
        ({"i": 32, "j": 32, "k": 32}, None),
        ({"i": 3, "j": 5, "k": 7}, 32),
    ],
)
def test_heat_3d_matches_numpy(cupy, tiles, threads):
    plan = cupy_run.device_plan("heat-3d", tiles, threads)
    a = np.random.default_rng(3).standard_normal((61, 61, 61))
    out = cupy_run.run_heat_3d(plan, cupy.asarray(a), steps=4)
    np.testing.assert_allclose(cupy.asnumpy(out), _heat_ref(a, 4), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "tiles", [{"i": 16, "j": 256}, {"i": 32, "j": 32}, {"i": 4, "j": 3}, {"i": 1, "j": 1}]
)
def test_seidel_2d_wavefront_matches_the_sequential_sweep(cupy, tiles):
    plan = cupy_run.device_plan("seidel-2d", tiles)
    a = np.random.default_rng(4).standard_normal((45, 45))
    out = cupy_run.run_seidel_2d(plan, cupy.asarray(a), sweeps=2)
    np.testing.assert_allclose(cupy.asnumpy(out), _seidel_ref(a, 2), rtol=1e-12, atol=1e-12)
