"""The library kernels as the GPU check runs them (``scripts/gpu_check.py``, step
``kernels``): per kernel, PPCG's default tiles (32 in every loop, the EATSS paper's baseline),
the selector's choice for a catalog board of the GPU's compute capability, and a small tile;
each case runs one launch on a problem whose NumPy reference is cheap, and says how far its
last result is from that reference."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from governor.kernels import cupy_run, reference
from governor.kernels.mapping import plan_launch
from governor.kernels.select import PPCG_DEFAULT_TILE, board_arch, select_kernel_tiles
from governor.tuning.occupancy import arch_limits

__all__ = ["GpuCase", "board_for_capability", "gpu_check_cases"]

#: a small tile per kernel: the third configuration, far from both others
SMALL_TILES: Dict[str, Dict[str, int]] = {
    "gemm": {"i": 8, "j": 64, "k": 8},
    "jacobi-2d": {"i": 4, "j": 64},
    "heat-3d": {"i": 4, "j": 8, "k": 32},
    "seidel-2d": {"i": 8, "j": 8},
}
#: the relative error a double-precision result may carry (sums of a few hundred terms)
TOLERANCE = 1e-9


class GpuCase:
    """One kernel at one configuration: ``run()`` launches it once (it may return before
    the GPU is done), ``max_error()`` compares the last result with NumPy's, relative to
    the reference's largest magnitude."""

    def __init__(
        self,
        kernel: str,
        tiles: Dict[str, int],
        role: str,
        run: Callable[[], Any],
        expected: Callable[[], Any],
        cupy: Any,
    ) -> None:
        self.kernel = kernel
        self.tiles = dict(tiles)
        self.role = role
        self.tolerance = TOLERANCE
        self._run = run
        self._expected = expected
        self._cupy = cupy
        self._last: Any = None
        self._reference: Any = None

    def run(self) -> None:
        self._last = self._run()

    def max_error(self) -> float:
        import numpy as np

        if self._last is None:
            raise RuntimeError(f"{self.kernel}: max_error() before run()")
        if self._reference is None:
            self._reference = self._expected()
        got = self._cupy.asnumpy(self._last)
        scale = float(np.abs(self._reference).max()) or 1.0
        return float(np.abs(got - self._reference).max()) / scale


def board_for_capability(compute_capability: str) -> Optional[str]:
    """A catalog board of this compute capability (the first by name), else the one with the
    highest capability below it; None when every board's is above."""
    from governor.devices.sim.catalog import board_names

    want = arch_limits(compute_capability).cc
    known = []
    for name in board_names():
        try:
            known.append((board_arch(name).compute_capability, name))
        except Exception:  # a board without a known capability
            continue
    same = sorted(name for cc, name in known if cc == want)
    if same:
        return same[0]
    below = [(float(cc), name) for cc, name in known if float(cc) < float(want)]
    if not below:
        return None
    newest = max(cc for cc, _ in below)
    return min(name for cc, name in below if cc == newest)


def _case(cupy: Any, kernel: str, tiles: Dict[str, int], role: str, cc: str) -> GpuCase:
    import numpy as np

    plan = plan_launch(kernel, tiles, arch_limits(cc), None, 0.0, "double")
    rng = np.random.default_rng(0)
    if kernel == "gemm":
        a, b = rng.standard_normal((1024, 512)), rng.standard_normal((512, 1024))
        ga, gb, gc = cupy.asarray(a), cupy.asarray(b), cupy.zeros((1024, 1024))
        return GpuCase(
            kernel,
            plan.tiles,
            role,
            lambda: cupy_run.run_gemm(plan, ga, gb, gc, 1.0, 0.0),
            lambda: reference.gemm_ref(a, b, np.zeros((1024, 1024)), 1.0, 0.0),
            cupy,
        )
    if kernel == "jacobi-2d":
        a = rng.standard_normal((2048, 2048))
        g = cupy.asarray(a)
        return GpuCase(
            kernel,
            plan.tiles,
            role,
            lambda: cupy_run.run_jacobi_2d(plan, g, 1),
            lambda: reference.jacobi_2d_ref(a, 1),
            cupy,
        )
    if kernel == "heat-3d":
        a = rng.standard_normal((160, 160, 160))
        g = cupy.asarray(a)
        return GpuCase(
            kernel,
            plan.tiles,
            role,
            lambda: cupy_run.run_heat_3d(plan, g, 1),
            lambda: reference.heat_3d_ref(a, 1),
            cupy,
        )
    a = rng.standard_normal((192, 192))
    g = cupy.asarray(a)
    return GpuCase(
        kernel,
        plan.tiles,
        role,
        lambda: cupy_run.run_seidel_2d(plan, g.copy(), 1),  # in place: a fresh copy each run
        lambda: reference.seidel_2d_ref(a, 1),
        cupy,
    )


def gpu_check_cases(cupy: Any, cuda_index: int, compute_capability: str) -> List[GpuCase]:
    """The cases of every library kernel for the GPU at ``cuda_index`` (see the module
    docstring); made on the current CUDA device, which the caller selects."""
    from governor.kernels.templates import KERNELS

    board = board_for_capability(compute_capability)
    cases: List[GpuCase] = []
    for kernel in KERNELS:
        loops = list(SMALL_TILES.get(kernel) or {})
        default = {loop: PPCG_DEFAULT_TILE for loop in loops}
        configs = [(default, "default"), (SMALL_TILES[kernel], "other")]
        if board is not None:
            chosen = select_kernel_tiles(kernel, board).tiles
            configs.insert(1, (chosen, "chosen"))
        for tiles, role in configs:
            cases.append(_case(cupy, kernel, tiles, role, compute_capability))
    return cases
