"""The library kernels as the GPU check runs them (``scripts/gpu_check.py``, step
``kernels``): per kernel, PPCG's default tiles (32 in every loop, the EATSS paper's baseline),
the selector's choice for a catalog board of the GPU's compute capability, and a small tile
(each description's ``small_tiles``); each case runs its description's ``check_problem`` (a
problem whose NumPy reference is cheap) and says how far its last result is from that
reference. Every case is launched the way an app launches a per-clock answer:
``build_launch(KernelConfig)``."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from governor.kernels.description import descriptions
from governor.kernels.launch import build_launch
from governor.kernels.mapping import plan_launch
from governor.kernels.operating_points import KernelConfig
from governor.kernels.select import PPCG_DEFAULT_TILE, board_arch, select_kernel_tiles
from governor.tuning.occupancy import arch_limits

__all__ = ["GpuCase", "board_for_capability", "gpu_check_cases"]

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


def _case(
    cupy: Any, kernel: str, tiles: Dict[str, int], role: str, cc: str, shared_fraction: float
) -> GpuCase:
    import numpy as np

    plan = plan_launch(kernel, tiles, arch_limits(cc), None, shared_fraction, "double")
    launch = build_launch(KernelConfig.from_plan(plan), cupy=cupy)  # the apps' launch path
    problem = launch.description.check_problem(np.random.default_rng(0), np.float64)
    on_device = [cupy.asarray(a) for a in problem.arrays]

    def run() -> Any:
        arrays = [a.copy() if k in problem.in_place else a for k, a in enumerate(on_device)]
        return launch(*arrays, **problem.params)

    expected = launch.description.expected
    return GpuCase(kernel, plan.tiles, role, run, lambda: expected(problem), cupy)


def gpu_check_cases(cupy: Any, cuda_index: int, compute_capability: str) -> List[GpuCase]:
    """The cases of every library kernel for the GPU at ``cuda_index`` (see the module
    docstring); made on the current CUDA device, which the caller selects."""
    board = board_for_capability(compute_capability)
    cases: List[GpuCase] = []
    for kernel, description in descriptions().items():
        default = {loop: PPCG_DEFAULT_TILE for loop in description.loops}
        configs = [(default, "default", 0.0), (dict(description.small_tiles), "other", 0.0)]
        if board is not None:
            chosen = select_kernel_tiles(kernel, board)
            configs.insert(1, (chosen.tiles, "chosen", chosen.shared_fraction))
        for tiles, role, fraction in configs:
            cases.append(_case(cupy, kernel, tiles, role, compute_capability, fraction))
    return cases
