"""A kernel configuration turned back into a launch.

:func:`build_launch` takes a :class:`~governor.kernels.operating_points.KernelConfig` (what
``Governor.kernel_config`` answers for the clock it holds, or a table's entry) and returns a
:class:`KernelLaunch`: the kernel compiled by CuPy at the configuration's tiles, thread
block and precision, with its shared-memory carveout set, called with the kernel's arrays as
its description's ``run`` takes them::

    config, why = gov.kernel_config("jacobi-2d")
    launch = build_launch(config)                  # compiles once (CuPy caches by source)
    out = launch(a_gpu, steps=10)                   # CuPy arrays in and out
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from governor.errors import InvalidRequestError
from governor.kernels.build import kernel_source
from governor.kernels.cupy_run import compile_plan, import_cupy
from governor.kernels.description import KernelDescription
from governor.kernels.mapping import LaunchPlan, find_template
from governor.kernels.operating_points import KernelConfig

__all__ = ["KernelLaunch", "build_launch"]


@dataclass(frozen=True)
class KernelLaunch:
    """A compiled configuration, ready to run: call it with the kernel's device arrays and
    parameters (``launch(a, b, c, alpha=1.0, beta=0.0)`` for gemm, ``launch(a, steps=10)``
    for jacobi-2d and heat-3d, ``launch(a, sweeps=1)`` for seidel-2d)."""

    config: KernelConfig
    plan: LaunchPlan
    description: KernelDescription
    function: Any  # the CuPy RawKernel
    cupy: Any

    @property
    def source(self) -> str:
        """The CUDA C the function was compiled from."""
        return kernel_source(self.plan)

    def __call__(self, *arrays: Any, **params: Any) -> Any:
        return self.description.run(self.cupy, self.function, self.plan, *arrays, **params)


def build_launch(
    config: KernelConfig, kernel: Optional[str] = None, cupy: Any = None
) -> KernelLaunch:
    """The launch of ``config`` (its kernel, or ``kernel`` for an entry that names none),
    compiled with CuPy (``cupy=`` a stand-in in tests).

    Raises:
        InvalidRequestError: no kernel named, another kernel named, tiles the kernel does
            not take.
        UnsupportedError: CuPy is not installed.
    """
    if kernel is not None and config.kernel and config.kernel != kernel:
        raise InvalidRequestError(f"the configuration is of {config.kernel}, not {kernel}")
    if kernel is not None and not config.kernel:
        find_template(kernel)
        from dataclasses import replace

        config = replace(config, kernel=kernel)
    plan = config.plan()
    cp = cupy if cupy is not None else import_cupy()
    return KernelLaunch(
        config=config,
        plan=plan,
        description=find_template(plan.kernel),
        function=compile_plan(plan, cp),
        cupy=cp,
    )
